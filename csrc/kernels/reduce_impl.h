// Vectorized sums, written once against simd.h and compiled once per ISA. Accumulation is in
// double (for float32 too, as the scalar reductions), in a fixed order that does not depend on the
// ISA's vector width: element i goes to partial sum i % kSumLanes, and the kSumLanes partial sums
// are combined pairwise in a fixed tree. So every ISA (and the scalar build) gives identical sums.
#pragma once
#include <cstdint>

#include "kernels/kernel_table.h"
#include "kernels/simd.h"

namespace fg::simd::FG_ISA_NAMESPACE {

constexpr int kSumLanes = 16;  // a multiple of every ISA's double width (1, 2, 4, 8)

template <class T>
double sum_kernel(const T* x, int64_t n) {
  using V = Vec<double>;
  constexpr int R = kSumLanes / V::kWidth;
  static_assert(R * V::kWidth == kSumLanes);
  V acc[R];
  for (V& a : acc) a = V::broadcast(0.0);
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (int r = 0; r < R; ++r) acc[r] = acc[r] + V::load(x + i + r * V::kWidth);
  double lanes[kSumLanes];
  for (int r = 0; r < R; ++r) acc[r].store(lanes + r * V::kWidth);
  for (int j = 0; i + j < n; ++j) lanes[j] += static_cast<double>(x[i + j]);
  for (int width = kSumLanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  return lanes[0];
}

// acc[j] += x[j]: one row of a sum over leading dims; each acc[j] sums its column in row order.
template <class T>
void accumulate_kernel(double* acc, const T* x, int64_t n) {
  using V = Vec<double>;
  int64_t j = 0;
  for (; j + V::kWidth <= n; j += V::kWidth) (V::load(acc + j) + V::load(x + j)).store(acc + j);
  for (; j < n; ++j) acc[j] += static_cast<double>(x[j]);
}

template <class T>
void fill_reduce(TypedKernels<T>& k) {
  k.sum = sum_kernel<T>;
  k.accumulate = accumulate_kernel<T>;
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
