// Packed, cache-blocked GEMM for float and double (the BLIS scheme): C = A @ B with A (m x k) and
// B (k x n) read through any row/column strides -- transposed and strided views, and the backward
// products A^T G and G B^T, are packed straight from their views, never copied to a contiguous
// transpose first -- and C (m x n) written with rows `ldc` apart and contiguous columns.
//
// Numerics (the contract tests/test_gemm.py checks): every element of C is ONE chain over k in
// increasing order, started from zero, c = fma(a[i][k-1], b[k-1][j], ... fma(a[i][0], b[0][j], 0)).
// The micro-kernel keeps that chain across KC blocks by reloading C into its accumulators instead
// of adding partial sums, so the bits do not depend on the block sizes, the micro-tile shape, the
// small or packed path, the operands' layouts, or how threads split m and n. Across ISAs the only
// difference is simd.h's fma: fused on AVX2, AVX-512 and NEON, a multiply then an add on the scalar
// ISA (baseline x86-64 has no fused multiply-add).
// The exception: a C of one row or one column (m == 1 or n == 1: dot, mv, a row vector times a
// matrix) is computed by gemv_impl.h, each element as 32 interleaved chains combined in a fixed
// tree -- one chain would be bound by the FMA latency. Those products therefore differ in the last
// bits from the same elements computed inside a larger C; so a caller that splits C across threads
// must never cut a block of one row or column out of a C that has more (matmul.cpp's splits don't).
//
// Included once per ISA translation unit, inside that ISA's namespace (see isa.h / simd.h). No
// out-of-line library templates (std::copy, std::fill): the linker could merge an AVX-512 copy into
// the baseline path.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>

#include "kernels/gemv_impl.h"
#include "kernels/kernel_table.h"
#include "kernels/simd.h"

namespace fg::simd::FG_ISA_NAMESPACE {
namespace gemm_detail {

// Micro-tile: kRows rows of C by kVecs vectors of columns, all accumulators held in registers
// (kRows * kVecs of them, plus kVecs for a row of B and one broadcast of A).
// AVX-512: 6x64 measured ahead of 14x32, 12x32 and 8x48 here (fewer loads per FMA).
#if defined(FG_ISA_AVX512)
constexpr int kRows = 6, kVecs = 4;  // 24 + 4 + 1 of 32 zmm registers: 6x64 float, 6x32 double
#elif defined(FG_ISA_AVX2)
constexpr int kRows = 6, kVecs = 2;  // 12 + 2 + 1 of 16 ymm registers: 6x16 float, 6x8 double
#elif defined(FG_ISA_NEON)
constexpr int kRows = 8, kVecs = 3;  // 24 + 3 + 1 of 32 q registers: 8x12 float, 8x6 double
#else
constexpr int kRows = 4, kVecs = 4;  // 16 scalar accumulators (the compiler may keep them in SSE lanes)
#endif

template <class T>
constexpr int64_t tile_cols() {
  return int64_t(kVecs) * Vec<T>::kWidth;
}

// Cache blocks, chosen for this machine (AMD EPYC Zen 5; per core 48 KiB L1d, 1 MiB L2; 32 MiB L3)
// and measured: the micro-kernel's kRows x KC sliver of A (12 KiB) stays in L1 while the KC x NR
// panel of B (128 KiB) streams from L2, the MC x KC block of A fits in L2 next to it, and the KC x NC panel
// of B in L3. Byte budgets, so float and double get the same footprint.
constexpr int64_t kKcBytes = 2048;       // KC = 512 floats / 256 doubles
constexpr int64_t kMcBytes = 1 << 19;    // MC * KC * sizeof(T) <= 512 KiB
constexpr int64_t kNcBytes = 1 << 22;    // KC * NC * sizeof(T) <= 4 MiB

// The small path (A read in place, not packed) for n up to 4 tile widths and A up to 256 KiB (a
// quarter of L2): measured faster than packing A at every square size up to 256 here.
template <class T>
constexpr int64_t kSmallCols = 4 * tile_cols<T>();
constexpr int64_t kSmallABytes = 256 * 1024;

template <class T>
struct Blocks {
  static constexpr int64_t kc = kKcBytes / sizeof(T);
  static constexpr int64_t mc = kMcBytes / (kc * sizeof(T)) / kRows * kRows;
  static constexpr int64_t nc = kNcBytes / (kc * sizeof(T)) / tile_cols<T>() * tile_cols<T>();
};

// One growing, 64-byte aligned scratch buffer per thread and role (packed A, packed B).
template <class T, int Role>
T* scratch(int64_t count) {
  struct Buffer {
    T* data = nullptr;
    int64_t size = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buf;
  if (buf.size < count) {
    std::free(buf.data);
    buf.data = nullptr;
    buf.size = 0;
    size_t bytes = (size_t(count) * sizeof(T) + 63) / 64 * 64;
    buf.data = static_cast<T*>(std::aligned_alloc(64, bytes));
    if (!buf.data) throw std::bad_alloc();
    buf.size = count;
  }
  return buf.data;
}

// Packs `rows` x `depth` of a strided matrix into panels of `width` rows, each panel stored
// depth-major (panel[p * width + r]) and zero-padded to `width` rows. A is packed with its rows as
// panel rows; B is packed as B^T (its columns as panel rows), which is the same routine with the
// strides swapped. Reads run along whichever stride is 1, so any view packs at about copying speed.
template <class T>
void pack(int64_t rows, int64_t depth, const T* src, int64_t row_stride, int64_t depth_stride, int64_t width, T* dst) {
  for (int64_t r0 = 0; r0 < rows; r0 += width, dst += width * depth) {
    int64_t n = std::min(width, rows - r0);
    const T* s = src + r0 * row_stride;
    if (depth_stride == 1 && row_stride != 1) {  // a transpose, in strips of 16 so reads and writes stay in L1
      for (int64_t p0 = 0; p0 < depth; p0 += 16)
        for (int64_t r = 0; r < n; ++r)
          for (int64_t p = p0; p < std::min(depth, p0 + 16); ++p) dst[p * width + r] = s[r * row_stride + p];
    } else if (row_stride == 1) {  // row copies (spelled out so the compiler vectorizes them)
      for (int64_t p = 0; p < depth; ++p)
        for (int64_t r = 0; r < n; ++r) dst[p * width + r] = s[r + p * depth_stride];
    } else {
      for (int64_t p = 0; p < depth; ++p)
        for (int64_t r = 0; r < n; ++r) dst[p * width + r] = s[r * row_stride + p * depth_stride];
    }
    if (n < width)
      for (int64_t p = 0; p < depth; ++p)
        for (int64_t r = n; r < width; ++r) dst[p * width + r] = T(0);
  }
}

// Continues the k-chain of a Rows x (Vecs * width) tile of c (rows ldc apart) over `depth` more
// steps; `start` = the chain starts here (from zero) instead of from c. A's element (i, p) is
// a[i * a_row + p * a_step] (a packed panel: a_row 1, a_step kRows; the small path reads A in place);
// b is a packed panel, depth-major, Vecs * width wide.
template <class T, int Rows, int Vecs>
void micro_kernel(int64_t depth, const T* a, int64_t a_row, int64_t a_step, const T* b, T* c, int64_t ldc, bool start) {
  using V = Vec<T>;
  constexpr int W = V::kWidth;
  V acc[Rows][Vecs];
  for (int i = 0; i < Rows; ++i)
    for (int v = 0; v < Vecs; ++v) acc[i][v] = start ? V::broadcast(T(0)) : V::load(c + i * ldc + v * W);
  for (int64_t p = 0; p < depth; ++p, a += a_step, b += Vecs * W) {
    V bv[Vecs];
    for (int v = 0; v < Vecs; ++v) bv[v] = V::load(b + v * W);
    for (int i = 0; i < Rows; ++i) {
      V ai = V::broadcast(a[i * a_row]);
      for (int v = 0; v < Vecs; ++v) acc[i][v] = fma(ai, bv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < Rows; ++i)
    for (int v = 0; v < Vecs; ++v) acc[i][v].store(c + i * ldc + v * W);
}

template <class T>
using MicroKernel = void (*)(int64_t, const T*, int64_t, int64_t, const T*, T*, int64_t, bool);

// micro_kernel for 1..kRows rows, so the last rows of C run without padding.
template <class T, int Vecs, int... R>
constexpr std::array<MicroKernel<T>, sizeof...(R)> kernels_by_rows(std::integer_sequence<int, R...>) {
  return {&micro_kernel<T, R + 1, Vecs>...};
}

// C[0:rows, 0:cols] continues its k-chain over `depth` steps: A read as in micro_kernel, B from
// packed panels nr = Vecs * width wide. A tile cut by C's right edge runs through a full-width
// copy (the padding columns multiply the packed zeros and are dropped).
template <class T, int Vecs>
void macro_kernel(int64_t rows, int64_t cols, int64_t depth, const T* a, int64_t a_row, int64_t a_panel, int64_t a_step,
                  const T* bpack, T* c, int64_t ldc, bool start) {
  static constexpr auto kernels = kernels_by_rows<T, Vecs>(std::make_integer_sequence<int, kRows>());
  constexpr int64_t nr = int64_t(Vecs) * Vec<T>::kWidth;
  alignas(64) T tile[kRows * nr];
  for (int64_t jr = 0; jr < cols; jr += nr, bpack += nr * depth) {
    int64_t w = std::min(nr, cols - jr);
    for (int64_t ir = 0; ir < rows; ir += kRows) {
      int64_t h = std::min<int64_t>(kRows, rows - ir);
      const T* ap = a + (ir / kRows) * a_panel;
      T* cp = c + ir * ldc + jr;
      if (w == nr) {
        kernels[h - 1](depth, ap, a_row, a_step, bpack, cp, ldc, start);
        continue;
      }
      for (int64_t i = 0; i < h && !start; ++i)
        for (int64_t j = 0; j < w; ++j) tile[i * nr + j] = cp[i * ldc + j];
      kernels[h - 1](depth, ap, a_row, a_step, bpack, tile, nr, start);
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j) cp[i * ldc + j] = tile[i * nr + j];
    }
  }
}

// The loops over cache blocks: for each NC-wide panel of B, for each KC slice of k (in increasing
// order: the chains continue from one slice to the next), pack that B panel, then for each MC block
// of A (packed, or read in place) run the micro-tiles.
template <class T, int Vecs>
void gemm_blocked(int64_t m, int64_t n, int64_t k, const T* a, int64_t rsa, int64_t csa, const T* b, int64_t rsb,
                  int64_t csb, T* c, int64_t ldc, bool pack_a) {
  using B = Blocks<T>;
  constexpr int64_t nr = int64_t(Vecs) * Vec<T>::kWidth;
  auto round_up = [](int64_t x, int64_t to) { return (x + to - 1) / to * to; };
  T* bpack = scratch<T, 0>(std::min(B::kc, k) * round_up(std::min(B::nc, n), nr));
  T* apack = pack_a ? scratch<T, 1>(std::min(B::kc, k) * round_up(std::min(B::mc, m), kRows)) : nullptr;
  for (int64_t jc = 0; jc < n; jc += B::nc) {
    int64_t nc = std::min(B::nc, n - jc);
    for (int64_t pc = 0; pc < k; pc += B::kc) {
      int64_t kc = std::min(B::kc, k - pc);
      pack<T>(nc, kc, b + pc * rsb + jc * csb, csb, rsb, nr, bpack);
      for (int64_t ic = 0; ic < m; ic += B::mc) {
        int64_t mc = std::min(B::mc, m - ic);
        const T* ablock = a + ic * rsa + pc * csa;
        T* cblock = c + ic * ldc + jc;
        if (pack_a) {
          pack<T>(mc, kc, ablock, rsa, csa, kRows, apack);
          macro_kernel<T, Vecs>(mc, nc, kc, apack, 1, kRows * kc, kRows, bpack, cblock, ldc, pc == 0);
        } else {
          macro_kernel<T, Vecs>(mc, nc, kc, ablock, rsa, kRows * rsa, csa, bpack, cblock, ldc, pc == 0);
        }
      }
    }
  }
}

}  // namespace gemm_detail

// C (m x n, rows ldc apart) = A (m x k) @ B (k x n); A[i][p] = a[i * rsa + p * csa], B[p][j] = b[p * rsb + j * csb].
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t rsa, int64_t csa, const T* b, int64_t rsb, int64_t csb,
          T* c, int64_t ldc) {
  using namespace gemm_detail;
  constexpr int64_t W = Vec<T>::kWidth;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = T(0);
    return;
  }
  if (m == 1) return gemv<T>(n, k, b, csb, rsb, a, csa, c, 1);  // c[j] = sum_p B[p][j] A[0][p]
  if (n == 1) return gemv<T>(m, k, a, rsa, csa, b, rsb, c, ldc);
  // A narrow C gets a narrower tile rather than columns of padding. A is read in place unless it
  // meets several column tiles and is too big to stay in cache: packing copies it once per column
  // block, which pays only when the copy is reused.
  if (kVecs >= 2 && n <= W) return gemm_blocked<T, 1>(m, n, k, a, rsa, csa, b, rsb, csb, c, ldc, false);
  if (kVecs >= 4 && n <= 2 * W) return gemm_blocked<T, 2>(m, n, k, a, rsa, csa, b, rsb, csb, c, ldc, false);
  bool pack_a = n > tile_cols<T>() && !(n <= kSmallCols<T> && m * k * int64_t(sizeof(T)) <= kSmallABytes);
  gemm_blocked<T, kVecs>(m, n, k, a, rsa, csa, b, rsb, csb, c, ldc, pack_a);
}

template <class T>
void fill_gemm(TypedKernels<T>& k) {
  k.gemm = gemm<T>;
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
