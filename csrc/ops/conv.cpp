// 2-D convolution, and 1-D as its height-1 case (3-D input and weight), lowered onto the packed GEMM as Caffe's im2col:
// per block of images and group, the receptive fields are unfolded into a column matrix cols
// (K x images * P, K = in-channels-per-group * kh * kw, P = output pixels, the images' pixels side by
// side) and out = W_g (Og x K) @ cols, the forward writing cols straight into the GEMM's packed
// panels (panel_columns: no column matrix for the GEMM to copy again). The backward: grad_weight_g
// = the sum over blocks of G_g (Og x images * P) @ cols^T, grad_input = col2im(W_g^T @ G_g) (or
// at stride 1, where it pays, the forward pass of a convolution of G by the flipped weight: see
// input_grad_is_convolution), and grad_bias the sum of G over images and pixels.
// Where the operand is a set of shifted runs of the input, the GEMM reads it in place through
// offsets instead (implicit GEMM, no column matrix at all): a stride-1 forward (conv_forward_implicit:
// the input rows zero-padded, B's rows offsets into them) and the weight gradient of 8+ input
// channels per group (channels_last_product: a zero-padded channels-last copy, A's columns offsets
// into it). Both compute every element in the same chain as the unfolded product.
//
// Threads split the batch into whole blocks of images. Every output element is computed by one
// thread in an order that does not depend on how many there are: a forward or input-gradient
// element is one GEMM chain (whose bits do not depend on the blocking), and the weight gradient's
// per-block products, over blocks fixed by the geometry alone, are summed block by block (0, 1,
// 2, ...) after each wave of kBlocksPerWave blocks, so its bits do not depend on the thread count
// either. The argument checks with PyTorch's messages are in the
// shared Python layer (nn/functional.py, which sees the user's shapes); the checks here only keep
// direct calls from reading out of bounds.
#include <algorithm>
#include <cstring>
#include <vector>

#include "autograd/node.h"
#include "core/shape.h"
#include "kernels/kernel_table.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

namespace {

// The sizes of one convolution: input (n, c, h, w), weight (o, c / groups, kh, kw), output (n, o, oh, ow).
struct ConvGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0, o = 0, kh = 0, kw = 0, oh = 0, ow = 0, groups = 1;
  ConvParams p{};
  int64_t cg() const { return c / groups; }  // input channels per group
  int64_t og() const { return o / groups; }  // output channels per group
  int64_t k() const { return cg() * kh * kw; }  // the GEMM's inner dimension
  int64_t pixels() const { return oh * ow; }
  // A 1x1 kernel, stride 1, no padding: an image's group slice is already its column matrix.
  bool pointwise() const {
    return kh == 1 && kw == 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.padding[0] == 0 && p.padding[1] == 0;
  }
};

ConvGeometry geometry(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& p) {
  const int64_t dims = input->dim();
  if ((dims != 3 && dims != 4) || weight->dim() != dims)
    throw RuntimeError("convolution: expected 3-D or 4-D input and weight of the same rank");
  if (dims == 3 && (p.stride[0] != 1 || p.padding[0] != 0 || p.dilation[0] != 1))
    throw RuntimeError("convolution: a 1-D convolution's height stride, padding and dilation must be 1, 0, 1");
  if (input->dtype != DType::Float32 && input->dtype != DType::Float64)
    throw not_implemented_for("slow_conv2d_cpu", input->dtype);
  if (weight->dtype != input->dtype || (bias && bias->dtype != input->dtype))
    throw RuntimeError("convolution: input, weight and bias must have the same dtype");
  // A 1-D convolution is the 2-D one of a height-1 image and kernel.
  const int64_t h = dims == 4 ? input->shape[2] : 1, kh = dims == 4 ? weight->shape[2] : 1;
  ConvGeometry g;
  g.n = input->shape[0], g.c = input->shape[1], g.h = h, g.w = input->shape.back();
  g.o = weight->shape[0], g.kh = kh, g.kw = weight->shape.back(), g.groups = p.groups, g.p = p;
  // Bounded so that no size computed from them overflows int64 (PyTorch's checks are in Python).
  constexpr int64_t kMaxParam = int64_t(1) << 31;
  for (int d = 0; d < 2; ++d)
    if (p.stride[d] < 1 || p.padding[d] < 0 || p.dilation[d] < 1 || p.stride[d] > kMaxParam ||
        p.padding[d] > kMaxParam || p.dilation[d] > kMaxParam)
      throw RuntimeError("convolution: invalid stride, padding or dilation");
  if (g.groups < 1 || g.o % g.groups != 0 || g.c % g.groups != 0 || weight->shape[1] != g.c / g.groups)
    throw RuntimeError("convolution: weight and input channels do not match groups");
  if (bias && (bias->dim() != 1 || bias->shape[0] != g.o)) throw RuntimeError("convolution: bias size mismatch");
  g.oh = (g.h + 2 * p.padding[0] - p.dilation[0] * (g.kh - 1) - 1) / p.stride[0] + 1;
  g.ow = (g.w + 2 * p.padding[1] - p.dilation[1] * (g.kw - 1) - 1) / p.stride[1] + 1;
  // An empty batch may have an empty output (a transposed convolution of an empty image, computed as
  // the convolution of its output).
  const int64_t min_extent = g.n == 0 ? 0 : 1;
  if (g.oh < min_extent || g.ow < min_extent || g.kh < 1 || g.kw < 1)
    throw RuntimeError("convolution: output size is too small");
  return g;
}

// Calls f(row, plane, y0, x0, oy0, oy1, lo, hi) for every (channel, ky, kx) row of a K x P column
// matrix of one group of one image, row r starting at cols + r * ld: `plane` points at that
// channel's input plane, and the row's entry (oy, ox) reads input (y0 + oy * stride_y, x0 + ox *
// stride_x), inside the image for oy in [oy0, oy1) and ox in [lo, hi) only. The one traversal
// shared by im2col and col2im, so both walk the same positions in the same order; the in-bounds
// ranges are computed once per row, so the inner loops are plain strided copies (contiguous at
// stride 1).
template <class T, class Column, class F>
void for_each_column_row(const ConvGeometry& g, Column* cols, int64_t ld, T* image, F&& f) {
  const int64_t sy = g.p.stride[0], sx = g.p.stride[1];
  // The output positions o in [0, out) whose input x0 + o * s is in [0, in).
  auto inside = [](int64_t x0, int64_t s, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
    lo = std::min(out, x0 >= 0 ? 0 : (-x0 + s - 1) / s);
    hi = std::max(lo, std::min(out, in - x0 <= 0 ? 0 : (in - x0 + s - 1) / s));
  };
  for (int64_t ch = 0; ch < g.cg(); ++ch)
    for (int64_t ky = 0; ky < g.kh; ++ky)
      for (int64_t kx = 0; kx < g.kw; ++kx, cols += ld) {
        const int64_t x0 = kx * g.p.dilation[1] - g.p.padding[1], y0 = ky * g.p.dilation[0] - g.p.padding[0];
        int64_t lo, hi, oy0, oy1;
        inside(x0, sx, g.w, g.ow, lo, hi);
        inside(y0, sy, g.h, g.oh, oy0, oy1);
        f(cols, image + ch * g.h * g.w, y0, x0, oy0, oy1, lo, hi);
      }
}

// Rows of an image are short (a 12-wide row of 5x5 taps is 10 additions): a loop whose trip count
// the compiler cannot know spends more on its vector prologue and scalar tail than on the work.
// add_row moves fixed-size chunks of kChunk elements (32 bytes) instead.
template <class T>
constexpr int64_t kChunk = 32 / int64_t(sizeof(T));

// dst[0, n) += src[0, n): whole chunks (each element added once, so no overlap), then the rest.
template <class T>
inline void add_row(const T* src, T* dst, int64_t n) {
  constexpr int64_t C = kChunk<T>;
  int64_t i = 0;
  for (; i + C <= n; i += C) {
    T a[C], b[C];
    std::memcpy(a, dst + i, sizeof a);
    std::memcpy(b, src + i, sizeof b);
    for (int64_t j = 0; j < C; ++j) a[j] += b[j];
    std::memcpy(dst + i, a, sizeof a);
  }
  for (; i < n; ++i) dst[i] += src[i];
}

// Stride 1 with the output as wide as the input ('same' width, as 3x3 padding 1): the in-image
// part of a (channel, ky, kx) row of cols is the input plane shifted by a constant, so it is one
// contiguous run across all output rows (a small image's rows are each too short to copy well).
// Calls f(row, plane, shift, oy0, oy1, lo, hi) for each (channel, ky, kx) row of one group: entry
// j = oy * ow + ox of `row` reads plane[j + shift] when oy is in [oy0, oy1) and ox in [lo, hi),
// and is padding otherwise.
bool joined_rows(const ConvGeometry& g) { return g.p.stride[0] == 1 && g.p.stride[1] == 1 && g.ow == g.w; }

template <class T, class Row, class F>
void for_each_joined_row(const ConvGeometry& g, Row* cols, int64_t ld, T* image, F&& f) {
  for (int64_t ch = 0; ch < g.cg(); ++ch)
    for (int64_t ky = 0; ky < g.kh; ++ky)
      for (int64_t kx = 0; kx < g.kw; ++kx, cols += ld) {
        const int64_t x0 = kx * g.p.dilation[1] - g.p.padding[1], y0 = ky * g.p.dilation[0] - g.p.padding[0];
        const int64_t lo = std::clamp<int64_t>(-x0, 0, g.ow), hi = std::clamp<int64_t>(g.w - x0, lo, g.ow);
        const int64_t oy0 = std::clamp<int64_t>(-y0, 0, g.oh), oy1 = std::clamp<int64_t>(g.h - y0, oy0, g.oh);
        // (oy + y0) * w + x0 + ox = j + y0 * w + x0, as ow == w
        f(cols, image + ch * g.h * g.w, y0 * g.w + x0, oy0, oy1, lo, hi);
      }
}

// The entries of output rows [oy0, oy1) of a joined row outside columns [lo, hi) (the ones its
// contiguous run passes over at the rows' edges) set to zero.
template <class T>
void zero_row_edges(const ConvGeometry& g, T* row, int64_t oy0, int64_t oy1, int64_t lo, int64_t hi) {
  if (lo == 0 && hi == g.ow) return;
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    T* r = row + oy * g.ow;
    for (int64_t ox = 0; ox < lo; ++ox) r[ox] = T(0);
    for (int64_t ox = hi; ox < g.ow; ++ox) r[ox] = T(0);
  }
}

// cols (K x count * span, rows ld apart, span = (oe - ob) * ow) = the receptive fields of output
// rows [ob, oe) of one group of `count` images side by side (image b's first channel at images + b *
// image_stride, its columns from b * span): all of an image's rows, or a range of a large image's,
// small enough that the GEMM's operands stay in L2. after_row() is called as each row is done.
template <class T, class AfterRow>
void im2col(const ConvGeometry& g, const T* images, int64_t image_stride, int64_t count, T* cols, int64_t ld,
            int64_t ob, int64_t oe, AfterRow&& after_row) {
  CopyBlockKernel<T> copy_block = kernels().of<T>().copy_block;
  // Each callback gets the in-image output rows [oy0, oy1) of its (channel, ky, kx) row, clamped
  // here to [ob, oe); the entry of output position j = oy * ow + ox is row[j - ob * ow].
  const int64_t base = ob * g.ow, span = (oe - ob) * g.ow;
  auto clamp_rows = [&](int64_t& oy0, int64_t& oy1) {
    oy0 = std::clamp(oy0, ob, oe);
    oy1 = std::clamp(oy1, oy0, oe);
  };
  if (joined_rows(g)) {
    for_each_joined_row(g, cols, ld, images,
                        [&](T* row, const T* plane, int64_t shift, int64_t oy0, int64_t oy1, int64_t lo, int64_t hi) {
                          clamp_rows(oy0, oy1);
                          const int64_t begin = oy0 * g.ow + lo, end = (oy1 - 1) * g.ow + hi;
                          for (int64_t b = 0; b < count; ++b, row += span, plane += image_stride) {
                            std::fill(row, row + (oy0 * g.ow - base), T(0));
                            std::fill(row + (oy1 * g.ow - base), row + span, T(0));
                            if (oy1 > oy0 && hi > lo)
                              copy_block(1, end - begin, plane + (begin + shift), 0, row + (begin - base), 0);
                            zero_row_edges(g, row, oy0 - ob, oy1 - ob, lo, hi);
                          }
                          after_row();
                        });
    return;
  }
  const int64_t sy = g.p.stride[0], sx = g.p.stride[1];
  for_each_column_row(
      g, cols, ld, images,
      [&](T* row, const T* plane, int64_t y0, int64_t x0, int64_t oy0, int64_t oy1, int64_t lo, int64_t hi) {
        clamp_rows(oy0, oy1);
        const bool inside = oy1 > oy0 && hi > lo;
        for (int64_t b = 0; b < count; ++b, row += span, plane += image_stride) {
          std::fill(row, row + (oy0 * g.ow - base), T(0));
          std::fill(row + (oy1 * g.ow - base), row + span, T(0));
          zero_row_edges(g, row, oy0 - ob, oy1 - ob, lo, hi);
          if (!inside) continue;
          const T* first = plane + (y0 + oy0 * sy) * g.w + x0 + lo * sx;
          T* column = row + (oy0 * g.ow - base) + lo;
          // All in-image rows of this (channel, ky, kx) in one call: an output row of a
          // small image is too short to pay for a call of its own.
          if (sx == 1) {
            copy_block(oy1 - oy0, hi - lo, first, sy * g.w, column, g.ow);
            continue;
          }
          for (int64_t oy = 0; oy < oy1 - oy0; ++oy)
            for (int64_t ox = 0; ox < hi - lo; ++ox) column[oy * g.ow + ox] = first[oy * sy * g.w + ox * sx];
        }
        after_row();
      });
}

template <class T>
void im2col(const ConvGeometry& g, const T* images, int64_t image_stride, int64_t count, T* cols, int64_t ld,
            int64_t ob, int64_t oe) {
  im2col(g, images, image_stride, count, cols, ld, ob, oe, [] {});
}

// image += the column matrix (rows ld apart) folded back onto the input positions it was read from
// (fixed order). Joined rows have their padding entries zeroed first (cols is scratch), so that one
// contiguous run adds them: zeros, onto the edges of the neighbouring rows.
template <class T>
void col2im(const ConvGeometry& g, T* cols, int64_t ld, T* image) {
  if (joined_rows(g)) {
    for_each_joined_row(g, cols, ld, image,
                        [&](T* row, T* plane, int64_t shift, int64_t oy0, int64_t oy1, int64_t lo, int64_t hi) {
                          if (oy1 == oy0 || hi == lo) return;
                          const int64_t begin = oy0 * g.ow + lo, end = (oy1 - 1) * g.ow + hi;
                          zero_row_edges(g, row, oy0, oy1, lo, hi);
                          add_row(row + begin, plane + (begin + shift), end - begin);
                        });
    return;
  }
  const int64_t sy = g.p.stride[0], sx = g.p.stride[1];
  for_each_column_row(
      g, cols, ld, image,
      [&](const T* row, T* plane, int64_t y0, int64_t x0, int64_t oy0, int64_t oy1, int64_t lo, int64_t hi) {
        for (int64_t oy = oy0; oy < oy1; ++oy) {
          const T* column = row + oy * g.ow;
          T* input_row = plane + (y0 + oy * sy) * g.w;
          if (sx == 1) add_row(column + lo, input_row + x0 + lo, hi - lo);
          else
            for (int64_t ox = lo; ox < hi; ++ox) input_row[x0 + ox * sx] += column[ox];
        }
      });
}

// One growing buffer per thread and role, so each call's column matrices reuse pages already
// mapped (a fresh vector per call zero-filled and faulted in its pages: measured a third of a
// small forward). Those past kRetainedScratchBytes are freed when their pass ends (parallel_over),
// so one large convolution does not keep its column matrix on every thread.
enum class Scratch { Columns, Block, Row, GradTransposed };
constexpr size_t kRetainedScratchBytes = 4 << 20;

template <class T, Scratch Role>
std::vector<T>& scratch_buffer() {
  thread_local std::vector<T> buffer;
  return buffer;
}

template <class T, Scratch Role>
T* scratch(int64_t count) {
  std::vector<T>& buffer = scratch_buffer<T, Role>();
  if (int64_t(buffer.size()) < count) buffer.resize(count);
  return buffer.data();
}

template <class T>
void trim_scratch() {
  for (std::vector<T>* buffer : {&scratch_buffer<T, Scratch::Columns>(), &scratch_buffer<T, Scratch::Block>(),
                                 &scratch_buffer<T, Scratch::Row>(), &scratch_buffer<T, Scratch::GradTransposed>()})
    if (buffer->size() * sizeof(T) > kRetainedScratchBytes) std::vector<T>().swap(*buffer);
}

// fn(lo, hi) over chunks of [begin, end), split across threads when `parallel`; each thread's
// large scratch buffers are freed after its chunk.
template <class T, class F>
void parallel_over(int64_t begin, int64_t end, bool parallel, F&& fn) {
  parallel_for(begin, end, parallel ? 1 : end - begin, [&](int64_t lo, int64_t hi) {
    fn(lo, hi);
    trim_scratch<T>();
  });
}

// A block of images is lowered onto one GEMM, their pixels side by side as the columns of one
// K x (images * P) matrix: a small image alone would leave the GEMM's column panels part empty and
// pay its per-call costs for little work. A block aims at kBlockColumns columns with its column
// matrix at most kBlockBytes (half of a 1 MiB L2). A pointwise kernel's operand is the image
// itself, so its blocks are single images.
constexpr int64_t kBlockColumns = 1024;
constexpr int64_t kBlockBytes = 1 << 19;
template <class T>
int64_t images_per_block(const ConvGeometry& g) {
  if (g.pointwise() || g.n == 0 || g.k() == 0) return 1;  // k == 0: no input channels
  const int64_t by_columns = (kBlockColumns + g.pixels() - 1) / g.pixels();
  const int64_t by_bytes = kBlockBytes / (g.k() * g.pixels() * int64_t(sizeof(T)));
  return std::clamp<int64_t>(std::min(by_columns, by_bytes), 1, g.n);
}

// Whole blocks per thread once the multiply-adds make waking the pool worth it.
constexpr double kParallelConvWork = 1 << 18;
bool parallel_worth_it(const ConvGeometry& g) {
  return double(g.o) * double(g.k()) * double(g.pixels()) * double(g.n) >= kParallelConvWork;
}

// A block small enough that every thread gets one: for the passes whose bits do not depend on the
// blocking (each element is one GEMM chain, or one image's fixed col2im order). Except for images of
// one output pixel: a block of one such image is a one-column product, which the GEMM computes in
// gemv's chains (gemm_impl.h), so their blocks follow the geometry alone (a batch of 2 at 1 and 2
// threads gave input gradients 2e-5 apart).
template <class T>
int64_t images_per_thread_block(const ConvGeometry& g) {
  const int64_t threads = parallel_worth_it(g) && g.pixels() > 1 ? get_num_threads() : 1;
  return std::max<int64_t>(1, std::min(images_per_block<T>(g), (g.n + threads - 1) / threads));
}

// Calls f(first, count) for the blocks of `per_block` images, blocks split across threads.
template <class T, class F>
void for_each_block(const ConvGeometry& g, int64_t per_block, F&& f) {
  const int64_t blocks = (g.n + per_block - 1) / per_block;
  parallel_over<T>(0, blocks, parallel_worth_it(g), [&](int64_t lo, int64_t hi) {
    for (int64_t blk = lo; blk < hi; ++blk) f(blk * per_block, std::min(per_block, g.n - blk * per_block));
  });
}

// The GEMM operand of group `grp` of `count` images from `first`: their receptive fields unfolded
// side by side into a K x (count * P) matrix (returned with its row stride in ld), or for a
// pointwise kernel (count 1) the image itself.
template <class T>
const T* block_columns(const ConvGeometry& g, const T* in, int64_t first, int64_t count, int64_t grp, int64_t& ld) {
  const int64_t image_stride = g.c * g.h * g.w;
  const T* image = in + first * image_stride + grp * g.cg() * g.h * g.w;
  ld = count * g.pixels();
  if (g.pointwise()) return image;
  T* cols = scratch<T, Scratch::Columns>(g.k() * ld);
  im2col(g, image, image_stride, count, cols, ld, 0, g.oh);
  return cols;
}

// The same columns (output rows [ob, oe) of `count` images, group `grp`) written straight into the
// GEMM's packed panels, gemm_packed_b's B: each row unfolded into a scratch row (in L1), zero-padded
// to whole panels, then copied to its place in every panel. The column matrix (in L2) that the
// GEMM would copy into its panels again is never made.
template <class T>
const T* panel_columns(const ConvGeometry& g, const T* in, int64_t first, int64_t count, int64_t grp, int64_t ob,
                       int64_t oe) {
  const int64_t image_stride = g.c * g.h * g.w, k = g.k(), nr = kernels().of<T>().gemm_blocks.nr;
  const int64_t n = count * (oe - ob) * g.ow, panels = (n + nr - 1) / nr;
  T* packed = scratch<T, Scratch::Columns>(panels * nr * k);
  T* row = scratch<T, Scratch::Row>(panels * nr);
  std::fill(row + n, row + panels * nr, T(0));
  CopyBlockKernel<T> copy_block = kernels().of<T>().copy_block;
  T* panel_row = packed;
  im2col(g, in + first * image_stride + grp * g.cg() * g.h * g.w, image_stride, count, row, 0, ob, oe,
         [&] { copy_block(panels, nr, row, nr, (panel_row += nr) - nr, nr * k); });
  return packed;
}

// Group `grp` of the output gradient of `count` images from `first` as one Og x (count * P) matrix
// (returned with its row stride in ld): gathered side by side, or read in place for one image.
template <class T>
const T* block_grad(const ConvGeometry& g, const T* grad, int64_t first, int64_t count, int64_t grp, int64_t& ld) {
  const int64_t p = g.pixels();
  const T* src = grad + (first * g.o + grp * g.og()) * p;
  if (count == 1) {
    ld = p;
    return src;
  }
  ld = count * p;
  T* block = scratch<T, Scratch::Block>(g.og() * ld);
  for (int64_t b = 0; b < count; ++b)
    for (int64_t oc = 0; oc < g.og(); ++oc) std::copy_n(src + (b * g.o + oc) * p, p, block + oc * ld + b * p);
  return block;
}

// Depthwise convolutions (every group one input channel, as MobileNet's 3x3 layers: groups ==
// channels > 1) skip the lowering: K is only kh * kw, too short a GEMM. They run the direct kernels
// of depthwise_impl.h plane by plane, on each input plane padded with zeros into a scratch buffer.
bool depthwise(const ConvGeometry& g) { return g.groups > 1 && g.groups == g.c; }

DepthwisePlane depthwise_plane(const ConvGeometry& g) {
  return {
      g.oh, g.ow, g.kh, g.kw, g.p.stride[0], g.p.stride[1], g.p.dilation[0], g.p.dilation[1], g.w + 2 * g.p.padding[1]};
}

// The padded plane's size: every row and column a tap reads, with the padding on both sides.
int64_t padded_plane_size(const ConvGeometry& g) { return (g.h + 2 * g.p.padding[0]) * (g.w + 2 * g.p.padding[1]); }

// padded = the plane (h x w) inside a border of zeros (padding rows and columns on each side).
template <class T>
void pad_plane(const ConvGeometry& g, const T* plane, T* padded) {
  const int64_t ld = g.w + 2 * g.p.padding[1];
  std::fill(padded, padded + padded_plane_size(g), T(0));
  for (int64_t y = 0; y < g.h; ++y)
    std::copy_n(plane + y * g.w, g.w, padded + (y + g.p.padding[0]) * ld + g.p.padding[1]);
}

// Threads split the (image, channel) planes.
template <class T>
void depthwise_forward(const ConvGeometry& g, const T* in, const T* w, const T* b, T* out) {
  DepthwiseKernel<T> kernel = kernels().of<T>().depthwise_forward;
  const DepthwisePlane plane = depthwise_plane(g);
  const int64_t p = g.pixels(), taps = g.kh * g.kw;
  parallel_over<T>(0, g.n * g.c, parallel_worth_it(g), [&](int64_t lo, int64_t hi) {
    T* padded = scratch<T, Scratch::Columns>(padded_plane_size(g));
    for (int64_t nc = lo; nc < hi; ++nc) {
      pad_plane(g, in + nc * g.h * g.w, padded);
      for (int64_t oc = nc % g.c * g.og(); oc < (nc % g.c + 1) * g.og(); ++oc) {
        T* dst = out + (nc / g.c * g.o + oc) * p;
        kernel(plane, padded, w + oc * taps, dst);
        if (b)
          for (int64_t q = 0; q < p; ++q) dst[q] += b[oc];
      }
    }
  });
}

template <class T>
void depthwise_grad_input(const ConvGeometry& g, const T* grad, const T* w, T* gin) {
  DepthwiseKernel<T> kernel = kernels().of<T>().depthwise_grad_input;
  const DepthwisePlane plane = depthwise_plane(g);
  const int64_t p = g.pixels(), taps = g.kh * g.kw;
  parallel_over<T>(0, g.n * g.c, parallel_worth_it(g), [&](int64_t lo, int64_t hi) {
    T* padded = scratch<T, Scratch::Columns>(padded_plane_size(g));
    for (int64_t nc = lo; nc < hi; ++nc) {
      std::fill(padded, padded + padded_plane_size(g), T(0));
      for (int64_t oc = nc % g.c * g.og(); oc < (nc % g.c + 1) * g.og(); ++oc)
        kernel(plane, grad + (nc / g.c * g.o + oc) * p, w + oc * taps, padded);
      for (int64_t y = 0; y < g.h; ++y)
        std::copy_n(padded + (y + g.p.padding[0]) * plane.ld + g.p.padding[1], g.w, gin + (nc * g.h + y) * g.w);
    }
  });
}

// Threads split the channels; each output channel's lanes run over the images in order, then are
// summed (in double, a fixed order) once.
template <class T>
void depthwise_grad_weight(const ConvGeometry& g, const T* grad, const T* in, T* gw) {
  DepthwiseKernel<T> kernel = kernels().of<T>().depthwise_grad_weight;
  SumKernel<T> sum_kernel = kernels().of<T>().sum;
  const DepthwisePlane plane = depthwise_plane(g);
  const int64_t p = g.pixels(), taps = g.kh * g.kw, lanes = taps * g.ow;
  parallel_over<T>(0, g.c, parallel_worth_it(g), [&](int64_t lo, int64_t hi) {
    T* padded = scratch<T, Scratch::Columns>(padded_plane_size(g));
    T* acc = scratch<T, Scratch::Block>(g.og() * lanes);
    for (int64_t ch = lo; ch < hi; ++ch) {
      std::fill(acc, acc + g.og() * lanes, T(0));
      for (int64_t i = 0; i < g.n; ++i) {
        pad_plane(g, in + (i * g.c + ch) * g.h * g.w, padded);
        for (int64_t j = 0; j < g.og(); ++j)
          kernel(plane, grad + (i * g.o + ch * g.og() + j) * p, padded, acc + j * lanes);
      }
      for (int64_t j = 0; j < g.og(); ++j)
        for (int64_t tap = 0; tap < taps; ++tap)
          gw[(ch * g.og() + j) * taps + tap] = static_cast<T>(sum_kernel(acc + j * lanes + tap * g.ow, g.ow));
    }
  });
}

// An image of more than kRangeColumns output pixels is lowered in ranges of whole output rows of
// about that many, each range one task for the threads: the range's column matrix and the GEMM's
// packed copy of it then stay in L2 together, where a whole 32x32 image's (K x 1024 each) did not
// (b8 3x3 16 -> 16 channels on 32x32: 420 us whole images, 363 / 346 / 350 us in ranges of 128 /
// 256 / 512 columns). Ranges also give two threads work at batch 1.
constexpr int64_t kRangeColumns = 256;

// The output rows per range of a large image; all of them for an image with few pixels or a small
// column matrix (a quarter of a block's bytes: 1 -> 6 channels 5x5 on 28x28, b64, 240 us in ranges,
// 215 us as blocks of whole images).
template <class T>
int64_t rows_per_range(const ConvGeometry& g) {
  const bool fits = g.pixels() <= kRangeColumns || g.k() * g.pixels() * int64_t(sizeof(T)) <= kBlockBytes / 4;
  return fits ? g.oh : std::max<int64_t>(1, kRangeColumns / g.ow);
}

template <class T>
void conv_forward_in_ranges(const ConvGeometry& g, const T* in, const T* w, const T* b, T* out) {
  GemmPackedBKernel<T> gemm = kernels().of<T>().gemm_packed_b;
  const int64_t p = g.pixels(), k = g.k();
  const int64_t rows = rows_per_range<T>(g), ranges = (g.oh + rows - 1) / rows;
  parallel_over<T>(0, g.n * ranges, parallel_worth_it(g), [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t img = task / ranges, ob = task % ranges * rows, oe = std::min(g.oh, ob + rows);
      const int64_t columns = (oe - ob) * g.ow;
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        const T* panels = panel_columns(g, in, img, 1, grp, ob, oe);
        T* dst = out + (img * g.o + grp * g.og()) * p + ob * g.ow;
        gemm(g.og(), columns, k, w + grp * g.og() * k, k, 1, panels, dst, p);
        if (b)
          for (int64_t oc = 0; oc < g.og(); ++oc)
            for (int64_t q = 0; q < columns; ++q) dst[oc * p + q] += b[grp * g.og() + oc];
      }
    }
  });
}

// A stride-1 convolution runs as an implicit GEMM: its input rows zero-padded on both sides into a
// scratch buffer (rows wp = w + 2 * padding apart), every (channel, ky, kx) row of the column matrix
// is one contiguous run of that buffer from a fixed offset, so the GEMM reads B's rows in place
// (gemm_offset_b) and nothing is unfolded. Where an output row is a whole number of vectors (32x32
// images), the GEMM's columns are the output pixels, read as runs of ow along the padded rows, and
// its product is the output itself. Otherwise they are the output pixels on the padded grid, j =
// oy * wp + ox: the wp - ow columns at the end of each output row read across the border and are
// dropped when the product is copied out (with the bias added). Taken when those dropped
// columns are at most an eighth of the grid and an image has enough pixels for the GEMM's tiles
// (b8 3x3 on 32x32: 34-wide rows of which 32 are kept); others (5x5 unpadded on 14x14 keeps 10
// of 14 columns) unfold.
int64_t padded_width(const ConvGeometry& g) { return g.w + 2 * g.p.padding[1]; }

bool implicit_gemm(const ConvGeometry& g) {
  return g.p.stride[0] == 1 && g.p.stride[1] == 1 && !g.pointwise() && g.pixels() >= kRangeColumns &&
         8 * g.ow >= 7 * padded_width(g);
}

// The output rows per task of the implicit GEMM: about kImplicitColumns of the padded grid's
// columns, so that the padded rows and the product stay in L2 with the weight (a 32x32 image whole:
// 17 tiles of 64 columns); fewer when the batch has fewer images than threads, so each gets work.
// Each element is one chain whatever the ranges, so the bits do not depend on them.
constexpr int64_t kImplicitColumns = 1088;
int64_t implicit_rows_per_range(const ConvGeometry& g) {
  const int64_t threads = parallel_worth_it(g) ? get_num_threads() : 1;
  const int64_t ranges_per_image = (threads + g.n - 1) / std::max<int64_t>(g.n, 1);
  const int64_t by_columns = std::clamp<int64_t>(kImplicitColumns / padded_width(g), 1, g.oh);
  return std::min(by_columns, (g.oh + ranges_per_image - 1) / ranges_per_image);
}

// padded (cg planes of `rows` x wp, then `slack` zeros) = input rows [first - padding, ...) of one
// group's planes (plane h x w each) with zero borders: rows outside the image and padding columns.
template <class T>
void pad_rows(const ConvGeometry& g, const T* planes, int64_t first, int64_t rows, int64_t slack, T* padded) {
  const int64_t wp = padded_width(g), pw = g.p.padding[1];
  const int64_t y0 = first - g.p.padding[0];  // the input row of padded row 0
  const int64_t r0 = std::clamp<int64_t>(-y0, 0, rows), r1 = std::clamp<int64_t>(g.h - y0, r0, rows);
  CopyBlockKernel<T> copy_block = kernels().of<T>().copy_block;
  for (int64_t ch = 0; ch < g.cg(); ++ch, padded += rows * wp) {
    std::fill(padded, padded + r0 * wp, T(0));
    for (int64_t r = r0; r < r1; ++r) {
      std::fill(padded + r * wp, padded + r * wp + pw, T(0));
      std::fill(padded + r * wp + pw + g.w, padded + (r + 1) * wp, T(0));
    }
    copy_block(r1 - r0, g.w, planes + ch * g.h * g.w + (y0 + r0) * g.w, g.w, padded + r0 * wp + pw, wp);
    std::fill(padded + r1 * wp, padded + rows * wp, T(0));
  }
  std::fill(padded, padded + slack, T(0));
}

template <class T>
void conv_forward_implicit(const ConvGeometry& g, const T* in, const T* w, const T* b, T* out) {
  const TypedKernels<T>& kernel = kernels().of<T>();
  const int64_t p = g.pixels(), k = g.k(), og = g.og(), wp = padded_width(g), nr = kernel.gemm_blocks.nr;
  const int64_t rows = implicit_rows_per_range(g), ranges = (g.oh + rows - 1) / rows;
  const int64_t dy = g.p.dilation[0], dx = g.p.dilation[1];
  // Output rows of whole vectors: the GEMM's columns are the output pixels themselves, in runs of ow
  // along the padded rows (wp apart), so no tile computes the border columns and C is the output.
  const bool in_runs = g.ow % kernel.gemm_blocks.lanes == 0;
  parallel_over<T>(0, g.n * ranges, parallel_worth_it(g), [&](int64_t lo, int64_t hi) {
    std::vector<int64_t> b_rows(k);
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t img = task / ranges, ob = task % ranges * rows, oe = std::min(g.oh, ob + rows);
      const int64_t padded_rows = oe - ob + dy * (g.kh - 1), plane = padded_rows * wp;
      // the padded grid's columns, the last row's dropped columns not computed
      const int64_t columns = in_runs ? (oe - ob) * g.ow : (oe - ob - 1) * wp + g.ow;
      for (int64_t ch = 0, r = 0; ch < g.cg(); ++ch)
        for (int64_t ky = 0; ky < g.kh; ++ky)
          for (int64_t kx = 0; kx < g.kw; ++kx) b_rows[r++] = ch * plane + ky * dy * wp + kx * dx;
      T* padded = scratch<T, Scratch::Columns>(g.cg() * plane + nr);
      T* product = in_runs ? nullptr : scratch<T, Scratch::Block>(og * columns);
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        pad_rows(g, in + (img * g.c + grp * g.cg()) * g.h * g.w, ob, padded_rows, nr, padded);
        T* dst = out + (img * g.o + grp * og) * p + ob * g.ow;
        if (in_runs) {
          kernel.gemm_offset_b(og, columns, k, w + grp * og * k, k, 1, padded, b_rows.data(), g.ow, wp, dst, p);
          if (b)
            for (int64_t oc = 0; oc < og; ++oc)
              for (int64_t q = 0; q < columns; ++q) dst[oc * p + q] += b[grp * og + oc];
          continue;
        }
        kernel.gemm_offset_b(og, columns, k, w + grp * og * k, k, 1, padded, b_rows.data(), columns, columns, product,
                             columns);
        for (int64_t oc = 0; oc < og; ++oc) {
          const T bias = b ? b[grp * og + oc] : T(0);
          for (int64_t oy = 0; oy < oe - ob; ++oy) {
            const T* from = product + oc * columns + oy * wp;
            T* to = dst + oc * p + oy * g.ow;
            if (b)
              for (int64_t ox = 0; ox < g.ow; ++ox) to[ox] = from[ox] + bias;
            else std::copy_n(from, g.ow, to);
          }
        }
      }
    }
  });
}

template <class T>
void conv_forward(const ConvGeometry& g, const T* in, const T* w, const T* b, T* out) {
  if (depthwise(g)) return depthwise_forward(g, in, w, b, out);
  if (implicit_gemm(g)) return conv_forward_implicit(g, in, w, b, out);
  if (!g.pointwise() && rows_per_range<T>(g) < g.oh) return conv_forward_in_ranges(g, in, w, b, out);
  const TypedKernels<T>& kernel = kernels().of<T>();
  const int64_t p = g.pixels(), k = g.k();
  for_each_block<T>(g, images_per_thread_block<T>(g), [&](int64_t first, int64_t count) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      int64_t ld = count * p;
      // One image's product goes straight to the output; a block's to a buffer, then to its images.
      T* dst = out + (first * g.o + grp * g.og()) * p;
      T* product = count == 1 ? dst : scratch<T, Scratch::Block>(g.og() * ld);
      const T* weight = w + grp * g.og() * k;
      if (g.pointwise()) {
        const T* image = block_columns(g, in, first, count, grp, ld);
        kernel.gemm(g.og(), ld, k, weight, k, 1, image, ld, 1, product, ld);
      } else {
        kernel.gemm_packed_b(g.og(), ld, k, weight, k, 1, panel_columns(g, in, first, count, grp, 0, g.oh), product,
                             ld);
      }
      for (int64_t img = 0; img < count; ++img)
        for (int64_t oc = 0; oc < g.og(); ++oc) {
          const T* from = product + oc * ld + img * p;
          T* to = dst + (img * g.o + oc) * p;
          if (b)
            for (int64_t q = 0; q < p; ++q) to[q] = from[q] + b[grp * g.og() + oc];
          else if (from != to) std::copy_n(from, p, to);
        }
    }
  });
}

// The input gradient of a stride-1 convolution is itself a convolution: of the output gradient by
// the weight with its in and out channels swapped per group and flipped spatially, padded by
// dilation * (k - 1) - padding (seen from an input pixel, the output pixels its taps reached). It
// runs as the forward pass: im2col and one GEMM of depth out-channels * kh * kw per block, instead of
// W_g^T @ G_g (depth out-channels-per-group only, a poor GEMM shape) then a scatter-add col2im pass.
// Taken when it pays, measured on 3x3 and 5x5 kernels at batch 8: the GEMM's rows are the input
// channels per group (few of them against many output channels make a thin GEMM over a column
// matrix of out-channels * kh * kw rows), and that convolution runs over the input's pixels (an
// input much larger than the output, as an unpadded 5x5 on 14x14, multiplies the zero padding).
// Not when the padding exceeds dilation * (k - 1) (that convolution's padding would be negative).
bool input_grad_is_convolution(const ConvGeometry& g) {
  return g.p.stride[0] == 1 && g.p.stride[1] == 1 && g.p.padding[0] <= g.p.dilation[0] * (g.kh - 1) &&
         g.p.padding[1] <= g.p.dilation[1] * (g.kw - 1) && 2 * g.cg() >= g.og() && 4 * g.h * g.w <= 5 * g.pixels();
}

// The geometry of that convolution: input the output gradient (n, o, oh, ow), output (n, c, h, w).
ConvGeometry input_grad_geometry(const ConvGeometry& g) {
  ConvGeometry t = g;
  t.c = g.o, t.h = g.oh, t.w = g.ow, t.o = g.c, t.oh = g.h, t.ow = g.w;
  t.p.padding[0] = g.p.dilation[0] * (g.kh - 1) - g.p.padding[0];
  t.p.padding[1] = g.p.dilation[1] * (g.kw - 1) - g.p.padding[1];
  return t;
}

// Its weight (c, o / groups, kh, kw): flipped[grp * cg + ci][oj] = w[grp * og + oj][ci] rotated by 180 degrees.
template <class T>
std::vector<T> flipped_weight(const ConvGeometry& g, const T* w) {
  const int64_t taps = g.kh * g.kw;
  std::vector<T> flipped(g.o * g.cg() * taps);
  for (int64_t grp = 0; grp < g.groups; ++grp)
    for (int64_t oj = 0; oj < g.og(); ++oj)
      for (int64_t ci = 0; ci < g.cg(); ++ci) {
        const T* from = w + ((grp * g.og() + oj) * g.cg() + ci) * taps;
        T* to = flipped.data() + ((grp * g.cg() + ci) * g.og() + oj) * taps;
        for (int64_t tap = 0; tap < taps; ++tap) to[taps - 1 - tap] = from[tap];
      }
  return flipped;
}

// gin (every element written) = the input gradient: the convolution above, or per block of images
// and group, cols = W_g^T @ G_g folded back image by image onto the zeroed block.
template <class T>
void conv_grad_input(const ConvGeometry& g, const T* grad, const T* w, T* gin) {
  if (depthwise(g)) return depthwise_grad_input(g, grad, w, gin);
  if (input_grad_is_convolution(g))
    return conv_forward<T>(input_grad_geometry(g), grad, flipped_weight(g, w).data(), nullptr, gin);
  GemmKernel<T> gemm = kernels().of<T>().gemm;
  const int64_t p = g.pixels(), k = g.k(), image_stride = g.c * g.h * g.w;
  for_each_block<T>(g, images_per_thread_block<T>(g), [&](int64_t first, int64_t count) {
    std::fill(gin + first * image_stride, gin + (first + count) * image_stride, T(0));
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      int64_t ldg;
      const T* gg = block_grad(g, grad, first, count, grp, ldg);
      T* image = gin + first * image_stride + grp * g.cg() * g.h * g.w;
      const int64_t ld = count * p;
      T* cols = scratch<T, Scratch::Columns>(k * ld);
      // W_g^T (K x Og) read through W_g's strides: row stride 1, column stride K.
      gemm(k, ld, g.og(), w + grp * g.og() * k, 1, k, gg, ldg, 1, cols, ld);
      for (int64_t img = 0; img < count; ++img) col2im(g, cols + img * p, ld, image + img * image_stride);
    }
  });
}

// Blocks whose weight-gradient products are held at once before being summed in block order.
constexpr int64_t kBlocksPerWave = 8;

// The weight gradient reads the input in place, through per-pixel offsets, once a group has enough
// input channels (fewer unfold): each image's group planes are transposed into a zero-padded
// channels-last buffer (padded pixel by padded pixel, cg channels contiguous), where the channels
// that tap (ky, kx) meets at output pixel q are the cg elements from (position(q) + offset(ky, kx))
// * cg -- and at dilation 1 the kw taps of a kernel row the kw * cg elements from the row's first.
// So per kernel row (per tap when dilated) the block's product is those rows (A's columns read in
// place: gemm_offset_a) @ G_g^T, with no column matrix; each element the same chain over the
// block's pixels as the unfolded product's, so the same bits.
constexpr int64_t kChannelsLastMinChannels = 8;
// Not for a pointwise kernel: its operand is the image itself already (measured 1x1 64 -> 64 on 32x32, b8: 348 us
// read in place, 525-658 us through the channels-last copy).
bool weight_grad_channels_last(const ConvGeometry& g) { return g.cg() >= kChannelsLastMinChannels && !g.pointwise(); }

// part (K x Og, its rows tap-major: [ky][kx][ch]) = the product of group `grp` of `count` images from `first`.
template <class T>
void channels_last_product(const ConvGeometry& g, const T* grad, const T* in, int64_t first, int64_t count, int64_t grp,
                           T* part) {
  const int64_t cg = g.cg(), og = g.og(), p = g.pixels();
  const int64_t hp = g.h + 2 * g.p.padding[0], wp = padded_width(g), image = hp * wp * cg;
  const int64_t sy = g.p.stride[0], sx = g.p.stride[1], dy = g.p.dilation[0], dx = g.p.dilation[1];
  const TypedKernels<T>& kernel = kernels().of<T>();
  T* padded = scratch<T, Scratch::Columns>(count * image);
  std::fill(padded, padded + count * image, T(0));
  for (int64_t b = 0; b < count; ++b) {
    const T* planes = in + ((first + b) * g.c + grp * cg) * g.h * g.w;
    for (int64_t y = 0; y < g.h; ++y)
      kernel.transpose(cg, g.w, planes + y * g.w, g.h * g.w,
                       padded + b * image + ((y + g.p.padding[0]) * wp + g.p.padding[1]) * cg);
  }
  thread_local std::vector<int64_t> columns;
  columns.resize(count * p);
  for (int64_t b = 0, q = 0; b < count; ++b)
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) columns[q++] = (b * hp * wp + oy * sy * wp + ox * sx) * cg;
  // G_g^T (count * P x Og) laid out once, not transposed again by every call's packing (at 16, 32 or 64
  // output channels on AVX-512, a tile's width, it is the GEMM's packed panel itself).
  int64_t ldg;
  const T* gg = block_grad(g, grad, first, count, grp, ldg);
  T* grad_t = scratch<T, Scratch::GradTransposed>(count * p * og);
  kernel.transpose(og, count * p, gg, ldg, grad_t);
  const int64_t taps_per_call = dx == 1 ? g.kw : 1;  // kernel rows, or single taps
  for (int64_t ky = 0; ky < g.kh; ++ky)
    for (int64_t kx = 0; kx < g.kw; kx += taps_per_call)
      kernel.gemm_offset_a(taps_per_call * cg, og, count * p, padded + (ky * dy * wp + kx * dx) * cg, columns.data(),
                           grad_t, og, 1, part + (ky * g.kw + kx) * cg * og, og);
}

// grad_weight: per wave of blocks (of images_per_block images, fixed by the geometry alone), each
// block's product (channels_last_product's, or G_g @ cols^T) in parallel, then summed in block
// order: so the bits do not depend on the thread count. The sums run in the products' layout
// (contiguous adds), rearranged into gw once at the end.
template <class T>
void conv_grad_weight(const ConvGeometry& g, const T* grad, const T* in, T* gw) {
  if (depthwise(g)) return depthwise_grad_weight(g, grad, in, gw);
  GemmKernel<T> gemm = kernels().of<T>().gemm;
  const bool channels_last = weight_grad_channels_last(g);
  const int64_t k = g.k(), og = g.og(), per_block = g.o * k, images = images_per_block<T>(g);
  const int64_t blocks = (g.n + images - 1) / images;
  std::vector<T> partial(std::min(blocks, kBlocksPerWave) * per_block), total(per_block);
  for (int64_t first = 0; first < blocks; first += kBlocksPerWave) {
    const int64_t last = std::min(blocks, first + kBlocksPerWave);
    parallel_over<T>(first, last, parallel_worth_it(g), [&](int64_t lo, int64_t hi) {
      for (int64_t blk = lo; blk < hi; ++blk) {
        const int64_t count = std::min(images, g.n - blk * images);
        for (int64_t grp = 0; grp < g.groups; ++grp) {
          T* part = partial.data() + (blk - first) * per_block + grp * og * k;
          if (channels_last) {
            channels_last_product(g, grad, in, blk * images, count, grp, part);
            continue;
          }
          int64_t ld, ldg;
          const T* columns = block_columns(g, in, blk * images, count, grp, ld);
          const T* gg = block_grad(g, grad, blk * images, count, grp, ldg);
          // The transposed product cols (K x count*P) @ G_g^T (count*P x Og), G_g^T read through
          // G_g's strides: cols, the larger operand, is then read along its rows (measured faster
          // than G_g @ cols^T).
          gemm(k, og, ld, columns, ld, 1, gg, 1, ldg, part, og);
        }
      }
    });
    // Threads split the elements; each element's sum runs over the blocks in order.
    parallel_for(0, per_block, std::max<int64_t>(1, kParallelElements / (last - first)), [&](int64_t lo, int64_t hi) {
      for (int64_t blk = first; blk < last; ++blk) {
        const T* part = partial.data() + (blk - first) * per_block;
        if (blk == 0) std::copy(part + lo, part + hi, total.data() + lo);
        else
          for (int64_t e = lo; e < hi; ++e) total[e] += part[e];
      }
    });
  }
  const int64_t taps = g.kh * g.kw;
  for (int64_t grp = 0; grp < g.groups; ++grp) {
    const T* sum = total.data() + grp * og * k;  // K x Og (K tap-major, or channel-major)
    T* dst = gw + grp * og * k;  // Og x K
    for (int64_t oc = 0; oc < og; ++oc)
      for (int64_t r = 0; r < k; ++r)  // r = ch * taps + tap
        dst[oc * k + r] = sum[(channels_last ? r % taps * g.cg() + r / taps : r) * og + oc];
  }
}

// grad_bias[o] = the sum of G[:, o] over images (each image's pixels summed by the SIMD sum kernel,
// in double and a fixed order), rounded once. Threads split the channels.
template <class T>
void conv_grad_bias(const ConvGeometry& g, const T* grad, T* gb) {
  SumKernel<T> sum_kernel = kernels().of<T>().sum;
  const int64_t p = g.pixels(), per_channel = std::max<int64_t>(1, g.n * p);
  parallel_for(0, g.o, std::max<int64_t>(1, kParallelElements / per_channel), [&](int64_t lo, int64_t hi) {
    for (int64_t oc = lo; oc < hi; ++oc) {
      double sum = 0;
      for (int64_t i = 0; i < g.n; ++i) sum += sum_kernel(grad + (i * g.o + oc) * p, p);
      gb[oc] = static_cast<T>(sum);
    }
  });
}

struct ConvolutionNode : Node {
  ConvParams params;
};

// Records node N (the convolution's or the transposed one's) for out = op(input, weight, bias), with
// what its backward reads. Without a bias, its edge is empty (PyTorch's next_functions: (None, 0)).
template <class N>
void record_convolution(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const ConvParams& params) {
  if (auto* node = record<N>(out, {&input, &weight, &bias})) {
    node->save(input);
    node->save(weight);
    node->params = params;
  }
}

// Under create_graph: the gradients of convolution(input, weight, bias) as recorded ops (defined below).
GradList recorded_convolution_backward(const ConvolutionNode& node, const Tensor& grad);

}  // namespace

// Saves input and weight; edges to input, weight and bias (bias's edge is empty without one).
FG_NODE_FROM(ConvolutionBackward0, ConvolutionNode);
GradList ConvolutionBackward0::apply(GradList&& grads) {
  if (grad_enabled()) return recorded_convolution_backward(*this, grads[0]);
  Tensor input = dense(unpack(0)), weight = dense(unpack(1));
  Tensor grad = dense(grads[0]);
  Tensor no_bias;
  ConvGeometry g = geometry(input, weight, no_bias, params);
  GradList out(3);
  dispatch_floating(input->dtype, [&](auto tag) {
    using T = decltype(tag);
    if (needs_input_grad(0)) {
      out[0] = empty(input->shape, input->dtype);
      conv_grad_input<T>(g, grad->data_as<T>(), weight->data_as<T>(), out[0]->data_as<T>());
    }
    if (needs_input_grad(1)) {
      out[1] = g.n == 0 ? zeros(weight->shape, weight->dtype) : empty(weight->shape, weight->dtype);
      conv_grad_weight<T>(g, grad->data_as<T>(), input->data_as<T>(), out[1]->data_as<T>());
    }
    if (needs_input_grad(2)) {
      out[2] = empty({g.o}, input->dtype);
      conv_grad_bias<T>(g, grad->data_as<T>(), out[2]->data_as<T>());
    }
  });
  return out;
}

Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& params) {
  ConvGeometry g = geometry(input, weight, bias, params);
  Tensor in = dense(input), w = dense(weight), b = bias ? dense(bias) : Tensor();
  Tensor out = empty(input->dim() == 4 ? Shape{g.n, g.o, g.oh, g.ow} : Shape{g.n, g.o, g.ow}, input->dtype);
  dispatch_floating(input->dtype, [&](auto tag) {
    using T = decltype(tag);
    conv_forward<T>(g, in->data_as<T>(), w->data_as<T>(), b ? b->data_as<T>() : nullptr, out->data_as<T>());
  });
  record_convolution<ConvolutionBackward0>(out, input, weight, bias, params);
  return out;
}

// ---- transposed convolution, and the weight gradient as an op (for double backward)
//
// A transposed convolution is the input gradient of the convolution that maps its output back to its
// input (same weight, stride, padding, dilation, groups): its forward is that convolution's
// conv_grad_input, its input gradient that convolution's forward, its weight gradient that
// convolution's weight gradient with the roles of input and output gradient swapped.

namespace {

// A transposed convolution's output size along one dim, without output_padding.
int64_t transposed_extent(int64_t in, int64_t k, int64_t stride, int64_t padding, int64_t dilation) {
  return (in - 1) * stride - 2 * padding + dilation * (k - 1) + 1;
}

// t (n, c, [h,] w) cropped, or extended with zeros, at the bottom and right to the spatial sizes of
// `shape`; recorded (slice, cat) in grad mode.
Tensor fit_spatial(const Tensor& t, const Shape& shape) {
  Tensor out = t;
  for (int64_t dim = 2; dim < t->dim(); ++dim) {
    const int64_t have = out->shape[dim], want = shape[dim];
    if (have > want) out = slice(out, dim, 0, want, 1);
    if (have < want) {
      Shape rest = out->shape;
      rest[dim] = want - have;
      out = cat({out, zeros(rest, out->dtype)}, dim);
    }
  }
  return out;
}

// The output_padding that makes the transposed convolution of `grad` (a convolution's output
// gradient) as large as that convolution's input `input_shape`: the rows and columns its stride skipped.
std::array<int64_t, 2> output_padding_to(const Shape& input_shape, const Tensor& grad, const Shape& weight_shape,
                                         const ConvParams& p) {
  std::array<int64_t, 2> output_padding{0, 0};
  for (int64_t dim = 2; dim < grad->dim(); ++dim) {
    const int d = int(dim + 4 - grad->dim()) - 2;  // the parameters' index: height 0, width 1
    output_padding[d] = input_shape[dim] - transposed_extent(grad->shape[dim], weight_shape[dim], p.stride[d],
                                                             p.padding[d], p.dilation[d]);
  }
  return output_padding;
}

// The output shape of the convolution of geometry g (of `dims` dims, 3 or 4).
Shape convolution_output_shape(const ConvGeometry& g, int64_t dims) {
  return dims == 4 ? Shape{g.n, g.o, g.oh, g.ow} : Shape{g.n, g.o, g.ow};
}

GradList recorded_convolution_backward(const ConvolutionNode& node, const Tensor& grad) {
  const Tensor input = node.unpack(0), weight = node.unpack(1);
  GradList out(3);
  if (node.needs_input_grad(0))
    out[0] = conv_transpose(grad, weight, Tensor(), node.params,
                            output_padding_to(input->shape, grad, weight->shape, node.params));
  if (node.needs_input_grad(1)) out[1] = convolution_weight_grad(grad, input, weight, node.params);
  if (node.needs_input_grad(2)) out[2] = convolution_bias_grad(grad, input, weight);
  return out;
}

struct ConvTransposeNode : Node {
  ConvParams params;
};

struct ConvolutionWeightGradNode : Node {
  ConvParams params;
};

struct ConvolutionBiasGradNode : Node {
  Shape grad_shape;
};

}  // namespace

// Saves input and weight; edges to input, weight and bias. PyTorch shows it as ConvolutionBackward0 too.
FG_NODE_NAMED(ConvTransposeBackward, ConvTransposeNode, "ConvolutionBackward0");
GradList ConvTransposeBackward::apply(GradList&& grads) {
  const Tensor input = unpack(0), weight = unpack(1), grad = grads[0];
  // The convolution of grad has input's rows and columns, and any that output_padding added past the
  // stride: the input gradient crops them, the weight gradient reads them as zero inputs.
  // The weight gradient needs only that convolution's output shape, not its values.
  GradList out(3);
  if (needs_input_grad(0)) out[0] = fit_spatial(convolution(grad, weight, Tensor(), params), input->shape);
  if (needs_input_grad(1)) {
    const Shape conv_shape = convolution_output_shape(geometry(grad, weight, Tensor(), params), grad->dim());
    out[1] = convolution_weight_grad(fit_spatial(input, conv_shape), grad, weight, params);
  }
  if (needs_input_grad(2)) out[2] = convolution_bias_grad(grad, input, weight);
  return out;
}

Tensor conv_transpose(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& params,
                      const std::array<int64_t, 2>& output_padding) {
  const int64_t dims = input->dim();
  if ((dims != 3 && dims != 4) || weight->dim() != dims)
    throw RuntimeError("conv_transpose: expected 3-D or 4-D input and weight of the same rank");
  if (params.groups < 1 || params.groups > std::max<int64_t>(weight->shape[0], 1) ||
      input->shape[1] != weight->shape[0])
    throw RuntimeError("conv_transpose: weight and input channels do not match groups");
  if (dims == 3 && output_padding[0] != 0)
    throw RuntimeError("conv_transpose: a 1-D convolution's height output_padding must be 0");
  Shape shape = input->shape;
  shape[1] = weight->shape[1] * params.groups;
  constexpr double kMaxExtent = double(int64_t(1) << 50);
  for (int64_t dim = 2; dim < dims; ++dim) {
    const int d = int(dim + 4 - dims) - 2;
    const int64_t in = input->shape[dim], k = weight->shape[dim];
    // stride, padding and dilation are checked by geometry() below, on the output this size gives; an
    // empty extent only in an empty batch (PyTorch's output then has the sizes the formula gives)
    if (output_padding[d] < 0 || output_padding[d] > (int64_t(1) << 31) || in < (input->shape[0] == 0 ? 0 : 1) ||
        k < 1 || double(in) * double(params.stride[d]) + double(k) * double(params.dilation[d]) > kMaxExtent)
      throw RuntimeError("conv_transpose: invalid output_padding or sizes");
    shape[dim] = transposed_extent(in, k, params.stride[d], params.padding[d], params.dilation[d]) + output_padding[d];
    if (shape[dim] < 1) throw RuntimeError("conv_transpose: output size is too small");
  }
  if (bias && (bias->dim() != 1 || bias->shape[0] != shape[1]))
    throw RuntimeError("conv_transpose: bias size mismatch");
  if (bias && bias->dtype != input->dtype)
    throw RuntimeError("convolution: input, weight and bias must have the same dtype");
  Tensor out = empty(shape, input->dtype);
  const ConvGeometry g = geometry(out, weight, Tensor(), params);
  Tensor x, w = dense(weight), b = bias ? dense(bias) : Tensor();
  {
    GradModeGuard no_grad(false);
    x = dense(fit_spatial(input, convolution_output_shape(g, dims)));
  }
  dispatch_floating(input->dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = out->data_as<T>();
    conv_grad_input<T>(g, x->data_as<T>(), w->data_as<T>(), o);
    if (b) {
      const T* bv = b->data_as<T>();
      const int64_t pixels = g.h * g.w;
      for (int64_t plane = 0; plane < g.n * g.c; ++plane)
        for (int64_t q = 0; q < pixels; ++q) o[plane * pixels + q] += bv[plane % g.c];
    }
  });
  record_convolution<ConvTransposeBackward>(out, input, weight, bias, params);
  return out;
}

// Saves the output gradient and the input; edges to both and to the weight (which gets no gradient).
FG_NODE_NAMED(ConvolutionWeightGradBackward, ConvolutionWeightGradNode, "ConvolutionBackwardBackward0");
GradList ConvolutionWeightGradBackward::apply(GradList&& grads) {
  // grad_weight is bilinear in (grad, input): its gradient along grad is the convolution of input by
  // the incoming weight-shaped gradient, along input the transposed convolution of grad by it.
  const Tensor grad = unpack(0), input = unpack(1), grad_grad_weight = grads[0];
  GradList out(3);
  if (needs_input_grad(0)) out[0] = convolution(input, grad_grad_weight, Tensor(), params);
  if (needs_input_grad(1))
    out[1] = conv_transpose(grad, grad_grad_weight, Tensor(), params,
                            output_padding_to(input->shape, grad, grad_grad_weight->shape, params));
  return out;
}

Tensor convolution_weight_grad(const Tensor& grad, const Tensor& input, const Tensor& weight,
                               const ConvParams& params) {
  const int64_t dims = input->dim();
  if ((dims != 3 && dims != 4) || grad->dim() != dims || weight->dim() != dims || params.groups < 1)
    throw RuntimeError("convolution_weight_grad: expected 3-D or 4-D grad, input and weight");
  const int64_t kh = dims == 4 ? weight->shape[2] : 1, kw = weight->shape.back();
  const Shape shape = dims == 4 ? Shape{grad->shape[1], input->shape[1] / params.groups, kh, kw}
                                : Shape{grad->shape[1], input->shape[1] / params.groups, kw};
  Tensor grad_weight = input->shape[0] == 0 ? zeros(shape, input->dtype) : empty(shape, input->dtype);
  const ConvGeometry g = geometry(input, grad_weight, Tensor(), params);
  if (grad->shape != convolution_output_shape(g, dims) || grad->dtype != input->dtype)
    throw RuntimeError("convolution_weight_grad: grad is not the convolution's output gradient");
  const Tensor gd = dense(grad), in = dense(input);
  dispatch_floating(input->dtype, [&](auto tag) {
    using T = decltype(tag);
    conv_grad_weight<T>(g, gd->data_as<T>(), in->data_as<T>(), grad_weight->data_as<T>());
  });
  if (auto* node = record<ConvolutionWeightGradBackward>(grad_weight, {&grad, &input, &weight})) {
    node->save(grad);
    node->save(input);
    node->params = params;
  }
  return grad_weight;
}

// Edges to grad, input and weight; only grad gets a gradient: the incoming one spread over its pixels.
FG_NODE_NAMED(ConvolutionBiasGradBackward, ConvolutionBiasGradNode, "ConvolutionBackwardBackward0");
GradList ConvolutionBiasGradBackward::apply(GradList&& grads) {
  GradList out(3);
  if (needs_input_grad(0)) {
    Shape channels(grad_shape.size(), 1);
    channels[1] = grad_shape[1];
    out[0] = expand(reshape(grads[0], channels), grad_shape);
  }
  return out;
}

Tensor convolution_bias_grad(const Tensor& grad, const Tensor& input, const Tensor& weight) {
  if (grad->dim() < 2) throw RuntimeError("convolution_bias_grad: expected a gradient with channels");
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < grad->dim(); ++d) dims.push_back(d);
  Tensor grad_bias;
  {
    GradModeGuard no_grad(false);
    grad_bias = sum(grad, dims, false);
  }
  if (auto* node = record<ConvolutionBiasGradBackward>(grad_bias, {&grad, &input, &weight}))
    node->grad_shape = grad->shape;
  return grad_bias;
}

// ---- F.unfold and F.fold: the column matrices of a convolution with one output channel, per image

namespace {

// The geometry of kernel-sized blocks sliding over `images` (N, C, H, W): a one-output-channel convolution's.
ConvGeometry block_geometry(const Tensor& images, const std::array<int64_t, 2>& kernel, const ConvParams& p) {
  if (kernel[0] < 1 || kernel[1] < 1 || kernel[0] > (int64_t(1) << 31) || kernel[1] > (int64_t(1) << 31))
    throw RuntimeError("im2col: kernel size should be greater than zero");
  const Tensor one_filter = empty({1, images->shape[1], kernel[0], kernel[1]}, images->dtype);
  ConvParams one_group = p;
  one_group.groups = 1;
  return geometry(images, one_filter, Tensor(), one_group);
}

struct BlocksNode : Node {
  std::array<int64_t, 2> kernel{}, image_size{};
  ConvParams params{};
};

}  // namespace

FG_NODE_FROM(Im2ColBackward0, BlocksNode);
GradList Im2ColBackward0::apply(GradList&& grads) { return {fold_blocks(grads[0], image_size, kernel, params)}; }

FG_NODE_FROM(Col2ImBackward0, BlocksNode);
GradList Col2ImBackward0::apply(GradList&& grads) { return {unfold_blocks(grads[0], kernel, params)}; }

Tensor unfold_blocks(const Tensor& input, const std::array<int64_t, 2>& kernel, const ConvParams& params) {
  const bool batched = input->dim() == 4;
  if (!batched && input->dim() != 3) throw RuntimeError("im2col: expected a 3-D or 4-D input");
  Tensor images;
  {
    GradModeGuard no_grad(false);
    images = batched ? dense(input) : reshape(dense(input), {1, input->shape[0], input->shape[1], input->shape[2]});
  }
  const ConvGeometry g = block_geometry(images, kernel, params);
  const int64_t k = g.k(), p = g.pixels(), image = g.c * g.h * g.w;
  Tensor out = empty(batched ? Shape{g.n, k, p} : Shape{k, p}, input->dtype);
  dispatch_floating(input->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = images->data_as<T>();
    T* cols = out->data_as<T>();
    parallel_over<T>(0, g.n, parallel_worth_it(g), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) im2col<T>(g, in + i * image, image, 1, cols + i * k * p, p, 0, g.oh);
    });
  });
  if (auto* node = record<Im2ColBackward0>(out, {&input})) {
    node->kernel = kernel;
    node->image_size = {g.h, g.w};
    node->params = params;
  }
  return out;
}

Tensor fold_blocks(const Tensor& input, const std::array<int64_t, 2>& output_size, const std::array<int64_t, 2>& kernel,
                   const ConvParams& params) {
  const bool batched = input->dim() == 3;
  if (!batched && input->dim() != 2) throw RuntimeError("col2im: expected a 2-D or 3-D input");
  const int64_t n = batched ? input->shape[0] : 1, rows = input->shape[batched ? 1 : 0];
  constexpr int64_t kMaxSize = int64_t(1) << 31;
  if (kernel[0] < 1 || kernel[1] < 1 || kernel[0] > kMaxSize || kernel[1] > kMaxSize ||
      rows % (kernel[0] * kernel[1]) != 0)
    throw RuntimeError("col2im: the input's rows are not a multiple of the kernel's size");
  if (output_size[0] < 1 || output_size[1] < 1 || output_size[0] > kMaxSize || output_size[1] > kMaxSize)
    throw RuntimeError("col2im: invalid output size");
  Tensor images = zeros({n, rows / (kernel[0] * kernel[1]), output_size[0], output_size[1]}, input->dtype);
  const ConvGeometry g = block_geometry(images, kernel, params);
  const int64_t k = g.k(), p = g.pixels(), image = g.c * g.h * g.w;
  if (input->shape.back() != p) throw RuntimeError("col2im: the input's columns are not the number of blocks");
  const Tensor cols = dense(input);
  dispatch_floating(input->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = cols->data_as<T>();
    T* out = images->data_as<T>();
    // col2im zeroes the padding entries of the columns it folds: each image's go through scratch.
    parallel_over<T>(0, g.n, parallel_worth_it(g), [&](int64_t lo, int64_t hi) {
      T* image_cols = scratch<T, Scratch::Columns>(k * p);
      for (int64_t i = lo; i < hi; ++i) {
        std::copy(in + i * k * p, in + (i + 1) * k * p, image_cols);
        col2im<T>(g, image_cols, p, out + i * image);
      }
    });
  });
  Tensor out = batched ? images : reshape(images, {g.c, g.h, g.w});
  if (auto* node = record<Col2ImBackward0>(out, {&input})) {
    node->kernel = kernel;
    node->image_size = output_size;
    node->params = params;
  }
  return out;
}

}  // namespace fg
