// Products with one output row or column -- dot, mv, a row vector times a matrix, addmv, and any
// GEMM whose C is a single row or column (gemm_impl.h sends them here): y[i] = sum_p A[i][p] x[p]
// for i < rows, with A[i][p] = a[i * rs + p * cs], x[p] = x[p * xs], y[i] = y[i * ys].
//
// Numerics (the contract tests/test_gemm.py checks): each output is kChains interleaved chains --
// chain r takes the products p = r, r + kChains, r + 2 kChains, ... in increasing order,
// c_r = fma(A[i][p], x[p], c_r) from zero -- then combined pairwise in a fixed tree (chain j +=
// chain j + w, for w = kChains / 2, ..., 2, 1). kChains is the same for every ISA and dtype, so the
// bits depend on neither the vector width nor the operands' layout nor how threads split the
// outputs; across ISAs only simd.h's fma differs (fused, or a multiply then an add on the scalar
// ISA). One chain per output, as the GEMM's, would be bound by the FMA latency: a dot product
// could not use more than one multiply-add unit of one core, nor a vector's lanes.
//
// Included by gemm_impl.h once per ISA translation unit, inside that ISA's namespace.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/simd.h"

namespace fg::simd::FG_ISA_NAMESPACE {
namespace gemv_detail {

constexpr int kChains = 32;  // a multiple of every ISA's vector width (1 to 16 lanes)
template <class T>
constexpr int kChainVecs = kChains / Vec<T>::kWidth;  // vectors holding one output's chains
// Rows computed together share each load of x; 8 chain vectors in flight cover the FMA latency.
template <class T>
constexpr int kRowsAtOnce = std::max(1, 8 / kChainVecs<T>);
constexpr int kColumnVecs = 4;  // vectors of adjacent outputs computed together

// acc[i] continues its chains over the kChains contiguous elements at rows[i] and x.
template <class T, int R>
inline void chain_step(const T* const (&rows)[R], const T* x, Vec<T> (&acc)[R][kChainVecs<T>]) {
  using V = Vec<T>;
  for (int v = 0; v < kChainVecs<T>; ++v) {
    const V xv = V::load(x + v * V::kWidth);
    for (int i = 0; i < R; ++i) acc[i][v] = fma(V::load(rows[i] + v * V::kWidth), xv, acc[i][v]);
  }
}

// dst[0..kChains) = `count` elements of a strided vector, zero-padded (a padded product adds 0,
// which leaves a chain as it is: a chain started from +0 never holds -0).
template <class T>
inline void gather(const T* src, int64_t stride, int64_t count, T* dst) {
  for (int64_t j = 0; j < count; ++j) dst[j] = src[j * stride];
  for (int64_t j = count; j < kChains; ++j) dst[j] = T(0);
}

// The tree over one output's chains, chain v * width + lane in acc[v]: whole vectors while the
// tree's pairs lie in different vectors, then the lanes of the last one.
template <class T>
inline T combine(Vec<T> (&acc)[kChainVecs<T>]) {
  constexpr int W = Vec<T>::kWidth;
  for (int half = kChainVecs<T> / 2; half > 0; half /= 2)
    for (int v = 0; v < half; ++v) acc[v] = acc[v] + acc[v + half];
  T lanes[W];
  acc[0].store(lanes);
  for (int w = W / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) lanes[j] += lanes[j + w];
  return lanes[0];
}

// R outputs, each a row of A: kChains elements at a time, read in place where they are
// contiguous and whole, else gathered into zero-padded copies.
template <class T, int R>
void dot_rows(int64_t k, const T* a, int64_t rs, int64_t cs, const T* x, int64_t xs, T* y, int64_t ys) {
  Vec<T> acc[R][kChainVecs<T>];
  for (auto& row : acc)
    for (Vec<T>& v : row) v = Vec<T>::broadcast(T(0));
  alignas(64) T row_copies[R][kChains];
  alignas(64) T x_copy[kChains];
  const T* rows[R];
  for (int64_t p = 0; p < k; p += kChains) {
    const int64_t count = std::min<int64_t>(kChains, k - p);
    for (int i = 0; i < R; ++i) {
      rows[i] = a + i * rs + p * cs;
      if (cs != 1 || count < kChains) {
        gather(rows[i], cs, count, row_copies[i]);
        rows[i] = row_copies[i];
      }
    }
    const T* xp = x + p * xs;
    if (xs != 1 || count < kChains) {
      gather(xp, xs, count, x_copy);
      xp = x_copy;
    }
    chain_step<T, R>(rows, xp, acc);
  }
  for (int i = 0; i < R; ++i) y[i * ys] = combine<T>(acc[i]);
}

// Vecs vectors of adjacent outputs (A's rows one apart): each chain r in turn, over its products
// p = r, r + kChains, ..., with the outputs in the lanes; then the tree over the chains' results.
template <class T, int Vecs>
void dot_columns(int64_t k, const T* a, int64_t cs, const T* x, int64_t xs, T* y, int64_t ys) {
  using V = Vec<T>;
  constexpr int W = V::kWidth;
  alignas(64) T chains[kChains][Vecs * W];
  for (int r = 0; r < kChains; ++r) {
    V acc[Vecs];
    for (V& v : acc) v = V::broadcast(T(0));
    for (int64_t p = r; p < k; p += kChains) {
      const V xv = V::broadcast(x[p * xs]);
      for (int v = 0; v < Vecs; ++v) acc[v] = fma(V::load(a + p * cs + v * W), xv, acc[v]);
    }
    for (int v = 0; v < Vecs; ++v) acc[v].store(chains[r] + v * W);
  }
  for (int w = kChains / 2; w > 0; w /= 2)
    for (int r = 0; r < w; ++r)
      for (int v = 0; v < Vecs; ++v)
        (V::load(chains[r] + v * W) + V::load(chains[r + w] + v * W)).store(chains[r] + v * W);
  for (int j = 0; j < Vecs * W; ++j) y[j * ys] = chains[0][j];
}

}  // namespace gemv_detail

template <class T>
void gemv(int64_t rows, int64_t k, const T* a, int64_t rs, int64_t cs, const T* x, int64_t xs, T* y, int64_t ys) {
  using namespace gemv_detail;
  constexpr int W = Vec<T>::kWidth, R = kRowsAtOnce<T>;
  int64_t i = 0;
  if (rs == 1 && cs != 1) {  // adjacent outputs read adjacent elements of A: the outputs go in the lanes
    for (; i + kColumnVecs * W <= rows; i += kColumnVecs * W)
      dot_columns<T, kColumnVecs>(k, a + i, cs, x, xs, y + i * ys, ys);
    for (; i + W <= rows; i += W) dot_columns<T, 1>(k, a + i, cs, x, xs, y + i * ys, ys);
  }
  for (; i + R <= rows; i += R) dot_rows<T, R>(k, a + i * rs, rs, cs, x, xs, y + i * ys, ys);
  for (; i < rows; ++i) dot_rows<T, 1>(k, a + i * rs, rs, cs, x, xs, y + i * ys, ys);
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
