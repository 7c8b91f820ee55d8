// The activations with parameters as fused elementwise ops: leaky_relu and hardtanh (relu6 is
// hardtanh(0, 6)). Each forward is one vector pass (kernels/elementwise_impl.h) and its gradient one
// more, with PyTorch's kernels' formulas in the tensor's type and the parameters converted to it as
// PyTorch converts them, so float32 results are PyTorch's bit for bit (float16 and bfloat16 compute
// in float32, rounded once). As PyTorch's, each gradient is an op with a node of its own
// (LeakyReluBackwardBackward0, HardtanhBackwardBackward0), recorded in a backward with create_graph:
// it is the same op of the incoming gradient, and constant in x (piecewise), which gets zeros.
// python/fastgrad/reference/_activation.py is the pure-Python twin.
#include "autograd/node.h"
#include "kernels/kernel_table.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

namespace {

struct ActivationParams {
  Activation op;
  double values[2] = {0, 0};  // leaky_relu: the slope; hardtanh: min, max
};

// Runs `f(kernels, params in T)` over T, the compute type of `dtype`, on contiguous data.
template <class F>
Tensor in_compute_type(DType dtype, const Shape& shape, const ActivationParams& p, F f) {
  DType dt = compute_type(dtype);
  Tensor out = empty(shape, dt);
  dispatch_floating(dt, [&](auto tag) {
    using T = decltype(tag);
    const T params[2] = {static_cast<T>(p.values[0]), static_cast<T>(p.values[1])};
    f(kernels().of<T>(), params, out->data_as<T>());
  });
  return cast_values(out, dtype);
}

Tensor activation_values(const Tensor& x, const ActivationParams& p) {
  Tensor src = dense(cast_values(x, compute_type(x->dtype)));
  return in_compute_type(x->dtype, x->shape, p, [&](const auto& k, const auto* params, auto* out) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(params)>>;
    ActivationKernel<T> kernel = k.activation[static_cast<int>(p.op)];
    const T* xp = src->data_as<T>();
    parallel_for(0, src->numel(), kParallelElements,
                 [&](int64_t lo, int64_t hi) { kernel(xp + lo, out + lo, hi - lo, params); });
  });
}

struct ActivationNode : Node {
  ActivationParams params;
};

// The gradient g f'(x) (x: the input, or the result where that gives the same: LeakyReluBackward1 of
// the in-place form), an op of its own, as PyTorch's.
FG_NODE_UNNAMED(ActivationBackwardBackward, ActivationNode);
Tensor activation_backward(const Tensor& g, const Tensor& x, const ActivationParams& p, const char* node_name) {
  DType dt = compute_type(x->dtype);
  Tensor gs = cast_values(g, dt);
  bool repeated = is_repeated(gs);
  if (!repeated) gs = dense(gs);
  Tensor xs = dense(cast_values(x, dt));
  Tensor gx = in_compute_type(x->dtype, x->shape, p, [&](const auto& k, const auto* params, auto* out) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(params)>>;
    ActivationGradKernel<T> kernel = k.activation_grad[static_cast<int>(p.op)];
    const T *gp = gs->data_as<T>(), *xp = xs->data_as<T>();
    parallel_for(0, xs->numel(), kParallelElements, [&](int64_t lo, int64_t hi) {
      kernel(repeated ? gp : gp + lo, repeated, xp + lo, out + lo, hi - lo, params);
    });
  });
  if (auto* node = record<ActivationBackwardBackward>(gx, {&g, &x}, node_name)) {
    node->params = p;
    node->save(x);
  }
  return gx;
}

const char* backward_backward_name(Activation op) {
  return op == Activation::LeakyRelu ? "LeakyReluBackwardBackward0" : "HardtanhBackwardBackward0";
}

}  // namespace

GradList ActivationBackwardBackward::apply(GradList&& grads) {
  Tensor x = unpack(0);
  GradList out(2);
  if (needs_input_grad(0)) out[0] = activation_backward(grads[0], x, params, name());
  if (needs_input_grad(1)) out[1] = zeros_like(x);
  return out;
}

// saves_result: the node of an in-place form, which saves the result (self's new values) instead of x.
struct ActivationForwardNode : ActivationNode {
  bool saves_result = false;
};
FG_NODE_UNNAMED(ActivationBackward, ActivationForwardNode);
GradList ActivationBackward::apply(GradList&& grads) {
  // As PyTorch: where the slope is negative, the sign of the result no longer tells the side of x.
  if (saves_result && params.op == Activation::LeakyRelu && params.values[0] < 0)
    throw RuntimeError(
        "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. This is "
        "caused by calling in-place forward function with a negative slope, please call out-of-place version "
        "instead. File an issue at https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu "
        "backward calculation with negative slope");
  return {activation_backward(grads[0], unpack(0), params, backward_backward_name(params.op))};
}

namespace {
Tensor activation(const Tensor& x, const ActivationParams& p, const char* kernel_name, const char* node_name,
                  bool saves_result) {
  if (!is_floating(x->dtype)) throw not_implemented_for(kernel_name, x->dtype);
  Tensor out = activation_values(x, p);
  if (auto* node = record<ActivationBackward>(out, {&x}, node_name)) {
    node->params = p;
    node->saves_result = saves_result;
    node->save(saves_result ? out : x, saves_result);
  }
  return out;
}
}  // namespace

Tensor leaky_relu(const Tensor& x, double slope) {
  return activation(x, {Activation::LeakyRelu, {slope, 0}}, "leaky_relu_cpu", "LeakyReluBackward0", false);
}
Tensor leaky_relu_for_inplace(const Tensor& x, double slope) {
  return activation(x, {Activation::LeakyRelu, {slope, 0}}, "leaky_relu_cpu", "LeakyReluBackward1", true);
}
Tensor hardtanh(const Tensor& x, double min, double max) {
  return activation(x, {Activation::Hardtanh, {min, max}}, "hardtanh_cpu", "HardtanhBackward0", false);
}

}  // namespace fg
