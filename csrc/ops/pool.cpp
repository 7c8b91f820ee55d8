// Pooling over the last two dims of a (C, H, W) or (N, C, H, W) input, one (H, W) plane at a time:
// max pooling (with PyTorch's int64 indices into each plane), average pooling, and their adaptive
// forms; a 1-D pool is the caller's height-1 case (as PyTorch's F.max_pool1d unsqueezes). Each
// output element reads one window of its plane; along each axis, PyTorch's window rule is turned
// once into a table (first input, number of taps, step), so the loops over planes are the same for
// every kind of pool.
//
// Max pooling's gradient is a scatter-add of the incoming gradient at the saved indices, and the
// derivative of a scatter is the gather at the same indices (and back): two ops with nodes of their
// own (scatter_planes, gather_planes), also used by max_unpool2d. Average pooling is linear: its
// backward spreads each output's gradient over its window, and that op's derivative is the average
// pool again. Sums are taken in double and rounded once when stored, in the order the reference
// (python/fastgrad/reference/_pool.py) takes them, so both backends give the same bits.
//
// The rows of windows clear of the padding (the common 2x2 stride 2, 3x3 stride 2 and evenly
// dividing adaptive pools, and any other window shape) go through the per-ISA kernels of
// csrc/kernels/pool_impl.h, a vector of output columns at a time, in the same tap order.
//
// When no two windows share an input (stride >= the window's extent: 2x2, evenly dividing adaptive
// pools), each input takes at most one output's gradient, which the double accumulation would round
// back to itself, so the gradients are written in T: an average pool's as a gather that writes each
// input once (a Tiling; the runs of windows that tile a row through the per-ISA spread_average), a
// max pool's as a scatter of the gradients into zeroed planes (one store per output, measured faster
// than a gather comparing an index per input). Overlapping windows accumulate in double: an
// average pool's full columns tap-major (the last tap first, so that each input still takes its
// outputs in order), a max pool's gradient scattered in the order of the outputs.
//
// Threads split the planes: every output element is computed by one thread, whatever their number.
// PyTorch's argument checks (with its messages) are in the shared Python layer (nn/functional.py);
// the checks here only keep direct calls from reading or writing out of bounds.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "autograd/node.h"
#include "core/error.h"
#include "kernels/kernel_table.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

namespace {

// The windows along one axis: output o reads the inputs first[o] + t * step for t < taps[o]. An
// average divides by the product over both axes of span[o] (the window's size including padding)
// when it counts the padding.
struct AxisWindows {
  std::vector<int64_t> first, taps, span;
  int64_t step = 1;
  // A sliding window's full number of taps and its stride (0 for adaptive windows): outputs whose
  // window holds all `kernel` taps start `stride` apart.
  int64_t kernel = 0, stride = 0;
  int64_t size() const { return static_cast<int64_t>(first.size()); }
  void add(int64_t first_input, int64_t tap_count, int64_t padded_span) {
    first.push_back(first_input);
    taps.push_back(tap_count);
    span.push_back(padded_span);
  }
};

// PyTorch's pooling_output_shape: with ceil_mode, the last window must start inside the input or
// its left padding.
int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t numerator = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (numerator >= 0 ? numerator / s : -((-numerator + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// A sliding window of k taps, d apart, moved by s over the input padded by p on both sides. Max
// pooling reads the taps inside the input; average pooling (d = 1) also clips the window to the
// input plus its right padding for the size it divides by, as PyTorch.
AxisWindows sliding_windows(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode, bool average) {
  AxisWindows w;
  w.step = d;
  w.kernel = k, w.stride = s;
  const int64_t out = pooled_size(in, k, s, p, d, ceil_mode);
  for (int64_t o = 0; o < out; ++o) {
    int64_t begin = o * s - p;
    if (average) {
      const int64_t padded_end = std::min(begin + k, in + p), end = std::min(padded_end, in);
      const int64_t span = padded_end - begin;
      begin = std::max<int64_t>(begin, 0);
      w.add(begin, std::max<int64_t>(end - begin, 0), span);
      continue;
    }
    const int64_t end = std::min(begin + (k - 1) * d + 1, in);
    if (begin < 0) begin += (-begin + d - 1) / d * d;  // the first tap inside the input
    const int64_t taps = end > begin ? (end - begin + d - 1) / d : 0;
    w.add(begin, taps, taps);
  }
  return w;
}

// PyTorch's adaptive windows: output o of `out` reads [floor(o * in / out), ceil((o + 1) * in / out)).
// When out divides in, these are sliding windows of in / out taps with that stride (the fast path
// of full columns takes them).
AxisWindows adaptive_windows(int64_t in, int64_t out) {
  AxisWindows w;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t begin = o * in / out, end = ((o + 1) * in + out - 1) / out;
    w.add(begin, end - begin, end - begin);
  }
  if (out > 0 && in % out == 0) w.kernel = w.stride = in / out;
  return w;
}

// Calls tap(offset) for the in-plane offset of every input that output (oy, ox) reads, row by row.
template <class Tap>
void for_each_tap(const AxisWindows& wy, const AxisWindows& wx, int64_t width, int64_t oy, int64_t ox, Tap&& tap) {
  for (int64_t ty = 0; ty < wy.taps[oy]; ++ty) {
    const int64_t row = (wy.first[oy] + ty * wy.step) * width;
    for (int64_t tx = 0; tx < wx.taps[ox]; ++tx) tap(row + wx.first[ox] + tx * wx.step);
  }
}

// Calls plane(p) for every plane p in [0, planes), split over threads when there is enough work:
// `work` counts the elements one plane reads and writes.
template <class F>
void for_each_plane(int64_t planes, double work, F&& plane) {
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(kParallelElements / std::max(work, 1.0)));
  parallel_for(0, planes, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) plane(p);
  });
}

// The geometry of one pool: planes of in_h x in_w inputs and windows.y.size() x windows.x.size() outputs.
struct Windows {
  AxisWindows y, x;
  int64_t out_plane() const { return y.size() * x.size(); }
  int64_t taps_per_plane() const {
    int64_t ty = 0, tx = 0;
    for (int64_t t : y.taps) ty += t;
    for (int64_t t : x.taps) tx += t;
    return ty * tx;
  }
};

// The leading (batch, channel) dims of x and the number of planes they hold.
int64_t plane_count(const Tensor& x) {
  int64_t planes = 1;
  for (int64_t d = 0; d + 2 < x->dim(); ++d) planes *= x->shape[d];
  return planes;
}

Shape with_plane(const Shape& shape, int64_t h, int64_t w) {
  Shape out(shape.begin(), shape.end() - 2);
  out.push_back(h);
  out.push_back(w);
  return out;
}

void check_pool_input(const Tensor& x, const char* op) {
  if (x->dim() != 3 && x->dim() != 4) throw RuntimeError(cat(op, ": expected a 3-D or 4-D input"));
}

// Bounded so that no window position computed from them overflows int64 (PyTorch's checks are in Python).
void check_pool_params(const PoolParams& p, const char* op) {
  constexpr int64_t kMaxParam = int64_t(1) << 31;
  for (int d = 0; d < 2; ++d)
    if (p.kernel[d] < 1 || p.stride[d] < 1 || p.padding[d] < 0 || p.dilation[d] < 1 || p.kernel[d] > kMaxParam ||
        p.stride[d] > kMaxParam || p.padding[d] > kMaxParam || p.dilation[d] > kMaxParam)
      throw RuntimeError(cat(op, ": invalid kernel size, stride, padding or dilation"));
}

// A sliding pool's output has at least one element per plane; an adaptive one may have none.
void check_output_size(int64_t h, int64_t w, const char* op, bool adaptive) {
  if (adaptive ? h < 0 || w < 0 : h < 1 || w < 1) throw RuntimeError(cat(op, ": output size is too small"));
}

// The columns [lo, hi) of a row of outputs whose windows hold all their `kernel` taps: their first
// taps are `stride` apart, so a row of them is pooled by the per-ISA kernels (pool_impl.h) a vector
// of outputs at a time (none for windows of unequal sizes, or of so many taps that their numbers
// are not exact in float: max_pool_columns returns them as T).
std::pair<int64_t, int64_t> full_columns(const Windows& win) {
  const AxisWindows& wx = win.x;
  int64_t lo = 0, hi = 0;
  const int64_t rows = win.y.taps.empty() ? 0 : *std::max_element(win.y.taps.begin(), win.y.taps.end());
  if (wx.kernel > 0 && double(wx.kernel) * double(rows) < 16777216.0) {
    while (lo < wx.size() && wx.taps[lo] != wx.kernel) ++lo;
    hi = lo;
    while (hi < wx.size() && wx.taps[hi] == wx.kernel) ++hi;
  }
  return {lo, hi};
}

// The row oy of full columns [lo, hi) as the pool kernels see it, `room` elements of input left
// from its plane's first element: the offset of its first tap and those columns.
std::pair<int64_t, PoolColumns> columns_of(const Windows& win, int64_t in_w, int64_t oy, int64_t lo, int64_t hi,
                                           int64_t room) {
  const int64_t first = win.y.first[oy] * in_w + win.x.first[lo];
  return {first, {hi - lo, win.y.taps[oy], win.y.step * in_w, win.x.kernel, win.x.step, win.x.stride, room - first}};
}

// The windows of a pool that share no input (see the top): each input row's and column's window.
struct Tiling {
  std::vector<int64_t> row_window, column_window;  // -1: the input is in no window
  // Columns [lo, hi) (if any) are windows of `width` inputs that tile the row's inputs from `first`.
  int64_t lo = 0, hi = 0, first = 0, width = 0;
};

// The window of each of the `in` inputs along one axis, or nothing when two windows share an input
// (or a window has none: a max pool's index then points outside its window).
std::optional<std::vector<int64_t>> window_of_inputs(const AxisWindows& w, int64_t in) {
  std::vector<int64_t> window(in, -1);
  for (int64_t o = 0; o < w.size(); ++o) {
    if (w.taps[o] == 0) return std::nullopt;
    for (int64_t t = 0; t < w.taps[o]; ++t) {
      int64_t& slot = window[w.first[o] + t * w.step];
      if (slot >= 0) return std::nullopt;
      slot = o;
    }
  }
  return window;
}

std::optional<Tiling> tiling_of(const Windows& win, int64_t in_h, int64_t in_w) {
  auto rows = window_of_inputs(win.y, in_h), columns = window_of_inputs(win.x, in_w);
  if (!rows || !columns) return std::nullopt;
  Tiling t{std::move(*rows), std::move(*columns)};
  const auto [lo, hi] = full_columns(win);
  if (hi > lo && win.x.step == 1 && win.x.stride == win.x.kernel)
    t.lo = lo, t.hi = hi, t.first = win.x.first[lo], t.width = win.x.kernel;
  return t;
}

// One input row of a gradient over a tiling: out[x] = value(ox, x) for the input x of window ox
// (0 for an input of none); the run of tiled columns through spread(out + first).
template <class T, class Value, class Spread>
void fill_tiled_row(const Tiling& t, int64_t in_w, T* out, Value&& value, Spread&& spread) {
  for (int64_t x = 0; x < in_w; ++x) {
    if (x == t.first && t.hi > t.lo) {
      spread(out + x);
      x += (t.hi - t.lo) * t.width - 1;
      continue;
    }
    const int64_t ox = t.column_window[x];
    out[x] = ox < 0 ? T(0) : value(ox, x);
  }
}

// Max pooling: the largest value of each window and its offset in the plane, as PyTorch. NaN is
// the largest (the last NaN wins), and the first of equal maxima wins. The outputs of a row whose
// windows hold all their column taps go through the ISA's max_pool_columns (float and double);
// the others (clipped by the padding, adaptive windows of unequal sizes, integers) one window at a
// time, in the same tap order.
template <class T>
void max_pool(const Windows& win, int64_t planes, int64_t in_h, int64_t in_w, const T* in, T* out, int64_t* indices) {
  const int64_t in_plane = in_h * in_w, out_plane = win.out_plane(), ow = win.x.size();
  const T lowest = std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  int64_t full_lo = 0, full_hi = 0;
  if constexpr (std::is_floating_point_v<T>) std::tie(full_lo, full_hi) = full_columns(win);
  for_each_plane(planes, double(in_plane + out_plane) + double(win.taps_per_plane()), [&](int64_t p) {
    const T* src = in + p * in_plane;
    std::vector<T> best(full_hi - full_lo), tap(full_hi - full_lo);
    for (int64_t oy = 0; oy < win.y.size(); ++oy) {
      T* out_row = out + p * out_plane + oy * ow;
      int64_t* index_row = indices + p * out_plane + oy * ow;
      for (int64_t ox = 0; ox < ow; ++ox) {
        if constexpr (std::is_floating_point_v<T>) {
          if (ox == full_lo && full_hi > full_lo) {
            const auto [first, columns] = columns_of(win, in_w, oy, full_lo, full_hi, (planes - p) * in_plane);
            kernels().of<T>().max_pool_columns(columns, src + first, best.data(), tap.data());
            for (int64_t j = 0; j < full_hi - full_lo; ++j) {
              const int64_t t = std::max<int64_t>(static_cast<int64_t>(tap[j]), 0);
              const int64_t ty = t / win.x.kernel, tx = t % win.x.kernel;
              out_row[full_lo + j] = best[j];
              index_row[full_lo + j] =
                  (win.y.first[oy] + ty * win.y.step) * in_w + win.x.first[full_lo + j] + tx * win.x.step;
            }
            ox = full_hi - 1;
            continue;
          }
        }
        T value = lowest;
        int64_t value_at = win.y.first[oy] * in_w + win.x.first[ox];
        for_each_tap(win.y, win.x, in_w, oy, ox, [&](int64_t at) {
          const T v = src[at];
          if ((v > value) | (v != v)) value = v, value_at = at;
        });
        out_row[ox] = value;
        index_row[ox] = value_at;
      }
    }
  });
}

// Average pooling (sliding or adaptive): each window's sum over its divisor. `divisor` > 0
// overrides it; else count_include_pad divides by the padded span, otherwise by the taps.
struct AverageRule {
  bool count_include_pad = true;
  int64_t divisor = 0;
  double of(const Windows& win, int64_t oy, int64_t ox) const {
    if (divisor > 0) return double(divisor);
    return count_include_pad ? double(win.y.span[oy]) * double(win.x.span[ox])
                             : double(win.y.taps[oy]) * double(win.x.taps[ox]);
  }
};

template <class T>
void avg_pool(const Windows& win, const AverageRule& rule, int64_t planes, int64_t in_h, int64_t in_w, const T* in,
              T* out) {
  const int64_t in_plane = in_h * in_w, out_plane = win.out_plane();
  int64_t full_lo, full_hi;
  std::tie(full_lo, full_hi) = full_columns(win);
  for_each_plane(planes, double(in_plane + out_plane) + double(win.taps_per_plane()), [&](int64_t p) {
    const T* src = in + p * in_plane;
    T* dst = out + p * out_plane;
    std::vector<double> sums(full_hi - full_lo);
    for (int64_t oy = 0; oy < win.y.size(); ++oy)
      for (int64_t ox = 0; ox < win.x.size(); ++ox) {
        // A window wholly in the padding gives 0, as PyTorch (it skips the division).
        if (ox == full_lo && full_hi > full_lo && win.y.taps[oy] > 0) {
          // The ISA's kernel takes each output's taps in the order below.
          const auto [first, columns] = columns_of(win, in_w, oy, full_lo, full_hi, (planes - p) * in_plane);
          kernels().of<T>().sum_pool_columns(columns, src + first, sums.data());
          const double divisor = rule.of(win, oy, full_lo);  // the same for every full column
          for (int64_t j = 0; j < full_hi - full_lo; ++j) *dst++ = static_cast<T>(sums[j] / divisor);
          ox = full_hi - 1;
          continue;
        }
        double sum = 0;
        for_each_tap(win.y, win.x, in_w, oy, ox, [&](int64_t at) { sum += double(src[at]); });
        const bool empty_window = win.y.taps[oy] == 0 || win.x.taps[ox] == 0;
        *dst++ = empty_window ? T(0) : static_cast<T>(sum / rule.of(win, oy, ox));
      }
  });
}

// avg_pool_backward over a tiling: an input's gradient is its window's share, 0.0 + gradient /
// divisor rounded to T (as the accumulation in double from 0.0); the rows of a window are copies.
template <class T>
void spread_average_pool(const Windows& win, const Tiling& t, const AverageRule& rule, int64_t planes, int64_t in_h,
                         int64_t in_w, const T* grad, T* gin) {
  const int64_t in_plane = in_h * in_w, ow = win.x.size();
  for_each_plane(planes, double(in_plane + win.out_plane()), [&](int64_t p) {
    std::vector<T> shares(ow);
    T* dst = gin + p * in_plane;
    for (int64_t y = 0; y < in_h; ++y) {
      T* row = dst + y * in_w;
      const int64_t oy = t.row_window[y];
      if (oy < 0) {
        std::fill(row, row + in_w, T(0));
      } else if (y > 0 && t.row_window[y - 1] == oy) {
        std::copy(row - in_w, row, row);
      } else {
        const T* g = grad + p * win.out_plane() + oy * ow;
        for (int64_t ox = 0; ox < ow; ++ox) shares[ox] = static_cast<T>(0.0 + double(g[ox]) / rule.of(win, oy, ox));
        fill_tiled_row(
            t, in_w, row, [&](int64_t ox, int64_t) { return shares[ox]; },
            [&](T* out) { kernels().of<T>().spread_average(shares.data() + t.lo, t.hi - t.lo, t.width, out); });
      }
    }
  });
}

// The input gradient of avg_pool: each output's gradient over its divisor, added to every input of
// its window (accumulated in double per plane, rounded once).
template <class T>
void avg_pool_backward(const Windows& win, const AverageRule& rule, int64_t planes, int64_t in_h, int64_t in_w,
                       const T* grad, T* gin) {
  if (const auto tiling = tiling_of(win, in_h, in_w))
    return spread_average_pool(win, *tiling, rule, planes, in_h, in_w, grad, gin);
  const int64_t in_plane = in_h * in_w, out_plane = win.out_plane();
  // Tap-major over a row of full columns, the last tap first: an input x takes the outputs j with
  // x = tx + j * stride in the order of j, as output by output.
  int64_t full_lo, full_hi;
  std::tie(full_lo, full_hi) = full_columns(win);
  for_each_plane(planes, double(in_plane + out_plane) + double(win.taps_per_plane()), [&](int64_t p) {
    std::vector<double> acc(in_plane, 0.0), shares(full_hi - full_lo);
    const T* g = grad + p * out_plane;
    for (int64_t oy = 0; oy < win.y.size(); ++oy)
      for (int64_t ox = 0; ox < win.x.size(); ++ox) {
        if (ox == full_lo && full_hi > full_lo) {
          const double divisor = rule.of(win, oy, full_lo);
          for (int64_t j = 0; j < full_hi - full_lo; ++j) shares[j] = double(*g++) / divisor;
          for (int64_t ty = 0; ty < win.y.taps[oy]; ++ty) {
            double* row = acc.data() + (win.y.first[oy] + ty * win.y.step) * in_w + win.x.first[full_lo];
            for (int64_t tx = win.x.kernel - 1; tx >= 0; --tx)
              for (int64_t j = 0; j < full_hi - full_lo; ++j) row[tx + j * win.x.stride] += shares[j];
          }
          ox = full_hi - 1;
          continue;
        }
        const double share = double(*g++) / rule.of(win, oy, ox);
        for_each_tap(win.y, win.x, in_w, oy, ox, [&](int64_t at) { acc[at] += share; });
      }
    T* dst = gin + p * in_plane;
    for (int64_t i = 0; i < in_plane; ++i) dst[i] = static_cast<T>(acc[i]);
  });
}

// PyTorch's errors for indices outside an h x w plane: it names the last invalid one (its kernel
// writes the valid ones and keeps going), or, for an empty plane, the first.
void check_plane_indices(const Tensor& indices, int64_t h, int64_t w) {
  const int64_t* idx = indices->data_as<int64_t>();
  const int64_t n = indices->numel();
  // (PyTorch gathers from the planes flattened into one dim, the rank's second last.)
  if (n > 0 && h * w == 0)
    throw RuntimeError(cat("index ", idx[0], " is out of bounds for dimension ", indices->dim() - 2, " with size 0"));
  for (int64_t i = n - 1; i >= 0; --i)
    if (idx[i] < 0 || idx[i] >= h * w)
      throw RuntimeError(cat("Found an invalid max index: ", idx[i], " (output volumes are of size ", h, "x", w, ")"));
}

// The floating compute type an op runs a storage dtype in (float16 and bfloat16 in float32).
DType pooled_type(const Tensor& x, const char* kernel, bool integers) {
  const DType computed = compute_type(x->dtype);
  if (computed == DType::Float32 || computed == DType::Float64 || (integers && computed == DType::Int64))
    return computed;
  throw not_implemented_for(kernel, x->dtype);
}

// What an average pool needs to rebuild its windows for an input plane of any size.
struct AveragePool {
  bool adaptive = false;
  PoolParams params{};
  int64_t out_h = 0, out_w = 0;  // adaptive
  AverageRule rule;
  // The output plane's size, known before its windows are built (the output is allocated first:
  // an output too large to allocate fails there).
  std::pair<int64_t, int64_t> out_size(int64_t in_h, int64_t in_w) const {
    if (adaptive) return {out_h, out_w};
    const PoolParams& p = params;
    return {pooled_size(in_h, p.kernel[0], p.stride[0], p.padding[0], 1, p.ceil_mode),
            pooled_size(in_w, p.kernel[1], p.stride[1], p.padding[1], 1, p.ceil_mode)};
  }
  Windows windows(int64_t in_h, int64_t in_w) const {
    if (adaptive) return {adaptive_windows(in_h, out_h), adaptive_windows(in_w, out_w)};
    const PoolParams& p = params;
    return {sliding_windows(in_h, p.kernel[0], p.stride[0], p.padding[0], 1, p.ceil_mode, true),
            sliding_windows(in_w, p.kernel[1], p.stride[1], p.padding[1], 1, p.ceil_mode, true)};
  }
  const char* forward_name() const { return adaptive ? "AdaptiveAvgPool2DBackward0" : "AvgPool2DBackward0"; }
  const char* backward_name() const {
    return adaptive ? "AdaptiveAvgPool2DBackwardBackward0" : "AvgPool2DBackwardBackward0";
  }
};

// The forward saves its input (as PyTorch): the backward op takes it as a second input, with a zero
// gradient (PyTorch's avg_pool2d_backward(grad, self) and max_pool2d_with_indices_backward(grad,
// self, ...)), so that the gradient it records has the same edges. `self` describes that input.
struct AveragePoolNode : Node {
  AveragePool pool;
  InputMeta self;
};

// Max pooling and gather_planes: the gradient is scattered (added) at the saved indices (saved[0])
// into planes of in_h x in_w, by an op recorded under scatter_name. A max pool also saves its input
// (saved[1]), the scatter's second input.
struct PlaneSelectNode : Node {
  int64_t in_h = 0, in_w = 0;
  const char* scatter_name = "";
  std::optional<Windows> windows;  // a max pool's
};

// scatter_planes: with a second edge (to the max pool's input) when it is a max pool's gradient.
struct PlaneScatterNode : Node {
  InputMeta self;
};

}  // namespace

FG_NODE_UNNAMED(AveragePoolBackward, AveragePoolNode);
FG_NODE_UNNAMED(AveragePoolBackwardBackward, AveragePoolNode);
FG_NODE_UNNAMED(PlaneSelectBackward, PlaneSelectNode);
FG_NODE_UNNAMED(PlaneScatterBackward, PlaneScatterNode);

namespace {

Tensor average_pool(const Tensor& x, const AveragePool& pool) {
  check_pool_input(x, pool.adaptive ? "adaptive_avg_pool2d" : "avg_pool2d");
  const DType computed = pooled_type(x, pool.adaptive ? "adaptive_avg_pool2d" : "avg_pool2d", false);
  const int64_t in_h = x->shape[x->dim() - 2], in_w = x->shape.back();
  const auto [out_h, out_w] = pool.out_size(in_h, in_w);
  Tensor out = empty(with_plane(x->shape, out_h, out_w), computed);
  const Windows win = pool.windows(in_h, in_w);
  Tensor in = cast_values(dense(x), computed);
  dispatch_floating(computed, [&](auto tag) {
    using T = decltype(tag);
    avg_pool<T>(win, pool.rule, plane_count(x), in_h, in_w, in->data_as<T>(), out->data_as<T>());
  });
  out = cast_values(out, x->dtype);
  if (auto* node = record<AveragePoolBackward>(out, {&x}, pool.forward_name())) {
    node->pool = pool;
    node->save(x);
  }
  return out;
}

// The gradient of average_pool(self) from `grad`.
Tensor average_pool_backward(const Tensor& grad, const Tensor& self, const AveragePool& pool) {
  const int64_t in_h = self->shape[self->dim() - 2], in_w = self->shape.back();
  const DType computed = compute_type(grad->dtype);
  const Windows win = pool.windows(in_h, in_w);
  Tensor g = cast_values(dense(grad), computed);
  Tensor gin = empty(with_plane(grad->shape, in_h, in_w), computed);
  dispatch_floating(computed, [&](auto tag) {
    using T = decltype(tag);
    avg_pool_backward<T>(win, pool.rule, plane_count(grad), in_h, in_w, g->data_as<T>(), gin->data_as<T>());
  });
  gin = cast_values(gin, grad->dtype);
  if (auto* node = record<AveragePoolBackwardBackward>(gin, {&grad, &self}, pool.backward_name())) {
    node->pool = pool;
    node->self = InputMeta::of(self);
  }
  return gin;
}

Tensor gather_planes(const Tensor& values, const Tensor& indices);

// out (leading dims of `values`, h, w) = 0, then out[plane][indices[i]] = values[i] (added with
// `accumulate`) for the elements i of each plane of `values` and `indices` (same shape). Recorded
// under node_name; its gradient is the gather at the same indices.
// scatter_planes's result in values' dtype, recorded under node_name (with the max pool's input
// as a second edge when `self` is defined).
Tensor finish_scatter(Tensor out, const Tensor& values, const Tensor& indices, const char* node_name,
                      const Tensor& self) {
  out = cast_values(out, values->dtype);
  auto* node = self ? record<PlaneScatterBackward>(out, {&values, &self}, node_name)
                    : record<PlaneScatterBackward>(out, {&values}, node_name);
  if (node) {
    node->save(indices);
    if (self) node->self = InputMeta::of(self);
  }
  return out;
}

// A max pool's gradient passes the pool's input as `self` (an edge with a zero gradient) and its
// windows (whose indices these are); else undefined and null.
Tensor scatter_planes(const Tensor& values, const Tensor& indices, int64_t h, int64_t w, bool accumulate,
                      const char* node_name, const Tensor& self, const Windows* windows = nullptr) {
  if (values->dim() < 2 || indices->shape != values->shape || indices->dtype != DType::Int64)
    throw RuntimeError("scatter_planes: expected values and int64 indices of the same shape");
  const DType computed = pooled_type(values, "max_unpool2d", false);
  Tensor out = empty(with_plane(values->shape, h, w), computed);
  // Into empty planes nothing is written, and PyTorch checks no index.
  if (h * w == 0) return finish_scatter(out, values, indices, node_name, self);
  Tensor v = cast_values(dense(values), computed), idx = dense(indices);
  check_plane_indices(idx, h, w);
  const int64_t planes = plane_count(values), in_plane = values->shape[values->dim() - 2] * values->shape.back();
  // Where no two values land on one element (an unpool, or a max pool whose windows share no input),
  // they are stored in T: the accumulation in double from 0.0 would round each back to itself.
  const bool one_per_element = !accumulate || (windows && tiling_of(*windows, h, w));
  dispatch_floating(computed, [&](auto tag) {
    using T = decltype(tag);
    const T* src = v->data_as<T>();
    const int64_t* at = idx->data_as<int64_t>();
    T* dst = out->data_as<T>();
    if (one_per_element) {
      return for_each_plane(planes, double(in_plane + h * w), [&](int64_t p) {
        T* plane = dst + p * h * w;
        std::fill(plane, plane + h * w, T(0));
        // + 0: a -0 gradient added to the zeros gives +0, as PyTorch's scatter-add.
        for (int64_t i = p * in_plane; i < (p + 1) * in_plane; ++i) plane[at[i]] = accumulate ? src[i] + T(0) : src[i];
      });
    }
    for_each_plane(planes, double(in_plane + h * w), [&](int64_t p) {
      std::vector<double> acc(h * w, 0.0);
      for (int64_t i = p * in_plane; i < (p + 1) * in_plane; ++i)
        acc[at[i]] = accumulate ? acc[at[i]] + double(src[i]) : double(src[i]);
      for (int64_t i = 0; i < h * w; ++i) dst[p * h * w + i] = static_cast<T>(acc[i]);
    });
  });
  return finish_scatter(out, values, indices, node_name, self);
}

// out[i] = values[plane][indices[i]] for the elements i of each plane of `indices`: the gradient of
// scatter_planes. Recorded as GatherBackward0, whose gradient is a scatter-add.
Tensor gather_planes(const Tensor& values, const Tensor& indices) {
  if (values->dim() != indices->dim() || values->dim() < 2 || indices->dtype != DType::Int64 ||
      !std::equal(values->shape.begin(), values->shape.end() - 2, indices->shape.begin()))
    throw RuntimeError("gather_planes: expected values and int64 indices with the same leading dims");
  const int64_t h = values->shape[values->dim() - 2], w = values->shape.back();
  Tensor out = empty(indices->shape, values->dtype);
  Tensor v = dense(values), idx = dense(indices);
  check_plane_indices(idx, h, w);
  const int64_t planes = plane_count(indices), out_plane = indices->shape[indices->dim() - 2] * indices->shape.back();
  dispatch_stored(values->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* src = v->data_as<T>();
    const int64_t* at = idx->data_as<int64_t>();
    T* dst = out->data_as<T>();
    for_each_plane(planes, double(out_plane), [&](int64_t p) {
      for (int64_t i = p * out_plane; i < (p + 1) * out_plane; ++i) dst[i] = src[p * h * w + at[i]];
    });
  });
  if (auto* node = record<PlaneSelectBackward>(out, {&values}, "GatherBackward0")) {
    node->in_h = h, node->in_w = w;
    node->scatter_name = "ScatterAddBackward0";
    node->save(indices);
  }
  return out;
}

// Max pooling into an out_h x out_w plane, over the windows make_windows() builds (after the output
// is allocated: an output too large to allocate fails there first).
template <class MakeWindows>
std::pair<Tensor, Tensor> indexed_max_pool(const Tensor& x, int64_t out_h, int64_t out_w, MakeWindows&& make_windows,
                                           const char* kernel, const char* node_name, const char* backward_name) {
  const DType computed = pooled_type(x, kernel, true);
  const int64_t in_h = x->shape[x->dim() - 2], in_w = x->shape.back();
  if (in_h < 1 || in_w < 1) throw RuntimeError(cat(kernel, ": expected a non-empty input plane"));
  const Shape out_shape = with_plane(x->shape, out_h, out_w);
  Tensor out = empty(out_shape, computed), indices = empty(out_shape, DType::Int64);
  const Windows win = make_windows(in_h, in_w);
  Tensor in = cast_values(dense(x), computed);
  dispatch(computed, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>)
      max_pool<T>(win, plane_count(x), in_h, in_w, in->data_as<T>(), out->data_as<T>(), indices->data_as<int64_t>());
  });
  out = cast_values(out, x->dtype);
  if (auto* node = record<PlaneSelectBackward>(out, {&x}, node_name)) {
    node->in_h = in_h, node->in_w = in_w;
    node->scatter_name = backward_name;
    node->windows = win;
    node->save(indices, true);
    node->save(x);
  }
  return {out, indices};
}

}  // namespace

GradList AveragePoolBackward::apply(GradList&& grads) { return {average_pool_backward(grads[0], unpack(0), pool)}; }
GradList AveragePoolBackwardBackward::apply(GradList&& grads) {
  GradList out(2);
  if (needs_input_grad(0)) out[0] = average_pool(grads[0], pool);
  if (needs_input_grad(1)) out[1] = zeros(self.shape, self.dtype);
  return out;
}

GradList PlaneSelectBackward::apply(GradList&& grads) {
  const Tensor self = saved.size() > 1 ? unpack(1) : Tensor();
  return {scatter_planes(grads[0], unpack(0), in_h, in_w, true, scatter_name, self, windows ? &*windows : nullptr)};
}
GradList PlaneScatterBackward::apply(GradList&& grads) {
  GradList out(next_edges.size());
  if (needs_input_grad(0)) out[0] = gather_planes(grads[0], unpack(0));
  if (needs_input_grad(1)) out[1] = zeros(self.shape, self.dtype);
  return out;
}

std::pair<Tensor, Tensor> max_pool2d(const Tensor& x, const PoolParams& p) {
  check_pool_input(x, "max_pool2d");
  check_pool_params(p, "max_pool2d");
  const int64_t in_h = x->shape[x->dim() - 2], in_w = x->shape.back();
  const int64_t out_h = pooled_size(in_h, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0], p.ceil_mode);
  const int64_t out_w = pooled_size(in_w, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1], p.ceil_mode);
  check_output_size(out_h, out_w, "max_pool2d", false);
  auto windows = [&](int64_t h, int64_t w) {
    return Windows{sliding_windows(h, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0], p.ceil_mode, false),
                   sliding_windows(w, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1], p.ceil_mode, false)};
  };
  return indexed_max_pool(x, out_h, out_w, windows, "max_pool2d", "MaxPool2DWithIndicesBackward0",
                          "MaxPool2DWithIndicesBackwardBackward0");
}

std::pair<Tensor, Tensor> adaptive_max_pool2d(const Tensor& x, int64_t out_h, int64_t out_w) {
  check_pool_input(x, "adaptive_max_pool2d");
  check_output_size(out_h, out_w, "adaptive_max_pool2d", true);
  auto windows = [&](int64_t h, int64_t w) { return Windows{adaptive_windows(h, out_h), adaptive_windows(w, out_w)}; };
  return indexed_max_pool(x, out_h, out_w, windows, "adaptive_max_pool2d", "AdaptiveMaxPool2DBackward0",
                          "AdaptiveMaxPool2DBackwardBackward0");
}

Tensor avg_pool2d(const Tensor& x, const PoolParams& p, bool count_include_pad, int64_t divisor_override) {
  check_pool_input(x, "avg_pool2d");
  check_pool_params(p, "avg_pool2d");
  if (divisor_override < 0) throw RuntimeError("avg_pool2d: invalid divisor");
  AveragePool pool;
  pool.params = p;
  pool.params.dilation[0] = pool.params.dilation[1] = 1;
  pool.rule = {count_include_pad, divisor_override};
  const int64_t in_h = x->shape[x->dim() - 2], in_w = x->shape.back();
  const auto [out_h, out_w] = pool.out_size(in_h, in_w);
  check_output_size(out_h, out_w, "avg_pool2d", false);
  return average_pool(x, pool);
}

Tensor adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w) {
  check_pool_input(x, "adaptive_avg_pool2d");
  check_output_size(out_h, out_w, "adaptive_avg_pool2d", true);
  AveragePool pool;
  pool.adaptive = true;
  pool.out_h = out_h, pool.out_w = out_w;
  pool.rule = {false, 0};
  return average_pool(x, pool);
}

Tensor max_unpool2d(const Tensor& x, const Tensor& indices, int64_t out_h, int64_t out_w) {
  check_pool_input(x, "max_unpool2d");
  if (out_h < 0 || out_w < 0) throw RuntimeError("max_unpool2d: invalid output size");
  return scatter_planes(x, indices, out_h, out_w, false, "MaxUnpool2DBackward0", Tensor());
}

}  // namespace fg
