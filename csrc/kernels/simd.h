// The vector wrapper the kernels are written against: Vec<float> and Vec<double> for the ISA of
// the including translation unit (isa_<isa>.cpp defines FG_ISA_NAMESPACE and one FG_ISA_<ISA>
// macro, and is compiled with that ISA's flags). Every ISA provides the same operations:
//   Vec<T>::kWidth, Vec<T>::Mask, Vec<T>::load(p), Vec<T>::broadcast(x), v.store(p),
//   Vec<double>::load(const float*) (kWidth floats, widened), v.store(float*) (kWidth doubles, each
//   rounded to float), + - * /, fma(a, b, c) (= a * b + c,
//   fused where the ISA has FMA), two_product(a, b, e) for float (a * b rounded, and e its exact
//   rounding error, on every ISA), fused_fma(a, b, c) (fused on every ISA: the scalar ISA
//   adds float's in double, and calls the C library for double's), min/max (x86 semantics: the second operand when
//   either is NaN), abs, neg, sqrt, round_nearest (to nearest even), ldexp(x, n) (x * 2^n, n integral, |n| < twice the
//   largest normal exponent: a single rounding), frexp(x, e) (x = m * 2^e with m in [0.5, 1), for positive finite x
//   including denormals), lt le gt eq (ordered) and ne (unordered, like C++ !=), mask_or, any(mask) (a lane is set),
//   select(mask, a, b) (a where set),
//   interleave_low(a, b) / interleave_high(a, b) (a0 b0 a1 b1 ... of the lower / upper halves, across
//   the whole register), transpose_in_registers(v[kWidth]) (a kWidth x kWidth block),
//   even_lanes(a, b) (a0 a2 a4 ... b0 b2 b4 ...: the stride-2 columns of 2 * kWidth elements).
//   load_first(p, count) / store_first(v, p, count) (the first count <= kWidth elements, the other
//   lanes 0 / memory past them untouched: a row's tail without a copy through a buffer),
//   load_first_widened(const float* p, count) (Vec<double>'s: count <= its kWidth floats, widened).
//   copysign(magnitude, sign) (magnitude's bits with sign's sign bit, NaN included), sign_bit(a) (a mask
//   of the lanes whose sign bit is set: -0 and negative NaNs too).
//   compress_store(mask, v, p) (Vec<float>'s selected lanes stored one after another; their count).
//   Table lookups of float32 lanes, each lane with an int32 index in an Index:
//   table_index<shift>(a, origin, last) ((the bits of a - origin) >> shift, arithmetic, clamped to
//   [0, last]: an interval of a's binades for a >= 0), lookup(row, i) (row[i] per lane; row 64-byte
//   aligned, 32 floats).
// Loads and stores are unaligned.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#ifndef FG_ISA_NAMESPACE
#error "define FG_ISA_NAMESPACE before including kernels/simd.h (see isa_scalar.cpp)"
#endif
#if defined(FG_ISA_AVX2) || defined(FG_ISA_AVX512)
#include <immintrin.h>
#elif defined(FG_ISA_NEON)
#include <arm_neon.h>
#endif

namespace fg::simd::FG_ISA_NAMESPACE {

template <class T>
struct Vec;

// Vec<T> over register type R of W lanes, with the ISA's load / broadcast / store intrinsics;
// EXTRA: more members (the widening load and the narrowing store of Vec<double>).
#define FG_VEC_STRUCT(T, R, W, MASK, LOAD, SET1, STORE, EXTRA) \
  template <>                                                  \
  struct Vec<T> {                                              \
    static constexpr int kWidth = W;                           \
    using Mask = MASK;                                         \
    R v;                                                       \
    static Vec load(const T* p) { return {LOAD(p)}; }          \
    static Vec broadcast(T x) { return {SET1(x)}; }            \
    void store(T* p) const { STORE(p, v); }                    \
    EXTRA                                                      \
  };

#if defined(FG_ISA_SCALAR)
// One element per vector: the same kernels as plain scalar code, for CPUs without AVX2.
template <class T>
struct Vec {
  static constexpr int kWidth = 1;
  using Mask = bool;
  T v;
  template <class S>  // T, or float widened to double
  static Vec load(const S* p) {
    return {static_cast<T>(*p)};
  }
  static Vec broadcast(T x) { return {x}; }
  template <class S>  // T, or double rounded to float
  void store(S* p) const {
    *p = static_cast<S>(v);
  }
};
template <class T> Vec<T> operator+(Vec<T> a, Vec<T> b) { return {a.v + b.v}; }
template <class T> Vec<T> operator-(Vec<T> a, Vec<T> b) { return {a.v - b.v}; }
template <class T> Vec<T> operator*(Vec<T> a, Vec<T> b) { return {a.v * b.v}; }
template <class T> Vec<T> operator/(Vec<T> a, Vec<T> b) { return {a.v / b.v}; }
// Unfused: a software fma would be far slower than the two roundings it saves.
template <class T> Vec<T> fma(Vec<T> a, Vec<T> b, Vec<T> c) { return {a.v * b.v + c.v}; }
// The product of two floats is exact in double.
inline Vec<float> two_product(Vec<float> a, Vec<float> b, Vec<float>& e) {
  const double exact = static_cast<double>(a.v) * b.v;
  const float rounded = static_cast<float>(exact);
  e.v = static_cast<float>(exact - rounded);
  return {rounded};
}
template <class T> Vec<T> min(Vec<T> a, Vec<T> b) { return {a.v < b.v ? a.v : b.v}; }
template <class T> Vec<T> max(Vec<T> a, Vec<T> b) { return {a.v > b.v ? a.v : b.v}; }
template <class T> Vec<T> abs(Vec<T> a) { return {std::fabs(a.v)}; }
template <class T> Vec<T> neg(Vec<T> a) { return {-a.v}; }
template <class T> Vec<T> copysign(Vec<T> m, Vec<T> s) { return {std::copysign(m.v, s.v)}; }
template <class T> bool sign_bit(Vec<T> a) { return std::signbit(a.v); }
template <class T> Vec<T> sqrt(Vec<T> a) { return {std::sqrt(a.v)}; }
// Without SSE4.1, nearbyint and ldexp are library calls; these are a few instructions.
// Adding and removing 1.5 * 2^mantissa_bits rounds to nearest even; larger values are integers.
template <class T> Vec<T> round_nearest(Vec<T> a) {
  constexpr T magic = std::is_same_v<T, float> ? T(12582912.0f) : T(6755399441055744.0);
  return {std::fabs(a.v) < magic / 3 ? (a.v + magic) - magic : a.v};
}
// 2^k for k in the normal exponent range, from its bits.
template <class T> T pow2(int k) {
  using Bits = std::conditional_t<std::is_same_v<T, float>, uint32_t, uint64_t>;
  constexpr int mantissa = std::numeric_limits<T>::digits - 1, bias = std::numeric_limits<T>::max_exponent - 1;
  Bits bits = static_cast<Bits>(k + bias) << mantissa;
  T x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
// In two steps, as the AVX2 one: the first product is exact, the second rounds once.
template <class T> Vec<T> ldexp(Vec<T> a, Vec<T> n) {
  const int k = static_cast<int>(n.v), half = k / 2;
  return {a.v * pow2<T>(half) * pow2<T>(k - half)};
}
template <class T> Vec<T> frexp(Vec<T> a, Vec<T>& e) {
  int k;
  T m = std::frexp(a.v, &k);
  e.v = static_cast<T>(k);
  return {m};
}
template <class T> bool lt(Vec<T> a, Vec<T> b) { return a.v < b.v; }
template <class T> bool le(Vec<T> a, Vec<T> b) { return a.v <= b.v; }
template <class T> bool gt(Vec<T> a, Vec<T> b) { return a.v > b.v; }
template <class T> bool eq(Vec<T> a, Vec<T> b) { return a.v == b.v; }
template <class T> bool ne(Vec<T> a, Vec<T> b) { return a.v != b.v; }
inline bool mask_or(bool a, bool b) { return a || b; }
inline bool any(bool m) { return m; }
template <class T> Vec<T> select(bool m, Vec<T> a, Vec<T> b) { return m ? a : b; }
template <class T> Vec<T> interleave_low(Vec<T> a, Vec<T>) { return a; }
template <class T> Vec<T> interleave_high(Vec<T>, Vec<T> b) { return b; }
template <class T> Vec<T> even_lanes(Vec<T> a, Vec<T>) { return a; }

#elif defined(FG_ISA_AVX2) || defined(FG_ISA_AVX512)
#if defined(FG_ISA_AVX2) && !(defined(__AVX2__) && defined(__FMA__))
#error "isa_avx2.cpp must be compiled with -mavx2 -mfma"
#endif
#if defined(FG_ISA_AVX512) && !(defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512VL__))
#error "isa_avx512.cpp must be compiled with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma"
#endif
// What AVX2 (P = _mm256) and AVX-512 (P = _mm512) share, for T with register R and suffix S.
#define FG_X86_VEC(T, R, P, S, W, MASK, WIDEN)                                               \
  FG_VEC_STRUCT(T, R, W, MASK, P##_loadu_##S, P##_set1_##S, P##_storeu_##S, WIDEN)           \
  inline Vec<T> operator+(Vec<T> a, Vec<T> b) { return {P##_add_##S(a.v, b.v)}; }            \
  inline Vec<T> operator-(Vec<T> a, Vec<T> b) { return {P##_sub_##S(a.v, b.v)}; }            \
  inline Vec<T> operator*(Vec<T> a, Vec<T> b) { return {P##_mul_##S(a.v, b.v)}; }            \
  inline Vec<T> operator/(Vec<T> a, Vec<T> b) { return {P##_div_##S(a.v, b.v)}; }            \
  inline Vec<T> fma(Vec<T> a, Vec<T> b, Vec<T> c) { return {P##_fmadd_##S(a.v, b.v, c.v)}; } \
  inline Vec<T> min(Vec<T> a, Vec<T> b) { return {P##_min_##S(a.v, b.v)}; }                  \
  inline Vec<T> max(Vec<T> a, Vec<T> b) { return {P##_max_##S(a.v, b.v)}; }                  \
  inline Vec<T> sqrt(Vec<T> a) { return {P##_sqrt_##S(a.v)}; }                               \
  inline Vec<T> abs(Vec<T> a) { return {P##_andnot_##S(P##_set1_##S(T(-0.0)), a.v)}; }       \
  inline Vec<T> neg(Vec<T> a) { return {P##_xor_##S(P##_set1_##S(T(-0.0)), a.v)}; }          \
  inline Vec<T> copysign(Vec<T> m, Vec<T> s) {                                               \
    const R sign = P##_set1_##S(T(-0.0));                                                    \
    return {P##_or_##S(P##_andnot_##S(sign, m.v), P##_and_##S(sign, s.v))};                  \
  }

#if defined(FG_ISA_AVX2)
FG_X86_VEC(float, __m256, _mm256, ps, 8, __m256, )
FG_X86_VEC(double, __m256d, _mm256, pd, 4, __m256d,
           static Vec load(const float* p) { return {_mm256_cvtps_pd(_mm_loadu_ps(p))}; }
           void store(float* p) const { _mm_storeu_ps(p, _mm256_cvtpd_ps(v)); })
inline __m256 lt(Vec<float> a, Vec<float> b) { return _mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ); }
inline __m256 le(Vec<float> a, Vec<float> b) { return _mm256_cmp_ps(a.v, b.v, _CMP_LE_OQ); }
inline __m256 gt(Vec<float> a, Vec<float> b) { return _mm256_cmp_ps(a.v, b.v, _CMP_GT_OQ); }
inline __m256 eq(Vec<float> a, Vec<float> b) { return _mm256_cmp_ps(a.v, b.v, _CMP_EQ_OQ); }
inline __m256 ne(Vec<float> a, Vec<float> b) { return _mm256_cmp_ps(a.v, b.v, _CMP_NEQ_UQ); }
inline __m256d lt(Vec<double> a, Vec<double> b) { return _mm256_cmp_pd(a.v, b.v, _CMP_LT_OQ); }
inline __m256d le(Vec<double> a, Vec<double> b) { return _mm256_cmp_pd(a.v, b.v, _CMP_LE_OQ); }
inline __m256d gt(Vec<double> a, Vec<double> b) { return _mm256_cmp_pd(a.v, b.v, _CMP_GT_OQ); }
inline __m256d eq(Vec<double> a, Vec<double> b) { return _mm256_cmp_pd(a.v, b.v, _CMP_EQ_OQ); }
inline __m256d ne(Vec<double> a, Vec<double> b) { return _mm256_cmp_pd(a.v, b.v, _CMP_NEQ_UQ); }
inline __m256 mask_or(__m256 a, __m256 b) { return _mm256_or_ps(a, b); }
inline __m256d mask_or(__m256d a, __m256d b) { return _mm256_or_pd(a, b); }
inline bool any(__m256 m) { return _mm256_movemask_ps(m) != 0; }
inline bool any(__m256d m) { return _mm256_movemask_pd(m) != 0; }
// The value itself: the masks' users (blendv, movemask, or) read only each lane's top bit.
inline __m256 sign_bit(Vec<float> a) { return a.v; }
inline __m256d sign_bit(Vec<double> a) { return a.v; }
inline Vec<float> select(__m256 m, Vec<float> a, Vec<float> b) { return {_mm256_blendv_ps(b.v, a.v, m)}; }
inline Vec<double> select(__m256d m, Vec<double> a, Vec<double> b) { return {_mm256_blendv_pd(b.v, a.v, m)}; }
// unpacklo/hi interleave within each 128-bit lane; the lane permute puts the halves in order.
inline Vec<float> interleave_low(Vec<float> a, Vec<float> b) {
  return {_mm256_permute2f128_ps(_mm256_unpacklo_ps(a.v, b.v), _mm256_unpackhi_ps(a.v, b.v), 0x20)};
}
inline Vec<float> interleave_high(Vec<float> a, Vec<float> b) {
  return {_mm256_permute2f128_ps(_mm256_unpacklo_ps(a.v, b.v), _mm256_unpackhi_ps(a.v, b.v), 0x31)};
}
inline Vec<double> interleave_low(Vec<double> a, Vec<double> b) {
  return {_mm256_permute2f128_pd(_mm256_unpacklo_pd(a.v, b.v), _mm256_unpackhi_pd(a.v, b.v), 0x20)};
}
inline Vec<double> interleave_high(Vec<double> a, Vec<double> b) {
  return {_mm256_permute2f128_pd(_mm256_unpacklo_pd(a.v, b.v), _mm256_unpackhi_pd(a.v, b.v), 0x31)};
}
// The shuffles pick the even lanes within each 128-bit lane (a0 a2 b0 b2 | a4 a6 b4 b6); the 64-bit
// permute puts the quarters in order.
inline Vec<float> even_lanes(Vec<float> a, Vec<float> b) {
  const __m256 pairs = _mm256_shuffle_ps(a.v, b.v, _MM_SHUFFLE(2, 0, 2, 0));
  return {_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(pairs), _MM_SHUFFLE(3, 1, 2, 0)))};
}
inline Vec<double> even_lanes(Vec<double> a, Vec<double> b) {
  return {_mm256_permute4x64_pd(_mm256_unpacklo_pd(a.v, b.v), _MM_SHUFFLE(3, 1, 2, 0))};
}
inline Vec<float> round_nearest(Vec<float> a) {
  return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
inline Vec<double> round_nearest(Vec<double> a) {
  return {_mm256_round_pd(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}

// 2^k for integral k within the normal exponent range, built from its bits.
inline __m256 pow2(__m256 k) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23));
}
inline __m256d pow2(__m256d k) {
  __m256i k64 = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k));
  return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(k64, _mm256_set1_epi64x(1023)), 52));
}
// In two steps, so that n may reach below the normal range (denormal results) or above it (inf):
// the first product is exact, the second rounds once.
template <class T>
Vec<T> ldexp(Vec<T> a, Vec<T> n) {
  Vec<T> n1 = round_nearest(n * Vec<T>::broadcast(T(0.5)));
  return {(a * Vec<T>{pow2(n1.v)} * Vec<T>{pow2((n - n1).v)}).v};
}
// Exponent and mantissa from the bits; denormals are first scaled into the normal range.
inline Vec<float> frexp(Vec<float> a, Vec<float>& e) {
  __m256 tiny = _mm256_cmp_ps(a.v, _mm256_set1_ps(1.17549435e-38f), _CMP_LT_OQ);
  __m256 x = _mm256_blendv_ps(a.v, _mm256_mul_ps(a.v, _mm256_set1_ps(16777216.0f)), tiny);  // * 2^24
  __m256i bits = _mm256_castps_si256(x);
  __m256i biased = _mm256_srli_epi32(bits, 23);  // sign bit is 0: x > 0
  e.v = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(biased, _mm256_set1_epi32(126))),
                      _mm256_and_ps(tiny, _mm256_set1_ps(24.0f)));
  __m256i m = _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f000000));
  return {_mm256_castsi256_ps(m)};
}
inline Vec<double> frexp(Vec<double> a, Vec<double>& e) {
  __m256d tiny = _mm256_cmp_pd(a.v, _mm256_set1_pd(2.2250738585072014e-308), _CMP_LT_OQ);
  __m256d x = _mm256_blendv_pd(a.v, _mm256_mul_pd(a.v, _mm256_set1_pd(18014398509481984.0)), tiny);  // * 2^54
  __m256i bits = _mm256_castpd_si256(x);
  // The biased exponent (< 2^11) as a double: OR it into the mantissa of 2^52, then subtract 2^52.
  __m256i biased = _mm256_or_si256(_mm256_srli_epi64(bits, 52), _mm256_set1_epi64x(0x4330000000000000));
  __m256d eb = _mm256_sub_pd(_mm256_castsi256_pd(biased), _mm256_set1_pd(4503599627370496.0));
  e.v = _mm256_sub_pd(_mm256_sub_pd(eb, _mm256_set1_pd(1022.0)), _mm256_and_pd(tiny, _mm256_set1_pd(54.0)));
  __m256i m = _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi64x(0x000fffffffffffff)),
                              _mm256_set1_epi64x(0x3fe0000000000000));
  return {_mm256_castsi256_pd(m)};
}
#else   // AVX-512
FG_X86_VEC(float, __m512, _mm512, ps, 16, __mmask16, )
FG_X86_VEC(double, __m512d, _mm512, pd, 8, __mmask8,
           static Vec load(const float* p) { return {_mm512_cvtps_pd(_mm256_loadu_ps(p))}; }
           void store(float* p) const { _mm256_storeu_ps(p, _mm512_cvtpd_ps(v)); })
#define FG_AVX512_MASKS(T, S, MASK)                                                                 \
  inline MASK lt(Vec<T> a, Vec<T> b) { return _mm512_cmp_##S##_mask(a.v, b.v, _CMP_LT_OQ); }        \
  inline MASK le(Vec<T> a, Vec<T> b) { return _mm512_cmp_##S##_mask(a.v, b.v, _CMP_LE_OQ); }        \
  inline MASK gt(Vec<T> a, Vec<T> b) { return _mm512_cmp_##S##_mask(a.v, b.v, _CMP_GT_OQ); }        \
  inline MASK eq(Vec<T> a, Vec<T> b) { return _mm512_cmp_##S##_mask(a.v, b.v, _CMP_EQ_OQ); }        \
  inline MASK ne(Vec<T> a, Vec<T> b) { return _mm512_cmp_##S##_mask(a.v, b.v, _CMP_NEQ_UQ); }       \
  inline Vec<T> select(MASK m, Vec<T> a, Vec<T> b) { return {_mm512_mask_blend_##S(m, b.v, a.v)}; } \
  inline Vec<T> round_nearest(Vec<T> a) {                                                           \
    return {_mm512_roundscale_##S(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};             \
  }                                                                                                 \
  /* scalef: a * 2^floor(n), rounded once, denormal and overflowing results included */             \
  inline Vec<T> ldexp(Vec<T> a, Vec<T> n) { return {_mm512_scalef_##S(a.v, n.v)}; }                 \
  /* getexp gives floor(log2 x) (denormals too); getmant the mantissa in [0.5, 1) */                \
  inline Vec<T> frexp(Vec<T> a, Vec<T>& e) {                                                        \
    e.v = _mm512_add_##S(_mm512_getexp_##S(a.v), _mm512_set1_##S(1));                               \
    return {_mm512_getmant_##S(a.v, _MM_MANT_NORM_p5_1, _MM_MANT_SIGN_zero)};                       \
  }
FG_AVX512_MASKS(float, ps, __mmask16)
FG_AVX512_MASKS(double, pd, __mmask8)
#undef FG_AVX512_MASKS
inline __mmask16 mask_or(__mmask16 a, __mmask16 b) { return static_cast<__mmask16>(a | b); }
inline __mmask8 mask_or(__mmask8 a, __mmask8 b) { return static_cast<__mmask8>(a | b); }
inline bool any(__mmask16 m) { return m != 0; }
inline bool any(__mmask8 m) { return m != 0; }
inline __mmask16 sign_bit(Vec<float> a) { return _mm512_movepi32_mask(_mm512_castps_si512(a.v)); }
inline __mmask8 sign_bit(Vec<double> a) { return _mm512_movepi64_mask(_mm512_castpd_si512(a.v)); }
// Two-source permutes: index i < kWidth picks a[i], kWidth + i picks b[i].
inline Vec<float> interleave_low(Vec<float> a, Vec<float> b) {
  return {_mm512_permutex2var_ps(a.v, _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), b.v)};
}
inline Vec<float> interleave_high(Vec<float> a, Vec<float> b) {
  return {_mm512_permutex2var_ps(a.v, _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31),
                                 b.v)};
}
inline Vec<double> interleave_low(Vec<double> a, Vec<double> b) {
  return {_mm512_permutex2var_pd(a.v, _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), b.v)};
}
inline Vec<double> interleave_high(Vec<double> a, Vec<double> b) {
  return {_mm512_permutex2var_pd(a.v, _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15), b.v)};
}
inline Vec<float> even_lanes(Vec<float> a, Vec<float> b) {
  return {
      _mm512_permutex2var_ps(a.v, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b.v)};
}
inline Vec<double> even_lanes(Vec<double> a, Vec<double> b) {
  return {_mm512_permutex2var_pd(a.v, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), b.v)};
}
#endif
#undef FG_X86_VEC

#elif defined(FG_ISA_NEON)
// arm64: 128-bit vectors. Compiled only on arm64 (and not yet built or tested there: a starting
// point). frexp and ldexp go lane by lane through libm.
inline uint32x4_t mask_not(uint32x4_t m) { return vmvnq_u32(m); }
inline uint64x2_t mask_not(uint64x2_t m) { return vreinterpretq_u64_u32(vmvnq_u32(vreinterpretq_u32_u64(m))); }
inline bool any(uint32x4_t m) { return vmaxvq_u32(m) != 0; }
inline bool any(uint64x2_t m) { return vmaxvq_u32(vreinterpretq_u32_u64(m)) != 0; }
#define FG_NEON_VEC(T, R, Q, U, I, W, WIDEN)                                                  \
  FG_VEC_STRUCT(T, R, W, U, vld1q_##Q, vdupq_n_##Q, vst1q_##Q, WIDEN)                         \
  inline Vec<T> operator+(Vec<T> a, Vec<T> b) { return {vaddq_##Q(a.v, b.v)}; }               \
  inline Vec<T> operator-(Vec<T> a, Vec<T> b) { return {vsubq_##Q(a.v, b.v)}; }               \
  inline Vec<T> operator*(Vec<T> a, Vec<T> b) { return {vmulq_##Q(a.v, b.v)}; }               \
  inline Vec<T> operator/(Vec<T> a, Vec<T> b) { return {vdivq_##Q(a.v, b.v)}; }               \
  inline Vec<T> fma(Vec<T> a, Vec<T> b, Vec<T> c) { return {vfmaq_##Q(c.v, a.v, b.v)}; }      \
  inline Vec<T> abs(Vec<T> a) { return {vabsq_##Q(a.v)}; }                                    \
  inline Vec<T> neg(Vec<T> a) { return {vnegq_##Q(a.v)}; }                                    \
  inline Vec<T> sqrt(Vec<T> a) { return {vsqrtq_##Q(a.v)}; }                                  \
  inline Vec<T> round_nearest(Vec<T> a) { return {vrndnq_##Q(a.v)}; }                         \
  inline U lt(Vec<T> a, Vec<T> b) { return vcltq_##Q(a.v, b.v); }                             \
  inline U le(Vec<T> a, Vec<T> b) { return vcleq_##Q(a.v, b.v); }                             \
  inline U gt(Vec<T> a, Vec<T> b) { return vcgtq_##Q(a.v, b.v); }                             \
  inline U eq(Vec<T> a, Vec<T> b) { return vceqq_##Q(a.v, b.v); }                             \
  inline U ne(Vec<T> a, Vec<T> b) { return mask_not(vceqq_##Q(a.v, b.v)); }                   \
  inline U mask_or(U a, U b) { return vorrq_##I(a, b); }                                      \
  inline Vec<T> select(U m, Vec<T> a, Vec<T> b) { return {vbslq_##Q(m, a.v, b.v)}; }          \
  inline Vec<T> copysign(Vec<T> m, Vec<T> s) {                                                \
    return {vbslq_##Q(vreinterpretq_##I##_##Q(vdupq_n_##Q(T(-0.0))), s.v, m.v)};              \
  }                                                                                           \
  /* x86 semantics: b when either is NaN */                                                   \
  inline Vec<T> min(Vec<T> a, Vec<T> b) { return select(lt(a, b), a, b); }                    \
  inline Vec<T> max(Vec<T> a, Vec<T> b) { return select(gt(a, b), a, b); }                    \
  inline Vec<T> interleave_low(Vec<T> a, Vec<T> b) { return {vzip1q_##Q(a.v, b.v)}; }         \
  inline Vec<T> interleave_high(Vec<T> a, Vec<T> b) { return {vzip2q_##Q(a.v, b.v)}; }        \
  inline Vec<T> even_lanes(Vec<T> a, Vec<T> b) { return {vuzp1q_##Q(a.v, b.v)}; }             \
  inline Vec<T> frexp(Vec<T> a, Vec<T>& e) {                                                  \
    T m[Vec<T>::kWidth];                                                                      \
    int k;                                                                                    \
    T ev[Vec<T>::kWidth];                                                                     \
    a.store(m);                                                                               \
    for (int i = 0; i < Vec<T>::kWidth; ++i) {                                                \
      m[i] = std::frexp(m[i], &k);                                                            \
      ev[i] = static_cast<T>(k);                                                              \
    }                                                                                         \
    e = Vec<T>::load(ev);                                                                     \
    return Vec<T>::load(m);                                                                   \
  }                                                                                           \
  inline Vec<T> ldexp(Vec<T> a, Vec<T> n) {                                                   \
    T x[Vec<T>::kWidth], k[Vec<T>::kWidth];                                                   \
    a.store(x);                                                                               \
    n.store(k);                                                                               \
    for (int i = 0; i < Vec<T>::kWidth; ++i) x[i] = std::ldexp(x[i], static_cast<int>(k[i])); \
    return Vec<T>::load(x);                                                                   \
  }
FG_NEON_VEC(float, float32x4_t, f32, uint32x4_t, u32, 4, )
FG_NEON_VEC(double, float64x2_t, f64, uint64x2_t, u64, 2,
            static Vec load(const float* p) { return {vcvt_f64_f32(vld1_f32(p))}; }
            void store(float* p) const { vst1_f32(p, vcvt_f32_f64(v)); })
inline uint32x4_t sign_bit(Vec<float> a) { return vcltzq_s32(vreinterpretq_s32_f32(a.v)); }
inline uint64x2_t sign_bit(Vec<double> a) { return vcltzq_s64(vreinterpretq_s64_f64(a.v)); }
#undef FG_NEON_VEC
#endif

#undef FG_VEC_STRUCT

#if defined(FG_ISA_AVX512)
inline Vec<float> load_first(const float* p, int64_t count) {
  return {_mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1), p)};
}
inline Vec<double> load_first(const double* p, int64_t count) {
  return {_mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << count) - 1), p)};
}
inline Vec<double> load_first_widened(const float* p, int64_t count) {
  return {_mm512_cvtps_pd(_mm256_maskz_loadu_ps(static_cast<__mmask8>((1u << count) - 1), p))};
}
inline void store_first(Vec<float> v, float* p, int64_t count) {
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << count) - 1), v.v);
}
inline void store_first(Vec<double> v, double* p, int64_t count) {
  _mm512_mask_storeu_pd(p, static_cast<__mmask8>((1u << count) - 1), v.v);
}
#elif defined(FG_ISA_AVX2)
// Lane i is set where i < count (all bits, as maskload/maskstore read the top one).
inline __m256i first_lanes_32(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline __m256i first_lanes_64(int64_t count) {
  return _mm256_cmpgt_epi64(_mm256_set1_epi64x(count), _mm256_setr_epi64x(0, 1, 2, 3));
}
inline Vec<float> load_first(const float* p, int64_t count) { return {_mm256_maskload_ps(p, first_lanes_32(count))}; }
inline Vec<double> load_first(const double* p, int64_t count) { return {_mm256_maskload_pd(p, first_lanes_64(count))}; }
inline Vec<double> load_first_widened(const float* p, int64_t count) {
  return {_mm256_cvtps_pd(
      _mm_maskload_ps(p, _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(count)), _mm_setr_epi32(0, 1, 2, 3))))};
}
inline void store_first(Vec<float> v, float* p, int64_t count) { _mm256_maskstore_ps(p, first_lanes_32(count), v.v); }
inline void store_first(Vec<double> v, double* p, int64_t count) { _mm256_maskstore_pd(p, first_lanes_64(count), v.v); }
#else  // one lane (a tail has no element) or NEON's: through a buffer
template <class T>
Vec<T> load_first(const T* p, int64_t count) {
  T buffer[Vec<T>::kWidth] = {};
  for (int64_t i = 0; i < count; ++i) buffer[i] = p[i];
  return Vec<T>::load(buffer);
}
inline Vec<double> load_first_widened(const float* p, int64_t count) {
  double buffer[Vec<double>::kWidth] = {};
  for (int64_t i = 0; i < count; ++i) buffer[i] = p[i];
  return Vec<double>::load(buffer);
}
template <class T>
void store_first(Vec<T> v, T* p, int64_t count) {
  T buffer[Vec<T>::kWidth];
  v.store(buffer);
  for (int64_t i = 0; i < count; ++i) p[i] = buffer[i];
}
#endif

// compress_store(m, v, p): the lanes of float vector v that m selects, stored in lane order at p,
// which has room for a whole vector (the lanes after them are written too, with anything); returns
// their number.
#if defined(FG_ISA_AVX512)
inline int64_t compress_store(__mmask16 m, Vec<float> v, float* p) {
  _mm512_storeu_ps(p, _mm512_maskz_compress_ps(m, v.v));  // the register form: its store form is slow on AMD
  return __builtin_popcount(m);
}
#elif defined(FG_ISA_AVX2)
// For each of the 256 masks of 8 lanes, the indices of its set lanes, 4 bits each from the lowest.
constexpr std::array<uint32_t, 256> set_lane_orders() {
  std::array<uint32_t, 256> orders{};
  for (uint32_t mask = 0; mask < 256; ++mask)
    for (uint32_t lane = 0, shift = 0; lane < 8; ++lane)
      if (mask >> lane & 1) {
        orders[mask] |= lane << shift;
        shift += 4;
      }
  return orders;
}
inline int64_t compress_store(__m256 m, Vec<float> v, float* p) {
  static constexpr std::array<uint32_t, 256> kOrders = set_lane_orders();
  const int bits = _mm256_movemask_ps(m);
  const __m256i order = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(kOrders[bits])),
                                                           _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                         _mm256_set1_epi32(7));
  _mm256_storeu_ps(p, _mm256_permutevar8x32_ps(v.v, order));
  return __builtin_popcount(static_cast<unsigned>(bits));
}
#elif defined(FG_ISA_NEON)
inline int64_t compress_store(uint32x4_t m, Vec<float> v, float* p) {
  uint32_t set[4];
  float values[4];
  vst1q_u32(set, m);
  v.store(values);
  int64_t count = 0;
  for (int i = 0; i < 4; ++i) {
    p[count] = values[i];
    count += set[i] != 0;
  }
  return count;
}
#else
inline int64_t compress_store(bool m, Vec<float> v, float* p) {
  *p = v.v;
  return m;
}
#endif

#if defined(FG_ISA_AVX512)
using Index = __m512i;
template <int kShift>
Index table_index(Vec<float> a, int32_t origin, int32_t last) {
  const __m512i i = _mm512_srai_epi32(_mm512_sub_epi32(_mm512_castps_si512(a.v), _mm512_set1_epi32(origin)), kShift);
  return _mm512_min_epi32(_mm512_max_epi32(i, _mm512_setzero_si512()), _mm512_set1_epi32(last));
}
// Two registers of 16 floats, one two-source permute (no memory access per lane).
inline Vec<float> lookup(const float* row, Index i) {
  return {_mm512_permutex2var_ps(_mm512_load_ps(row), i, _mm512_load_ps(row + 16))};
}
#elif defined(FG_ISA_AVX2)
using Index = __m256i;
template <int kShift>
Index table_index(Vec<float> a, int32_t origin, int32_t last) {
  const __m256i i = _mm256_srai_epi32(_mm256_sub_epi32(_mm256_castps_si256(a.v), _mm256_set1_epi32(origin)), kShift);
  return _mm256_min_epi32(_mm256_max_epi32(i, _mm256_setzero_si256()), _mm256_set1_epi32(last));
}
// 32 floats are four registers: each permuted by the index's low 3 bits, then two rounds of blends
// by its bits 3 and 4 (blendv reads a lane's sign bit). A gather instead took ~7x AVX-512's time
// for float32 GELU on AMD Zen 5 (and gathers are slower still on Intel CPUs with the GDS
// mitigation's microcode).
inline Vec<float> lookup(const float* row, Index i) {
  const __m256 bit3 = _mm256_castsi256_ps(_mm256_slli_epi32(i, 28)),
               bit4 = _mm256_castsi256_ps(_mm256_slli_epi32(i, 27));
  const __m256 low = _mm256_blendv_ps(_mm256_permutevar8x32_ps(_mm256_load_ps(row), i),
                                      _mm256_permutevar8x32_ps(_mm256_load_ps(row + 8), i), bit3);
  const __m256 high = _mm256_blendv_ps(_mm256_permutevar8x32_ps(_mm256_load_ps(row + 16), i),
                                       _mm256_permutevar8x32_ps(_mm256_load_ps(row + 24), i), bit3);
  return {_mm256_blendv_ps(low, high, bit4)};
}
#elif defined(FG_ISA_NEON)
using Index = int32x4_t;
template <int kShift>
Index table_index(Vec<float> a, int32_t origin, int32_t last) {
  const int32x4_t i = vshrq_n_s32(vsubq_s32(vreinterpretq_s32_f32(a.v), vdupq_n_s32(origin)), kShift);
  return vminq_s32(vmaxq_s32(i, vdupq_n_s32(0)), vdupq_n_s32(last));
}
inline Vec<float> lookup(const float* row, Index i) {
  int32_t lanes[4];
  vst1q_s32(lanes, i);
  const float values[4] = {row[lanes[0]], row[lanes[1]], row[lanes[2]], row[lanes[3]]};
  return {vld1q_f32(values)};
}
#else
using Index = int32_t;
template <int kShift>
Index table_index(Vec<float> a, int32_t origin, int32_t last) {
  int32_t bits;
  std::memcpy(&bits, &a.v, sizeof bits);
  return std::min(std::max((bits - origin) >> kShift, 0), last);
}
inline Vec<float> lookup(const float* row, Index i) { return {row[i]}; }
#endif

// A vector's lanes folded in halves to one value, in registers: lane j with lane j + w for w = kWidth / 2,
// ..., 1 (the tree of softmax_impl.h's and reduce_impl.h's partial sums). sum_of_halves adds;
// max_of_halves keeps the upper lane where it is greater, else the lower (so the lowest lane of
// equal values, and the max instructions' NaN rule: a NaN in either lane gives the lower one).
#if defined(FG_ISA_AVX2) || defined(FG_ISA_AVX512)
inline __m128d sum_of_halves_128(__m256d v) {
  return _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
}
inline __m128 max_of_halves_128(__m256 v) { return _mm_max_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v)); }
inline __m128d max_of_halves_128(__m256d v) {
  return _mm_max_pd(_mm256_extractf128_pd(v, 1), _mm256_castpd256_pd128(v));
}
inline double sum_of_halves_of(__m128d v) { return _mm_cvtsd_f64(_mm_add_sd(v, _mm_unpackhi_pd(v, v))); }
inline double max_of_halves_of(__m128d v) { return _mm_cvtsd_f64(_mm_max_sd(_mm_unpackhi_pd(v, v), v)); }
inline float max_of_halves_of(__m128 v) {
  v = _mm_max_ps(_mm_movehl_ps(v, v), v);
  return _mm_cvtss_f32(_mm_max_ss(_mm_movehdup_ps(v), v));
}
#if defined(FG_ISA_AVX512)
inline double sum_of_halves(Vec<double> v) {
  return sum_of_halves_of(
      sum_of_halves_128(_mm256_add_pd(_mm512_castpd512_pd256(v.v), _mm512_extractf64x4_pd(v.v, 1))));
}
inline float max_of_halves(Vec<float> v) {
  return max_of_halves_of(
      max_of_halves_128(_mm256_max_ps(_mm512_extractf32x8_ps(v.v, 1), _mm512_castps512_ps256(v.v))));
}
inline double max_of_halves(Vec<double> v) {
  return max_of_halves_of(
      max_of_halves_128(_mm256_max_pd(_mm512_extractf64x4_pd(v.v, 1), _mm512_castpd512_pd256(v.v))));
}
#else
inline double sum_of_halves(Vec<double> v) { return sum_of_halves_of(sum_of_halves_128(v.v)); }
inline float max_of_halves(Vec<float> v) { return max_of_halves_of(max_of_halves_128(v.v)); }
inline double max_of_halves(Vec<double> v) { return max_of_halves_of(max_of_halves_128(v.v)); }
#endif
#else  // through a buffer
template <class T, class F>
T fold_halves(Vec<T> v, F f) {
  T lanes[Vec<T>::kWidth];
  v.store(lanes);
  for (int w = Vec<T>::kWidth / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) lanes[j] = f(lanes[j], lanes[j + w]);
  return lanes[0];
}
template <class T>
T sum_of_halves(Vec<T> v) {
  return fold_halves(v, [](T lower, T upper) { return lower + upper; });
}
template <class T>
T max_of_halves(Vec<T> v) {
  return fold_halves(v, [](T lower, T upper) { return upper > lower ? upper : lower; });
}
#endif

// transpose_in_registers(v): the kWidth x kWidth block whose row r is v[r], transposed in place
// (v[p] becomes column p): log2(kWidth) rounds of interleaving v[i] with v[i + kWidth/2] (a perfect
// shuffle). AVX-512 float has its own below.
template <class T>
void transpose_in_registers(Vec<T> (&v)[Vec<T>::kWidth]) {
  constexpr int W = Vec<T>::kWidth;
  for (int round = 1; round < W; round *= 2) {
    Vec<T> shuffled[W];
    for (int i = 0; i < W / 2; ++i) {
      shuffled[2 * i] = interleave_low(v[i], v[i + W / 2]);
      shuffled[2 * i + 1] = interleave_high(v[i], v[i + W / 2]);
    }
    for (int i = 0; i < W; ++i) v[i] = shuffled[i];
  }
}
#if defined(FG_ISA_AVX512)
// 16 x 16 as 4 x 4 blocks of 4 x 4: each small block transposed within its 128-bit lane (two rounds
// of in-lane unpacks), then the lanes moved across registers (two rounds of 128-bit shuffles). Four
// rounds of two-register permutes did the same in 1.6x the time (a block in L1, AMD EPYC Zen 5:
// 11.1 -> 6.7 ns).
inline void transpose_in_registers(Vec<float> (&v)[16]) {
  auto as_pd = [](__m512 x) { return _mm512_castps_pd(x); };
  __m512 t[16];  // t[4 R + c], lane C: rows 4R..4R+3 of column 4C + c
  for (int i = 0; i < 16; i += 4) {
    const __m512 low01 = _mm512_unpacklo_ps(v[i].v, v[i + 1].v), high01 = _mm512_unpackhi_ps(v[i].v, v[i + 1].v);
    const __m512 low23 = _mm512_unpacklo_ps(v[i + 2].v, v[i + 3].v),
                 high23 = _mm512_unpackhi_ps(v[i + 2].v, v[i + 3].v);
    t[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(as_pd(low01), as_pd(low23)));
    t[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(as_pd(low01), as_pd(low23)));
    t[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(as_pd(high01), as_pd(high23)));
    t[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(as_pd(high01), as_pd(high23)));
  }
  for (int c = 0; c < 4; ++c) {  // column 4C + c gathers lane C of t[c], t[4 + c], t[8 + c], t[12 + c]
    const __m512 lanes01_of_0_4 = _mm512_shuffle_f32x4(t[c], t[4 + c], 0x44);
    const __m512 lanes23_of_0_4 = _mm512_shuffle_f32x4(t[c], t[4 + c], 0xEE);
    const __m512 lanes01_of_8_12 = _mm512_shuffle_f32x4(t[8 + c], t[12 + c], 0x44);
    const __m512 lanes23_of_8_12 = _mm512_shuffle_f32x4(t[8 + c], t[12 + c], 0xEE);
    v[c].v = _mm512_shuffle_f32x4(lanes01_of_0_4, lanes01_of_8_12, 0x88);
    v[4 + c].v = _mm512_shuffle_f32x4(lanes01_of_0_4, lanes01_of_8_12, 0xDD);
    v[8 + c].v = _mm512_shuffle_f32x4(lanes23_of_0_4, lanes23_of_8_12, 0x88);
    v[12 + c].v = _mm512_shuffle_f32x4(lanes23_of_0_4, lanes23_of_8_12, 0xDD);
  }
}
#endif

#if !defined(FG_ISA_SCALAR)
// The fused multiply-add gives the product's rounding error exactly.
inline Vec<float> two_product(Vec<float> a, Vec<float> b, Vec<float>& e) {
  Vec<float> p = a * b;
  e = fma(a, b, neg(p));
  return p;
}
template <class T>
Vec<T> fused_fma(Vec<T> a, Vec<T> b, Vec<T> c) {
  return fma(a, b, c);
}
#else
// a * b + c in double, then rounded to float: the fused result wherever it fits a double
// (exact where it fits a float).
inline Vec<float> fused_fma(Vec<float> a, Vec<float> b, Vec<float> c) {
  return {static_cast<float>(static_cast<double>(a.v) * b.v + c.v)};
}
inline Vec<double> fused_fma(Vec<double> a, Vec<double> b, Vec<double> c) { return {std::fma(a.v, b.v, c.v)}; }
#endif

}  // namespace fg::simd::FG_ISA_NAMESPACE
