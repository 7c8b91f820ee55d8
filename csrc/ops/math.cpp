// Float functions of one tensor (log10 ... rad2deg: issue 13's elementwise math), each forward with
// its backward node. Integer and bool tensors compute in float32, as PyTorch; the gradients are
// PyTorch's formulas (derivatives.yaml), written with ops so that they have gradients too.
#include <cmath>

#include "kernels/special_functions.h"
#include "ops/elementwise_maps.h"

namespace fg {

namespace {
enum class Saves { Input, Result, Nothing };

// out = f(x) in x's float type, recorded as node N, which saves x, out or nothing.
template <class N, class F>
N* float_map(Tensor& out, const Tensor& x, Saves saves, F f) {
  out = unary_map(x, float_type(x->dtype), f);
  N* node = record<N>(out, {&x});
  if (node && saves == Saves::Input) node->save(x);
  if (node && saves == Saves::Result) node->save(out, true);
  return node;
}

// A special function computed in double and rounded to the element type.
template <class F>
auto in_double(F f) {
  return [f](auto v) { return static_cast<decltype(v)>(f(static_cast<double>(v))); };
}

Tensor square(const Tensor& x) { return mul(x, x); }
Tensor times(const Tensor& g, double c) { return mul(g, Scalar::from_float(c)); }
constexpr double kLn2 = 0.6931471805599453, kLn10 = 2.3025850929940456;
const double kTwoOverSqrtPi = 2.0 / std::sqrt(special::kPi);
}  // namespace

#define FG_FLOAT_OP(Name, Node, saves, f) \
  Tensor Name(const Tensor& x) {          \
    Tensor out;                           \
    float_map<Node>(out, x, saves, f);    \
    return out;                           \
  }

FG_NODE(Log10Backward0);
GradList Log10Backward0::apply(GradList&& grads) { return {div(grads[0], times(unpack(0), kLn10))}; }
FG_FLOAT_OP(log10, Log10Backward0, Saves::Input, [](auto v) { return std::log10(v); })

FG_NODE(Log2Backward0);
GradList Log2Backward0::apply(GradList&& grads) { return {div(grads[0], times(unpack(0), kLn2))}; }
FG_FLOAT_OP(log2, Log2Backward0, Saves::Input, [](auto v) { return std::log2(v); })

FG_NODE(Exp2Backward0);
GradList Exp2Backward0::apply(GradList&& grads) { return {times(mul(grads[0], unpack(0)), kLn2)}; }
FG_FLOAT_OP(exp2, Exp2Backward0, Saves::Result, [](auto v) { return std::exp2(v); })

FG_NODE(SinhBackward0);
GradList SinhBackward0::apply(GradList&& grads) { return {mul(grads[0], cosh(unpack(0)))}; }
FG_FLOAT_OP(sinh, SinhBackward0, Saves::Input, [](auto v) { return std::sinh(v); })

FG_NODE(CoshBackward0);
GradList CoshBackward0::apply(GradList&& grads) { return {mul(grads[0], sinh(unpack(0)))}; }
FG_FLOAT_OP(cosh, CoshBackward0, Saves::Input, [](auto v) { return std::cosh(v); })

FG_NODE(AsinhBackward0);
GradList AsinhBackward0::apply(GradList&& grads) {
  return {mul(grads[0], rsqrt(add(square(unpack(0)), Scalar::from_int(1))))};
}
FG_FLOAT_OP(asinh, AsinhBackward0, Saves::Input, [](auto v) { return std::asinh(v); })

FG_NODE(AcoshBackward0);
GradList AcoshBackward0::apply(GradList&& grads) {
  return {mul(grads[0], rsqrt(sub(square(unpack(0)), Scalar::from_int(1))))};
}
FG_FLOAT_OP(acosh, AcoshBackward0, Saves::Input, [](auto v) { return std::acosh(v); })

FG_NODE(AtanhBackward0);
GradList AtanhBackward0::apply(GradList&& grads) {
  return {div(grads[0], rsub(square(unpack(0)), Scalar::from_int(1)))};
}
FG_FLOAT_OP(atanh, AtanhBackward0, Saves::Input, [](auto v) { return std::atanh(v); })

FG_NODE(AsinBackward0);
GradList AsinBackward0::apply(GradList&& grads) {
  return {mul(grads[0], rsqrt(rsub(square(unpack(0)), Scalar::from_int(1))))};
}
FG_FLOAT_OP(asin, AsinBackward0, Saves::Input, [](auto v) { return std::asin(v); })

FG_NODE(AcosBackward0);
GradList AcosBackward0::apply(GradList&& grads) {
  return {mul(grads[0], neg(rsqrt(rsub(square(unpack(0)), Scalar::from_int(1)))))};
}
FG_FLOAT_OP(acos, AcosBackward0, Saves::Input, [](auto v) { return std::acos(v); })

FG_NODE(TanBackward0);
GradList TanBackward0::apply(GradList&& grads) { return {mul(grads[0], add(square(unpack(0)), Scalar::from_int(1)))}; }
FG_FLOAT_OP(tan, TanBackward0, Saves::Result, [](auto v) { return std::tan(v); })

FG_NODE(AtanBackward0);
GradList AtanBackward0::apply(GradList&& grads) { return {div(grads[0], add(square(unpack(0)), Scalar::from_int(1)))}; }
FG_FLOAT_OP(atan, AtanBackward0, Saves::Input, [](auto v) { return std::atan(v); })

// erf' = 2/sqrt(pi) exp(-x^2); erfc' its negative; erfinv' = sqrt(pi)/2 exp(erfinv(x)^2), from x as
// PyTorch's (which saves x, not the result).
FG_NODE(ErfBackward0);
GradList ErfBackward0::apply(GradList&& grads) {
  return {mul(times(exp(neg(square(unpack(0)))), kTwoOverSqrtPi), grads[0])};
}
FG_FLOAT_OP(erf, ErfBackward0, Saves::Input, [](auto v) { return std::erf(v); })

FG_NODE(ErfcBackward0);
GradList ErfcBackward0::apply(GradList&& grads) {
  return {mul(times(exp(neg(square(unpack(0)))), -kTwoOverSqrtPi), grads[0])};
}
FG_FLOAT_OP(erfc, ErfcBackward0, Saves::Input, [](auto v) { return std::erfc(v); })

FG_NODE(ErfinvBackward0);
GradList ErfinvBackward0::apply(GradList&& grads) {
  return {mul(times(exp(square(erfinv(unpack(0)))), 1 / kTwoOverSqrtPi), grads[0])};
}
FG_FLOAT_OP(erfinv, ErfinvBackward0, Saves::Input, in_double(special::erfinv))

FG_NODE(LgammaBackward0);
GradList LgammaBackward0::apply(GradList&& grads) { return {mul(grads[0], digamma(unpack(0)))}; }
FG_FLOAT_OP(lgamma, LgammaBackward0, Saves::Input, [](auto v) { return std::lgamma(v); })

FG_NODE(DigammaBackward0);
GradList DigammaBackward0::apply(GradList&& grads) { return {mul(grads[0], polygamma(1, unpack(0)))}; }
FG_FLOAT_OP(digamma, DigammaBackward0, Saves::Input, in_double(special::digamma))

struct PolygammaNode : Node {
  int64_t n = 0;
};
FG_NODE_FROM(PolygammaBackward0, PolygammaNode);
GradList PolygammaBackward0::apply(GradList&& grads) { return {mul(grads[0], polygamma(n + 1, unpack(0)))}; }
Tensor polygamma(int64_t n, const Tensor& x) {
  Tensor out;
  auto f = [n](double v) { return special::polygamma(n, v); };
  if (auto* node = float_map<PolygammaBackward0>(out, x, Saves::Input, in_double(f))) node->n = n;
  return out;
}

FG_NODE(RsqrtBackward0);
GradList RsqrtBackward0::apply(GradList&& grads) {
  Tensor y = unpack(0);
  return {times(mul(grads[0], mul(y, square(y))), -0.5)};
}
FG_FLOAT_OP(rsqrt, RsqrtBackward0, Saves::Result, [](auto v) { return decltype(v)(1) / std::sqrt(v); })

// Multiplications by a constant, rounded to the element type first, as PyTorch's x * (pi / 180).
constexpr double kRadiansPerDegree = special::kPi / 180;
FG_NODE(Deg2RadBackward0);
GradList Deg2RadBackward0::apply(GradList&& grads) { return {times(grads[0], kRadiansPerDegree)}; }
FG_FLOAT_OP(deg2rad, Deg2RadBackward0, Saves::Nothing,
            [](auto v) { return v * static_cast<decltype(v)>(kRadiansPerDegree); })

FG_NODE(Rad2DegBackward0);
GradList Rad2DegBackward0::apply(GradList&& grads) { return {times(grads[0], 1 / kRadiansPerDegree)}; }
FG_FLOAT_OP(rad2deg, Rad2DegBackward0, Saves::Nothing,
            [](auto v) { return v * static_cast<decltype(v)>(1 / kRadiansPerDegree); })

#undef FG_FLOAT_OP

// PyTorch has no derivative for the in-place asinh_, acosh_ and atanh_: their node (AsinhBackward1,
// ...) raises in backward.
struct NoInplaceDerivativeNode : Node {
  const char* op = "";
};
FG_NODE_UNNAMED(NoInplaceDerivative, NoInplaceDerivativeNode);
GradList NoInplaceDerivative::apply(GradList&&) {
  throw NotImplementedError(cat("the derivative for 'inplace version of ", op, "' is not implemented."));
}
namespace {
Tensor without_derivative(const Tensor& x, Tensor (*op)(const Tensor&), const char* name, const char* node_name) {
  Tensor out;
  {
    GradModeGuard no_grad(false);
    out = op(x);
  }
  if (auto* node = record<NoInplaceDerivative>(out, {&x}, node_name)) node->op = name;
  return out;
}
}  // namespace
Tensor asinh_for_inplace(const Tensor& x) { return without_derivative(x, asinh, "asinh", "AsinhBackward1"); }
Tensor acosh_for_inplace(const Tensor& x) { return without_derivative(x, acosh, "acosh", "AcoshBackward1"); }
Tensor atanh_for_inplace(const Tensor& x) { return without_derivative(x, atanh, "atanh", "AtanhBackward1"); }

// ---- predicates
// signbit: the sign bit of floats (so -0.0 and -NaN are negative), x < 0 for integers.
Tensor signbit(const Tensor& x) {
  return scalar_map(x, Scalar::from_int(0), x->dtype, DType::Bool, [](auto v, auto) {
    if constexpr (std::is_floating_point_v<decltype(v)>) return std::signbit(v);
    else return is_negative(v);
  });
}

}  // namespace fg
