"""The activations with parameters (leaky_relu, hardtanh), as the core's fused ops
(csrc/ops/activation.cpp): PyTorch's kernel formulas over the values, the parameters converted to the
computation type (float32 for the 16-bit floats) and each result rounded to it, as the core does.
Each gradient is an op of its own (LeakyReluBackwardBackward0, HardtanhBackwardBackward0, as
PyTorch's): the same op of the incoming gradient, and constant in x, which gets zeros.
"""

from .._types import compute_type, float64
from ._autograd import Function
from ._elementwise import zeros_like
from ._inplace import _apply_inplace
from ._nn import _not_implemented_for
from ._storage import cast, cast_scalar
from ._tensor import new_tensor, read


def _leaky_relu(x, slope):
    return x if x > 0 else x * slope


def _leaky_relu_gradient(g, x, slope):
    return g if x > 0 else g * slope  # the slope at 0 too


def _hardtanh(x, low, high):
    return low if x < low else high if x > high else x  # as PyTorch's clamp kernel: -0 and NaN stay


def _hardtanh_gradient(g, x, low, high):
    return 0.0 if x <= low or x >= high else g  # 0 at the bounds too


_FORMULAS = {
    "leaky_relu": (_leaky_relu, _leaky_relu_gradient, "LeakyReluBackwardBackward0"),
    "hardtanh": (_hardtanh, _hardtanh_gradient, "HardtanhBackwardBackward0"),
}


def _computed(values, like, params, formula):
    """formula(*values_i, *params) over the values of tensors `like`'s shape, in its computation type."""
    dtype = compute_type(like._dtype)
    params = [cast_scalar(float(p), dtype) for p in params]
    results = cast([formula(*v, *params) for v in zip(*values)], float64, dtype)
    return new_tensor(results, like._shape, like._dtype)


class ActivationBackwardBackward(Function):
    """g f'(x) as an op of its own, named after its activation."""

    def forward(self, g, x, activation, params):
        self.activation, self.params = activation, params
        self.save(x)
        return _computed([read(g, x._shape), read(x)], x, params, _FORMULAS[activation][1])

    def name(self):
        return _FORMULAS[self.activation][2]

    def backward(self, gg):
        x = self.unpack(0)
        grad_g = activation_backward(gg, x, self.activation, self.params) if self.needs_input_grad(0) else None
        return grad_g, zeros_like(x) if self.needs_input_grad(1) else None


def activation_backward(g, x, activation, params):
    return ActivationBackwardBackward.run(g, x, activation=activation, params=params)


class ActivationBackward(Function):
    """f(x) of a floating tensor, named as PyTorch's node; an in-place form saves the result."""

    def forward(self, x, activation, params, node_name, saves_result):
        if not x._dtype.is_floating_point:
            raise _not_implemented_for(f"{activation}_cpu", x._dtype)
        self.activation, self.params, self.node_name, self.saves_result = activation, params, node_name, saves_result
        out = _computed([read(x)], x, params, _FORMULAS[activation][0])
        self.save(out if saves_result else x, is_output=saves_result)
        return out

    def name(self):
        return self.node_name

    def backward(self, g):
        if self.saves_result and self.activation == "leaky_relu" and self.params[0] < 0:
            raise RuntimeError(
                "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. "
                "This is caused by calling in-place forward function with a negative slope, please call out-of-place "
                "version instead. File an issue at https://github.com/pytorch/pytorch if you do require supporting "
                "in-place leakRelu backward calculation with negative slope"
            )
        return activation_backward(g, self.unpack(0), self.activation, self.params)


def leaky_relu(x, slope):
    return ActivationBackward.run(
        x, activation="leaky_relu", params=(slope,), node_name="LeakyReluBackward0", saves_result=False
    )


def leaky_relu_(self, slope):
    params = dict(activation="leaky_relu", params=(slope,), node_name="LeakyReluBackward1", saves_result=True)
    return _apply_inplace(ActivationBackward, self, (), False, **params)


def hardtanh(x, low, high):
    return ActivationBackward.run(
        x, activation="hardtanh", params=(low, high), node_name="HardtanhBackward0", saves_result=False
    )


def hardtanh_(self, low, high):  # PyTorch's node saves the old values (a later write to self is no error)
    params = dict(activation="hardtanh", params=(low, high), node_name="HardtanhBackward0", saves_result=False)
    return _apply_inplace(ActivationBackward, self, (), True, **params)
