// Vectorized elementwise kernels, written once against simd.h and compiled once per ISA.
//
// + - * / max min neg abs relu sqrt and the activations leaky_relu and hardtanh are exact (IEEE, as
// the scalar loops), so their results are the same on every ISA. exp, log, tanh and sigmoid are
// polynomial approximations in the tensor's type (sin and cos in float32):
//   float64: exp, log, tanh as below; sigmoid is 1 / (1 + exp(-x)) with each step rounded, as the
//            scalar formula. Measured against long double over dense sweeps: exp < 1.5 ulp, log < 1
//            ulp, tanh < 1.5 ulp, sigmoid < 3 ulp (measured maxima 1.01, 0.81, 1.34, 2.38).
//   float32: native float vector code (no widening to double), each function within 1 ulp of the
//            exact result. Measured over all 2^32 inputs against the float64 kernels (ulp_scan.cpp;
//            tests/test_kernels.py with FASTGRAD_EXHAUSTIVE_ULP=1), maxima in ulps, worst input:
//              AVX-512, AVX2: exp 0.778 (-87.6654), log 0.840 (1.41332), tanh 0.728 (4.26693),
//                             sigmoid 0.966 (-6.99953)
//              scalar:        exp 0.783 (-87.6917), log 0.840 (1.41332), tanh 0.728 (4.26693),
//                             sigmoid 0.950 (-6.99985)
//            The exp maximum is a denormal result (rounded twice: the scaling by 2^n rounds
//            again); over normal results it is 0.699 (scalar 0.731). tanh's and sigmoid's maxima
//            come from their tables (polynomials of degree 4: degree 5 gave 0.569 and 0.836, at a
//            lookup and a multiply-add more per vector); sigmoid_by_exp (|x| >= 7.5) stays within
//            0.824 (a denormal result on the scalar ISA; AVX-512, AVX2 0.803).
//            So float32 results are not bit-equal to the reference backend's (the double result
//            rounded once), but within 1 ulp of them.
// sin and cos: float64 the C library's, element by element (the reference backend's bits); float32
//   native vector code up to |x| = 2^17 and the C library's double function rounded once beyond
//   it, within 1 ulp. Measured over all floats of magnitude up to 2^17 (beyond it every ISA gives the
//   double result rounded once), maxima in ulps (worst input): AVX-512, AVX2: sin 0.800 (0.771341),
//   cos 0.812 (30310.9); scalar: sin 0.838 (8783.11), cos 0.849 (3096.82).
// gelu (approximate='none' and 'tanh') and its gradient:
//   float64: the C library's erfc / tanh / exp element by element (special_functions.h), as the
//            reference backend computes them with math.erfc / math.tanh / math.exp: the same bits.
//   float32, approximate='none': native float vector code (the float32 GELU sections below: a
//            table path for x > -3, a tail path for the rest), within 1 ulp of the exact result.
//            Measured over all 2^32 inputs against the float64 kernels (ulp_scan.cpp), maxima in
//            ulps (worst input):
//              AVX-512, AVX2: gelu 0.778 (-13.1870), gradient 0.721 (-3.6270)
//              scalar:        gelu 0.780 (-13.1917), gradient 0.736 (-7.0108)
//            the table path alone (x > -3): AVX-512, AVX2 gelu 0.775 (-2.2487), gradient 0.626
//            (-0.4999); scalar gelu 0.775 (-2.2445), gradient 0.635 (-0.4853).
//            gelu's maximum is a denormal result of the tail path (rounded twice: by the last
//            addition, then by the scaling by 2^n); a denormal gradient is computed in double.
//            Next to the gradient's zero at x = -0.7518 (where P(X <= x) + x p(x) cancels) the
//            gradient keeps the same bound: the zero is factored out of the evaluation.
//            So float32 results are not bit-equal to the reference backend's (the double result
//            rounded once), but within 1 ulp of them.
//   float32, approximate='tanh': vector code in double lanes (the inputs widened, each result
//            rounded once) and the double exp. Against the float64 kernels over every 4099th bit
//            pattern, maxima in float32 ulps: gelu 0.5 and its gradient 0.5 (correctly rounded).
//            AVX2 and AVX-512 run the same double operations (the same bits).
// tests/test_kernels.py asserts these bounds on every ISA. The scalar ISA evaluates the same
// polynomials with unfused multiply-adds, so its results may differ from AVX2/AVX-512 in the last bit.
// NaN propagates, exp(-inf) = 0, exp(inf) = inf (also on overflow), log(0) = -inf, log(x < 0) =
// NaN, log(inf) = inf, tanh(-0) = -0, sigmoid(-inf) = 0 and sigmoid(inf) = 1 (also where it
// saturates), sin(+-0) = +-0, sin and cos of +-inf are NaN; denormal inputs and results are handled
// (no flush to zero).
#pragma once
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <type_traits>

#include "kernels/kernel_table.h"
#include "kernels/piecewise_tables.h"
#include "kernels/simd.h"
#include "kernels/special_functions.h"

// flatten: a loop over vectors with the vector functions (exp, tanh, their polynomials, ...) inlined
// into it. Called out of line, each call spills and reloads every live vector (the ABI saves no
// vector register across calls): float32 exp over 1e5 elements (AVX-512, one thread) took 0.39 ns
// per element with polynomial() called per vector, 0.29 inlined; sin 0.72 -> 0.55; the LSTM layer's
// forward (recurrent_impl.h) ~15% faster. Not in a sanitized build (CMakeLists.txt): there the
// inlined, instrumented copies doubled the compile time of each ISA file (avx512: 19 -> 10 s of CPU
// without), and its tests time nothing.
#ifdef FASTGRAD_SANITIZED
#define FG_FLATTEN
#else
#define FG_FLATTEN [[gnu::flatten]]
#endif

namespace fg::simd::FG_ISA_NAMESPACE {

template <class T>
Vec<T> splat(T x) {
  return Vec<T>::broadcast(x);
}

// p(r), coefficients from the highest power down, by Estrin's scheme: pairs a + b r, then pairs of
// those with r^2, r^4, ...: a dependency chain of log2(K) multiply-adds instead of Horner's K - 1.
// polynomial<false>: each step rounded (a product, then a sum) where fma() fuses on the ISAs that
// can, so that every ISA, and Python's floats, compute the same bits (float_binary_impl.h).
template <bool kFused = true, class T, size_t K>
Vec<T> polynomial(Vec<T> r, const T (&c)[K]) {
  // Fully unrolled (K is a constant), so that the terms live in registers.
  Vec<T> terms[K];
#pragma GCC unroll 16
  for (size_t i = 0; i < K; ++i) terms[i] = splat(c[K - 1 - i]);  // lowest power first
  Vec<T> x = r;
#pragma GCC unroll 16
  for (size_t n = K; n > 1; n = (n + 1) / 2, x = x * x) {
#pragma GCC unroll 16
    for (size_t i = 0; i < n / 2; ++i)
      terms[i] = kFused ? fma(terms[2 * i + 1], x, terms[2 * i]) : terms[2 * i + 1] * x + terms[2 * i];
    if (n % 2) terms[n / 2] = terms[n - 1];
  }
  return terms[0];
}

// ---- exp, float64: x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, Cody-Waite, so n ln2_hi is
// exact); exp(r) = 1 + r + r^2 P(r) with P Taylor's 1/13!, ..., 1/2! (truncation below 1e-17
// relative), scaled by 2^n. Below -746 the result rounds to 0, above 710 it overflows.
inline Vec<double> exp(Vec<double> x) {
  static constexpr double p[] = {1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800,
                                 1.0 / 362880,     1.0 / 40320,     1.0 / 5040,     1.0 / 720,
                                 1.0 / 120,        1.0 / 24,        1.0 / 6,        1.0 / 2};
  Vec<double> xc = min(max(x, splat(-746.0)), splat(710.0));
  Vec<double> n = round_nearest(xc * splat(1.44269504088896340736));  // log2(e)
  Vec<double> r = fma(n, splat(-6.93145751953125e-1), xc);
  r = fma(n, splat(-1.42860682030941723212e-6), r);
  Vec<double> y = fma(polynomial(r, p), r * r, r) + splat(1.0);
  return select(ne(x, x), x, ldexp(y, n));
}

// a + b = s + e exactly, given |a| >= |b| (Dekker's fast two-sum).
inline Vec<float> fast_two_sum(Vec<float> a, Vec<float> b, Vec<float>& e) {
  Vec<float> s = a + b;
  e = b - (s - a);
  return s;
}

// ---- float32 exp and sigmoid (beyond its table) share the reduction exp(x) = 2^n (1 + r + s): n = round(x / ln2),
// r = x - n ln2_hi exact (ln2_hi has 9 significant bits and |n| <= 150 8, and the difference is
// within a factor 2 of x), s = exp(r + r_lo) - 1 - r with r_lo = n (ln2_hi - ln2), by Taylor's series to
// (r + r_lo)^8 / 8! (truncation below 3e-10 relative): |r| < 0.38, |s| < 0.11. Each result is then
// summed from 1 + r (exactly, as a two-sum) and the small s, so that neither r nor s is rounded
// into an intermediate float (each such rounding would cost up to a quarter ulp). x within [-104, 104].
inline Vec<float> exp_reduced(Vec<float> x, Vec<float>& n, Vec<float>& s) {
  static constexpr float p[] = {1.0f / 40320, 1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 1.0f / 2};
  n = round_nearest(x * splat(1.44269504088896340736f));  // log2(e)
  Vec<float> r = fma(n, splat(-0.693359375f), x);
  Vec<float> r_lo = n * splat(2.12194440e-4f);  // ln2 = 0.693359375 - 2.12194440e-4
  Vec<float> whole = r + r_lo;
  s = fma(polynomial(whole, p), whole * whole, r_lo);
  return r;
}

// Above 89 the result overflows. Below -104 it rounds to 0, and those lanes are set to 0 rather than
// scaled down to it: a scaling that underflows takes a microcode assist per vector on Intel cores
// (8192 inputs below -100 ran 12x slower than normal ones). Those lanes and NaN's (x > -104 is
// false for both) compute exp(0) and take max(0, x) instead: 0, or x itself (the NaN max's second
// operand). One comparison and one selection for both cases instead of two each: 7% less time
// over 1e5 inputs (AVX-512), the same bits.
inline Vec<float> exp(Vec<float> x) {
  const auto computed = gt(x, splat(-104.0f));
  Vec<float> n, s, low;
  Vec<float> r = exp_reduced(min(select(computed, x, splat(0.0f)), splat(89.0f)), n, s);
  Vec<float> high = fast_two_sum(splat(1.0f), r, low);
  return select(computed, ldexp(high + (low + s), n), max(splat(0.0f), x));
}

// ---- log (fdlibm's e_log.c and e_logf.c): x = 2^k m with m in [sqrt(2)/2, sqrt(2)), f = m - 1,
// s = f / (2 + f); log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)), R fdlibm's minimax polynomial;
// ln2 in two parts.
template <class T> struct LogConstants;
template <> struct LogConstants<double> {
  static constexpr double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  static constexpr double lg[] = {1.479819860511658591e-01, 1.531383769920937332e-01, 1.818357216161805012e-01,
                                  2.222219843214978396e-01, 2.857142874366239149e-01, 3.999999999940941908e-01,
                                  6.666666666666735130e-01};
};
template <> struct LogConstants<float> {
  static constexpr float ln2_hi = 6.9313812256e-01f, ln2_lo = 9.0580006145e-06f;
  static constexpr float lg[] = {0xf89e26.0p-26f, 0x91e9ee.0p-25f, 0xccce13.0p-25f, 0xaaaaaa.0p-24f};
};

template <class T>
Vec<T> log(Vec<T> x) {
  using C = LogConstants<T>;
  Vec<T> k;
  Vec<T> m = frexp(x, k);  // garbage for x <= 0, inf, NaN: replaced below
  auto low = lt(m, splat(T(0.70710678118654752440)));
  m = select(low, m + m, m);
  k = select(low, k - splat(T(1)), k);
  Vec<T> f = m - splat(T(1));
  Vec<T> s = f / (splat(T(2)) + f);
  Vec<T> z = s * s;
  Vec<T> R = z * polynomial(z, C::lg);
  Vec<T> hfsq = splat(T(0.5)) * f * f;
  Vec<T> y = k * splat(C::ln2_hi) - ((hfsq - fma(s, hfsq + R, k * splat(C::ln2_lo))) - f);
  constexpr T inf = std::numeric_limits<T>::infinity();
  y = select(eq(x, splat(T(0))), splat(-inf), y);
  y = select(lt(x, splat(T(0))), splat(std::numeric_limits<T>::quiet_NaN()), y);
  y = select(eq(x, splat(inf)), x, y);
  return select(ne(x, x), x, y);
}

// ---- tanh: |x| < 0.625: x + x z P(z) / Q(z) with z = x^2 (Cephes' rational approximation);
// otherwise 1 - 2 / (exp(2|x|) + 1) with x's sign.
inline Vec<double> tanh(Vec<double> x) {
  static constexpr double p[] = {-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3};
  static constexpr double q[] = {1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3};
  Vec<double> z = x * x;
  Vec<double> small = fma(z * (polynomial(z, p) / polynomial(z, q)), x, x);
  small = select(eq(x, splat(0.0)), x, small);  // tanh(-0) = -0: the sum above gives +0
  Vec<double> a = abs(x);
  Vec<double> large = splat(1.0) - splat(2.0) / (exp(a + a) + splat(1.0));
  large = select(lt(x, splat(0.0)), neg(large), large);
  return select(lt(a, splat(0.625)), small, large);
}

// ---- float32 sigmoid for |x| >= 7.5: 1 / (1 + exp(t)) without rounding its pieces. With exp(t) =
// 2^n (1 + r + s) (exp_reduced) and k = max(n, 0),
//   1 / (1 + exp(t)) = 2^-k / (2^-k + 2^(n-k) + 2^(n-k) r + 2^(n-k) s),
// a denominator in [0.6, 2.5): one of 2^-k and 2^(n-k) is 1, the other at most 1, and the products
// are exact (powers of two), so fast two-sums add the four terms into d + e, e the three roundings.
// Then y = 1 / d and the correction c = y (1 - y d - y e), 1 - y d computed exactly (two_product).
// Returns y, with 1 / (1 + exp(t)) = 2^-k (y + c) to about 2^-40 relative.
inline Vec<float> logistic_parts(Vec<float> t, Vec<float>& k, Vec<float>& c) {
  const Vec<float> one = splat(1.0f);
  Vec<float> n, s;
  Vec<float> r = exp_reduced(min(max(t, splat(-104.0f)), splat(104.0f)), n, s);  // 1 + 2^+-150: 1, 2^150
  k = max(n, splat(0.0f));
  Vec<float> g = ldexp(one, neg(k)), h = ldexp(one, n - k);
  Vec<float> e1, e2, e3;
  Vec<float> d = fast_two_sum(fast_two_sum(fast_two_sum(one, min(g, h), e1), h * r, e2), h * s, e3);
  Vec<float> e = e1 + e2 + e3;
  Vec<float> y = one / d;
  Vec<float> product_error;
  Vec<float> product = two_product(y, d, product_error);
  Vec<float> residual = (one - product) - product_error;  // 1 - y d; 1 - product is exact (Sterbenz)
  c = y * fma(neg(e), y, residual);
  return y;
}

inline Vec<float> sigmoid_by_exp(Vec<float> x) {
  Vec<float> k, c;
  Vec<float> y = logistic_parts(neg(x), k, c);
  return select(ne(x, x), x, ldexp(y + c, neg(k)));
}

// ---- float32 tanh, and sigmoid for |x| < 7.5: f(a) of a = |x| by the piecewise polynomials of
// piecewise_tables.h (.ci/fit_piecewise.py): a's interval i from its bits (a quarter or an eighth
// of a binade, or [0, first)), t = a - mid[i] (exact) and
//   f(a) = hi[i] + (q0[i] t + (lo[i] + t^2 R(t))),  Q(t) = q0 + t R(t),
// the coefficients looked up per lane (AVX-512: a permute of two registers each), so every lane runs
// the same dozen multiply-adds and no division: the evaluate-in-steps path this replaces (exp, then
// a division corrected to double-float accuracy) took 3x as long. hi + lo is f(mid) to 2^-48; the
// fits' own error is at most 0.23 ulp (tanh; sigmoid 0.16, gelu's tails 0.009); q0 t + t^2 R(t) is
// at most about a quarter of f(a) (3/4 for sigmoid's last intervals), so its roundings cost a
// fraction of an ulp; the last addition rounds once. On the first interval (hi = lo = 0, tanh's
// q0 = 1) the sum t + t^2 R(t) is rounded once: a rounded Q(t) near 1 would add half an ulp there.
// Returns q0 t + (lo + t^2 R(t)) and, in hi, hi[i].
template <const auto& kTable>
Vec<float> piecewise(Vec<float> a, Vec<float>& hi) {
  constexpr size_t kDegree = std::size(kTable.q);
  const Index i = table_index<kTable.shift>(a, kTable.origin, kTable.last);
  const Vec<float> t = a - lookup(kTable.mid, i);
  Vec<float> r = lookup(kTable.q[kDegree - 1], i);  // Q(t) = q[0] + t r(t)
#pragma GCC unroll 16
  for (size_t k = kDegree - 2; k > 0; --k) r = fma(r, t, lookup(kTable.q[k], i));
  hi = lookup(kTable.hi, i);
  // fused on every ISA (the scalar one in double): its unfused roundings took sigmoid to 1.007 ulps
  return fused_fma(lookup(kTable.q[0], i), t, fused_fma(t, t * r, lookup(kTable.lo, i)));
}

// tanh(|x|) with x's sign (tanh(-0) = -0, NaN kept); from a = 9.5 on, tanh rounds to 1 (min keeps a
// NaN: its second operand).
inline Vec<float> tanh(Vec<float> x) {
  Vec<float> hi;
  Vec<float> low = piecewise<piecewise_tables::kTanhTable>(min(splat(9.5f), abs(x)), hi);
  return copysign(hi + low, x);
}

// The table gives q = sigmoid(-|x|) = hi + low, the result for x <= 0; for x > 0 it is 1 - q =
// h + (e - low) with 1 - hi = h + e exactly (a fast two-sum: hi <= 1/2). Beyond |x| = 7.5 the
// table's intervals would have to be narrower than 32 entries allow (sigmoid(-a) falls by e per unit
// of a, and a polynomial's roundings grow with the ratio across its interval), so a vector with
// such a lane also takes sigmoid_by_exp for those lanes (about twice the time of the table).
inline Vec<float> sigmoid(Vec<float> x) {
  const Vec<float> a = abs(x), far = splat(7.5f);
  Vec<float> hi, e;
  // a from 7.5 on (or NaN) takes the table's last interval (table_index clamps it); those lanes'
  // values are replaced below (NaN stays NaN), so a is not clamped first.
  Vec<float> low = piecewise<piecewise_tables::kSigmoidTable>(a, hi);
  Vec<float> h = fast_two_sum(splat(1.0f), neg(hi), e);
  Vec<float> y = select(gt(x, splat(0.0f)), h + (e - low), hi + low);
  const auto beyond = le(far, a);
  return any(beyond) ? select(beyond, sigmoid_by_exp(x), y) : y;
}

// ---- float32 sin and cos: x = n pi/2 + r, then sin(r) or cos(r) with the sign of the quadrant
// n mod 4. pi/2 = C1 + C2 + C3 to 2^-76 relative (three floats): r1 = x - n C1 is exact (a multiple
// of 2^-24 below 1: the fused multiply-add rounds nothing), r1 - n C2 is summed exactly into r + r_lo
// (two_product and a two-sum), and n C3 joins r_lo. With z = r^2 (exactly z + z_lo),
//   sin(r + r_lo) = r + (r_lo (1 - z/2) + r z S(z)),
//   cos(r + r_lo) = (1 - z/2) + (z^2 C(z) - z_lo/2 - r r_lo), 1 - z/2 summed exactly (fast two-sum),
// so nothing near the size of the result is rounded before the last addition. S and C are
// least-squares fits over |r| <= 0.8 (pi/4 and the slack of rounding n), relative error below 4e-9
// and 7e-10 with float coefficients. The 1-ulp bound holds over every float up to |x| = 2^17 (the
// exhaustive scan at the top of this file); a vector with a larger, infinite or NaN lane takes the C
// library's double sin / cos lane by lane, rounded once.
inline constexpr float kSinCosVectorMax = 131072.0f;

template <bool kCos>
Vec<float> sin_or_cos(Vec<float> x) {
  using V = Vec<float>;
  const V a = abs(x);
  if (any(ne(min(a, splat(kSinCosVectorMax)), a))) {  // a > 2^17, or NaN (min gives 2^17 then)
    float lanes[V::kWidth];
    x.store(lanes);
    for (float& v : lanes) v = static_cast<float>(kCos ? std::cos(double(v)) : std::sin(double(v)));
    return V::load(lanes);
  }
  static constexpr float s[] = {2.716594281e-06f, -1.983914699e-04f, 8.333329111e-03f, -1.666666716e-01f};
  static constexpr float c[] = {2.441651850e-05f, -1.388716628e-03f, 4.166664183e-02f};
  const V n = round_nearest(x * splat(0.636619772367581343f));  // 2 / pi
  const V r1 = fused_fma(n, splat(-1.57079637050628662109375f), x);
  V t_lo;
  const V t = two_product(n, splat(-4.371138829e-08f), t_lo);
  // r + e = r1 - t exactly (Knuth's two-sum: either may be the larger)
  const V r = r1 - t;
  const V t_part = r - r1;
  const V e = (r1 - (r - t_part)) - (t + t_part);
  const V r_lo = fma(n, splat(1.715124510e-15f), e - t_lo);  // - n C3, C3 = -1.7151245e-15
  V z_lo;
  const V z = two_product(r, r, z_lo);
  const V sine = r + fma(r * z, polynomial(z, s), fma(r_lo * z, splat(-0.5f), r_lo));  // r_lo cos(r)
  V w_lo;
  const V w = fast_two_sum(splat(1.0f), z * splat(-0.5f), w_lo);
  const V cosine = w + (fma(z * z, polynomial(z, c), w_lo) - fma(z_lo, splat(0.5f), r * r_lo));
  // the quadrant q = (n + kCos) mod 4 in [0, 4): sin, cos, -sin, -cos for q = 0, 1, 2, 3. m / 4 - 3/8
  // is exact (|m| < 2^17) and rounds to floor(m / 4) (its fraction is one of +-1/8, +-3/8), so
  // q = m - 4 floor(m / 4); q odd where |q - 2| = 1. Two operations fewer than q in [-2, 2] (whose
  // sign took two comparisons): with the single test above, sin and cos 3-5% faster, the same bits.
  const V m = kCos ? n + splat(1.0f) : n;
  const V q = fma(round_nearest(fma(m, splat(0.25f), splat(-0.375f))), splat(-4.0f), m);
  const V odd = select(eq(abs(q - splat(2.0f)), splat(1.0f)), cosine, sine);
  const V value = select(le(splat(2.0f), q), neg(odd), odd);
  return kCos ? value : select(eq(x, splat(0.0f)), x, value);  // sin(-0) = -0
}

// ---- float32 GELU (approximate='none') and its gradient, in float lanes: the tail path, for x <= -3
// (and +inf, NaN; the main path, below, covers the rest). With a = |x|, E = exp(-a^2 / 2)
// and P(X <= -a) = E M(a) for a standard normal X:
//   gelu(x)  = x E M(a) for x < 0,            x (1 - E M(a)) for x >= 0,
//   gelu'(x) = E (a0 - a) H(a) for x < 0,     1 - E (a0 - a) H(a) for x >= 0,
// M and H smooth, by the piecewise polynomials of piecewise_tables.h (.ci/fit_piecewise.py, which
// derives them), a0 = 0.7518 the zero of the gradient (at x = -a0): factored out, so that the
// gradient keeps its relative accuracy next to its zero, where P(X <= x) + x p(x) cancels. Nothing
// cancels otherwise: P(X <= x) >= 1/2 and the gradient >= 1/2 for x >= 0. Each factor is a float-float
// (hi + lo, |lo| at most half an ulp of hi): a^2 = h + l exactly, E = 2^n (1 + r + s) (exp_reduced of
// -h/2) times 1 - l/2, a0 - a by a two-sum, M and H as the table's hi + low; their products are summed
// from two_product's exact parts, so that the only roundings of the order of an ulp are the table's
// low and exp's s (parts of the result, each rounded once: a fraction of an ulp) and the last
// multiplication (by x, or by the incoming gradient g), rounded once. The bounds, measured over all
// float32 inputs, are at the top of this file.
//
// a + b = s + e exactly, for any a and b (Knuth's two-sum).
inline Vec<float> two_sum(Vec<float> a, Vec<float> b, Vec<float>& e) {
  const Vec<float> s = a + b;
  const Vec<float> b_part = s - a;
  e = (a - (s - b_part)) + (b - b_part);
  return s;
}

// exp(-a^2 / 2) = 2^n (hi + lo), |lo| <= ulp(hi) / 2; a <= 14.5 (the exponent in [-105.2, 0]: exp_reduced's
// n - ln2_hi product stays exact up to |n| = 255).
inline Vec<float> gaussian(Vec<float> a, Vec<float>& n, Vec<float>& lo) {
  Vec<float> square_lo, s, one_plus_r_lo;
  const Vec<float> square = two_product(a, a, square_lo);
  const Vec<float> r = exp_reduced(square * splat(-0.5f), n, s);
  const Vec<float> one_plus_r = fast_two_sum(splat(1.0f), r, one_plus_r_lo);
  // times exp(-l/2) = 1 - l/2 to 2^-36 relative (|l| <= 2^-17)
  const Vec<float> rest = fma(square_lo * splat(-0.5f), one_plus_r + s, s) + one_plus_r_lo;
  return fast_two_sum(one_plus_r, rest, lo);
}

// f(a) = hi + lo from a piecewise table, |lo| <= ulp(hi) / 2.
template <const auto& kTable>
Vec<float> piecewise_float_float(Vec<float> a, Vec<float>& lo) {
  Vec<float> hi;
  const Vec<float> low = piecewise<kTable>(a, hi);
  return fast_two_sum(hi, low, lo);
}

// (a + a_lo)(b + b_lo) = p + p_lo to about 2^-46 relative (a_lo b_lo left out).
inline Vec<float> float_float_product(Vec<float> a, Vec<float> a_lo, Vec<float> b, Vec<float> b_lo, Vec<float>& p_lo) {
  Vec<float> e;
  const Vec<float> p = two_product(a, b, e);
  p_lo = fma(a, b_lo, fma(a_lo, b, e));
  return p;
}

// Beyond a = 14.5 gelu(x < 0) and its gradient round to 0 (a vector with such a lane, an infinity or
// a NaN takes special::gelu / gelu_derivative for it, rounded once); from 9 on P(X <= -a) is below
// 2^-62, and 1 - P(X <= -a) rounds to 1 (a is capped there, so that the scaling by 2^n stays normal).
inline constexpr float kGeluVectorMax = 14.5f;

// The value or the gradient (kGradient) at x as v = 2^k (hi + lo), returns hi and sets lo and k.
template <bool kGradient>
Vec<float> gelu_parts(Vec<float> x, Vec<float>& lo, Vec<float>& k) {
  const Vec<float> zero = splat(0.0f), a = abs(x);
  const auto negative = lt(x, zero);
  const Vec<float> capped = min(a, select(negative, splat(kGeluVectorMax), splat(9.0f)));
  Vec<float> n, e_lo, f_lo, p_lo;
  const Vec<float> e = gaussian(capped, n, e_lo);
  Vec<float> f;  // M(a), or (a0 - a) H(a)
  if constexpr (kGradient) {
    Vec<float> h_lo, d_err, u_err, v_err, w_err;
    const Vec<float> h = piecewise_float_float<piecewise_tables::kGeluGradientTailTable>(capped, h_lo);
    const Vec<float> d = two_sum(splat(piecewise_tables::kGeluGradientZeroHi), neg(capped), d_err);
    const Vec<float> d_lo = d_err + splat(piecewise_tables::kGeluGradientZeroLo);
    // Next to a0, d is a few ulps of a0 and d_lo a0's low part: d h and d_lo h cancel, each kept exact.
    const Vec<float> u = two_product(d, h, u_err);
    const Vec<float> v = two_product(d_lo, h, v_err);
    f = fast_two_sum(u, v, w_err);  // |u| >= |v|: |d| >= 2^-25 > |d_lo| unless d = 0
    f_lo = fma(d + d_lo, h_lo, w_err + (u_err + v_err));
  } else {
    f = piecewise_float_float<piecewise_tables::kGeluTailTable>(capped, f_lo);
  }
  const Vec<float> p = float_float_product(e, e_lo, f, f_lo, p_lo);  // x < 0: the result / 2^n
  // x >= 0: 1 - 2^n (p + p_lo), |2^n p| <= 1/2
  const Vec<float> scale = select(negative, zero, n);
  Vec<float> c_lo;
  const Vec<float> c = fast_two_sum(splat(1.0f), neg(ldexp(p, scale)), c_lo);
  c_lo = c_lo - ldexp(p_lo, scale);
  k = select(negative, n, zero);
  lo = select(negative, p_lo, c_lo);
  return select(negative, p, c);
}

// The lanes whose x is beyond kGeluVectorMax, infinite or NaN.
inline auto gelu_special_lanes(Vec<float> x) { return mask_or(le(splat(kGeluVectorMax), abs(x)), ne(x, x)); }

// y with the lanes in `redo` replaced by value(g, x) of their lanes of g and x in double, rounded
// once; rare, so lane by lane.
template <class Mask, class F>
Vec<float> replace_lanes(Mask redo, Vec<float> y, Vec<float> g, Vec<float> x, F value) {
  using V = Vec<float>;
  if (!any(redo)) return y;
  float gs[V::kWidth], xs[V::kWidth], values[V::kWidth];
  g.store(gs);
  x.store(xs);
  for (int i = 0; i < V::kWidth; ++i) values[i] = static_cast<float>(value(double{gs[i]}, double{xs[i]}));
  return select(redo, V::load(values), y);
}

// The tail path above, for whole vectors: gelu(x), and g gelu'(x) (the lanes whose g gelu'(x)
// overflows float before the scaling by 2^k redone in double).
inline Vec<float> gelu_by_tail(Vec<float> x) {
  Vec<float> lo, k, e;
  const Vec<float> hi = gelu_parts<false>(x, lo, k);
  const Vec<float> p = two_product(x, hi, e);
  const Vec<float> y = select(eq(x, splat(0.0f)), x, ldexp(p + fma(x, lo, e), k));  // gelu(-0) = -0
  return replace_lanes(gelu_special_lanes(x), y, x, x, [](double, double v) { return special::gelu(v, false); });
}
inline Vec<float> gelu_gradient_by_tail(Vec<float> g, Vec<float> x) {
  Vec<float> lo, k, e;
  const Vec<float> hi = gelu_parts<true>(x, lo, k);
  const Vec<float> p = two_product(g, hi, e), sum = p + fma(g, lo, e);
  const Vec<float> y = ldexp(select(eq(sum, splat(0.0f)), p, sum), k);  // a zero g's sign kept, as below
  // g hi overflowing (before the scaling by 2^k, or beyond float's range: e is then NaN) is redone too
  const auto redo = mask_or(gelu_special_lanes(x), eq(abs(p), splat(std::numeric_limits<float>::infinity())));
  return replace_lanes(redo, y, g, x, [](double w, double v) { return w * special::gelu_derivative(v, false); });
}

// ---- float32 GELU's main path, x in (-3, inf): with a = |x| and f(a) = P(X <= -a) (or, for the
// gradient, -gelu'(-a) = P(X <= -a) - a p(a), p the normal density) from a table of polynomials over
// intervals of a (piecewise_tables.h's kGeluProbabilityTable and kGeluSlopeTable, fitted by
// .ci/fit_piecewise.py to a few hundredths of an ulp of f up to a = 3 and to 2^-28 beyond),
//   gelu(x)  = x f(a) for x < 0,   x (1 - f(a)) for x >= 0,
//   gelu'(x) = f(a) for x < 0,     1 - f(a) for x >= 0,
// with f = s + lo a float-float: t = a - mid (exact, or as two floats), f = hi + lo' + q0 t +
// t^2 R(t) with q0 t (two_product) and hi added exactly, so that only the small t^2 R(t) is rounded
// short of the result; then m (x, or the incoming gradient) times it, one fused multiply-add rounded
// once. No exp, no division: about half the tail path's time. The gradient's zero (x = -0.7518, where
// P(X <= x) + x p(x) cancels) is the midpoint of the two intervals next to it, whose slope q0 is kept
// to 2^-48 (slope_lo): there q0 t is all of f. Below x = -3 P(X <= x) falls too fast for the table's
// intervals (relative accuracy), and those lanes (with +inf and NaN) take the tail path: per lane,
// so that a lane's bits do not depend on its neighbours (thread counts, layouts).
inline constexpr float kGeluTableMin = -3.0f;

// f(a) = s + lo, returns s; a in [0, 7]. The gradient's table (kGradient): t = a - mid as two
// floats (its first interval's mid is not 0), q0 to 2^-48 and s + lo = hi + q0 t for any sizes
// (Knuth's two-sum: next to its zero |q0 t| > |hi|); gelu's: a - mid exact, |hi| >= |q0 t| (Dekker's).
template <const auto& kTable, bool kGradient>
Vec<float> gelu_table_float_float(Vec<float> a, Vec<float>& lo) {
  constexpr size_t kDegree = std::size(kTable.q);
  const Index i = table_index<kTable.shift>(a, kTable.origin, kTable.last);
  const Vec<float> mid = lookup(kTable.mid, i);
  const Vec<float> t = a - mid;
  Vec<float> r = lookup(kTable.q[kDegree - 1], i);
#pragma GCC unroll 16
  for (size_t k = kDegree - 2; k > 0; --k) r = fma(r, t, lookup(kTable.q[k], i));
  const Vec<float> rest = fused_fma(t, t * r, lookup(kTable.lo, i));
  Vec<float> p_err, s_err;
  const Vec<float> q0 = lookup(kTable.q[0], i);
  const Vec<float> p = two_product(q0, t, p_err);
  Vec<float> s;
  if constexpr (kGradient) {
    // a - mid = t + (a - (t + mid)) exactly (Dekker's fast two-sum: mid's exponent is at least a's)
    p_err = fused_fma(q0, a - (t + mid), fused_fma(lookup(kTable.slope_lo, i), t, p_err));
    s = two_sum(lookup(kTable.hi, i), p, s_err);
  } else {
    s = fast_two_sum(lookup(kTable.hi, i), p, s_err);
  }
  lo = s_err + (p_err + rest);
  return s;
}

// m gelu(x) / x (gelu(x): m = x) or m gelu'(x), for x > -3 (+inf and NaN lanes: garbage).
template <bool kGradient>
Vec<float> gelu_by_table(Vec<float> x, Vec<float> m) {
  using piecewise_tables::kGeluProbabilityTable, piecewise_tables::kGeluSlopeTable;
  const Vec<float> a = min(abs(x), splat(7.0f));  // beyond 7 f is below 2^-34: x gelu'(x) 1, gelu(x) x
  Vec<float> lo, c_err;
  const Vec<float> f = kGradient ? gelu_table_float_float<kGeluSlopeTable, true>(a, lo)
                                 : gelu_table_float_float<kGeluProbabilityTable, false>(a, lo);
  // 1 - f = c + c_err exactly (fast_two_sum(1, -f) without the negation: |f| <= 1/2)
  const Vec<float> one = splat(1.0f), c = one - f;
  c_err = (one - c) - f;
  const auto negative = lt(x, splat(0.0f));
  const Vec<float> v = select(negative, f, c), v_lo = select(negative, lo, c_err - lo);
  const Vec<float> y = fused_fma(m, v, m * v_lo);
  if constexpr (!kGradient) return y;
  // A zero g keeps its sign in g gelu'(x) (-0 + 0 would be +0): the product's then
  return select(eq(y, splat(0.0f)), m * v, y);
}

// The lanes the table does not cover: x <= -3 (from a = 3 on the table's fit is absolute), +inf,
// NaN (x - x is NaN for both).
inline auto gelu_tail_lanes(Vec<float> x) { return mask_or(le(x, splat(kGeluTableMin)), ne(x - x, splat(0.0f))); }

// With approximate='tanh': x s and its derivative s (1 + 2 x u' (1 - s)) as special::gelu and
// special::gelu_derivative compute them: s = 1 / (1 + e) the logistic function of 2u, e = exp(-2u).
// Returns s; du: u'.
inline Vec<double> gelu_tanh_logistic(Vec<double> x, Vec<double>& e, Vec<double>& du) {
  using special::kGeluBeta, special::kGeluKappa;
  Vec<double> x_sq = x * x;
  du = fma(x_sq, splat(3 * kGeluBeta * kGeluKappa), splat(kGeluBeta));
  e = exp(neg(x * fma(x_sq, splat(2 * kGeluBeta * kGeluKappa), splat(2 * kGeluBeta))));
  return splat(1.0) / (splat(1.0) + e);
}

// The operations as function objects over any vector type, run in the tensor's type.
struct Add {
  template <class V> V operator()(V a, V b) const { return a + b; }
};
struct Sub {
  template <class V> V operator()(V a, V b) const { return a - b; }
};
struct Mul {
  template <class V> V operator()(V a, V b) const { return a * b; }
};
struct Div {
  template <class V> V operator()(V a, V b) const { return a / b; }
};
// The larger (smaller) of a and b, or a when a is NaN, else b: PyTorch's NaN-propagating maximum.
struct Maximum {
  template <class V> V operator()(V a, V b) const { return select(mask_or(gt(a, b), ne(a, a)), a, b); }
};
struct Minimum {
  template <class V> V operator()(V a, V b) const { return select(mask_or(lt(a, b), ne(a, a)), a, b); }
};
// ReLU's gradient, PyTorch's threshold_backward(g, result, 0): g where the result is above 0 or NaN.
struct ReluGrad {
  template <class V> V operator()(V g, V result) const {
    return select(le(result, V::broadcast(0)), V::broadcast(0), g);
  }
};
struct Neg {
  template <class V> V operator()(V x) const { return neg(x); }
};
struct Abs {
  template <class V> V operator()(V x) const { return abs(x); }
};
struct Sqrt {
  template <class V> V operator()(V x) const { return sqrt(x); }
};
struct Relu {  // NaN stays NaN
  template <class V> V operator()(V x) const {
    return select(mask_or(gt(x, V::broadcast(0)), ne(x, x)), x, V::broadcast(0));
  }
};
struct Exp {
  template <class V> V operator()(V x) const { return exp(x); }
};
struct Log {
  template <class V> V operator()(V x) const { return log(x); }
};
struct Tanh {
  template <class V> V operator()(V x) const { return tanh(x); }
};
struct Sigmoid {  // float32 only: float64 takes sigmoid_kernel's two passes
  Vec<float> operator()(Vec<float> x) const { return sigmoid(x); }
};
template <bool kCos>
struct SinOrCos {  // float32 only: float64 takes sin_cos_kernel's C library loop
  Vec<float> operator()(Vec<float> x) const { return sin_or_cos<kCos>(x); }
};
struct ExpNeg {
  template <class V> V operator()(V x) const { return exp(neg(x)); }
};
struct OneOverOnePlus {
  template <class V> V operator()(V e) const { return V::broadcast(1) / (V::broadcast(1) + e); }
};
// sigmoid_kernel's results for one vector (float64: its two passes in one), for fused kernels.
inline Vec<float> sigmoid_value(Vec<float> x) { return sigmoid(x); }
inline Vec<double> sigmoid_value(Vec<double> x) { return OneOverOnePlus{}(ExpNeg{}(x)); }

// The activations with parameters: f(x, params...) and the gradient g f'(x), each parameter a
// broadcast vector. As PyTorch's kernels: leaky_relu is x > 0 ? x : x slope (its gradient takes the
// slope at 0), hardtanh is x outside (min, max) moved to the bound it passed, else x itself (as
// PyTorch's clamp kernel: -0 stays -0 at a bound 0, NaN stays NaN), its gradient 0 where x <= min or
// x >= max (bounds included).
struct LeakyRelu {
  template <class V> V operator()(V x, V slope) const { return select(gt(x, V::broadcast(0)), x, x * slope); }
};
struct LeakyReluGrad {
  template <class V> V operator()(V g, V x, V slope) const { return select(gt(x, V::broadcast(0)), g, g * slope); }
};
struct Hardtanh {
  template <class V> V operator()(V x, V lo, V hi) const { return select(lt(x, lo), lo, select(lt(hi, x), hi, x)); }
};
struct HardtanhGrad {
  template <class V> V operator()(V g, V x, V lo, V hi) const {
    return select(mask_or(le(x, lo), le(hi, x)), V::broadcast(0), g);
  }
};

// GELU with approximate='tanh' and its gradient g gelu'(x) in double lanes (float32 data, each result
// rounded once); 'none' is gelu_float_kernel below; float64 runs gelu_kernel's scalar loop.
struct GeluTanh {
  Vec<double> operator()(Vec<double> x) const {
    Vec<double> e, du;
    return x * gelu_tanh_logistic(x, e, du);
  }
};
struct GeluTanhGrad {
  Vec<double> operator()(Vec<double> g, Vec<double> x) const {
    Vec<double> e, du;
    Vec<double> s = gelu_tanh_logistic(x, e, du);
    Vec<double> one_minus_s = select(lt(s, splat(0.5)), splat(1.0) - s, e * s);
    return g * (s * fma(x * (du + du), one_minus_s, splat(1.0)));
  }
};

// How far ahead of the element being computed a loop asks for its inputs (software prefetch, into L1).
// Out of L2 the hardware prefetcher alone fell behind the loops that compute several dozen operations a
// vector: float32 over 1e6 elements (4 MB in, 4 MB out; AVX-512, one thread, this Xeon's 2 MiB L2),
// exp took 0.39 ns per element against 0.29 over 1e5 (in L2), sin 0.80 against 0.56; asking 1 KiB
// ahead, 0.33 and 0.62 (alike from 512 B to 8 KiB; 256 B gained less). Within L2 and for the loops that
// only move memory (neg, add) it changed nothing measurable. Prefetches never fault, so the last
// ones may point past the end.
inline constexpr int64_t kPrefetchBytes = 1024;

// An input of a loop: n values of type S read as vectors V, or one value repeated. The last
// partial vector is read through a zero-padded buffer (its padding lanes compute values nobody stores).
template <class S, class V, bool kBroadcast>
struct Operand {
  const S* p;
  V at(int64_t i) const {
    if constexpr (kBroadcast) return V::broadcast(p[0]);
    else return V::load(p + i);
  }
  void prefetch(int64_t i) const {
    if constexpr (!kBroadcast) __builtin_prefetch(p + i + kPrefetchBytes / int64_t{sizeof(S)});
  }
  V tail(int64_t i, int64_t count) const {
    if constexpr (kBroadcast) return V::broadcast(p[0]);
    S buf[V::kWidth] = {};
    std::copy(p + i, p + i + count, buf);
    return V::load(buf);
  }
};

// out[i] = f(inputs at i...) for i < n, computing in vectors V.
template <class V, class S, class F, class... Ops>
FG_FLATTEN void run(F f, S* out, int64_t n, Ops... in) {
  constexpr int W = V::kWidth;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    (in.prefetch(i), ...);
    f(in.at(i)...).store(out + i);
  }
  if (i < n) {
    S buf[W];
    f(in.tail(i, n - i)...).store(buf);
    std::copy(buf, buf + (n - i), out + i);
  }
}

// f(operands...) with one Operand per (pointer, broadcast flag) pair, of the type its flag selects.
template <class V, class T, class F>
void with_operands(F f) {
  f();
}
template <class V, class T, class F, class... Rest>
void with_operands(F f, const T* p, bool broadcast, Rest... rest) {
  auto with_first = [&](auto first) { with_operands<V, T>([&](auto... others) { f(first, others...); }, rest...); };
  if (broadcast) with_first(Operand<T, V, true>{p});
  else with_first(Operand<T, V, false>{p});
}

template <class T, class Op>
void binary_kernel(const T* a, bool a_broadcast, const T* b, bool b_broadcast, T* out, int64_t n) {
  with_operands<Vec<T>, T>([&](auto... in) { run<Vec<T>>(Op{}, out, n, in...); }, a, a_broadcast, b, b_broadcast);
}

struct FusedMultiplyAdd {
  template <class V> V operator()(V x, V y, V z) const { return fused_fma(x, y, z); }
};
template <class T>
void fma_kernel(const T* x, bool x_broadcast, const T* y, bool y_broadcast, const T* z, bool z_broadcast, T* out,
                int64_t n) {
  with_operands<Vec<T>, T>([&](auto... in) { run<Vec<T>>(FusedMultiplyAdd{}, out, n, in...); }, x, x_broadcast, y,
                           y_broadcast, z, z_broadcast);
}

template <class T, class Op>
void unary_kernel(const T* x, T* out, int64_t n) {
  using V = Vec<T>;
  run<V>(Op{}, out, n, Operand<T, V, false>{x});
}

// float64 sigmoid = 1 / (1 + exp(-x)) with exp(-x) rounded first, as the scalar formula computes it
// (so 0 where exp(-x) overflows, as PyTorch). Two passes over blocks small enough for L1.
// float32 sigmoid: one pass of the accurate sigmoid above.
template <class T>
void sigmoid_kernel(const T* x, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    unary_kernel<float, Sigmoid>(x, out, n);
  } else {
    constexpr int64_t kBlock = 1024;
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = std::min(kBlock, n - i);
      unary_kernel<T, ExpNeg>(x + i, out + i, m);
      unary_kernel<T, OneOverOnePlus>(out + i, out + i, m);
    }
  }
}

// float32 sin and cos: the vector code above; float64: the C library's, element by element (the
// reference backend's bits through math.sin and math.cos).
template <class T, bool kCos>
void sin_cos_kernel(const T* x, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    unary_kernel<float, SinOrCos<kCos>>(x, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = kCos ? std::cos(x[i]) : std::sin(x[i]);
  }
}

// An activation kernel over K parameters: f(x, params[0], ..., params[K - 1]).
template <class T, class Op, size_t... I>
void activation_kernel(const T* x, T* out, int64_t n, const T* params) {
  using V = Vec<T>;
  run<V>(Op{}, out, n, Operand<T, V, false>{x}, Operand<T, V, true>{params + I}...);
}

template <class T, class Op, size_t... I>
void activation_grad_kernel(const T* g, bool g_broadcast, const T* x, T* out, int64_t n, const T* params) {
  using V = Vec<T>;
  if (g_broadcast)
    run<V>(Op{}, out, n, Operand<T, V, true>{g}, Operand<T, V, false>{x}, Operand<T, V, true>{params + I}...);
  else run<V>(Op{}, out, n, Operand<T, V, false>{g}, Operand<T, V, false>{x}, Operand<T, V, true>{params + I}...);
}

// float32 GELU and its gradient in two passes over blocks of elements: the table path for every
// vector, then the tail path (x <= -3, infinities, NaN) only for the lanes that need it, gathered into
// whole vectors. Both paths for every vector holding such a lane took 3.3x the table path's time for
// inputs spread as N(0, 2), where ~70% of the vectors hold one but only 7% of the lanes are one. Each
// path computes lane by lane, so every lane's value is the one either way. Flattened: every call
// inlined (GCC kept polynomial() out of line here, and each call spilled every live vector register).
template <bool kGradient>
FG_FLATTEN void gelu_float_kernel(const float* g, bool g_broadcast, const float* x, float* out, int64_t n) {
  using V = Vec<float>;
  constexpr int64_t W = V::kWidth, kBlock = 512;
  // The gradient's values that overflow or are denormal, redone in double (the tail path's own are
  // redone inside it).
  auto finished = [](V y, V gv, V xv) {
    if constexpr (!kGradient) return y;
    const Vec<float> size = abs(y), half_normal = splat(0x1p-127f);
    const auto redo = mask_or(ne(y - y, splat(0.0f)), lt(abs(size - half_normal), half_normal));
    return replace_lanes(redo, y, gv, xv, [](double w, double v) { return w * special::gelu_derivative(v, false); });
  };
  // The tail lanes' x, g and position in the block (a float: exact below 2^24), with room for the
  // whole vector compress_store writes after the last.
  float tail_x[kBlock + W], tail_g[kBlock + W], tail_at[kBlock + W];
  alignas(64) static constexpr float kLanes[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  static_assert(W <= 16);
  for (int64_t block = 0; block < n; block += kBlock) {
    const int64_t end = std::min(n, block + kBlock);
    int64_t count = 0;
    for (int64_t i = block; i < end; i += W) {
      const int64_t lanes = std::min(W, end - i);
      __builtin_prefetch(x + i + kPrefetchBytes / int64_t{sizeof(float)});
      const V xv = lanes == W ? V::load(x + i) : load_first(x + i, lanes);  // padding lanes 0: never a tail
      const V gv = !kGradient    ? xv
                   : g_broadcast ? V::broadcast(*g)
                   : lanes == W  ? V::load(g + i)
                                 : load_first(g + i, lanes);
      V y = gelu_by_table<kGradient>(xv, gv);
      // The table does not cover x <= -3, nor +inf and NaN (x - x is NaN for both; for gelu(+inf) the
      // table may give NaN or +inf, the tail path +inf).
      const auto tail = gelu_tail_lanes(xv);
      const bool any_tail = any(tail);
      if constexpr (kGradient) y = finished(any_tail ? select(tail, splat(1.0f), y) : y, gv, xv);
      if (lanes == W) y.store(out + i);
      else store_first(y, out + i, lanes);
      if (!any_tail) continue;
      compress_store(tail, xv, tail_x + count);
      if constexpr (kGradient) compress_store(tail, gv, tail_g + count);
      count += compress_store(tail, V::load(kLanes) + V::broadcast(static_cast<float>(i - block)), tail_at + count);
    }
    for (int64_t j = 0; j < count; j += W) {
      const int64_t lanes = std::min(W, count - j);
      float xs[W], gs[W], ys[W];
      for (int64_t l = 0; l < W; ++l) {  // padding lanes: a value of the tail path, never stored
        xs[l] = l < lanes ? tail_x[j + l] : 2 * kGeluTableMin;
        gs[l] = kGradient && l < lanes ? tail_g[j + l] : 0.0f;
      }
      const V xv = V::load(xs), gv = V::load(gs);
      (kGradient ? finished(gelu_gradient_by_tail(gv, xv), gv, xv) : gelu_by_tail(xv)).store(ys);
      for (int64_t l = 0; l < lanes; ++l) out[block + static_cast<int64_t>(tail_at[j + l])] = ys[l];
    }
  }
}

// GELU (Op: GeluTanh, Grad its gradient; void for 'none') in the activation table's form (no parameters):
// float32 'none' in float lanes and 'tanh' in double lanes, float64 by the C library (the bounds at
// the top of this file).
template <class T, class Op, bool kTanh>
void gelu_kernel(const T* x, T* out, int64_t n, const T*) {
  if constexpr (std::is_same_v<T, float> && kTanh) {
    run<Vec<double>>(Op{}, out, n, Operand<float, Vec<double>, false>{x});
  } else if constexpr (std::is_same_v<T, float>) {
    gelu_float_kernel<false>(nullptr, false, x, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = special::gelu(x[i], kTanh);
  }
}
template <class T, class Grad, bool kTanh>
void gelu_grad_kernel(const T* g, bool g_broadcast, const T* x, T* out, int64_t n, const T*) {
  if constexpr (std::is_same_v<T, float> && kTanh) {
    using V = Vec<double>;
    if (g_broadcast) run<V>(Grad{}, out, n, Operand<float, V, true>{g}, Operand<float, V, false>{x});
    else run<V>(Grad{}, out, n, Operand<float, V, false>{g}, Operand<float, V, false>{x});
  } else if constexpr (std::is_same_v<T, float>) {
    gelu_float_kernel<true>(g, g_broadcast, x, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = g[g_broadcast ? 0 : i] * special::gelu_derivative(x[i], kTanh);
  }
}

// atan2, hypot, logaddexp, logaddexp2: float_binary_impl.h (included after this file by isa_table_impl.h).
template <class T>
BinaryKernel<T> float_function_kernel_of(VecBinary op);

// Each table slot's kernel, by name: a switch without default, so that an enumerator added to
// VecBinary or VecUnary without a kernel fails the build (-Werror=switch), and no slot can hold
// another op's kernel (as a positional list could).
template <class T>
BinaryKernel<T> binary_kernel_of(VecBinary op) {
  switch (op) {
    case VecBinary::Add: return binary_kernel<T, Add>;
    case VecBinary::Sub: return binary_kernel<T, Sub>;
    case VecBinary::Mul: return binary_kernel<T, Mul>;
    case VecBinary::Div: return binary_kernel<T, Div>;
    case VecBinary::Max: return binary_kernel<T, Maximum>;
    case VecBinary::Min: return binary_kernel<T, Minimum>;
    case VecBinary::ReluGrad: return binary_kernel<T, ReluGrad>;
    case VecBinary::Atan2:
    case VecBinary::Hypot:
    case VecBinary::Logaddexp:
    case VecBinary::Logaddexp2: return float_function_kernel_of<T>(op);
    case VecBinary::Count: break;
  }
  return nullptr;
}

template <class T>
UnaryKernel<T> unary_kernel_of(VecUnary op) {
  switch (op) {
    case VecUnary::Neg: return unary_kernel<T, Neg>;
    case VecUnary::Abs: return unary_kernel<T, Abs>;
    case VecUnary::Relu: return unary_kernel<T, Relu>;
    case VecUnary::Exp: return unary_kernel<T, Exp>;
    case VecUnary::Log: return unary_kernel<T, Log>;
    case VecUnary::Tanh: return unary_kernel<T, Tanh>;
    case VecUnary::Sigmoid: return sigmoid_kernel<T>;
    case VecUnary::Sqrt: return unary_kernel<T, Sqrt>;
    case VecUnary::Sin: return sin_cos_kernel<T, false>;
    case VecUnary::Cos: return sin_cos_kernel<T, true>;
    case VecUnary::Count: break;
  }
  return nullptr;
}

template <class T>
void fill_activation(TypedKernels<T>& k, Activation op) {
  ActivationKernel<T>& forward = k.activation[static_cast<int>(op)];
  ActivationGradKernel<T>& grad = k.activation_grad[static_cast<int>(op)];
  switch (op) {
    case Activation::LeakyRelu:
      forward = activation_kernel<T, LeakyRelu, 0>;
      grad = activation_grad_kernel<T, LeakyReluGrad, 0>;
      break;
    case Activation::Hardtanh:
      forward = activation_kernel<T, Hardtanh, 0, 1>;
      grad = activation_grad_kernel<T, HardtanhGrad, 0, 1>;
      break;
    case Activation::Gelu:
      forward = gelu_kernel<T, void, false>;
      grad = gelu_grad_kernel<T, void, false>;
      break;
    case Activation::GeluTanh:
      forward = gelu_kernel<T, GeluTanh, true>;
      grad = gelu_grad_kernel<T, GeluTanhGrad, true>;
      break;
    case Activation::Count: break;
  }
}

template <class T>
void fill_elementwise(TypedKernels<T>& k) {
  for (int i = 0; i < static_cast<int>(VecBinary::Count); ++i) k.binary[i] = binary_kernel_of<T>(VecBinary(i));
  k.fused_multiply_add = fma_kernel<T>;
  for (int i = 0; i < static_cast<int>(VecUnary::Count); ++i) k.unary[i] = unary_kernel_of<T>(VecUnary(i));
  for (int i = 0; i < static_cast<int>(Activation::Count); ++i) fill_activation(k, Activation(i));
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
