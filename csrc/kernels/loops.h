// Strided loops over N operands. Plain scalar code: correct for any strides (broadcast dims have
// stride 0, views have offsets and permuted strides). Kernels know nothing about autograd.
// for_each_offset visits a range of elements so that callers can split a loop across threads.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "core/dims.h"
#include "kernels/thread_pool.h"

namespace fg {

inline int64_t element_count(const Dims& shape) {
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  return total;
}

// Calls f(i, offsets) for the elements i in [lo, hi) of `shape` in row-major order, where i counts
// elements and offsets[k] is the element offset into operand k, whose strides are strides[k].
template <size_t N, class F>
void for_each_offset(const Dims& shape, const std::array<const int64_t*, N>& strides, int64_t lo, int64_t hi, F&& f) {
  if (lo >= hi) return;
  const int64_t ndim = static_cast<int64_t>(shape.size());
  std::array<int64_t, N> base{};
  if (ndim == 0) {
    f(int64_t{0}, base);
    return;
  }
  const int64_t inner = shape[ndim - 1];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = strides[k][ndim - 1];
  Dims index(static_cast<size_t>(ndim), 0);  // of the outer dims, at the row holding element i
  for (int64_t d = ndim - 2, row = lo / inner; d >= 0; row /= shape[d], --d) {
    index[d] = row % shape[d];
    for (size_t k = 0; k < N; ++k) base[k] += index[d] * strides[k][d];
  }
  for (int64_t i = lo, j = lo % inner; i < hi; j = 0) {  // j: where in its row element i is
    std::array<int64_t, N> off = base;
    for (size_t k = 0; k < N; ++k) off[k] += j * inner_stride[k];
    for (const int64_t row_end = std::min(hi, i - j + inner); i < row_end; ++i) {
      f(i, off);
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

// The same over every element.
template <size_t N, class F>
void for_each_offset(const Dims& shape, const std::array<const int64_t*, N>& strides, F&& f) {
  for_each_offset<N>(shape, strides, 0, element_count(shape), f);
}

// out[i] = f(x[...]) into a contiguous output; long loops split across threads (each element is
// computed alone, so the split never changes a result; f must be safe to call concurrently).
template <class R, class T, class F>
void map1(const Dims& shape, R* out, const T* x, const int64_t* xs, F&& f) {
  if (element_count(shape) == 1) {  // a 0-d tensor's op: no loop to set up (its offsets are 0)
    out[0] = f(x[0]);
    return;
  }
  parallel_for(0, element_count(shape), kParallelElements, [&](int64_t lo, int64_t hi) {
    for_each_offset<1>(shape, {xs}, lo, hi, [&](int64_t i, const std::array<int64_t, 1>& o) { out[i] = f(x[o[0]]); });
  });
}

// out[i] = f(a[...], b[...]) into a contiguous output, split as map1.
template <class R, class A, class B, class F>
void map2(const Dims& shape, R* out, const A* a, const int64_t* as, const B* b, const int64_t* bs, F&& f) {
  if (element_count(shape) == 1) {
    out[0] = f(a[0], b[0]);
    return;
  }
  parallel_for(0, element_count(shape), kParallelElements, [&](int64_t lo, int64_t hi) {
    for_each_offset<2>(shape, {as, bs}, lo, hi,
                       [&](int64_t i, const std::array<int64_t, 2>& o) { out[i] = f(a[o[0]], b[o[1]]); });
  });
}

}  // namespace fg
