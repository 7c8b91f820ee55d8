// Every tensor op of the core. Each is defined once, in the ops/*.cpp file of its family, next to
// its backward node and its shape rule. Backward formulas are written with these same ops, so a
// backward with create_graph (run in grad mode) records them: gradients of gradients. The few
// backwards that are direct loops are ops with a node of their own, which defines their derivative.
#pragma once
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "core/scalar.h"
#include "core/tensor.h"
#include "kernels/kernel_table.h"

namespace fg {

// ---- creation and conversion (ops/creation.cpp)
Tensor full(const Shape& shape, const Scalar& value, DType dtype);  // an integer exactly
Tensor full(const Shape& shape, double value, DType dtype);
Tensor zeros(const Shape& shape, DType dtype);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor arange(double start, double end, double step, DType dtype);
Tensor linspace(double start, double end, int64_t steps, DType dtype);
Tensor eye(int64_t n, int64_t m, DType dtype);
Tensor to_dtype(const Tensor& t, DType dtype);  // returns t itself when the dtype already matches
// A temporary is moved through (backward nodes' to_dtype(sum_to(g, ...), dtype)): no count taken.
inline Tensor to_dtype(Tensor&& t, DType dtype) {
  if (t->dtype == dtype) return std::move(t);
  return to_dtype(static_cast<const Tensor&>(t), dtype);
}
// to_dtype without autograd: for kernels, e.g. to run a storage dtype (core/dtype.h) in its compute type.
Tensor cast_values(const Tensor& t, DType dtype);
// cast_values for a kernel's operand: t itself when it has `dtype` (a reference: no count of the
// pointer taken, whose atomic updates cost a 0-d op ~5%), else the converted values, kept in `converted`.
inline const Tensor& values_as(const Tensor& t, DType dtype, Tensor& converted) {
  if (t->dtype == dtype) return t;
  converted = cast_values(t, dtype);
  return converted;
}
Tensor clone(const Tensor& t);
Tensor contiguous(const Tensor& t);             // t itself when already contiguous
// contiguous() without autograd, for kernels that read row-major memory (their op records its own node).
Tensor dense(const Tensor& t);
// Whether t is one value repeated (every stride 0, as the gradient of a sum): kernels read it as that value.
bool is_repeated(const Tensor& t);
void copy_values(const Tensor& dst, const Tensor& src);  // broadcast + cast, no autograd
Scalar item(const Tensor& t);
// The backward that passes the gradient on unchanged: CloneBackward0, AliasBackward0, and
// RemainderBackward0 and FmodBackward0 (of x % number).
FG_NODE_UNNAMED(IdentityBackward, Node);

// ---- type promotion (ops/elementwise.cpp)
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, const Scalar& b);

// ---- elementwise, broadcasting (ops/elementwise.cpp)
// a + alpha * b and a - alpha * b: for floating types rounded once (PyTorch's fused loops).
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = Scalar::from_int(1));
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = Scalar::from_int(1));
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = Scalar::from_int(1));
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = Scalar::from_int(1));
Tensor rsub(const Tensor& a, const Tensor& b, const Scalar& alpha = Scalar::from_int(1));  // b - alpha * a
Tensor rsub(const Tensor& a, const Scalar& b, const Scalar& alpha = Scalar::from_int(1));
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Scalar& b);
Tensor rdiv(const Tensor& a, const Scalar& b);  // b / a
Tensor reciprocal(const Tensor& x);
Tensor pow(const Tensor& a, const Scalar& b);
// x ** y of a float x and a number y as pow(tensor, number) computes it: PyTorch computes some
// exponents with other functions (sqrt(-inf) is NaN where pow(-inf, 0.5) is inf); so does fastgrad.
template <class T>
T power_by_number(T x, T y) {
  if (y == T(0.5)) return std::sqrt(x);
  if (y == T(-0.5)) return T(1) / std::sqrt(x);
  if (y == T(2)) return x * x;
  if (y == T(3)) return x * x * x;
  if (y == T(-1)) return T(1) / x;
  if (y == T(-2)) return T(1) / (x * x);
  return std::pow(x, y);
}
Tensor rpow(const Tensor& a, const Scalar& b);  // b ** a
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x * y + z rounded once, computed in floating `dtype` (its compute type) from the operands'
// values: no autograd node (the ops that round so record their own).
Tensor fused_multiply_add(const Tensor& x, const Tensor& y, const Tensor& z, DType dtype);
// ---- floor division, remainder, fmod, bitwise (ops/integer_division.cpp)
// Division rounded down (floor_divide, //), the remainder with the divisor's sign (remainder, %),
// and with the dividend's sign (fmod). Integer division by zero raises, as PyTorch.
// floor_divide has no derivative: backward through it raises, naming `aten_op` (PyTorch's in-place
// form names itself, "aten::floor_divide_").
Tensor floor_divide(const Tensor& a, const Tensor& b, const char* aten_op = "aten::floor_divide");
Tensor floor_divide(const Tensor& a, const Scalar& b, const char* aten_op = "aten::floor_divide");
Tensor rfloor_divide(const Tensor& a, const Scalar& b);  // b // a
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Scalar& b);
Tensor rremainder(const Tensor& a, const Scalar& b);  // b % a
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, const Scalar& b);
// a / b rounded down or toward zero (div's rounding_mode "floor", "trunc"): piecewise constant, its
// gradient is zero (but, as in PyTorch, it is recorded: DivBackward2).
enum class Rounding { Floor, Trunc };
Tensor div(const Tensor& a, const Tensor& b, Rounding rounding);
Tensor div(const Tensor& a, const Scalar& b, Rounding rounding);

// & | ^ and ~ of bool and integer tensors.
enum class BitwiseOp { And, Or, Xor };
Tensor bitwise(const Tensor& a, const Tensor& b, BitwiseOp op);
Tensor bitwise(const Tensor& a, const Scalar& b, BitwiseOp op);
Tensor bitwise_not(const Tensor& x);

// ---- predicates, and sign (ops/predicates.cpp)
enum class CompareOp { Lt, Le, Gt, Ge, Eq, Ne };
Tensor compare(const Tensor& a, const Tensor& b, CompareOp op);
Tensor compare(const Tensor& a, const Scalar& b, CompareOp op);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);

// ---- unary (ops/unary.cpp)
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);  // tensor bounds; one may be undefined

// ---- float functions of one tensor (ops/math.cpp)
Tensor log10(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);
// What asinh_, acosh_, atanh_ write: PyTorch has no derivative for them (backward raises).
Tensor asinh_for_inplace(const Tensor& x);
Tensor acosh_for_inplace(const Tensor& x);
Tensor atanh_for_inplace(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor erfc(const Tensor& x);
Tensor erfinv(const Tensor& x);
Tensor lgamma(const Tensor& x);
Tensor digamma(const Tensor& x);
Tensor polygamma(int64_t n, const Tensor& x);  // digamma's n-th derivative (for digamma's gradients)
Tensor rsqrt(const Tensor& x);
Tensor deg2rad(const Tensor& x);
Tensor rad2deg(const Tensor& x);
Tensor signbit(const Tensor& x);  // bool

// ---- float functions of two operands (ops/float_binary.cpp): atan2(a, b), hypot, logaddexp,
// logaddexp2 and copysign's values in the promoted float type, broadcast; no autograd node (the
// Python layer records PyTorch's, with its gradient formulas).
enum class FloatBinary { Atan2, Hypot, Logaddexp, Logaddexp2, Copysign };
Tensor float_binary(const Tensor& a, const Tensor& b, FloatBinary op);
Tensor float_binary(const Tensor& a, const Scalar& b, FloatBinary op);

// ---- rounding and sign (ops/rounding.cpp)
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor trunc(const Tensor& x);
Tensor round(const Tensor& x);                    // RoundBackward0
Tensor round(const Tensor& x, int64_t decimals);  // RoundBackward1
Tensor frac(const Tensor& x);
Tensor sgn(const Tensor& x);
Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf);

// ---- in place (ops/inplace.cpp); return self
Tensor add_(const Tensor& self, const Tensor& other, const Scalar& alpha = Scalar::from_int(1));
Tensor sub_(const Tensor& self, const Tensor& other, const Scalar& alpha = Scalar::from_int(1));
Tensor mul_(const Tensor& self, const Tensor& other);
Tensor div_(const Tensor& self, const Tensor& other);
Tensor add_(const Tensor& self, const Scalar& other, const Scalar& alpha = Scalar::from_int(1));
Tensor sub_(const Tensor& self, const Scalar& other, const Scalar& alpha = Scalar::from_int(1));
Tensor mul_(const Tensor& self, const Scalar& other);
Tensor div_(const Tensor& self, const Scalar& other);
Tensor pow_(const Tensor& self, const Tensor& exponent);
Tensor pow_(const Tensor& self, const Scalar& exponent);
Tensor floor_divide_(const Tensor& self, const Tensor& other);
Tensor floor_divide_(const Tensor& self, const Scalar& other);
Tensor remainder_(const Tensor& self, const Tensor& other);
Tensor remainder_(const Tensor& self, const Scalar& other);
Tensor fmod_(const Tensor& self, const Tensor& other);
Tensor fmod_(const Tensor& self, const Scalar& other);
Tensor bitwise_(const Tensor& self, const Tensor& other, BitwiseOp op);
Tensor bitwise_(const Tensor& self, const Scalar& other, BitwiseOp op);
Tensor bitwise_not_(const Tensor& self);
Tensor clamp_(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor leaky_relu_(const Tensor& self, double slope);
Tensor hardtanh_(const Tensor& self, double min, double max);
// self = op(self) for a unary op; `reads_self`: op's backward reads its input (then op runs on a copy).
Tensor unary_(const Tensor& self, Tensor (*op)(const Tensor&), bool reads_self);
Tensor round_(const Tensor& self, int64_t decimals);
Tensor nan_to_num_(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                   std::optional<double> neginf);
Tensor cumsum_(const Tensor& self, int64_t dim, std::optional<DType> dtype);
Tensor cumprod_(const Tensor& self, int64_t dim, std::optional<DType> dtype);
Tensor fill_(const Tensor& self, const Scalar& value);
Tensor fill_(const Tensor& self, const Tensor& value);
Tensor zero_(const Tensor& self);
Tensor copy_(const Tensor& self, const Tensor& src);

// ---- over lists of tensors, for the optimizers (ops/foreach.cpp); no autograd
void foreach_zero_(const std::vector<Tensor>& tensors);
// The optimizers' single-tensor steps (PyTorch's foreach=False updates), one fused pass per
// parameter (float32 or float64) with its gradient and state, rounded as PyTorch's op chain
// (kernels/optim_impl.h). The scalars are the doubles PyTorch's Python code computes; a
// weight_decay of 0 means none. An empty optional state list: that option is off.
//
// Adam / AdamW: lerp_weight = 1 - beta1, decay = 1 - lr * weight_decay for AdamW (else 1, and
// weight_decay the L2 coefficient); step_sizes[i] = lr / (1 - beta1^step), bias_correction2_sqrts[i]
// = sqrt(1 - beta2^step). max_exp_avg_sqs: with amsgrad.
struct AdamOptions {
  double lerp_weight, beta2, one_minus_beta2, eps, weight_decay, decay;
  bool maximize;
};
void adam_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
           const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs,
           const std::vector<double>& step_sizes, const std::vector<double>& bias_correction2_sqrts,
           const AdamOptions& options);
// SGD: momentum_buffers with momentum (first_steps[i]: the buffer starts as the gradient).
struct SgdOptions {
  double lr, momentum, one_minus_dampening, weight_decay;
  bool nesterov, maximize;
};
void sgd_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
          const std::vector<Tensor>& momentum_buffers, const std::vector<bool>& first_steps, const SgdOptions& options);
// Adagrad: learning_rates[i] = lr / (1 + (step - 1) * lr_decay).
struct AdagradOptions {
  double eps, weight_decay;
  bool maximize;
};
void adagrad_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& sums,
              const std::vector<double>& learning_rates, const AdagradOptions& options);

// In-place support (ops/inplace.cpp): the checks PyTorch makes before any in-place write (leaves, views
// made under no_grad; `source` is the tensor written from, if any), and
// making `new_value` (the node computing self's new contents) self's history. When self is a view
// that also rewrites the base's history (PyTorch's CopySlices).
void check_inplace(const Tensor& self, const Tensor* source = nullptr);
void rebase_history(const Tensor& self, Edge new_value);
// The in-place form of an op composed in Python: PyTorch's checks before writing into self from
// `sources` (which must broadcast to self's shape when the op is elementwise), and a copy of self
// carrying its history to run the op on; then self takes the op's result (values and history; a
// result saved by its node becomes self).
Tensor inplace_input(const Tensor& self, const std::vector<Tensor>& sources, bool elementwise);
Tensor write_result_(const Tensor& self, const Tensor& result);

// A view of contiguous `x` with any geometry (offset relative to x's); AsStridedBackward0.
Tensor as_strided(const Tensor& x, const Shape& shape, const Shape& strides, int64_t offset);

// ---- reductions (ops/reduce.cpp); empty dims = all dims
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, std::optional<DType> dtype = {});
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);
Tensor prod(const Tensor& x, std::optional<int64_t> dim, bool keepdim);
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, double correction, bool keepdim);
Tensor std(const Tensor& x, const std::vector<int64_t>& dims, double correction, bool keepdim);
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);
Tensor max_all(const Tensor& x);
Tensor min_all(const Tensor& x);
std::pair<Tensor, Tensor> max_dim(const Tensor& x, int64_t dim, bool keepdim);
std::pair<Tensor, Tensor> min_dim(const Tensor& x, int64_t dim, bool keepdim);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim);
Tensor norm(const Tensor& x, double p, const std::vector<int64_t>& dims, bool keepdim);
// ---- scans along one dim (ops/scan.cpp). cumsum and cumprod compute in `dtype`: by default the
// input's, int64 for integers and bools.
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype);
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype);
Tensor logcumsumexp(const Tensor& x, int64_t dim);
std::pair<Tensor, Tensor> cummax(const Tensor& x, int64_t dim);  // values, indices
std::pair<Tensor, Tensor> cummin(const Tensor& x, int64_t dim);
// The gradient of a broadcast op, summed back to the input's shape.
Tensor sum_to(const Tensor& grad, const Shape& shape);

// ---- sorting and selection along a dim (ops/sort.cpp): (values, indices). NaN is largest; equal
// values in PyTorch's CPU order. `stable` given (even false) names the node SortBackward1, as
// PyTorch's sort.stable overload; true keeps equal values in index order.
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, std::optional<bool> stable);
Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable);
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted);
std::pair<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim);  // k-th smallest
// The lower median (of a row, or of all elements); NaN if there is one.
std::pair<Tensor, Tensor> median_dim(const Tensor& x, int64_t dim, bool keepdim);
Tensor median_all(const Tensor& x);
std::pair<Tensor, Tensor> mode(const Tensor& x, int64_t dim, bool keepdim);
// ---- searching, counting and unique (ops/sort.cpp, issue 13); arguments checked by the Python layer.
// For each value, the position in its row of `sorted` (1-D, or one row per row of `values`, same dtype).
Tensor searchsorted(const Tensor& sorted, const Tensor& values, bool right);
// Counts (or sums of float `weights`) of the non-negative int64 values of 1-D x, at least minlength long.
Tensor bincount(const Tensor& x, const std::optional<Tensor>& weights, int64_t minlength);
// How many elements of float x (or their weights) fall in each bin between the increasing 1-D `edges`
// (x's dtype): a bin holds its left edge, the last one its right edge too.
Tensor histogram_counts(const Tensor& x, const Tensor& edges, const std::optional<Tensor>& weights);
// The distinct rows of a 2-D tensor, in order (or, `consecutive`, each run of equal rows): the index
// of each one's first row, each row's distinct row, and how many rows each one has.
std::tuple<Tensor, Tensor, Tensor> unique_rows(const Tensor& rows, bool consecutive);

// ---- shape and views (ops/shape.cpp)
Tensor view(const Tensor& x, const Shape& shape);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor unsafe_view(const Tensor& x, const Shape& shape);  // reshape recorded as UnsafeViewBackward0, not a view
Tensor expand(const Tensor& x, const Shape& shape);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor t(const Tensor& x);
// dims: none (every size-1 dim), or given as one int or (`dim_sequence`) as a sequence, PyTorch's
// squeeze, squeeze.dim and squeeze.dims, whose nodes are SqueezeBackward0/1/2 (a sequence of one dim too).
Tensor squeeze(const Tensor& x, std::optional<std::vector<int64_t>> dims, bool dim_sequence);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim);
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
// x's parts along dim, of the given extents (split_with_sizes; SplitWithSizesBackward0, or
// SplitBackward0 for torch.split's equal parts), or of one element without dim (unbind;
// UnbindBackward0): views that are the outputs of one node, as PyTorch's.
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim, bool with_sizes);
std::vector<Tensor> unbind(const Tensor& x, int64_t dim);
// The diagonal `offset` of dims dim1 and dim2, as the last dim of a view; DiagonalBackward0.
Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2);
// The windows of `size` elements `step` apart along `dimension`, as a new last dim of a view; UnfoldBackward0.
Tensor unfold(const Tensor& x, int64_t dimension, int64_t size, int64_t step);
Tensor alias_view(const Tensor& x);  // x[...]: a view of the whole tensor (AliasBackward0)
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// In place (self's shape and strides change; TBackward1, TransposeBackward1, SqueezeBackward3/4/5,
// UnsqueezeBackward1).
Tensor t_(const Tensor& self);
Tensor transpose_(const Tensor& self, int64_t dim0, int64_t dim1);
Tensor squeeze_(const Tensor& self, std::optional<std::vector<int64_t>> dims, bool dim_sequence);
Tensor unsqueeze_(const Tensor& self, int64_t dim);

// ---- indexing (ops/index.cpp). `indices` has one entry per leading dim of x; an undefined
// entry keeps that dim whole. Index tensors are int64 or bool masks (a k-dim mask covers k dims).
Tensor index(const Tensor& x, const std::vector<Tensor>& indices);
// weight[indices] (rows of a 2-D weight, int64 indices) as one EmbeddingBackward0 node: backward sums
// the looked-up rows' gradients into the weight's in index order, none into `padding_row` (-1: no
// such row), each divided by how often its index occurs when `scale_grad_by_freq`.
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_row, bool scale_grad_by_freq);
Tensor index_put_(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate);
// Along one dim (index has x's number of dims, at least 1; entries in [0, size)): out[i] = x[.., index[i], ..]
// (gather) and self[.., index[i], ..] = src[i] or combined with it (scatter_). `name` is the node's
// name: the ops composed over these in the shared layer show PyTorch's own.
// Amax/Amin keep the larger/smaller value, a NaN from either side winning (as PyTorch's scatter_reduce).
enum class ScatterReduce { None, Add, Multiply, Amax, Amin };
// `checked`: the tensor PyTorch's node saves (the op's input), whose in-place change before backward
// is then an error; none for IndexSelectBackward0, which saves only sizes.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, const char* name, const Tensor& checked = Tensor());
Tensor scatter_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, ScatterReduce reduce,
                const char* name);

// A parsed Python index `x[key]`: views applied in order (ints select, slices slice, None
// unsqueezes), then optional advanced indices over the dims of the resulting view.
struct IndexStep {
  enum Kind { Select, Slice, Unsqueeze } kind = Select;
  int64_t dim = 0;
  int64_t index = 0;                   // Select
  std::optional<int64_t> start, stop;  // Slice
  int64_t step = 1;                    // Slice
};
struct IndexSpec {
  std::vector<IndexStep> steps;
  std::vector<Tensor> advanced;  // empty when the key has no tensor/list indices
};
Tensor getitem(const Tensor& x, const IndexSpec& spec);
void setitem(const Tensor& self, const IndexSpec& spec, const Tensor& value);

// ---- products (ops/matmul.cpp)
Tensor dot(const Tensor& a, const Tensor& b);
Tensor mv(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// beta * input + alpha * (mat1 @ mat2), input broadcast to the product's shape (PyTorch's addmm).
Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, const Scalar& beta, const Scalar& alpha);
Tensor matmul(const Tensor& a, const Tensor& b);
// F.linear as ATen's linear routes it: with a bias that is a vector (once squeezed) and an input of rank 2,
// or contiguous of another rank, one addmm (the bias in its epilogue), the input viewed as rows around
// it; without a bias (undefined) input @ weight^T; otherwise that product, then the bias added in place.
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias);

// ---- fused neural-network ops (ops/nn.cpp). Their backwards are direct loops too (as PyTorch's
// _softmax_backward_data, nll_loss_backward and gelu_backward kernels): ops with nodes of their
// own, recorded in a backward with create_graph (see nn.cpp).
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// scaled_dot_product_attention's scores: query key^T * scale over the last two dims, then `bias`
// (may be undefined) added in place, or is_causal's mask (`causal`), as ATen's math path.
Tensor attention_scores(const Tensor& query, const Tensor& key, double scale, const Tensor& bias, bool causal);
// scaled_dot_product_attention fused (ops/attention.cpp) for the inputs flash_attention_case accepts,
// those PyTorch sends to its CPU flash kernel (no mask but `causal`, no dropout; RuntimeError for others).
bool flash_attention_case(const Tensor& query, const Tensor& key, const Tensor& value);
Tensor flash_attention(const Tensor& query, const Tensor& key, const Tensor& value, double scale, bool causal);
enum class Reduction { None, Mean, Sum };
Reduction reduction_from_name(const std::string& name);  // "none" | "mean" | "sum", else ValueError
// `weight` may be undefined (every class weighs 1).
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction,
                int64_t ignore_index);
enum class GeluApproximation { None, Tanh };
GeluApproximation gelu_approximation_from_name(const std::string& name);  // "none" | "tanh", else RuntimeError
Tensor gelu(const Tensor& x, GeluApproximation approximate);

// ---- activations with parameters (ops/activation.cpp), floating tensors: one vector pass each way.
// leaky_relu_for_inplace is what leaky_relu_ (below) writes: its node saves the result.
Tensor leaky_relu(const Tensor& x, double slope);
Tensor leaky_relu_for_inplace(const Tensor& x, double slope);
Tensor hardtanh(const Tensor& x, double min, double max);

// ---- convolution (ops/conv.cpp): input (N, C, H, W), weight (O, C / groups, kh, kw), bias (O) or
// undefined; float32 and float64. 3-D input and weight (N, C, W) / (O, C / groups, kw) are the
// 1-D convolution, with the height's stride, padding and dilation 1, 0, 1. PyTorch's argument
// checks are the caller's (nn/functional.py).
struct ConvParams {
  int64_t stride[2], padding[2], dilation[2], groups;
};
Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& params);
// The transposed convolution of input (N, Ci, H, W) by weight (Ci, Co / groups, kh, kw), bias (Co) or
// undefined: the input gradient of the convolution by `weight` whose output has input's size, of size
// (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1 (and so for W).
// ConvolutionBackward0, as PyTorch's.
Tensor conv_transpose(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& params,
                      const std::array<int64_t, 2>& output_padding);
// The weight and bias gradients of convolution(input, weight, bias, params) given `grad`, the gradient
// of its output: ops of their own so that the convolution's double backward can differentiate them.
// Recorded (ConvolutionBackwardBackward0, as PyTorch's) when any of grad, input, weight requires grad,
// as PyTorch records its one node for the three gradients.
Tensor convolution_weight_grad(const Tensor& grad, const Tensor& input, const Tensor& weight, const ConvParams& params);
Tensor convolution_bias_grad(const Tensor& grad, const Tensor& input, const Tensor& weight);
// F.unfold: the kernel-sized blocks of images ((N,) C, H, W) as columns ((N,) C * kh * kw, L), zero where
// they reach into the padding (Im2ColBackward0); F.fold: the columns summed back onto images of
// `output_size` (Col2ImBackward0). Each is the other's backward. Only the stride, padding and dilation
// of `params` are read.
Tensor unfold_blocks(const Tensor& input, const std::array<int64_t, 2>& kernel, const ConvParams& params);
Tensor fold_blocks(const Tensor& input, const std::array<int64_t, 2>& output_size, const std::array<int64_t, 2>& kernel,
                   const ConvParams& params);

// ---- pooling (ops/pool.cpp) over the last two dims of a (C, H, W) or (N, C, H, W) input; a 1-D
// pool is the caller's height-1 case. float32 and float64 (float16 and bfloat16 computed in
// float32); max pooling also int64 (and the integer types computed in it). The max pools return
// (values, int64 indices into each H x W plane), as PyTorch. PyTorch's argument checks are the
// caller's (nn/functional.py).
struct PoolParams {
  int64_t kernel[2], stride[2], padding[2], dilation[2];
  bool ceil_mode;
};
std::pair<Tensor, Tensor> max_pool2d(const Tensor& x, const PoolParams& params);
std::pair<Tensor, Tensor> adaptive_max_pool2d(const Tensor& x, int64_t out_h, int64_t out_w);
// divisor_override 0: none. The dilation is 1.
Tensor avg_pool2d(const Tensor& x, const PoolParams& params, bool count_include_pad, int64_t divisor_override);
Tensor adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w);
// Each plane of x written into a zero plane of out_h x out_w at its indices (max pooling's).
Tensor max_unpool2d(const Tensor& x, const Tensor& indices, int64_t out_h, int64_t out_w);

// ---- resampling (ops/upsample.cpp): F.interpolate's modes but area over the spatial dims of an
// (N, C, *spatial) input, 1 to 3 of them, to `output_size`; `scales` (one per spatial dim, or empty)
// are the scale factors PyTorch's kernels read for the source positions (0: none). Linear is
// linear, bilinear or trilinear by the number of spatial dims; cubic (bicubic) and `antialias`
// (linear and cubic) take 2. float32 and float64 (float16 and bfloat16 computed in float32 but
// antialiased). PyTorch's argument checks are the caller's (nn/functional.py).
enum class UpsampleMode { Nearest, NearestExact, Linear, Cubic };
Tensor upsample(const Tensor& x, UpsampleMode mode, const std::vector<int64_t>& output_size,
                const std::vector<double>& scales, bool align_corners, bool antialias);

// ---- batch and group normalization (ops/normalization.cpp): input (N, C, *), float32 and float64;
// weight, bias and the running stats (C) in its dtype, or undefined. batch_norm normalizes each
// channel with the batch's statistics (`training`: the running stats, when given, move `momentum`
// of the way to the batch's mean and unbiased variance, in place) or with the running stats;
// group_norm each (sample, group of C / groups consecutive channels). PyTorch's argument checks are
// the caller's (nn/functional.py).
Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps);
Tensor group_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t groups, double eps);
// layer_norm over the trailing `normalized_dims` dims of any floating input (float16 and bfloat16
// computed in float32); weight and bias in its dtype with one value per normalized element, or
// undefined (NativeLayerNormBackward0).
Tensor layer_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t normalized_dims, double eps);

// ---- recurrent layers (ops/recurrent.cpp): one direction of one layer over all time steps, given
// `projected` (T, B, G * H), the input projection x W_ih^T + b_ih of every step (G gates: 1 for RNN,
// 4 for LSTM's i, f, g, o, 3 for GRU's r, z, n), the initial h0 (B, H), LSTM's c0 (B, H) (else
// undefined), w_hh (G * H, H) and b_hh (G * H) or undefined; `reverse` runs from the last step.
// Returns the states (1, T, B, H), LSTM's (2, T, B, H) (h, then c), of every step in time order;
// float32 and float64. One node, RnnLayerBackward0. PyTorch's argument checks
// are the caller's (nn/rnn.py).
using RecurrentMode = RecurrentCell;  // kernels/kernel_table.h
RecurrentMode recurrent_mode_from_name(const std::string& name);  // RNN_TANH, RNN_RELU, LSTM, GRU
Tensor recurrent_layer(RecurrentMode mode, const Tensor& projected, const Tensor& h0, const Tensor& c0,
                       const Tensor& w_hh, const Tensor& b_hh, bool reverse);

}  // namespace fg
