// Predicates: comparisons and logical and/or (bool results, no gradient), and sign, on the shared
// maps of elementwise_maps.h.
#include "ops/elementwise_maps.h"

namespace fg {

// ---- predicates (no gradient)
namespace {
template <class T>
bool compare_values(T x, T y, CompareOp op) {
  switch (op) {
    case CompareOp::Lt: return x < y;
    case CompareOp::Le: return x <= y;
    case CompareOp::Gt: return x > y;
    case CompareOp::Ge: return x >= y;
    case CompareOp::Eq: return x == y;
    case CompareOp::Ne: return x != y;
  }
  return false;
}
}  // namespace

Tensor compare(const Tensor& a, const Tensor& b, CompareOp op) {
  return binary_map(a, b, result_type(a, b), DType::Bool, [op](auto x, auto y) { return compare_values(x, y, op); });
}
Tensor compare(const Tensor& a, const Scalar& s, CompareOp op) {
  return scalar_map(a, s, result_type(a, s), DType::Bool, [op](auto x, auto y) { return compare_values(x, y, op); });
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return binary_map(a, b, DType::Bool, DType::Bool, [](auto x, auto y) { return x && y; });
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return binary_map(a, b, DType::Bool, DType::Bool, [](auto x, auto y) { return x || y; });
}
// sign is piecewise constant: its gradient is zero (but, as in PyTorch, it is recorded).
FG_NODE(SignBackward0);
GradList SignBackward0::apply(GradList&& grads) { return {zeros_like(grads[0])}; }
Tensor sign(const Tensor& x) {
  Tensor out = unary_map(x, x->dtype, [](auto v) { return static_cast<decltype(v)>((v > 0) - is_negative(v)); });
  record<SignBackward0>(out, {&x});
  return out;
}

}  // namespace fg
