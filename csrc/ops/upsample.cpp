// F.interpolate's nearest, nearest-exact and (bi/tri)linear resampling of the 1 to 3 spatial dims of
// an (N, C, *spatial) input, one (N, C) plane at a time. Along each spatial axis, PyTorch's CPU rule
// for the source positions is turned once into a table: output o reads `taps` inputs (1 for the
// nearest modes, 2 for linear) with their weights. A plane is then resampled one axis at a time,
// the last axis first (PyTorch's kernel nests them the same way, so the linear modes add
// w0 * (row interpolated along W) + w1 * (next row ...)); an axis whose table is the identity is
// skipped. The steps between axes are kept in double and the result is rounded once when stored.
//
// The backward is the transpose: each output's gradient times its weights added to its taps, axis
// by axis (the first first), accumulated in double in a fixed order (outputs ascending, taps in
// order) and rounded once. It is linear in the gradient, so its own derivative is the forward op:
// both are ops with nodes (double backward). python/fastgrad/reference/_upsample.py computes the same
// steps in the same order, so both backends give the same bits.
//
// Threads split the planes: every output element is computed by one thread, whatever their number.
// PyTorch's argument checks (with its messages) are in the shared Python layer (nn/functional.py);
// the checks here only keep direct calls from reading or writing out of bounds.
#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/node.h"
#include "core/error.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

namespace {

// The taps of one axis: output j reads the inputs index[j * taps + t] with weight[j * taps + t].
struct AxisTaps {
  int64_t in = 0, out = 0, taps = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  bool identity() const {
    if (in != out || taps != 1) return false;
    for (int64_t j = 0; j < out; ++j)
      if (index[j] != j) return false;
    return true;
  }
};

// PyTorch's compute_scales_value in its opmath type C: 1 / factor when a positive factor was given,
// else in / out.
template <class C>
C source_scale(int64_t in, int64_t out, double factor) {
  return factor > 0 ? static_cast<C>(1.0 / factor) : static_cast<C>(in) / static_cast<C>(out);
}

// PyTorch's area_pixel_compute_source_index (not cubic): align_corners maps the corner pixels' centres
// onto each other; otherwise the pixel centres, a negative source clamped to 0.
template <class C>
C linear_source(int64_t o, int64_t in, int64_t out, double factor, bool align_corners) {
  if (align_corners) return (out > 1 ? static_cast<C>(in - 1) / static_cast<C>(out - 1) : C(0)) * static_cast<C>(o);
  const C source = source_scale<C>(in, out, factor) * (static_cast<C>(o) + C(0.5)) - C(0.5);
  return source < C(0) ? C(0) : source;
}

// The nearest source of output o: PyTorch's 2-D kernel (nearest_idx) copies an axis of unchanged size,
// halves the positions of a doubled one and otherwise floors o * scale in float; the 1-D and 3-D ones
// floor o * scale in C; nearest-exact floors the pixel centre's linear source + 1/2. Each floors in
// float (floorf, as PyTorch, also for a double source), below `in`.
template <class C>
int64_t nearest_source(UpsampleMode mode, int spatial, int64_t o, int64_t in, int64_t out, double factor) {
  double source;
  if (mode == UpsampleMode::NearestExact) {
    source = double(linear_source<C>(o, in, out, factor, false)) + 0.5;
  } else if (spatial == 2) {
    if (out == in) return o;
    if (out == 2 * in) return o >> 1;
    source = static_cast<float>(o) * source_scale<float>(in, out, factor);
  } else {
    source = static_cast<C>(o) * source_scale<C>(in, out, factor);
  }
  return std::min(static_cast<int64_t>(std::floor(static_cast<float>(source))), in - 1);
}

// One axis's table in PyTorch's opmath type C. Linear (compute_source_index_and_lambda): an axis of
// unchanged size is copied; else the floor of the source and the next input (the last input twice),
// weighted 1 - lambda and lambda, lambda the source's fraction clamped to [0, 1] (the weights rounded
// to C, as PyTorch keeps them).
template <class C>
AxisTaps axis_taps(UpsampleMode mode, int spatial, int64_t in, int64_t out, double factor, bool align_corners) {
  AxisTaps a;
  a.in = in, a.out = out;
  a.taps = mode == UpsampleMode::Linear && in != out ? 2 : 1;
  for (int64_t o = 0; o < out; ++o) {
    if (mode != UpsampleMode::Linear || in == out) {
      a.index.push_back(mode == UpsampleMode::Linear ? o : nearest_source<C>(mode, spatial, o, in, out, factor));
      a.weight.push_back(1.0);
      continue;
    }
    const C source = linear_source<C>(o, in, out, factor, align_corners);
    const int64_t low = std::min(static_cast<int64_t>(std::floor(static_cast<float>(source))), in - 1);
    const C lambda = std::min(std::max(source - static_cast<C>(low), C(0)), C(1));
    a.index.push_back(low);
    a.index.push_back(low + (low < in - 1 ? 1 : 0));
    a.weight.push_back(double(C(1) - lambda));
    a.weight.push_back(double(lambda));
  }
  return a;
}

// One axis of a plane viewed as (outer, in, inner) resampled into (outer, out, inner):
// dst[o][j][i] = sum over t of weight[j][t] * src[o][index[j][t]][i], in double, the taps added in order.
// The last axis (inner 1) is a gather along each row; the others combine whole rows.
template <class S, class D>
void resample_axis(const S* __restrict src, D* __restrict dst, int64_t outer, int64_t inner, const AxisTaps& a) {
  const int64_t* at = a.index.data();
  const double* w = a.weight.data();
  for (int64_t o = 0; o < outer; ++o) {
    const S* s = src + o * a.in * inner;
    D* d = dst + o * a.out * inner;
    if (inner == 1 && a.taps == 1) {
      for (int64_t j = 0; j < a.out; ++j) d[j] = static_cast<D>(w[j] * double(s[at[j]]));
      continue;
    }
    if (inner == 1) {
      for (int64_t j = 0; j < a.out; ++j)
        d[j] = static_cast<D>(w[2 * j] * double(s[at[2 * j]]) + w[2 * j + 1] * double(s[at[2 * j + 1]]));
      continue;
    }
    for (int64_t j = 0; j < a.out; ++j, d += inner) {
      const S* s0 = s + at[j * a.taps] * inner;
      const double w0 = w[j * a.taps];
      if (a.taps == 1) {
        for (int64_t i = 0; i < inner; ++i) d[i] = static_cast<D>(w0 * double(s0[i]));
        continue;
      }
      const S* s1 = s + at[j * a.taps + 1] * inner;
      const double w1 = w[j * a.taps + 1];
      for (int64_t i = 0; i < inner; ++i) d[i] = static_cast<D>(w0 * double(s0[i]) + w1 * double(s1[i]));
    }
  }
}

// The transpose of resample_axis, from (outer, out, inner) into (outer, in, inner), which it zeroes
// first: dst[o][index[j][t]][i] += weight[j][t] * src[o][j][i], for j ascending, t in order.
template <class S>
void spread_axis(const S* __restrict src, double* __restrict dst, int64_t outer, int64_t inner, const AxisTaps& a) {
  std::fill(dst, dst + outer * a.in * inner, 0.0);
  const int64_t* at = a.index.data();
  const double* w = a.weight.data();
  const int64_t taps = a.out * a.taps;
  for (int64_t o = 0; o < outer; ++o) {
    const S* s = src + o * a.out * inner;
    double* d = dst + o * a.in * inner;
    if (inner == 1) {
      for (int64_t k = 0; k < taps; ++k) d[at[k]] += w[k] * double(s[k / a.taps]);
      continue;
    }
    for (int64_t k = 0; k < taps; ++k) {
      const S* row = s + k / a.taps * inner;
      double* into = d + at[k] * inner;
      const double weight = w[k];
      for (int64_t i = 0; i < inner; ++i) into[i] += weight * double(row[i]);
    }
  }
}

// What an upsampling needs to rebuild its tables: the mode, the spatial sizes (in and out), the
// scale factors (0: none) and align_corners.
struct Resampling {
  UpsampleMode mode = UpsampleMode::Nearest;
  int spatial = 0;
  bool align_corners = false;
  std::vector<int64_t> in, out;
  std::vector<double> scales;

  // The tables of the axes that are not the identity, the last axis first, each with the axis it is.
  std::vector<std::pair<int, AxisTaps>> axes(DType computed) const {
    std::vector<std::pair<int, AxisTaps>> list;
    for (int d = spatial - 1; d >= 0; --d) {
      const double factor = scales.empty() ? 0.0 : scales[d];
      AxisTaps a = computed == DType::Float64 ? axis_taps<double>(mode, spatial, in[d], out[d], factor, align_corners)
                                              : axis_taps<float>(mode, spatial, in[d], out[d], factor, align_corners);
      if (!a.identity()) list.emplace_back(d, std::move(a));
    }
    return list;
  }

  const char* name(bool backward) const {
    static const char* const kNames[3][3][2] = {
        {{"UpsampleNearest1DBackward0", "UpsampleNearest1DBackwardBackward0"},
         {"UpsampleNearest2DBackward0", "UpsampleNearest2DBackwardBackward0"},
         {"UpsampleNearest3DBackward0", "UpsampleNearest3DBackwardBackward0"}},
        {{"UpsampleNearestExact1DBackward0", "UpsampleNearestExact1DBackwardBackward0"},
         {"UpsampleNearestExact2DBackward0", "UpsampleNearestExact2DBackwardBackward0"},
         {"UpsampleNearestExact3DBackward0", "UpsampleNearestExact3DBackwardBackward0"}},
        {{"UpsampleLinear1DBackward0", "UpsampleLinear1DBackwardBackward0"},
         {"UpsampleBilinear2DBackward0", "UpsampleBilinear2DBackwardBackward0"},
         {"UpsampleTrilinear3DBackward0", "UpsampleTrilinear3DBackwardBackward0"}}};
    return kNames[static_cast<int>(mode)][spatial - 1][backward ? 1 : 0];
  }
};

struct UpsampleNode : Node {
  Resampling resampling;
};

int64_t product(const std::vector<int64_t>& sizes, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end; ++d) p *= sizes[d];
  return p;
}

// Calls step(k, outer, inner, taps, elements) for each axis k of `axes` in order, on a plane whose
// spatial sizes start as `sizes`: the plane is (outer, size of the axis, inner) before the step and
// has `elements` after it (the step turns its axis's size from the table's in to its out when
// `forward`, else back).
template <class Step>
void for_each_axis(const std::vector<std::pair<int, AxisTaps>>& axes, std::vector<int64_t> sizes, bool forward,
                   Step&& step) {
  for (size_t k = 0; k < axes.size(); ++k) {
    const auto& [d, a] = axes[k];
    const int64_t outer = product(sizes, 0, d), inner = product(sizes, d + 1, sizes.size());
    sizes[d] = forward ? a.out : a.in;
    step(k, outer, inner, a, product(sizes, 0, sizes.size()));
  }
}

// The largest plane between two steps of `axes` from `sizes`.
int64_t largest_step(const std::vector<std::pair<int, AxisTaps>>& axes, const std::vector<int64_t>& sizes,
                     bool forward) {
  int64_t largest = 0;
  for_each_axis(axes, sizes, forward, [&](size_t, int64_t, int64_t, const AxisTaps&, int64_t elements) {
    largest = std::max(largest, elements);
  });
  return largest;
}

template <class T>
void resample_planes(const Resampling& r, const std::vector<std::pair<int, AxisTaps>>& axes, int64_t planes,
                     const T* in, T* out) {
  const int64_t in_plane = product(r.in, 0, r.in.size()), out_plane = product(r.out, 0, r.out.size());
  const int64_t buffer = largest_step(axes, r.in, true);
  const int64_t grain = std::max<int64_t>(1, kParallelElements / std::max<int64_t>(buffer + in_plane, 1));
  parallel_for(0, planes, grain, [&](int64_t lo, int64_t hi) {
    std::vector<double> buffers[2] = {std::vector<double>(buffer), std::vector<double>(buffer)};
    for (int64_t p = lo; p < hi; ++p) {
      const T* src = in + p * in_plane;
      T* dst = out + p * out_plane;
      for_each_axis(axes, r.in, true, [&](size_t k, int64_t outer, int64_t inner, const AxisTaps& a, int64_t) {
        const bool first = k == 0, last = k + 1 == axes.size();
        const double* from = buffers[(k + 1) % 2].data();
        double* to = buffers[k % 2].data();
        if (first && last) resample_axis(src, dst, outer, inner, a);
        else if (first) resample_axis(src, to, outer, inner, a);
        else if (last) resample_axis(from, dst, outer, inner, a);
        else resample_axis(from, to, outer, inner, a);
      });
    }
  });
}

template <class T>
void spread_planes(const Resampling& r, const std::vector<std::pair<int, AxisTaps>>& axes, int64_t planes,
                   const T* grad, T* gin) {
  const int64_t in_plane = product(r.in, 0, r.in.size()), out_plane = product(r.out, 0, r.out.size());
  const int64_t buffer = largest_step(axes, r.out, false);
  const int64_t grain = std::max<int64_t>(1, kParallelElements / std::max<int64_t>(buffer + out_plane, 1));
  parallel_for(0, planes, grain, [&](int64_t lo, int64_t hi) {
    std::vector<double> buffers[2] = {std::vector<double>(buffer), std::vector<double>(buffer)};
    for (int64_t p = lo; p < hi; ++p) {
      const T* src = grad + p * out_plane;
      for_each_axis(axes, r.out, false, [&](size_t k, int64_t outer, int64_t inner, const AxisTaps& a, int64_t) {
        if (k == 0) spread_axis(src, buffers[0].data(), outer, inner, a);
        else spread_axis(buffers[(k + 1) % 2].data(), buffers[k % 2].data(), outer, inner, a);
      });
      const double* result = buffers[(axes.size() + 1) % 2].data();
      T* dst = gin + p * in_plane;
      for (int64_t i = 0; i < in_plane; ++i) dst[i] = static_cast<T>(result[i]);
    }
  });
}

Shape with_spatial(const Shape& shape, const std::vector<int64_t>& sizes) {
  Shape out(shape.begin(), shape.begin() + 2);
  out.insert(out.end(), sizes.begin(), sizes.end());
  return out;
}

// The floating type an upsampling runs a storage dtype in (float16 and bfloat16 in float32).
DType resampled_type(const Tensor& x, UpsampleMode mode) {
  const DType computed = compute_type(x->dtype);
  if (computed == DType::Float32 || computed == DType::Float64) return computed;
  throw not_implemented_for(
      mode == UpsampleMode::Linear ? "compute_indices_weights_linear" : "compute_indices_weights_nearest", x->dtype);
}

}  // namespace

FG_NODE_UNNAMED(UpsampleBackward, UpsampleNode);
FG_NODE_UNNAMED(UpsampleBackwardBackward, UpsampleNode);

namespace {

Tensor resample(const Tensor& x, const Resampling& r) {
  const DType computed = resampled_type(x, r.mode);
  Tensor out = empty(with_spatial(x->shape, r.out), computed);
  const auto axes = r.axes(computed);
  Tensor in = cast_values(dense(x), computed);
  if (axes.empty()) {
    copy_values(out, in);
  } else {
    dispatch_floating(computed, [&](auto tag) {
      using T = decltype(tag);
      resample_planes<T>(r, axes, x->shape[0] * x->shape[1], in->data_as<T>(), out->data_as<T>());
    });
  }
  out = cast_values(out, x->dtype);
  if (auto* node = record<UpsampleBackward>(out, {&x}, r.name(false))) node->resampling = r;
  return out;
}

// The gradient of resample(x, r) for x's spatial sizes r.in, from `grad` (sizes r.out).
Tensor resample_backward(const Tensor& grad, const Resampling& r) {
  const DType computed = resampled_type(grad, r.mode);
  Tensor gin = empty(with_spatial(grad->shape, r.in), computed);
  const auto axes = r.axes(computed);
  Tensor g = cast_values(dense(grad), computed);
  if (axes.empty()) {
    copy_values(gin, g);
  } else {
    std::vector<std::pair<int, AxisTaps>> first_axis_first(axes.rbegin(), axes.rend());
    dispatch_floating(computed, [&](auto tag) {
      using T = decltype(tag);
      spread_planes<T>(r, first_axis_first, grad->shape[0] * grad->shape[1], g->data_as<T>(), gin->data_as<T>());
    });
  }
  gin = cast_values(gin, grad->dtype);
  if (auto* node = record<UpsampleBackwardBackward>(gin, {&grad}, r.name(true))) node->resampling = r;
  return gin;
}

}  // namespace

GradList UpsampleBackward::apply(GradList&& grads) { return {resample_backward(grads[0], resampling)}; }
GradList UpsampleBackwardBackward::apply(GradList&& grads) { return {resample(grads[0], resampling)}; }

Tensor upsample(const Tensor& x, UpsampleMode mode, const std::vector<int64_t>& output_size,
                const std::vector<double>& scales, bool align_corners) {
  const int spatial = static_cast<int>(output_size.size());
  if (spatial < 1 || spatial > 3 || x->dim() != spatial + 2 || (!scales.empty() && scales.size() != output_size.size()))
    throw RuntimeError("upsample: expected an (N, C, *spatial) input with 1 to 3 spatial dims, and a size for each");
  Resampling r;
  r.mode = mode, r.spatial = spatial, r.align_corners = align_corners;
  r.in.assign(x->shape.begin() + 2, x->shape.end());
  r.out = output_size;
  r.scales = scales;
  for (int d = 0; d < spatial; ++d)
    if (r.in[d] < 1 || r.out[d] < 1) throw RuntimeError("upsample: input and output sizes should be greater than 0");
  return resample(x, r);
}

}  // namespace fg
