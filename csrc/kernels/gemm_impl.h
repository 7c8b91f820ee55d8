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

#include "kernels/cpu_caches.h"
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

// A narrower tile (a C one or two vectors wide, as conv.cpp's weight gradient at 16 or 32 output
// channels) takes twice the rows: on AVX-512 12 or 24 independent chains in 14 or 27 registers
// (6 chains leave the FMA units waiting on each chain's latency: 6x16 measured at ~2/3 of 6x64).
template <int Vecs>
constexpr int kRowsOf = Vecs == kVecs ? kRows : 2 * kRows;

template <class T>
constexpr int64_t tile_cols() {
  return int64_t(kVecs) * Vec<T>::kWidth;
}

// Cache blocks, derived once from the data cache sizes (cpu_caches.h) by the budgets below: the
// micro-kernel's kRows x KC sliver of A fills half of L1 on AVX-512 (a quarter with the AVX2 tile)
// while the KC x NR panel of B streams from L2, the MC x KC block of A fills half of L2 next to it,
// and the KC x NC panel of B an eighth of L3 (at most four L2s; two without an L3). Byte budgets,
// so float and double get the same footprint. AMD EPYC Zen 5 (per core 48 KiB L1d, 1 MiB L2, 32 MiB
// L3): KC 1024 floats, MC 126 rows, NC 1024 columns; Intel Xeon model 167 (2 MiB L2): MC 252. The
// small path (A read in place, not packed) takes n up to 4 tile widths and A up to a quarter of L2:
// measured faster than packing A at every square size up to 256 on the Zen 5.
// The sliver at half of L1 (KC 1024 floats rather than 512) halves the reloads of C's tiles per
// flop: one thread, n = 512 / 1024 / 2048, on the Xeon (with B prefetched, below) 195 / 198 / 201 ->
// 199 / 202 / 206 GFLOP/s (KC 128 and 256 lost: 172-189); on the Zen 5 (medians of 7, twice)
// 256 / 248-251 / 233-239 -> 253-258 / 255-260 / 248; two threads 1024 / 2048 487-508 / 456-469 ->
// 502-516 / 482-489 (512 within noise, 128-768 unchanged).
// On Intel the micro-kernel prefetches its B panel 8 steps of k ahead: the 6x64 tile reads 4 cache
// lines of B a step, and the panel (KC x 64 floats) streams from L2, which the hardware prefetchers
// alone left behind (on the Xeon: the micro-kernel over a B panel in L2 +8-12%, the whole product
// +2-4%). On the Zen 5 the prefetch changed nothing measurable (n = 512..2048, one thread).
template <class T>
GemmBlocks derive_blocks(const CacheSizes& caches, [[maybe_unused]] bool intel) {
  const int64_t l1d = std::clamp<int64_t>(caches.l1d, 16 << 10, 1 << 20);
  const int64_t l2 = std::clamp<int64_t>(caches.l2, 128 << 10, 64 << 20);
  const int64_t b_panel_bytes = caches.l3 > 0 ? std::clamp<int64_t>(caches.l3 / 8, l2, 4 * l2) : 2 * l2;
#if defined(FG_ISA_AVX512)
  const int64_t a_sliver_bytes = l1d / 2;
#else
  const int64_t a_sliver_bytes = l1d / 4;  // measured on AVX-512 only
#endif
  GemmBlocks b;
  b.mr = kRows;
  b.nr = tile_cols<T>();
  b.lanes = Vec<T>::kWidth;
  b.kc = std::max<int64_t>(64, a_sliver_bytes / kRows / int64_t(sizeof(T)) / 8 * 8);
  b.mc = std::max<int64_t>(kRows, l2 / 2 / (b.kc * int64_t(sizeof(T))) / kRows * kRows);
  b.nc = std::max<int64_t>(b.nr, b_panel_bytes / (b.kc * int64_t(sizeof(T))) / b.nr * b.nr);
  b.small_a_bytes = l2 / 4;
#if defined(FG_ISA_AVX512)
  b.prefetch_b = intel ? 8 : 0;
#else
  b.prefetch_b = 0;  // measured on AVX-512 only
#endif
  return b;
}

template <class T>
const GemmBlocks& blocks() {
  static const GemmBlocks b = derive_blocks<T>(cache_sizes(), cpu_is_intel());
  return b;
}

template <class T>
constexpr int64_t kSmallCols = 4 * tile_cols<T>();

// One growing, 64-byte aligned scratch buffer per thread and role (packed A, packed B, gemm's C^T).
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

// dst[p * ld_dst + r] = src[r * ld_src + p] for a W x W block (W = Vec<T>::kWidth): W row loads,
// a transpose in registers, W stores. Rows from `rows` on are taken as zeros, not read.
template <class T>
void transpose_block(const T* src, int64_t ld_src, T* dst, int64_t ld_dst, int64_t rows = Vec<T>::kWidth) {
  using V = Vec<T>;
  constexpr int W = V::kWidth;
  V v[W];
  for (int r = 0; r < W; ++r) v[r] = r < rows ? V::load(src + r * ld_src) : V::broadcast(T(0));
  transpose_in_registers(v);
  for (int p = 0; p < W; ++p) v[p].store(dst + p * ld_dst);
}

// Packs `rows` x `depth` of a strided matrix into panels of `width` rows, each panel stored
// depth-major (panel[p * width + r]) and zero-padded to `width` rows. A is packed with its rows as
// panel rows; B is packed as B^T (its columns as panel rows), which is the same routine with the
// strides swapped. Reads run along whichever stride is 1, so any view packs at about copying speed:
// a source whose depth is contiguous (a row-major A, a transposed B such as nn.Linear's W.t()) is
// transposed in register blocks.
template <class T>
void pack(int64_t rows, int64_t depth, const T* src, int64_t row_stride, int64_t depth_stride, int64_t width, T* dst) {
  constexpr int64_t W = Vec<T>::kWidth;
  if (row_stride == 1 && width <= W) {
    // Panels at most a vector wide (a column-major A's, mr rows) from a source whose rows are
    // contiguous: each step's rows one masked load and store, zeros for the missing rows (the
    // padding); all panels over kSteps steps before the next steps, so that each source line
    // (a step's 16 rows) is read from L2 once, not once per panel: steps are whole lines apart, on
    // few L1 sets (4 KiB apart: one set), and 8 of them stay there. Panel by panel, element by
    // element, x.t() @ W's 1024^3 spent 5% of its time here: a 510 x 512 block 183-200 -> 81 us,
    // x.t() @ W at 1024^3 1.06-1.07x -> 1.00-1.01x x @ W's time, x.t() @ W.t() 1.06-1.09x -> 1.02-1.03x.
    constexpr int64_t kSteps = 8;
    for (int64_t p0 = 0; p0 < depth; p0 += kSteps)
      for (int64_t r0 = 0; r0 < rows; r0 += width) {
        const int64_t n = std::min(width, rows - r0);
        T* panel = dst + r0 * depth;
        for (int64_t p = p0; p < std::min(depth, p0 + kSteps); ++p)
          store_first(load_first(src + r0 + p * depth_stride, n), panel + p * width, width);
      }
    return;
  }
  for (int64_t r0 = 0; r0 < rows; r0 += width, dst += width * depth) {
    int64_t n = std::min(width, rows - r0);
    const T* s = src + r0 * row_stride;
    auto copy = [&](int64_t r_begin, int64_t r_end, int64_t p_begin, int64_t p_end) {
      for (int64_t p = p_begin; p < p_end; ++p)
        for (int64_t r = r_begin; r < r_end; ++r) dst[p * width + r] = s[r * row_stride + p * depth_stride];
    };
    // Rows [n, padded) of the first `transposed_depth` steps are already the panel's zero padding.
    int64_t padded = n, transposed_depth = 0;
    if (depth_stride == 1 && row_stride != 1) {
      // A last partial block of rows that fits the panel is transposed too, zeros in place of the
      // missing rows (its padding): row by row, nn.Linear(512, 10)'s x @ W.t() at batch 8 packed its
      // 10 rows into a 16-wide panel in a fifth of the product's time.
      const int64_t whole_rows = n / W * W, block_depth = depth / W * W;
      const int64_t block_rows = n > whole_rows && whole_rows + W <= width ? whole_rows + W : whole_rows;
      for (int64_t r = 0; r < block_rows; r += W)
        for (int64_t p = 0; p < block_depth; p += W)
          transpose_block(s + r * row_stride + p, row_stride, dst + p * width + r, width, std::min(W, n - r));
      copy(0, std::min(n, block_rows), block_depth, depth);
      for (int64_t r = block_rows; r < n; ++r) copy(r, r + 1, 0, depth);  // row by row: reads stay contiguous
      padded = std::max(n, block_rows);
      transposed_depth = block_depth;
    } else {
      copy(0, n, 0, depth);  // row copies when row_stride == 1 (the compiler vectorizes them), else strided
    }
    for (int64_t p = 0; p < depth; ++p)
      for (int64_t r = p < transposed_depth ? padded : n; r < width; ++r) dst[p * width + r] = T(0);
  }
}

// Where the micro-kernel finds A's and B's elements of step p: A at a + p * a_step and B in a
// packed panel (Packed); B's row p at b + offsets[p], the tile's vector v at b + offsets[p] +
// vectors[v] (OffsetRowsOfB: gemm_offset_b); A's column p at a + offsets[p] (OffsetColumnsOfA:
// gemm_offset_a). Callers whose operand is a set of shifted runs of one buffer (conv.cpp's taps over
// a zero-padded image) then need no copy of it.
enum class Reads { Packed, OffsetRowsOfB, OffsetColumnsOfA };

// B's columns in OffsetRowsOfB mode: in runs of `run` columns (a multiple of the vector width, or at
// least n), `stride` apart along each row: column j at (j / run) * stride + j % run (conv.cpp's
// output rows over the rows of a zero-padded image, whose borders no tile then computes).
struct ColumnRuns {
  int64_t run, stride;
  int64_t position(int64_t j) const { return j / run * stride + j % run; }
};

// Continues the k-chain of a Rows x (Vecs * width) tile of c (rows ldc apart) over `depth` more
// steps; `start` = the chain starts here (from zero) instead of from c. A's element (i, p) is
// a[i * a_row + p * a_step] (a packed panel: a_row 1, a_step the tile's rows; the small path reads A
// in place); B's row p is a packed panel's (depth-major, Vecs * width wide: b + p * Vecs * width).
// Or as `Mode` says (Reads; `vectors`: OffsetRowsOfB's vector offsets). PrefetchB: a packed B's
// rows are prefetched blocks().prefetch_b steps ahead; PrefetchA: A's elements of the step as many
// steps ahead (hints: the bits stay the same).
template <class T, int Rows, int Vecs, Reads Mode, bool PrefetchB = false, bool PrefetchA = false>
void micro_kernel(int64_t depth, const T* a, int64_t a_row, int64_t a_step, const T* b, const int64_t* offsets,
                  const int64_t* vectors, T* c, int64_t ldc, bool start) {
  using V = Vec<T>;
  constexpr int W = V::kWidth;
  V acc[Rows][Vecs];
  for (int i = 0; i < Rows; ++i)
    for (int v = 0; v < Vecs; ++v) acc[i][v] = start ? V::broadcast(T(0)) : V::load(c + i * ldc + v * W);
  int64_t vector_at[Vecs];
  for (int v = 0; v < Vecs; ++v) vector_at[v] = Mode == Reads::OffsetRowsOfB ? vectors[v] : v * W;
  const int64_t ahead = PrefetchB ? blocks<T>().prefetch_b * (Vecs * W) : 0;
  const int64_t a_ahead = PrefetchA ? blocks<T>().prefetch_b * a_step : 0;
  for (int64_t p = 0; p < depth; ++p) {
    const T* row = Mode == Reads::OffsetRowsOfB ? b + offsets[p] : b + p * (Vecs * W);
    const T* column = Mode == Reads::OffsetColumnsOfA ? a + offsets[p] : a + p * a_step;
    V bv[Vecs];
    if (PrefetchB)  // past the panel's end this touches the next panel's rows, or nothing: no fault
      for (int v = 0; v < Vecs; ++v) __builtin_prefetch(row + ahead + v * W);
    for (int v = 0; v < Vecs; ++v) bv[v] = V::load(row + vector_at[v]);
    if (PrefetchA) __builtin_prefetch(column + a_ahead);  // past A's end: no fault
    for (int i = 0; i < Rows; ++i) {
      V ai = V::broadcast(column[i * a_row]);
      for (int v = 0; v < Vecs; ++v) acc[i][v] = fma(ai, bv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < Rows; ++i)
    for (int v = 0; v < Vecs; ++v) acc[i][v].store(c + i * ldc + v * W);
}

template <class T>
using MicroKernel = void (*)(int64_t, const T*, int64_t, int64_t, const T*, const int64_t*, const int64_t*, T*, int64_t,
                             bool);

// micro_kernel for 1..kRowsOf<Vecs> rows, so the last rows of C run without padding.
template <class T, int Vecs, Reads Mode, bool PrefetchB, bool PrefetchA, int... R>
constexpr std::array<MicroKernel<T>, sizeof...(R)> kernels_by_rows(std::integer_sequence<int, R...>) {
  return {&micro_kernel<T, R + 1, Vecs, Mode, PrefetchB, PrefetchA>...};
}

// C[0:rows, 0:cols] continues its k-chain over `depth` steps: A read as in micro_kernel, B from
// packed panels nr = Vecs * width wide, `b_panel` elements apart (or with OffsetRowsOfB, rows
// offsets into b, C's column j being B's column first_column + j of `runs`). A tile cut by C's
// right edge runs through a full-width copy (the padding columns multiply the packed zeros, or
// whatever the rows hold at the tile's first vector, and are dropped).
template <class T, int Vecs, Reads Mode>
void macro_kernel(int64_t rows, int64_t cols, int64_t depth, const T* a, int64_t a_row, int64_t a_panel, int64_t a_step,
                  const T* bpack, int64_t b_panel, const int64_t* offsets, int64_t first_column, ColumnRuns runs, T* c,
                  int64_t ldc, bool start) {
  constexpr int kTileRows = kRowsOf<Vecs>;
  // Prefetching versions only of the full-width tile over packed panels (the large products' tile),
  // used where the panel is deeper than L1 holds (shallower ones stay in L1: there the prefetches
  // cost 3-7% of 32x64 @ 64x128 and 128x128 @ 128x128).
  constexpr bool kMayPrefetch = Mode == Reads::Packed && Vecs == kVecs;
  // A read in place column-major (x.t() @ W): each step's rows are a cache line of their own, a
  // column apart, which the tiles read again from L2 (they share few L1 sets); prefetched as B's,
  // x.t() @ W 3-4% faster at 256^3, 64x784 @ 784x256 and 128x512 @ 512x256 (Intel Xeon model 167,
  // A/B in one process; the other forms unchanged). On Intel only, with B's prefetch.
  using Kernels = std::array<MicroKernel<T>, kTileRows>;
  constexpr auto kEachRows = std::make_integer_sequence<int, kTileRows>();
  static constexpr Kernels kPlain = kernels_by_rows<T, Vecs, Mode, false, false>(kEachRows);
  static constexpr Kernels kPrefetching = kernels_by_rows<T, Vecs, Mode, kMayPrefetch, false>(kEachRows);
  static constexpr Kernels kPrefetchingA = kernels_by_rows<T, Vecs, Mode, false, kMayPrefetch>(kEachRows);
  static constexpr Kernels kPrefetchingBoth = kernels_by_rows<T, Vecs, Mode, kMayPrefetch, kMayPrefetch>(kEachRows);
  constexpr int64_t W = Vec<T>::kWidth, nr = int64_t(Vecs) * W;
  const bool prefetch =
      kMayPrefetch && blocks<T>().prefetch_b > 0 && depth * nr * int64_t(sizeof(T)) > cache_sizes().l1d;
  const bool prefetch_a = kMayPrefetch && blocks<T>().prefetch_b > 0 && a_row == 1 && a_step * int64_t(sizeof(T)) >= 64;
  const Kernels& kernels = prefetch_a ? (prefetch ? kPrefetchingBoth : kPrefetchingA)
                           : prefetch ? kPrefetching
                                      : kPlain;
  alignas(64) T tile[kTileRows * nr];
  int64_t vectors[Vecs];
  // The last rows: 2 or 3 rows past whole tiles share the last whole tile's rows (8 run as 4 + 4,
  // 9 as 5 + 4, 14 as 6 + 4 + 4) where A's rows are addressed one by one (read in place or copied
  // row by row, not packed into panels of kTileRows): a tile of 2 or 3 rows holds 8 or 12 chains,
  // too few to keep both FMA units busy while B's rows stream in. Either way every tile streams
  // the same panel of B once and every element is the same chain; only which rows share a call
  // changes. Measured with the 6x64 tile over packed panels (AVX-512, Intel Xeon model 167, one
  // thread), 8 rows by 128 columns at k = 512: 161 -> 222 GF/s (k = 128, 512 columns: 208 -> 217);
  // 14 rows 187 -> 228 (218 -> 229); 9 rows 187 -> 230 (200 -> 220). One row past whole tiles
  // stays alone: 7 rows as 4 + 3 lost at k = 128 (208 -> 184), and 4 or 5 rows are tiles enough.
  const bool rows_addressable = a_panel == kTileRows * a_row;
  const int64_t whole = rows / kTileRows * kTileRows, rest = rows - whole;
  const int64_t balanced_from =
      kTileRows == kRows && rows_addressable && whole > 0 && rest >= 2 && 2 * rest <= kTileRows ? whole - kTileRows
                                                                                                : rows;
  for (int64_t jr = 0; jr < cols; jr += nr, bpack += b_panel) {
    int64_t w = std::min(nr, cols - jr);
    const T* b = bpack;
    if (Mode == Reads::OffsetRowsOfB) {
      b = bpack + runs.position(first_column + jr);
      for (int v = 0; v < Vecs; ++v)
        vectors[v] = v * W < w ? runs.position(first_column + jr + v * W) - runs.position(first_column + jr) : 0;
    }
    for (int64_t ir = 0, h; ir < rows; ir += h) {
      h = ir < balanced_from    ? std::min<int64_t>(kTileRows, rows - ir)
          : ir == balanced_from ? (rows - ir + 1) / 2
                                : rows - ir;
      const T* ap = rows_addressable ? a + ir * a_row : a + (ir / kTileRows) * a_panel;
      T* cp = c + ir * ldc + jr;
      if (w == nr) {
        kernels[h - 1](depth, ap, a_row, a_step, b, offsets, vectors, cp, ldc, start);
        continue;
      }
      for (int64_t i = 0; i < h && !start; ++i)
        for (int64_t j = 0; j < w; ++j) tile[i * nr + j] = cp[i * ldc + j];
      kernels[h - 1](depth, ap, a_row, a_step, b, offsets, vectors, tile, nr, start);
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j) cp[i * ldc + j] = tile[i * nr + j];
    }
  }
}

// The loops over cache blocks: for each NC-wide panel of B, for each KC slice of k (in increasing
// order: the chains continue from one slice to the next), pack that B panel (unless the caller
// passed B already packed, `b_panels`: see gemm_packed_b; or B's rows are read in place,
// Reads::OffsetRowsOfB), then for each MC block of A (copied or packed, or read in place) run the
// micro-tiles. `offsets`: the Mode's offsets of every step in k.
template <class T, int Vecs, Reads Mode = Reads::Packed>
void gemm_blocked(int64_t m, int64_t n, int64_t k, const T* a, int64_t rsa, int64_t csa, const T* b, int64_t rsb,
                  int64_t csb, T* c, int64_t ldc, bool pack_a, const T* b_panels = nullptr,
                  const int64_t* offsets = nullptr, ColumnRuns runs = {1, 1}) {
  const GemmBlocks& B = blocks<T>();
  constexpr int64_t nr = int64_t(Vecs) * Vec<T>::kWidth;
  auto round_up = [](int64_t x, int64_t to) { return (x + to - 1) / to * to; };
  constexpr bool kRowsOfB = Mode == Reads::OffsetRowsOfB, kColumnsOfA = Mode == Reads::OffsetColumnsOfA;
  // A B of exactly one panel's columns, its rows contiguous and nr apart, is that panel already.
  if (!b_panels && !kRowsOfB && n == nr && csb == 1 && rsb == nr) b_panels = b;
  const bool packs_b = !b_panels && !kRowsOfB;
  T* bpack = packs_b ? scratch<T, 0>(std::min(B.kc, k) * round_up(std::min(B.nc, n), nr)) : nullptr;
  constexpr int64_t mr = kRowsOf<Vecs>;
  T* apack = pack_a ? scratch<T, 1>(std::min(B.kc, k) * round_up(std::min(B.mc, m), mr)) : nullptr;
  // A's rows in blocks of equal size (whole tiles): 256 rows as 252 + 4 would stream B's panels
  // once for 4 rows (MC 252 on the Xeon: 256 x 1024 @ 1024 x 1024 lost 3-5%).
  const int64_t row_blocks = (m + B.mc - 1) / B.mc;
  const int64_t mc_step = std::min(B.mc, round_up((m + row_blocks - 1) / row_blocks, mr));
  for (int64_t jc = 0; jc < n; jc += B.nc) {
    int64_t nc = std::min(B.nc, n - jc);
    for (int64_t pc = 0; pc < k; pc += B.kc) {
      int64_t kc = std::min(B.kc, k - pc);
      // This slice's panels: a caller's full-depth panels read from row pc on, its rows (whose
      // columns macro_kernel places), or packed here.
      const T* panels = b_panels ? b_panels + jc * k + pc * nr : kRowsOfB ? b : bpack;
      const int64_t b_panel = b_panels ? nr * k : kRowsOfB ? 0 : nr * kc;
      const int64_t* slice_offsets = offsets ? offsets + pc : nullptr;
      if (packs_b) pack<T>(nc, kc, b + pc * rsb + jc * csb, csb, rsb, nr, bpack);
      for (int64_t ic = 0; ic < m; ic += mc_step) {
        int64_t mc = std::min(mc_step, m - ic);
        const T* ablock = a + ic * rsa + (kColumnsOfA ? 0 : pc * csa);
        T* cblock = c + ic * ldc + jc;
        if (pack_a && csa == 1) {
          // A's rows contiguous: the block is copied row by row, kc apart, and the micro-kernel reads
          // a tile's rows as the small path reads A in place. Panels of mr rows, depth-major, took
          // element-by-element writes (the register transposes need W rows): 5-7% of the product's
          // time on the Intel Xeon (model 167), and this copy made n = 512..2048 +7% faster there.
          for (int64_t i = 0; i < mc; ++i)
            for (int64_t p = 0; p < kc; ++p) apack[i * kc + p] = ablock[i * rsa + p];
          macro_kernel<T, Vecs, Mode>(mc, nc, kc, apack, kc, mr * kc, 1, panels, b_panel, slice_offsets, jc, runs,
                                      cblock, ldc, pc == 0);
        } else if (pack_a) {
          pack<T>(mc, kc, ablock, rsa, csa, mr, apack);
          macro_kernel<T, Vecs, Mode>(mc, nc, kc, apack, 1, mr * kc, mr, panels, b_panel, slice_offsets, jc, runs,
                                      cblock, ldc, pc == 0);
        } else {
          macro_kernel<T, Vecs, Mode>(mc, nc, kc, ablock, rsa, mr * rsa, csa, panels, b_panel, slice_offsets, jc, runs,
                                      cblock, ldc, pc == 0);
        }
      }
    }
  }
}

// Whether the GEMM packs A (m x k) for a C of n columns: when A meets several column tiles and is
// too big to stay in cache (packing copies it once per column block, which pays only when the copy
// is reused); otherwise A is read in place.
template <class T>
bool packs_a(int64_t m, int64_t n, int64_t k) {
  return n > tile_cols<T>() && !(n <= kSmallCols<T> && m * k * int64_t(sizeof(T)) <= blocks<T>().small_a_bytes);
}

// A product with nothing to sum (k == 0) is zero; true when there is nothing left to compute.
template <class T>
bool empty_product(int64_t m, int64_t n, int64_t k, T* c, int64_t ldc) {
  if (k == 0)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = T(0);
  return m == 0 || n == 0 || k == 0;
}

}  // namespace gemm_detail

// C (m x n, rows ldc apart) = A (m x k) @ B (k x n); A[i][p] = a[i * rsa + p * csa], B[p][j] = b[p * rsb + j * csb].
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t rsa, int64_t csa, const T* b, int64_t rsb, int64_t csb,
          T* c, int64_t ldc) {
  using namespace gemm_detail;
  constexpr int64_t W = Vec<T>::kWidth;
  if (empty_product(m, n, k, c, ldc)) return;
  if (m == 1) return gemv<T>(n, k, b, csb, rsb, a, csa, c, 1);  // c[j] = sum_p B[p][j] A[0][p]
  if (n == 1) return gemv<T>(m, k, a, rsa, csa, b, rsb, c, ldc);
  // C^T = B^T A^T into a scratch C^T, then transposed into C by register blocks (C's rows whole
  // vectors). Each element is still one chain over k from zero (fma(b, a, c) is fma(a, b, c)).
  // Both operands column-major (x.t() @ W.t()), A read in place (not packed): C^T is the contiguous
  // product. Measured here (AVX-512), x.t() @ W.t() against x @ W: 64x784 @ 784x256 1.08-1.12x ->
  // 0.81x, 32x64 @ 64x128 1.00x -> 0.85x, 256x256 @ 256x256 1.09x -> 1.04x; with C's rows not whole
  // vectors (50x70 @ 70x130: 1.40x) and with A packed (1024^3: 1.06x) the transposed problem lost.
  // A row-major and B column-major (nn.Linear's x @ W.t()) at a small batch, m one of the tile widths
  // (C^T's columns fill its tiles) and x and C together at most as many elements as W: B's panels
  // would be packed by register transposes (bound by the shuffle port), all of W; C^T reads W's rows
  // in place (A^T, one tile wide, is not packed) and transposes x and C instead. x @ W.t() against
  // x @ W, Intel Xeon model 167, AVX-512, one thread: 64x784 @ 784x256 1.04-1.05x -> 0.84-0.87x,
  // 32x784 1.06x -> 0.71x, 16x784 1.14-1.18x -> 0.81x, 64x512 @ 512x512 1.01-1.04x -> 0.73x,
  // 64x1024 @ 1024x1024 1.02x -> 0.67x, 16x256 @ 256x128 1.11x -> 0.89x, 32x64 @ 64x128 1.01-1.02x ->
  // 0.89-0.90x, 64x784 @ 784x128 1.04x -> 0.97x; m = 48 (a tile with a quarter of padding) lost,
  // 1.06x -> 1.10x, and so did a W of 16 KiB or less (the transposes' fixed costs: 16x32 @ 32x64
  // 1.40x -> 1.68x). The inner product meets neither case again: for it the test reads
  // n (k + m) <= k m, which cannot hold together with this one.
  const bool a_columns = rsa == 1 && csa != 1, b_columns = rsb == 1 && csb != 1;
  const bool fills_tiles = m == tile_cols<T>() || (kVecs >= 2 && m == W) || (kVecs >= 4 && m == 2 * W);
  if (m % W == 0 && b_columns &&
      (a_columns ? !packs_a<T>(m, n, k)
                 : csa == 1 && fills_tiles && m * (k + n) <= k * n && k * n * int64_t(sizeof(T)) > 16384)) {
    T* ct = scratch<T, 3>(n * m);
    gemm<T>(n, m, k, b, csb, rsb, a, csa, rsa, ct, m);
    const int64_t block_cols = n / W * W;
    for (int64_t i = 0; i < m; i += W)
      for (int64_t j = 0; j < block_cols; j += W) transpose_block(ct + j * m + i, m, c + i * ldc + j, ldc);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = block_cols; j < n; ++j) c[i * ldc + j] = ct[j * m + i];
    return;
  }
  // A narrow C, and the last columns of a wide one that would fill at most half a tile, get a
  // narrower tile rather than columns of padding (A read in place). At most a quarter of a vector
  // of columns (nn.Linear to a vocabulary of 65: 64 + 1) would still be mostly padding lanes: those
  // columns are computed as the rows of C^T = B^T A^T instead, vectors along m (A^T packed once by
  // register transposes), through a scratch C^T; every element is still one chain over k from zero.
  auto narrow = [&](int64_t first, int64_t cols) {
    if (cols * 4 <= W) {
      T* ct = scratch<T, 2>(cols * m);
      gemm_blocked<T, kVecs>(cols, m, k, b + first * csb, csb, rsb, a, csa, rsa, ct, m, false);
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t i = 0; i < m; ++i) c[i * ldc + first + j] = ct[j * m + i];
      return true;
    }
    if (kVecs >= 2 && cols <= W)
      return gemm_blocked<T, 1>(m, cols, k, a, rsa, csa, b + first * csb, rsb, csb, c + first, ldc, false), true;
    if (kVecs >= 4 && cols <= 2 * W)
      return gemm_blocked<T, 2>(m, cols, k, a, rsa, csa, b + first * csb, rsb, csb, c + first, ldc, false), true;
    return false;
  };
  if (narrow(0, n)) return;
  const int64_t tail = n % tile_cols<T>();
  if (tail > 0 && narrow(n - tail, tail)) n -= tail;
  gemm_blocked<T, kVecs>(m, n, k, a, rsa, csa, b, rsb, csb, c, ldc, packs_a<T>(m, n, k));
}

// C = A @ B with B given already packed (kernel_table.h: GemmPackedBKernel), so a caller that
// builds B (conv.cpp's im2col) writes the panels once instead of a matrix the GEMM then copies.
// Every C, even one row or column, runs the micro-tiles: the same chains as gemm's packed path.
template <class T>
void gemm_packed_b(int64_t m, int64_t n, int64_t k, const T* a, int64_t rsa, int64_t csa, const T* b_panels, T* c,
                   int64_t ldc) {
  using namespace gemm_detail;
  if (empty_product(m, n, k, c, ldc)) return;
  gemm_blocked<T, kVecs>(m, n, k, a, rsa, csa, nullptr, 0, 0, c, ldc, packs_a<T>(m, n, k), b_panels);
}

// C = A @ B with B's rows read in place, its columns in runs: B[p][j] = b[b_rows[p] + (j / run) *
// run_stride + j % run] (kernel_table.h: GemmOffsetBKernel). Every C runs the full-width micro-tiles
// (the same chains as gemm's packed path); a tile cut by C's right edge reads its columns past n
// at its first vector's place.
template <class T>
void gemm_offset_b(int64_t m, int64_t n, int64_t k, const T* a, int64_t rsa, int64_t csa, const T* b,
                   const int64_t* b_rows, int64_t run, int64_t run_stride, T* c, int64_t ldc) {
  using namespace gemm_detail;
  if (empty_product(m, n, k, c, ldc)) return;
  gemm_blocked<T, kVecs, Reads::OffsetRowsOfB>(m, n, k, a, rsa, csa, b, 0, 0, c, ldc, packs_a<T>(m, n, k), nullptr,
                                               b_rows, {run, run_stride});
}

// C = A @ B with A's columns read in place: A[i][p] = a[a_columns[p] + i] (kernel_table.h:
// GemmOffsetAKernel); B strided as gemm's. A is never packed; the chains are gemm's.
template <class T>
void gemm_offset_a(int64_t m, int64_t n, int64_t k, const T* a, const int64_t* a_columns, const T* b, int64_t rsb,
                   int64_t csb, T* c, int64_t ldc) {
  using namespace gemm_detail;
  constexpr int64_t W = Vec<T>::kWidth;
  constexpr Reads kMode = Reads::OffsetColumnsOfA;
  if (empty_product(m, n, k, c, ldc)) return;
  if (kVecs >= 2 && n <= W)
    return gemm_blocked<T, 1, kMode>(m, n, k, a, 1, 0, b, rsb, csb, c, ldc, false, nullptr, a_columns);
  if (kVecs >= 4 && n <= 2 * W)
    return gemm_blocked<T, 2, kMode>(m, n, k, a, 1, 0, b, rsb, csb, c, ldc, false, nullptr, a_columns);
  gemm_blocked<T, kVecs, kMode>(m, n, k, a, 1, 0, b, rsb, csb, c, ldc, false, nullptr, a_columns);
}

// dst (cols x rows, contiguous) = src (rows x cols, rows ld_src apart) transposed: the GEMM's packing
// of one panel `rows` wide (register-block transposes), for callers that lay out an operand once
// (conv.cpp's channels-last input; kernel_table.h: TransposeKernel).
template <class T>
void transpose(int64_t rows, int64_t cols, const T* src, int64_t ld_src, T* dst) {
  gemm_detail::pack<T>(rows, cols, src, ld_src, 1, rows, dst);
}

// B (k x n, read through its strides) packed into gemm_packed_b's panels.
template <class T>
void gemm_pack_b(int64_t k, int64_t n, const T* b, int64_t rsb, int64_t csb, T* panels) {
  gemm_detail::pack<T>(n, k, b, csb, rsb, gemm_detail::tile_cols<T>(), panels);
}

// The FMA peak the GEMM is measured against (the bench's "% of peak"): `iterations` steps of as many
// independent chains as the micro-kernel has accumulators, on registers only (x -> x * 0.999 + 0.001
// stays near 1: no overflow, no denormals). Returns the flops done.
template <class T>
double fma_loop(int64_t iterations) {
  using V = Vec<T>;
  using gemm_detail::kRows, gemm_detail::kVecs;
  V acc[kRows][kVecs];  // the micro-kernel's shape, so the compiler unrolls it the same way
  for (int i = 0; i < kRows; ++i)
    for (int v = 0; v < kVecs; ++v) acc[i][v] = V::broadcast(T(i + v));
  const V scale = V::broadcast(T(0.999)), shift = V::broadcast(T(0.001));
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < kRows; ++i)
      for (int v = 0; v < kVecs; ++v) acc[i][v] = fma(acc[i][v], scale, shift);
  V total = V::broadcast(T(0));
  for (int i = 0; i < kRows; ++i)
    for (int v = 0; v < kVecs; ++v) total = total + acc[i][v];
  T lanes[V::kWidth];
  total.store(lanes);
  volatile T sink = lanes[0];  // keeps the loop from being optimized away
  (void)sink;
  return 2.0 * kRows * kVecs * V::kWidth * double(iterations);
}

template <class T>
void fill_gemm(TypedKernels<T>& k) {
  k.gemm = gemm<T>;
  k.gemm_packed_b = gemm_packed_b<T>;
  k.gemm_offset_b = gemm_offset_b<T>;
  k.gemm_offset_a = gemm_offset_a<T>;
  k.transpose = transpose<T>;
  k.gemm_pack_b = gemm_pack_b<T>;
  k.gemm_blocks = gemm_detail::blocks<T>();
  k.fma_loop = fma_loop<T>;
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
