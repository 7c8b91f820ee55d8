// 2-D convolution, and 1-D as its height-1 case (3-D input and weight), lowered onto the packed GEMM as Caffe's im2col:
// per image and group, the receptive fields are unfolded into a column buffer cols (K x P, K =
// in-channels-per-group * kh * kw, P = output pixels) and out = W_g (Og x K) @ cols. The backward:
// grad_weight_g = sum over images of G_g (Og x P) @ cols^T, grad_input = col2im(W_g^T @ G_g), and
// grad_bias the sum of G over images and pixels.
//
// Threads split the batch into whole images. Every output element is computed by one thread in an
// order that does not depend on how many there are: the weight gradient's per-image products are
// summed image by image (0, 1, 2, ...) after each wave of kImagesPerWave images, so its bits do
// not depend on the thread count either. The argument checks with PyTorch's messages are in the
// shared Python layer (nn/functional.py, which sees the user's shapes); the checks here only keep
// direct calls from reading out of bounds.
#include <algorithm>
#include <vector>

#include "autograd/node.h"
#include "core/shape.h"
#include "kernels/kernel_table.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

namespace {

Tensor dense(const Tensor& t) {
  if (t->is_contiguous()) return t;
  Tensor out = empty(t->shape, t->dtype);
  copy_values(out, t);
  return out;
}

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
  if (g.oh < 1 || g.ow < 1 || g.kh < 1 || g.kw < 1) throw RuntimeError("convolution: output size is too small");
  return g;
}

// Calls f(column, input_row, x0, lo, hi) for every output row of every (channel, ky, kx) row of a
// K x P column matrix of one group: `column` points at that output row's ow entries, `input_row` at
// the input row it reads (nullptr when that row is in the padding), and entry ox reads input x =
// x0 + ox * stride, inside the image for ox in [lo, hi) only. The one traversal shared by im2col and
// col2im, so both walk the same positions in the same order; the in-bounds range is computed once per
// row, so the inner loops are plain strided copies (contiguous at stride 1).
template <class T, class Column, class F>
void for_each_column_row(const ConvGeometry& g, Column* cols, T* image, F&& f) {
  const int64_t sx = g.p.stride[1];
  for (int64_t ch = 0; ch < g.cg(); ++ch)
    for (int64_t ky = 0; ky < g.kh; ++ky)
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t x0 = kx * g.p.dilation[1] - g.p.padding[1];
        // ox in [lo, hi) <=> 0 <= x0 + ox * sx < w
        const int64_t lo = std::min(g.ow, x0 >= 0 ? 0 : (-x0 + sx - 1) / sx);
        const int64_t hi = std::max(lo, std::min(g.ow, g.w - x0 <= 0 ? 0 : (g.w - x0 + sx - 1) / sx));
        for (int64_t oy = 0; oy < g.oh; ++oy, cols += g.ow) {
          const int64_t y = oy * g.p.stride[0] - g.p.padding[0] + ky * g.p.dilation[0];
          f(cols, y >= 0 && y < g.h ? image + (ch * g.h + y) * g.w : nullptr, x0, lo, hi);
        }
      }
}

// cols (K x P) = the receptive fields of one group of one image (`image` points at its first channel).
template <class T>
void im2col(const ConvGeometry& g, const T* image, T* cols) {
  const int64_t sx = g.p.stride[1];
  for_each_column_row(g, cols, image, [&](T* column, const T* input_row, int64_t x0, int64_t lo, int64_t hi) {
    if (!input_row) lo = hi = g.ow;
    for (int64_t ox = 0; ox < lo; ++ox) column[ox] = T(0);
    for (int64_t ox = lo; ox < hi; ++ox) column[ox] = input_row[x0 + ox * sx];
    for (int64_t ox = hi; ox < g.ow; ++ox) column[ox] = T(0);
  });
}

// The GEMM operand of group `grp` of image `i` of `in`: its receptive fields unfolded into `cols`, or
// for a pointwise (1x1, stride 1, unpadded) kernel the image itself.
template <class T>
const T* group_columns(const ConvGeometry& g, const T* in, int64_t i, int64_t grp, std::vector<T>& cols) {
  const T* image = in + (i * g.groups + grp) * g.cg() * g.h * g.w;
  if (g.pointwise()) return image;
  im2col(g, image, cols.data());
  return cols.data();
}

// image += the column matrix folded back onto the input positions it was read from (fixed order).
template <class T>
void col2im(const ConvGeometry& g, const T* cols, T* image) {
  const int64_t sx = g.p.stride[1];
  for_each_column_row(g, cols, image, [&](const T* column, T* input_row, int64_t x0, int64_t lo, int64_t hi) {
    if (input_row)
      for (int64_t ox = lo; ox < hi; ++ox) input_row[x0 + ox * sx] += column[ox];
  });
}

// Whole images per thread once an image's multiply-adds make waking the pool worth it.
constexpr double kParallelConvWork = 1 << 18;
int64_t image_grain(const ConvGeometry& g) {
  const double work = double(g.o) * double(g.k()) * double(g.pixels());
  return work * double(g.n) >= kParallelConvWork ? 1 : g.n;
}

// Images whose weight-gradient products are held at once before being summed in image order.
constexpr int64_t kImagesPerWave = 8;

template <class T>
void conv_forward(const ConvGeometry& g, const T* in, const T* w, const T* b, T* out) {
  GemmKernel<T> gemm = kernels().of<T>().gemm;
  const int64_t p = g.pixels(), k = g.k();
  parallel_for(0, g.n, image_grain(g), [&](int64_t lo, int64_t hi) {
    std::vector<T> cols(g.pointwise() ? 0 : k * p);
    for (int64_t i = lo; i < hi; ++i)
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        const T* columns = group_columns(g, in, i, grp, cols);
        T* c = out + (i * g.o + grp * g.og()) * p;
        gemm(g.og(), p, k, w + grp * g.og() * k, k, 1, columns, p, 1, c, p);
        if (b)
          for (int64_t oc = 0; oc < g.og(); ++oc)
            for (int64_t q = 0; q < p; ++q) c[oc * p + q] += b[grp * g.og() + oc];
      }
  });
}

// grad_input: per image and group, cols = W_g^T @ G_g, folded back by col2im.
template <class T>
void conv_grad_input(const ConvGeometry& g, const T* grad, const T* w, T* gin) {
  GemmKernel<T> gemm = kernels().of<T>().gemm;
  const int64_t p = g.pixels(), k = g.k(), in_group = g.cg() * g.h * g.w;
  parallel_for(0, g.n, image_grain(g), [&](int64_t lo, int64_t hi) {
    std::vector<T> cols(g.pointwise() ? 0 : k * p);
    for (int64_t i = lo; i < hi; ++i)
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        T* image = gin + (i * g.groups + grp) * in_group;
        const T* gg = grad + (i * g.o + grp * g.og()) * p;
        // W_g^T (K x Og) read through W_g's strides: row stride 1, column stride K.
        if (g.pointwise()) {
          gemm(k, p, g.og(), w + grp * g.og() * k, 1, k, gg, p, 1, image, p);
          continue;
        }
        gemm(k, p, g.og(), w + grp * g.og() * k, 1, k, gg, p, 1, cols.data(), p);
        col2im(g, cols.data(), image);
      }
  });
}

// grad_weight: per wave of images, each image's products G_g @ cols^T in parallel, then summed into
// gw in image order.
template <class T>
void conv_grad_weight(const ConvGeometry& g, const T* grad, const T* in, T* gw) {
  GemmKernel<T> gemm = kernels().of<T>().gemm;
  const int64_t p = g.pixels(), k = g.k(), per_image = g.o * k;
  std::vector<T> partial(std::min(g.n, kImagesPerWave) * per_image);
  for (int64_t first = 0; first < g.n; first += kImagesPerWave) {
    const int64_t last = std::min(g.n, first + kImagesPerWave);
    parallel_for(first, last, image_grain(g) == 1 ? 1 : last - first, [&](int64_t lo, int64_t hi) {
      std::vector<T> cols(g.pointwise() ? 0 : k * p);
      for (int64_t i = lo; i < hi; ++i)
        for (int64_t grp = 0; grp < g.groups; ++grp) {
          const T* columns = group_columns(g, in, i, grp, cols);
          // The transposed product cols (K x P) @ G_g^T (P x Og), G_g^T read through G_g's strides:
          // cols, the larger operand, is then read along its rows (measured faster than G_g @ cols^T).
          gemm(k, g.og(), p, columns, p, 1, grad + (i * g.o + grp * g.og()) * p, 1, p,
               partial.data() + (i - first) * per_image + grp * g.og() * k, g.og());
        }
    });
    for (int64_t i = first; i < last; ++i)
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        const T* part = partial.data() + (i - first) * per_image + grp * g.og() * k;  // K x Og
        T* dst = gw + grp * g.og() * k;  // Og x K
        for (int64_t oc = 0; oc < g.og(); ++oc)
          for (int64_t r = 0; r < k; ++r)
            dst[oc * k + r] = i == 0 ? part[r * g.og() + oc] : dst[oc * k + r] + part[r * g.og() + oc];
      }
  }
}

// grad_bias[o] = the sum of G[:, o] over images then pixels, in double, rounded once.
template <class T>
void conv_grad_bias(const ConvGeometry& g, const T* grad, T* gb) {
  const int64_t p = g.pixels();
  for (int64_t oc = 0; oc < g.o; ++oc) {
    double sum = 0;
    for (int64_t i = 0; i < g.n; ++i)
      for (int64_t q = 0; q < p; ++q) sum += grad[(i * g.o + oc) * p + q];
    gb[oc] = static_cast<T>(sum);
  }
}

struct ConvolutionNode : Node {
  ConvParams params;
};

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
      out[0] = zeros(input->shape, input->dtype);
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
  // Without a bias, its edge is empty (as PyTorch's next_functions shows it: (None, 0)).
  auto* node = bias ? record<ConvolutionBackward0>(out, {&input, &weight, &bias})
                    : record<ConvolutionBackward0>(out, {&input, &weight});
  if (node) {
    if (!bias) node->next_edges.push_back(Edge{});
    node->save(input);
    node->save(weight);
    node->params = params;
  }
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
  GradList out(3);
  const Tensor grad_conv =
      needs_input_grad(0) || needs_input_grad(1) ? convolution(grad, weight, Tensor(), params) : Tensor();
  if (needs_input_grad(0)) out[0] = fit_spatial(grad_conv, input->shape);
  if (needs_input_grad(1)) out[1] = convolution_weight_grad(fit_spatial(input, grad_conv->shape), grad, weight, params);
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
    // stride, padding and dilation are checked by geometry() below, on the output this size gives
    if (output_padding[d] < 0 || output_padding[d] > (int64_t(1) << 31) || in < 1 || k < 1 ||
        double(in) * double(params.stride[d]) + double(k) * double(params.dilation[d]) > kMaxExtent)
      throw RuntimeError("conv_transpose: invalid output_padding or sizes");
    shape[dim] = transposed_extent(in, k, params.stride[d], params.padding[d], params.dilation[d]) + output_padding[d];
    if (shape[dim] < 1) throw RuntimeError("conv_transpose: output size is too small");
  }
  if (bias && (bias->dim() != 1 || bias->shape[0] != shape[1]))
    throw RuntimeError("conv_transpose: bias size mismatch");
  if (bias && bias->dtype != input->dtype)
    throw RuntimeError("convolution: input, weight and bias must have the same dtype");
  Tensor out = zeros(shape, input->dtype);
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
  auto* node = bias ? record<ConvTransposeBackward>(out, {&input, &weight, &bias})
                    : record<ConvTransposeBackward>(out, {&input, &weight});
  if (node) {
    if (!bias) node->next_edges.push_back(Edge{});
    node->save(input);
    node->save(weight);
    node->params = params;
  }
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
    parallel_for(0, g.n, image_grain(g), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) im2col<T>(g, in + i * image, cols + i * k * p);
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
    parallel_for(0, g.n, image_grain(g), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) col2im<T>(g, in + i * k * p, out + i * image);
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
