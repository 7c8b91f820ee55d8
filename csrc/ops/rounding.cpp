// Rounding and sign ops of one tensor (issue 13): floor, ceil, trunc, round (to decimals), frac, sgn
// and nan_to_num, each forward with its backward node. As PyTorch: integer tensors keep their dtype
// (floor, ceil, trunc and round copy them; bool raises), frac and round(decimals=) take floats only.
#include <cmath>
#include <limits>

#include "ops/elementwise_maps.h"

namespace fg {

namespace {
// out = f(x) for floats, a copy for integers; recorded as N, whose gradient is zero.
template <class N, class F>
Tensor whole_number_map(const Tensor& x, const char* kernel, F f) {
  if (x->dtype == DType::Bool) throw not_implemented_for(kernel, x->dtype);
  Tensor out = unary_map(x, x->dtype, [f](auto v) {
    if constexpr (std::is_floating_point_v<decltype(v)>) return f(v);
    else return v;
  });
  record<N>(out, {&x});
  return out;
}

void require_floating(const Tensor& x, const char* kernel) {
  if (!is_floating(x->dtype)) throw not_implemented_for(kernel, x->dtype);
}
}  // namespace

// Piecewise constant: the gradient is zero (but, as in PyTorch, the op is recorded).
#define FG_WHOLE_NUMBER_OP(Name, Node, kernel, f)                           \
  FG_NODE(Node);                                                            \
  GradList Node::apply(GradList&& grads) { return {zeros_like(grads[0])}; } \
  Tensor Name(const Tensor& x) {                                            \
    return whole_number_map<Node>(x, kernel, [](auto v) { return f(v); });  \
  }

FG_WHOLE_NUMBER_OP(floor, FloorBackward0, "floor_vml_cpu", std::floor)
FG_WHOLE_NUMBER_OP(ceil, CeilBackward0, "ceil_vml_cpu", std::ceil)
FG_WHOLE_NUMBER_OP(trunc, TruncBackward0, "trunc_vml_cpu", std::trunc)
FG_WHOLE_NUMBER_OP(round, RoundBackward0, "round_vml_cpu", std::nearbyint)  // halves to even

#undef FG_WHOLE_NUMBER_OP

// round(x, decimals=d), as PyTorch's kernel: nearbyint(x * 10^d) / 10^d, or for d < 0
// nearbyint(x / 10^-d) * 10^-d, in x's computation type (float32 for the 16-bit floats).
FG_NODE(RoundBackward1);
GradList RoundBackward1::apply(GradList&& grads) { return {zeros_like(grads[0])}; }
Tensor round(const Tensor& x, int64_t decimals) {
  require_floating(x, "round_cpu");
  const bool negative = decimals < 0;
  const double ten_pow = std::pow(10.0, std::fabs(static_cast<double>(decimals)));  // -INT64_MIN overflows
  Tensor out = unary_map(x, x->dtype, [negative, ten_pow](auto v) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T>) {
      const T p = static_cast<T>(ten_pow);
      return negative ? std::nearbyint(v / p) * p : std::nearbyint(v * p) / p;
    } else {
      return v;  // not reached: integers are refused above
    }
  });
  record<RoundBackward1>(out, {&x});
  return out;
}

// frac = x - trunc(x): its gradient is the incoming one.
FG_NODE(FracBackward0);
GradList FracBackward0::apply(GradList&& grads) { return {grads[0]}; }
Tensor frac(const Tensor& x) {
  require_floating(x, "frac_cpu");
  Tensor out = unary_map(x, x->dtype, [](auto v) { return v - std::trunc(v); });
  record<FracBackward0>(out, {&x});
  return out;
}

// sgn of a real tensor is its sign (0 for NaN), with a zero gradient.
FG_NODE(SgnBackward0);
GradList SgnBackward0::apply(GradList&& grads) { return {zeros_like(grads[0])}; }
Tensor sgn(const Tensor& x) {
  Tensor out;
  {
    GradModeGuard no_grad(false);
    out = sign(x);
  }
  record<SgnBackward0>(out, {&x});
  return out;
}

// NaN, +inf and -inf replaced by the given values (by default 0, the dtype's largest and lowest
// finite values), converted to x's dtype; integers are copied. The gradient passes where x is finite.
FG_NODE(NanToNumBackward0);
GradList NanToNumBackward0::apply(GradList&& grads) {
  Tensor x = unpack(0);
  Tensor finite = scalar_map(x, Scalar::from_int(0), x->dtype, DType::Bool, [](auto v, auto) {
    if constexpr (std::is_floating_point_v<decltype(v)>) return std::isfinite(v);
    else return true;
  });
  return {mul(grads[0], finite)};
}
namespace {
// The largest finite value of a float dtype.
double largest_finite(DType dtype) {
  switch (dtype) {
    case DType::Float16: return 65504.0;
    case DType::BFloat16: return 3.3895313892515355e38;
    case DType::Float32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}
}  // namespace
Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  // Converted to the element type as PyTorch's (1e40 in float32 is inf).
  const double nan_value = nan.value_or(0.0), posinf_value = posinf.value_or(largest_finite(x->dtype)),
               neginf_value = neginf.value_or(-largest_finite(x->dtype));
  Tensor out = unary_map(x, x->dtype, [=](auto v) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T>) {
      if (v != v) return static_cast<T>(nan_value);
      if (std::isinf(v)) return static_cast<T>(v > 0 ? posinf_value : neginf_value);
    }
    return v;
  });
  if (auto* node = record<NanToNumBackward0>(out, {&x})) node->save(x);
  return out;
}

}  // namespace fg
