// Splits a strided loop into runs that the vector kernels take whole: the longest block of
// innermost dims over which every operand is either contiguous or one repeated value (stride 0).
// That covers same-shape contiguous operands (one run), tensor-scalar, and row / column broadcasts
// ([n, m] with [m]: n runs of m; [n, m] with [n, 1]: n runs, the second operand repeated).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>

#include "kernels/loops.h"

namespace fg {

template <size_t N>
struct InnerRuns {
  Dims outer;                                      // the dims looped over, one run per element
  std::array<Dims, N> outer_strides;
  int64_t inner = 1;                               // elements per run
  std::array<bool, N> broadcast{};                 // operand k repeats one value along a run
};

template <size_t N>
InnerRuns<N> inner_runs(const Dims& shape, const std::array<const int64_t*, N>& strides) {
  InnerRuns<N> runs;
  std::array<bool, N> decided{};  // whether operand k's kind (contiguous or repeated) is known yet
  int64_t d = static_cast<int64_t>(shape.size());
  for (; d > 0; --d) {
    const int64_t size = shape[d - 1];
    if (size == 1) continue;  // any stride
    std::array<bool, N> broadcast = runs.broadcast;
    bool fits = true;
    for (size_t k = 0; k < N; ++k) {
      const int64_t s = strides[k][d - 1];
      if (!decided[k] && (s == 0 || s == runs.inner)) broadcast[k] = s == 0;
      else if (s != (broadcast[k] ? 0 : runs.inner)) fits = false;
    }
    if (!fits) break;
    runs.broadcast = broadcast;
    decided.fill(true);
    runs.inner *= size;
  }
  runs.outer.assign(shape.begin(), shape.begin() + d);
  for (size_t k = 0; k < N; ++k) runs.outer_strides[k].assign(strides[k], strides[k] + d);
  return runs;
}

// Calls f(out_offset, offsets, count) for the runs, or the pieces of runs, that cover the output
// elements [lo, hi), in order: `count` elements from out_offset into a contiguous output, from
// offsets[k] into operand k (its one value, when it repeats along the run).
template <size_t N, class F>
void for_each_run(const InnerRuns<N>& runs, int64_t lo, int64_t hi, F&& f) {
  if (lo >= hi) return;
  std::array<const int64_t*, N> strides;
  for (size_t k = 0; k < N; ++k) strides[k] = runs.outer_strides[k].data();
  const int64_t inner = runs.inner;
  for_each_offset<N>(
      runs.outer, strides, lo / inner, (hi + inner - 1) / inner, [&](int64_t run, const std::array<int64_t, N>& at) {
        const int64_t begin = std::max(lo - run * inner, int64_t(0)), end = std::min(hi - run * inner, inner);
        std::array<int64_t, N> off = at;
        for (size_t k = 0; k < N; ++k) off[k] += runs.broadcast[k] ? 0 : begin;
        f(run * inner + begin, off, end - begin);
      });
}

}  // namespace fg
