// One direction of one recurrent layer (RNN tanh/relu, LSTM, GRU) over all its time steps as one
// node, RnnLayerBackward0 (nn.RNN/LSTM/GRU and the cells, python/fastgrad/nn/rnn.py, call it with
// the input projection of every step already made by one F.linear).
//
// Forward, per step: one product h W_hh^T, then one pass over the step's rows (the ISA's
// recurrent_forward kernel, kernels/recurrent_impl.h) adding b_hh and the projected input and
// computing the gates and states with the elementwise kernels' functions, operation for operation
// as the composition in rnn.py (F.linear's addmm, then ATen's CPU cell formulas), so the states are
// the composition's bits. The pass keeps what the backward reads: the activated gates, LSTM's
// tanh(c), GRU's hidden n-part (h W_hn + b_hn).
// Backward through time, per step (last first): one pass for the gates' gradients from the saved
// activations (recurrent_backward), and one product for the gradient of the previous state
// (dgates @ W_hh); then the weight and bias gradients over all steps at once (dW_hh = dgates^T @
// H_prev, one product). The gradient of the projected input is the gates' gradient itself.
// W_hh (as W_hh^T forward) is packed into the GEMM's panels once per call, not once per step: at
// a batch of 16 the packing cost as much as the product (StepProduct).
//
// Threads: the rows of a batch never meet in a layer (each row's states depend on its own inputs
// only), so a layer of enough work splits its rows into blocks, one per thread, and each block runs
// every step, forward and backward: one hand-out to the pool per layer. Split per step instead (the
// product's column panels among threads, then the gate pass on one), a batch-16 LSTM paid a
// hand-out and a wait for the slowest thread 64 times a training step, and the gate passes stayed
// on one thread. A layer that is not split (a batch below two blocks, or little work) still splits
// each step's product by whole column panels when it is large. Neither changes a bit: with W_hh
// packed, every block of rows runs the GEMM's micro-tiles, each row the chains of the whole
// product (gemm_impl.h), and the gate passes are per row; so results do not depend on the thread
// count.
// In a backward with create_graph the saved activations (which have no graph) are of no use: the
// node then recomputes the states as the composition of tensor ops from its saved inputs and
// differentiates that (a nested autograd.grad with create_graph), so gradients of any order follow.
#include <algorithm>
#include <cstring>

#include "autograd/node.h"
#include "kernels/kernel_table.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

namespace {

// The rows of step `t` of a (T, B, W) contiguous buffer.
template <class T>
T* step_rows(const Tensor& x, int64_t t) {
  return x->data_as<T>() + t * x->shape[1] * x->shape[2];
}

// Products below this many multiply-adds run on one thread (matmul.cpp's threshold); a layer of
// less work (all steps) keeps its rows together.
constexpr double kParallelStepWork = 1 << 20;
// The fewest rows a thread's block of a split layer gets.
constexpr int64_t kBlockRows = 2;

// C (rows x n, contiguous) = A (rows x k, contiguous) @ B for every step of a layer, one B for all:
// B packed once into the GEMM's panels (gemm_pack_b), shared by every block of rows; a product on
// the calling thread split among threads by whole panels when it is large (inside a block of a
// split layer the pool is busy and it runs inline). Every element the same chain whatever the
// split, by rows or by panels. A batch of one row, or a C of one column, keeps the plain GEMM: its
// matrix-vector path, which the composition's mm takes there (other bits than the tiles') and
// which reads B in place (nothing to pack); such a layer is never split by rows.
template <class T>
class StepProduct {
 public:
  StepProduct(int64_t rows, int64_t n, int64_t k, const T* b, int64_t rsb, int64_t csb, DType dtype)
      : n_(n), k_(k), b_(b), rsb_(rsb), csb_(csb), nr_(kernels().of<T>().gemm_blocks.nr) {
    if (rows < 2 || n_ < 2) return;
    panels_ = empty({(n_ + nr_ - 1) / nr_ * nr_ * k_}, dtype);
    kernels().of<T>().gemm_pack_b(k_, n_, b_, rsb_, csb_, panels_->data_as<T>());
  }

  bool packed() const { return bool(panels_); }

  // `rows` rows of C from as many of A (a block of the batch, or all of it).
  void operator()(int64_t rows, const T* a, T* c) const {
    const TypedKernels<T>& kernel = kernels().of<T>();
    if (!panels_) return kernel.gemm(rows, n_, k_, a, k_, 1, b_, rsb_, csb_, c, n_);
    const T* panels = panels_->data_as<T>();
    const int64_t count = (n_ + nr_ - 1) / nr_;
    const bool parallel = double(rows) * double(n_) * double(k_) >= kParallelStepWork;
    parallel_for(0, count, parallel ? 1 : count, [&](int64_t lo, int64_t hi) {
      const int64_t c0 = lo * nr_, c1 = std::min(n_, hi * nr_);
      kernel.gemm_packed_b(rows, c1 - c0, k_, a, k_, 1, panels + c0 * k_, c + c0, n_);
    });
  }

 private:
  int64_t n_, k_;
  const T* b_;
  int64_t rsb_, csb_, nr_;
  Tensor panels_;
};

// Runs body(r0, r1) over blocks of the batch's rows: one block per thread when the layer (`steps`
// steps of rows x G x H multiply-adds) is worth a hand-out and the product is packed, else one.
template <class T, class F>
void for_row_blocks(const StepProduct<T>& product, int64_t steps, int64_t rows, int64_t G, int64_t H, F body) {
  const bool split = product.packed() && double(steps) * double(rows) * double(G) * double(H) >= kParallelStepWork;
  parallel_for(0, rows, split ? kBlockRows : rows, body);
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
      case RecurrentMode::Count: break;  // the kernel tables' size, never a mode
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
  const Tensor h0 = dense(unpack(1)), c0 = saved[2].defined() ? dense(unpack(2)) : Tensor(), w_hh = dense(unpack(3));
  const Tensor states = unpack(5), keep = unpack(6);
  const bool lstm = mode == RecurrentMode::Lstm;
  const int64_t steps = states->shape[1], rows = states->shape[2], H = states->shape[3];
  const int64_t G = recurrent_gates(mode) * H;
  const DType dtype = states->dtype;
  const Tensor dstates = dense(grads[0]);
  // dx: the gates' gradient; GRU's gradient of h W_hh^T + b_hh differs from it in the n-part
  Tensor dx = empty({steps, rows, G}, dtype), dhh = mode == RecurrentMode::Gru ? empty({steps, rows, G}, dtype) : dx;
  // dh: the direct part of h's gradient (GRU's dh' z); through: the part through the hidden product
  Tensor dh = zeros({rows, H}, dtype), through = zeros({rows, H}, dtype);
  Tensor dc = lstm ? zeros({rows, H}, dtype) : Tensor();
  Tensor h_prev = empty({steps, rows, H}, dtype);  // each step's incoming h, for dW_hh
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const TypedKernels<T>& kernel = kernels().of<T>();
    const int64_t plane = steps * rows * H, step_size = rows * H;
    const T *out = states->data_as<T>(), *gout = dstates->data_as<T>();
    const StepProduct<T> product(rows, H, G, w_hh->data_as<T>(), H, 1, dtype);  // dgates @ W_hh
    T *grad_h = dh->data_as<T>(), *through_h = through->data_as<T>(), *grad_c = lstm ? dc->data_as<T>() : nullptr;
    for_row_blocks(product, steps, rows, G, H, [&](int64_t r0, int64_t r1) {
      // rows r0..r1 of every buffer: each holds a step's rows one after another
      RecurrentStepGrad<T> step{};
      step.rows = r1 - r0, step.hidden = H, step.through = through_h + r0 * H;
      step.grad_h = grad_h + r0 * H, step.grad_c = lstm ? grad_c + r0 * H : nullptr;
      for (int64_t n = 0; n < steps; ++n) {
        const int64_t t = reverse ? n : steps - 1 - n;  // the last step processed comes first
        const int64_t p = previous_step(t, steps, reverse);
        step.h = (p < 0 ? h0->data_as<T>() : out + p * step_size) + r0 * H;
        step.c = lstm ? (p < 0 ? c0->data_as<T>() : out + plane + p * step_size) + r0 * H : nullptr;
        std::memcpy(step_rows<T>(h_prev, t) + r0 * H, step.h, sizeof(T) * (r1 - r0) * H);
        step.keep = keep->shape[2] ? step_rows<T>(keep, t) + r0 * keep->shape[2] : nullptr;
        step.h_out = out + t * step_size + r0 * H;
        step.grad_h_out = gout + t * step_size + r0 * H;
        step.grad_c_out = lstm ? gout + plane + t * step_size + r0 * H : nullptr;
        step.grad_x = step_rows<T>(dx, t) + r0 * G, step.grad_hh = step_rows<T>(dhh, t) + r0 * G;
        kernel.recurrent_backward[int(mode)](step);
        product(r1 - r0, step.grad_hh, through_h + r0 * H);
      }
      kernel.binary[int(VecBinary::Add)](step.grad_h, false, step.through, false, step.grad_h, (r1 - r0) * H);
    });
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
  const int64_t G = recurrent_gates(mode) * H;
  const bool shapes_match = projected->shape[2] == G && h0->shape[0] == rows && w_hh->shape[0] == G &&
                            w_hh->shape[1] == H && (!b_hh || (b_hh->dim() == 1 && b_hh->shape[0] == G)) &&
                            (lstm ? c0 && c0->shape == h0->shape : !c0);
  if (!shapes_match)
    throw RuntimeError("recurrent_layer: the shapes of projected, h0, c0, w_hh and b_hh do not match the mode");
  for (const Tensor* t : {&h0, &c0, &w_hh, &b_hh})
    if (*t && (*t)->dtype != dtype) throw RuntimeError("recurrent_layer: every tensor must have projected's dtype");
  // states: (1 or 2 for LSTM's c, T, B, H); keep: (T, B, recurrent_kept * H)
  Tensor states = empty({lstm ? 2 : 1, steps, rows, H}, dtype);
  Tensor keep = empty({steps, rows, recurrent_kept(mode) * H}, dtype);
  {
    GradModeGuard no_grad(false);
    const Tensor x = dense(projected), h_start = dense(h0), c_start = lstm ? dense(c0) : Tensor();
    const Tensor w = dense(w_hh), b = b_hh ? dense(b_hh) : Tensor();
    dispatch_floating(dtype, [&](auto tag) {
      using T = decltype(tag);
      const int64_t plane = steps * rows * H, step_size = rows * H;
      T* out = states->data_as<T>();
      const StepProduct<T> product(rows, G, H, w->data_as<T>(), 1, H, dtype);  // h @ W_hh^T
      const Tensor hh = empty({rows, G}, dtype);
      const int64_t kept = keep->shape[2];
      for_row_blocks(product, steps, rows, G, H, [&](int64_t r0, int64_t r1) {
        // rows r0..r1 of every buffer: each holds a step's rows one after another
        RecurrentStep<T> step{};
        step.rows = r1 - r0, step.hidden = H, step.hh = hh->data_as<T>() + r0 * G;
        step.bias = b ? b->data_as<T>() : nullptr;
        for (int64_t n = 0; n < steps; ++n) {
          const int64_t t = reverse ? steps - 1 - n : n, p = previous_step(t, steps, reverse);
          step.h = (p < 0 ? h_start->data_as<T>() : out + p * step_size) + r0 * H;
          step.c = lstm ? (p < 0 ? c_start->data_as<T>() : out + plane + p * step_size) + r0 * H : nullptr;
          product(r1 - r0, step.h, hh->data_as<T>() + r0 * G);
          step.x = step_rows<T>(x, t) + r0 * G;
          step.h_out = out + t * step_size + r0 * H, step.c_out = lstm ? out + plane + t * step_size + r0 * H : nullptr;
          step.keep = kept ? step_rows<T>(keep, t) + r0 * kept : nullptr;
          kernels().of<T>().recurrent_forward[int(mode)](step);
        }
      });
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
