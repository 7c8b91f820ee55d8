// Vectorized elementwise kernels, written once against simd.h and compiled once per ISA.
//
// + - * / max min neg abs relu sqrt are exact (IEEE, as the scalar loops), so their results are the
// same on every ISA. exp, log and tanh are polynomial approximations evaluated in double, also for
// float32 (whose result is the double one rounded, as the reference backend computes it: so the
// two backends agree bit for bit except within ~2^-29 of a float32 rounding boundary); sigmoid is
// 1 / (1 + exp(-x)) with each step rounded to the tensor's type, as the scalar formula. Measured
// against long double over dense sweeps (tests/test_kernels.py asserts these bounds, every ISA):
//   float64 results: exp < 1.5 ulp, log < 1 ulp, tanh < 1.5 ulp, sigmoid < 3 ulp (measured maxima
//                    1.01, 0.81, 1.34, 2.38)
//   float32 results: exp, log, tanh < 0.501 ulp (correctly rounded but for the double rounding),
//                    sigmoid < 3 ulp (three roundings, as the reference backend)
// The scalar ISA evaluates the same polynomials with unfused multiply-adds, so its float64 results
// of these four may differ from AVX2/AVX-512 in the last bit.
// NaN propagates, exp(-inf) = 0, exp(inf) = inf (also on overflow), log(0) = -inf, log(x < 0) =
// NaN, log(inf) = inf, tanh(-0) = -0; denormal inputs and results are handled (no flush to zero).
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/kernel_table.h"
#include "kernels/simd.h"

namespace fg::simd::FG_ISA_NAMESPACE {

template <class T>
Vec<T> splat(T x) {
  return Vec<T>::broadcast(x);
}

// p(r), coefficients from the highest power down, by Estrin's scheme: pairs a + b r, then pairs of
// those with r^2, r^4, ...: a dependency chain of log2(K) multiply-adds instead of Horner's K - 1.
template <class T, size_t K>
Vec<T> polynomial(Vec<T> r, const T (&c)[K]) {
  // Fully unrolled (K is a constant), so that the terms live in registers.
  Vec<T> terms[K];
#pragma GCC unroll 16
  for (size_t i = 0; i < K; ++i) terms[i] = splat(c[K - 1 - i]);  // lowest power first
  Vec<T> x = r;
#pragma GCC unroll 16
  for (size_t n = K; n > 1; n = (n + 1) / 2, x = x * x) {
#pragma GCC unroll 16
    for (size_t i = 0; i < n / 2; ++i) terms[i] = fma(terms[2 * i + 1], x, terms[2 * i]);
    if (n % 2) terms[n / 2] = terms[n - 1];
  }
  return terms[0];
}

// ---- exp: x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, Cody-Waite, so n ln2_hi is exact);
// exp(r) = 1 + r + r^2 P(r) with P Taylor's 1/13!, ..., 1/2! (truncation below 1e-17 relative),
// scaled by 2^n. Below -746 the result rounds to 0, above 710 it overflows.
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

// ---- log (fdlibm's e_log.c): x = 2^k m with m in [sqrt(2)/2, sqrt(2)), f = m - 1, s = f / (2 + f);
// log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)), R fdlibm's minimax polynomial; ln2 in two parts.
inline Vec<double> log(Vec<double> x) {
  static constexpr double lg[] = {1.479819860511658591e-01, 1.531383769920937332e-01, 1.818357216161805012e-01,
                                  2.222219843214978396e-01, 2.857142874366239149e-01, 3.999999999940941908e-01,
                                  6.666666666666735130e-01};
  Vec<double> k;
  Vec<double> m = frexp(x, k);  // garbage for x <= 0, inf, NaN: replaced below
  auto low = lt(m, splat(0.70710678118654752440));
  m = select(low, m + m, m);
  k = select(low, k - splat(1.0), k);
  Vec<double> f = m - splat(1.0);
  Vec<double> s = f / (splat(2.0) + f);
  Vec<double> z = s * s;
  Vec<double> R = z * polynomial(z, lg);
  Vec<double> hfsq = splat(0.5) * f * f;
  Vec<double> y =
      k * splat(6.93147180369123816490e-01) - ((hfsq - fma(s, hfsq + R, k * splat(1.90821492927058770002e-10))) - f);
  constexpr double inf = std::numeric_limits<double>::infinity();
  y = select(eq(x, splat(0.0)), splat(-inf), y);
  y = select(lt(x, splat(0.0)), splat(std::numeric_limits<double>::quiet_NaN()), y);
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

// The operations as function objects over any vector type. Exact ones run in the tensor's type;
// those flagged kInDouble in double (float32 widened on load, rounded on store).
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
  static constexpr bool kInDouble = true;
  Vec<double> operator()(Vec<double> x) const { return exp(x); }
};
struct Log {
  static constexpr bool kInDouble = true;
  Vec<double> operator()(Vec<double> x) const { return log(x); }
};
struct Tanh {
  static constexpr bool kInDouble = true;
  Vec<double> operator()(Vec<double> x) const { return tanh(x); }
};
struct ExpNeg {
  static constexpr bool kInDouble = true;
  Vec<double> operator()(Vec<double> x) const { return exp(neg(x)); }
};
struct OneOverOnePlus {
  template <class V> V operator()(V e) const { return V::broadcast(1) / (V::broadcast(1) + e); }
};

// The vector type Op computes in, for tensors of type T.
template <class Op, class T, class = void> struct ComputeVec {
  using type = Vec<T>;
};
template <class Op, class T> struct ComputeVec<Op, T, std::void_t<decltype(Op::kInDouble)>> {
  using type = Vec<double>;
};

// An input of a loop: n values of type S read as vectors V, or one value repeated. The last
// partial vector is read through a zero-padded buffer (its padding lanes compute values nobody stores).
template <class S, class V, bool kBroadcast>
struct Operand {
  const S* p;
  V at(int64_t i) const {
    if constexpr (kBroadcast) return V::broadcast(p[0]);
    else return V::load(p + i);
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
void run(F f, S* out, int64_t n, Ops... in) {
  constexpr int W = V::kWidth;
  int64_t i = 0;
  for (; i + W <= n; i += W) f(in.at(i)...).store(out + i);
  if (i < n) {
    S buf[W];
    f(in.tail(i, n - i)...).store(buf);
    std::copy(buf, buf + (n - i), out + i);
  }
}

template <class T, class Op>
void binary_kernel(const T* a, bool a_broadcast, const T* b, bool b_broadcast, T* out, int64_t n) {
  using V = Vec<T>;
  if (a_broadcast && b_broadcast) run<V>(Op{}, out, n, Operand<T, V, true>{a}, Operand<T, V, true>{b});
  else if (a_broadcast) run<V>(Op{}, out, n, Operand<T, V, true>{a}, Operand<T, V, false>{b});
  else if (b_broadcast) run<V>(Op{}, out, n, Operand<T, V, false>{a}, Operand<T, V, true>{b});
  else run<V>(Op{}, out, n, Operand<T, V, false>{a}, Operand<T, V, false>{b});
}

template <class T, class Op>
void unary_kernel(const T* x, T* out, int64_t n) {
  using V = typename ComputeVec<Op, T>::type;
  run<V>(Op{}, out, n, Operand<T, V, false>{x});
}

// sigmoid = 1 / (1 + exp(-x)) with exp(-x) rounded to T first, as the scalar formula computes it
// (so 0 where exp(-x) overflows, as PyTorch). Two passes over blocks small enough for L1.
template <class T>
void sigmoid_kernel(const T* x, T* out, int64_t n) {
  constexpr int64_t kBlock = 1024;
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t m = std::min(kBlock, n - i);
    unary_kernel<T, ExpNeg>(x + i, out + i, m);
    unary_kernel<T, OneOverOnePlus>(out + i, out + i, m);
  }
}

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
    case VecUnary::Count: break;
  }
  return nullptr;
}

template <class T>
void fill_elementwise(TypedKernels<T>& k) {
  for (int i = 0; i < static_cast<int>(VecBinary::Count); ++i) k.binary[i] = binary_kernel_of<T>(VecBinary(i));
  for (int i = 0; i < static_cast<int>(VecUnary::Count); ++i) k.unary[i] = unary_kernel_of<T>(VecUnary(i));
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
