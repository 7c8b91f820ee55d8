// Elementwise ops with broadcasting and PyTorch's type promotion. Each op: its forward (a scalar
// lambda over the strided loop, and for float types the vector kernel that computes the same) and,
// right after it, the backward node that undoes it. This file: type promotion, the helpers the
// elementwise files share (declared in elementwise_maps.h), and binary arithmetic; floor division,
// remainder, fmod and bitwise ops are in integer_division.cpp, predicates in predicates.cpp, unary
// ops in unary.cpp.
#include <cmath>

#include "core/numeric.h"
#include "ops/elementwise_maps.h"

namespace fg {

// ---- type promotion, as PyTorch: tensors with dims decide first; 0-d tensors, then Python
// numbers, may only raise the category (bool < integral < floating), never the width.
MaybeType promote_opt(MaybeType a, DType b) { return a ? promote(*a, b) : b; }

namespace {
MaybeType combine_categories(MaybeType higher, MaybeType lower) {
  if (!higher) return lower;
  if (!lower || is_floating(*higher)) return higher;
  if (*higher == DType::Bool || is_floating(*lower)) return promote(*higher, *lower);
  return higher;
}
}  // namespace

DType scalar_type(const Scalar& s) {
  return s.kind == Category::Floating   ? default_float_type()
         : s.kind == Category::Integral ? DType::Int64
                                        : DType::Bool;
}

DType result_type_of(std::initializer_list<const Tensor*> tensors, MaybeType wrapped) {
  MaybeType dimmed, zero_dim;
  for (const Tensor* t : tensors) {
    if ((*t)->dim() > 0) dimmed = promote_opt(dimmed, (*t)->dtype);
    else zero_dim = promote_opt(zero_dim, (*t)->dtype);
  }
  return *combine_categories(dimmed, combine_categories(zero_dim, wrapped));
}

DType result_type(const Tensor& a, const Tensor& b) {
  if (a->dtype == b->dtype) return a->dtype;  // whatever their dims: the common case, without the categories
  return result_type_of({&a, &b}, std::nullopt);
}
DType result_type(const Tensor& a, const Scalar& b) {
  if (is_floating(a->dtype)) return a->dtype;  // no Python number raises a floating tensor's type
  return result_type_of({&a}, scalar_type(b));
}

DType float_type(DType d) { return is_floating(d) ? d : default_float_type(); }

Tensor cast_values(const Tensor& t, DType dtype) {
  if (t->dtype == dtype) return t;
  Tensor out = empty(t->shape, dtype);
  copy_values(out, t);
  return out;
}

// f(x) in floating `dtype` by the vector kernel, over a contiguous copy of x when x is not
// contiguous: one code path, so a value's result never depends on the layout it sits in.
Tensor vector_unary(const Tensor& x, DType dtype, VecUnary op) {
  if (compute_type(dtype) != dtype) return cast_values(vector_unary(x, compute_type(dtype), op), dtype);
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

Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }

// s as `dtype` holds it (wrapped, rounded), kept in s's category.
Scalar stored_scalar(const Scalar& s, DType dtype) {
  return dispatch_stored(dtype, [&](auto tag) {
    auto v = s.to<decltype(tag)>();
    return s.kind == Category::Floating ? Scalar::from_float(value_cast<double>(v))
                                        : Scalar::from_int(value_cast<int64_t>(v));
  });
}

namespace {

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

}  // namespace

// ---- binary arithmetic. The second operand is a tensor or a Python number; a node (BinaryNode, in
// elementwise_maps.h) keeps both inputs' metadata and, for a number, its value, so one backward
// formula serves both forms.
namespace {
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

namespace {
// a + alpha * b (b a tensor or a number) for alpha != 1, as PyTorch computes it: for floating types
// rounded once (the vector FMA of its loops) in the compute type, the numbers first rounded to
// `dt` (float16 too); for integers wrapping.
template <class B>
Tensor add_scaled(const Tensor& a, const B& b, const Scalar& alpha, DType dt) {
  if (is_floating(dt)) {
    Tensor scale = scalar_tensor(alpha.value, dt);
    if constexpr (std::is_same_v<B, Tensor>) return fused_multiply_add(b, scale, a, dt);
    else return fused_multiply_add(scalar_tensor(b.value, dt), scale, a, dt);
  }
  auto f = [&](auto x, auto y) {
    using T = decltype(x);
    return wrap_add(x, static_cast<T>(wrap_mul(y, alpha.to<T>())));
  };
  if constexpr (std::is_same_v<B, Tensor>) return binary_map(a, b, dt, dt, f);
  else return scalar_map(a, b, dt, dt, f);
}

Scalar negated(const Scalar& s) {
  return s.kind == Category::Floating ? Scalar::from_float(-s.value) : Scalar::from_int(wrap_neg(s.integer));
}

// The second operand of a binary op as record_binary takes it: a tensor or a number.
const Tensor* tensor_operand(const Tensor& b) { return &b; }
const Tensor* tensor_operand(const Scalar&) { return nullptr; }
const Scalar* number_operand(const Tensor&) { return nullptr; }
const Scalar* number_operand(const Scalar& s) { return &s; }

template <class N, bool kScalarEdge = true, class B>
Tensor recorded_with_alpha(const Tensor& out, const Tensor& a, const B& b, const Scalar& alpha) {
  if (N* node = record_binary<N, kScalarEdge>(out, a, tensor_operand(b), number_operand(b), false))
    node->alpha = alpha.value;
  return out;
}
}  // namespace

FG_NODE_FROM(AddBackward0, BinaryNode);
GradList AddBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  return {reduce(0, g), other_is_scalar ? Tensor() : reduce(1, times_alpha(g))};
}
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  DType dt = result_type(a, b);
  Tensor out = alpha.value != 1
                   ? add_scaled(a, b, alpha, dt)
                   : binary_map(a, b, dt, dt, [](auto x, auto y) { return wrap_add(x, y); }, VecBinary::Add);
  return recorded_with_alpha<AddBackward0>(out, a, b, alpha);
}
Tensor add(const Tensor& a, const Scalar& s, const Scalar& alpha) {
  DType dt = result_type(a, s);
  Tensor out = alpha.value != 1
                   ? add_scaled(a, s, alpha, dt)
                   : scalar_map(a, s, dt, dt, [](auto x, auto y) { return wrap_add(x, y); }, VecBinary::Add);
  return recorded_with_alpha<AddBackward0>(out, a, s, alpha);
}

FG_NODE_FROM(SubBackward0, BinaryNode);
GradList SubBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  return {reduce(0, g), other_is_scalar ? Tensor() : reduce(1, times_alpha(neg(g)))};
}
namespace {
// a - alpha * b, not recorded: sub's and rsub's values.
Tensor difference(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_bool_subtraction(a->dtype, b->dtype);
  DType dt = result_type(a, b);
  return alpha.value != 1 ? add_scaled(a, b, negated(alpha), dt)
                          : binary_map(a, b, dt, dt, [](auto x, auto y) { return wrap_sub(x, y); }, VecBinary::Sub);
}
}  // namespace
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return recorded_with_alpha<SubBackward0>(difference(a, b, alpha), a, b, alpha);
}
Tensor sub(const Tensor& a, const Scalar& s, const Scalar& alpha) {
  check_bool_subtraction(a->dtype, scalar_type(s));
  DType dt = result_type(a, s);
  Tensor out = alpha.value != 1
                   ? add_scaled(a, s, negated(alpha), dt)
                   : scalar_map(a, s, dt, dt, [](auto x, auto y) { return wrap_sub(x, y); }, VecBinary::Sub);
  return recorded_with_alpha<SubBackward0>(out, a, s, alpha);
}

// torch.rsub(a, b, alpha=alpha): b - alpha * a, computed as sub(b, a, alpha) (one rounding) and
// recorded with a's edge first.
FG_NODE_FROM(RsubBackward0, BinaryNode);
GradList RsubBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  GradList out(2);
  if (needs_input_grad(0)) out[0] = reduce(0, times_alpha(neg(g)));
  if (needs_input_grad(1)) out[1] = reduce(1, g);
  return out;
}
Tensor rsub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return recorded_with_alpha<RsubBackward0>(difference(b, a, alpha), a, b, alpha);
}

FG_NODE_FROM(RsubBackward1, BinaryNode);
GradList RsubBackward1::apply(GradList&& grads) { return {reduce(0, times_alpha(neg(grads[0])))}; }
Tensor rsub(const Tensor& a, const Scalar& s, const Scalar& alpha) {
  check_bool_subtraction(a->dtype, scalar_type(s));
  DType dt = result_type(a, s);
  Tensor out = alpha.value != 1
                   ? add_scaled(full(a->shape, s, dt), a, negated(alpha), dt)
                   : scalar_map(a, s, dt, dt, [](auto x, auto y) { return wrap_sub(y, x); }, VecBinary::Sub, true);
  return recorded_with_alpha<RsubBackward1, false>(out, a, s, alpha);
}

FG_NODE_FROM(MulBackward0, BinaryNode);
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
  if (auto* node = record_binary<MulBackward0>(out, a, &b, nullptr, false)) {
    // As PyTorch's: each operand is read only for the other's gradient (an in-place mul_ by a
    // tensor that needs no gradient then keeps no copy of self's old values).
    node->save(node->needs_input_grad(1) ? a : Tensor());
    node->save(node->needs_input_grad(0) ? b : Tensor());
  }
  return out;
}
Tensor mul(const Tensor& a, const Scalar& s) {
  DType dt = result_type(a, s);
  Tensor out = scalar_map(a, s, dt, dt, [](auto x, auto y) { return wrap_mul(x, y); }, VecBinary::Mul);
  record_binary<MulBackward0>(out, a, nullptr, &s, false);
  return out;
}

FG_NODE_FROM(DivBackward0, BinaryNode);
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
  if (auto* node = record_binary<DivBackward0>(out, a, &b, nullptr, false)) {
    node->save(node->needs_input_grad(1) ? a : Tensor());  // a is read only for b's gradient
    node->save(b);
  }
  return out;
}
Tensor div(const Tensor& a, const Scalar& s) {
  DType dt = float_type(result_type(a, s));
  Tensor out = scalar_map(a, s, dt, dt, [](auto x, auto y) { return x / y; }, VecBinary::Div);
  record_binary<DivBackward0>(out, a, nullptr, &s, false);
  return out;
}

FG_NODE(ReciprocalBackward0);
GradList ReciprocalBackward0::apply(GradList&& grads) {
  Tensor y = unpack(0);
  return {neg(mul(grads[0], mul(y, y)))};
}
Tensor reciprocal(const Tensor& x) {
  Tensor out = unary_map(x, float_type(x->dtype), [](auto v) { return decltype(v)(1) / v; });
  if (auto* node = record<ReciprocalBackward0>(out, {&x})) node->save(out, true);
  return out;
}
// s / x is s * (1 / x), as PyTorch computes (and names) it.
Tensor rdiv(const Tensor& a, const Scalar& s) { return mul(reciprocal(a), s); }

// x ** p for a number p.
FG_NODE_FROM(PowBackward0, BinaryNode);
GradList PowBackward0::apply(GradList&& grads) {
  Tensor x = unpack(0);  // checked even when unused, as PyTorch
  if (scalar == 0) return {zeros_like(grads[0])};
  return {reduce(0, mul(grads[0], mul(pow(x, Scalar::from_float(scalar - 1)), Scalar::from_float(scalar))))};
}
Tensor pow(const Tensor& a, const Scalar& s) {
  if (!is_floating(a->dtype) && s.kind == Category::Integral && s.value < 0)
    throw RuntimeError("Integers to negative integer powers are not allowed.");
  DType dt = result_type(a, s);
  Tensor out = scalar_map(a, s, dt, dt, [](auto x, auto y) {
    if constexpr (std::is_floating_point_v<decltype(x)>) return power_by_number(x, y);
    else return pow_value(x, y);
  });
  record_binary<PowBackward0, false>(out, a, nullptr, &s, true);
  return out;
}

// x ** y for tensors. d/dx is y * x**(y-1), taken as 0 where y == 0 (x**0 is constant, even at
// x == 0); d/dy is x**y * log(x), taken as 0 where x == 0 and y >= 0 (the limit). As PyTorch.
// Saves x, y and the result x ** y, which d/dy reads (as PyTorch's, so in-place changes to it fail alike).
FG_NODE_FROM(PowBackward1, BinaryNode);
GradList PowBackward1::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor x = unpack(0), y = unpack(1), z = unpack(2);  // all checked, as PyTorch
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
  if (auto* node = record_binary<PowBackward1>(out, a, &b, nullptr, true)) node->save(out, true);
  return out;
}

// s ** x for a number s. For s == 0, d/dx (0 * log 0) is taken as 0 where x >= 0, as PyTorch.
// Saves x and the result, as PyTorch does.
FG_NODE_FROM(PowBackward2, BinaryNode);
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
    node->save(a);
    node->save(out, true);
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

FG_NODE_FROM(MaximumBackward0, BinaryNode);
GradList MaximumBackward0::apply(GradList&& grads) { return select_grads(*this, grads[0], CompareOp::Lt); }
Tensor maximum(const Tensor& a, const Tensor& b) {
  DType dt = result_type(a, b);
  Tensor out = binary_map(a, b, dt, dt, [](auto x, auto y) { return max_nan(x, y); }, VecBinary::Max);
  record_binary<MaximumBackward0>(out, a, &b, nullptr, true);
  return out;
}

FG_NODE_FROM(MinimumBackward0, BinaryNode);
GradList MinimumBackward0::apply(GradList&& grads) { return select_grads(*this, grads[0], CompareOp::Gt); }
Tensor minimum(const Tensor& a, const Tensor& b) {
  DType dt = result_type(a, b);
  Tensor out = binary_map(a, b, dt, dt, [](auto x, auto y) { return min_nan(x, y); }, VecBinary::Min);
  record_binary<MinimumBackward0>(out, a, &b, nullptr, true);
  return out;
}

// where(cond, a, b): the condition routes each gradient element to the input it came from.
// The condition is saved (version-checked, as PyTorch does) in saved[0].
FG_NODE_FROM(WhereBackward0, BinaryNode);
GradList WhereBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor condition = unpack(0);
  Tensor zero = zeros_like(g);
  GradList out(2);
  if (needs_input_grad(0)) out[0] = reduce(0, where(condition, g, zero));
  if (needs_input_grad(1)) out[1] = reduce(1, where(condition, zero, g));
  return out;
}
// o[i] = c[i] ? x[i] : y[i], the choice made by indexing (a bool is 0 or 1) rather than a branch,
// which the compiler keeps for ?: and which mispredicts on random conditions (measured 4 ns an element).
template <class T>
void select_contiguous(const bool* __restrict c, const T* __restrict x, const T* __restrict y, T* __restrict o,
                       int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const T choices[2] = {y[i], x[i]};
    o[i] = choices[c[i]];
  }
}

Tensor fused_multiply_add(const Tensor& x, const Tensor& y, const Tensor& z, DType dtype) {
  if (compute_type(dtype) != dtype) return cast_values(fused_multiply_add(x, y, z, compute_type(dtype)), dtype);
  Shape shape = broadcast_shapes(broadcast_shapes(x->shape, y->shape), z->shape);
  Tensor cx = cast_values(x, dtype), cy = cast_values(y, dtype), cz = cast_values(z, dtype);
  Shape sx = broadcast_strides(cx, shape), sy = broadcast_strides(cy, shape), sz = broadcast_strides(cz, shape);
  Tensor out = result_buffer(shape, dtype);
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *px = cx->data_as<T>(), *py = cy->data_as<T>(), *pz = cz->data_as<T>();
    T* po = out->data_as<T>();
    FmaKernel<T> kernel = kernels().of<T>().fused_multiply_add;
    // Runs of any length: the kernel's rounding (fused on every ISA) is then the only one.
    vector_runs<3>(
        shape, {sx.data(), sy.data(), sz.data()},
        [&](int64_t o, const auto& off, const auto& broadcast, int64_t count) {
          kernel(px + off[0], broadcast[0], py + off[1], broadcast[1], pz + off[2], broadcast[2], po + o, count);
        },
        1);
  });
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
  dispatch_stored(dt, [&](auto tag) {  // only moves elements: every dtype is cheap
    using T = decltype(tag);
    T* o = out->data_as<T>();
    const bool* c = cond->data_as<bool>();
    const T* x = ca->data_as<T>();
    const T* y = cb->data_as<T>();
    // Same-shape contiguous operands (as an activation's where(x > 0, ...)): one flat branchless loop.
    if (cond->shape == shape && ca->shape == shape && cb->shape == shape && cond->is_contiguous() &&
        ca->is_contiguous() && cb->is_contiguous()) {
      select_contiguous(c, x, y, o, out->numel());
      return;
    }
    for_each_offset<3>(shape, {sc.data(), sa.data(), sb.data()},
                       [&](int64_t i, const std::array<int64_t, 3>& off) { o[i] = c[off[0]] ? x[off[1]] : y[off[2]]; });
  });
  if (auto* node = record<WhereBackward0>(out, {&a, &b})) {
    node->remember(a, &b, nullptr);
    node->save(cond);
  }
  return out;
}

}  // namespace fg
