// Private to csrc/ops: what the elementwise op files share (elementwise.cpp, integer_division.cpp,
// predicates.cpp, unary.cpp): type promotion's pieces, the strided maps with their vector kernels, and
// the node of binary ops. Templates are defined here; the other helpers in elementwise.cpp.
#pragma once

#include <optional>
#include <type_traits>

#include "autograd/node.h"
#include "core/shape.h"
#include "kernels/kernel_table.h"
#include "kernels/loops.h"
#include "kernels/runs.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

// Defined in elementwise.cpp.
using MaybeType = std::optional<DType>;
MaybeType promote_opt(MaybeType a, DType b);
DType scalar_type(const Scalar& s);
DType result_type_of(std::initializer_list<const Tensor*> tensors, MaybeType wrapped);
DType float_type(DType d);
Tensor vector_unary(const Tensor& x, DType dtype, VecUnary op);
Tensor scalar_tensor(double value, DType dtype);
Scalar stored_scalar(const Scalar& s, DType dtype);

// Below this many elements per run, the strided loop beats a kernel call per run.
inline constexpr int64_t kMinRun = 16;

// Calls kernel(out_offset, offsets, broadcast, count) for the runs (runs.h) of N operands, when they
// split into runs of at least `min_run` elements (else returns false). Long loops split across
// threads by elements, whole runs or pieces of one (each element is computed alone, so the split
// never changes a result).
template <size_t N, class F>
bool vector_runs(const Shape& shape, const std::array<const int64_t*, N>& strides, F kernel,
                 int64_t min_run = kMinRun) {
  InnerRuns<N> runs = inner_runs<N>(shape, strides);
  if (runs.inner < min_run && !runs.outer.empty()) return false;
  parallel_for(0, element_count(shape), kParallelElements, [&](int64_t lo, int64_t hi) {
    for_each_run(runs, lo, hi, [&](int64_t o, const std::array<int64_t, N>& off, int64_t count) {
      kernel(o, off, runs.broadcast, count);
    });
  });
  return true;
}

// out = a op b with the vector kernel, when the operands split into long enough runs.
// + - * / maximum minimum and ReLU's gradient (a selection) are exact: the scalar lambdas' results
// bit for bit. The float functions' scalar lambdas (atan2, ...: ops/float_binary.cpp) are their
// kernels' own values.
template <class T>
bool vector_binary(VecBinary op, const Shape& shape, const T* a, const int64_t* as, const T* b, const int64_t* bs,
                   T* out) {
  BinaryKernel<T> kernel = kernels().of<T>().binary[static_cast<int>(op)];
  return vector_runs<2>(shape, {as, bs}, [&](int64_t o, const auto& off, const auto& broadcast, int64_t count) {
    kernel(a + off[0], broadcast[0], b + off[1], broadcast[1], out + o, count);
  });
}

// f(T{}, R{}) with T the computation type `dtype` and R the stored type: T itself, or bool for
// predicates. Only these two, of the 4 x 4 pairs: each map below is compiled for 8, not 16.
template <class F>
void dispatch_computed_stored(DType dtype, DType out_dtype, F&& f) {
  dispatch(dtype, [&](auto tag) {
    if (out_dtype == DType::Bool) {
      f(tag, bool{});
    } else {
      f(tag, tag);
    }
  });
}

// out = f(a, b) over the broadcast shape, computed and stored in `dtype` (or bool for predicates);
// with the vector kernel `vec` (which computes f) where it applies.
// A storage dtype (core/dtype.h) computes in its compute type and is stored back at the end; as
// PyTorch, the operands are converted to it first (int8 1 + int64 0-d 300 adds 44).
template <class F>
Tensor binary_map(const Tensor& a, const Tensor& b, DType dtype, DType out_dtype, F f,
                  std::optional<VecBinary> vec = std::nullopt) {
  if (compute_type(dtype) != dtype || compute_type(out_dtype) != out_dtype)
    return cast_values(
        binary_map(cast_values(a, dtype), cast_values(b, dtype), compute_type(dtype), compute_type(out_dtype), f, vec),
        out_dtype);
  if (a->shape.empty() && b->shape.empty() && a->dtype == dtype && b->dtype == dtype) {
    // Two 0-d operands of the computation type (micrograd's values): nothing to broadcast or convert.
    Tensor out = result_buffer({}, out_dtype);
    dispatch_computed_stored(dtype, out_dtype, [&](auto tag, auto out_tag) {
      using T = decltype(tag);
      *out->data_as<decltype(out_tag)>() = static_cast<decltype(out_tag)>(f(*a->data_as<T>(), *b->data_as<T>()));
    });
    return out;
  }
  Shape shape = broadcast_shapes(a->shape, b->shape);
  Tensor a_converted, b_converted;
  const Tensor &ca = values_as(a, dtype, a_converted), &cb = values_as(b, dtype, b_converted);
  Shape sa = broadcast_strides(ca, shape), sb = broadcast_strides(cb, shape);
  Tensor out = result_buffer(shape, out_dtype);
  // One element goes to map2 (its shortcut): the vector kernel's loop costs more to set up there.
  if (vec && is_floating(dtype) && out_dtype == dtype && element_count(shape) > 1) {
    bool done = dispatch_floating(dtype, [&](auto tag) {
      using T = decltype(tag);
      return vector_binary(*vec, shape, ca->data_as<T>(), sa.data(), cb->data_as<T>(), sb.data(), out->data_as<T>());
    });
    if (done) return out;
  }
  dispatch_computed_stored(dtype, out_dtype, [&](auto tag, auto out_tag) {
    using T = decltype(tag);
    using R = decltype(out_tag);
    map2(shape, out->data_as<R>(), ca->data_as<T>(), sa.data(), cb->data_as<T>(), sb.data(),
         [&](T x, T y) { return static_cast<R>(f(x, y)); });
  });
  return out;
}

// out = f(x, s) with the Python number s converted to the computation type; with the vector
// kernel `vec` where it applies (computing s op x when `scalar_first`, else x op s).
template <class F>
Tensor scalar_map(const Tensor& x, const Scalar& s, DType dtype, DType out_dtype, F f,
                  std::optional<VecBinary> vec = std::nullopt, bool scalar_first = false) {
  if (compute_type(dtype) != dtype || compute_type(out_dtype) != out_dtype) {
    // PyTorch converts the number to the storage dtype too (int8 50 // 1000 is 50 // -24), except
    // in the arithmetic of the 16-bit floats, which keeps it in float32 (float16 1 * 1.0001).
    Scalar operand = is_floating(dtype) && out_dtype != DType::Bool ? s : stored_scalar(s, dtype);
    return cast_values(
        scalar_map(cast_values(x, dtype), operand, compute_type(dtype), compute_type(out_dtype), f, vec, scalar_first),
        out_dtype);
  }
  Tensor x_converted;
  const Tensor& cx = values_as(x, dtype, x_converted);
  Tensor out = result_buffer(x->shape, out_dtype);
  if (vec && is_floating(dtype) && out_dtype == dtype && x->numel() > 1) {  // as binary_map's
    bool done = dispatch_floating(dtype, [&](auto tag) {
      using T = decltype(tag);
      const T sv = s.to<T>();
      const Shape repeated(x->dim(), 0);
      const T* xp = cx->data_as<T>();
      return scalar_first
                 ? vector_binary(*vec, x->shape, &sv, repeated.data(), xp, cx->strides.data(), out->data_as<T>())
                 : vector_binary(*vec, x->shape, xp, cx->strides.data(), &sv, repeated.data(), out->data_as<T>());
    });
    if (done) return out;
  }
  dispatch_computed_stored(dtype, out_dtype, [&](auto tag, auto out_tag) {
    using T = decltype(tag);
    using R = decltype(out_tag);
    T sv = s.to<T>();
    map1(x->shape, out->data_as<R>(), cx->data_as<T>(), cx->strides.data(),
         [&](T v) { return static_cast<R>(f(v, sv)); });
  });
  return out;
}

// f(x) in `dtype`: by the vector kernel `vec` (which computes f) for float types.
template <class F>
Tensor unary_map(const Tensor& x, DType dtype, F f, std::optional<VecUnary> vec = std::nullopt) {
  if (vec && is_floating(dtype)) return vector_unary(x, dtype, *vec);
  return scalar_map(x, Scalar::from_int(0), dtype, dtype, [&](auto v, auto) { return f(v); });
}

template <class T>
bool is_negative(T v) {
  if constexpr (std::is_same_v<T, bool>) return false;
  else return v < 0;
}

// The larger (smaller) of x and y, or NaN if either is NaN, as PyTorch's maximum, minimum and clamp.
template <class T>
T max_nan(T x, T y) {
  return x > y || x != x ? x : y;
}
template <class T>
T min_nan(T x, T y) {
  return x < y || x != x ? x : y;
}

// The node of a binary op. The second operand is a tensor or a Python number; a node keeps both
// inputs' metadata and, for a number, its value, so one backward formula serves both forms.
struct BinaryNode : Node {
  InputMeta meta[2];
  double scalar = 0;
  bool other_is_scalar = false;
  double alpha = 1;  // add's and sub's scale of the second operand

  // g * alpha, as PyTorch's add and sub pass g on to their second operand.
  Tensor times_alpha(const Tensor& g) const { return alpha == 1 ? g : mul(g, Scalar::from_float(alpha)); }

  void remember(const Tensor& a, const Tensor* b, const Scalar* s) {
    meta[0] = InputMeta::of(a);
    if (b) meta[1] = InputMeta::of(*b);
    if (s) {
      scalar = s->value;
      other_is_scalar = true;
    }
  }
  // Saved operand i, or the scalar as a 0-d tensor.
  Tensor operand(size_t i) const {
    return i == 1 && other_is_scalar ? scalar_tensor(scalar, meta[0].dtype) : unpack(i);
  }
  // The gradient for input i: broadcasting undone, in the input's dtype.
  Tensor reduce(size_t i, const Tensor& g) const { return to_dtype(sum_to(g, meta[i].sizes()), meta[i].dtype); }
};

// Records node N for out = op(a, b-or-s), saving the tensor operands (a, then b) if its backward
// reads them. PyTorch wraps the number of + - * / in a tensor, so those nodes show a second, empty
// edge for it.
template <class N, bool kScalarEdge = true>
N* record_binary(const Tensor& out, const Tensor& a, const Tensor* b, const Scalar* s, bool save_operands) {
  N* node = b ? record<N>(out, {&a, b}) : record<N>(out, {&a});
  if (!node) return nullptr;
  if (!b && kScalarEdge) node->next_edges.push_back(Edge{});
  node->remember(a, b, s);
  if (save_operands) {
    node->save(a);
    if (b) node->save(*b);
  }
  return node;
}

}  // namespace fg
