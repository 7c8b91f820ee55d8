// Float functions of two operands (atan2, hypot, logaddexp, logaddexp2, copysign): their values in
// the operands' promoted float type (integers compute in the default dtype), without a node: the
// Python layer records PyTorch's node over them, whose gradient formulas are compositions of ops.
// Every value is computed in double and rounded once to the element type (the 16-bit floats through
// float32, as every op computes them). The pure-Python reference (reference/_math.py) computes the
// same bits with the same steps: only IEEE arithmetic and the C library functions that Python's math
// and float calls unchanged (atan2, exp, log1p, pow, sqrt, frexp, ldexp, copysign). This file is
// compiled with -ffp-contract=off, so no a * b + c here is fused (Python's floats never fuse).
#include <algorithm>
#include <cmath>
#include <utility>

#include "ops/elementwise_maps.h"

namespace fg {

namespace {
// A NaN operand is the result, the first one when both are: a choice, so that every backend gives
// the same NaN bits (the C library's is whatever its arithmetic leaves).
double atan2_value(double y, double x) {
  if (std::isnan(y) || std::isnan(x)) return std::isnan(y) ? y : x;
  return std::atan2(y, x);
}

// sqrt(x^2 + y^2) without overflow or underflow, within a rounding of the exact value: the square
// root of the sum of the squares, then Borges' correction of it from the squares' rounding errors
// (C. F. Borges, "An Improved Algorithm for hypot(a, b)", 2019), in its form without fused
// multiply-adds. Operands outside [2^-400, 2^400] (never float32's) are first scaled by a power of
// two to [0.5, 1), so that no step overflows or leaves the normal range. Not the C library's hypot:
// Python's math.hypot is another algorithm, so the reference could not give the C library's bits.
double hypot_value(double x, double y) {
  if (std::isinf(x) || std::isinf(y)) return INFINITY;  // even beside a NaN, as C's hypot
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) ? x : y;
  // Both corrections computed and one chosen, and max/min rather than a swap: the choices are
  // random for random operands, and branches on them mispredict (1.4x the speed here).
  double a = std::max(std::fabs(x), std::fabs(y)), b = std::min(std::fabs(x), std::fabs(y));
  if (b == 0 || b < a * 0x1p-54) return a;  // b^2 is below half of a's last place in a^2
  int e = 0;
  if (a > 0x1p400 || b < 0x1p-400) {
    std::frexp(a, &e);
    a = std::ldexp(a, -e);  // exact: b / a >= 2^-54 keeps b normal
    b = std::ldexp(b, -e);
  }
  double h = std::sqrt(a * a + b * b);
  double near = h - b, far = h - a;  // h - b when h <= 2b, else h - a
  double near_error = a * (2 * near - a) + (near - 2 * (a - b)) * near;
  double far_error = 2 * far * (a - 2 * b) + ((4 * far - b) * b + far * far);
  double error = h <= 2 * b ? near_error : far_error;
  h -= error / (2 * h);
  return e == 0 ? h : std::ldexp(h, e);
}

// hypot of float32 operands (the 16-bit floats too, computed in float32): their squares are exact
// in double and their sum neither overflows nor underflows there, so the plain formula in double
// is close enough to round to the float32 hypot, at a fraction of the cost of the one above.
double hypot_of_floats(double x, double y) {
  if (std::isinf(x) || std::isinf(y)) return INFINITY;
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) ? x : y;
  return std::sqrt(x * x + y * y);
}

// PyTorch's formulas: the larger operand plus log1p of the smaller one's share, which neither
// overflows nor loses small differences; equal infinities are themselves (their difference is NaN).
// 2^-|a-b| is pow(2, .) rather than exp2 (which Python's math has only from 3.11 on).
constexpr double kInverseLn2 = 1.4426950408889634;  // 1 / ln 2 rounded, as PyTorch's 1.0 / ln_2
double logaddexp_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  if (std::isinf(a) && a == b) return a;
  return std::max(a, b) + std::log1p(std::exp(-std::fabs(a - b)));
}
double logaddexp2_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  if (std::isinf(a) && a == b) return a;
  return std::max(a, b) + std::log1p(std::pow(2.0, -std::fabs(a - b))) * kInverseLn2;
}

double copysign_value(double x, double y) { return std::copysign(x, y); }

// f as the element function of every element type T: computed in double, rounded once to T.
template <double (*f)(double, double)>
auto in_double =
    [](auto x, auto y) { return static_cast<decltype(x)>(f(static_cast<double>(x), static_cast<double>(y))); };

// op(a, b) for b a tensor or a number, each op's function inlined in its loop.
template <class B>
Tensor float_map(const Tensor& a, const B& b, FloatBinary op) {
  if constexpr (std::is_same_v<B, Tensor>) broadcast_shapes(a->shape, b->shape);  // checked first, as PyTorch
  DType dt = float_type(result_type(a, b));
  auto map = [&](auto f) {
    if constexpr (std::is_same_v<B, Tensor>) return binary_map(a, b, dt, dt, f);
    else return scalar_map(a, b, dt, dt, f);
  };
  switch (op) {
    case FloatBinary::Atan2: return map(in_double<atan2_value>);
    case FloatBinary::Hypot:
      return map([](auto x, auto y) {
        if constexpr (std::is_same_v<decltype(x), float>) return in_double<hypot_of_floats>(x, y);
        else return in_double<hypot_value>(x, y);
      });
    case FloatBinary::Logaddexp: return map(in_double<logaddexp_value>);
    case FloatBinary::Logaddexp2: return map(in_double<logaddexp2_value>);
    case FloatBinary::Copysign: return map(in_double<copysign_value>);
  }
  throw RuntimeError("float_binary: unknown op");  // not reached: the switch names every op
}
}  // namespace

Tensor float_binary(const Tensor& a, const Tensor& b, FloatBinary op) { return float_map(a, b, op); }
Tensor float_binary(const Tensor& a, const Scalar& b, FloatBinary op) { return float_map(a, b, op); }

}  // namespace fg
