// F.interpolate's nearest, nearest-exact, (bi/tri)linear and bicubic resampling of the 1 to 3 spatial
// dims of an (N, C, *spatial) input, with or without antialiasing (bilinear and bicubic), one (N, C)
// plane at a time. Along each spatial axis, PyTorch's CPU rule for the source positions is turned
// once into a table: output o reads some inputs (1 for the nearest modes, 2 for linear, 4 for cubic,
// a range that widens with the downscale factor when antialiased) with their weights. A plane is then
// resampled one axis at a time, the last axis first (PyTorch's kernels nest them the same way, so
// the linear modes add w0 * (row interpolated along W) + w1 * (next row ...), and its antialiased
// kernel makes one pass per axis, W first); an axis whose table is the identity is skipped. The
// steps between axes are kept in double and the result is rounded once when stored.
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
#include <type_traits>
#include <vector>

#include "autograd/node.h"
#include "core/error.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

namespace {

// The taps of one axis: output j reads the inputs index[k] with weight[k] for k in [first[j], first[j + 1]),
// at least one.
struct AxisTaps {
  int64_t in = 0, out = 0;
  int64_t taps = -1;  // every output's number of taps, 0 if they differ (-1: no output yet)
  std::vector<int64_t> first{0}, index;
  std::vector<double> weight;

  void add(int64_t at, double w) {
    index.push_back(at);
    weight.push_back(w);
  }
  void end_output() {
    const int64_t count = static_cast<int64_t>(index.size()) - first.back();
    taps = taps == -1 || taps == count ? count : 0;
    first.push_back(static_cast<int64_t>(index.size()));
  }
  // Every output is its own input (a cubic table of an unchanged size has zero weights around it).
  bool identity() const {
    if (in != out) return false;
    for (int64_t j = 0; j < out; ++j) {
      int64_t own = 0;
      for (int64_t k = first[j]; k < first[j + 1]; ++k) {
        if (weight[k] == 0.0) continue;
        if (index[k] != j || weight[k] != 1.0) return false;
        ++own;
      }
      if (own != 1) return false;
    }
    return true;
  }
};

// PyTorch's compute_scales_value in its opmath type C: 1 / factor when a positive factor was given,
// else in / out.
template <class C>
C source_scale(int64_t in, int64_t out, double factor) {
  return factor > 0 ? static_cast<C>(1.0 / factor) : static_cast<C>(in) / static_cast<C>(out);
}

// PyTorch's area_pixel_compute_scale: align_corners maps the corner pixels' centres onto each other.
template <class C>
C pixel_scale(int64_t in, int64_t out, double factor, bool align_corners) {
  if (align_corners) return out > 1 ? static_cast<C>(in - 1) / static_cast<C>(out - 1) : C(0);
  return source_scale<C>(in, out, factor);
}

// PyTorch's area_pixel_compute_source_index: the corner-aligned position, or the pixel centre's, a
// negative one clamped to 0 but for cubic (whose 4 taps around it are clamped instead).
template <class C>
C linear_source(int64_t o, int64_t in, int64_t out, double factor, bool align_corners, bool cubic = false) {
  const C scale = pixel_scale<C>(in, out, factor, align_corners);
  if (align_corners) return scale * static_cast<C>(o);
  const C source = scale * (static_cast<C>(o) + C(0.5)) - C(0.5);
  return source < C(0) && !cubic ? C(0) : source;
}

// A source position's floor as PyTorch takes it (floorf: rounded to float first), below `in`, and
// kept at or above `lowest` (0; -1 for cubic, whose source can be -1/2) so that an infinite or NaN
// source (a direct call's huge scale) cannot index outside the axis.
int64_t floor_within(double source, int64_t lowest, int64_t in) {
  const float f = std::floor(static_cast<float>(source));
  return f >= static_cast<float>(in - 1) ? in - 1 : f >= static_cast<float>(lowest) ? static_cast<int64_t>(f) : lowest;
}

// The nearest source of output o: PyTorch's 2-D kernel (nearest_idx) copies an axis of unchanged size,
// halves the positions of a doubled one and otherwise floors o * scale in float; the 1-D and 3-D ones
// floor o * scale in C; nearest-exact floors the pixel centre's linear source + 1/2. Each floors in
// float (floor_within).
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
  return floor_within(source, 0, in);
}

// PyTorch's guard_index_and_lambda: the source's floor (floor_within) and its fraction in [0, 1].
template <class C>
std::pair<int64_t, C> floor_and_fraction(C source, int64_t lowest, int64_t in) {
  const int64_t low = floor_within(source, lowest, in);
  return {low, std::min(std::max(source - static_cast<C>(low), C(0)), C(1))};
}

// The cubic convolution kernel (Keys) with parameter a, at distance x in [0, 1] and in [1, 2], in
// PyTorch's operation order (cubic_convolution1 / 2).
template <class C>
C cubic_near(C x, C a) {
  return ((a + C(2)) * x - (a + C(3))) * x * x + C(1);
}
template <class C>
C cubic_far(C x, C a) {
  return ((a * x - C(5) * a) * x + C(8) * a) * x - C(4) * a;
}

// PyTorch's antialiasing filters (Pillow's): the triangle for bilinear, Keys' cubic with a = -0.5
// for bicubic.
template <class C>
C antialias_filter(UpsampleMode mode, C x) {
  x = std::abs(x);
  if (mode == UpsampleMode::Linear) return x < C(1) ? C(1) - x : C(0);
  return x < C(1) ? cubic_near(x, C(-0.5)) : x < C(2) ? cubic_far(x, C(-0.5)) : C(0);
}

// The antialiased table (PyTorch's _compute_indices_min_size_weights_aa, all in the storage type C):
// the filter's support (1 for linear, 2 for cubic) is widened by the downscale factor; output i reads
// the inputs whose centres fall within it around i's centre, weighted by the filter of their scaled
// distance and normalized to sum 1. An axis of unchanged size is copied (PyTorch skips it).
template <class C>
AxisTaps antialiased_taps(UpsampleMode mode, int64_t in, int64_t out, double factor, bool align_corners) {
  AxisTaps a;
  a.in = in, a.out = out;
  const C scale = pixel_scale<C>(in, out, factor, align_corners);
  const double half_width = mode == UpsampleMode::Cubic ? 2.0 : 1.0;
  const C support = static_cast<C>(scale >= C(1) ? half_width * double(scale) : half_width);
  const int64_t widest = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  const C inverse_scale = static_cast<C>(scale >= C(1) ? 1.0 / double(scale) : 1.0);
  std::vector<C> w;
  for (int64_t i = 0; i < out; ++i) {
    if (in == out) {
      a.add(i, 1.0);
      a.end_output();
      continue;
    }
    const C center = static_cast<C>(double(scale) * (double(i) + 0.5));
    const int64_t low = std::max(static_cast<int64_t>(double(center - support) + 0.5), int64_t{0});
    const int64_t high = std::min(static_cast<int64_t>(double(center + support) + 0.5), in);
    w.assign(static_cast<size_t>(std::clamp(high - low, int64_t{0}, widest)), C(0));
    C total = 0;
    for (size_t j = 0; j < w.size(); ++j) {
      const double distance = double(static_cast<C>(low + int64_t(j)) - center) + 0.5;
      w[j] = antialias_filter(mode, static_cast<C>(distance * double(inverse_scale)));
      total += w[j];
    }
    for (size_t j = 0; j < w.size(); ++j) a.add(low + int64_t(j), double(total != C(0) ? w[j] / total : w[j]));
    if (w.empty()) a.add(std::min(low, in - 1), 0.0);  // PyTorch reads one input with a zero weight
    a.end_output();
  }
  return a;
}

// One axis's table in PyTorch's opmath type C. Linear (compute_source_index_and_lambda): an axis of
// unchanged size is copied; else the floor of the source and the next input (the last input twice),
// weighted 1 - lambda and lambda, lambda the source's fraction clamped to [0, 1]. Cubic
// (HelperInterpCubic): the 4 inputs from the floor - 1, each clamped into the axis, weighted by the
// cubic convolution kernel with a = -0.75 at the fraction's distances. The weights are rounded to C,
// as PyTorch keeps them.
template <class C>
AxisTaps axis_taps(UpsampleMode mode, int spatial, int64_t in, int64_t out, double factor, bool align_corners) {
  AxisTaps a;
  a.in = in, a.out = out;
  for (int64_t o = 0; o < out; ++o) {
    if (mode == UpsampleMode::Nearest || mode == UpsampleMode::NearestExact) {
      a.add(nearest_source<C>(mode, spatial, o, in, out, factor), 1.0);
    } else if (mode == UpsampleMode::Linear && in == out) {
      a.add(o, 1.0);
    } else if (mode == UpsampleMode::Linear) {
      const auto [low, lambda] = floor_and_fraction(linear_source<C>(o, in, out, factor, align_corners), 0, in);
      a.add(low, double(C(1) - lambda));
      a.add(low + (low < in - 1 ? 1 : 0), double(lambda));
    } else {
      const auto [low, t] = floor_and_fraction(linear_source<C>(o, in, out, factor, align_corners, true), -1, in);
      const C far = C(1) - t, a_ = C(-0.75);
      const C coefficients[4] = {cubic_far(t + C(1), a_), cubic_near(t, a_), cubic_near(far, a_),
                                 cubic_far(far + C(1), a_)};
      for (int64_t k = 0; k < 4; ++k)
        a.add(std::max(std::min(low + k - 1, in - 1), int64_t{0}), double(coefficients[k]));
    }
    a.end_output();
  }
  return a;
}

// One axis of a plane viewed as (outer, in, inner) resampled into (outer, out, inner):
// dst[o][j][i] = sum over j's taps k of weight[k] * src[o][index[k]][i], in double, the taps added in
// order. The last axis (inner 1) is a gather along each row; the others combine whole rows, summed in
// `row` (inner doubles) when dst is not double and kTaps is 0. kTaps: every
// output's number of taps when it is 1 or 2 (the nearest and linear modes, whose loops the compiler
// then unrolls), else 0.
template <int kTaps, class S, class D>
void resample_axis(const S* __restrict src, D* __restrict dst, int64_t outer, int64_t inner, const AxisTaps& a,
                   double* __restrict row) {
  const int64_t* at = a.index.data();
  const double* w = a.weight.data();
  for (int64_t o = 0; o < outer; ++o) {
    const S* s = src + o * a.in * inner;
    D* d = dst + o * a.out * inner;
    if (inner == 1) {
      for (int64_t j = 0; j < a.out; ++j) {
        const int64_t begin = kTaps ? j * kTaps : a.first[j], end = kTaps ? begin + kTaps : a.first[j + 1];
        double total = w[begin] * double(s[at[begin]]);
        for (int64_t k = begin + 1; k < end; ++k) total += w[k] * double(s[at[k]]);
        d[j] = static_cast<D>(total);
      }
      continue;
    }
    for (int64_t j = 0; j < a.out; ++j) {
      const int64_t begin = kTaps ? j * kTaps : a.first[j], end = kTaps ? begin + kTaps : a.first[j + 1];
      D* into = d + j * inner;
      const S* s0 = s + at[begin] * inner;
      if constexpr (kTaps == 1) {
        for (int64_t i = 0; i < inner; ++i) into[i] = static_cast<D>(w[begin] * double(s0[i]));
      } else if constexpr (kTaps == 2) {
        const S* s1 = s + at[begin + 1] * inner;
        const double w0 = w[begin], w1 = w[begin + 1];
        for (int64_t i = 0; i < inner; ++i) into[i] = static_cast<D>(w0 * double(s0[i]) + w1 * double(s1[i]));
      } else {
        double* sum = nullptr;
        if constexpr (std::is_same_v<D, double>) sum = into;
        else sum = row;
        for (int64_t i = 0; i < inner; ++i) sum[i] = w[begin] * double(s0[i]);
        for (int64_t k = begin + 1; k < end; ++k) {
          const S* sk = s + at[k] * inner;
          const double weight = w[k];
          for (int64_t i = 0; i < inner; ++i) sum[i] += weight * double(sk[i]);
        }
        if constexpr (!std::is_same_v<D, double>)
          for (int64_t i = 0; i < inner; ++i) into[i] = static_cast<D>(sum[i]);
      }
    }
  }
}

// resample_axis with the table's kTaps.
template <class S, class D>
void resample_axis(const S* src, D* dst, int64_t outer, int64_t inner, const AxisTaps& a, double* row) {
  if (a.taps == 1) resample_axis<1>(src, dst, outer, inner, a, row);
  else if (a.taps == 2) resample_axis<2>(src, dst, outer, inner, a, row);
  else resample_axis<0>(src, dst, outer, inner, a, row);
}

// The transpose of resample_axis, from (outer, out, inner) into (outer, in, inner), which it zeroes
// first: dst[o][index[k]][i] += weight[k] * src[o][j][i], for j ascending, its taps k in order.
template <class S>
void spread_axis(const S* __restrict src, double* __restrict dst, int64_t outer, int64_t inner, const AxisTaps& a) {
  std::fill(dst, dst + outer * a.in * inner, 0.0);
  const int64_t* at = a.index.data();
  const double* w = a.weight.data();
  for (int64_t o = 0; o < outer; ++o) {
    const S* s = src + o * a.out * inner;
    double* d = dst + o * a.in * inner;
    for (int64_t j = 0; j < a.out; ++j) {
      for (int64_t k = a.first[j]; k < a.first[j + 1]; ++k) {
        if (inner == 1) {
          d[at[k]] += w[k] * double(s[j]);
          continue;
        }
        const S* from = s + j * inner;
        double* into = d + at[k] * inner;
        const double weight = w[k];
        for (int64_t i = 0; i < inner; ++i) into[i] += weight * double(from[i]);
      }
    }
  }
}

// What an upsampling needs to rebuild its tables: the mode, the spatial sizes (in and out), the
// scale factors (0: none), align_corners and antialias.
struct Resampling {
  UpsampleMode mode = UpsampleMode::Nearest;
  int spatial = 0;
  bool align_corners = false, antialias = false;
  std::vector<int64_t> in, out;
  std::vector<double> scales;

  // The tables of the axes that are not the identity, the last axis first, each with the axis it is.
  std::vector<std::pair<int, AxisTaps>> axes(DType computed) const {
    std::vector<std::pair<int, AxisTaps>> list;
    for (int d = spatial - 1; d >= 0; --d) {
      const double factor = scales.empty() ? 0.0 : scales[d];
      AxisTaps a =
          antialias
              ? (computed == DType::Float64 ? antialiased_taps<double>(mode, in[d], out[d], factor, align_corners)
                                            : antialiased_taps<float>(mode, in[d], out[d], factor, align_corners))
              : (computed == DType::Float64 ? axis_taps<double>(mode, spatial, in[d], out[d], factor, align_corners)
                                            : axis_taps<float>(mode, spatial, in[d], out[d], factor, align_corners));
      if (!a.identity()) list.emplace_back(d, std::move(a));
    }
    return list;
  }

  const char* name(bool backward) const {
    if (mode == UpsampleMode::Cubic && antialias)
      return backward ? "UpsampleBicubic2DAaBackwardBackward0" : "UpsampleBicubic2DAaBackward0";
    if (mode == UpsampleMode::Cubic)
      return backward ? "UpsampleBicubic2DBackwardBackward0" : "UpsampleBicubic2DBackward0";
    if (antialias) return backward ? "UpsampleBilinear2DAaBackwardBackward0" : "UpsampleBilinear2DAaBackward0";
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
    // the last step's sums, when its table is not 1 or 2 taps per output (resample_axis)
    const int64_t last_taps = axes.back().second.taps;
    std::vector<double> row(last_taps == 1 || last_taps == 2 ? 0 : static_cast<size_t>(out_plane));
    for (int64_t p = lo; p < hi; ++p) {
      const T* src = in + p * in_plane;
      T* dst = out + p * out_plane;
      for_each_axis(axes, r.in, true, [&](size_t k, int64_t outer, int64_t inner, const AxisTaps& a, int64_t) {
        const bool first = k == 0, last = k + 1 == axes.size();
        const double* from = buffers[(k + 1) % 2].data();
        double* to = buffers[k % 2].data();
        if (first && last) resample_axis(src, dst, outer, inner, a, row.data());
        else if (first) resample_axis(src, to, outer, inner, a, row.data());
        else if (last) resample_axis(from, dst, outer, inner, a, row.data());
        else resample_axis(from, to, outer, inner, a, row.data());
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

// The floating type an upsampling runs a storage dtype in (float16 and bfloat16 in float32, but
// antialiased: PyTorch's antialiasing runs float32 and float64 only).
DType resampled_type(const Tensor& x, const Resampling& r) {
  const DType computed = compute_type(x->dtype);
  if (r.antialias && x->dtype != computed) throw not_implemented_for("compute_index_ranges_weights", x->dtype);
  if (computed == DType::Float32 || computed == DType::Float64) return computed;
  throw not_implemented_for(r.antialias                      ? "compute_index_ranges_weights"
                            : r.mode == UpsampleMode::Linear ? "compute_indices_weights_linear"
                            : r.mode == UpsampleMode::Cubic  ? "compute_indices_weights_cubic"
                                                             : "compute_indices_weights_nearest",
                            x->dtype);
}

}  // namespace

FG_NODE_UNNAMED(UpsampleBackward, UpsampleNode);
FG_NODE_UNNAMED(UpsampleBackwardBackward, UpsampleNode);

namespace {

Tensor resample(const Tensor& x, const Resampling& r) {
  const DType computed = resampled_type(x, r);
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
  const DType computed = resampled_type(grad, r);
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
                const std::vector<double>& scales, bool align_corners, bool antialias) {
  const int spatial = static_cast<int>(output_size.size());
  if (spatial < 1 || spatial > 3 || x->dim() != spatial + 2 || (!scales.empty() && scales.size() != output_size.size()))
    throw RuntimeError("upsample: expected an (N, C, *spatial) input with 1 to 3 spatial dims, and a size for each");
  if ((mode == UpsampleMode::Cubic || antialias) && spatial != 2)
    throw RuntimeError("upsample: cubic and antialiased resampling take 2 spatial dims");
  if (antialias && mode != UpsampleMode::Linear && mode != UpsampleMode::Cubic)
    throw RuntimeError("upsample: antialiasing is for the linear and cubic modes");
  Resampling r;
  r.mode = mode, r.spatial = spatial, r.align_corners = align_corners, r.antialias = antialias;
  r.in.assign(x->shape.begin() + 2, x->shape.end());
  r.out = output_size;
  r.scales = scales;
  for (int d = 0; d < spatial; ++d) {
    if (r.in[d] < 1 || r.out[d] < 1) throw RuntimeError("upsample: input and output sizes should be greater than 0");
    // An antialiased window spans 1 / factor inputs: a direct call's tiny factor (F.interpolate's are
    // at least 1 / input size) would overflow its bounds.
    if (antialias && !scales.empty() && scales[d] > 0 && !(1.0 / scales[d] <= 2.0 * double(r.in[d])))
      throw RuntimeError("upsample: an antialiased scale factor should be at least 1 / (2 * input size)");
  }
  return resample(x, r);
}

}  // namespace fg
