// Floor division, remainder and fmod, and bitwise ops: elementwise ops of the integer kind (with
// their float forms where PyTorch has them), on the shared maps of elementwise_maps.h.
#include <cmath>

#include "core/numeric.h"
#include "ops/elementwise_maps.h"

namespace fg {

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

FG_NODE_FROM(DivBackward2, BinaryNode);
GradList DivBackward2::apply(GradList&&) {
  GradList out(2);
  for (size_t i = 0; i < 2; ++i)
    if (needs_input_grad(i)) out[i] = zeros(meta[i].sizes(), meta[i].dtype);
  return out;
}
Tensor div(const Tensor& a, const Tensor& b, Rounding rounding) {
  Tensor out = rounded_quotient(a, b, rounding);
  record_binary<DivBackward2>(out, a, &b, nullptr, false);
  return out;
}
Tensor div(const Tensor& a, const Scalar& s, Rounding rounding) {
  Tensor out = rounded_quotient(a, s, rounding);
  record_binary<DivBackward2>(out, a, nullptr, &s, false);
  return out;
}

// The node of an op PyTorch has no derivative for (floor_divide, number % tensor): the result
// requires grad, and backward through it raises. As PyTorch's, it has edges only to the inputs
// that require grad. An integer result (of an integer tensor with a history, see
// check_differentiable_output) gets none, as PyTorch's: it does not require grad.
struct NoDerivativeNode : Node {
  const char* op = "";
};
FG_NODE_NAMED(NotImplemented, NoDerivativeNode, "torch::autograd::NotImplemented");
GradList NotImplemented::apply(GradList&&) { throw RuntimeError(cat("derivative for ", op, " is not implemented")); }
namespace {
Tensor without_derivative(const Tensor& out, const char* op, std::initializer_list<const Tensor*> inputs) {
  if (!is_floating(out->dtype)) return out;
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

FG_NODE_FROM(RemainderBackward1, BinaryNode);
GradList RemainderBackward1::apply(GradList&& grads) { return remainder_grads(*this, grads[0], Rounding::Floor); }
Tensor remainder(const Tensor& a, const Tensor& b) {
  Tensor out = division_map("remainder", a, b, remainder_values);
  record_binary<RemainderBackward1>(out, a, &b, nullptr, true);
  return out;
}
Tensor remainder(const Tensor& a, const Scalar& s) {
  Tensor out = division_map("remainder", a, s, remainder_values);
  record<IdentityBackward>(out, {&a}, "RemainderBackward0");
  return out;
}
Tensor rremainder(const Tensor& a, const Scalar& s) {
  return without_derivative(division_map("remainder", a, s, remainder_values, true), "aten::remainder", {&a});
}

FG_NODE_FROM(FmodBackward1, BinaryNode);
GradList FmodBackward1::apply(GradList&& grads) { return remainder_grads(*this, grads[0], Rounding::Trunc); }
Tensor fmod(const Tensor& a, const Tensor& b) {
  Tensor out = division_map("fmod", a, b, fmod_values);
  record_binary<FmodBackward1>(out, a, &b, nullptr, true);
  return out;
}
Tensor fmod(const Tensor& a, const Scalar& s) {
  Tensor out = division_map("fmod", a, s, fmod_values);
  record<IdentityBackward>(out, {&a}, "FmodBackward0");
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

}  // namespace fg
