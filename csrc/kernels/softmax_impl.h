// Softmax and log_softmax, forward and backward, over one block of a tensor seen as [n, inner]:
// `columns` rows of n values each (column j's values x[j], x[j + inner], ...). inner == 1 is
// `columns` contiguous rows (softmax over the last dim), each vectorized along the row; otherwise
// the vector runs across neighbouring columns, each lane one row.
//
// Numerics: the row's maximum m is subtracted before exp (no overflow for any logits); exp is the
// elementwise kernel's (elementwise_impl.h: float32 within 1 ulp, float64 within 1.5 ulp), so
// softmax's exp(x - m) is exp(x - m) of the exp op. Sums are in double, in a fixed order: along a
// contiguous row element i goes to partial sum i % kSumLanes and the partial sums are combined in a
// fixed tree (as reduce_impl.h); across columns each lane sums its row in order. So a row's bits do
// not depend on how threads split the rows, nor on which block a column falls in; across ISAs only
// the exp polynomials' fma and the vector width of the contiguous path's tail may differ.
//
// Included once per ISA translation unit, inside that ISA's namespace (see isa.h / simd.h).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/elementwise_impl.h"
#include "kernels/kernel_table.h"
#include "kernels/reduce_impl.h"
#include "kernels/simd.h"

namespace fg::simd::FG_ISA_NAMESPACE {
namespace softmax_detail {

// The first `count` (<= Vec<double>::kWidth) elements at p as doubles, the other lanes 0.
inline Vec<double> load_first_as_double(const double* p, int64_t count) { return load_first(p, count); }
inline Vec<double> load_first_as_double(const float* p, int64_t count) { return load_first_widened(p, count); }

// The sum over i < n of term(a[i..], b[i..]) (term maps kWidth doubles of each to their terms), in
// double: element i to partial sum i % kSumLanes; the last partial block read with zeros past n
// (term(0, 0) must be 0; the partial sums are never -0, so adding its +0 changes nothing).
template <class T, class F>
double row_sum(const T* a, const T* b, int64_t n, F term) {
  using D = Vec<double>;
  constexpr int R = kSumLanes / D::kWidth;
  D acc[R];
  for (D& v : acc) v = D::broadcast(0.0);
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (int r = 0; r < R; ++r) acc[r] = acc[r] + term(D::load(a + i + r * D::kWidth), D::load(b + i + r * D::kWidth));
  for (int r = 0; r < R && i + r * D::kWidth < n; ++r) {
    const int64_t at = i + r * D::kWidth, count = std::min<int64_t>(D::kWidth, n - at);
    acc[r] = acc[r] + term(load_first_as_double(a + at, count), load_first_as_double(b + at, count));
  }
  // the partial sums' tree (lane j += lane j + width, width = kSumLanes / 2, ..., 1): across the
  // vectors, then within the first
  for (int width = R / 2; width > 0; width /= 2)
    for (int r = 0; r < width; ++r) acc[r] = acc[r] + acc[r + width];
  return sum_of_halves(acc[0]);
}

// out[i] = f(a at i, b at i) for i < n, a and b read as vectors (the last partial one with zeros in
// its other lanes, which compute values nobody stores).
template <class T, class F>
void row_map(const T* a, const T* b, T* out, int64_t n, F f) {
  using V = Vec<T>;
  int64_t i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) f(V::load(a + i), V::load(b + i)).store(out + i);
  if (i < n) store_first(f(load_first(a + i, n - i), load_first(b + i, n - i)), out + i, n - i);
}

template <class T>
T row_max(const T* x, int64_t n) {
  using V = Vec<T>;
  T m = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  if (n >= V::kWidth) {
    V acc = V::load(x);
    for (i = V::kWidth; i + V::kWidth <= n; i += V::kWidth) acc = max(acc, V::load(x + i));
    // lane j against lane j + width: the lowest lane of the largest value, as a chain over the lanes
    // would pick (a NaN lane may win here: the row gives NaN either way)
    m = max_of_halves(acc);
  }
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// A block of `count` (<= kWidth) neighbouring columns, its row k at p + k * inner: read and written
// as one vector (zeros in the lanes past count).
template <class T>
struct ColumnBlock {
  int64_t inner, count;
  Vec<T> load(const T* p, int64_t k) const {
    return count == Vec<T>::kWidth ? Vec<T>::load(p + k * inner) : load_first(p + k * inner, count);
  }
  void store(Vec<T> v, T* p, int64_t k) const {
    count == Vec<T>::kWidth ? v.store(p + k * inner) : store_first(v, p + k * inner, count);
  }
};

// Per lane of a column block, the sum over its n rows of term(a, b) in double, in row order; stored
// to sums[0..kWidth).
template <class T, class F>
void column_sums(const ColumnBlock<T>& cols, const T* a, const T* b, int64_t n, double* sums, F term) {
  using V = Vec<T>;
  using D = Vec<double>;
  constexpr int H = V::kWidth / D::kWidth;  // double vectors per vector of T
  D acc[H];
  for (D& v : acc) v = D::broadcast(0.0);
  for (int64_t k = 0; k < n; ++k) {
    T ta[V::kWidth], tb[V::kWidth];
    cols.load(a, k).store(ta);
    cols.load(b, k).store(tb);
    for (int h = 0; h < H; ++h) acc[h] = acc[h] + term(D::load(ta + h * D::kWidth), D::load(tb + h * D::kWidth));
  }
  for (int h = 0; h < H; ++h) acc[h].store(sums + h * D::kWidth);
}

// exp(d) of a shifted value d = x - (row's maximum) or a log_softmax output, with the lanes below the
// point where exp rounds to 0 (elementwise_impl.h's clamps: -104 float32, -746 float64) given that 0
// without evaluating exp on them. Masked scores are -inf (attention's causal mask, sampling's top-k
// fill), and on Intel cores an exp whose final scaling underflows takes a microcode assist per
// vector: a causal (1, 4, 32, 32) softmax measured 17.4 us against 4.2 us unmasked on a Xeon (AMD
// cores barely notice). The same bits as exp(d).
template <class T>
Vec<T> exp_shifted(Vec<T> d) {
  const Vec<T> zero = Vec<T>::broadcast(T(0));
  const auto vanishes = lt(d, Vec<T>::broadcast(std::is_same_v<T, float> ? T(-104) : T(-746)));
  return select(vanishes, zero, exp(select(vanishes, zero, d)));
}

// Contiguous rows are taken in groups, each step (maxima, exps, sums, outputs) over the whole group
// before the next: short rows' steps are chains of dependent operations (a horizontal maximum, a
// tree of sums, a division or log), and the rows of a group run theirs side by side.
constexpr int64_t kRowGroup = 8;

}  // namespace softmax_detail

// y = softmax(x) (log: log_softmax) along each row: with m the row's maximum and s = sum exp(x - m),
// softmax = exp(x - m) * (1 / s), log_softmax = (x - m) - log(s). A row holding +inf or NaN, or
// only -inf, gives NaN (inf - inf), as in PyTorch. y may not alias x.
template <class T>
void softmax_forward(const T* x, T* y, int64_t n, int64_t inner, int64_t columns, bool log) {
  using namespace softmax_detail;
  using V = Vec<T>;
  auto plain = [](Vec<double> a, Vec<double>) { return a; };
  if (inner == 1) {  // `columns` rows, each step over a group of them (see kRowGroup)
    for (int64_t first = 0; first < columns; first += kRowGroup) {
      const int64_t group = std::min(kRowGroup, columns - first);
      const T* xs = x + first * n;
      T* ys = y + first * n;
      T m[kRowGroup], factor[kRowGroup];
      for (int64_t r = 0; r < group; ++r) m[r] = row_max(xs + r * n, n);
      for (int64_t r = 0; r < group; ++r) {
        const V mv = V::broadcast(m[r]);
        row_map(xs + r * n, xs + r * n, ys + r * n, n, [&](V v, V) { return exp_shifted(v - mv); });
      }
      for (int64_t r = 0; r < group; ++r) {
        const double s = row_sum(ys + r * n, ys + r * n, n, plain);
        factor[r] = static_cast<T>(log ? std::log(s) : 1 / s);
      }
      for (int64_t r = 0; r < group; ++r) {
        const V mv = V::broadcast(m[r]), c = V::broadcast(factor[r]);
        if (log) row_map(xs + r * n, xs + r * n, ys + r * n, n, [&](V v, V) { return (v - mv) - c; });
        else row_map(ys + r * n, ys + r * n, ys + r * n, n, [&](V e, V) { return e * c; });
      }
    }
    return;
  }
  for (int64_t j = 0; j < columns; j += V::kWidth) {
    const ColumnBlock<T> cols{inner, std::min<int64_t>(V::kWidth, columns - j)};
    const T* xb = x + j;
    T* yb = y + j;
    V m = V::broadcast(-std::numeric_limits<T>::infinity());
    for (int64_t k = 0; k < n; ++k) m = max(m, cols.load(xb, k));
    for (int64_t k = 0; k < n; ++k) cols.store(exp_shifted(cols.load(xb, k) - m), yb, k);
    double sums[V::kWidth];
    column_sums(cols, yb, yb, n, sums, plain);
    T per_lane[V::kWidth];
    for (int i = 0; i < V::kWidth; ++i) per_lane[i] = static_cast<T>(log ? std::log(sums[i]) : 1 / sums[i]);
    const V c = V::load(per_lane);
    for (int64_t k = 0; k < n; ++k) cols.store(log ? (cols.load(xb, k) - m) - c : cols.load(yb, k) * c, yb, k);
  }
}

// The input gradient gx from softmax's output y and its gradient g, per row: softmax:
// y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g). gx may alias g.
template <class T>
void softmax_backward(const T* y, const T* g, T* gx, int64_t n, int64_t inner, int64_t columns, bool log) {
  using namespace softmax_detail;
  using V = Vec<T>;
  auto term = [log](Vec<double> gv, Vec<double> yv) { return log ? gv : gv * yv; };
  auto grad = [log](V yv, V gv, V s) { return log ? gv - exp_shifted(yv) * s : yv * (gv - s); };
  if (inner == 1) {  // `columns` rows, each step over a group of them (see kRowGroup)
    for (int64_t first = 0; first < columns; first += kRowGroup) {
      const int64_t group = std::min(kRowGroup, columns - first), at = first * n;
      T sums[kRowGroup];
      for (int64_t r = 0; r < group; ++r) sums[r] = static_cast<T>(row_sum(g + at + r * n, y + at + r * n, n, term));
      for (int64_t r = 0; r < group; ++r) {
        const V s = V::broadcast(sums[r]);
        row_map(y + at + r * n, g + at + r * n, gx + at + r * n, n, [&](V yv, V gv) { return grad(yv, gv, s); });
      }
    }
    return;
  }
  for (int64_t j = 0; j < columns; j += V::kWidth) {
    const ColumnBlock<T> cols{inner, std::min<int64_t>(V::kWidth, columns - j)};
    double sums[V::kWidth];
    column_sums(cols, g + j, y + j, n, sums, term);
    T per_lane[V::kWidth];
    for (int i = 0; i < V::kWidth; ++i) per_lane[i] = static_cast<T>(sums[i]);
    const V s = V::load(per_lane);
    for (int64_t k = 0; k < n; ++k) cols.store(grad(cols.load(y + j, k), cols.load(g + j, k), s), gx + j, k);
  }
}

template <class T>
void fill_softmax(TypedKernels<T>& k) {
  k.softmax_forward = softmax_forward<T>;
  k.softmax_backward = softmax_backward<T>;
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
