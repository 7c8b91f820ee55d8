// Elementwise ops with broadcasting and PyTorch's type promotion. Each op: its forward (a scalar
// lambda over the strided loop, and for float types the vector kernel that computes the same) and,
// right after it, the backward node that undoes it.
#include <cmath>

#include "autograd/node.h"
#include "core/numeric.h"
#include "core/shape.h"
#include "kernels/kernel_table.h"
#include "kernels/loops.h"
#include "kernels/runs.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

// ---- type promotion, as PyTorch: tensors with dims decide first; 0-d tensors, then Python
// numbers, may only raise the category (bool < integral < floating), never the width.
namespace {

using MaybeType = std::optional<DType>;

MaybeType promote_opt(MaybeType a, DType b) { return a ? promote(*a, b) : b; }

MaybeType combine_categories(MaybeType higher, MaybeType lower) {
  if (!higher) return lower;
  if (!lower || is_floating(*higher)) return higher;
  if (*higher == DType::Bool || is_floating(*lower)) return promote(*higher, *lower);
  return higher;
}

DType scalar_type(const Scalar& s) {
  return s.kind == Category::Floating ? DType::Float32 : s.kind == Category::Integral ? DType::Int64 : DType::Bool;
}

DType result_type_of(std::initializer_list<const Tensor*> tensors, MaybeType wrapped) {
  MaybeType dimmed, zero_dim;
  for (const Tensor* t : tensors) {
    if ((*t)->dim() > 0) dimmed = promote_opt(dimmed, (*t)->dtype);
    else zero_dim = promote_opt(zero_dim, (*t)->dtype);
  }
  return *combine_categories(dimmed, combine_categories(zero_dim, wrapped));
}

}  // namespace

DType result_type(const Tensor& a, const Tensor& b) { return result_type_of({&a, &b}, std::nullopt); }
DType result_type(const Tensor& a, const Scalar& b) { return result_type_of({&a}, scalar_type(b)); }

namespace {

DType float_type(DType d) { return is_floating(d) ? d : DType::Float32; }

Tensor cast_values(const Tensor& t, DType dtype) {
  if (t->dtype == dtype) return t;
  Tensor out = empty(t->shape, dtype);
  copy_values(out, t);
  return out;
}

// Below this many elements per run, the strided loop beats a kernel call per run.
constexpr int64_t kMinRun = 16;
// A contiguous loop splits across threads into chunks of at least this many elements (each
// element is computed alone, so the split never changes a result).
constexpr int64_t kParallelElements = 1 << 15;

// out = a op b with the vector kernel, when the operands split into long enough runs (runs.h).
// + - * / maximum minimum are exact, so this gives the scalar lambdas' results bit for bit.
template <class T>
bool vector_binary(VecBinary op, const Shape& shape, const T* a, const int64_t* as, const T* b, const int64_t* bs,
                   T* out) {
  InnerRuns<2> runs = inner_runs<2>(shape, {as, bs});
  if (runs.inner < kMinRun && !runs.outer.empty()) return false;
  BinaryKernel<T> kernel = kernels().of<T>().binary[static_cast<int>(op)];
  if (runs.outer.empty()) {  // one run: long ones split across threads
    parallel_for(0, runs.inner, kParallelElements, [&](int64_t lo, int64_t hi) {
      kernel(a + (runs.broadcast[0] ? 0 : lo), runs.broadcast[0], b + (runs.broadcast[1] ? 0 : lo), runs.broadcast[1],
             out + lo, hi - lo);
    });
    return true;
  }
  for_each_run(runs, [&](int64_t o, const std::array<int64_t, 2>& off) {
    kernel(a + off[0], runs.broadcast[0], b + off[1], runs.broadcast[1], out + o, runs.inner);
  });
  return true;
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
template <class F>
Tensor binary_map(const Tensor& a, const Tensor& b, DType dtype, DType out_dtype, F f,
                  std::optional<VecBinary> vec = std::nullopt) {
  Shape shape = broadcast_shapes(a->shape, b->shape);
  Tensor ca = cast_values(a, dtype), cb = cast_values(b, dtype);
  Shape sa = broadcast_strides(ca, shape), sb = broadcast_strides(cb, shape);
  Tensor out = empty(shape, out_dtype);
  if (vec && is_floating(dtype) && out_dtype == dtype) {
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
  Tensor cx = cast_values(x, dtype);
  Tensor out = empty(x->shape, out_dtype);
  if (vec && is_floating(dtype) && out_dtype == dtype) {
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

// f(x) in floating `dtype` by the vector kernel, over a contiguous copy of x when x is not
// contiguous: one code path, so a value's result never depends on the layout it sits in.
Tensor vector_unary(const Tensor& x, DType dtype, VecUnary op) {
  Tensor src = x;
  if (x->dtype != dtype || !x->is_contiguous()) {
    src = empty(x->shape, dtype);
    copy_values(src, x);
  }
  Tensor out = empty(x->shape, dtype);
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    UnaryKernel<T> kernel = kernels().of<T>().unary[static_cast<int>(op)];
    const T* x = src->data_as<T>();
    T* y = out->data_as<T>();
    parallel_for(0, src->numel(), kParallelElements, [&](int64_t lo, int64_t hi) { kernel(x + lo, y + lo, hi - lo); });
  });
  return out;
}

// Float functions (exp, log, ...) of any tensor: in float32 for integer tensors, as PyTorch.
Tensor float_unary(const Tensor& x, VecUnary op) { return vector_unary(x, float_type(x->dtype), op); }

// f(x) in `dtype`: by the vector kernel `vec` (which computes f) for float types.
template <class F>
Tensor unary_map(const Tensor& x, DType dtype, F f, std::optional<VecUnary> vec = std::nullopt) {
  if (vec && is_floating(dtype)) return vector_unary(x, dtype, *vec);
  return scalar_map(x, Scalar::from_int(0), dtype, dtype, [&](auto v, auto) { return f(v); });
}

Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }

// Powers as PyTorch computes them; for integers by repeated squaring (wrapping on overflow, in
// unsigned arithmetic), where a negative exponent gives 1, -1 or 0 instead of a fraction.
template <class T>
T pow_value(T a, T b) {
  if constexpr (std::is_same_v<T, int64_t>) {
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
    uint64_t result = 1, base = static_cast<uint64_t>(a);
    for (uint64_t e = static_cast<uint64_t>(b); e; e >>= 1, base *= base)
      if (e & 1) result *= base;
    return static_cast<T>(result);
  } else {
    return std::pow(a, b);
  }
}

template <class T>
bool is_negative(T v) {
  if constexpr (std::is_same_v<T, bool>) return false;
  else return v < 0;
}

}  // namespace

// ---- binary arithmetic. The second operand is a tensor or a Python number; a node keeps both
// inputs' metadata and, for a number, its value, so one backward formula serves both forms.
struct BinaryNode : Node {
  InputMeta meta[2];
  double scalar = 0;
  bool other_is_scalar = false;

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

namespace {
// Records node N for out = op(a, b-or-s), saving the operands its backward reads. PyTorch wraps
// the number of + - * / in a tensor, so those nodes show a second, empty edge for it.
template <class N, bool kScalarEdge = true>
N* record_binary(const Tensor& out, const Tensor& a, const Tensor* b, const Scalar* s, bool save_a, bool save_b) {
  N* node = b ? record<N>(out, {&a, b}) : record<N>(out, {&a});
  if (!node) return nullptr;
  if (!b && kScalarEdge) node->next_edges.push_back(Edge{});
  node->remember(a, b, s);
  if (save_a) node->saved[0].save(a);
  if (save_b && b) node->saved[1].save(*b);
  return node;
}

void check_bool_subtraction(DType a, DType b) {
  if (a == DType::Bool && b == DType::Bool)
    throw RuntimeError(
        "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
        "operator instead.");
  if (a == DType::Bool || b == DType::Bool)
    throw RuntimeError(
        "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use "
        "the `~` or `logical_not()` operator instead.");
}
}  // namespace

FG_NODE_FROM(AddBackward0, BinaryNode) };
GradList AddBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  return {reduce(0, g), other_is_scalar ? Tensor() : reduce(1, g)};
}
Tensor add(const Tensor& a, const Tensor& b) {
  DType dt = result_type(a, b);
  Tensor out = binary_map(a, b, dt, dt, [](auto x, auto y) { return wrap_add(x, y); }, VecBinary::Add);
  record_binary<AddBackward0>(out, a, &b, nullptr, false, false);
  return out;
}
Tensor add(const Tensor& a, const Scalar& s) {
  DType dt = result_type(a, s);
  Tensor out = scalar_map(a, s, dt, dt, [](auto x, auto y) { return wrap_add(x, y); }, VecBinary::Add);
  record_binary<AddBackward0>(out, a, nullptr, &s, false, false);
  return out;
}

FG_NODE_FROM(SubBackward0, BinaryNode) };
GradList SubBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  return {reduce(0, g), other_is_scalar ? Tensor() : reduce(1, neg(g))};
}
Tensor sub(const Tensor& a, const Tensor& b) {
  check_bool_subtraction(a->dtype, b->dtype);
  DType dt = result_type(a, b);
  Tensor out = binary_map(a, b, dt, dt, [](auto x, auto y) { return wrap_sub(x, y); }, VecBinary::Sub);
  record_binary<SubBackward0>(out, a, &b, nullptr, false, false);
  return out;
}
Tensor sub(const Tensor& a, const Scalar& s) {
  check_bool_subtraction(a->dtype, scalar_type(s));
  DType dt = result_type(a, s);
  Tensor out = scalar_map(a, s, dt, dt, [](auto x, auto y) { return wrap_sub(x, y); }, VecBinary::Sub);
  record_binary<SubBackward0>(out, a, nullptr, &s, false, false);
  return out;
}

FG_NODE_FROM(RsubBackward1, BinaryNode) };
GradList RsubBackward1::apply(GradList&& grads) { return {reduce(0, neg(grads[0]))}; }
Tensor rsub(const Tensor& a, const Scalar& s) {
  check_bool_subtraction(a->dtype, scalar_type(s));
  DType dt = result_type(a, s);
  Tensor out = scalar_map(a, s, dt, dt, [](auto x, auto y) { return wrap_sub(y, x); }, VecBinary::Sub, true);
  record_binary<RsubBackward1, false>(out, a, nullptr, &s, false, false);
  return out;
}

FG_NODE_FROM(MulBackward0, BinaryNode) };
GradList MulBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  GradList out(2);
  if (needs_input_grad(0)) out[0] = reduce(0, mul(g, operand(1)));
  if (needs_input_grad(1)) out[1] = reduce(1, mul(g, operand(0)));
  return out;
}
Tensor mul(const Tensor& a, const Tensor& b) {
  DType dt = result_type(a, b);
  Tensor out = binary_map(a, b, dt, dt, [](auto x, auto y) { return wrap_mul(x, y); }, VecBinary::Mul);
  record_binary<MulBackward0>(out, a, &b, nullptr, true, true);
  return out;
}
Tensor mul(const Tensor& a, const Scalar& s) {
  DType dt = result_type(a, s);
  Tensor out = scalar_map(a, s, dt, dt, [](auto x, auto y) { return wrap_mul(x, y); }, VecBinary::Mul);
  record_binary<MulBackward0>(out, a, nullptr, &s, false, false);
  return out;
}

FG_NODE_FROM(DivBackward0, BinaryNode) };
GradList DivBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor other = operand(1);
  GradList out(2);
  if (needs_input_grad(0)) out[0] = reduce(0, div(g, other));
  // -g * ((a / b) / b), as PyTorch: b * b would overflow long before the quotient does.
  if (needs_input_grad(1)) out[1] = reduce(1, neg(mul(g, div(div(operand(0), other), other))));
  return out;
}
Tensor div(const Tensor& a, const Tensor& b) {
  DType dt = float_type(result_type(a, b));
  Tensor out = binary_map(a, b, dt, dt, [](auto x, auto y) { return x / y; }, VecBinary::Div);
  record_binary<DivBackward0>(out, a, &b, nullptr, true, true);
  return out;
}
Tensor div(const Tensor& a, const Scalar& s) {
  DType dt = float_type(result_type(a, s));
  Tensor out = scalar_map(a, s, dt, dt, [](auto x, auto y) { return x / y; }, VecBinary::Div);
  record_binary<DivBackward0>(out, a, nullptr, &s, false, false);
  return out;
}

FG_NODE(ReciprocalBackward0) };
GradList ReciprocalBackward0::apply(GradList&& grads) {
  Tensor y = unpack(0);
  return {neg(mul(grads[0], mul(y, y)))};
}
namespace {
Tensor reciprocal(const Tensor& x) {
  Tensor out = unary_map(x, float_type(x->dtype), [](auto v) { return decltype(v)(1) / v; });
  if (auto* node = record<ReciprocalBackward0>(out, {&x})) node->saved[0].save(out, true);
  return out;
}
}  // namespace
// s / x is s * (1 / x), as PyTorch computes (and names) it.
Tensor rdiv(const Tensor& a, const Scalar& s) { return mul(reciprocal(a), s); }

// x ** p for a number p.
FG_NODE_FROM(PowBackward0, BinaryNode) };
GradList PowBackward0::apply(GradList&& grads) {
  Tensor x = unpack(0);  // checked even when unused, as PyTorch
  if (scalar == 0) return {zeros_like(grads[0])};
  return {reduce(0, mul(grads[0], mul(pow(x, Scalar::from_float(scalar - 1)), Scalar::from_float(scalar))))};
}
Tensor pow(const Tensor& a, const Scalar& s) {
  if (!is_floating(a->dtype) && s.kind == Category::Integral && s.value < 0)
    throw RuntimeError("Integers to negative integer powers are not allowed.");
  DType dt = result_type(a, s);
  // PyTorch computes these exponents of float tensors with other functions (sqrt(-inf) is NaN
  // where pow(-inf, 0.5) is inf); so does fastgrad, for the same values.
  Tensor out = scalar_map(a, s, dt, dt, [](auto x, auto y) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) {
      if (y == T(0.5)) return std::sqrt(x);
      if (y == T(-0.5)) return T(1) / std::sqrt(x);
      if (y == T(2)) return x * x;
      if (y == T(3)) return x * x * x;
      if (y == T(-1)) return T(1) / x;
      if (y == T(-2)) return T(1) / (x * x);
    }
    return pow_value(x, y);
  });
  record_binary<PowBackward0, false>(out, a, nullptr, &s, true, false);
  return out;
}

// x ** y for tensors. d/dx is y * x**(y-1), taken as 0 where y == 0 (x**0 is constant, even at
// x == 0); d/dy is x**y * log(x), taken as 0 where x == 0 and y >= 0 (the limit). As PyTorch.
struct PowNode : BinaryNode {
  SavedTensor result;  // x ** y, which d/dy reads (as PyTorch's, so in-place changes to it fail alike)
  void release_saved() override {
    result.reset();
    Node::release_saved();
  }
};
FG_NODE_FROM(PowBackward1, PowNode) };
GradList PowBackward1::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor x = unpack(0), y = unpack(1), z = result.unpack(this);  // all checked, as PyTorch
  GradList out(2);
  if (needs_input_grad(0)) {
    // the mask applies to the product with g: where y == 0 even a NaN gradient gives 0 (PyTorch)
    Tensor d = mul(g, mul(y, pow(x, sub(y, Scalar::from_int(1)))));
    out[0] = reduce(0, where(compare(y, Scalar::from_int(0), CompareOp::Eq), zeros_like(d), d));
  }
  if (needs_input_grad(1)) {
    Tensor zero_base =
        logical_and(compare(x, Scalar::from_int(0), CompareOp::Eq), compare(y, Scalar::from_int(0), CompareOp::Ge));
    Tensor d = mul(z, log(to_dtype(x, z->dtype)));  // log in the result's precision, as PyTorch
    out[1] = reduce(1, mul(g, where(zero_base, zeros_like(d), d)));
  }
  return out;
}
Tensor pow(const Tensor& a, const Tensor& b) {
  DType dt = result_type(a, b);
  if (dt == DType::Bool) throw NotImplementedError("\"pow\" not implemented for 'Bool'");
  Tensor out = binary_map(a, b, dt, dt, [](auto x, auto y) { return pow_value(x, y); });
  if (auto* node = record_binary<PowBackward1>(out, a, &b, nullptr, true, true)) node->result.save(out, true);
  return out;
}

// s ** x for a number s. For s == 0, d/dx (0 * log 0) is taken as 0 where x >= 0, as PyTorch.
// Saves x and the result, as PyTorch does.
FG_NODE_FROM(PowBackward2, BinaryNode) };
GradList PowBackward2::apply(GradList&& grads) {
  Tensor x = unpack(0), result = unpack(1);
  Tensor d = mul(result, Scalar::from_float(std::log(scalar)));
  if (scalar == 0) d = where(compare(x, Scalar::from_int(0), CompareOp::Ge), zeros_like(d), d);
  return {reduce(0, mul(grads[0], d))};
}
Tensor rpow(const Tensor& a, const Scalar& s) {
  DType dt = result_type(a, s);
  if (dt == DType::Bool) throw NotImplementedError("\"pow\" not implemented for 'Bool'");
  Tensor out = scalar_map(a, s, dt, dt, [](auto x, auto y) { return pow_value(y, x); });
  if (auto* node = record<PowBackward2>(out, {&a})) {
    node->remember(a, nullptr, &s);
    node->saved[0].save(a);
    node->saved[1].save(out, true);
  }
  return out;
}

// maximum / minimum: the gradient goes to the larger (smaller) input; ties split it evenly. As in
// PyTorch, an input gets all of it unless it lost, so both get it where a NaN was compared.
namespace {
template <class N>
GradList select_grads(const N& node, const Tensor& g, CompareOp loses) {
  Tensor a = node.unpack(0), b = node.unpack(1);
  Tensor shared = where(compare(a, b, CompareOp::Eq), mul(g, Scalar::from_float(0.5)), g);
  Tensor zero = zeros_like(g);
  GradList out(2);
  if (node.needs_input_grad(0)) out[0] = node.reduce(0, where(compare(a, b, loses), zero, shared));
  if (node.needs_input_grad(1)) out[1] = node.reduce(1, where(compare(b, a, loses), zero, shared));
  return out;
}
}  // namespace

// The larger (smaller) of x and y, or NaN if either is NaN, as PyTorch's maximum, minimum and clamp.
template <class T>
T max_nan(T x, T y) {
  return x > y || x != x ? x : y;
}
template <class T>
T min_nan(T x, T y) {
  return x < y || x != x ? x : y;
}

FG_NODE_FROM(MaximumBackward0, BinaryNode) };
GradList MaximumBackward0::apply(GradList&& grads) { return select_grads(*this, grads[0], CompareOp::Lt); }
Tensor maximum(const Tensor& a, const Tensor& b) {
  DType dt = result_type(a, b);
  Tensor out = binary_map(a, b, dt, dt, [](auto x, auto y) { return max_nan(x, y); }, VecBinary::Max);
  record_binary<MaximumBackward0>(out, a, &b, nullptr, true, true);
  return out;
}

FG_NODE_FROM(MinimumBackward0, BinaryNode) };
GradList MinimumBackward0::apply(GradList&& grads) { return select_grads(*this, grads[0], CompareOp::Gt); }
Tensor minimum(const Tensor& a, const Tensor& b) {
  DType dt = result_type(a, b);
  Tensor out = binary_map(a, b, dt, dt, [](auto x, auto y) { return min_nan(x, y); }, VecBinary::Min);
  record_binary<MinimumBackward0>(out, a, &b, nullptr, true, true);
  return out;
}

// where(cond, a, b): the condition routes each gradient element to the input it came from.
// The condition is saved (version-checked, as PyTorch does) in saved[0].
FG_NODE_FROM(WhereBackward0, BinaryNode) };
GradList WhereBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor condition = unpack(0);
  Tensor zero = zeros_like(g);
  GradList out(2);
  if (needs_input_grad(0)) out[0] = reduce(0, where(condition, g, zero));
  if (needs_input_grad(1)) out[1] = reduce(1, where(condition, zero, g));
  return out;
}
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (cond->dtype != DType::Bool)
    throw RuntimeError(cat("where expected condition to be a boolean tensor, but got a tensor with dtype ",
                           scalar_type_name(cond->dtype)));
  DType dt = result_type(a, b);
  Shape shape = broadcast_shapes(broadcast_shapes(cond->shape, a->shape), b->shape);
  Tensor ca = cast_values(a, dt), cb = cast_values(b, dt);
  Shape sc = broadcast_strides(cond, shape), sa = broadcast_strides(ca, shape), sb = broadcast_strides(cb, shape);
  Tensor out = empty(shape, dt);
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    T* o = out->data_as<T>();
    const bool* c = cond->data_as<bool>();
    const T* x = ca->data_as<T>();
    const T* y = cb->data_as<T>();
    for_each_offset<3>(shape, {sc.data(), sa.data(), sb.data()},
                       [&](int64_t i, const std::array<int64_t, 3>& off) { o[i] = c[off[0]] ? x[off[1]] : y[off[2]]; });
  });
  if (auto* node = record<WhereBackward0>(out, {&a, &b})) {
    node->remember(a, &b, nullptr);
    node->saved[0].save(cond);
  }
  return out;
}

// ---- division rounded down (floor_divide), and what it leaves: remainder (the divisor's sign) and
// fmod (the dividend's sign, C's %). The scalar functions are PyTorch's; integer division by zero
// raises (PyTorch's message is the bare name), and INT64_MIN / -1 wraps.
namespace {
template <class T>
T fmod_value(T a, T b) {
  if constexpr (std::is_same_v<T, int64_t>) {
    if (b == 0) throw RuntimeError("ZeroDivisionError");
    return b == -1 ? 0 : a % b;  // C++'s INT64_MIN % -1 traps
  } else if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else {
    return a;  // bool: refused before any value is computed
  }
}

template <class T>
T remainder_value(T a, T b) {
  T r = fmod_value(a, b);
  if constexpr (std::is_same_v<T, bool>) return r;
  else return r != 0 && (r < 0) != (b < 0) ? static_cast<T>(r + b) : r;
}

template <class T>
T floor_divide_value(T a, T b) {
  if constexpr (std::is_same_v<T, int64_t>) {
    if (b == 0) throw RuntimeError("ZeroDivisionError");
    if (b == -1) return wrap_neg(a);
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
  } else if constexpr (std::is_floating_point_v<T>) {
    if (b == 0) return a / b;  // IEEE: inf or nan
    // (a - fmod(a, b)) / b is a whole number up to rounding: floored, or rounded up where rounding left
    // it just below one.
    T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
    if (div == 0) return std::copysign(T(0), a / b);
    T floored = std::floor(div);
    return div - floored > T(0.5) ? floored + 1 : floored;
  } else {
    return a;
  }
}

template <class T>
T trunc_divide_value(T a, T b) {
  if constexpr (std::is_same_v<T, int64_t>) {
    if (b == 0) throw RuntimeError("ZeroDivisionError");
    return b == -1 ? wrap_neg(a) : a / b;
  } else if constexpr (std::is_floating_point_v<T>) {
    return std::trunc(a / b);
  } else {
    return a;
  }
}

// a op b (b a tensor or a number) in the promoted dtype, which PyTorch's kernels (named `kernel`)
// refuse for bool; f(x, y) computes one value, `reversed` applies it as f(b, a) for a number b.
template <class B, class F>
Tensor division_map(const char* kernel, const Tensor& a, const B& b, F f, bool reversed = false) {
  if constexpr (std::is_same_v<B, Tensor>) broadcast_shapes(a->shape, b->shape);  // checked first, as PyTorch
  DType dt = result_type(a, b);
  if (dt == DType::Bool) throw NotImplementedError(cat("\"", kernel, "_cpu\" not implemented for 'Bool'"));
  if constexpr (std::is_same_v<B, Tensor>) return binary_map(a, b, dt, dt, f);
  else if (reversed) return scalar_map(a, b, dt, dt, [&f](auto x, auto s) { return f(s, x); });
  else return scalar_map(a, b, dt, dt, f);
}

auto floor_divide_values = [](auto x, auto y) { return floor_divide_value(x, y); };
auto trunc_divide_values = [](auto x, auto y) { return trunc_divide_value(x, y); };
auto remainder_values = [](auto x, auto y) { return remainder_value(x, y); };
auto fmod_values = [](auto x, auto y) { return fmod_value(x, y); };

template <class B>
Tensor rounded_quotient(const Tensor& a, const B& b, Rounding rounding) {
  return rounding == Rounding::Floor ? division_map("div_floor", a, b, floor_divide_values)
                                     : division_map("div_trunc", a, b, trunc_divide_values);
}
}  // namespace

FG_NODE_FROM(DivBackward2, BinaryNode) };
GradList DivBackward2::apply(GradList&&) {
  GradList out(2);
  for (size_t i = 0; i < 2; ++i)
    if (needs_input_grad(i)) out[i] = zeros(meta[i].sizes(), meta[i].dtype);
  return out;
}
Tensor div(const Tensor& a, const Tensor& b, Rounding rounding) {
  Tensor out = rounded_quotient(a, b, rounding);
  record_binary<DivBackward2>(out, a, &b, nullptr, false, false);
  return out;
}
Tensor div(const Tensor& a, const Scalar& s, Rounding rounding) {
  Tensor out = rounded_quotient(a, s, rounding);
  record_binary<DivBackward2>(out, a, nullptr, &s, false, false);
  return out;
}

// The node of an op PyTorch has no derivative for (floor_divide, number % tensor): the result
// requires grad, and backward through it raises. As PyTorch's, it has edges only to the inputs
// that require grad.
struct NoDerivativeNode : Node {
  const char* op = "";
};
FG_NODE_NAMED(NotImplemented, NoDerivativeNode, "torch::autograd::NotImplemented") };
GradList NotImplemented::apply(GradList&&) { throw RuntimeError(cat("derivative for ", op, " is not implemented")); }
namespace {
Tensor without_derivative(const Tensor& out, const char* op, std::initializer_list<const Tensor*> inputs) {
  std::vector<Tensor> differentiable;
  for (const Tensor* t : inputs)
    if ((*t)->requires_grad()) differentiable.push_back(*t);
  if (auto* node = record_many<NotImplemented>(out, differentiable)) node->op = op;
  return out;
}
}  // namespace

Tensor floor_divide(const Tensor& a, const Tensor& b, const char* aten_op) {
  return without_derivative(rounded_quotient(a, b, Rounding::Floor), aten_op, {&a, &b});
}
Tensor floor_divide(const Tensor& a, const Scalar& s, const char* aten_op) {
  return without_derivative(rounded_quotient(a, s, Rounding::Floor), aten_op, {&a});
}
Tensor rfloor_divide(const Tensor& a, const Scalar& s) {
  return without_derivative(division_map("div_floor", a, s, floor_divide_values, true), "aten::floor_divide", {&a});
}

// a - b * q for q = a / b rounded (down for remainder, toward zero for fmod): the gradient is g for
// a and -g * q for b.
namespace {
GradList remainder_grads(const BinaryNode& node, const Tensor& g, Rounding rounding) {
  GradList out(2);
  if (node.needs_input_grad(0)) out[0] = node.reduce(0, g);
  if (node.needs_input_grad(1)) out[1] = node.reduce(1, neg(mul(g, div(node.unpack(0), node.unpack(1), rounding))));
  return out;
}
}  // namespace

FG_NODE_FROM(RemainderBackward0, BinaryNode) };  // x % number
GradList RemainderBackward0::apply(GradList&& grads) { return {grads[0]}; }
FG_NODE_FROM(RemainderBackward1, BinaryNode) };
GradList RemainderBackward1::apply(GradList&& grads) { return remainder_grads(*this, grads[0], Rounding::Floor); }
Tensor remainder(const Tensor& a, const Tensor& b) {
  Tensor out = division_map("remainder", a, b, remainder_values);
  record_binary<RemainderBackward1>(out, a, &b, nullptr, true, true);
  return out;
}
Tensor remainder(const Tensor& a, const Scalar& s) {
  Tensor out = division_map("remainder", a, s, remainder_values);
  record_binary<RemainderBackward0, false>(out, a, nullptr, &s, false, false);
  return out;
}
Tensor rremainder(const Tensor& a, const Scalar& s) {
  return without_derivative(division_map("remainder", a, s, remainder_values, true), "aten::remainder", {&a});
}

FG_NODE_FROM(FmodBackward0, BinaryNode) };  // fmod(x, number)
GradList FmodBackward0::apply(GradList&& grads) { return {grads[0]}; }
FG_NODE_FROM(FmodBackward1, BinaryNode) };
GradList FmodBackward1::apply(GradList&& grads) { return remainder_grads(*this, grads[0], Rounding::Trunc); }
Tensor fmod(const Tensor& a, const Tensor& b) {
  Tensor out = division_map("fmod", a, b, fmod_values);
  record_binary<FmodBackward1>(out, a, &b, nullptr, true, true);
  return out;
}
Tensor fmod(const Tensor& a, const Scalar& s) {
  Tensor out = division_map("fmod", a, s, fmod_values);
  record_binary<FmodBackward0, false>(out, a, nullptr, &s, false, false);
  return out;
}

// ---- bitwise ops: bool and integer tensors only.
namespace {
const char* bitwise_name(BitwiseOp op) {
  return op == BitwiseOp::And ? "bitwise_and" : op == BitwiseOp::Or ? "bitwise_or" : "bitwise_xor";
}
void check_bitwise_dtype(const char* name, DType dt) {
  if (is_floating(dt))
    throw NotImplementedError(cat("\"", name, "_cpu\" not implemented for '", scalar_type_name(dt), "'"));
}
template <class T>
T bitwise_value(T x, T y, BitwiseOp op) {
  if constexpr (std::is_floating_point_v<T>) {
    return x;  // refused before any value is computed
  } else {
    return static_cast<T>(op == BitwiseOp::And ? x & y : op == BitwiseOp::Or ? x | y : x ^ y);
  }
}
}  // namespace

Tensor bitwise(const Tensor& a, const Tensor& b, BitwiseOp op) {
  broadcast_shapes(a->shape, b->shape);  // checked first, as PyTorch
  DType dt = result_type(a, b);
  check_bitwise_dtype(bitwise_name(op), dt);
  return binary_map(a, b, dt, dt, [op](auto x, auto y) { return bitwise_value(x, y, op); });
}
Tensor bitwise(const Tensor& a, const Scalar& s, BitwiseOp op) {
  DType dt = result_type(a, s);
  check_bitwise_dtype(bitwise_name(op), dt);
  return scalar_map(a, s, dt, dt, [op](auto x, auto y) { return bitwise_value(x, y, op); });
}
Tensor bitwise_not(const Tensor& x) {
  check_bitwise_dtype("bitwise_not", x->dtype);
  return unary_map(x, x->dtype, [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, bool>) return !v;
    else if constexpr (std::is_floating_point_v<T>) return v;
    else return static_cast<T>(~v);
  });
}

// ---- predicates (no gradient)
namespace {
template <class T>
bool compare_values(T x, T y, CompareOp op) {
  switch (op) {
    case CompareOp::Lt: return x < y;
    case CompareOp::Le: return x <= y;
    case CompareOp::Gt: return x > y;
    case CompareOp::Ge: return x >= y;
    case CompareOp::Eq: return x == y;
    case CompareOp::Ne: return x != y;
  }
  return false;
}
}  // namespace

Tensor compare(const Tensor& a, const Tensor& b, CompareOp op) {
  return binary_map(a, b, result_type(a, b), DType::Bool, [op](auto x, auto y) { return compare_values(x, y, op); });
}
Tensor compare(const Tensor& a, const Scalar& s, CompareOp op) {
  return scalar_map(a, s, result_type(a, s), DType::Bool, [op](auto x, auto y) { return compare_values(x, y, op); });
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return binary_map(a, b, DType::Bool, DType::Bool, [](auto x, auto y) { return x && y; });
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return binary_map(a, b, DType::Bool, DType::Bool, [](auto x, auto y) { return x || y; });
}
// sign is piecewise constant: its gradient is zero (but, as in PyTorch, it is recorded).
FG_NODE(SignBackward0) };
GradList SignBackward0::apply(GradList&& grads) { return {zeros_like(grads[0])}; }
Tensor sign(const Tensor& x) {
  Tensor out = unary_map(x, x->dtype, [](auto v) { return static_cast<decltype(v)>((v > 0) - is_negative(v)); });
  record<SignBackward0>(out, {&x});
  return out;
}

// ---- unary ops. Float functions of integer tensors compute in float32, as PyTorch does.
FG_NODE(NegBackward0) };
GradList NegBackward0::apply(GradList&& grads) { return {neg(grads[0])}; }
Tensor neg(const Tensor& x) {
  if (x->dtype == DType::Bool)
    throw RuntimeError(
        "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the "
        "`~` or `logical_not()` operator instead.");
  Tensor out = unary_map(x, x->dtype, [](auto v) { return wrap_neg(v); }, VecUnary::Neg);
  record<NegBackward0>(out, {&x});
  return out;
}

FG_NODE(AbsBackward0) };
GradList AbsBackward0::apply(GradList&& grads) { return {mul(grads[0], sign(unpack(0)))}; }
Tensor abs(const Tensor& x) {
  if (x->dtype == DType::Bool) throw NotImplementedError("\"abs_cpu\" not implemented for 'Bool'");
  // Floats by the kernel, which clears the sign bit: abs(-0.0) is 0.0, as PyTorch.
  Tensor out = unary_map(
      x, x->dtype, [](auto v) { return is_negative(v) ? static_cast<decltype(v)>(wrap_neg(v)) : v; }, VecUnary::Abs);
  if (auto* node = record<AbsBackward0>(out, {&x})) node->saved[0].save(x);
  return out;
}

FG_NODE(ExpBackward0) };
GradList ExpBackward0::apply(GradList&& grads) { return {mul(grads[0], unpack(0))}; }
Tensor exp(const Tensor& x) {
  Tensor out = float_unary(x, VecUnary::Exp);
  if (auto* node = record<ExpBackward0>(out, {&x})) node->saved[0].save(out, true);
  return out;
}

FG_NODE(LogBackward0) };
GradList LogBackward0::apply(GradList&& grads) { return {div(grads[0], unpack(0))}; }
Tensor log(const Tensor& x) {
  Tensor out = float_unary(x, VecUnary::Log);
  if (auto* node = record<LogBackward0>(out, {&x})) node->saved[0].save(x);
  return out;
}

FG_NODE(SqrtBackward0) };
GradList SqrtBackward0::apply(GradList&& grads) { return {div(grads[0], mul(unpack(0), Scalar::from_int(2)))}; }
Tensor sqrt(const Tensor& x) {
  Tensor out = float_unary(x, VecUnary::Sqrt);
  if (auto* node = record<SqrtBackward0>(out, {&x})) node->saved[0].save(out, true);
  return out;
}

FG_NODE(SinBackward0) };
GradList SinBackward0::apply(GradList&& grads) { return {mul(grads[0], cos(unpack(0)))}; }
Tensor sin(const Tensor& x) {
  Tensor out = unary_map(x, float_type(x->dtype), [](auto v) { return std::sin(v); });
  if (auto* node = record<SinBackward0>(out, {&x})) node->saved[0].save(x);
  return out;
}

FG_NODE(CosBackward0) };
GradList CosBackward0::apply(GradList&& grads) { return {mul(grads[0], neg(sin(unpack(0))))}; }
Tensor cos(const Tensor& x) {
  Tensor out = unary_map(x, float_type(x->dtype), [](auto v) { return std::cos(v); });
  if (auto* node = record<CosBackward0>(out, {&x})) node->saved[0].save(x);
  return out;
}

FG_NODE(TanhBackward0) };
GradList TanhBackward0::apply(GradList&& grads) {
  Tensor y = unpack(0);
  return {mul(grads[0], rsub(mul(y, y), Scalar::from_int(1)))};
}
Tensor tanh(const Tensor& x) {
  Tensor out = float_unary(x, VecUnary::Tanh);
  if (auto* node = record<TanhBackward0>(out, {&x})) node->saved[0].save(out, true);
  return out;
}

FG_NODE(SigmoidBackward0) };
GradList SigmoidBackward0::apply(GradList&& grads) {
  Tensor y = unpack(0);
  return {mul(grads[0], mul(y, rsub(y, Scalar::from_int(1))))};
}
Tensor sigmoid(const Tensor& x) {
  Tensor out = float_unary(x, VecUnary::Sigmoid);  // 1 / (1 + exp(-x))
  if (auto* node = record<SigmoidBackward0>(out, {&x})) node->saved[0].save(out, true);
  return out;
}

// ReLU's gradient, as PyTorch's threshold_backward(g, result, 0): g cut where the result is <= 0
// (so it passes where the result is NaN). Linear in g: its own gradient is the same cut; constant
// in the result, which gets zeros (as PyTorch's, so autograd.grad finds the result used).
Tensor threshold_backward(const Tensor& g, const Tensor& result);
FG_NODE(ThresholdBackwardBackward0) };
GradList ThresholdBackwardBackward0::apply(GradList&& grads) {
  Tensor result = unpack(0);
  return {threshold_backward(grads[0], result), needs_input_grad(1) ? zeros(result->shape, result->dtype) : Tensor()};
}
Tensor threshold_backward(const Tensor& g, const Tensor& result) {
  DType dt = result_type(g, result);
  Tensor out = binary_map(g, result, dt, dt, [](auto gv, auto r) { return r <= 0 ? decltype(gv)(0) : gv; });
  if (auto* node = record<ThresholdBackwardBackward0>(out, {&g, &result})) node->saved[0].save(result);
  return out;
}

FG_NODE(ReluBackward0) };
GradList ReluBackward0::apply(GradList&& grads) { return {threshold_backward(grads[0], unpack(0))}; }
Tensor relu(const Tensor& x) {
  if (x->dtype == DType::Bool) throw RuntimeError("Boolean inputs not supported for relu");
  Tensor out = unary_map(
      x, x->dtype, [](auto v) { return v > 0 || v != v ? v : decltype(v)(0); },  // NaN stays NaN
      VecUnary::Relu);
  if (auto* node = record<ReluBackward0>(out, {&x})) node->saved[0].save(out, true);
  return out;
}

// clamp passes the gradient where min <= x <= max (boundaries included, as PyTorch).
struct ClampNode : Node {
  std::optional<Scalar> min, max;
};
FG_NODE_FROM(ClampBackward1, ClampNode) };
GradList ClampBackward1::apply(GradList&& grads) {
  Tensor x = unpack(0);
  Tensor g = grads[0];
  // where, not a product with the mask: an infinite gradient outside the range still gives 0.
  Tensor zero = zeros_like(g);
  if (min) g = where(compare(x, *min, CompareOp::Ge), g, zero);
  if (max) g = where(compare(x, *max, CompareOp::Le), g, zero);
  return {g};
}
// max(x, min), then min(that, max), as PyTorch: with min > max every element is max, and a NaN
// bound makes every element NaN (max_nan / min_nan keep NaN from either side).
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  if (!min && !max) throw RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None");
  // The bounds take part in type promotion as Python numbers: an int64 tensor clamped to 0.5 is float32.
  MaybeType wrapped;
  if (min) wrapped = scalar_type(*min);
  if (max) wrapped = promote_opt(wrapped, scalar_type(*max));
  DType dt = result_type_of({&x}, wrapped);
  if (dt == DType::Bool)  // PyTorch's clamp kernels have no bool case
    throw NotImplementedError(cat("\"",
                                  min && max ? "clamp"
                                  : min      ? "clamp_min"
                                             : "clamp_max",
                                  "_scalar_cpu\" not implemented for 'Bool'"));
  // The bounds in the computation type, as PyTorch converts them (an integer bound exactly).
  Tensor out = unary_map(x, dt, [&min, &max](auto v) {
    using T = decltype(v);
    if (min) v = max_nan(v, min->to<T>());
    if (max) v = min_nan(v, max->to<T>());
    return v;
  });
  if (auto* node = record<ClampBackward1>(out, {&x})) {
    node->saved[0].save(x);
    node->min = min;
    node->max = max;
  }
  return out;
}

// clamp with tensor bounds (either may be missing). As PyTorch: x gets the gradient where
// min <= x <= max, min where x < min (unless min >= max: then max wins), max where x > max or
// max < min.
struct ClampTensorNode : Node {
  InputMeta meta[3];
  SavedTensor max_bound;  // saved[0] is x, saved[1] min
  void release_saved() override {
    max_bound.reset();
    Node::release_saved();
  }
  Tensor reduce(size_t i, const Tensor& g) const { return to_dtype(sum_to(g, meta[i].sizes()), meta[i].dtype); }
};
FG_NODE_FROM(ClampBackward0, ClampTensorNode) };
GradList ClampBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor x = unpack(0);
  Tensor lo = saved[1].defined() ? unpack(1) : Tensor(), hi = max_bound.defined() ? max_bound.unpack(this) : Tensor();
  Tensor zero = zeros_like(g);
  GradList out(3);
  if (needs_input_grad(0)) {
    Tensor inside = lo ? compare(x, lo, CompareOp::Ge) : compare(x, hi, CompareOp::Le);
    if (lo && hi) inside = logical_and(inside, compare(x, hi, CompareOp::Le));
    out[0] = reduce(0, where(inside, g, zero));
  }
  if (needs_input_grad(1)) {
    Tensor below = compare(x, lo, CompareOp::Lt);
    if (hi) below = logical_and(below, compare(lo, hi, CompareOp::Lt));
    out[1] = reduce(1, where(below, g, zero));
  }
  if (needs_input_grad(2)) {
    Tensor above = compare(x, hi, CompareOp::Gt);
    if (lo) above = logical_or(above, compare(hi, lo, CompareOp::Lt));
    out[2] = reduce(2, where(above, g, zero));
  }
  return out;
}

Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  if (!min && !max) throw RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None");
  DType dt = min && max ? result_type_of({&x, &min, &max}, std::nullopt) : result_type(x, min ? min : max);
  if (dt == DType::Bool && min && max) throw NotImplementedError("\"clamp_cpu\" not implemented for 'Bool'");
  Tensor out;
  {
    GradModeGuard no_grad(false);
    out = cast_values(x, dt);  // maximum/minimum keep NaN from either side, as clamp does
    if (min) out = maximum(out, cast_values(min, dt));
    if (max) out = minimum(out, cast_values(max, dt));
  }
  bool any = should_record({&x});
  if (min) any = should_record({&min}) || any;
  if (max) any = should_record({&max}) || any;
  if (!any) return out;
  auto* node = new ClampBackward0();
  for (const Tensor* t : {&x, &min, &max}) node->next_edges.push_back(*t ? gradient_edge(*t) : Edge{});
  out->grad_fn = NodeRef(node);
  out->output_nr = 0;
  node->meta[0] = InputMeta::of(x);
  node->saved[0].save(x);
  if (min) {
    node->meta[1] = InputMeta::of(min);
    node->saved[1].save(min);
  }
  if (max) {
    node->meta[2] = InputMeta::of(max);
    node->max_bound.save(max);
  }
  return out;
}

}  // namespace fg
