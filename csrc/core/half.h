// The 16-bit float element types: float16 (IEEE binary16) and bfloat16 (float32's upper half).
// They are storage types: values load as float, are computed in float, and round back to 16 bits
// on store with round-to-nearest-even, bit for bit as PyTorch's c10::Half and c10::BFloat16.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace fg {

// A value's bits as another type of its size (C++20's std::bit_cast).
template <class To, class From>
To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast: types of different sizes");
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}
inline uint32_t float_bits(float f) { return bit_cast<uint32_t>(f); }
inline float bits_float(uint32_t u) { return bit_cast<float>(u); }

struct Half {
  uint16_t bits;

  // c10's fp16_ieee_from_fp32_value: scaling by powers of two lets the FPU do the rounding.
  static Half from_float(float f) {
    const float scale_to_inf = bits_float(0x77800000u), scale_to_zero = bits_float(0x08800000u);
    float base = (f < 0 ? -f : f) * scale_to_inf * scale_to_zero;
    const uint32_t w = float_bits(f), shl1_w = w + w, sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = bits_float((bias >> 1) + 0x07800000u) + base;
    const uint32_t b = float_bits(base);
    const uint32_t exp_bits = (b >> 13) & 0x00007C00u, mantissa_bits = b & 0x00000FFFu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return {static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign))};
  }
  // c10's fp16_ieee_to_fp32_value.
  float to_float() const {
    const uint32_t w = static_cast<uint32_t>(bits) << 16, sign = w & 0x80000000u, two_w = w + w;
    const float normalized = bits_float((two_w >> 4) + (0xE0u << 23)) * bits_float(0x7800000u);
    const float denormalized = bits_float((two_w >> 17) | (126u << 23)) - 0.5f;
    const uint32_t result = sign | (two_w < (1u << 27) ? float_bits(denormalized) : float_bits(normalized));
    return bits_float(result);
  }
};

struct BFloat16 {
  uint16_t bits;

  // c10's round_to_nearest_even; every NaN becomes the quiet NaN 0x7FC0.
  static BFloat16 from_float(float f) {
    if (f != f) return {0x7FC0u};
    const uint32_t u = float_bits(f);
    return {static_cast<uint16_t>((u + ((u >> 16) & 1u) + 0x7FFFu) >> 16)};
  }
  float to_float() const { return bits_float(static_cast<uint32_t>(bits) << 16); }
};

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

}  // namespace fg
