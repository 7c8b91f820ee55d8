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

// acc[i] continues its chains over the `count` <= kChains contiguous elements at rows[i] and x (a
// partial block through masked loads: the lanes past it read as zeros).
template <class T, int R>
inline void chain_step(const T* const (&rows)[R], const T* x, int64_t count, Vec<T> (&acc)[R][kChainVecs<T>]) {
  using V = Vec<T>;
  constexpr int W = V::kWidth;
  if (count == kChains) {
    for (int v = 0; v < kChainVecs<T>; ++v) {
      const V xv = V::load(x + v * W);
      for (int i = 0; i < R; ++i) acc[i][v] = fma(V::load(rows[i] + v * W), xv, acc[i][v]);
    }
    return;
  }
  for (int v = 0; v < kChainVecs<T>; ++v) {
    const int64_t lanes = std::clamp<int64_t>(count - v * W, 0, W);
    const V xv = load_first(x + v * W, lanes);
    for (int i = 0; i < R; ++i) acc[i][v] = fma(load_first(rows[i] + v * W, lanes), xv, acc[i][v]);
  }
}

// dst[0..kChains) = `count` elements of a strided vector, zero-padded.
template <class T>
inline void gather(const T* src, int64_t stride, int64_t count, T* dst) {
  for (int64_t j = 0; j < count; ++j) dst[j] = src[j * stride];
  for (int64_t j = count; j < kChains; ++j) dst[j] = T(0);
}

// The tree's levels across an output's chain vectors (chain v * width + lane in acc[v]): whole
// vectors while the tree's pairs lie in different vectors, leaving the lanes of acc[0].
template <class T>
inline Vec<T> fold_vectors(Vec<T> (&acc)[kChainVecs<T>]) {
  for (int half = kChainVecs<T> / 2; half > 0; half /= 2)
    for (int v = 0; v < half; ++v) acc[v] = acc[v] + acc[v + half];
  return acc[0];
}

// The slot of lanes_tree's input that puts an output's sum in lane `output`: the bits of its index
// reversed (log2 of the vector width of them).
template <class T>
constexpr int slot_of(int output) {
  int slot = 0;
  for (int bit = 1; bit < Vec<T>::kWidth; bit *= 2) slot = slot * 2 + ((output & bit) ? 1 : 0);
  return slot;
}

// The tree's levels within the lanes (lane j += lane j + w, for w = width / 2, ..., 1) of a vector
// of outputs at once. Interleaving a pair of vectors and adding the two halves does one level of
// both (output s's lanes j and j + w summed into lane 2 j + s), so log2(width) rounds over pairs
// leave every output's sum in one vector, each sum of the same two operands in the same order as
// the level done lane by lane: the bits are the same. Slot s's sum lands in lane bit_reverse(s).
// One output at a time, through a store and scalar adds, took a sixth of 1x512 @ (512x512).t()'s
// time here (AVX-512).
template <class T>
inline Vec<T> lanes_tree(Vec<T> (&slots)[Vec<T>::kWidth]) {
  for (int count = Vec<T>::kWidth; count > 1; count /= 2)
    for (int i = 0; i < count / 2; ++i)
      slots[i] = interleave_low(slots[2 * i], slots[2 * i + 1]) + interleave_high(slots[2 * i], slots[2 * i + 1]);
  return slots[0];
}

// R outputs, each a row of A, with their chain vectors folded into slots[slot_of(first + i)].
// Contiguous rows and x are read in place, two blocks of kChains elements a step (each row in runs
// of four cache lines for float on AVX-512 rather than two: 1x512 @ (512x512).t() measured 10%
// faster), a last partial block through masked loads; strided ones a block at a time through
// zero-padded copies (a padded product adds +0 either way, which leaves a chain as it is: a chain
// started from +0 never holds -0).
template <class T, int R>
void dot_rows(int64_t k, const T* a, int64_t rs, int64_t cs, const T* x, int64_t xs, int first,
              Vec<T> (&slots)[Vec<T>::kWidth]) {
  Vec<T> acc[R][kChainVecs<T>];
  for (auto& row : acc)
    for (Vec<T>& v : row) v = Vec<T>::broadcast(T(0));
  const T* rows[R];
  if (cs == 1 && xs == 1) {
    auto step = [&](int64_t p, int64_t count) {
      for (int i = 0; i < R; ++i) rows[i] = a + i * rs + p;
      chain_step<T, R>(rows, x + p, count, acc);
    };
    int64_t p = 0;
    for (; p + 2 * kChains <= k; p += 2 * kChains) {
      step(p, kChains);
      step(p + kChains, kChains);
    }
    for (; p < k; p += kChains) step(p, std::min<int64_t>(kChains, k - p));
  } else {
    alignas(64) T row_copies[R][kChains];
    alignas(64) T x_copy[kChains];
    for (int64_t p = 0; p < k; p += kChains) {
      const int64_t count = std::min<int64_t>(kChains, k - p);
      for (int i = 0; i < R; ++i) {
        gather(a + i * rs + p * cs, cs, count, row_copies[i]);
        rows[i] = row_copies[i];
      }
      gather(x + p * xs, xs, count, x_copy);
      chain_step<T, R>(rows, x_copy, kChains, acc);
    }
  }
  for (int i = 0; i < R; ++i) slots[slot_of<T>(first + i)] = fold_vectors<T>(acc[i]);
}

// Up to a vector width of outputs (`count`), each a row of A: R rows at a time (sharing each load
// of x), then the lane levels of the tree for all of them at once.
template <class T>
void dot_row_block(int64_t count, int64_t k, const T* a, int64_t rs, int64_t cs, const T* x, int64_t xs, T* y,
                   int64_t ys) {
  constexpr int W = Vec<T>::kWidth, R = kRowsAtOnce<T>;
  Vec<T> slots[W];
  int i = 0;
  for (; i + R <= count; i += R) dot_rows<T, R>(k, a + i * rs, rs, cs, x, xs, i, slots);
  for (; i < count; ++i) dot_rows<T, 1>(k, a + i * rs, rs, cs, x, xs, i, slots);
  for (; i < W; ++i) slots[slot_of<T>(i)] = Vec<T>::broadcast(T(0));  // lanes not stored
  const Vec<T> sums = lanes_tree<T>(slots);
  if (ys == 1) return store_first(sums, y, count);
  alignas(64) T lanes[W];
  sums.store(lanes);
  for (int64_t j = 0; j < count; ++j) y[j * ys] = lanes[j];
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
  constexpr int W = Vec<T>::kWidth;
  int64_t i = 0;
  if (rs == 1 && cs != 1) {  // adjacent outputs read adjacent elements of A: the outputs go in the lanes
    for (; i + kColumnVecs * W <= rows; i += kColumnVecs * W)
      dot_columns<T, kColumnVecs>(k, a + i, cs, x, xs, y + i * ys, ys);
    for (; i + W <= rows; i += W) dot_columns<T, 1>(k, a + i, cs, x, xs, y + i * ys, ys);
  }
  for (; i < rows; i += W)
    dot_row_block<T>(std::min<int64_t>(W, rows - i), k, a + i * rs, rs, cs, x, xs, y + i * ys, ys);
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
