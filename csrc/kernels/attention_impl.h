// Scaled dot-product attention over one (batch, head) plane, forward and backward, as fused loops
// (ops/attention.cpp): softmax((q k^T) * scale, causal or not) v without a score matrix in memory
// (a few query rows' scores at a time).
//
// Layout: every row (a query's, a key's, a value's, an output's and their gradients') is E
// contiguous elements, rows `ld` apart (the q, k, v of a projection's split, viewed as heads, are
// read in place). The keys (forward) and the values (backward) are first copied transposed into a
// panel of E rows of S keys (attention_padded(S) apart), so that a query's scores over the keys
// are vector lanes: per element e of the query, scores += q[e] * panel[e] (axpy-style, no
// horizontal sums). The weighted sums of rows (p V, ds K) and the gradients of K and V are axpys of
// rows, vectorised along E. The forward takes query rows in tiles (kTileRows) for both products:
// each panel or value row loaded feeds the whole tile.
//
// Numerics: the softmax is softmax_impl.h's, step for step (the row's maximum subtracted, the exp
// op's exp, the sum in double in a fixed order, one reciprocal); dot products and sums of rows are
// fma chains in T, in key order (keys ascending, queries ascending for dK and dV). Each plane is
// computed the same way whichever thread runs it: the bits do not depend on the thread count.
//
// Included once per ISA translation unit, inside that ISA's namespace (see isa.h / simd.h).
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/kernel_table.h"
#include "kernels/simd.h"
#include "kernels/softmax_impl.h"

namespace fg::simd::FG_ISA_NAMESPACE {
namespace attention_detail {

// rows (n rows of E, ld apart) transposed into panel (E rows of `padded` >= n, the columns past n zero).
template <class T>
void transpose_rows(const T* rows, int64_t ld, int64_t n, int64_t E, T* panel, int64_t padded) {
  int64_t e = 0;
  for (; e + 4 <= E; e += 4) {  // four panel rows per pass over the keys: a quarter of the loop's overhead
    T* out = panel + e * padded;
    for (int64_t j = 0; j < n; ++j) {
      const T* row = rows + j * ld + e;
      out[j] = row[0], out[padded + j] = row[1], out[2 * padded + j] = row[2], out[3 * padded + j] = row[3];
    }
  }
  for (; e < E; ++e)
    for (int64_t j = 0; j < n; ++j) panel[e * padded + j] = rows[j * ld + e];
  for (e = 0; e < E; ++e) std::fill(panel + e * padded + n, panel + (e + 1) * padded, T(0));
}

// The first `count` (<= kWidth) elements at p: a whole vector or a tail.
template <class T>
Vec<T> load_part(const T* p, int64_t count) {
  return count == Vec<T>::kWidth ? Vec<T>::load(p) : load_first(p, count);
}
template <class T>
void store_part(Vec<T> v, T* p, int64_t count) {
  count == Vec<T>::kWidth ? v.store(p) : store_first(v, p, count);
}

// n rounded up to whole blocks of the row sums (kSumLanes, a multiple of every vector width): the
// length the kernels give a row of scores, so that its steps read and write whole vectors. A vector
// load of memory just written by a masked (tail) store is not forwarded the store's data on Intel
// cores: it waits for the store to complete, which cost a sampling step's attention half its time.
inline int64_t whole_blocks(int64_t n) { return (n + kSumLanes - 1) / kSumLanes * kSumLanes; }

// Query rows x (R at most, ld_x apart) times K (1 or 2) vectors of the panel's keys from p:
// per row and vector two chains (even and odd e) so that the fmas overlap, and each panel load feeds
// every row. sum[r][k] = the two chains added.
#if defined(FG_ISA_AVX512) || defined(FG_ISA_NEON)
constexpr int kTileRows = 4;  // 16 accumulators of 32 registers
#else
constexpr int kTileRows = 2;  // 8 of 16
#endif
template <int R, int K, class T>
void tile_times_panel(const T* x, int64_t ld_x, int rows, const T* p, int64_t padded, int64_t E, Vec<T> (&sum)[R][K]) {
  using V = Vec<T>;
  V a[R][K], b[R][K];
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < K; ++k) a[r][k] = b[r][k] = V::broadcast(T(0));
  // rows past `rows` repeat the last (same addresses: no reads past the input)
  const T* xr[R];
  for (int r = 0; r < R; ++r) xr[r] = x + std::min(r, rows - 1) * ld_x;
  int64_t e = 0;
  for (; e + 2 <= E; e += 2, p += 2 * padded)
    for (int r = 0; r < R; ++r) {
      const V x0 = V::broadcast(xr[r][e]), x1 = V::broadcast(xr[r][e + 1]);
      for (int k = 0; k < K; ++k)
        a[r][k] = fma(x0, V::load(p + k * V::kWidth), a[r][k]),
        b[r][k] = fma(x1, V::load(p + padded + k * V::kWidth), b[r][k]);
    }
  if (e < E)
    for (int r = 0; r < R; ++r) {
      const V x0 = V::broadcast(xr[r][e]);
      for (int k = 0; k < K; ++k) a[r][k] = fma(x0, V::load(p + k * V::kWidth), a[r][k]);
    }
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < K; ++k) sum[r][k] = a[r][k] + b[r][k];
}

// For `rows` (<= R) query rows x (ld_x apart), row r seeing n[r] keys: out_r[j] = factor *
// sum over e of x_r[e] * panel[e][j] for j < n[r], and `fill` for n[r] <= j < whole_blocks(the
// largest n) (out rows `padded` apart): keys in lanes, two vectors of them per pass over the rows.
template <int R, class T>
void times_panel(const T* x, int64_t ld_x, int rows, const int64_t* n, T factor, const T* panel, int64_t padded,
                 int64_t E, T fill, T* out) {
  using V = Vec<T>;
  constexpr int64_t W = V::kWidth;
  alignas(64) static constexpr T kLane[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const V scale = V::broadcast(factor), lane = V::load(kLane);
  const int64_t width = whole_blocks(*std::max_element(n, n + rows));
  // lanes past n[r] take `fill` (lane index < keys left: a key's lane)
  auto finish = [&](V sum, int r, int64_t at) {
    select(lt(lane, V::broadcast(T(n[r] - at))), sum * scale, V::broadcast(fill)).store(out + r * padded + at);
  };
  for (int64_t j = 0; j < width; j += 2 * W) {  // the panel's padding: width <= padded, zeros past S
    if (j + W < width) {
      V sum[R][2];
      tile_times_panel<R, 2>(x, ld_x, rows, panel + j, padded, E, sum);
      for (int r = 0; r < rows; ++r) finish(sum[r][0], r, j), finish(sum[r][1], r, j + W);
    } else {  // one vector of keys left
      V sum[R][1];
      tile_times_panel<R, 1>(x, ld_x, rows, panel + j, padded, E, sum);
      for (int r = 0; r < rows; ++r) finish(sum[r][0], r, j);
    }
  }
}

// For `count` (<= R) rows of weights w_t (ld_w apart, readable up to the largest n), out_t = sum over
// j < n[t] of w_t[j] * rows[j] (E elements, rows ld apart; out rows ld_out apart), one vector of E at a
// time: each out row in four chains (j mod 4, added in a fixed order at the end) so that the fmas
// overlap, each value row loaded once for all R. Past a row's n its products are computed and dropped
// (a value row it does not see may hold inf or NaN).
template <int R, class T>
void weighted_rows(const T* w, int64_t ld_w, int count, const int64_t* n, const T* rows, int64_t ld, int64_t E, T* out,
                   int64_t ld_out) {
  using V = Vec<T>;
  const T* wt[R];
  int64_t nt[R];
  for (int t = 0; t < R; ++t) wt[t] = w + std::min(t, count - 1) * ld_w, nt[t] = n[std::min(t, count - 1)];
  const int64_t least = *std::min_element(nt, nt + R), most = *std::max_element(nt, nt + R);
  for (int64_t c = 0; c < E; c += V::kWidth) {
    const int64_t width = std::min<int64_t>(V::kWidth, E - c);
    V acc[R][4];
    for (auto& a : acc)
      for (V& v : a) v = V::broadcast(T(0));
    const T* r = rows + c;
    int64_t j = 0;
    for (; j + 4 <= least; j += 4, r += 4 * ld)
      for (int k = 0; k < 4; ++k) {
        const V x = load_part(r + k * ld, width);
        for (int t = 0; t < R; ++t) acc[t][k] = fma(V::broadcast(wt[t][j + k]), x, acc[t][k]);
      }
    for (; j < most; j += 4, r += 4 * ld)
      for (int k = 0; k < 4 && j + k < most; ++k) {
        const V x = load_part(r + k * ld, width);
        for (int t = 0; t < R; ++t) {
          const V sum = fma(V::broadcast(wt[t][j + k]), x, acc[t][k]);
          if (j + k < nt[t]) acc[t][k] = sum;
        }
      }
    for (int t = 0; t < R; ++t)  // (constant indices: registers)
      if (t < count) store_part((acc[t][0] + acc[t][1]) + (acc[t][2] + acc[t][3]), out + t * ld_out + c, width);
  }
}

// rows[j] += w[j] * x for j < n (E elements, rows ld apart).
template <class T>
void add_scaled_to_rows(const T* w, const T* x, int64_t n, int64_t E, T* rows, int64_t ld) {
  using V = Vec<T>;
  for (int64_t j = 0; j < n; ++j) {
    const V wj = V::broadcast(w[j]);
    T* r = rows + j * ld;
    int64_t c = 0;
    for (; c + V::kWidth <= E; c += V::kWidth) fma(wj, V::load(x + c), V::load(r + c)).store(r + c);
    if (c < E) store_first(fma(wj, load_first(x + c, E - c), load_first(r + c, E - c)), r + c, E - c);
  }
}

// The keys query row i sees: all, or (causal, aligned to the top left) those j <= i.
inline int64_t visible_keys(const AttentionPlane& plane, int64_t i) {
  return plane.causal ? std::min(i + 1, plane.keys) : plane.keys;
}

}  // namespace attention_detail

// Per query row i: p = softmax(scale * q_i K^T over the visible keys), out_i = p V; p is stored to
// probs + i * S unless probs is null (zeros past the visible keys). Rows go in groups, each step
// over the whole group before the next, as softmax_impl.h's (a row's steps are a chain; a group's
// rows overlap).
template <class T>
void attention_forward(const AttentionPlane& plane, const AttentionForward<T>& io, T* scratch) {
  using namespace attention_detail;
  using namespace softmax_detail;
  using V = Vec<T>;
  const int64_t S = plane.keys, E = plane.width, padded = attention_padded(S);
  T* panel = scratch;  // K^T
  transpose_rows(io.k, io.ld_k, S, E, panel, padded);
  auto plain = [](Vec<double> a, Vec<double>) { return a; };
  T* const rows = scratch + E * padded;  // attention_row_block rows of scores, then weights, padded apart
  for (int64_t first = 0; first < plane.queries; first += attention_row_block) {
    const int64_t group = std::min(attention_row_block, plane.queries - first);
    int64_t n[attention_row_block], width[attention_row_block];
    T m[attention_row_block], factor[attention_row_block];
    for (int64_t r = 0; r < group; ++r) n[r] = visible_keys(plane, first + r), width[r] = whole_blocks(n[r]);
    for (int64_t r = 0; r < group; r += kTileRows)
      times_panel<kTileRows>(io.q + (first + r) * io.ld_q, io.ld_q,
                             static_cast<int>(std::min<int64_t>(kTileRows, group - r)), n + r, T(plane.scale), panel,
                             padded, E, -std::numeric_limits<T>::infinity(), rows + r * padded);
    // the masked lanes' -inf scores give weights of 0, which add nothing to the sums
    for (int64_t r = 0; r < group; ++r) m[r] = row_max(rows + r * padded, width[r]);
    for (int64_t r = 0; r < group; ++r) {
      const V mv = V::broadcast(m[r]);
      T* p = rows + r * padded;
      row_map(p, p, p, width[r], [&](V x, V) { return exp_shifted(x - mv); });
    }
    for (int64_t r = 0; r < group; ++r)
      factor[r] = static_cast<T>(1 / row_sum(rows + r * padded, rows + r * padded, width[r], plain));
    for (int64_t r = 0; r < group; ++r) {
      const V c = V::broadcast(factor[r]);
      T* p = rows + r * padded;
      row_map(p, p, p, width[r], [&](V e, V) { return e * c; });
    }
    for (int64_t r = 0; r < group; r += kTileRows)
      weighted_rows<kTileRows>(rows + r * padded, padded, static_cast<int>(std::min<int64_t>(kTileRows, group - r)),
                               n + r, io.v, io.ld_v, E, io.out + (first + r) * io.ld_out, io.ld_out);
    if (io.probs)
      for (int64_t r = 0; r < group; ++r) {
        T* saved = io.probs + (first + r) * S;
        std::copy_n(rows + r * padded, n[r], saved);
        std::fill(saved + n[r], saved + S, T(0));
      }
  }
}

// The gradients from the saved probabilities P and the output's gradient dO, per query row i
// (ascending): dp = dO_i V^T, ds = P_i * (dp - sum(P_i * dp)) * scale, dQ_i = ds K, dK += ds^T q_i,
// dV += P_i^T dO_i. A null gradient pointer skips that gradient; dK and dV must start at zero.
template <class T>
void attention_backward(const AttentionPlane& plane, const AttentionBackward<T>& io, T* scratch) {
  using namespace attention_detail;
  using namespace softmax_detail;
  using V = Vec<T>;
  const int64_t S = plane.keys, E = plane.width, padded = attention_padded(S);
  const bool through_scores = io.dq || io.dk;
  T *panel = scratch, *ds = scratch + E * padded;  // V^T; one row of dp, then ds
  if (through_scores) transpose_rows(io.v, io.ld_v, S, E, panel, padded);
  auto product = [](Vec<double> a, Vec<double> b) { return a * b; };
  const V scale = V::broadcast(T(plane.scale));
  for (int64_t i = 0; i < plane.queries; ++i) {
    const int64_t n = visible_keys(plane, i);
    const T *p = io.probs + i * S, *dout = io.dout + i * io.ld_dout;
    if (io.dv) add_scaled_to_rows(p, dout, n, E, io.dv, io.ld_dv);
    if (!through_scores) continue;
    times_panel<1>(dout, io.ld_dout, 1, &n, T(1), panel, padded, E, T(0), ds);
    const V centre = V::broadcast(static_cast<T>(row_sum(p, ds, n, product)));
    // ds in whole vectors (its lanes past n: 0 * (0 - centre) * scale, never read): the broadcasts of
    // its elements below are then forwarded from the stores (see whole_blocks)
    for (int64_t j = 0; j < n; j += V::kWidth)
      (load_part(p + j, std::min<int64_t>(V::kWidth, n - j)) * (V::load(ds + j) - centre) * scale).store(ds + j);
    if (io.dq) weighted_rows<1>(ds, 0, 1, &n, io.k, io.ld_k, E, io.dq + i * io.ld_dq, 0);
    if (io.dk) add_scaled_to_rows(ds, io.q + i * io.ld_q, n, E, io.dk, io.ld_dk);
  }
}

template <class T>
void fill_attention(TypedKernels<T>& k) {
  k.attention_forward = attention_forward<T>;
  k.attention_backward = attention_backward<T>;
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
