// Value conversions between element types, and int64 arithmetic, with every result defined.
// C++ leaves a float -> int64 conversion of NaN, inf or an out-of-range value undefined, and signed
// overflow too. PyTorch on x86 gives what the hardware gives: the "integer indefinite" INT64_MIN of
// cvttsd2si for such conversions, and two's-complement wrapping for overflow. So does fastgrad,
// on every machine and under -fsanitize=undefined. Float paths compile to the same code as before.
#pragma once
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/half.h"
#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>  // SSE2: part of every x86-64 CPU
#endif

namespace fg {

// The integer types narrower than int64 (int32, int16, int8, uint8).
template <class T>
inline constexpr bool is_narrow_int_v =
    std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, int64_t>;

// static_cast<D>(v), except that NaN, inf and values outside int64's range become INT64_MIN.
// A float goes to a narrower integer type through int32 (INT32_MIN where int32 cannot hold it) and
// then wraps, as x86's cvttss2si does in PyTorch; a 16-bit float converts through float.
template <class D, class S>
inline D value_cast(S v) {
  if constexpr (is_half_v<S>) {
    return value_cast<D>(v.to_float());
  } else if constexpr (is_half_v<D>) {
    return D::from_float(static_cast<float>(v));
  } else if constexpr (is_narrow_int_v<D> && std::is_floating_point_v<S>) {
    constexpr S limit = S(2147483648.0);  // 2^31, exact in float and double
    int32_t i = v >= -limit && v < limit ? static_cast<int32_t>(v) : std::numeric_limits<int32_t>::min();
    return static_cast<D>(i);
  } else if constexpr (std::is_same_v<D, int64_t> && std::is_floating_point_v<S>) {
#if defined(__x86_64__) || defined(_M_X64)
    // The instruction a plain cast compiles to, but as an intrinsic, whose result is defined.
    if constexpr (std::is_same_v<S, double>) return _mm_cvttsd_si64(_mm_set_sd(v));
    else return _mm_cvttss_si64(_mm_set_ss(v));
#else
    constexpr S limit = S(9223372036854775808.0);  // 2^63, exact in float and double
    return v >= -limit && v < limit ? static_cast<int64_t>(v) : std::numeric_limits<int64_t>::min();  // NaN fails both
#endif
  } else {
    return static_cast<D>(v);
  }
}

// x + y, x - y, x * y and -x; for int64 modulo 2^64 (done in uint64, where overflow is defined).
// Other types are untouched (bool operands promote to int, as the plain operators do).
template <class T>
inline auto wrap_add(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>)
    return static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
  else return x + y;
}
template <class T>
inline auto wrap_sub(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>)
    return static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
  else return x - y;
}
template <class T>
inline auto wrap_mul(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>)
    return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
  else return x * y;
}
template <class T>
inline auto wrap_neg(T x) {
  if constexpr (std::is_same_v<T, int64_t>) return static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(x));
  else return -x;
}

}  // namespace fg
