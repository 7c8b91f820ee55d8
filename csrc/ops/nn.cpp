// Fused ops of neural networks: softmax and log_softmax over one dim, the negative log likelihood
// loss and GELU. Each forward and each backward is one direct loop over the data rather than a
// chain of generic ops: one pass, no temporaries, and numerically stable (softmax subtracts its
// row's maximum, so logits of any size neither overflow nor give NaN). softmax and log_softmax run
// the per-ISA vector kernels of kernels/softmax_impl.h (the exp op's exp, sums in double in a fixed
// order), so their values are within an ulp or two of python/fastgrad/reference/_nn.py's (double,
// rounded once). GELU and its gradient run the per-ISA activation kernels of
// kernels/elementwise_impl.h: float64 the C library's erfc / tanh as the reference (the same bits),
// float32 in float lanes ('none') or double lanes ('tanh'), within 1 ulp of the reference (the
// bounds are stated there). nll_loss computes in double and rounds once when stored, as the
// reference does: the same bits. Each backward is an op with a node of its own (as PyTorch's),
// recorded in a backward with create_graph: its derivative is defined once, there
// (SoftmaxBackwardDataBackward0, NllLossBackwardBackward0, GeluBackwardBackward0).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "autograd/node.h"
#include "core/half.h"
#include "core/shape.h"
#include "kernels/kernel_table.h"
#include "kernels/special_functions.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

namespace {

// ---- softmax and log_softmax

// A contiguous tensor seen as [outer, n, inner] around the softmax dim: each of the outer * inner
// rows holds n values, `inner` elements apart.
struct Rows {
  int64_t outer = 1, n = 1, inner = 1;
  Rows(const Shape& shape, int64_t dim) {
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      (d < dim ? outer : d == dim ? n : inner) *= shape[d];
  }
};

// Calls block(first, columns) for every block of rows, split over threads: along the last dim
// (inner == 1) a block is a run of `columns` whole rows, contiguous from first; otherwise a block is
// up to kColumnBlock neighbouring columns of one outer index. The kernels compute each row the same way
// in whichever block and thread it falls, so the bits do not depend on the thread count.
constexpr int64_t kColumnBlock = 64;  // a multiple of every ISA's vector width

template <class F>
void for_each_block(const Rows& rows, F&& block) {
  if (rows.outer == 0 || rows.n == 0 || rows.inner == 0) return;  // no rows, or rows without values
  if (rows.inner == 1) {
    parallel_for(0, rows.outer, std::max<int64_t>(1, kParallelElements / rows.n),
                 [&](int64_t lo, int64_t hi) { block(lo * rows.n, hi - lo); });
    return;
  }
  const int64_t per_outer = (rows.inner + kColumnBlock - 1) / kColumnBlock;
  parallel_for(0, rows.outer * per_outer,
               std::max<int64_t>(1, kParallelElements / (rows.n * std::min(kColumnBlock, rows.inner))),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t b = lo; b < hi; ++b) {
                   const int64_t o = b / per_outer, column = (b % per_outer) * kColumnBlock;
                   block(o * rows.n * rows.inner + column, std::min(kColumnBlock, rows.inner - column));
                 }
               });
}

// y = softmax(x) or log_softmax(x) along the rows (the active ISA's kernel, softmax_impl.h).
template <class T>
void softmax_forward(const T* x, T* y, const Rows& rows, bool log) {
  SoftmaxForwardKernel<T> kernel = kernels().of<T>().softmax_forward;
  for_each_block(
      rows, [&](int64_t first, int64_t columns) { kernel(x + first, y + first, rows.n, rows.inner, columns, log); });
}

// The input gradient from the output y and its gradient g, per row:
// softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g).
template <class T>
void softmax_backward(const T* y, const T* g, T* gx, const Rows& rows, bool log) {
  SoftmaxBackwardKernel<T> kernel = kernels().of<T>().softmax_backward;
  for_each_block(rows, [&](int64_t first, int64_t columns) {
    kernel(y + first, g + first, gx + first, rows.n, rows.inner, columns, log);
  });
}

struct SoftmaxNode : Node {
  int64_t dim = 0;  // wrapped; 0 for a 0-d input (seen as one row of one element)
  bool log = false;
};

}  // namespace

// softmax's gradient as an op of its own, as PyTorch's _softmax_backward_data: the loop above, and,
// when recorded (in a backward with create_graph), a node whose formulas are its derivative
// (SoftmaxBackwardDataBackward0, LogSoftmaxBackwardDataBackward0: SoftmaxNode::log picks the
// formula). Saves the incoming gradient g, then softmax's output y.
FG_NODE_UNNAMED(SoftmaxBackwardDataBackward, SoftmaxNode);

namespace {

Tensor softmax_backward_data(const Tensor& grad, const Tensor& y, int64_t dim, bool log) {
  DType computed = compute_type(y->dtype);  // float16 and bfloat16 in float32, rounded on store
  Tensor g = cast_values(dense(grad), computed), yc = cast_values(dense(y), computed);
  Tensor gc = empty(y->shape, computed);
  dispatch_floating(computed, [&](auto tag) {
    using T = decltype(tag);
    softmax_backward(yc->data_as<T>(), g->data_as<T>(), gc->data_as<T>(), Rows(y->shape, dim), log);
  });
  Tensor gx = cast_values(gc, y->dtype);
  const char* node_name = log ? "LogSoftmaxBackwardDataBackward0" : "SoftmaxBackwardDataBackward0";
  if (auto* node = record<SoftmaxBackwardDataBackward>(gx, {&grad, &y}, node_name)) {
    node->dim = dim;
    node->log = log;
    node->save(grad);
    node->save(y);
  }
  return gx;
}

}  // namespace

// The gradients of softmax_backward_data(g, y) from gg, PyTorch's formulas. softmax: along g, the
// same op (it is symmetric in g); along y, gg * g - sum(y * g) * gg - g * sum(y * gg). log_softmax:
// along g, gg - sum(gg * exp(y)); along y, -sum(g) * exp(y) * gg.
GradList SoftmaxBackwardDataBackward::apply(GradList&& grads) {
  const Tensor& gg = grads[0];
  Tensor g = unpack(0), y = unpack(1);
  std::vector<int64_t> dims;  // the rows' dim; none for a 0-d tensor
  if (y->dim() > 0) dims.push_back(dim);
  GradList out(2);
  if (log) {
    if (needs_input_grad(0)) out[0] = sub(gg, sum(mul(gg, exp(y)), dims, true));
    if (needs_input_grad(1)) out[1] = mul(mul(neg(sum(g, dims, true)), exp(y)), gg);
    return out;
  }
  if (needs_input_grad(0)) out[0] = softmax_backward_data(gg, y, dim, false);
  if (needs_input_grad(1))
    out[1] = sub(sub(mul(g, gg), mul(sum(mul(y, g), dims, true), gg)), mul(g, sum(mul(y, gg), dims, true)));
  return out;
}

// SoftmaxBackward0, LogSoftmaxBackward0 (SoftmaxNode::log picks the formula).
FG_NODE_UNNAMED(SoftmaxBackward, SoftmaxNode);
GradList SoftmaxBackward::apply(GradList&& grads) { return {softmax_backward_data(grads[0], unpack(0), dim, log)}; }

namespace {

Tensor softmax_op(const Tensor& x, int64_t dim, bool log) {
  const char* node_name = log ? "LogSoftmaxBackward0" : "SoftmaxBackward0";
  int64_t d = wrap_dim(dim, x->dim());
  if (x->numel() == 0) {  // PyTorch returns before looking at the dtype
    Tensor out = empty(x->shape, x->dtype);
    if (auto* node = record<SoftmaxBackward>(out, {&x}, node_name)) node->save(out, true);
    return out;
  }
  if (!is_floating(x->dtype)) {
    bool last = x->dim() == 0 || d == x->dim() - 1;  // PyTorch's kernel for the last dim has its own name
    throw not_implemented_for(log ? (last ? "log_softmax_lastdim_kernel_impl" : "log_softmax_kernel_impl")
                                  : (last ? "softmax_lastdim_kernel_impl" : "softmax_kernel_impl"),
                              x->dtype);
  }
  DType computed = compute_type(x->dtype);  // float16 and bfloat16 in float32, rounded on store
  Tensor src = cast_values(dense(x), computed);
  Tensor wide = empty(x->shape, computed);
  dispatch_floating(computed, [&](auto tag) {
    using T = decltype(tag);
    softmax_forward(src->data_as<T>(), wide->data_as<T>(), Rows(x->shape, d), log);
  });
  Tensor out = cast_values(wide, x->dtype);
  if (auto* node = record<SoftmaxBackward>(out, {&x}, node_name)) {
    node->dim = x->dim() == 0 ? 0 : d;
    node->log = log;
    node->save(out, true);
  }
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op(x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op(x, dim, true); }

// ---- attention scores: ATen's _scaled_dot_product_attention_math up to its softmax, op for op (the
// same values and nodes): query and key each scaled by sqrt(|scale|), the sign going to query, before
// their product, then the mask added in place. One call for what a sampling loop ran as five
// primitives and a Python function per attention.

namespace {

inline float plus_minus_inf(float v) { return v + -std::numeric_limits<float>::infinity(); }
inline double plus_minus_inf(double v) { return v + -std::numeric_limits<double>::infinity(); }
template <class H>
H plus_minus_inf(H v) {  // float16 / bfloat16: added in float and rounded, as add_ computes them
  return H::from_float(plus_minus_inf(v.to_float()));
}

// is_causal's mask (key j visible to query i when j <= i, aligned to the top left) applied to the
// scores, a fresh contiguous (..., rows, cols) tensor: -inf added above the diagonal, the values that
// adding the 0 / -inf bias gives (NaN stays NaN), without building the bias or running the add. No
// node: the product's node saved its operands, not the scores, and the masked scores' gradient
// through the softmax that follows is 0, as the bias's add_ would pass it.
void add_causal_mask_(const Tensor& scores) {
  const int64_t dims = scores->dim(), rows = scores->shape[dims - 2], cols = scores->shape[dims - 1];
  const int64_t planes = rows * cols != 0 ? scores->numel() / (rows * cols) : 0;
  auto mask = [&](auto* p) {
    for (int64_t plane = 0; plane < planes; ++plane)
      for (int64_t i = 0; i < rows; ++i, p += cols)
        for (int64_t j = i + 1; j < cols; ++j) p[j] = plus_minus_inf(p[j]);
  };
  switch (scores->dtype) {
    case DType::Float32: return mask(scores->data_as<float>());
    case DType::Float64: return mask(scores->data_as<double>());
    case DType::Float16: return mask(scores->data_as<Half>());
    case DType::BFloat16: return mask(scores->data_as<BFloat16>());
    default: throw not_implemented_for("scaled_dot_product_attention", scores->dtype);
  }
}

}  // namespace

Tensor attention_scores(const Tensor& query, const Tensor& key, double scale, const Tensor& bias, bool causal) {
  if (query->dim() < 2 || key->dim() < 2)  // F.scaled_dot_product_attention checks first, with PyTorch's message
    throw RuntimeError(cat("attention_scores: expected query and key of at least 2 dims, but got ", query->dim(),
                           " and ", key->dim()));
  if (causal && bias) throw RuntimeError("attention_scores: a bias and the causal mask");  // F.* raises first
  const double root = std::sqrt(std::abs(scale));
  Tensor scores = matmul(mul(query, Scalar::from_float(scale < 0 ? -root : root)),
                         mul(transpose(key, -2, -1), Scalar::from_float(root)));
  if (bias) add_(scores, bias);  // in place as ATen: a bias of more batch dims than the scores is an error
  if (causal) add_causal_mask_(scores);
  return scores;
}

// ---- nll_loss: minus the (weighted) log-probability of each sample's target class, per sample
// or reduced. The weighted mean divides by the total weight of the targets that count.

Reduction reduction_from_name(const std::string& name) {
  if (name == "none") return Reduction::None;
  if (name == "mean") return Reduction::Mean;
  if (name == "sum") return Reduction::Sum;
  throw ValueError(cat(name, " is not a valid value for reduction"));
}

namespace {

// The checks of PyTorch's nll_loss_nd (what F.nll_loss calls: ValueErrors), then of its
// nll_loss_forward (RuntimeErrors), in PyTorch's order.
void check_nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight) {
  if (input->dim() < 1) throw ValueError(cat("Expected 1 or more dimensions (got ", input->dim(), ")"));
  // PyTorch reads a 0-d target's batch size as 0.
  int64_t target_batch = target->dim() == 0 ? 0 : target->shape[0];
  if (input->dim() != 1 && input->shape[0] != target_batch)
    throw ValueError(
        cat("Expected input batch_size (", input->shape[0], ") to match target batch_size (", target_batch, ")."));
  if (weight && grad_enabled() && weight->requires_grad())
    throw RuntimeError("The function 'nll_loss_forward' is not differentiable with respect to argument 'weight'. "
                       "This input cannot have requires_grad True.");
  if (input->dim() > 2) throw RuntimeError("input tensor should be 1D or 2D");
  if (target->dim() > 1) throw RuntimeError("0D or 1D target tensor expected, multi-target not supported");
  if (target->dtype != DType::Int64)
    throw RuntimeError(cat("expected target dtype to be Long or Byte, but got ", scalar_type_name(target->dtype)));
  if (input->dim() == 1 && target->dim() == 1 && target->shape[0] != 1)
    throw ValueError(cat("For 1D input, 1D target must have size 1, but got target size: ", target->shape[0]));
  if (input->dim() == 2 && target->dim() == 0)
    throw IndexError("Dimension specified as 0 but tensor has no dimensions");
  int64_t classes = input->shape.back();
  if (weight && (weight->dim() != 1 || weight->numel() != classes))
    throw RuntimeError(cat("weight tensor should be defined either for all ", classes,
                           " classes or no classes but got weight tensor of shape: ", shape_str(weight->shape)));
  if (!is_floating(input->dtype)) throw not_implemented_for("nll_loss_out_frame", input->dtype);
  if (weight && weight->dtype != input->dtype)
    throw RuntimeError(
        cat("expected scalar type ", scalar_type_name(input->dtype), " but found ", scalar_type_name(weight->dtype)));
}

// Calls f(sample, target class, class weight) for every sample whose target is not ignore_index;
// IndexError for a target that is not a class. A 1-D input is one sample.
template <class T, class F>
void for_each_target(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index, F&& f) {
  int64_t classes = input->shape.back();
  int64_t batch = input->dim() == 1 ? 1 : input->shape[0];
  Tensor t = dense(target), w = weight ? dense(weight) : Tensor();
  for (int64_t b = 0; b < batch; ++b) {
    int64_t c = t->data_as<int64_t>()[b];
    if (c == ignore_index) continue;
    if (c < 0 || c >= classes) throw IndexError(cat("Target ", c, " is out of bounds."));
    f(b, c, w ? double(w->data_as<T>()[c]) : 1.0);
  }
}

// The log-probability input[b, c] (input[c] for a 1-D input), read through the input's strides.
template <class T>
double log_probability(const Tensor& input, int64_t b, int64_t c) {
  int64_t at = c * input->strides.back() + (input->dim() == 2 ? b * input->strides[0] : 0);
  return input->data_as<T>()[at];
}

// reduction='none' of a batch gives one loss per sample; anything else (or a 1-D input) one number.
bool per_sample(const Tensor& input, Reduction reduction) { return reduction == Reduction::None && input->dim() == 2; }

}  // namespace

struct NllLossNode : Node {
  Reduction reduction = Reduction::Mean;
  int64_t ignore_index = -100;
  double total_weight = 0;  // what the mean divided by
  // The class weights, the last saved tensor (not defined without weights).
  Tensor weight() const { return saved[saved.size() - 1].defined() ? unpack(saved.size() - 1) : Tensor(); }
};

// nll_loss's gradient in a backward with create_graph, as PyTorch's nll_loss_backward: linear in
// the incoming gradient (edge 0), constant in the input (edge 1, which gets zeros). Its edge to the
// input gives the gradient a graph wherever the input has one, as PyTorch's. Saves target, weight.
FG_NODE_FROM(NllLossBackwardBackward0, NllLossNode);
GradList NllLossBackwardBackward0::apply(GradList&& grads) {
  const Tensor& gg = grads[0];
  GradList out(2);
  if (needs_input_grad(0)) out[0] = nll_loss(gg, unpack(0), weight(), reduction, ignore_index);
  if (needs_input_grad(1)) out[1] = zeros(gg->shape, gg->dtype);
  return out;
}

// Saves input, target, weight.
FG_NODE_FROM(NllLossBackward0, NllLossNode);
GradList NllLossBackward0::apply(GradList&& grads) {
  Tensor input = unpack(0), target = unpack(1), w = weight();
  // PyTorch's nll_loss_backward checks the sizes as if the target's size were the batch size, so a
  // 1-D input with a 1-D target (of size 1) that its forward accepts fails here unless C == 1.
  if (input->dim() == 1 && target->dim() == 1 && input->shape[0] != target->shape[0])
    throw RuntimeError(
        cat("size mismatch (got input: ", shape_str(input->shape), ", target: ", shape_str(target->shape), ")"));
  const Tensor& grad = grads[0];
  Tensor g = dense(grad);
  Tensor gx = zeros(input->shape, input->dtype);  // contiguous
  bool each = per_sample(input, reduction);
  int64_t classes = input->shape.back();
  dispatch_floating(input->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* gd = g->data_as<T>();
    double scale = each ? 0.0 : reduction == Reduction::Mean ? gd[0] / total_weight : gd[0];  // one loss: one gradient
    for_each_target<T>(input, target, w, ignore_index, [&](int64_t b, int64_t c, double wc) {
      gx->data_as<T>()[b * classes + c] = static_cast<T>(-wc * (each ? double(gd[b]) : scale));
    });
  });
  if (auto* node = record<NllLossBackwardBackward0>(gx, {&grad, &input})) {
    node->save(target);
    node->save(w);
    node->reduction = reduction;
    node->ignore_index = ignore_index;
  }
  return {gx};
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction,
                int64_t ignore_index) {
  check_nll_loss(input, target, weight);
  bool each = per_sample(input, reduction);
  Tensor out = each ? zeros({input->shape[0]}, input->dtype) : empty({}, input->dtype);
  double total_weight = 0;
  dispatch_floating(input->dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = out->data_as<T>();
    double loss = 0;
    for_each_target<T>(input, target, weight, ignore_index, [&](int64_t b, int64_t c, double wc) {
      double term = -log_probability<T>(input, b, c) * wc;
      if (each) o[b] = static_cast<T>(term);
      loss += term;
      total_weight += wc;
    });
    // A mean over no targets (an empty batch, all ignored, zero weights) is 0 / 0: NaN, as PyTorch.
    if (!each) o[0] = static_cast<T>(reduction == Reduction::Mean ? loss / total_weight : loss);
  });
  if (auto* node = record<NllLossBackward0>(out, {&input})) {
    node->save(input);
    node->save(target);
    node->save(weight);
    node->reduction = reduction;
    node->ignore_index = ignore_index;
    node->total_weight = total_weight;
  }
  return out;
}

// ---- gelu(x) = x * P(X <= x) for a standard normal X; approximate='tanh' is PyTorch's tanh formula.

GeluApproximation gelu_approximation_from_name(const std::string& name) {
  if (name == "none") return GeluApproximation::None;
  if (name == "tanh") return GeluApproximation::Tanh;
  throw RuntimeError("approximate argument must be either none or tanh.");
}

namespace {

using special::kGeluAlpha, special::kGeluBeta, special::kGeluKappa;

Activation gelu_kernels(GeluApproximation a) {
  return a == GeluApproximation::Tanh ? Activation::GeluTanh : Activation::Gelu;
}

// d^2 gelu / dx^2 from recorded ops (for the gradient of gelu's gradient). With the normal
// density p: gelu'' = p (2 - x^2). With t = tanh(u), u = b (x + k x^3): gelu'' =
// (1 - t^2) (u' + x (u'' - 2 t u'^2) / 2), u' = b (1 + 3 k x^2), u'' = 6 b k x.
Tensor gelu_second_derivative(const Tensor& x, GeluApproximation a) {
  Tensor x_sq = mul(x, x);
  if (a == GeluApproximation::None) {
    Tensor density = mul(exp(mul(x_sq, Scalar::from_float(-0.5))), Scalar::from_float(kGeluAlpha));
    return mul(density, rsub(x_sq, Scalar::from_int(2)));
  }
  Tensor t = tanh(mul(add(x, mul(mul(x_sq, x), Scalar::from_float(kGeluKappa))), Scalar::from_float(kGeluBeta)));
  Tensor du =
      mul(add(mul(x_sq, Scalar::from_float(3 * kGeluKappa)), Scalar::from_int(1)), Scalar::from_float(kGeluBeta));
  Tensor d2u = mul(x, Scalar::from_float(6 * kGeluBeta * kGeluKappa));
  Tensor inner = sub(d2u, mul(mul(t, mul(du, du)), Scalar::from_int(2)));
  return mul(rsub(mul(t, t), Scalar::from_int(1)), add(du, mul(mul(x, inner), Scalar::from_float(0.5))));
}

}  // namespace

struct GeluNode : Node {
  GeluApproximation approximate = GeluApproximation::None;
};

// gelu's gradient g * gelu'(x), an op of its own (as PyTorch's gelu_backward), recorded in a
// backward with create_graph. saved[0]: g, saved[1]: x.
FG_NODE_FROM(GeluBackwardBackward0, GeluNode);
namespace {
Tensor gelu_backward(const Tensor& g, const Tensor& x, GeluApproximation approximate) {
  Tensor gx = empty(x->shape, x->dtype);
  const bool repeated = is_repeated(g);
  Tensor gs = repeated ? g : dense(g), xs = dense(x);
  dispatch_floating(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    ActivationGradKernel<T> kernel = kernels().of<T>().activation_grad[static_cast<int>(gelu_kernels(approximate))];
    const T *gp = gs->data_as<T>(), *xp = xs->data_as<T>();
    T* out = gx->data_as<T>();
    parallel_for(0, xs->numel(), kParallelElements, [&](int64_t lo, int64_t hi) {
      kernel(repeated ? gp : gp + lo, repeated, xp + lo, out + lo, hi - lo, nullptr);
    });
  });
  if (auto* node = record<GeluBackwardBackward0>(gx, {&g, &x})) {
    node->approximate = approximate;
    node->save(g);
    node->save(x);
  }
  return gx;
}
}  // namespace
GradList GeluBackwardBackward0::apply(GradList&& grads) {
  const Tensor& gg = grads[0];
  Tensor g = unpack(0), x = unpack(1);
  GradList out(2);
  if (needs_input_grad(0)) out[0] = gelu_backward(gg, x, approximate);
  if (needs_input_grad(1)) out[1] = mul(mul(gg, g), gelu_second_derivative(x, approximate));
  return out;
}

FG_NODE_FROM(GeluBackward0, GeluNode);
GradList GeluBackward0::apply(GradList&& grads) { return {gelu_backward(grads[0], unpack(0), approximate)}; }

Tensor gelu(const Tensor& x, GeluApproximation approximate) {
  if (!is_floating(x->dtype)) throw not_implemented_for("GeluKernelImpl", x->dtype);
  Tensor out = empty(x->shape, x->dtype), xs = dense(x);
  dispatch_floating(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    ActivationKernel<T> kernel = kernels().of<T>().activation[static_cast<int>(gelu_kernels(approximate))];
    const T* xp = xs->data_as<T>();
    T* op = out->data_as<T>();
    parallel_for(0, xs->numel(), kParallelElements,
                 [&](int64_t lo, int64_t hi) { kernel(xp + lo, op + lo, hi - lo, nullptr); });
  });
  if (auto* node = record<GeluBackward0>(out, {&x})) {
    node->approximate = approximate;
    node->save(x);
  }
  return out;
}

}  // namespace fg
