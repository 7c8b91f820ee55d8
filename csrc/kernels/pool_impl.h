// Pooling over a row of outputs whose windows all hold their full rows x kernel taps (pool.cpp's
// windows clear of the padding), one vector of output columns at a time: the running maximum (and
// the number of its tap) or the sum stay in registers over the whole window. The columns of a tap
// are one load for stride 1, and two loads and even_lanes for stride 2 (2x2 and 3x3 pools with
// stride 2); a vector past the row's last output reads on into the next rows (its extra lanes are
// dropped), so short rows (14 outputs against 16 lanes) still take whole loads, and only a read
// past the end of the input goes through a small buffer. Larger strides (and the scalar ISA) take
// the scalar loop (gathering the columns through a buffer measured slower).
//
// An average pool's gradient over windows that tile a row of inputs (stride == kernel, the 2x2
// and evenly dividing adaptive pools) spreads each output's share over its `width` inputs, for
// widths 2 and 4 as interleaves of a vector with itself.
//
// Numerics: each output takes its taps in the order (ty, tx), as the windows one at a time do, so
// the bits do not depend on the ISA: a max compares only; a sum adds in double, without fma.
//
// Included once per ISA translation unit, inside that ISA's namespace (see isa.h / simd.h).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/kernel_table.h"
#include "kernels/simd.h"

namespace fg::simd::FG_ISA_NAMESPACE {
namespace pool_detail {

// The columns p[0], p[stride], ... (stride 1 or 2) as a V (widened from T for a Vec<double> of
// floats); only the first count (<= V::kWidth) lanes are used. `room`: the elements that may be read
// from p.
template <class V, class T>
V load_columns(const T* p, int64_t stride, int64_t count, int64_t room) {
  constexpr int64_t W = V::kWidth;
  if (stride == 1 && room >= W) return V::load(p);
  if (stride == 2 && room >= 2 * W) return even_lanes(V::load(p), V::load(p + W));
  T buf[W] = {};
  for (int64_t i = 0; i < count; ++i) buf[i] = p[i * stride];
  return V::load(buf);
}

// Calls f(j, count) for the vectors of output columns: count (<= W) of them from j.
template <int64_t W, class F>
void for_each_column_vector(int64_t columns, F&& f) {
  for (int64_t j = 0; j < columns; j += W) f(j, columns - j < W ? columns - j : W);
}

// take ? a : b on the bits: the compiler makes a branch of the ?: in the scalar loops (the remainder
// of its vector loop, and the whole loop for rows too short for its vector loop: 13 outputs of a 3x3
// pool of 28 columns), mispredicted on every other tap of real data (4-10x slower).
template <class T>
T pick(bool take, T a, T b) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  Bits bits_a, bits_b;
  std::memcpy(&bits_a, &a, sizeof a);
  std::memcpy(&bits_b, &b, sizeof b);
  const Bits mask = Bits(0) - Bits(take), bits = (bits_a & mask) | (bits_b & ~mask);
  T out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// The scalar forms (the scalar ISA, and strides over 2): tap-major over the row's outputs, so that
// their chains are independent (one output at a time measured 2x slower) and the compiler may
// vectorize the loop; each output still takes its taps in the order (ty, tx).
// kStride: the stride when it is 1 or 2 (a fixed stride lets the compiler vectorize), else 0.
// __restrict: without it the compiler cannot keep best and tap apart from in, and does not vectorize.
template <int64_t kStride, class T>
void max_pool_tap_major(const PoolColumns& g, const T* __restrict in, T* __restrict best, T* __restrict tap) {
  const int64_t stride = kStride > 0 ? kStride : g.stride;
  std::fill(best, best + g.count, -std::numeric_limits<T>::infinity());
  std::fill(tap, tap + g.count, T(-1));
  for (int64_t ty = 0; ty < g.rows; ++ty)
    for (int64_t tx = 0; tx < g.kernel; ++tx) {
      const T* x = in + ty * g.row_step + tx * g.step;
      const T id = T(ty * g.kernel + tx);
      for (int64_t j = 0; j < g.count; ++j) {
        const T v = x[j * stride];
        const bool take = (v > best[j]) | (v != v);
        best[j] = pick(take, v, best[j]);
        tap[j] = pick(take, id, tap[j]);
      }
    }
}
template <int64_t kStride, class T>
void sum_pool_tap_major(const PoolColumns& g, const T* __restrict in, double* __restrict sums) {
  const int64_t stride = kStride > 0 ? kStride : g.stride;
  std::fill(sums, sums + g.count, 0.0);
  for (int64_t ty = 0; ty < g.rows; ++ty)
    for (int64_t tx = 0; tx < g.kernel; ++tx) {
      const T* x = in + ty * g.row_step + tx * g.step;
      for (int64_t j = 0; j < g.count; ++j) sums[j] += double(x[j * stride]);
    }
}

}  // namespace pool_detail

// best[j] = the largest tap of output j's window, tap[j] = its number ty * kernel + tx (-1 when no
// tap is above -inf): NaN counts as the largest (the last NaN wins); of equal maxima the first wins.
template <class T>
void max_pool_columns(const PoolColumns& g, const T* in, T* best, T* tap) {
  using namespace pool_detail;
  using V = Vec<T>;
  if (g.stride > 2) return max_pool_tap_major<0>(g, in, best, tap);
  if (V::kWidth == 1)
    return g.stride == 1 ? max_pool_tap_major<1>(g, in, best, tap) : max_pool_tap_major<2>(g, in, best, tap);
  for_each_column_vector<V::kWidth>(g.count, [&](int64_t j, int64_t count) {
    V top = V::broadcast(-std::numeric_limits<T>::infinity()), top_tap = V::broadcast(T(-1));
    for (int64_t ty = 0; ty < g.rows; ++ty)
      for (int64_t tx = 0; tx < g.kernel; ++tx) {
        const int64_t first = ty * g.row_step + j * g.stride + tx * g.step;
        const V v = load_columns<V>(in + first, g.stride, count, g.room - first);
        const auto take = mask_or(gt(v, top), ne(v, v));
        top = select(take, v, top);
        top_tap = select(take, V::broadcast(T(ty * g.kernel + tx)), top_tap);
      }
    T top_lanes[V::kWidth], tap_lanes[V::kWidth];
    top.store(top_lanes), top_tap.store(tap_lanes);
    for (int64_t i = 0; i < count; ++i) best[j + i] = top_lanes[i], tap[j + i] = tap_lanes[i];
  });
}

// sums[j] = the sum in double of output j's taps.
template <class T>
void sum_pool_columns(const PoolColumns& g, const T* in, double* sums) {
  using namespace pool_detail;
  using D = Vec<double>;
  if (g.stride > 2) return sum_pool_tap_major<0>(g, in, sums);
  if (D::kWidth == 1) return g.stride == 1 ? sum_pool_tap_major<1>(g, in, sums) : sum_pool_tap_major<2>(g, in, sums);
  for_each_column_vector<D::kWidth>(g.count, [&](int64_t j, int64_t count) {
    D sum = D::broadcast(0.0);
    for (int64_t ty = 0; ty < g.rows; ++ty)
      for (int64_t tx = 0; tx < g.kernel; ++tx) {
        const int64_t first = ty * g.row_step + j * g.stride + tx * g.step;
        sum = sum + load_columns<D>(in + first, g.stride, count, g.room - first);
      }
    double lanes[D::kWidth];
    sum.store(lanes);
    for (int64_t i = 0; i < count; ++i) sums[j + i] = lanes[i];
  });
}

// out[j * width + r] = shares[j] for r < width, j < count.
template <class T>
void spread_average(const T* shares, int64_t count, int64_t width, T* out) {
  using V = Vec<T>;
  constexpr int64_t W = V::kWidth;
  if (W == 1 || (width != 2 && width != 4)) {
    for (int64_t j = 0; j < count; ++j) std::fill(out + j * width, out + (j + 1) * width, shares[j]);
    return;
  }
  // The shares of one vector, each repeated width times: width vectors from o.
  auto spread_vector = [width](V v, T* o) {
    const V low = interleave_low(v, v), high = interleave_high(v, v);
    if (width == 2) {
      low.store(o), high.store(o + W);
      return;
    }
    interleave_low(low, low).store(o), interleave_high(low, low).store(o + W);
    interleave_low(high, high).store(o + 2 * W), interleave_high(high, high).store(o + 3 * W);
  };
  int64_t j = 0;
  for (; j + W <= count; j += W) spread_vector(V::load(shares + j), out + j * width);
  if (j == count) return;
  // The last shares through buffers (a short row still takes one vector).
  T last[W] = {}, spread[4 * W];
  std::copy(shares + j, shares + count, last);
  spread_vector(V::load(last), spread);
  std::copy(spread, spread + (count - j) * width, out + j * width);
}

template <class T>
void fill_pool(TypedKernels<T>& k) {
  k.max_pool_columns = max_pool_columns<T>;
  k.sum_pool_columns = sum_pool_columns<T>;
  k.spread_average = spread_average<T>;
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
