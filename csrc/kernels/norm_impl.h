// The passes of batch, group and layer normalization (csrc/ops/normalization.cpp), written once
// against simd.h and compiled once per ISA: the two sums of a unit's statistics (or of the
// backward), the fused output pass out = k1 * u + k2 * (v - center) + k3, and layer norm's row
// passes (its per-element weight and bias against per-row statistics).
//
// Numerics: the same operations in the same order on every ISA, so the bits do not depend on it.
// A contiguous run's sums go to kNormLanes lanes (element i of a block to lane i % kNormLanes,
// whatever the vector width), each block of kNormBlock elements summed in T and its lanes then
// added to the caller's double lanes (a long run loses no more than a block's rounding). No fma
// anywhere (the scalar ISA has none; the ISA translation units are compiled with -ffp-contract=off).
//
// Included once per ISA translation unit, inside that ISA's namespace (see isa.h / simd.h).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/simd.h"

namespace fg::simd::FG_ISA_NAMESPACE {

constexpr int64_t kNormBlock = 128;

namespace norm_detail {

// first[l] += the sum of term(i), second[l] += the sum of term(i) * (q[i] - s2), over the elements
// i < n of lane l (see the top comment); term_vector(i) is the terms of elements [i, i + kWidth).
template <class T, class TermVector, class Term>
void lane_sums(TermVector term_vector, Term term, const T* q, T s2, int64_t n, double* first, double* second) {
  using V = Vec<T>;
  constexpr int R = kNormLanes / V::kWidth;
  static_assert(R * V::kWidth == kNormLanes);
  const V shift2 = V::broadcast(s2);
  for (int64_t block = 0; block < n; block += kNormBlock) {
    const int64_t end = std::min(n, block + kNormBlock);
    V a[R], b[R];
    for (int r = 0; r < R; ++r) a[r] = b[r] = V::broadcast(T(0));
    int64_t i = block;
    for (; i + kNormLanes <= end; i += kNormLanes)
      for (int r = 0; r < R; ++r) {
        const V d = term_vector(i + r * V::kWidth);
        a[r] = a[r] + d;
        b[r] = b[r] + d * (V::load(q + i + r * V::kWidth) - shift2);
      }
    T lane_a[kNormLanes], lane_b[kNormLanes];
    for (int r = 0; r < R; ++r) a[r].store(lane_a + r * V::kWidth), b[r].store(lane_b + r * V::kWidth);
    for (int l = 0; i < end; ++i, ++l) {
      const T d = term(i);
      lane_a[l] += d, lane_b[l] += d * (q[i] - s2);
    }
    using D = Vec<double>;  // its load widens float lanes
    for (int l = 0; l < kNormLanes; l += D::kWidth) {
      (D::load(first + l) + D::load(lane_a + l)).store(first + l);
      (D::load(second + l) + D::load(lane_b + l)).store(second + l);
    }
  }
}

}  // namespace norm_detail

// first[l] += the sum of p[i] - s1, second[l] += the sum of (p[i] - s1) * (q[i] - s2), over the
// elements i < n of lane l (see the top comment).
template <class T>
void norm_sums(const T* p, T s1, const T* q, T s2, int64_t n, double* first, double* second) {
  const Vec<T> shift1 = Vec<T>::broadcast(s1);
  norm_detail::lane_sums([&](int64_t i) { return Vec<T>::load(p + i) - shift1; }, [&](int64_t i) { return p[i] - s1; },
                         q, s2, n, first, second);
}

// Layer norm's backward sums of a row, in lanes as norm_sums: of dy[i] * w[i] and of dy[i] * w[i]
// * (x[i] - mean) (w null: 1).
template <class T>
void layer_norm_grad_sums(const T* dy, const T* w, const T* x, T mean, int64_t n, double* first, double* second) {
  using V = Vec<T>;
  if (w)
    norm_detail::lane_sums([&](int64_t i) { return V::load(dy + i) * V::load(w + i); },
                           [&](int64_t i) { return dy[i] * w[i]; }, x, mean, n, first, second);
  else
    norm_detail::lane_sums([&](int64_t i) { return V::load(dy + i); }, [&](int64_t i) { return dy[i]; }, x, mean, n,
                           first, second);
}

// first[j] += p[j] - s1[j], second[j] += (p[j] - s1[j]) * (q[j] - s2[j]) for j < n (each term
// in T, added in double): one row of the per-column sums of an (N, C) input.
template <class T>
void norm_column_sums(const T* p, const T* s1, const T* q, const T* s2, int64_t n, double* first, double* second) {
  using V = Vec<T>;
  using D = Vec<double>;
  int64_t j = 0;
  for (; j + V::kWidth <= n; j += V::kWidth) {
    const V d = V::load(p + j) - V::load(s1 + j);
    T terms_a[V::kWidth], terms_b[V::kWidth];
    d.store(terms_a);
    (d * (V::load(q + j) - V::load(s2 + j))).store(terms_b);
    for (int h = 0; h < V::kWidth; h += D::kWidth) {
      (D::load(first + j + h) + D::load(terms_a + h)).store(first + j + h);
      (D::load(second + j + h) + D::load(terms_b + h)).store(second + j + h);
    }
  }
  for (; j < n; ++j) {
    const T d = p[j] - s1[j];
    first[j] += double(d), second[j] += double(d * (q[j] - s2[j]));
  }
}

namespace norm_detail {

// The coefficient k as a vector for elements [i, i + kWidth): the single value *k, or k[i...].
template <bool kPerElement, class T>
Vec<T> coefficient(const T* k, int64_t i) {
  if constexpr (kPerElement) return Vec<T>::load(k + i);
  else return Vec<T>::broadcast(*k);
}
template <bool kPerElement, class T>
T coefficient_at(const T* k, int64_t i) {
  if constexpr (kPerElement) return k[i];
  else return *k;
}

template <class T, bool kPerElement, bool kWithV>
void affine(const NormAffine<T>& k, const T* u, const T* v, T* out, int64_t n) {
  using V = Vec<T>;
  int64_t i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) {
    V y = coefficient<kPerElement>(k.k1, i) * V::load(u + i);
    if constexpr (kWithV)
      y = y + coefficient<kPerElement>(k.k2, i) * (V::load(v + i) - coefficient<kPerElement>(k.center, i));
    (y + coefficient<kPerElement>(k.k3, i)).store(out + i);
  }
  for (; i < n; ++i) {
    T y = coefficient_at<kPerElement>(k.k1, i) * u[i];
    if constexpr (kWithV)
      y = y + coefficient_at<kPerElement>(k.k2, i) * (v[i] - coefficient_at<kPerElement>(k.center, i));
    out[i] = y + coefficient_at<kPerElement>(k.k3, i);
  }
}

}  // namespace norm_detail

// out[i] = k1 * u[i] + k2 * (v[i] - center) + k3 for i < n; without v (null), k1 * u[i] + k3.
template <class T>
void norm_affine(const NormAffine<T>& k, const T* u, const T* v, T* out, int64_t n) {
  using namespace norm_detail;
  if (k.per_element) v ? affine<T, true, true>(k, u, v, out, n) : affine<T, true, false>(k, u, v, out, n);
  else v ? affine<T, false, true>(k, u, v, out, n) : affine<T, false, false>(k, u, v, out, n);
}

namespace norm_detail {

// One row's statistics and weight and bias (each null when absent), and the input gradient's
// coefficients.
template <class T>
struct LayerNormRow {
  T mean, rstd;
  const T *weight, *bias;
  T projection, grad_mean;
};

template <class T, bool kWeight, bool kBias>
void output_row(const LayerNormRow<T>& r, const T* x, T* out, int64_t n) {
  using V = Vec<T>;
  const V mean = V::broadcast(r.mean), rstd = V::broadcast(r.rstd);
  int64_t i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) {
    V y = (V::load(x + i) - mean) * rstd;
    if constexpr (kWeight) y = y * V::load(r.weight + i);
    if constexpr (kBias) y = y + V::load(r.bias + i);
    y.store(out + i);
  }
  for (; i < n; ++i) {
    T y = (x[i] - r.mean) * r.rstd;
    if constexpr (kWeight) y = y * r.weight[i];
    if constexpr (kBias) y = y + r.bias[i];
    out[i] = y;
  }
}

template <class T, bool kWeight>
void input_grad_row(const LayerNormRow<T>& r, const T* dy, const T* x, T* out, int64_t n) {
  using V = Vec<T>;
  const V mean = V::broadcast(r.mean), rstd = V::broadcast(r.rstd);
  const V projection = V::broadcast(r.projection), grad_mean = V::broadcast(r.grad_mean);
  int64_t i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) {
    V g = V::load(dy + i);
    if constexpr (kWeight) g = g * V::load(r.weight + i);
    ((g - (V::load(x + i) - mean) * projection - grad_mean) * rstd).store(out + i);
  }
  for (; i < n; ++i) {
    T g = dy[i];
    if constexpr (kWeight) g = g * r.weight[i];
    out[i] = (g - (x[i] - r.mean) * r.projection - r.grad_mean) * r.rstd;
  }
}

// out[i] = (x[i] - mean) * rstd * weight[i] + bias[i] (a null weight or bias left out).
template <class T>
void output(const LayerNormRow<T>& r, const T* x, T* out, int64_t n) {
  if (r.weight) r.bias ? output_row<T, true, true>(r, x, out, n) : output_row<T, true, false>(r, x, out, n);
  else r.bias ? output_row<T, false, true>(r, x, out, n) : output_row<T, false, false>(r, x, out, n);
}

// Rows are handled in groups: first each row's sums, then the group's divisions and square roots
// side by side (a single row's would wait on one another), then each row's output pass.
constexpr int64_t kRowGroup = 8;

}  // namespace norm_detail

template <class T>
void norm_moments(int64_t units, int64_t count, const T* shift, const double* sum, const double* squares, double eps,
                  double* mean, double* invstd, double* var) {
  using D = Vec<double>;
  const D n = D::broadcast(double(count)), zero = D::broadcast(0.0), one = D::broadcast(1.0), e = D::broadcast(eps);
  for (int64_t u = 0; u < units; u += D::kWidth) {
    const int64_t lanes = std::min<int64_t>(D::kWidth, units - u);
    double base[D::kWidth] = {}, means[D::kWidth], invstds[D::kWidth], vars[D::kWidth];
    for (int64_t l = 0; l < lanes; ++l) base[l] = double(shift[u + l]);
    const D m = load_first(sum + u, lanes) / n;
    // max(0, v): 0 for a negative v, v itself for a NaN (the second operand's, as on x86)
    const D v = max(zero, load_first(squares + u, lanes) / n - m * m);
    (D::load(base) + m).store(means);
    (one / sqrt(v + e)).store(invstds);
    v.store(vars);
    for (int64_t l = 0; l < lanes; ++l) {
      mean[u + l] = means[l], invstd[u + l] = invstds[l];
      if (var) var[u + l] = vars[l];
    }
  }
}

template <class T>
void layer_norm_forward(const T* x, int64_t rows, int64_t len, const T* weight, const T* bias, double eps, T* out,
                        T* mean, T* rstd) {
  using namespace norm_detail;
  for (int64_t first_row = 0; first_row < rows; first_row += kRowGroup) {
    const int64_t group = std::min(kRowGroup, rows - first_row);
    const T* xs = x + first_row * len;
    T shift[kRowGroup];
    double sum[kRowGroup], squares[kRowGroup], means[kRowGroup], invstds[kRowGroup];
    for (int64_t r = 0; r < group; ++r) {
      const T* row = xs + r * len;
      shift[r] = len > 0 ? row[0] : T(0);
      double first[kNormLanes] = {}, second[kNormLanes] = {};
      norm_sums(row, shift[r], row, shift[r], len, first, second);
      sum[r] = lane_total(first), squares[r] = lane_total(second);
    }
    norm_moments(group, std::max<int64_t>(len, 1), shift, sum, squares, eps, means, invstds, nullptr);
    for (int64_t r = 0; r < group; ++r) {
      T &m = mean[first_row + r], &s = rstd[first_row + r];
      m = T(means[r]), s = T(invstds[r]);
      output<T>({m, s, weight, bias, T(0), T(0)}, xs + r * len, out + (first_row + r) * len, len);
    }
  }
}

template <class T>
void layer_norm_input_grad(const T* dy, const T* x, int64_t rows, int64_t len, const T* weight, const T* mean,
                           const T* rstd, T* out) {
  using namespace norm_detail;
  for (int64_t first_row = 0; first_row < rows; first_row += kRowGroup) {
    const int64_t group = std::min(kRowGroup, rows - first_row);
    const int64_t at = first_row * len;
    double sum_wdy[kRowGroup], sum_wdy_xmu[kRowGroup];
    for (int64_t r = 0; r < group; ++r) {
      double first[kNormLanes] = {}, second[kNormLanes] = {};
      layer_norm_grad_sums(dy + at + r * len, weight, x + at + r * len, mean[first_row + r], len, first, second);
      sum_wdy[r] = lane_total(first), sum_wdy_xmu[r] = lane_total(second);
    }
    for (int64_t r = 0; r < group; ++r) {
      const T m = mean[first_row + r], s = rstd[first_row + r];
      const double wide = double(s);
      const LayerNormRow<T> row{
          m, s, weight, nullptr, T(sum_wdy_xmu[r] / double(len) * wide * wide), T(sum_wdy[r] / double(len))};
      const int64_t row_at = at + r * len;
      weight ? input_grad_row<T, true>(row, dy + row_at, x + row_at, out + row_at, len)
             : input_grad_row<T, false>(row, dy + row_at, x + row_at, out + row_at, len);
    }
  }
}

// grad_weight[j] += the sum over rows r of dy[r][j] * ((x[r][j] - mean[r]) * rstd[r]) and grad_bias[j]
// += that of dy[r][j], for j < n, row r at r * ld: each block of kNormBlock rows (counted from the
// first) summed in T in row order, then added in double; a column's sums the same on every ISA.
template <class T>
void layer_norm_param_sums(const T* dy, const T* x, int64_t ld, const T* mean, const T* rstd, int64_t rows, int64_t n,
                           double* grad_weight, double* grad_bias) {
  using V = Vec<T>;
  std::vector<T> block_w(n), block_b(n);
  T *sw = block_w.data(), *sb = block_b.data();
  for (int64_t block = 0; block < rows; block += kNormBlock) {
    std::fill(sw, sw + n, T(0));
    std::fill(sb, sb + n, T(0));
    for (int64_t r = block; r < std::min(rows, block + kNormBlock); ++r) {
      const T *g = dy + r * ld, *xs = x + r * ld;
      const V m = V::broadcast(mean[r]), s = V::broadcast(rstd[r]);
      int64_t j = 0;
      for (; j + V::kWidth <= n; j += V::kWidth) {
        const V gj = V::load(g + j);
        (V::load(sw + j) + gj * ((V::load(xs + j) - m) * s)).store(sw + j);
        (V::load(sb + j) + gj).store(sb + j);
      }
      for (; j < n; ++j) sw[j] += g[j] * ((xs[j] - mean[r]) * rstd[r]), sb[j] += g[j];
    }
    for (int64_t j = 0; j < n; ++j) grad_weight[j] += double(sw[j]), grad_bias[j] += double(sb[j]);
  }
}

template <class T>
void fill_norm(TypedKernels<T>& k) {
  k.norm_sums = norm_sums<T>;
  k.norm_column_sums = norm_column_sums<T>;
  k.norm_affine = norm_affine<T>;
  k.norm_moments = norm_moments<T>;
  k.layer_norm_forward = layer_norm_forward<T>;
  k.layer_norm_input_grad = layer_norm_input_grad<T>;
  k.layer_norm_param_sums = layer_norm_param_sums<T>;
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
