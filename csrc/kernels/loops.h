// Strided loops over N operands. Plain scalar code: correct for any strides (broadcast dims have
// stride 0, views have offsets and permuted strides). Kernels know nothing about autograd.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "core/dims.h"

namespace fg {

// Calls f(i, offsets) for every element of `shape` in row-major order, where i counts elements and
// offsets[k] is the element offset into operand k, whose strides are strides[k].
template <size_t N, class F>
void for_each_offset(const Dims& shape, const std::array<const int64_t*, N>& strides, F&& f) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  if (total == 0) return;
  std::array<int64_t, N> base{};
  if (ndim == 0) {
    f(int64_t{0}, base);
    return;
  }
  const int64_t inner = shape[ndim - 1];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = strides[k][ndim - 1];
  Dims index(static_cast<size_t>(ndim), 0);
  for (int64_t i = 0; i < total; i += inner) {
    std::array<int64_t, N> off = base;
    for (int64_t j = 0; j < inner; ++j) {
      f(i + j, off);
      for (size_t k = 0; k < N; ++k) off[k] += inner_stride[k];
    }
    // Odometer step over the outer dims.
    for (int64_t d = ndim - 2; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k) base[k] += strides[k][d];
      if (++index[d] < shape[d]) break;
      for (size_t k = 0; k < N; ++k) base[k] -= strides[k][d] * shape[d];
      index[d] = 0;
    }
  }
}

// out[i] = f(x[...]) into a contiguous output.
template <class R, class T, class F>
void map1(const Dims& shape, R* out, const T* x, const int64_t* xs, F&& f) {
  for_each_offset<1>(shape, {xs}, [&](int64_t i, const std::array<int64_t, 1>& o) { out[i] = f(x[o[0]]); });
}

// out[i] = f(a[...], b[...]) into a contiguous output.
template <class R, class A, class B, class F>
void map2(const Dims& shape, R* out, const A* a, const int64_t* as, const B* b, const int64_t* bs, F&& f) {
  for_each_offset<2>(shape, {as, bs},
                     [&](int64_t i, const std::array<int64_t, 2>& o) { out[i] = f(a[o[0]], b[o[1]]); });
}

}  // namespace fg
