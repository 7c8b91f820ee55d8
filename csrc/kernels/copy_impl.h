// A block of short rows copied between two strided layouts: im2col's rows (conv.cpp), where an
// output row of a small image is only 10-30 elements wide. A loop over such rows spends more on
// its per-row length checks and scalar tails than on the copy; here each row is whole vectors, the
// last one overlapping the one before, and a row narrower than a vector is one masked load and
// store on AVX-512 (masked-off lanes are never read, so no row is read past its end).
//
// Included once per ISA translation unit, inside that ISA's namespace (see isa.h / simd.h).
#pragma once
#include <cstdint>

#include "kernels/kernel_table.h"
#include "kernels/simd.h"

namespace fg::simd::FG_ISA_NAMESPACE {
namespace copy_detail {

// dst[0, n) = src[0, n) for n < Vec<T>::kWidth.
template <class T>
inline void copy_short(const T* src, T* dst, int64_t n) {
#if defined(FG_ISA_AVX512)
  if constexpr (std::is_same_v<T, float>) {
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
    _mm512_mask_storeu_ps(dst, m, _mm512_maskz_loadu_ps(m, src));
  } else {
    const __mmask8 m = static_cast<__mmask8>((1u << n) - 1);
    _mm512_mask_storeu_pd(dst, m, _mm512_maskz_loadu_pd(m, src));
  }
#else
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
#endif
}

}  // namespace copy_detail

template <class T>
void copy_block(int64_t rows, int64_t width, const T* src, int64_t ld_src, T* dst, int64_t ld_dst) {
  using V = Vec<T>;
  constexpr int64_t W = V::kWidth;
  if (width <= 0) return;
  if (width < W) {
    for (int64_t r = 0; r < rows; ++r, src += ld_src, dst += ld_dst) copy_detail::copy_short(src, dst, width);
    return;
  }
  for (int64_t r = 0; r < rows; ++r, src += ld_src, dst += ld_dst) {
    for (int64_t i = 0; i + W < width; i += W) V::load(src + i).store(dst + i);
    V::load(src + width - W).store(dst + width - W);
  }
}

template <class T>
void fill_copy(TypedKernels<T>& k) {
  k.copy_block = copy_block<T>;
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
