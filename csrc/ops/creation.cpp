// Making tensors, copying them, and converting between dtypes.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "autograd/node.h"
#include "core/shape.h"
#include "kernels/isa.h"
#include "kernels/loops.h"
#include "kernels/runs.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

namespace {
// As PyTorch, a float that int64 cannot hold (NaN, inf, out of range) is refused, not converted.
void check_int64_range(double value) {
  if (!(value >= -9223372036854775808.0 && value < 9223372036854775808.0))
    throw RuntimeError(cat("value cannot be converted to type int64_t without overflow"));
}

// As PyTorch's checked_convert: a fill value outside a narrower integer type's range (or NaN) is
// refused; uint8 takes -255..255, a negative value wrapping around.
void check_fits(const Scalar& value, DType dtype) {
  double lowest, highest;
  const char* name;
  switch (dtype) {
    case DType::Int64:
      if (value.kind == Category::Floating) check_int64_range(value.value);
      return;
    case DType::Int32: lowest = -2147483648.0, highest = 2147483647.0, name = "int"; break;
    case DType::Int16: lowest = -32768, highest = 32767, name = "int16_t"; break;
    case DType::Int8: lowest = -128, highest = 127, name = "int8_t"; break;
    case DType::UInt8: lowest = -255, highest = 255, name = "uint8_t"; break;
    default: return;
  }
  if (!(value.value >= lowest && value.value <= highest))
    throw RuntimeError(cat("value cannot be converted to type ", name, " without overflow"));
}
}  // namespace

Tensor full(const Shape& shape, const Scalar& value, DType dtype) {
  check_fits(value, dtype);
  Tensor out = empty(shape, dtype);
  dispatch_stored(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* data = out->data_as<T>();
    T v = value.to<T>();
    for (int64_t i = 0, n = out->numel(); i < n; ++i) data[i] = v;
  });
  return out;
}
Tensor full(const Shape& shape, double value, DType dtype) { return full(shape, Scalar::from_float(value), dtype); }

Tensor zeros(const Shape& shape, DType dtype) { return full(shape, 0.0, dtype); }
Tensor zeros_like(const Tensor& t) { return full(t->shape, 0.0, t->dtype); }
Tensor ones_like(const Tensor& t) { return full(t->shape, 1.0, t->dtype); }

namespace {
// std::fma is one instruction where the CPU has FMA, but a libm call in the baseline x86-64 build:
// the fills of arange and linspace are also compiled for AVX2 and FMA (the GCC/Clang `target`
// attribute; the fills are inlined into those copies), taken when the active ISA has them: a long
// arange or linspace is several times faster.
#if defined(__x86_64__) && defined(__GNUC__)
#define FG_FUSED_COPY 1
#define FG_FILL_INLINE __attribute__((always_inline)) inline
#else
#define FG_FILL_INLINE inline
#endif

// ATen's arange kernel for a floating type T, in its accumulate type A (double for float32 and
// float64, float for the 16-bit floats), as its x86 build runs it: start + step * i fused. ATen's
// parallel_for hands its threads, past 32768 values, as many chunks of equal size as threads (at
// most one per 32768 values; fastgrad's thread count stands in for PyTorch's, the same by default:
// the physical cores), and in each chunk runs of two 32-byte vectors come from Vectorized<T>::arange
// (the vector's first value rounded to T, then + j * step for lane j, fused), the rest one value at a
// time. So the values of a long arange depend on the number of threads, as PyTorch's do.
template <class T, class A>
FG_FILL_INLINE void fill_arange(T* data, int64_t n, A start, A step, int64_t threads) {
  constexpr int64_t grain = 32768, lanes = 32 / sizeof(T);
  const int64_t chunks = n > grain && threads > 1 ? std::min(threads, (n + grain - 1) / grain) : 1;
  const int64_t chunk = std::max<int64_t>((n + chunks - 1) / chunks, 1);
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t end = std::min(n, begin + chunk);
    const int64_t runs_end = begin + (end - begin) / (2 * lanes) * (2 * lanes);
    int64_t i = begin;
    for (; i < runs_end; i += lanes) {
      const A first = value_cast<A>(value_cast<T>(std::fma(step, A(i), start)));
      for (int64_t j = 0; j < lanes; ++j) data[i + j] = value_cast<T>(std::fma(A(j), step, first));
    }
    for (; i < end; ++i) data[i] = value_cast<T>(std::fma(step, A(i), start));
  }
}

// ATen's linspace kernel for a floating T: the step (end - start) / (steps - 1) in T, the first half
// start + step * i and the second end - step * (steps - 1 - i), fused in its x86 build for float and
// double; the 16-bit floats round each operation to 16 bits, as c10::Half's operators do.
template <class T>
FG_FILL_INLINE void fill_linspace(T* data, int64_t steps, double start, double end) {
  const int64_t halfway = steps / 2;
  if constexpr (is_half_v<T>) {
    auto round = [](float x) { return T::from_float(x).to_float(); };
    const float first = round(float(start)), last = round(float(end));
    const float step = round(round(last - first) / round(float(steps - 1)));
    for (int64_t i = 0; i < steps; ++i)
      data[i] = T::from_float(i < halfway ? first + round(step * round(float(i)))
                                          : last - round(step * round(float(steps - 1 - i))));
  } else {
    const T first = T(start), last = T(end), step = (last - first) / T(steps - 1);
    for (int64_t i = 0; i < steps; ++i)
      data[i] = i < halfway ? std::fma(step, T(i), first) : std::fma(-step, T(steps - 1 - i), last);
  }
}

#ifdef FG_FUSED_COPY
template <class T, class A>
__attribute__((target("avx2,fma"))) void fill_arange_fused(T* data, int64_t n, A start, A step, int64_t threads) {
  fill_arange(data, n, start, step, threads);
}
template <class T>
__attribute__((target("avx2,fma"))) void fill_linspace_fused(T* data, int64_t steps, double start, double end) {
  fill_linspace(data, steps, start, end);
}
#endif

// The copy compiled with FMA when the active ISA has it (every ISA but the scalar baseline).
bool fused_copy() {
#ifdef FG_FUSED_COPY
  static const bool fused = active_isa() != Isa::Scalar;
  return fused;
#else
  return false;
#endif
}

template <class T, class A>
void arange_values(T* data, int64_t n, A start, A step) {
#ifdef FG_FUSED_COPY
  if (fused_copy()) return fill_arange_fused(data, n, start, step, int64_t(get_num_threads()));
#endif
  fill_arange(data, n, start, step, int64_t(get_num_threads()));
}

template <class T>
void linspace_values(T* data, int64_t steps, double start, double end) {
#ifdef FG_FUSED_COPY
  if (fused_copy()) return fill_linspace_fused(data, steps, start, end);
#endif
  fill_linspace(data, steps, start, end);
}
}  // namespace

Tensor arange(double start, double end, double step, DType dtype) {
  if (step == 0) throw RuntimeError("step must be nonzero");
  if (!std::isfinite(start) || !std::isfinite(end)) throw RuntimeError(cat("unsupported range: ", start, " -> ", end));
  if ((step > 0 && end < start) || (step < 0 && end > start))
    throw RuntimeError("upper bound and lower bound inconsistent with step sign");
  const bool sixteen_bit_float = dtype == DType::Float16 || dtype == DType::BFloat16;
  // Other storage dtypes (core/dtype.h) count in their compute type.
  if (compute_type(dtype) != dtype && !sixteen_bit_float)
    return to_dtype(arange(start, end, step, compute_type(dtype)), dtype);
  double size = std::ceil((end - start) / step);
  if (!(size < 9223372036854775808.0)) throw RuntimeError(cat("invalid size, possible overflow?"));
  if (dtype == DType::Int64) {
    check_int64_range(start);
    check_int64_range(end);
  }
  auto n = static_cast<int64_t>(size);
  Tensor out = empty({n}, dtype);
  dispatch_stored(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* data = out->data_as<T>();
    if constexpr (is_half_v<T>) {
      arange_values(data, n, float(start), float(step));
    } else if constexpr (std::is_floating_point_v<T>) {
      arange_values(data, n, start, step);
    } else {
      for (int64_t i = 0; i < n; ++i) data[i] = value_cast<T>(start + static_cast<double>(i) * step);
    }
  });
  return out;
}

Tensor linspace(double start, double end, int64_t steps, DType dtype) {
  if (steps < 0) throw RuntimeError("number of steps must be non-negative");
  if (dtype == DType::Bool) throw not_implemented_for("linspace_cpu", dtype);
  if (dtype == DType::Int64) {
    check_int64_range(start);
    check_int64_range(end);
  }
  if (steps == 1) return full({1}, start, dtype);
  if (!is_floating(dtype) && compute_type(dtype) != dtype)
    return to_dtype(linspace(start, end, steps, compute_type(dtype)), dtype);
  Tensor out = empty({steps}, dtype);
  dispatch_stored(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* data = out->data_as<T>();
    if constexpr (is_half_v<T> || std::is_floating_point_v<T>) {
      linspace_values(data, steps, start, end);
    } else {  // integers: a double step from the integer bounds, each value truncated
      const double first = double(value_cast<T>(start)), last = double(value_cast<T>(end));
      const double step = (last - first) / double(steps - 1);
      for (int64_t i = 0; i < steps; ++i)
        data[i] = value_cast<T>(i < steps / 2 ? std::fma(step, double(i), first)
                                              : std::fma(-step, double(steps - 1 - i), last));
    }
  });
  return out;
}

Tensor eye(int64_t n, int64_t m, DType dtype) {
  if (n < 0 || m < 0) throw RuntimeError(cat("n must be greater or equal to 0, got ", n < 0 ? n : m));
  Tensor out = zeros({n, m}, dtype);
  dispatch_stored(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < std::min(n, m); ++i) out->data_as<T>()[i * m + i] = value_cast<T>(1);
  });
  return out;
}

void copy_values(const Tensor& dst, const Tensor& src) {
  Shape src_strides = broadcast_strides(src, dst->shape);
  // Into a contiguous tensor of the same type, the source's contiguous runs are copied whole: a
  // clone, contiguous() of a permutation that keeps the last dim (attention's transpose(1, 2)).
  if (dst->dtype == src->dtype && dst->is_contiguous()) {
    const InnerRuns<1> runs = inner_runs<1>(dst->shape, {src_strides.data()});
    constexpr int64_t kShortRun = 16;  // below it, the element loop below is faster
    if (!runs.broadcast[0] && (runs.inner >= kShortRun || runs.outer.empty())) {
      const int64_t item = static_cast<int64_t>(itemsize(dst->dtype));
      char* to = dst->data();
      const char* from = src->data();
      for_each_run(runs, 0, dst->numel(), [&](int64_t at, const std::array<int64_t, 1>& offset, int64_t count) {
        std::memcpy(to + at * item, from + offset[0] * item, static_cast<size_t>(count * item));
      });
      return;
    }
  }
  dispatch_stored(dst->dtype, [&](auto dst_tag) {
    using D = decltype(dst_tag);
    dispatch_stored(src->dtype, [&](auto src_tag) {
      using S = decltype(src_tag);
      D* d = dst->data_as<D>();
      const S* s = src->data_as<S>();
      for_each_offset<2>(dst->shape, {dst->strides.data(), src_strides.data()},
                         [&](int64_t, const std::array<int64_t, 2>& o) { d[o[0]] = value_cast<D>(s[o[1]]); });
    });
  });
}

Scalar item(const Tensor& t) {
  if (t->numel() != 1) throw RuntimeError(cat("a Tensor with ", t->numel(), " elements cannot be converted to Scalar"));
  return dispatch_stored(t->dtype, [&](auto tag) {
    using T = decltype(tag);
    T v = *t->data_as<T>();
    if constexpr (std::is_same_v<T, bool>) return Scalar::from_bool(v);
    else if constexpr (std::is_integral_v<T>) return Scalar::from_int(v);
    else return Scalar::from_float(value_cast<double>(v));
  });
}

// ---- differentiable copies

struct ToCopyBackward0 final : Node {
  FG_NODE_MEMBERS(ToCopyBackward0)
  DType source = DType::Float32;
};
GradList ToCopyBackward0::apply(GradList&& grads) { return {to_dtype(grads[0], source)}; }
Tensor to_dtype(const Tensor& t, DType dtype) {
  if (t->dtype == dtype) return t;
  Tensor out = empty(t->shape, dtype);
  copy_values(out, t);
  // Only floating results carry gradients; casting to int64/bool ends the graph.
  if (is_floating(dtype) && is_floating(t->dtype))
    if (auto* node = record<ToCopyBackward0>(out, {&t})) node->source = t->dtype;
  return out;
}

GradList IdentityBackward::apply(GradList&& grads) { return {grads[0]}; }
Tensor clone(const Tensor& t) {
  Tensor out = empty(t->shape, t->dtype);
  copy_values(out, t);
  record<IdentityBackward>(out, {&t}, "CloneBackward0");
  return out;
}

Tensor contiguous(const Tensor& t) { return t->is_contiguous() ? t : clone(t); }

Tensor dense(const Tensor& t) {
  if (t->is_contiguous()) return t;
  Tensor out = empty(t->shape, t->dtype);
  copy_values(out, t);
  return out;
}

bool is_repeated(const Tensor& t) {
  return t->numel() > 0 && std::all_of(t->strides.begin(), t->strides.end(), [](int64_t s) { return s == 0; });
}

}  // namespace fg
