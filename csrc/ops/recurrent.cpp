// One direction of one recurrent layer (RNN tanh/relu, LSTM, GRU) over all its time steps as one
// node, RnnLayerBackward0 (nn.RNN/LSTM/GRU and the cells, python/fastgrad/nn/rnn.py, call it with
// the input projection of every step already made by one F.linear).
//
// Forward, per step: one product h W_hh^T (+ b_hh) (the addmm/mm ops, run without autograd), then
// one pass over the step's rows computing the gates with the elementwise ops' own vector kernels
// (kernels().unary/binary), operation for operation as the composition in rnn.py (ATen's CPU cell
// formulas), so the states are the composition's bits. The pass keeps what the backward reads:
// the activated gates, LSTM's tanh(c), GRU's hidden n-part (h W_hn + b_hn).
// Backward through time, per step (last first): one pass for the gates' gradients from the saved
// activations, and one product for the gradient of the previous state (dgates @ W_hh); then the
// weight and bias gradients over all steps at once (dW_hh = dgates^T @ H_prev, one product). The
// gradient of the projected input is the gates' gradient itself.
//
// Every loop runs on one thread in an order fixed by the shape; the products split their output
// among threads without changing a bit (matmul.cpp), so results do not depend on the thread count.
// In a backward with create_graph the saved activations (which have no graph) are of no use: the
// node then recomputes the states as the composition of tensor ops from its saved inputs and
// differentiates that (a nested autograd.grad with create_graph), so gradients of any order follow.
#include <cstring>

#include "autograd/node.h"
#include "kernels/kernel_table.h"
#include "ops/ops.h"

namespace fg {

namespace {

int64_t gate_count(RecurrentMode mode) { return mode == RecurrentMode::Lstm ? 4 : mode == RecurrentMode::Gru ? 3 : 1; }

// What the forward keeps per step and row, in units of the hidden size: LSTM i, f, g, o activated
// and tanh(c); GRU r, z, n and h W_hn + b_hn; RNN nothing (its output is enough).
int64_t saved_width(RecurrentMode mode) { return mode == RecurrentMode::Lstm ? 5 : mode == RecurrentMode::Gru ? 4 : 0; }

// h W^T (+ b) as F.linear computes it (addmm with the bias in the epilogue, or mm), without autograd.
Tensor hidden_product(const Tensor& h, const Tensor& w_hh, const Tensor& b_hh) {
  return b_hh ? addmm(b_hh, h, t(w_hh), Scalar::from_int(1), Scalar::from_int(1)) : mm(h, t(w_hh));
}

// The rows of step `t` of a (T, B, W) contiguous buffer.
template <class T>
T* step_rows(const Tensor& x, int64_t t) {
  return x->data_as<T>() + t * x->shape[1] * x->shape[2];
}

template <class T>
struct Kernels {
  BinaryKernel<T> add, sub, mul;
  UnaryKernel<T> sigmoid, tanh, relu;
  Kernels() {
    const TypedKernels<T>& k = kernels().of<T>();
    add = k.binary[int(VecBinary::Add)], sub = k.binary[int(VecBinary::Sub)], mul = k.binary[int(VecBinary::Mul)];
    sigmoid = k.unary[int(VecUnary::Sigmoid)], tanh = k.unary[int(VecUnary::Tanh)];
    relu = k.unary[int(VecUnary::Relu)];
  }
};

// One step's gates for `rows` rows: `hh` = h W_hh^T + b_hh (rows of G * H, overwritten), `x` the
// projected input (rows of G * H), `h`, `c` the previous state (rows of H), into `h_out`, `c_out`
// and `keep` (rows of saved_width * H). The composition's ops in its order (rnn.py's _lstm_step etc.).
template <class T>
void gates_forward(RecurrentMode mode, const Kernels<T>& k, int64_t rows, int64_t hidden, T* hh, const T* x, const T* h,
                   const T* c, T* h_out, T* c_out, T* keep) {
  const int64_t H = hidden, G = gate_count(mode) * H, W = saved_width(mode) * H;
  std::vector<T> scratch(2 * H);
  T* tmp = scratch.data();
  for (int64_t b = 0; b < rows; ++b) {
    T* gates = hh + b * G;
    const T* in = x + b * G;
    T* ho = h_out + b * H;
    switch (mode) {
      case RecurrentMode::RnnTanh:
      case RecurrentMode::RnnRelu:
        k.add(gates, false, in, false, gates, H);
        (mode == RecurrentMode::RnnTanh ? k.tanh : k.relu)(gates, ho, H);
        break;
      case RecurrentMode::Lstm: {
        T* saved = keep + b * W;  // i, f, g, o, tanh(c')
        T *i = saved, *f = saved + H, *g = saved + 2 * H, *o = saved + 3 * H, *tc = saved + 4 * H;
        T* co = c_out + b * H;
        k.add(gates, false, in, false, gates, G);
        k.sigmoid(gates, i, H);
        k.sigmoid(gates + H, f, H);
        k.tanh(gates + 2 * H, g, H);
        k.sigmoid(gates + 3 * H, o, H);
        k.mul(f, false, c + b * H, false, co, H);  // c' = f * c + i * g
        k.mul(i, false, g, false, tmp, H);
        k.add(co, false, tmp, false, co, H);
        k.tanh(co, tc, H);  // h' = o * tanh(c')
        k.mul(o, false, tc, false, ho, H);
        break;
      }
      case RecurrentMode::Gru: {
        T* saved = keep + b * W;  // r, z, n, h W_hn + b_hn
        T *r = saved, *z = saved + H, *n = saved + 2 * H, *hn = saved + 3 * H;
        k.add(gates, false, in, false, r, H);
        k.sigmoid(r, r, H);
        k.add(gates + H, false, in + H, false, z, H);
        k.sigmoid(z, z, H);
        std::memcpy(hn, gates + 2 * H, sizeof(T) * H);
        k.mul(hn, false, r, false, tmp, H);  // n = tanh(x_n + hn * r)
        k.add(in + 2 * H, false, tmp, false, n, H);
        k.tanh(n, n, H);
        k.sub(h + b * H, false, n, false, tmp, H);  // h' = (h - n) * z + n
        k.mul(tmp, false, z, false, tmp, H);
        k.add(tmp, false, n, false, ho, H);
        break;
      }
    }
  }
}

// One step's backward for `rows` rows: `dh` (rows of H, the gradient of h', overwritten with the part
// that reaches h directly, GRU's dh' * z, zero otherwise), `dc` (LSTM: the gradient of c', in place
// the gradient of c), the saved `keep`, the step's output `h_out`, the previous `h`, `c`. Writes the
// gradient of the projected input `dx` and of h W_hh^T + b_hh `dhh` (rows of G * H; they differ only
// in GRU's n-part).
template <class T>
void gates_backward(RecurrentMode mode, int64_t rows, int64_t H, T* dh, T* dc, const T* keep, const T* h_out,
                    const T* h, const T* c, T* dx, T* dhh) {
  const int64_t G = gate_count(mode) * H, W = saved_width(mode) * H;
  for (int64_t b = 0; b < rows; ++b) {
    T* gh = dh + b * H;
    T* gx = dx + b * G;
    T* ghh = dhh + b * G;
    switch (mode) {
      case RecurrentMode::RnnTanh:
      case RecurrentMode::RnnRelu: {
        const T* y = h_out + b * H;
        for (int64_t j = 0; j < H; ++j) {
          const T d = mode == RecurrentMode::RnnTanh ? gh[j] * (T(1) - y[j] * y[j]) : (y[j] > T(0) ? gh[j] : T(0));
          gx[j] = ghh[j] = d, gh[j] = T(0);
        }
        break;
      }
      case RecurrentMode::Lstm: {
        const T* saved = keep + b * W;
        const T *i = saved, *f = saved + H, *g = saved + 2 * H, *o = saved + 3 * H, *tc = saved + 4 * H;
        const T* cp = c + b * H;
        T* gc = dc + b * H;
        for (int64_t j = 0; j < H; ++j) {
          const T dcell = gc[j] + gh[j] * o[j] * (T(1) - tc[j] * tc[j]);
          gx[j] = dcell * g[j] * i[j] * (T(1) - i[j]);
          gx[H + j] = dcell * cp[j] * f[j] * (T(1) - f[j]);
          gx[2 * H + j] = dcell * i[j] * (T(1) - g[j] * g[j]);
          gx[3 * H + j] = gh[j] * tc[j] * o[j] * (T(1) - o[j]);
          gc[j] = dcell * f[j], gh[j] = T(0);
        }
        std::memcpy(ghh, gx, sizeof(T) * G);
        break;
      }
      case RecurrentMode::Gru: {
        const T* saved = keep + b * W;
        const T *r = saved, *z = saved + H, *n = saved + 2 * H, *hn = saved + 3 * H;
        const T* hp = h + b * H;
        for (int64_t j = 0; j < H; ++j) {
          const T dnew = gh[j] * (T(1) - z[j]) * (T(1) - n[j] * n[j]);  // through tanh's input
          const T dreset = dnew * hn[j];
          gx[j] = ghh[j] = dreset * r[j] * (T(1) - r[j]);
          gx[H + j] = ghh[H + j] = gh[j] * (hp[j] - n[j]) * z[j] * (T(1) - z[j]);
          gx[2 * H + j] = dnew, ghh[2 * H + j] = dnew * r[j];
          gh[j] = gh[j] * z[j];
        }
        break;
      }
    }
  }
}

// Step t's position in processing order, and the step processed before it (-1: the initial state).
int64_t previous_step(int64_t t, int64_t steps, bool reverse) { return reverse ? (t + 1 < steps ? t + 1 : -1) : t - 1; }

// The states as rnn.py composes them (ATen's CPU cell formulas), recorded: the backward with
// create_graph differentiates this.
Tensor composed_states(RecurrentMode mode, const Tensor& projected, const Tensor& h0, const Tensor& c0,
                       const Tensor& w_hh, const Tensor& b_hh, bool reverse) {
  const int64_t steps = projected->shape[0], H = h0->shape[1];
  auto gate = [H](const Tensor& x, int64_t k) { return slice(x, 1, k * H, (k + 1) * H, 1); };
  std::vector<Tensor> hs(steps), cs(steps);
  Tensor h = h0, c = c0;
  for (int64_t n = 0; n < steps; ++n) {
    const int64_t t = reverse ? steps - 1 - n : n;
    const Tensor x = select(projected, 0, t), w_t = fg::t(w_hh);
    const Tensor hh = b_hh ? addmm(b_hh, h, w_t, Scalar::from_int(1), Scalar::from_int(1)) : mm(h, w_t);
    switch (mode) {
      case RecurrentMode::RnnTanh: h = tanh(add(hh, x)); break;
      case RecurrentMode::RnnRelu: h = relu(add(hh, x)); break;
      case RecurrentMode::Lstm: {
        const Tensor gates = add(hh, x);
        c = add(mul(sigmoid(gate(gates, 1)), c), mul(sigmoid(gate(gates, 0)), tanh(gate(gates, 2))));
        h = mul(sigmoid(gate(gates, 3)), tanh(c));
        break;
      }
      case RecurrentMode::Gru: {
        const Tensor reset = sigmoid(add(gate(hh, 0), gate(x, 0)));
        const Tensor update = sigmoid(add(gate(hh, 1), gate(x, 1)));
        const Tensor candidate = tanh(add(gate(x, 2), mul(gate(hh, 2), reset)));
        h = add(mul(sub(h, candidate), update), candidate);
        break;
      }
    }
    hs[t] = h, cs[t] = c;
  }
  std::vector<Tensor> planes{stack(hs, 0)};
  if (mode == RecurrentMode::Lstm) planes.push_back(stack(cs, 0));
  return stack(planes, 0);
}

}  // namespace

RecurrentMode recurrent_mode_from_name(const std::string& name) {
  if (name == "RNN_TANH") return RecurrentMode::RnnTanh;
  if (name == "RNN_RELU") return RecurrentMode::RnnRelu;
  if (name == "LSTM") return RecurrentMode::Lstm;
  if (name == "GRU") return RecurrentMode::Gru;
  throw ValueError(cat("Unrecognized RNN mode: ", name));
}

// Inputs: projected, h0, c0 (LSTM; else an empty edge), w_hh, b_hh. Saves them (projected and
// b_hh for the backward with create_graph), the states (the output) and the per-step activations.
struct RnnLayerBackward0 final : Node {
  FG_NODE_MEMBERS(RnnLayerBackward0)
  RecurrentMode mode;
  bool reverse;
};

GradList RnnLayerBackward0::apply(GradList&& grads) {
  // create_graph: differentiate the composition, recomputed from the inputs; its graph is kept (the
  // gradients' own graph runs through it in the next backward).
  if (grad_enabled()) {
    const Tensor composed = composed_states(mode, unpack(0), unpack(1), saved[2].defined() ? unpack(2) : Tensor(),
                                            unpack(3), saved[4].defined() ? unpack(4) : Tensor(), reverse);
    std::vector<Edge> inputs;
    for (const Edge& e : next_edges) inputs.push_back(e);
    const std::vector<Tensor> gradients =
        run_backward({composed}, {grads[0]}, /*retain_graph=*/true, &inputs, /*create_graph=*/true);
    GradList result(gradients.size());
    for (size_t k = 0; k < gradients.size(); ++k) result[k] = gradients[k];
    return result;
  }
  // h0 and c0 read row by row (the caller's may be strided views)
  const Tensor h0 = dense(unpack(1)), c0 = saved[2].defined() ? dense(unpack(2)) : Tensor(), w_hh = unpack(3);
  const Tensor states = unpack(5), keep = unpack(6);
  const bool lstm = mode == RecurrentMode::Lstm;
  const int64_t steps = states->shape[1], rows = states->shape[2], H = states->shape[3];
  const int64_t G = gate_count(mode) * H;
  const DType dtype = states->dtype;
  const Tensor dstates = dense(grads[0]);
  Tensor dx = empty({steps, rows, G}, dtype), dhh = empty({steps, rows, G}, dtype);
  Tensor dh = empty({rows, H}, dtype), dc = lstm ? empty({rows, H}, dtype) : Tensor();
  Tensor h_prev = empty({steps, rows, H}, dtype);  // each step's incoming h, for dW_hh
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t plane = steps * rows * H, step_size = rows * H;
    const T *out = states->data_as<T>(), *gout = dstates->data_as<T>();
    T *gh = dh->data_as<T>(), *gc = lstm ? dc->data_as<T>() : nullptr;
    std::memset(gh, 0, sizeof(T) * step_size);
    if (lstm) std::memset(gc, 0, sizeof(T) * step_size);
    for (int64_t n = 0; n < steps; ++n) {
      const int64_t t = reverse ? n : steps - 1 - n;  // the last step processed comes first
      const int64_t p = previous_step(t, steps, reverse);
      const T* hp = p < 0 ? h0->data_as<T>() : out + p * step_size;
      const T* cp = lstm ? (p < 0 ? c0->data_as<T>() : out + plane + p * step_size) : nullptr;
      std::memcpy(step_rows<T>(h_prev, t), hp, sizeof(T) * step_size);
      for (int64_t j = 0; j < step_size; ++j) gh[j] += gout[t * step_size + j];
      if (lstm)
        for (int64_t j = 0; j < step_size; ++j) gc[j] += gout[plane + t * step_size + j];
      gates_backward<T>(mode, rows, H, gh, gc, keep->shape[2] ? step_rows<T>(keep, t) : nullptr, out + t * step_size,
                        hp, cp, step_rows<T>(dx, t), step_rows<T>(dhh, t));
      // dh += dgates @ W_hh (the product, then the add kernel: the direct part is kept apart)
      Tensor through = mm(select(dhh, 0, t), w_hh);
      kernels().of<T>().binary[int(VecBinary::Add)](gh, false, through->data_as<T>(), false, gh, step_size);
    }
  });
  GradList result(5);
  result[0] = dx;
  result[1] = dh;
  result[2] = dc;
  const Tensor dgates = reshape(dhh, {steps * rows, G});
  if (needs_input_grad(3)) result[3] = mm(t(dgates), reshape(h_prev, {steps * rows, H}));
  if (needs_input_grad(4)) result[4] = sum(dgates, {0}, false);
  return result;
}

Tensor recurrent_layer(RecurrentMode mode, const Tensor& projected, const Tensor& h0, const Tensor& c0,
                       const Tensor& w_hh, const Tensor& b_hh, bool reverse) {
  const bool lstm = mode == RecurrentMode::Lstm;
  const DType dtype = projected->dtype;
  if (dtype != DType::Float32 && dtype != DType::Float64) throw not_implemented_for("recurrent_layer", dtype);
  if (projected->dim() != 3 || h0->dim() != 2 || w_hh->dim() != 2)
    throw RuntimeError("recurrent_layer: expected projected (T, B, G * H), h0 (B, H) and w_hh (G * H, H)");
  const int64_t steps = projected->shape[0], rows = projected->shape[1], H = h0->shape[1];
  const int64_t G = gate_count(mode) * H;
  const bool shapes_match = projected->shape[2] == G && h0->shape[0] == rows && w_hh->shape[0] == G &&
                            w_hh->shape[1] == H && (!b_hh || (b_hh->dim() == 1 && b_hh->shape[0] == G)) &&
                            (lstm ? c0 && c0->shape == h0->shape : !c0);
  if (!shapes_match)
    throw RuntimeError("recurrent_layer: the shapes of projected, h0, c0, w_hh and b_hh do not match the mode");
  for (const Tensor* t : {&h0, &c0, &w_hh, &b_hh})
    if (*t && (*t)->dtype != dtype) throw RuntimeError("recurrent_layer: every tensor must have projected's dtype");
  // states: (1 or 2 for LSTM's c, T, B, H); keep: (T, B, saved_width * H)
  Tensor states = empty({lstm ? 2 : 1, steps, rows, H}, dtype);
  Tensor keep = empty({steps, rows, saved_width(mode) * H}, dtype);
  {
    GradModeGuard no_grad(false);
    const Tensor x = dense(projected), h_start = dense(h0), c_start = lstm ? dense(c0) : Tensor();
    const Tensor w = dense(w_hh), b = b_hh ? dense(b_hh) : Tensor();
    dispatch_floating(dtype, [&](auto tag) {
      using T = decltype(tag);
      const Kernels<T> k;
      const int64_t plane = steps * rows * H, step_size = rows * H;
      T* out = states->data_as<T>();
      for (int64_t n = 0; n < steps; ++n) {
        const int64_t t = reverse ? steps - 1 - n : n, p = previous_step(t, steps, reverse);
        const Tensor h = p < 0 ? h_start : select(select(states, 0, 0), 0, p);
        const T* cp = lstm ? (p < 0 ? c_start->data_as<T>() : out + plane + p * step_size) : nullptr;
        Tensor hh = hidden_product(h, w, b);
        gates_forward<T>(mode, k, rows, H, hh->data_as<T>(), step_rows<T>(x, t), h->data_as<T>(), cp,
                         out + t * step_size, lstm ? out + plane + t * step_size : nullptr,
                         keep->shape[2] ? step_rows<T>(keep, t) : nullptr);
      }
    });
  }
  if (auto* node = record<RnnLayerBackward0>(states, {&projected, &h0, &c0, &w_hh, &b_hh})) {
    node->save(projected);
    node->save(h0);
    node->save(c0);
    node->save(w_hh);
    node->save(b_hh);
    // A copy: the states are the caller's to write in place (PyTorch's composed layers allow it).
    Tensor saved_states = empty(states->shape, dtype);
    copy_values(saved_states, states);
    node->save(saved_states);
    node->save(keep);
    node->mode = mode, node->reverse = reverse;
  }
  return states;
}

}  // namespace fg
