"""torch.nn.functional: activations, the dropouts, normalize, pad, bilinear, the normalizations
(layer, rms, batch, instance, group, local response), embedding(_bag), one_hot, pixel_shuffle,
interpolate, the losses and (from _functional_attention) the attention functions.

softmax, log_softmax, the negative log likelihood, gelu, leaky_relu and hardtanh (relu6) are the
backend's fused primitives;
the other activations are each one node with PyTorch's name and derivative (written with tensor
ops, so higher derivatives follow); everything else is composed from tensor ops here, with
PyTorch's formulas (so the same values, and gradients by the chain rule), argument checks and
messages.
"""

import math
import operator
import warnings

import numpy as np

from .. import _prims
from .._methods import _in_place, _recorded, _type_name, _without_derivative, _wrap_dim, broadcast_shapes
from .._methods import div as _div, triu_indices
from .._methods import cosine_similarity, pairwise_distance  # noqa: F401 (PyTorch's torch functions, here too)
from .._factories import arange, from_numpy, ones_like
from .._grad_mode import is_grad_enabled
from .._sampling import bernoulli_
from .._grad_mode import no_grad
from ._checked import CheckedArguments
from ..autograd.function import Function
from fastgrad._types import (
    SCALAR_TYPE_NAME,
    bool as bool_,
    bfloat16,
    can_cast,
    finfo,
    float16,
    float32,
    float64,
    int32,
    int64,
)
from fastgrad._types import promote_types

Tensor = _prims.Tensor

from ._functional_pooling import *  # noqa: E402, F403  max/avg/adaptive/lp pooling, max_unpool: its __all__
from ._functional_attention import *  # noqa: E402, F403  scaled_dot_product_attention, multi_head_attention_forward
from ._functional_grid import *  # noqa: E402, F403  affine_grid, grid_sample
from ._functional_attention import _canonical_mask, _none_or_dtype  # noqa: E402, F401  (PyTorch's, used by the layers)


# ---- activations


def linear(input, weight, bias=None):
    """x @ W.t() + b as PyTorch routes it (ATen's linear), with its nodes: a 2-D input and a bias are
    one addmm (AddmmBackward0, the bias added in the product's epilogue); a contiguous input of
    another rank, with a contiguous bias that is a vector once squeezed, is viewed as 2-D around
    that addmm (ViewBackward0 on either side); otherwise matmul, then the bias added in place
    (AddBackward0). The primitive routes (its one call is most of a small layer's time); the types
    are checked after it fails, for PyTorch's message (a layer's call pays for no check)."""
    try:
        return _prims.linear(input, weight, bias)
    except Exception:  # the core's TypeError, or whatever the reference's loops met in a non-tensor
        for position, (name, value) in enumerate([("input", input), ("weight", weight), ("bias", bias)], 1):
            if not isinstance(value, Tensor) and (value is not None or name != "bias"):
                raise TypeError(
                    f"linear(): argument '{name}' (position {position}) must be Tensor, not {type(value).__name__}"
                ) from None
        raise


def relu(input, inplace=False):
    return input.relu_() if inplace else _prims.relu(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    if inplace:
        return _prims.leaky_relu_(input, negative_slope)
    return _prims.leaky_relu(input, negative_slope)


def relu_(input):
    return relu(input, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, inplace=True)


def gelu(input, approximate="none"):
    return _prims.gelu(input, approximate)


def sigmoid(input):
    return _prims.sigmoid(input)


def tanh(input):
    return _prims.tanh(input)


def _softmax_dim(name, input, dim, stacklevel):
    if dim is not None:
        return dim
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an argument.",
        stacklevel=stacklevel,
    )
    return 0 if input.dim() in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    return input.softmax(_softmax_dim("softmax", input, dim, _stacklevel), dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return input.log_softmax(_softmax_dim("log_softmax", input, dim, _stacklevel), dtype=dtype)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes each element with probability p (PyTorch's mask: bernoulli_(1 - p)), scaling the rest by 1/(1-p)."""
    _check_probability(p)
    return _noisy(input, p, training, inplace, feature=False, alpha=False)


_SELU_NEGATIVE_LIMIT = 1.7580993408473766  # alpha dropout's alpha: SELU's scale * alpha


def _check_probability(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _noisy(input, p, training, inplace, feature, alpha):
    """PyTorch's _dropout_impl: a keep-with-probability-1-p noise (one draw per channel for the
    feature forms), scaled by 1/(1-p), or for alpha dropout an affine map that keeps the mean and
    variance of SELU activations (dropped values go to SELU's negative limit)."""
    if training is not True and training is not False:  # PyTorch's kernel argument parsing, its name
        kernel = ("feature_" if feature else "") + ("alpha_" if alpha else "") + "dropout"
        raise TypeError(f"{kernel}(): argument 'train' (position 3) must be bool, not {_type_name(training)}")
    if p == 0 or not training or input.numel() == 0:
        return input
    if feature and input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if p == 1:
        return input.mul_(0) if inplace else input * 0
    noise_shape = list(input.shape[:2]) + [1] * (input.dim() - 2) if feature else list(input.shape)
    noise = bernoulli_(_prims.empty(noise_shape, input.dtype), 1 - p)
    if not alpha:
        noise = noise.div_(1 - p)
        return input.mul_(noise) if inplace else input * noise
    a = 1.0 / math.sqrt((_SELU_NEGATIVE_LIMIT**2 * p + 1) * (1 - p))
    shift = (noise - 1) * (_SELU_NEGATIVE_LIMIT * a) + _SELU_NEGATIVE_LIMIT * a * p
    noise = noise * a
    return input.mul_(noise).add_(shift) if inplace else input * noise + shift


def _channel_dropout(input, p, training, inplace, batched):
    """Feature dropout of an input whose batch dim may be missing (then added for the draw)."""
    if not batched:
        input = input.unsqueeze_(0) if inplace else input.unsqueeze(0)
    result = _noisy(input, p, training, inplace, feature=True, alpha=False)
    if not batched:
        result = result.squeeze_(0) if inplace else result.squeeze(0)
    return result


def dropout1d(input, p=0.5, training=True, inplace=False):
    _check_probability(p)
    if input.dim() not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D input. "
            "Note that dropout1d exists to provide channel-wise dropout on inputs with 1 "
            "spatial dimension, a channel dimension, and an optional batch dimension "
            "(i.e. 2D or 3D inputs)."
        )
    return _channel_dropout(input, p, training, inplace, batched=input.dim() == 3)


def _warn_dropout_rank(name, input, spatial):
    if input.dim() not in (spatial + 1, spatial + 2):
        warnings.warn(
            f"{name}: Received a {input.dim()}-D input to {name}, which is deprecated "
            "and will result in an error in a future release. To retain the behavior "
            "and silence this warning, please use dropout instead. Note that "
            f"{name} exists to provide channel-wise dropout on inputs with {spatial} spatial dimensions, "
            f"a channel dimension, and an optional batch dimension (i.e. {spatial + 1}D or {spatial + 2}D inputs).",
            stacklevel=3,
        )


def dropout2d(input, p=0.5, training=True, inplace=False):
    _check_probability(p)
    _warn_dropout_rank("dropout2d", input, 2)
    if input.dim() == 3:  # PyTorch keeps the historical (N, C, L) reading of a 3D input
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
            "1D dropout behavior is desired - input is interpreted as shape (N, C, L), where C "
            "is the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2,
        )
    return _noisy(input, p, training, inplace, feature=True, alpha=False)


def dropout3d(input, p=0.5, training=True, inplace=False):
    _check_probability(p)
    _warn_dropout_rank("dropout3d", input, 3)
    return _channel_dropout(input, p, training, inplace, batched=input.dim() == 5)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    _check_probability(p)
    return _noisy(input, p, training, inplace, feature=False, alpha=True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    _check_probability(p)
    return _noisy(input, p, training, inplace, feature=True, alpha=True)


# ---- the other activations: each one node with PyTorch's name, value and derivative (the kinks
# included); the backwards are written with ops on the saved input, so the double backward follows.


def _check_floating(input, kernel):
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")


def _activation(name, input, value, gradient, inplace=False, piecewise_linear=False, saves_result=False):
    """value(x) for x = input (computed without history) as the one node `name`, whose gradient is
    gradient(grad, x); inplace writes it over the input, as PyTorch's in-place form (the node then
    saves a copy of the old values; with saves_result also the result, which becomes the input, so
    that a later write to it fails the backward as PyTorch's, whose node computes from the result).
    A piecewise_linear activation's gradient is itself one node."""

    def backward(grads, x, *result):
        if piecewise_linear:
            return [_piecewise_linear_gradient(name, grads[0], x, lambda g: gradient(g, x))]
        return [gradient(grads[0], x)]

    def node(x):
        outputs = [value(x.detach())]
        return _recorded(name, [x], outputs, [x] + outputs if inplace and saves_result else [x], backward)[0]

    return _in_place(node, input) if inplace else node(input)


def _piecewise_linear_gradient(name, grad, x, scale):
    """scale(grad), the gradient of a piecewise linear activation (scale multiplies by a constant per
    piece of x), as PyTorch's node of the backward of node `name`: its own gradient is scale(gg)
    for grad, and zeros for x, on which it depends only through the pieces."""

    def backward(grads):
        return [scale(grads[0]), _prims.full(list(x.shape), 0, x.dtype)]

    double_name = name.rstrip("01") + "Backward0"  # EluBackward1 -> EluBackwardBackward0
    return _recorded(double_name, [grad, x], [scale(grad.detach())], [], backward)[0]


def _float_product(dtype, a, b):
    """a * b as PyTorch's kernels form it: in float32 arithmetic unless the tensor is float64."""
    return a * b if dtype is float64 else float(np.float32(a) * np.float32(b))


def _elu(node, input, alpha, scale, input_scale, inplace):
    _check_floating(input, "elu_cpu")
    negative = _float_product(input.dtype, alpha, scale)

    def value(x):
        return _prims.where(x > 0, x * scale, (x * input_scale).expm1() * negative)

    def gradient(grad, x):
        # the exp of the unused side must not overflow; PyTorch's second derivative is 0 at 0
        below = x.masked_fill(x >= 0, 0.0)
        return _prims.where(x <= 0, grad * input_scale * negative * (below * input_scale).exp(), grad * scale)

    return _activation(f"{node}{int(inplace)}", input, value, gradient, inplace, saves_result=True)


def elu(input, alpha=1.0, inplace=False):
    return _elu("EluBackward", input, alpha, 1.0, 1.0, inplace)


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    return _elu("EluBackward", input, _SELU_ALPHA, _SELU_SCALE, 1.0, inplace)


def selu_(input):
    return selu(input, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _elu("CeluBackward", input, alpha, 1.0, 1.0 / alpha, inplace)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def _logistic(x):
    return 1 / (1 + (-x).exp())


def silu(input, inplace=False):
    _check_floating(input, "silu_cpu")

    def gradient(grad, x):
        s = _logistic(x)
        return grad * s * (1 + x * (1 - s))

    return _activation("SiluBackward0", input, lambda x: x / (1 + (-x).exp()), gradient, inplace)


def mish(input, inplace=False):
    _check_floating(input, "mish_cpu")

    def gradient(grad, x):
        t = x.exp().log1p().tanh()
        return grad * (t + x * _logistic(x) * (1 - t * t))

    return _activation("MishBackward0", input, lambda x: x * x.exp().log1p().tanh(), gradient, inplace)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, linear (x) where beta x > threshold."""
    _check_floating(input, "softplus_cpu")

    def value(x):
        return _prims.where(x * beta > threshold, x, (x * beta).exp().log1p() / beta)

    def gradient(grad, x):
        linear = x * beta > threshold
        # exp(beta x) of the linear side must not overflow, and from the threshold on (at it too,
        # as PyTorch's double backward) z does not vary with x
        kept = x.detach().masked_fill(linear, 0.0)
        z = (_prims.where(x * beta >= threshold, kept, x) * beta).exp()
        return _prims.where(linear, grad, grad * z / (z + 1))

    return _activation("SoftplusBackward0", input, value, gradient)


def softsign(input):
    return input / (input.abs() + 1)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    return (-input).softmax(_softmax_dim("softmin", input, dim, _stacklevel), dtype=dtype)


def _zero_where(mask, grad):
    return _prims.where(mask, 0.0, grad)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if input.dtype == bool_:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if not input.dtype.is_floating_point:  # PyTorch's clamp, the bounds read as the input's integers
        min_val, max_val = int(min_val), int(max_val)
        return input.clamp_(min_val, max_val) if inplace else input.clamp(min_val, max_val)
    if inplace:
        return _prims.hardtanh_(input, min_val, max_val)
    return _prims.hardtanh(input, min_val, max_val)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def hardswish(input, inplace=False):
    _check_floating(input, "hardswish_cpu")

    def gradient(grad, x):
        return _prims.where(x <= -3, 0.0, _prims.where(x < 3, grad * (x / 3 + 0.5), grad))

    return _activation("HardswishBackward0", input, lambda x: x * (x + 3).clamp(0, 6) / 6, gradient, inplace)


_ONE_SIXTH = float(np.float32(1) / np.float32(6))  # PyTorch's backward uses float's 1/6 for every dtype


def hardsigmoid(input, inplace=False):
    _check_floating(input, "hardsigmoid_cpu")

    def gradient(grad, x):
        # PyTorch's hardsigmoid_backward has no derivative: a double backward through it raises
        def no_derivative():
            return RuntimeError("derivative for aten::hardsigmoid_backward is not implemented")

        result = _zero_where((x <= -3) | (x >= 3), grad.detach() * _ONE_SIXTH)
        return _without_derivative([result], [grad, x], "torch::autograd::NotImplemented", no_derivative)[0]

    return _activation("HardsigmoidBackward0", input, lambda x: (x + 3).clamp(0, 6) / 6, gradient, inplace)


def logsigmoid(input):
    """min(x, 0) - log(1 + exp(-|x|)): no exp overflows."""
    _check_floating(input, "log_sigmoid_cpu")

    def gradient(grad, x):
        # z = exp(-|x|), from each side's own formula: its derivative at 0 is the right side's, as PyTorch's
        negative = x < 0
        z = _prims.where(negative, x.masked_fill(~negative, 0.0).exp(), (-x.masked_fill(negative, 0.0)).exp())
        share = z / (1 + z)
        return grad * _prims.where(negative, 1 - share, share)

    return _activation("LogSigmoidBackward0", input, lambda x: x.clamp(max=0) - (-x.abs()).exp().log1p(), gradient)


def _check_shrink(input, lambd):
    _check_floating(input, "softshrink_check")
    if lambd < 0:
        largest = np.finfo(np.float64 if input.dtype is float64 else np.float32).max
        raise RuntimeError(
            f"lambda must be in range [0, {largest:g}] for input dtype {SCALAR_TYPE_NAME[input.dtype]}, "
            f"but found {lambd:g}"
        )


def _inside(x, lambd):
    return (x >= -lambd) & (x <= lambd)


def softshrink(input, lambd=0.5):
    _check_shrink(input, lambd)

    def value(x):  # x * 0 inside: a NaN stays NaN
        return _prims.where(x > lambd, x - lambd, _prims.where(x < -lambd, x + lambd, x * 0))

    return _activation(
        "SoftshrinkBackward0",
        input,
        value,
        lambda grad, x: _zero_where(_inside(x, lambd), grad),
        piecewise_linear=True,
    )


def hardshrink(input, lambd=0.5):
    _check_floating(input, "hardshrink_cpu")
    return _activation(
        "HardshrinkBackward0",
        input,
        lambda x: _prims.where(_inside(x, lambd), 0.0, x),
        lambda grad, x: _zero_where(_inside(x, lambd), grad),
        piecewise_linear=True,
    )


def tanhshrink(input):
    return input - input.tanh()


def _thresholded(input, limit, value, inplace):
    """value where input <= limit, the input elsewhere."""
    if input.dtype == bool_:
        _check_floating(input, "threshold_cpu")
    if not input.dtype.is_floating_point:  # the kernel reads both as the input's integers
        limit, value = int(limit), int(value)
    return _activation(
        f"ThresholdBackward{int(inplace)}",
        input,
        lambda x: _prims.where(x <= limit, value, x),
        lambda grad, x: _zero_where(x <= limit, grad),
        inplace,
        piecewise_linear=True,
    )


def threshold(input, threshold, value, inplace=False):
    return _thresholded(input, threshold, value, inplace)


def threshold_(input, threshold, value):
    return _thresholded(input, threshold, value, True)


def glu(input, dim=-1):
    """a * sigmoid(b), a and b the halves of the input along dim."""
    _check_floating(input, "glu_cpu")
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    dim = _wrap_dim(dim, input.dim())
    if input.shape[dim] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim} is size {input.shape[dim]}")

    def value(x):
        a, b = x.chunk(2, dim)
        return a * b.sigmoid()

    def gradient(grad, x):
        a, b = x.chunk(2, dim)
        s = b.sigmoid()
        return _prims.cat([grad * s, grad * a * s * (1 - s)], dim)

    return _activation("GluBackward0", input, value, gradient)


def prelu(input, weight):
    """input where positive, weight * input elsewhere; weight holds one slope or one per channel (dim 1)."""
    # PyTorch's order: its at::prelu checks the dtypes and shapes, then its kernel the dtype's kind
    if weight.dtype is not input.dtype:
        raise RuntimeError(
            f"prelu: Type promoting not supported. Got {SCALAR_TYPE_NAME[input.dtype]} and "
            f"{SCALAR_TYPE_NAME[weight.dtype]}"
        )
    channels = input.shape[1] if input.dim() >= 2 else 1
    if weight.numel() != 1:
        if input.dim() == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        if weight.numel() != channels:
            raise RuntimeError(
                "Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                f"{weight.numel()} and channel size = {channels}."
            )
    if weight.dim() > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.dim()}")
    _check_floating(input, "prelu_cpu")
    channel_shape = [-1 if d == 1 else 1 for d in range(input.dim())]
    per_channel = [d for d in range(input.dim()) if not (d == 1 and weight.numel() > 1)]

    def slopes(w):  # the weight (or a gradient like it) broadcast along the input's channel dim
        return w.reshape(channel_shape) if input.dim() >= 2 else w.reshape([])

    def to_weight(t):  # a per-element term summed to the weight's shape
        return (t.sum(per_channel) if per_channel else t).reshape(weight.shape)

    def gradients(grad, x, w):
        positive = x > 0  # as PyTorch's kernel: a NaN input takes the weight's side
        return _prims.where(positive, grad, slopes(w) * grad), to_weight(_prims.where(positive, 0.0, x * grad))

    def double_backward(grads, grad, x, w):
        """The gradients of <gg_input, grad_input> + <gg_weight, grad_weight> for grad, x and w."""
        gg_input, gg_weight = grads
        positive = x > 0
        zeros = _prims.full(list(x.shape), 0, x.dtype)
        d_grad, d_x, d_w = zeros, zeros, None
        if gg_input is not None:
            d_grad = _prims.where(positive, gg_input, slopes(w) * gg_input)
            d_w = to_weight(_prims.where(positive, 0.0, grad * gg_input))
        if gg_weight is not None:
            d_grad = d_grad + _prims.where(positive, 0.0, x * slopes(gg_weight))
            d_x = _prims.where(positive, 0.0, grad * slopes(gg_weight))
        return [d_grad, d_x, d_w]

    def backward(grads, x, w):
        values = gradients(grads[0].detach(), x.detach(), w.detach())
        return _recorded(
            "PreluKernelBackwardBackward0", [grads[0], x, w], list(values), [grads[0], x, w], double_backward
        )

    result = _prims.where(input.detach() > 0, input.detach(), slopes(weight.detach()) * input.detach())
    return _recorded("PreluKernelBackward0", [input, weight], [result], [input, weight], backward)[0]


def _rrelu_noise(input, lower, upper, generator):
    """PyTorch's rrelu_with_noise draws: for each non-positive element in order, a double uniform
    slope in [lower, upper] (the bounds first rounded to the input's compute type), 1 elsewhere. Its
    kernel is compiled without FMA: u * (upper - lower) + lower rounds twice."""
    non_positive = input <= 0
    bound_type = float64 if input.dtype is float64 else float32
    low, high = (_prims.full([], bound, bound_type).item() for bound in (lower, upper))
    slopes = _prims.empty([int(non_positive.sum().item())], float64).uniform_(generator=generator)
    slopes = slopes * (high - low) + low
    noise = ones_like(input)
    noise[non_positive] = slopes.to(input.dtype)
    return noise


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Training: each non-positive element times a slope drawn uniformly from [lower, upper]; in
    evaluation the mean slope, as leaky_relu."""
    return _rrelu(input, lower, upper, training, inplace, None)


def _rrelu(input, lower, upper, training, inplace, generator):
    """rrelu drawing its slopes from `generator` (None: the default one), as torch.rrelu can."""
    if training:
        _check_floating(input, "rrelu_with_noise_out_cpu")
    else:
        _check_floating(input, "leaky_relu_cpu")
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    node = f"RreluWithNoiseBackward{int(inplace)}"
    if training and upper - lower > 1e-6:  # PyTorch's rule: a narrower range is the fixed slope
        noise = _rrelu_noise(input.detach(), lower, upper, generator)
        return _activation(
            node, input, lambda x: x * noise, lambda grad, x: grad * noise, inplace, True, saves_result=True
        )
    slope = (lower + upper) / 2
    return _activation(
        node,
        input,
        lambda x: _prims.where(x > 0, x, x * slope),
        lambda grad, x: _prims.where(x > 0, grad, grad * slope),
        inplace,
        piecewise_linear=True,
        saves_result=True,
    )


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


# ---- normalize, padding and bilinear


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input divided by its p-norm along dim, the norm clamped below at eps."""
    denominator = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    return input / denominator if out is None else _div(input, denominator, out=out)


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _check_pad(pad):
    for position, amount in enumerate(pad):
        if not isinstance(amount, int):
            raise TypeError(
                "pad(): argument 'pad' (position 2) must be tuple of ints, but found element of type "
                f"{type(amount).__name__} at pos {position}"
            )
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")


def _pad_constant(input, pad, value):
    if len(pad) // 2 > input.dim():
        raise RuntimeError(
            "Padding length should be less than or equal to two times the input dimension but got "
            f"padding length {len(pad)} and input of dimension {input.dim()}"
        )
    fill = 0 if value is None else value
    if not input.dtype.is_floating_point:  # the value is read as the input's dtype
        fill = bool(fill) if input.dtype is bool_ else int(fill)
    result = input
    for pair in range(len(pad) // 2):
        dim, before, after = input.dim() - 1 - pair, pad[2 * pair], pad[2 * pair + 1]
        crop_before, crop_after = max(-before, 0), max(-after, 0)
        if crop_before or crop_after:  # negative padding crops
            result = result.narrow(dim, crop_before, result.shape[dim] - crop_before - crop_after)
        blocks = [
            _prims.full([n if d == dim else size for d, size in enumerate(result.shape)], fill, input.dtype)
            for n in (max(before, 0), max(after, 0))
        ]
        result = _prims.cat([blocks[0], result, blocks[1]], dim)
    return result


def _source_positions(mode, size, before, after):
    """For each position of a padded dim, the input position it copies."""
    positions = np.arange(-before, size + after)
    if mode == "reflect":
        positions = np.abs(positions)
        return np.where(positions > size - 1, 2 * (size - 1) - positions, positions)
    if mode == "replicate":
        return np.clip(positions, 0, size - 1)
    # circular: negative amounts crop first, and the padding wraps around what is left
    kept = np.arange(max(-before, 0), size - max(-after, 0))
    return kept[np.arange(-max(before, 0), len(kept) + max(after, 0)) % len(kept)]


def _check_pad_sizes(input, pad, mode):
    pairs = len(pad) // 2
    if input.dim() not in (pairs + 1, pairs + 2) or pairs > 3:
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.dim()}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
        )
    shape = list(input.shape)
    if mode != "circular" and 0 in shape[-pairs - 1 :]:
        raise RuntimeError(
            f"Expected {pairs + 1}D or {pairs + 2}D (batch mode) tensor with possibly 0 batch size and other "
            f"non-zero dimensions for input, but got: {shape}"
        )
    sizes = [shape[-1 - pair] for pair in range(pairs)]  # the padded dims, last first
    padded = [size + pad[2 * pair] + pad[2 * pair + 1] for pair, size in enumerate(sizes)]
    for pair, size in enumerate(sizes):
        before, after = pad[2 * pair], pad[2 * pair + 1]
        if mode == "circular":
            if before > size or after > size:
                raise RuntimeError("Padding value causes wrapping around more than once.")
            if padded[pair] <= 0:
                raise RuntimeError("Negative padding value is resulting in an empty dimension")
            continue
        if pairs == 1 and padded[0] < 1:
            raise RuntimeError(f"input (W: {size}) is too small. Calculated output W: {padded[0]}")
        if padded[pair] < 0:
            raise RuntimeError(
                f"Trying to create tensor with negative dimension {padded[pair]}: {shape[:-pairs] + padded[::-1]}"
            )
        if mode == "reflect" and (before >= size or after >= size):
            raise RuntimeError(
                f"Argument #{4 + 2 * pair}: Padding size should be less than the corresponding input dimension, "
                f"but got: padding ({before}, {after}) at dimension {input.dim() - 1 - pair} of input {shape}"
            )


def pad(input, pad, mode="constant", value=None):
    """PyTorch's F.pad: constant padding of any trailing dims (negative amounts crop); reflect,
    replicate and circular padding of the last 1 to 3 dims, as gathers of input positions."""
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    pad = list(pad)
    _check_pad(pad)
    if mode == "constant":
        return _pad_constant(input, pad, value)
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    _check_pad_sizes(input, pad, mode)
    result = input
    for pair in range(len(pad) // 2):
        dim = input.dim() - 1 - pair
        positions = _source_positions(mode, input.shape[dim], pad[2 * pair], pad[2 * pair + 1])
        result = result.index_select(dim, from_numpy(positions.astype(np.int64)))
    return result


def bilinear(input1, input2, weight, bias=None):
    """y_o = sum_ij x1_i W_oij x2_j + b_o over the inputs' shared batch dims."""
    if input1.dim() != input2.dim():
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.dim()} and {input2.dim()}")
    for d in range(input1.dim() - 1):
        if input1.shape[d] != input2.shape[d]:
            raise RuntimeError(
                f"bilinear(): input batch dimensions do not match at dim {d}: "
                f"got {input1.shape[d]} and {input2.shape[d]}"
            )
    out_features, in1_features, in2_features = weight.shape
    for number, x, expected in ((1, input1, in1_features), (2, input2, in2_features)):
        if x.shape[-1] != expected:
            raise RuntimeError(
                f"bilinear(): input{number} size does not match weight size: got {x.shape[-1]} but expected {expected}"
            )
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != out_features):
        raise RuntimeError(
            f"bilinear(): bias size does not match weight size: got {bias.shape[-1]} but expected {out_features}"
        )
    batch = list(input1.shape[:-1])
    # x1 W: (rows, in1) @ (in1, out * in2), then the dot with x2 along in2
    left = input1.reshape(-1, in1_features).matmul(weight.permute(1, 0, 2).reshape(in1_features, -1))
    output = (left.reshape(-1, out_features, in2_features) * input2.reshape(-1, 1, in2_features)).sum(-1)
    output = output.reshape(batch + [out_features])
    return output if bias is None else output + bias


# ---- normalization and lookup


def _checked_normalized_shape(input, normalized_shape, weight):
    """rms_norm's normalized_shape as a tuple, after PyTorch's checks of it, of the input's trailing
    dims and of the weight's shape (layer_norm's primitive makes its own)."""
    if not isinstance(normalized_shape, (tuple, list)):
        raise TypeError(
            "rms_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, "
            f"not {type(normalized_shape).__name__}"
        )
    shape = tuple(normalized_shape)
    dims = input.shape
    if len(dims) < len(shape):
        raise ValueError(f"Input tensor must have at least {len(shape)} dimensions, but got {len(dims)}")
    if tuple.__getitem__(dims, slice(len(dims) - len(shape), None)) != shape:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape [*{', '.join(map(str, shape))}], "
            f"but got input of size{list(dims)}"
        )
    if weight is not None and weight.shape != shape:
        raise RuntimeError(
            f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
            f"{list(weight.shape)} and normalized_shape = {list(shape)}"
        )
    return shape


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over the trailing normalized_shape dims, times weight plus bias:
    one fused op and one node (NativeLayerNormBackward0), as PyTorch's; float16 and bfloat16
    computed in float32. The primitive checks the shapes (a call per layer on every step: one crossing)."""
    if not isinstance(normalized_shape, (tuple, list)):
        raise TypeError(
            "layer_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, "
            f"not {type(normalized_shape).__name__}"
        )
    return _prims.layer_norm(input, normalized_shape, weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the trailing dims, times weight: composed as PyTorch's CPU
    path composes it (float16/bfloat16 computed in float32; eps None = the computing dtype's eps)."""
    shape = _checked_normalized_shape(input, normalized_shape, weight)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"rms_norm\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")
    upcast = input if input.dtype in (float32, float64) else input.float()
    if eps is None:
        eps = finfo(upcast.dtype).eps
    rstd = upcast.pow(2).mean(list(range(-len(shape), 0)), keepdim=True).add(eps).rsqrt()
    result = (upcast * rstd).type_as(input)
    return result if weight is None else (result * weight).type_as(result)


def _padding_index(padding_idx, num_embeddings):
    """A padding_idx in [-num, num) as a row number."""
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise AssertionError("Padding_idx must be within num_embeddings")
    return padding_idx % num_embeddings


def _renorm_rows(weight, input, max_norm, norm_type):
    """PyTorch's embedding_renorm_: each row that input looks up, whose norm exceeds max_norm, is
    scaled in place (without history) to max_norm / (norm + 1e-7) of itself."""
    rows = input.flatten().unique()
    with no_grad():
        norms = weight[rows].norm(norm_type, 1, keepdim=True)
        scale = _prims.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[rows] = weight[rows] * scale


def _check_indices(input):
    """The indices' dtype, int64 or int32 (PyTorch's message for another)."""
    dtype = input.dtype
    if dtype is not int64 and dtype is not int32:
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: "
            f"Long, Int; but got {input.type()} instead (while checking arguments for embedding)"
        )
    return dtype


def _check_index_range(input, weight):
    """The embedding primitive's range checks, for max_norm's renormalization, which reads the rows first."""
    if not input.numel():
        return
    rows = weight.shape[0]
    if not rows:  # PyTorch checks this before the range
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    if _prims.min_all(input).item() < 0 or _prims.max_all(input).item() >= rows:  # the primitives: no dim parsing
        raise IndexError("index out of range in self")


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    if sparse:
        raise NotImplementedError("embedding: sparse gradients are not supported")
    if weight.dim() != 2:  # before the index checks, as PyTorch
        raise RuntimeError("'weight' must be 2-D")
    padding_row = None if padding_idx is None else _padding_index(padding_idx, weight.shape[0])
    dtype = _check_indices(input)
    if max_norm is not None:
        _check_index_range(input, weight)
        _renorm_rows(weight, input, max_norm, norm_type)
    # PyTorch's one EmbeddingBackward0 node (int32 indices too); the primitive checks the index range
    indices = input if dtype is int64 else input.long()
    return _prims.embedding(weight, indices, -1 if padding_row is None else padding_row, scale_grad_by_freq)


_BAG_MODES = ("sum", "mean", "max")


def _bag_layout(input, offsets, include_last_offset, per_sample_weights):
    """(the flat indices, the bag number of each, the number of bags, the flat per-sample weights)
    for a 2D input (a bag per row) or a 1D input cut at offsets, with PyTorch's checks."""
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed length "
                f"sequences. However, found offsets of type {type(offsets)}"
            )
        bags, width = input.shape
        flat_weights = None if per_sample_weights is None else per_sample_weights.reshape(-1)
        return input.reshape(-1), np.repeat(np.arange(bags), width), bags, flat_weights
    if input.dim() != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    if offsets.dim() != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    starts = offsets.tolist()
    if starts and starts[0] != 0:
        raise RuntimeError(
            "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. "
            f"However, got {starts[0]}"
        )
    if starts and starts[-1] > input.shape[0]:
        raise RuntimeError(
            f"offsets[-1] can not be greater than input's length {input.shape[0]}, but got offsets[-1] of {starts[-1]}"
        )
    ends = starts[1:] if include_last_offset else starts[1:] + [input.shape[0]]
    bags = len(ends)
    sizes = [end - start for start, end in zip(starts, ends)]
    used = sum(sizes)  # include_last_offset: indices past the last offset belong to no bag
    weights = None if per_sample_weights is None else per_sample_weights[:used]
    return input[:used], np.repeat(np.arange(bags), sizes), bags, weights


def embedding_bag(
    input,
    weight,
    offsets=None,
    max_norm=None,
    norm_type=2,
    scale_grad_by_freq=False,
    mode="mean",
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=None,
):
    """Sums, means or maxima of bags of embeddings; padding_idx entries are left out of their bag
    (an empty bag gives zeros)."""
    if weight.dtype is int64 and input.dtype.is_floating_point:
        warnings.warn(
            "Argument order of nn.functional.embedding_bag was changed. Usage `embedding_bag(weight, input, ...)` "
            "is deprecated, and should now be `embedding_bag(input, weight, ...)`.",
            stacklevel=2,
        )
        weight, input = input, weight
    if per_sample_weights is not None and input.size() != per_sample_weights.size():
        raise ValueError(
            f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, "
            f"then it must have the same shape as the input ({input.shape})"
        )
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    indices, bag_of, bags, sample_weights = _bag_layout(input, offsets, include_last_offset, per_sample_weights)
    if mode not in _BAG_MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if max_norm is not None:
        _renorm_rows(weight, indices, max_norm, norm_type)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' "
            f"(got mode='{mode}'). Please open a feature request on GitHub."
        )
    if padding_idx is not None:  # the padding entries are left out
        kept = (indices != _padding_index(padding_idx, weight.shape[0])).numpy()
        indices, bag_of = indices[from_numpy(kept)], bag_of[kept]
        sample_weights = None if sample_weights is None else sample_weights[from_numpy(kept)]
    rows = embedding(indices, weight, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)
    if sample_weights is not None:
        rows = rows * sample_weights.unsqueeze(1)
    bag_index = from_numpy(bag_of.astype(np.int64))
    empty_bags = _prims.full([bags, weight.shape[1]], 0, rows.dtype)
    if mode == "max":
        spread = bag_index.unsqueeze(1).expand(-1, weight.shape[1])
        return empty_bags.scatter_reduce(0, spread, rows, "amax", include_self=False)
    sums = empty_bags.index_add(0, bag_index, rows)
    if mode == "sum":
        return sums
    counts = np.bincount(bag_of, minlength=bags).clip(min=1)  # an empty bag's mean is 0
    return sums / from_numpy(counts.astype(np.int64)).unsqueeze(1)


def one_hot(tensor, num_classes=-1):
    if tensor.dtype is not int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if tensor.numel() == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = tensor.max().item() + 1
    if tensor.numel():
        if tensor.min().item() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if tensor.max().item() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    return (tensor.unsqueeze(-1) == arange(num_classes)).long()


# ---- batch, instance and group normalization, local response normalization
#
# batch_norm and group_norm are the backend's fused primitives (_prims.batch_norm, _prims.group_norm:
# one pass for the statistics, one for normalize + affine, one node whose backward is one pass too;
# csrc/ops/normalization.cpp, the definitions in reference/_norm.py). instance_norm is batch_norm of
# the batch folded into the channels, as PyTorch's. The checks and messages are PyTorch's, here.


def _verify_batch_size(size):
    if math.prod([size[0], *size[2:]]) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")


def _check_batch_norm_dtypes(input, tensors):
    """PyTorch's CPU kernel: the parameters and running stats in the input's dtype; a float16 or
    bfloat16 input may have them all in float32 instead."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"batch_norm\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")
    dtypes = {tensor.dtype for tensor in tensors if tensor is not None}
    if dtypes <= {input.dtype} or input.dtype in (float16, bfloat16) and dtypes == {float32}:
        return
    if input.dtype in (float16, bfloat16, float32):
        raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
    raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps):
    """ATen's batch_norm (F.batch_norm less its Python-level checks; instance_norm calls it too)."""
    if input.numel() == 0:  # PyTorch's: no statistics and no checks; a result that keeps the gradient chain
        output = input.clone()
        output = output if weight is None else output * weight[0]
        return output if bias is None else output + bias[0]
    channels = input.shape[1] if input.dim() > 1 else 0
    for name, tensor in (("running_mean", running_mean), ("running_var", running_var)):
        if tensor is None and not training:
            raise RuntimeError(f"{name} must be defined in evaluation mode")
    named = (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias))
    for name, tensor in named:
        if tensor is not None and tensor.numel() != channels:
            raise RuntimeError(f"{name} should contain {channels} elements not {tensor.numel()}")
    _check_batch_norm_dtypes(input, [tensor for _, tensor in named])
    # a float16 or bfloat16 input is normalized in float32, as PyTorch's kernel does
    x = input.float() if input.dtype in (float16, bfloat16) else input
    weight, bias = (None if t is None else _in_dtype(t, x.dtype) for t in (weight, bias))
    output = _prims.batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps)
    return _in_dtype(output, input.dtype)


def _in_dtype(tensor, dtype):
    """tensor in dtype: itself when it has it (a cast costs more than a small batch's kernels)."""
    return tensor if tensor.dtype is dtype else tensor.to(dtype)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """(x - mean) / sqrt(var + eps) per channel (dim 1), times weight plus bias. Training: the batch's
    mean and biased variance over every other dim, and the running stats (when given) moved
    `momentum` of the way to the batch's mean and unbiased variance; otherwise the running stats."""
    if training:
        _verify_batch_size(input.size())
    if training and eps <= 0.0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    if eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(
    input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, momentum=0.1, eps=1e-5
):
    """batch_norm of each (sample, channel) on its own: as PyTorch, the batch is folded into the
    channels (the per-channel tensors repeated per sample), and each running stat becomes the
    mean over the samples of its folded update."""
    if use_input_stats and math.prod(input.shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {input.size()}")
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
    batch, channels = input.shape[0], input.shape[1]

    def per_sample(vector):
        return None if vector is None else vector.repeat(batch)

    folded_stats = [per_sample(running_mean), per_sample(running_var)]
    folded = input.reshape([1, batch * channels, *input.shape[2:]])
    output = _batch_norm(folded, *folded_stats, per_sample(weight), per_sample(bias), use_input_stats, momentum, eps)
    if use_input_stats:
        with no_grad():
            for running, updated in zip((running_mean, running_var), folded_stats):
                if running is not None:
                    running.copy_(updated.reshape(batch, channels).mean(0))
    return output.reshape(input.shape)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Each sample's channels in num_groups groups of consecutive ones, each group normalized over
    its channels and spatial dims, then weight and bias per channel."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    batch, channels, *spatial = input.shape
    _verify_batch_size([batch * channels // num_groups, num_groups, *spatial])
    if num_groups <= 0:
        raise RuntimeError(f"Expected num groups to be greater than 0, got {num_groups}")
    if channels % num_groups:
        raise RuntimeError(
            "Expected number of channels in input to be divisible by num_groups, but got input of shape "
            f"{list(input.shape)} and num_groups={num_groups}"
        )
    for name, tensor in (("weight", weight), ("bias", bias)):
        if tensor is not None and (tensor.dim() != 1 or tensor.numel() != channels):
            raise RuntimeError(
                f"Expected {name} to be a vector of size equal to the number of channels in input, but got "
                f"{name} of shape {list(tensor.shape)} and input of shape {list(input.shape)}"
            )
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"GroupNormKernelImpl\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")
    # a float16 or bfloat16 input is normalized in float32, as PyTorch's kernel does
    x = input.float() if input.dtype in (float16, bfloat16) else input
    weight, bias = (None if t is None else _in_dtype(t, x.dtype) for t in (weight, bias))
    return _in_dtype(_prims.group_norm(x, weight, bias, num_groups, eps), input.dtype)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of the squares over a window of `size` channels)^beta; the window
    is centred (size // 2 before), zero-padded at the ends, and divides by size."""
    dim = input.dim()
    if dim < 3:
        # sic: PyTorch's message has this run of spaces
        raise ValueError(f"Expected 3D or higher dimensionality                          input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    if size <= 0:  # PyTorch's average pooling's check
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {size} kW: 1")
    channels = input.shape[1]
    squares = pad(input.mul(input).movedim(1, -1), (size // 2, (size - 1) // 2)).movedim(-1, 1)
    window = squares.narrow(1, 0, channels)
    for offset in range(1, size):  # in the window's order, as PyTorch's average pooling sums
        window = window + squares.narrow(1, offset, channels)
    return input / (window / size).mul(alpha).add(k).pow(beta)


# ---- convolution: conv1d and conv2d are the backend's one primitive
# (_prims.convolution: im2col and the GEMM in C++, the definition in the reference). The checks
# are PyTorch's (its F.conv*d batchify, _convolution_mode and check_shape_forward), on the user's
# shapes, so the messages name them.


def _conv_sizes(value, name, dims, weight_dims):
    """stride/padding/dilation as a tuple of ints: one int becomes `dims` of them (conv{dims}d's
    int[dims] argument); the convolution then takes 1 or one per spatial dim of the weight."""
    values = (
        [operator.index(value)] * dims if not isinstance(value, (tuple, list)) else [operator.index(v) for v in value]
    )
    if len(values) not in (1, weight_dims):
        raise RuntimeError(
            f"expected {name} to be a single integer value or a list of {weight_dims} values to match the "
            f"convolution dimensions, but got {name}={values}"
        )
    return tuple(values * weight_dims if len(values) == 1 else values)


def _size_str(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _check_conv_shapes(input, weight, bias, stride, padding, dilation, groups, output_padding=None):
    """PyTorch's check_shape_forward, in its order (input batched); with output_padding, for the
    transposed convolution (weight (in, out / groups, *kernel))."""
    if weight.dim() != input.dim():
        raise RuntimeError(
            f"Expected {weight.dim()}-dimensional input for {weight.dim()}-dimensional weight "
            f"{_size_str(weight.shape)}, but got {input.dim()}-dimensional input of size {_size_str(input.shape)} "
            "instead"
        )
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if output_padding is not None and any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if output_padding is None and any(d <= 0 for d in dilation):
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    out_channels = weight.shape[0]
    if out_channels < groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be at least {groups} at dimension 0, but got weight of size "
            f"{_size_str(weight.shape)} instead"
        )
    if out_channels % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight of "
            f"size [{_size_str(weight.shape)}] instead"
        )
    if output_padding is not None:
        _check_conv_transpose_channels(input, weight, bias, groups)
        return
    if input.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {_size_str(weight.shape)}, expected input{_size_str(input.shape)} "
            f"to have {weight.shape[1] * groups} channels, but got {input.shape[1]} channels instead"
        )
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != out_channels):
        raise RuntimeError(
            f"Given weight of size {_size_str(weight.shape)}, expected bias to be 1-dimensional with {out_channels} "
            f"elements, but got bias of size {_size_str(bias.shape)} instead"
        )
    spatial = list(zip(input.shape[2:], weight.shape[2:], padding, dilation))
    padded = [size + 2 * p for size, _, p, _ in spatial]
    kernel = [d * (k - 1) + 1 for _, k, _, d in spatial]
    if any(p < k for p, k in zip(padded, kernel)):
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel size: "
            f"({' x '.join(map(str, kernel))}). Kernel size can't be greater than actual input size"
        )


_CONV_CHECKS = CheckedArguments()


def _conv(input, weight, bias, stride, padding, dilation, groups, dims):
    key = (input.shape, input.dtype, weight.shape, weight.dtype, None if bias is None else (bias.shape, bias.dtype))
    sizes, same_padding = _CONV_CHECKS.get(
        (key, dims),
        (stride, padding, dilation, groups),
        lambda: _check_conv(input, weight, bias, stride, padding, dilation, groups, dims),
    )
    batched = input.dim() == dims + 2
    if not batched:
        input = input.unsqueeze(0)
    if same_padding:
        input = pad(input, same_padding)
    out = _prims.convolution(input, weight, bias, *sizes)
    if input.shape[1] == 0:  # PyTorch's result for an input of no channels has none either
        out = out[:, :0]
    return out if batched else out.squeeze(0)


def _check_conv(input, weight, bias, stride, padding, dilation, groups, dims):
    """PyTorch's checks of a convolution's arguments; the primitive's stride, padding, dilation and
    groups, and for padding='same' the extra (right) padding of the input (F.pad's order) or None."""
    if input.dim() not in (dims + 1, dims + 2):
        raise RuntimeError(
            f"Expected {dims + 1}D (unbatched) or {dims + 2}D (batched) input to conv{dims}d, but got input of size: "
            f"{_size_str(input.shape)}"
        )
    if input.dim() == dims + 1:
        input = input.unsqueeze(0)
    weight_dims = max(weight.dim() - 2, 1)  # the rank check comes later, with PyTorch's message
    stride = _conv_sizes(stride, "stride", dims, weight_dims)
    dilation = _conv_sizes(dilation, "dilation", dims, weight_dims)
    groups = operator.index(groups)
    same_padding = None
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        if padding == "same" and any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        # 'same': a total of d * (k - 1) per dim, half on each side and the odd one on the right
        # (PyTorch pads the input for it, then convolves with the symmetric part).
        totals = [d * (k - 1) if padding == "same" else 0 for d, k in zip(dilation, weight.shape[2:])]
        padding = tuple(t // 2 for t in totals)
        if any(t % 2 for t in totals):
            warnings.warn(
                "Using padding='same' with even kernel lengths and odd dilation may require a zero-padded copy of "
                "the input be created",
                UserWarning,
                stacklevel=6,  # the caller of conv*d (through _conv, the checks' cache and its lambda)
            )
            same_padding = []
            for t in reversed(totals):
                same_padding += [0, t % 2]
            input = pad(input, same_padding)
    else:
        padding = _conv_sizes(padding, "padding", dims, weight_dims)
    _check_conv_shapes(input, weight, bias, stride, padding, dilation, groups)
    _check_conv_dtypes(input, weight, bias)
    if dims == 1:  # the primitive's sizes are (height, width): a 1-D convolution is its height-1 case
        stride, padding, dilation = (1, *stride), (0, *padding), (1, *dilation)
    return (*stride, *padding, *dilation, groups), same_padding


_C_TYPE_NAME = {float32: "float", float64: "double"}


def _check_conv_dtypes(input, weight, bias):
    if input.dtype != weight.dtype:
        raise RuntimeError(
            f"expected scalar type {SCALAR_TYPE_NAME[input.dtype]} but found {SCALAR_TYPE_NAME[weight.dtype]}"
        )
    if bias is not None and bias.dtype != input.dtype:
        raise RuntimeError(
            f"Input type ({_C_TYPE_NAME.get(input.dtype, input.dtype)}) and bias type "
            f"({_C_TYPE_NAME.get(bias.dtype, bias.dtype)}) should be the same"
        )


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2)


# ---- transposed convolution: the backend's primitive _prims.conv_transpose (the input gradient of
# the convolution by the same weight), with PyTorch's checks (check_shape_forward, then
# slow_conv_transpose2d's shape check, which sees a 1-D convolution as 2-D of height 1).


def _check_conv_transpose_channels(input, weight, bias, groups):
    """check_shape_forward's transposed branch: weight (in, out / groups, *kernel)."""
    if input.shape[1] != weight.shape[0]:
        raise RuntimeError(
            f"Given transposed=1, weight of size {_size_str(weight.shape)}, expected input{_size_str(input.shape)} "
            f"to have {weight.shape[0]} channels, but got {input.shape[1]} channels instead"
        )
    out_channels = weight.shape[1] * groups
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != out_channels):
        raise RuntimeError(
            f"Given transposed=1, weight of size {_size_str(weight.shape)}, expected bias to be 1-dimensional with "
            f"{out_channels} elements, but got bias of size {_size_str(bias.shape)} instead"
        )


def _conv_transpose_output_sizes(input, weight, stride, padding, output_padding, dilation):
    """(H - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1 per spatial dim."""
    return [
        (size - 1) * s - 2 * p + d * (k - 1) + op + 1
        for size, k, s, p, op, d in zip(input.shape[2:], weight.shape[2:], stride, padding, output_padding, dilation)
    ]


def _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, dims):
    if input.dim() not in (dims + 1, dims + 2):
        raise RuntimeError(
            f"Expected {dims + 1}D (unbatched) or {dims + 2}D (batched) input to conv_transpose{dims}d, but got "
            f"input of size: {_size_str(input.shape)}"
        )
    batched = input.dim() == dims + 2
    if not batched:
        input = input.unsqueeze(0)
    if weight.dim() < 3:
        raise RuntimeError("weight should have at least three dimensions")
    weight_dims = weight.dim() - 2
    stride, padding, output_padding, dilation = (
        _conv_sizes(value, name, dims, weight_dims)
        for value, name in (
            (stride, "stride"),
            (padding, "padding"),
            (output_padding, "output_padding"),
            (dilation, "dilation"),
        )
    )
    groups = operator.index(groups)
    _check_conv_shapes(input, weight, bias, stride, padding, dilation, groups, output_padding)
    # slow_conv_transpose2d's messages name a height and a width: a 1-D convolution's height is 1 high
    planar = [(1, 0, 0, 1), *zip(stride, padding, output_padding, dilation)][-2:]
    (sh, _, oph, dh), (sw, _, opw, dw) = planar
    kh, kw = [1, *weight.shape[2:]][-2:]
    if kh <= 0 or kw <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_height: {kh} kernel_width: {kw}")
    if dh <= 0 or dw <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilation_height: {dh}, dilation_width: {dw}")
    if (oph >= sh and oph >= dh) or (opw >= sw and opw >= dw):
        raise RuntimeError(
            "output padding must be smaller than either stride or dilation, but got "
            f"output_padding_height: {oph} output_padding_width: {opw} stride_height: {sh} stride_width: {sw} "
            f"dilation_height: {dh} dilation_width: {dw}"
        )
    if weight.numel() == 0 and input.numel() != 0:  # no output channels (PyTorch: also for a zero batch, an IndexError)
        planar_weight = [*weight.shape[:2], *[1, *weight.shape[2:]][-2:]]
        raise RuntimeError(f"non-empty 2D or 4D weight tensor expected, but got: {planar_weight}")
    _check_conv_dtypes(input, weight, bias)
    if input.numel() == 0 and input.shape[0] != 0 and input.shape[1] != 0:
        raise RuntimeError(
            f"Only zero batch or zero channel inputs are supported, but got input shape: {_size_str(input.shape)}"
        )
    sizes = _conv_transpose_output_sizes(input, weight, stride, padding, output_padding, dilation)
    if min(sizes) < 1:
        planar_in, planar_out = [1, *input.shape[2:]][-2:], [1, *sizes][-2:]
        raise RuntimeError(
            f"Given input size per channel: ({' x '.join(map(str, planar_in))}). Calculated output size per channel: "
            f"({' x '.join(map(str, planar_out))}). Output size is too small"
        )
    if dims == 1:  # the primitive's sizes are (height, width): a 1-D convolution is its height-1 case
        stride, padding, output_padding, dilation = (1, *stride), (0, *padding), (0, *output_padding), (1, *dilation)
    out = _prims.conv_transpose(input, weight, bias, *stride, *padding, *output_padding, *dilation, groups)
    return out if batched else out.squeeze(0)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 1)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 2)


# ---- unfold and fold: im2col and col2im (the backend's _prims.im2col / col2im), with PyTorch's checks
# (im2col_shape_check and col2im_shape_check, in their orders).


def _pair_argument(value, name):
    """PyTorch's int[2] argument: one int for both, or exactly two."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(value)}")
        return tuple(operator.index(v) for v in value)
    value = operator.index(value)
    return value, value


def _check_block_parameters(kernel, dilation, padding, stride, order):
    messages = {
        "kernel": (
            kernel[0] > 0 and kernel[1] > 0,
            f"kernel size should be greater than zero, but got kernel_height: {kernel[0]} kernel_width: {kernel[1]}",
        ),
        "dilation": (
            dilation[0] > 0 and dilation[1] > 0,
            "dilation should be greater than zero, but got "
            f"dilation_height: {dilation[0]} dilation_width: {dilation[1]}",
        ),
        "padding": (
            padding[0] >= 0 and padding[1] >= 0,
            f"padding should be non-negative, but got pad_height: {padding[0]} pad_width: {padding[1]}",
        ),
        "stride": (
            stride[0] > 0 and stride[1] > 0,
            f"stride should be greater than zero, but got stride_height: {stride[0]} stride_width: {stride[1]}",
        ),
    }
    for name in order:
        valid, message = messages[name]
        if not valid:
            raise RuntimeError(message)


def _check_block_dtype(input, kernel_name):
    if input.dtype not in (float32, float64):
        raise NotImplementedError(f"\"{kernel_name}\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")


def _blocks(size, kernel, dilation, padding, stride):
    """How many kernel-sized blocks fit along a dim (PyTorch's div_rtn: rounded down)."""
    return (size + 2 * padding - (dilation * (kernel - 1) + 1)) // stride + 1


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    kernel, dilation, padding, stride = (
        _pair_argument(v, n)
        for v, n in ((kernel_size, "kernel_size"), (dilation, "dilation"), (padding, "padding"), (stride, "stride"))
    )
    _check_block_parameters(kernel, dilation, padding, stride, ("kernel", "dilation", "padding", "stride"))
    if input.dim() < 3:  # PyTorch's check reads size(1) and size(2) first: its IndexError
        input.size(max(input.dim(), 1))
    batch = 1 if input.dim() == 4 else 0
    if input.dim() not in (3, 4) or 0 in input.shape[batch:]:
        raise RuntimeError(
            "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for "
            f"input, but got: {_size_str(input.shape)}"
        )
    height, width = input.shape[-2:]
    blocks = [_blocks(*args) for args in zip((height, width), kernel, dilation, padding, stride)]
    if min(blocks) < 1:
        raise RuntimeError(
            f"Given input with spatial size ({height}, {width}), kernel_size=({kernel[0]}, {kernel[1]}), "
            f"dilation=({dilation[0]}, {dilation[1]}), padding=({padding[0]}, {padding[1]}), calculated shape of the "
            f"array of sliding blocks as ({blocks[0]}, {blocks[1]}), but its components must be at least one."
        )
    _check_block_dtype(input, "im2col_out_cpu")
    return _prims.im2col(input, *kernel, *dilation, *padding, *stride)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    output_size, kernel, dilation, padding, stride = (
        _pair_argument(v, n)
        for v, n in (
            (output_size, "output_size"),
            (kernel_size, "kernel_size"),
            (dilation, "dilation"),
            (padding, "padding"),
            (stride, "stride"),
        )
    )
    _check_block_parameters(kernel, dilation, padding, stride, ("kernel", "stride", "dilation", "padding"))
    batch = 1 if input.dim() == 3 else 0
    if input.dim() not in (2, 3) or 0 in input.shape[batch:]:
        raise RuntimeError(
            "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for "
            f"input, but got: {_size_str(input.shape)}"
        )
    rows, columns = input.shape[batch:]
    if rows % (kernel[0] * kernel[1]):
        raise RuntimeError(
            "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got "
            f"input.size(1)={rows} and kernel_size=({kernel[0]}, {kernel[1]})."
        )
    blocks = [_blocks(*args) for args in zip(output_size, kernel, dilation, padding, stride)]
    given = (
        f"Given output_size=({output_size[0]}, {output_size[1]}), kernel_size=({kernel[0]}, {kernel[1]}), "
        f"dilation=({dilation[0]}, {dilation[1]}), padding=({padding[0]}, {padding[1]}), "
        f"stride=({stride[0]}, {stride[1]}), "
    )
    if columns != blocks[0] * blocks[1]:
        raise RuntimeError(
            f"{given}expected size of input's dimension 2 to match the calculated number of sliding blocks "
            f"{blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got input.size(2)={columns}."
        )
    if min(blocks) < 1:
        raise RuntimeError(
            f"{given}calculated shape of the array of sliding blocks as ({blocks[0]}, {blocks[1]}), which is too "
            "small (non-positive)."
        )
    _check_block_dtype(input, "col2im_out_cpu")
    return _prims.col2im(input, *output_size, *kernel, *dilation, *padding, *stride)


# ---- image helpers: pixel (un)shuffle, interpolate


def _check_int_argument(op, name, value):
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{op}(): argument '{name}' (position 2) must be int, not {type(value).__name__}")


def _check_pixel_shuffle(op, input, factor_name, factor):
    _check_int_argument(op, factor_name, factor)
    if input.dim() < 3:
        raise RuntimeError(
            f"{op} expects input to have at least 3 dimensions, but got input with {input.dim()} dimension(s)"
        )
    if factor <= 0:
        raise RuntimeError(f"{op} expects a positive {factor_name}, but got {factor}")


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r): each channel's r x r block of the input's channels
    becomes an r x r block of pixels."""
    _check_pixel_shuffle("pixel_shuffle", input, "upscale_factor", upscale_factor)
    *batch, channels, height, width = input.shape
    r = upscale_factor
    if channels % (r * r):
        raise RuntimeError(
            "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, "
            f"but input.size(-3)={channels} is not divisible by {r * r}"
        )
    n = len(batch)
    blocks = input.reshape(*batch, channels // (r * r), r, r, height, width)
    return blocks.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2).reshape(*batch, -1, height * r, width * r)


def pixel_unshuffle(input, downscale_factor):
    """pixel_shuffle's inverse: (*, C, H r, W r) -> (*, C r^2, H, W)."""
    _check_pixel_shuffle("pixel_unshuffle", input, "downscale_factor", downscale_factor)
    *batch, channels, height, width = input.shape
    r = downscale_factor
    for side, position, size in (("height", -2, height), ("width", -1, width)):
        if size % r:
            raise RuntimeError(
                f"pixel_unshuffle expects {side} to be divisible by downscale_factor, but "
                f"input.size({position})={size} is not divisible by {r}"
            )
    n = len(batch)
    pixels = input.reshape(*batch, channels, height // r, r, width // r, r)
    return pixels.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3).reshape(*batch, -1, height // r, width // r)


def channel_shuffle(input, groups):
    """(N, C, *) with C = g k: the channels regrouped from g groups of k into k groups of g (ShuffleNet)."""
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes {list(input.shape)}")
    groups = operator.index(groups)
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    batch, channels, *rest = input.shape
    if channels % groups:
        raise RuntimeError(
            f"Number of channels must be divisible by groups. Got {channels} channels and {groups} groups."
        )
    grouped = input.reshape(batch, groups, channels // groups, *rest)
    return grouped.transpose(1, 2).reshape(input.shape)


def pdist(input, p=2):
    """The p-norm distances between the rows of a matrix, pairs (i, j) with i < j in row-major order."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    rows = input.shape[0]
    first, second = triu_indices(rows, rows, 1).unbind(0)
    return (input[first] - input[second]).norm(p, dim=1)


_INTERPOLATE_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "lanczos", "area", "nearest-exact")
_LINEAR_MODE_RANKS = {"linear": 3, "bilinear": 4, "trilinear": 5}


def interpolate(
    input,
    size=None,
    scale_factor=None,
    mode="nearest",
    align_corners=None,
    recompute_scale_factor=None,
    antialias=False,
):
    """Resizes the spatial dims (all but the first two) to `size`, or by `scale_factor`, with
    nearest-neighbour (nearest, nearest-exact), (bi/tri)linear or bicubic interpolation, bilinear and
    bicubic optionally antialiased (the core's upsample op, with PyTorch's source positions and
    weights), or area averaging (adaptive average pooling): PyTorch's argument handling and errors."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(
                "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | "
                "trilinear"
            )
    elif align_corners is None:
        align_corners = False
    dim = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        scale_factors = None
        output_size = list(size) if isinstance(size, (list, tuple)) else [size] * dim
        if isinstance(size, (list, tuple)) and len(size) != dim:
            raise ValueError(
                "Input and output must have the same number of spatial dimensions, but got input with spatial "
                f"dimensions of {list(input.shape[2:])} and output size of {size}. Please provide input tensor "
                "in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format."
            )
        if not all(isinstance(x, int) for x in output_size):
            raise TypeError(
                "expected size to be one of int or Tuple[int] or Tuple[int, int] or Tuple[int, int, int], but "
                f"got size with types {[type(x) for x in output_size]}"
            )
    elif scale_factor is not None:
        output_size = None
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(
                    "Input and scale_factor must have the same number of spatial dimensions, but got input with "
                    f"spatial dimensions of {list(input.shape[2:])} and scale_factor of shape {scale_factor}. "
                    "Please provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in "
                    "(s1, s2, ...,sK) format."
                )
            scale_factors = list(scale_factor)
        else:
            scale_factors = [scale_factor] * dim
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and output_size is None:
        recompute_scale_factor = True
    if recompute_scale_factor:  # the output size from the factors, which the kernel then ignores
        output_size = [int(input.shape[i + 2] * scale_factors[i]) for i in range(dim)]
        scale_factors = None
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.dim() == 4):
        raise ValueError(
            "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D tensor as input"
        )
    unsupported = NotImplementedError(
        f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) for the modes: nearest | "
        f"linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact (got {mode})"
    )
    if mode not in _INTERPOLATE_MODES or not 3 <= input.dim() <= 5 or mode == "bicubic" and input.dim() != 4:
        raise unsupported
    if mode in _LINEAR_MODE_RANKS and input.dim() != _LINEAR_MODE_RANKS[mode]:
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs {_LINEAR_MODE_RANKS[mode]}D input")
    if mode == "area" and input.dim() < 5:
        return (adaptive_avg_pool1d if input.dim() == 3 else adaptive_avg_pool2d)(input, output_size)  # noqa: F405
    if mode not in ("nearest", "nearest-exact", "bicubic", *_LINEAR_MODE_RANKS):
        raise NotImplementedError(f"interpolate: mode '{mode}' with {input.dim()}D input is not supported by fastgrad")
    return _upsample(input, output_size, scale_factors, mode, align_corners, antialias)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    warnings.warn(
        "`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2
    )
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    warnings.warn(
        "`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2
    )
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


_SPATIAL_NAMES = {1: "W", 2: "HW", 3: "DHW"}


def _upsample(input, output_size, scale_factors, mode, align_corners, antialias):
    """ATen's upsample checks (with its messages), then the core's op: the output size from the
    factors when none is given (truncated, as ATen converts size * factor to an integer), and the
    factors passed on, which PyTorch's kernels read for the source positions."""
    spatial = input.dim() - 2
    input_size = list(input.shape[2:])
    if output_size is None:
        if not all(math.isfinite(size * factor) for size, factor in zip(input_size, scale_factors)):
            raise RuntimeError("value cannot be converted to type int64_t without overflow")
        output_size = [int(size * factor) for size, factor in zip(input_size, scale_factors)]
    if min(input_size + output_size) <= 0:
        names = _SPATIAL_NAMES[spatial]

        def sizes(values):
            return ", ".join(f"{name}: {value}" for name, value in zip(names, values))

        joint = " and" if spatial == 1 else ""
        raise RuntimeError(
            "Input and output sizes should be greater than 0, but got "
            f"input ({sizes(input_size)}){joint} output ({sizes(output_size)})"
        )
    if input.numel() == 0 and math.prod(input.shape[1:]) == 0:
        raise RuntimeError(
            f"Non-empty {input.dim()}D data tensor expected but got a tensor with sizes {list(input.shape)}"
        )
    kind = "linear" if mode in _LINEAR_MODE_RANKS else "cubic" if mode == "bicubic" else mode
    factors = [] if scale_factors is None else [float(factor) for factor in scale_factors]
    return _prims.upsample(input, kind, output_size, factors, bool(align_corners), bool(antialias))


# ---- losses


def _legacy_reduction(size_average, reduce, reduction):
    """The reduction named by the deprecated size_average / reduce flags, when either is given."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{reduction}' instead.")
    return reduction


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _weighted_reduce(loss, weight, input, reduction, mean_over_weights):
    """The losses' elementwise `weight`: mse/l1's mean divides by the weights' sum, huber's by the count."""
    if weight.size() != input.size():
        raise ValueError("Weights and input must have the same size.")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")
    loss = loss * weight
    return loss.sum() / weight.sum() if reduction == "mean" and mean_over_weights else _reduce(loss, reduction)


def _broadcast_pair(input, target):
    """The pointwise losses broadcast input and target together before computing, as PyTorch's do
    (so a 0-d target takes part in the dtype promotion as a tensor with dims), with a warning when
    the sizes differ."""
    if target.size() == input.size():
        return input, target
    warnings.warn(
        f"Using a target size ({target.size()}) that is different to the input size ({input.size()}). "
        "This will likely lead to incorrect results due to broadcasting. "
        "Please ensure they have the same size.",
        stacklevel=3,
    )
    try:
        shape = np.broadcast_shapes(tuple(input.shape), tuple(target.shape))
    except ValueError:
        return input, target  # the subtraction raises PyTorch's error
    return input.expand(shape), target.expand(shape)


def _kernel_operands(kernel, input, target):
    """PyTorch's mse, smooth_l1 and huber kernels convert input and target to their promoted dtype
    (a bool or an integer counts as a number there; l1_loss subtracts and refuses a bool) and run
    for floats only."""
    promoted = promote_types(input.dtype, target.dtype)
    if not promoted.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{SCALAR_TYPE_NAME[promoted]}'")
    return input.to(promoted), target.to(promoted)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    both = _broadcast_pair(input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    a, b = _kernel_operands("mse_cpu", *both)
    loss = (a - b) ** 2
    return _reduce(loss, reduction) if weight is None else _weighted_reduce(loss, weight, input, reduction, True)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    both = _broadcast_pair(input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = (both[0] - both[1]).abs()
    return _reduce(loss, reduction) if weight is None else _weighted_reduce(loss, weight, input, reduction, True)


def _quadratic_part(difference, knee):
    """(|difference|, the difference where the losses below take their quadratic branch (|d| < knee)
    and 0 elsewhere). The square is of d, not |d|: |d|'s derivative at 0 is 0, which would zero the
    second derivative there. The masking: where() sends a zero gradient into the branch it did not
    take, and through d * d at d = inf that is 0 * inf = NaN (PyTorch's gradient there is +-1). A NaN
    d stays, as it must."""
    z = difference.abs()
    return z, difference.masked_fill(z >= knee, 0.0)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    both = _broadcast_pair(input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    a, b = _kernel_operands("smooth_l1_cpu", *both)
    z, q = _quadratic_part(a - b, beta)
    if beta == 0.0:
        return _reduce(z, reduction)
    return _reduce(_prims.where(z < beta, 0.5 * q * q / beta, z - 0.5 * beta), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    both = _broadcast_pair(input, target)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    promoted = promote_types(input.dtype, target.dtype)
    if not can_cast(promoted, input.dtype):  # PyTorch writes huber's loss into a tensor like the input
        raise RuntimeError(
            f"result type {SCALAR_TYPE_NAME[promoted]} can't be cast to the desired output type "
            f"{SCALAR_TYPE_NAME[input.dtype]}"
        )
    a, b = _kernel_operands("huber_cpu", *both)
    z, q = _quadratic_part(a - b, delta)
    loss = _prims.where(z < delta, 0.5 * q * q, delta * (z - 0.5 * delta))
    if loss.dtype is not input.dtype:
        loss = loss.to(input.dtype)
    return _reduce(loss, reduction) if weight is None else _weighted_reduce(loss, weight, input, reduction, False)


def _check_nll_target(input, target):
    """nll_loss_nd's checks: a batch of N (the first dim) in both, target (N, d1, ...) for input (N, C, d1, ...)."""
    if input.dim() < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.dim()})")
    target_batch = target.shape[0] if target.dim() else 0  # what PyTorch reads for a 0-d target
    if input.dim() != 1 and input.shape[0] != target_batch:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size ({target_batch}).")
    if input.dim() == 4:  # PyTorch's nll_loss2d has its own wording
        if target.dim() != 3:
            raise RuntimeError(
                f"only batches of spatial targets supported (3D tensors) but got targets of dimension: {target.dim()}"
            )
        if input.shape[2:] != target.shape[1:]:
            raise RuntimeError(f"size mismatch (got input: {list(input.shape)} , target: {list(target.shape)}")
    if input.dim() > 2 and input.shape[2:] != target.shape[1:]:
        raise RuntimeError(f"Expected target size {[input.shape[0], *input.shape[2:]]}, got {list(target.shape)}")


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_nll_target(input, target)
    if input.dim() <= 2:
        return _prims.nll_loss(input, target, weight, reduction, ignore_index)
    # (N, C, d1, ...): the classes to the last dim, every position a row of a (M, C) batch
    classes = input.shape[1]
    rows = input.permute(0, *range(2, input.dim()), 1).reshape(-1, classes)
    loss = _prims.nll_loss(rows, target.reshape(-1), weight, reduction, ignore_index)
    return loss.reshape(target.shape) if reduction == "none" else loss


def _class_shaped(weight, input, class_dim):
    """weight (C,) viewed to broadcast along input's class dim."""
    return weight.reshape([-1 if d == class_dim else 1 for d in range(input.dim())])


def _check_label_smoothing(label_smoothing):
    if label_smoothing > 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")


def _cross_entropy_probabilities(log_probs, target, weight, reduction, label_smoothing, class_dim):
    """Cross entropy against class probabilities (target shaped like the input)."""
    classes = log_probs.shape[class_dim]
    if weight is not None and (weight.dim() != 1 or weight.numel() != classes):
        raise RuntimeError(
            f"cross_entropy: weight tensor should be defined either for all {classes} classes or no "
            f"classes but got weight tensor of shape: {list(weight.shape)}"
        )
    if label_smoothing > 0.0:
        _check_label_smoothing(label_smoothing)
        target = target * (1 - label_smoothing) + label_smoothing / classes
    products = log_probs * target
    if weight is not None:
        products = products * _class_shaped(weight, log_probs, class_dim)
    if reduction == "none":
        return -products.sum(class_dim)
    if reduction == "sum":
        return -products.sum()
    if reduction == "mean":  # over the samples (0 / 0 = nan for none)
        return -products.sum() / (log_probs.numel() // classes)
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _smoothing_term(log_probs, target, weight, reduction, ignore_index, class_dim):
    """The uniform part of label smoothing for class-index targets: -sum_c w_c log p_c per sample,
    zero at ignored targets, a mean over the (weighted) count of the others."""
    kept = target != ignore_index
    if weight is not None:
        log_probs = log_probs * _class_shaped(weight, log_probs, class_dim)
    loss = _prims.where(kept, -log_probs.sum(class_dim), 0.0)
    if reduction != "mean":
        return _reduce(loss, reduction)
    if weight is None:
        return loss.sum() / kept.sum()
    # ignored targets (maybe out of range) index weight[0], then count zero
    return loss.sum() / (weight[_prims.where(kept, target, 0)] * kept).sum()


def cross_entropy(
    input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0
):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    class_dim = 0 if input.dim() == 1 else 1
    if input.shape == target.shape:  # class probabilities
        if not target.dtype.is_floating_point:
            raise RuntimeError(
                "Expected floating point type for target with class probabilities, "
                f"got {'Long' if target.dtype is int64 else 'Bool'}"
            )
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
        return _cross_entropy_probabilities(
            log_softmax(input, class_dim), target, weight, reduction, label_smoothing, class_dim
        )
    log_probs = log_softmax(input, class_dim)
    loss = nll_loss(log_probs, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing <= 0.0:
        return loss
    _check_label_smoothing(label_smoothing)
    smooth = _smoothing_term(log_probs, target, weight, reduction, ignore_index, class_dim)
    return (1 - label_smoothing) * loss + smooth * (label_smoothing / input.shape[class_dim])


def binary_cross_entropy_with_logits(
    input, target, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None
):
    """(1 - t) x + w_t log(1 + e^-x), w_t = 1 + (pos_weight - 1) t, with log(1 + e^-x) written as
    m + log(e^-m + e^(-x-m)), m = max(-x, 0): no exp overflows, and the result (so the gradient)
    does not depend on m. Accumulated in place into 1 - t, as PyTorch does: the loss has the
    target's dtype, and an integer target is refused."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if target.size() != input.size():
        raise ValueError(f"Target size ({target.size()}) must be the same as input size ({input.size()})")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"log_sigmoid_cpu\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")
    if target.dtype is bool_:  # PyTorch's 1 - t wraps the 1 as a bool tensor
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
            "`logical_xor()` operator instead."
        )
    m = (-input).clamp(min=0)
    softplus_neg = m + ((-m).exp() + (-input - m).exp()).log()
    if pos_weight is not None:
        softplus_neg = softplus_neg * ((pos_weight - 1) * target + 1)
    loss = (1 - target).mul_(input).add_(softplus_neg)
    if weight is not None:
        loss = loss.mul_(weight)
    return _reduce(loss, reduction)


def _loss_reduction(size_average, reduce, reduction):
    """The reduction of a loss with legacy flags: checked up front, as PyTorch's _Reduction.get_enum does."""
    if size_average is not None or reduce is not None:
        return _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


# ATen's `constexpr float EPSILON = 1e-12`: a float, so float64 kernels see its float32 value
_ATEN_EPSILON = float(np.float32(1e-12))


def _check_not_differentiable(function, argument, tensor):
    """PyTorch's autograd refuses a gradient for an argument its backward does not give one."""
    if tensor is not None and tensor.requires_grad and is_grad_enabled():
        raise RuntimeError(
            f"The function '{function}' is not differentiable with respect to argument '{argument}'. "
            "This input cannot have requires_grad True."
        )


def _check_unit_interval(name, tensor):
    inside = (tensor >= 0) & (tensor <= 1)  # NaN is outside
    if not inside.all().item():
        raise RuntimeError(f"all elements of {name} should be between 0 and 1")


def _weighted_mean(grad, weight, reduction, count):
    """A BCE gradient term times the weight, over the element count for 'mean' (PyTorch's order)."""
    if weight is not None:
        grad = grad * weight
    return grad / count if reduction == "mean" else grad


class BinaryCrossEntropy(Function):
    """ATen's binary_cross_entropy kernel and its backward formulas (not the chain rule through the
    clamped logs: PyTorch's input gradient ignores the clamp, bounding the denominator instead)."""

    @staticmethod
    def forward(ctx, input, target, weight, reduction):
        ctx.save_for_backward(input, target, weight)
        ctx.reduction = reduction
        log_x = input.log().clamp(min=-100)
        log_1mx = (-input).log1p().clamp(min=-100)
        loss = (target - 1) * log_1mx - target * log_x
        if weight is not None:
            loss = loss * weight
        return _reduce(loss, reduction)

    @staticmethod
    def backward(ctx, grad):
        input, target, weight = ctx.saved_tensors
        grad_input = BinaryCrossEntropyBackward.apply(grad, input, target, weight, ctx.reduction)
        grad_target = _weighted_mean(-input.logit() * grad, weight, ctx.reduction, input.numel())
        return grad_input, grad_target, None, None


class BinaryCrossEntropyBackward(Function):
    """The input's gradient of binary_cross_entropy, one node as PyTorch's, whose own gradients are
    PyTorch's double-backward formulas (with their eps of 1e-12, a double here)."""

    @staticmethod
    def forward(ctx, grad, input, target, weight, reduction):
        ctx.save_for_backward(grad, input, target, weight)
        ctx.reduction = reduction
        slope = grad * (input - target) / ((1 - input) * input).clamp(min=_ATEN_EPSILON)
        return _weighted_mean(slope, weight, reduction, input.numel())

    @staticmethod
    def backward(ctx, gg):
        grad, x, target, weight = ctx.saved_tensors
        eps, count = 1e-12, x.numel()
        curvature = (x * x - 2 * x * target + target) / ((x + eps).pow(2) * (1 - x + eps).pow(2))
        d_input = _weighted_mean(curvature * (gg * grad), weight, ctx.reduction, count)
        d_grad = _weighted_mean((x - target) / ((x + eps) * (1 - x + eps)) * gg, weight, ctx.reduction, count)
        if grad.dim() == 0:  # the gradient of a reduced loss: a number
            d_grad = d_grad.sum()
        d_target = -gg * grad
        if weight is not None:
            d_target = d_target * weight
        d_target = d_target / ((1 - x) * x).clamp(min=eps)
        return d_grad, d_input, d_target / count if ctx.reduction == "mean" else d_target, None, None


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _loss_reduction(size_average, reduce, reduction)
    if target.size() != input.size():
        raise ValueError(
            f"Using a target size ({target.size()}) that is different to the input size ({input.size()}) is "
            "deprecated. Please ensure they have the same size."
        )
    if weight is not None:
        weight = weight.expand(broadcast_shapes(target.size(), weight.size()))
    _check_floating(input, "binary_cross_entropy")
    if target.dtype != input.dtype:
        raise RuntimeError(f"Found dtype {SCALAR_TYPE_NAME[target.dtype]} but expected {SCALAR_TYPE_NAME[input.dtype]}")
    _check_not_differentiable("binary_cross_entropy", "weight", weight)
    _check_unit_interval("input", input)
    _check_unit_interval("target", target)
    return BinaryCrossEntropy.apply(input, target, weight, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    if size_average is not None or reduce is not None:
        summed_as = _legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support size."
            "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
            "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
            stacklevel=2,
        )
        summed_as = reduction
    else:  # batchmean: a sum divided below
        summed_as = _loss_reduction(None, None, "sum" if reduction == "batchmean" else reduction)
    loss = _kl_div(input, target, summed_as, log_target)
    return loss / input.shape[0] if reduction == "batchmean" and input.dim() != 0 else loss


def _kl_div(input, target, reduction, log_target):
    """The pointwise KL divergence, reduced by "none", "mean" or "sum" (torch.kl_div's op)."""
    if not (input.dtype.is_floating_point and target.dtype.is_floating_point):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    loss = target.exp() * (target - input) if log_target else target.xlogy(target) - target * input
    return _reduce(loss, reduction)


def poisson_nll_loss(
    input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None, reduction="mean"
):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not a valid value for reduction")
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:  # Stirling's approximation of log(target!), for targets above 1
        stirling = target * target.log() - target + 0.5 * ((2 * math.pi) * target).log()
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _reduce(loss, reduction)


def _homoscedastic_var(input, var):
    """var shaped to broadcast against input: one dim short (unsqueezed), or one mismatched dim."""
    if var.size() == input.size():
        return var
    if input.size()[:-1] == var.size():
        return var.unsqueeze(-1)
    if input.dim() == var.dim() and sum(v for i, v in zip(input.size(), var.size()) if i != v) == 1:
        return var
    raise ValueError("var is of incorrect size")


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * ones_like(input)
    elif (var < 0).any().item():
        raise ValueError("var has negative entry/entries")
    var = _homoscedastic_var(input, var)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = var.clone()
    with no_grad():  # the clamp passes var's gradient through unchanged, as PyTorch's does
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    reduction = _loss_reduction(size_average, reduce, reduction)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(
            "margin_ranking_loss : All input tensors should have same dimension but got sizes: "
            f"input1: {input1.size()}, input2: {input2.size()}, target: {target.size()} "
        )
    # margin is a double in PyTorch's signature: it makes an integer input's loss a float
    return _reduce((-target * (input1 - input2) + float(margin)).clamp_min(0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    reduction = _loss_reduction(size_average, reduce, reduction)
    margin_part = _prims.where(target != 1, (margin - input).clamp_min(0), 0.0)
    return _reduce(margin_part + _prims.where(target != -1, input, 0.0), reduction)


def _frames(input, target, target_fits):
    """(rows, classes) of a multi-margin loss's input: a vector (or a number) is one row. PyTorch's
    shape checks and messages."""
    if input.dim() > 2 or input.dim() > 0 and input.shape[-1] == 0:
        raise RuntimeError(
            f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: {list(input.shape)}"
        )
    rows, classes = (1, input.numel()) if input.dim() <= 1 else tuple(input.shape)
    target_fits(rows, classes)
    if target.dtype is not int64:
        raise RuntimeError(f"expected scalar type Long but found {SCALAR_TYPE_NAME[target.dtype]}")
    return rows, classes


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over the row's target classes j and the other classes i of max(0, 1 - (x[j] - x[i])),
    divided by the number of classes. A row's targets are its leading non-negative entries."""
    reduction = _loss_reduction(size_average, reduce, reduction)

    def target_fits(rows, classes):
        if input.dim() <= 1:
            fits = target.dim() <= 1 and target.numel() == classes
        else:
            fits = list(target.shape) == [rows, classes]
        if not fits:
            raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")

    rows, classes = _frames(input, target, target_fits)
    if target.numel() and (target.min().item() < -1 or target.max().item() >= classes):
        raise RuntimeError("argument #2 'target' is out of range")
    x, labels = input.reshape(rows, classes), target.reshape(rows, classes)
    is_label = (labels < 0).cumsum(1) == 0  # the leading entries, up to the first negative
    labels = labels.clamp(min=0)
    is_target = ((labels.unsqueeze(2) == arange(classes)) & is_label.unsqueeze(2)).any(1)
    # z[r, j, i] = 1 - x[r, label j] + x[r, i], over label j and non-target class i, where z > 0 as
    # PyTorch's: no gradient at z = 0, and a NaN z adds nothing
    z = 1 - x.gather(1, labels).unsqueeze(2) + x.unsqueeze(1)
    pairs = is_label.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss_rows = _prims.where(pairs & (z.detach() > 0), z, 0.0).sum((1, 2)) / classes
    return loss_rows.reshape(()) if input.dim() <= 1 else _reduce(loss_rows, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _loss_reduction(size_average, reduce, reduction)
    shape = _prims.broadcast_shapes(input.shape, target.shape)
    if list(shape) != list(input.shape):  # PyTorch writes the loss into a tensor shaped like the input
        raise RuntimeError(f"output with shape {list(input.shape)} doesn't match the broadcast shape {list(shape)}")
    _check_not_differentiable("soft_margin_loss", "target", target)
    # computed in place in a tensor like the input, as PyTorch does: of its dtype, a float one
    product = -input * target
    for result in (product, product.to(input.dtype).exp()):
        if not can_cast(result.dtype, input.dtype):
            raise RuntimeError(
                f"result type {SCALAR_TYPE_NAME[result.dtype]} can't be cast to the desired output type "
                f"{SCALAR_TYPE_NAME[input.dtype]}"
            )
    return _reduce(product.to(input.dtype).exp().log1p(), reduction)


class _LogSigmoid(Function):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), with PyTorch's forward and backward formulas
    (the gradient at 0 is 1/2)."""

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.clamp(max=0) - (-input.abs()).exp().log1p()

    @staticmethod
    def backward(ctx, grad):
        (input,) = ctx.saved_tensors
        negative = input < 0
        z = _prims.where(negative, input, -input).exp()  # exp(-|x|), with -|x|'s slope -1 at 0 (a second derivative)
        return grad * (negative.to(input.dtype) - _prims.where(negative, 1.0, -1.0) * (z / (1 + z)))


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * _LogSigmoid.apply(input) + (1 - target) * _LogSigmoid.apply(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(class_dim) / input.shape[class_dim]
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    return _reduce(loss, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    reduction = _loss_reduction(size_average, reduce, reduction)
    dim = target.dim()
    if dim not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.dim() != dim + 1 or input2.dim() != dim + 1:
        raise RuntimeError(
            f"{dim}D target tensor expects {dim + 1}D input tensors, but found inputs with sizes "
            f"{list(input1.shape)} and {list(input2.shape)}."
        )
    products = (input1 * input2).sum(dim)
    squared_norms = [(x * x).sum(dim) + _ATEN_EPSILON for x in (input1, input2)]
    cos = products / (squared_norms[0] * squared_norms[1]).sqrt()
    similar = _prims.where(target == 1, 1 - cos, 0.0)
    return _reduce(similar + _prims.where(target == -1, (cos - margin).clamp_min(0), 0.0), reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
    """sum over the classes i other than the target y of max(0, margin - x[y] + x[i])^p (times
    weight[y]), divided by the number of classes."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")

    def target_fits(rows, classes):
        if target.dim() > 1 or target.numel() != rows:
            raise RuntimeError(
                "multi_margin_loss: target tensor should be 1-D with size equal to the number of input samples "
                f"(batch size). Expected target size [{rows}], but got {list(target.shape)}. "
                f"Input has shape {list(input.shape)}."
            )

    rows, classes = _frames(input, target, target_fits)
    if weight is not None and weight.numel() != classes:
        raise RuntimeError(f"inconsistent weight size, expected {classes} but got {list(weight.shape)}")
    if weight is not None and weight.dtype != input.dtype:
        raise RuntimeError(
            f"expected scalar type {SCALAR_TYPE_NAME[input.dtype]} but found {SCALAR_TYPE_NAME[weight.dtype]}"
        )
    _check_floating(input, "multi_margin_loss_cpu_kernel")
    _check_not_differentiable("multi_margin_loss", "weight", weight)
    if target.numel() and (target.min().item() < 0 or target.max().item() >= classes):
        raise RuntimeError("target out of range")
    x, labels = input.reshape(rows, classes), target.reshape(rows, 1)
    # only z > 0 counts, and gets a gradient, as PyTorch's kernel tests it (so a NaN z adds nothing)
    z = margin - x.gather(1, labels) + x
    hinge = _prims.where(z > 0, z, 0.0)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * weight[labels]
    loss_rows = _prims.where(arange(classes) != labels, hinge, 0.0).sum(1) / classes
    if reduction == "none":
        return loss_rows if target.dim() > 0 else loss_rows.reshape(())
    return _reduce(loss_rows, reduction)


def _check_triplet_dims(anchor, positive, negative):
    if not anchor.dim() == positive.dim() == negative.dim():
        raise RuntimeError(
            "The anchor, positive, and negative tensors are expected to have the same number of dimensions, but "
            f"got: anchor {anchor.dim()}D, positive {positive.dim()}D, and negative {negative.dim()}D inputs"
        )


def _triplet_loss(anchor, positive, negative, distance, margin, swap, reduction):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)); with `swap`, the negative's
    distance is the smaller of its distances to the anchor and to the positive."""
    _check_triplet_dims(anchor, positive, negative)
    to_negative = distance(anchor, negative)
    if swap:
        to_negative = to_negative.minimum(distance(positive, negative))
    return _reduce((margin + distance(anchor, positive) - to_negative).clamp_min(0), reduction)


def triplet_margin_loss(
    anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None, reduce=None, reduction="mean"
):
    reduction = _loss_reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    return _triplet_loss(
        anchor, positive, negative, lambda x1, x2: pairwise_distance(x1, x2, p, eps), margin, swap, reduction
    )


def triplet_margin_with_distance_loss(
    anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False, reduction="mean"
):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    distance = pairwise_distance if distance_function is None else distance_function
    return _triplet_loss(anchor, positive, negative, distance, margin, swap, reduction)
