// The vector kernels of atan2, hypot, logaddexp and logaddexp2 (ops/float_binary.cpp), written once
// against simd.h and compiled once per ISA.
//
// float64: the C library's functions element by element (special_functions.h), the bits of Python's
// math through the reference backend.
// float32 (and the 16-bit floats, which compute through it): each float widened to a double lane,
// the function computed there by the explicit algorithms below and rounded once to float. Only IEEE
// operations, each rounded once: + - * / sqrt, comparisons and selections, rounding to an integer,
// scaling by a power of two; no fused multiply-add (the ISA files are compiled with
// -ffp-contract=off, and fma() is not called) and no library call. So every ISA gives the same bits,
// and the reference (reference/_math.py, the *_of_floats functions) repeats the same operations in
// the same order on Python's floats to give them too. The double results are accurate to a few
// units of 2^-53 (the polynomials' fits: .ci/fit_float_binary.py), so the float results are nearly
// always the correctly rounded ones, and otherwise 1 ulp from them. Measured (AVX-512; the other ISAs
// give the same bits) over 15 million random pairs per function, 5 million of each kind: both
// operands of any finite float32 exponent and sign; of like magnitude (within a factor 4); standard
// normal x 10: every result equal to the correctly rounded value (the double C library's value
// rounded, and mpmath's where they would disagree: they never did). Also for 20,000 pairs next to
// logaddexp's cancellation (e^a + e^b next to 1, results down to 2e-9; there max + log1p(e) loses
// relative accuracy in double, as the C library formula does). tests/test_float_binary.py checks
// 800,000 pairs of these kinds on every run.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/elementwise_impl.h"
#include "kernels/special_functions.h"

namespace fg::simd::FG_ISA_NAMESPACE {

inline constexpr double kPi = 3.141592653589793, kHalfPi = 1.5707963267948966, kQuarterPi = 0.7853981633974483;
inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

// ---- atan2(y, x): t = min(|x|, |y|) / max(|x|, |y|) in [0, 1]; atan(t) = atan(r) with r = t for
// t <= tan(pi/8), else pi/4 + atan(r) with r = (t - 1) / (t + 1), both forms one division: (lo - hi)
// and (lo + hi) are exact for floats within a factor 2.5 of each other. |r| <= tan(pi/8), where
// atan(r) = r + r z P(z), z = r^2, P a minimax fit of 10 terms (relative error of the evaluation
// 1.5e-16). Then pi/2 - atan(t) where |y| > |x|, pi - that where x's sign is negative, and y's sign.
// The special cases of C's atan2 follow from it: 0 / 0 (both zero) is taken as 0, inf / inf as 1.
inline constexpr double kTanEighthPi = 0.41421356237309503;
inline constexpr double kAtanP[] = {
    0.021259793447206497, -0.043590909504491064, 0.05692537441818354,  -0.0664112088083165, 0.07690068262541097,
    -0.09090782409558172, 0.11111106653450764,   -0.14285714195257618, 0.19999999999088905, -0.3333333333333015};

// |x|, |y|, the smaller and the larger of them, and the mask of the lanes reduced to (t - 1) / (t + 1).
inline auto atan2_reduction(Vec<double> y, Vec<double> x, Vec<double>& ax, Vec<double>& ay, Vec<double>& lo,
                            Vec<double>& hi) {
  ax = abs(x);
  ay = abs(y);
  lo = min(ax, ay);
  hi = max(ax, ay);
  return gt(lo, hi * splat(kTanEighthPi));
}

// The first pass: r.
inline Vec<double> atan2_argument(Vec<double> y, Vec<double> x) {
  Vec<double> ax, ay, lo, hi;
  const auto reduced = atan2_reduction(y, x, ax, ay, lo, hi);
  return select(reduced, lo - hi, lo) / select(reduced, lo + hi, hi);
}

// The second: atan(r), the quadrant and the special cases.
inline Vec<double> atan2_of_argument(Vec<double> y, Vec<double> x, Vec<double> r) {
  Vec<double> ax, ay, lo, hi;
  const auto reduced = atan2_reduction(y, x, ax, ay, lo, hi);
  const Vec<double> z = r * r;
  Vec<double> v = r + r * z * polynomial<false>(z, kAtanP);
  v = select(reduced, v + splat(kQuarterPi), v);
  // The rare lanes, a branch rather than selections on every vector: 0 / 0 and inf / inf (v is NaN),
  // NaN operands (x + y is NaN, as for opposite infinities, which v covers too)
  const bool unusual = any(mask_or(ne(v, v), ne(x + y, x + y)));
  if (unusual) {
    v = select(eq(hi, splat(0.0)), splat(0.0), v);
    v = select(eq(lo, splat(kInfinity)), splat(kQuarterPi), v);
  }
  v = select(gt(ay, ax), splat(kHalfPi) - v, v);
  v = select(sign_bit(x), splat(kPi) - v, v);
  v = copysign(v, y);
  // A NaN operand is the result, the first one when both are (special::atan2's rule); y + y: quiet, as
  // widening a signaling NaN leaves it on the vector ISAs, where the scalar ISA's compiler would
  // otherwise hand back the float's own bits (it folds the float -> double -> float round trip)
  return unusual ? select(ne(y, y), y + y, select(ne(x, x), x + x, v)) : v;
}

// ---- hypot of floats: their squares are exact in double and their sum neither overflows nor
// underflows there, so sqrt(x^2 + y^2) rounds to the float hypot (special::hypot's correction is for
// doubles). An infinity is the result even beside a NaN, as C's hypot.
inline Vec<double> hypot_lanes(Vec<double> x, Vec<double> y) {
  const Vec<double> h = sqrt(x * x + y * y);
  const Vec<double> finite = select(ne(x, x), x + x, select(ne(y, y), y + y, h));  // quiet: see atan2
  return select(mask_or(eq(abs(x), splat(kInfinity)), eq(abs(y), splat(kInfinity))), splat(kInfinity), finite);
}

// ---- logaddexp(a, b) = max + log1p(e), e = exp(-d) (logaddexp2: 2^-d, and log1p(e) / ln 2), d = |a - b|.
// e = 2^n exp(r): n = round(-d / ln 2), r = -d - n ln2 with ln 2 in two parts (n ln2_hi exact);
// logaddexp2: n = round(-d), r = (-d - n) ln 2. exp(r) = 1 + (r + r^2 Q(r)) for |r| <= ln(2) / 2, Q a
// minimax fit of 9 terms (relative error of the evaluation 4e-16). d is first limited to 110 (2^-d:
// 160), where e is below a quarter of the smallest float's ulp: no float result changes, and n
// stays in the normal range.
// log1p(e) for e in (0, 1] by fdlibm's reduction (e_log.c): 1 + e = 2^k (1 + f) with f = e (k = 0)
// where 1 + e <= sqrt(2), else f = (e - 1) / 2 (k = 1; no rounded 1 + e on the way); s = f / (2 + f),
// |s| <= 0.172 (s <= 0 exactly where k = 1), and log(1 + f) = 2 atanh(s) = 2s + s R(s^2) with fdlibm's
// minimax R (LogConstants<double>), plus k ln 2. fdlibm's f - (f^2/2 - s (f^2/2 + R)) is a few ulps
// of double more accurate than 2s + s R, which has 9 operations fewer and is accurate enough here.
inline constexpr double kExpQ[] = {2.7476793834852516e-07, 2.7634991579553766e-06, 2.4801931730823122e-05,
                                   0.0001984118523420112,  0.0013888888516209441,  0.008333333370871703,
                                   0.04166666666813658,    0.16666666666611551,    0.49999999999998324};
inline constexpr double kLog2e = 1.4426950408889634, kLn2 = 0.6931471805599453;
inline constexpr double kSqrt2Minus1 = 0.41421356237309503;

// The first pass: s.
template <bool kBase2>
Vec<double> logaddexp_argument(Vec<double> a, Vec<double> b) {
  using C = LogConstants<double>;
  const Vec<double> t = neg(min(abs(a - b), splat(kBase2 ? 160.0 : 110.0)));
  Vec<double> n, r;
  if constexpr (kBase2) {
    n = round_nearest(t);
    r = (t - n) * splat(kLn2);
  } else {
    n = round_nearest(t * splat(kLog2e));
    r = (t - n * splat(C::ln2_hi)) - n * splat(C::ln2_lo);
  }
  const Vec<double> e = ldexp(splat(1.0) + (r + r * r * polynomial<false>(r, kExpQ)), n);
  const auto upper = gt(e, splat(kSqrt2Minus1));
  const Vec<double> f = select(upper, (e - splat(1.0)) * splat(0.5), e);
  return f / (splat(2.0) + f);
}

// The second: log1p(e) from s, the sum and the special cases.
template <bool kBase2>
Vec<double> logaddexp_of_argument(Vec<double> a, Vec<double> b, Vec<double> s) {
  using C = LogConstants<double>;
  const auto upper = le(s, splat(0.0));  // k = 1
  const Vec<double> z = s * s;
  const Vec<double> log1p_f = (s + s) + s * (z * polynomial<false>(z, C::lg));
  Vec<double> log1p = select(upper, log1p_f + splat(kLn2), log1p_f);
  if constexpr (kBase2) log1p = log1p * splat(special::kInverseLn2);
  // The rare lanes, where the difference is NaN (a branch rather than selections on every vector):
  // equal infinities are themselves; a NaN operand is the result, the first one when both are
  const Vec<double> sum = select(gt(b, a), b, a) + log1p;
  const auto unusual = ne(a - b, a - b);
  if (!any(unusual)) return sum;
  return select(ne(a, a), a + a, select(ne(b, b), b + b, select(unusual, a, sum)));  // quiet: see atan2
}

// Each op: for float data its lanes (hypot) or the two passes of its lanes (the others), for float64
// data its double function.
struct Atan2 {
  static Vec<double> first(Vec<double> y, Vec<double> x) { return atan2_argument(y, x); }
  static Vec<double> second(Vec<double> y, Vec<double> x, Vec<double> r) { return atan2_of_argument(y, x, r); }
  static double of_doubles(double y, double x) { return special::atan2(y, x); }
};
struct Hypot {
  Vec<double> operator()(Vec<double> x, Vec<double> y) const { return hypot_lanes(x, y); }
  static double of_doubles(double x, double y) { return special::hypot(x, y); }
};
template <bool kBase2>
struct Logaddexp {
  static Vec<double> first(Vec<double> a, Vec<double> b) { return logaddexp_argument<kBase2>(a, b); }
  static Vec<double> second(Vec<double> a, Vec<double> b, Vec<double> s) {
    return logaddexp_of_argument<kBase2>(a, b, s);
  }
  static double of_doubles(double a, double b) { return kBase2 ? special::logaddexp2(a, b) : special::logaddexp(a, b); }
};

// float64 data: the C library's functions, element by element.
template <class Op>
void of_doubles_loop(const double* a, bool a_broadcast, const double* b, bool b_broadcast, double* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = Op::of_doubles(a[a_broadcast ? 0 : i], b[b_broadcast ? 0 : i]);
}

// BinaryKernel's form, float data in double lanes in one pass.
template <class T, class Op>
void float_function_kernel(const T* a, bool a_broadcast, const T* b, bool b_broadcast, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    with_operands<Vec<double>, float>([&](auto... in) { run<Vec<double>>(Op{}, out, n, in...); }, a, a_broadcast, b,
                                      b_broadcast);
  } else {
    of_doubles_loop<Op>(a, a_broadcast, b, b_broadcast, out, n);
  }
}

// The same in two passes over blocks of 512: Op::first's values kept in a block of doubles (in L1),
// then Op::second's from them. Each pass is a shorter chain of dependent operations than the whole,
// so the core overlaps the work of more vectors (float32 over 1e6 elements, AVX-512, one thread:
// atan2 0.88 -> 0.62 ms, logaddexp 1.45 -> 1.02 ms); the bits are the same.
template <class Op>
struct FirstPass {
  Vec<double> operator()(Vec<double> a, Vec<double> b) const { return Op::first(a, b); }
};
template <class Op>
struct SecondPass {
  Vec<double> operator()(Vec<double> a, Vec<double> b, Vec<double> kept) const { return Op::second(a, b, kept); }
};
template <class T, class Op>
void two_pass_kernel(const T* a, bool a_broadcast, const T* b, bool b_broadcast, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    constexpr int64_t kBlock = 512;
    double kept[kBlock];
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t count = std::min(kBlock, n - i);
      const float *ai = a_broadcast ? a : a + i, *bi = b_broadcast ? b : b + i;
      with_operands<Vec<double>, float>(
          [&](auto... in) {
            run<Vec<double>>(FirstPass<Op>{}, kept, count, in...);
            run<Vec<double>>(SecondPass<Op>{}, out + i, count, in..., Operand<double, Vec<double>, false>{kept});
          },
          ai, a_broadcast, bi, b_broadcast);
    }
  } else {
    of_doubles_loop<Op>(a, a_broadcast, b, b_broadcast, out, n);
  }
}

template <class T>
BinaryKernel<T> float_function_kernel_of(VecBinary op) {
  switch (op) {
    case VecBinary::Atan2: return two_pass_kernel<T, Atan2>;
    case VecBinary::Hypot: return float_function_kernel<T, Hypot>;
    case VecBinary::Logaddexp: return two_pass_kernel<T, Logaddexp<false>>;
    case VecBinary::Logaddexp2: return two_pass_kernel<T, Logaddexp<true>>;
    default: return nullptr;  // the exact operations: elementwise_impl.h
  }
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
