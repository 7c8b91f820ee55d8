// Scalar special functions the C++ library lacks (erfinv, digamma, polygamma), in double, with
// PyTorch's algorithms (ATen/native/Math.h, from Cephes) so that values and special cases match;
// and GELU in double from the C library's erfc and tanh (the float64 GELU kernels, and the oracle of
// the float32 ones: elementwise_impl.h); and the float64 values of atan2, hypot, logaddexp and
// logaddexp2 (the float64 kernels of float_binary_impl.h and the strided loops of ops/float_binary.cpp).
// Their pure-Python twin (reference/_math.py) computes the same bits: only IEEE arithmetic and the C
// library functions that Python's math and float call unchanged (atan2, exp, log1p, pow, sqrt, frexp,
// ldexp). The files that call them (the ISA files, ops/float_binary.cpp) are compiled with
// -ffp-contract=off, so no a * b + c there is fused (Python's floats never fuse).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace fg::special {

inline constexpr double kPi = 3.14159265358979323846;

// A rational first guess, then two Newton steps on erf(x) = y.
inline double erfinv(double y) {
  constexpr double a[4] = {0.886226899, -1.645349621, 0.914624893, -0.140543331};
  constexpr double b[4] = {-2.118377725, 1.442710462, -0.329097515, 0.012229801};
  constexpr double c[4] = {-1.970840454, -1.624906493, 3.429567803, 1.641345311};
  constexpr double d[2] = {3.543889200, 1.637067800};
  double y_abs = std::fabs(y);
  if (!(y_abs <= 1.0)) return std::numeric_limits<double>::quiet_NaN();
  if (y_abs == 1.0) return std::copysign(std::numeric_limits<double>::infinity(), y);
  double x;
  if (y_abs <= 0.7) {
    double z = y * y;
    double num = ((a[3] * z + a[2]) * z + a[1]) * z + a[0];
    double dem = (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1.0;
    x = y * num / dem;
  } else {
    double z = std::sqrt(-std::log((1.0 - y_abs) / 2.0));
    double num = ((c[3] * z + c[2]) * z + c[1]) * z + c[0];
    double dem = (d[1] * z + d[0]) * z + 1.0;
    x = std::copysign(num, y) / dem;
  }
  for (int step = 0; step < 2; ++step) x -= (std::erf(x) - y) / ((2.0 / std::sqrt(kPi)) * std::exp(-x * x));
  return x;
}

// Reflection for negative x, the recurrence up to 10, then the asymptotic series.
inline double digamma(double x) {
  constexpr double kPsi10 = 2.25175258906672110764;
  if (x == 0) return std::copysign(std::numeric_limits<double>::infinity(), -x);
  if (x < 0) {
    if (x == std::trunc(x)) return std::numeric_limits<double>::quiet_NaN();
    double whole;
    double fraction = std::modf(x, &whole);
    return digamma(1 - x) - kPi / std::tan(kPi * fraction);
  }
  double result = 0;
  while (x < 10) {
    result -= 1 / x;
    x += 1;
  }
  if (x == 10) return result + kPsi10;
  constexpr double A[] = {8.33333333333333333333E-2,  -2.10927960927960927961E-2, 7.57575757575757575758E-3,
                          -4.16666666666666666667E-3, 3.96825396825396825397E-3,  -8.33333333333333333333E-3,
                          8.33333333333333333333E-2};
  double y = 0;
  if (x < 1.0e17) {
    double z = 1.0 / (x * x);
    double series = A[0];
    for (int i = 1; i < 7; ++i) series = series * z + A[i];
    y = z * series;
  }
  return result + std::log(x) - (0.5 / x) - y;
}

inline double trigamma(double x) {
  double sign = 1, result = 0;
  if (x < 0.5) {
    sign = -1;
    double s = std::sin(kPi * x);
    result -= (kPi * kPi) / (s * s);
    x = 1 - x;
  }
  for (int i = 0; i < 6; ++i) {
    result += 1 / (x * x);
    x += 1;
  }
  double ixx = 1 / (x * x);
  result += (1 + 1 / (2 * x) + ixx * (1. / 6 - ixx * (1. / 30 - ixx * (1. / 42)))) / x;
  return sign * result;
}

// The Hurwitz zeta function zeta(x, q), by Euler-Maclaurin summation.
inline double zeta(double x, double q) {
  constexpr double kMachEp = 1.11022302462515654042E-16;
  constexpr double A[] = {12.0,
                          -720.0,
                          30240.0,
                          -1209600.0,
                          47900160.0,
                          -1.8924375803183791606e9,
                          7.47242496e10,
                          -2.950130727918164224e12,
                          1.1646782814350067249e14,
                          -4.5979787224074726105e15,
                          1.8152105401943546773e17,
                          -7.1661652561756670113e18};
  if (x == 1) return std::numeric_limits<double>::infinity();
  if (x < 1) return std::numeric_limits<double>::quiet_NaN();
  if (q <= 0) {
    if (q == std::trunc(q)) return std::numeric_limits<double>::infinity();
    if (x != std::trunc(x)) return std::numeric_limits<double>::quiet_NaN();
  }
  double s = std::pow(q, -x), a = q, b = 0;
  int i = 0;
  while (i < 9 || a <= 9) {
    i += 1;
    a += 1;
    b = std::pow(a, -x);
    s += b;
    if (-kMachEp * s < b && b < kMachEp * s) return s;
  }
  double w = a, k = 0;
  s += b * w / (x - 1);
  s -= 0.5 * b;
  a = 1;
  for (double coefficient : A) {
    a *= x + k;
    b /= w;
    double t = a * b / coefficient;
    s += t;
    if (std::fabs(t / s) < kMachEp) return s;
    k += 1;
    a *= x + k;
    b /= w;
    k += 1;
  }
  return s;
}

// The n-th derivative of digamma.
inline double polygamma(int64_t n, double x) {
  if (n == 0) return digamma(x);
  if (n == 1) return trigamma(x);
  return (n % 2 ? 1.0 : -1.0) * std::exp(std::lgamma(n + 1.0)) * zeta(n + 1.0, x);
}

// ---- gelu(x) = x P(X <= x) for a standard normal X; approximate='tanh' is PyTorch's tanh formula.
// PyTorch's constants, spelled as its kernels spell them (python/fastgrad/reference/_nn.py uses the
// same literals and the same libm functions through math.erfc and math.tanh: the same bits).
inline constexpr double kGeluSqrt1_2 = 0.70710678118654752440;  // M_SQRT1_2
inline constexpr double kGeluAlpha = 1.12837916709551257390 * kGeluSqrt1_2 * 0.5;  // 1/sqrt(2 pi)
inline constexpr double kGeluBeta = 1.41421356237309504880 * 1.12837916709551257390 * 0.5;  // sqrt(2/pi)
inline constexpr double kGeluKappa = 0.044715;

// P(X <= x) = erfc(-x / sqrt(2)) / 2: PyTorch's (1 + erf(x / sqrt(2))) / 2 without its cancellation
// below x = -3 (where 1 + erf loses the tail: 0 from x = -8.3 on, gelu(-10) = -7.6e-23 is not 0).
inline double normal_cdf(double x) { return 0.5 * std::erfc(-x * kGeluSqrt1_2); }

// With approximate='tanh': 0.5 x (1 + tanh(u)) = x s, u = sqrt(2/pi) (x + 0.044715 x^3), s = 1 / (1 +
// e) the logistic function of 2u, e = exp(-2u): PyTorch's value without its cancellation in 1 +
// tanh(u) below x = -3 (0 from x = -7.2 on). Returns s.
inline double gelu_tanh_logistic(double x, double& e) {
  e = std::exp(-(x * (2 * kGeluBeta * kGeluKappa * (x * x) + 2 * kGeluBeta)));
  return 1 / (1 + e);
}

inline double gelu(double x, bool tanh) {
  double e;
  return tanh ? x * gelu_tanh_logistic(x, e) : x * normal_cdf(x);
}

// d gelu / dx: with 'none', P(X <= x) + x p(x), p the normal density (as PyTorch's GeluBackwardKernel);
// with 'tanh', 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) u' = s (1 + 2 x u' (1 - s)), u' = sqrt(2/pi)
// (1 + 3 * 0.044715 x^2), 1 - s = e s below s = 1/2 (where e is at most 1) and 1 - s above it.
inline double gelu_derivative(double x, bool tanh) {
  if (tanh) {
    double e;
    double s = gelu_tanh_logistic(x, e);
    double du = 3 * kGeluBeta * kGeluKappa * (x * x) + kGeluBeta;
    return s * (1 + 2 * x * du * (s < 0.5 ? 1 - s : e * s));
  }
  return normal_cdf(x) + x * (kGeluAlpha * std::exp(-0.5 * x * x));
}

// ---- the float functions of two operands in double
// A NaN operand is the result, the first one when both are: a choice, so that every backend gives
// the same NaN bits (the C library's is whatever its arithmetic leaves).
inline double atan2(double y, double x) {
  if (std::isnan(y) || std::isnan(x)) return std::isnan(y) ? y : x;
  return std::atan2(y, x);
}

// sqrt(x^2 + y^2) without overflow or underflow, within a rounding of the exact value: the square
// root of the sum of the squares, then Borges' correction of it from the squares' rounding errors
// (C. F. Borges, "An Improved Algorithm for hypot(a, b)", 2019), in its form without fused
// multiply-adds. Operands outside [2^-400, 2^400] (never float32's) are first scaled by a power of
// two to [0.5, 1), so that no step overflows or leaves the normal range. Not the C library's hypot:
// Python's math.hypot is another algorithm, so the reference could not give the C library's bits.
inline double hypot(double x, double y) {
  if (std::isinf(x) || std::isinf(y)) return std::numeric_limits<double>::infinity();  // even beside a NaN, as C's
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

// PyTorch's formulas: the larger operand plus log1p of the smaller one's share, which neither
// overflows nor loses small differences; equal infinities are themselves (their difference is NaN).
// 2^-|a-b| is pow(2, .) rather than exp2 (which Python's math has only from 3.11 on).
inline constexpr double kInverseLn2 = 1.4426950408889634;  // 1 / ln 2 rounded, as PyTorch's 1.0 / ln_2
inline double logaddexp(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  if (std::isinf(a) && a == b) return a;
  return std::max(a, b) + std::log1p(std::exp(-std::fabs(a - b)));
}
inline double logaddexp2(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  if (std::isinf(a) && a == b) return a;
  return std::max(a, b) + std::log1p(std::pow(2.0, -std::fabs(a - b))) * kInverseLn2;
}

}  // namespace fg::special
