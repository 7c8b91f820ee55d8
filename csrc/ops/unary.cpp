// Unary elementwise ops (neg, abs, exp, log, ..., relu, clamp), each forward with its backward node,
// on the shared maps of elementwise_maps.h.
#include <cmath>

#include "core/numeric.h"
#include "ops/elementwise_maps.h"

namespace fg {

// ---- unary ops. Float functions of integer tensors compute in float32, as PyTorch does.
namespace {
// Float functions (exp, log, ...) of any tensor: in float32 for integer tensors, as PyTorch.
Tensor float_unary(const Tensor& x, VecUnary op) { return vector_unary(x, float_type(x->dtype), op); }
}  // namespace

FG_NODE(NegBackward0);
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

FG_NODE(AbsBackward0);
GradList AbsBackward0::apply(GradList&& grads) { return {mul(grads[0], sign(unpack(0)))}; }
Tensor abs(const Tensor& x) {
  if (x->dtype == DType::Bool) throw NotImplementedError("\"abs_cpu\" not implemented for 'Bool'");
  // Floats by the kernel, which clears the sign bit: abs(-0.0) is 0.0, as PyTorch.
  Tensor out = unary_map(
      x, x->dtype, [](auto v) { return is_negative(v) ? static_cast<decltype(v)>(wrap_neg(v)) : v; }, VecUnary::Abs);
  if (auto* node = record<AbsBackward0>(out, {&x})) node->save(x);
  return out;
}

FG_NODE(ExpBackward0);
GradList ExpBackward0::apply(GradList&& grads) { return {mul(grads[0], unpack(0))}; }
Tensor exp(const Tensor& x) {
  Tensor out = float_unary(x, VecUnary::Exp);
  if (auto* node = record<ExpBackward0>(out, {&x})) node->save(out, true);
  return out;
}

FG_NODE(LogBackward0);
GradList LogBackward0::apply(GradList&& grads) { return {div(grads[0], unpack(0))}; }
Tensor log(const Tensor& x) {
  Tensor out = float_unary(x, VecUnary::Log);
  if (auto* node = record<LogBackward0>(out, {&x})) node->save(x);
  return out;
}

// log(1 + x) and exp(x) - 1 without the cancellation of computing 1 + x or exp(x) first.
FG_NODE(Log1PBackward0);
GradList Log1PBackward0::apply(GradList&& grads) { return {div(grads[0], add(unpack(0), Scalar::from_int(1)))}; }
Tensor log1p(const Tensor& x) {
  Tensor out = unary_map(x, float_type(x->dtype), [](auto v) { return std::log1p(v); });
  if (auto* node = record<Log1PBackward0>(out, {&x})) node->save(x);
  return out;
}

FG_NODE(Expm1Backward0);
GradList Expm1Backward0::apply(GradList&& grads) { return {mul(grads[0], add(unpack(0), Scalar::from_int(1)))}; }
Tensor expm1(const Tensor& x) {
  Tensor out = unary_map(x, float_type(x->dtype), [](auto v) { return std::expm1(v); });
  if (auto* node = record<Expm1Backward0>(out, {&x})) node->save(out, true);  // d/dx = exp(x) = out + 1
  return out;
}

FG_NODE(SqrtBackward0);
GradList SqrtBackward0::apply(GradList&& grads) { return {div(grads[0], mul(unpack(0), Scalar::from_int(2)))}; }
Tensor sqrt(const Tensor& x) {
  Tensor out = float_unary(x, VecUnary::Sqrt);
  if (auto* node = record<SqrtBackward0>(out, {&x})) node->save(out, true);
  return out;
}

FG_NODE(SinBackward0);
GradList SinBackward0::apply(GradList&& grads) { return {mul(grads[0], cos(unpack(0)))}; }
Tensor sin(const Tensor& x) {
  Tensor out = float_unary(x, VecUnary::Sin);
  if (auto* node = record<SinBackward0>(out, {&x})) node->save(x);
  return out;
}

FG_NODE(CosBackward0);
GradList CosBackward0::apply(GradList&& grads) { return {mul(grads[0], neg(sin(unpack(0))))}; }
Tensor cos(const Tensor& x) {
  Tensor out = float_unary(x, VecUnary::Cos);
  if (auto* node = record<CosBackward0>(out, {&x})) node->save(x);
  return out;
}

FG_NODE(TanhBackward0);
GradList TanhBackward0::apply(GradList&& grads) {
  Tensor y = unpack(0);
  return {mul(grads[0], rsub(mul(y, y), Scalar::from_int(1)))};
}
Tensor tanh(const Tensor& x) {
  Tensor out = float_unary(x, VecUnary::Tanh);
  if (auto* node = record<TanhBackward0>(out, {&x})) node->save(out, true);
  return out;
}

FG_NODE(SigmoidBackward0);
GradList SigmoidBackward0::apply(GradList&& grads) {
  Tensor y = unpack(0);
  return {mul(grads[0], mul(y, rsub(y, Scalar::from_int(1))))};
}
Tensor sigmoid(const Tensor& x) {
  Tensor out = float_unary(x, VecUnary::Sigmoid);  // 1 / (1 + exp(-x))
  if (auto* node = record<SigmoidBackward0>(out, {&x})) node->save(out, true);
  return out;
}

// ReLU's gradient, as PyTorch's threshold_backward(g, result, 0): g cut where the result is <= 0
// (so it passes where the result is NaN). Linear in g: its own gradient is the same cut; constant
// in the result, which gets zeros (as PyTorch's, so autograd.grad finds the result used).
Tensor threshold_backward(const Tensor& g, const Tensor& result);
FG_NODE(ThresholdBackwardBackward0);
GradList ThresholdBackwardBackward0::apply(GradList&& grads) {
  Tensor result = unpack(0);
  return {threshold_backward(grads[0], result), needs_input_grad(1) ? zeros(result->shape, result->dtype) : Tensor()};
}
Tensor threshold_backward(const Tensor& g, const Tensor& result) {
  DType dt = result_type(g, result);
  Tensor out =
      binary_map(g, result, dt, dt, [](auto gv, auto r) { return r <= 0 ? decltype(gv)(0) : gv; }, VecBinary::ReluGrad);
  if (auto* node = record<ThresholdBackwardBackward0>(out, {&g, &result})) node->save(result);
  return out;
}

FG_NODE(ReluBackward0);
GradList ReluBackward0::apply(GradList&& grads) { return {threshold_backward(grads[0], unpack(0))}; }
Tensor relu(const Tensor& x) {
  if (x->dtype == DType::Bool) throw RuntimeError("Boolean inputs not supported for relu");
  Tensor out = unary_map(
      x, x->dtype, [](auto v) { return v > 0 || v != v ? v : decltype(v)(0); },  // NaN stays NaN
      VecUnary::Relu);
  if (auto* node = record<ReluBackward0>(out, {&x})) node->save(out, true);
  return out;
}

// clamp passes the gradient where min <= x <= max (boundaries included, as PyTorch).
struct ClampNode : Node {
  std::optional<Scalar> min, max;
};
FG_NODE_FROM(ClampBackward1, ClampNode);
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
// bound makes every element NaN (a NaN x stays NaN).
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
  // A bound replaces x only where x is past it (or the bound is NaN): x equal to the bound stays
  // itself, so -0 clamped to a bound 0 stays -0, as PyTorch's clamp kernels.
  Tensor out = unary_map(x, dt, [&min, &max](auto v) {
    using T = decltype(v);
    if (min) {
      T bound = min->to<T>();
      if (v < bound || bound != bound) v = bound;
    }
    if (max) {
      T bound = max->to<T>();
      if (bound < v || bound != bound) v = bound;
    }
    return v;
  });
  if (auto* node = record<ClampBackward1>(out, {&x})) {
    node->save(x);
    node->min = min;
    node->max = max;
  }
  return out;
}

// clamp with tensor bounds (either may be missing). As PyTorch: x gets the gradient where
// min <= x <= max, min where x < min (unless min >= max: then max wins), max where x > max or
// max < min.
struct ClampTensorNode : Node {  // saves x, min, max (a bound left out: not defined)
  InputMeta meta[3];
  Tensor reduce(size_t i, const Tensor& g) const { return to_dtype(sum_to(g, meta[i].sizes()), meta[i].dtype); }
};
FG_NODE_FROM(ClampBackward0, ClampTensorNode);
GradList ClampBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor x = unpack(0);
  Tensor lo = saved[1].defined() ? unpack(1) : Tensor(), hi = saved[2].defined() ? unpack(2) : Tensor();
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
  check_differentiable_output(out);
  auto* node = make_node<ClampBackward0>();
  for (const Tensor* t : {&x, &min, &max}) node->next_edges.push_back(*t ? gradient_edge(*t) : Edge{});
  out->grad_fn = NodeRef(node);
  out->output_nr = 0;
  node->meta[0] = InputMeta::of(x);
  if (min) node->meta[1] = InputMeta::of(min);
  if (max) node->meta[2] = InputMeta::of(max);
  node->save(x);
  node->save(min);
  node->save(max);
  return out;
}

}  // namespace fg
