"""torch.nn.functional: activations, dropout, layer_norm, embedding, one_hot and the losses.

softmax, log_softmax, the negative log likelihood and gelu are the backend's fused primitives;
everything else is composed from tensor ops here, with PyTorch's formulas (so the same values,
and gradients by the chain rule), argument checks and messages.
"""

import warnings

import numpy as np

from .. import _prims
from .._methods import _recorded, _wrap_dim, cosine_similarity, pairwise_distance  # noqa: F401 (torch functions, here too)
from .._factories import arange
from .._sampling import rand
from ..autograd.function import Function
from fastgrad._types import SCALAR_TYPE_NAME, bool as bool_, can_cast, float64, int64, promote_types

Tensor = _prims.Tensor


# ---- activations


def linear(input, weight, bias=None):
    output = input.matmul(weight.t())
    return output if bias is None else output + bias


def _maybe_inplace(input, result, inplace):
    """The `inplace=True` form of an activation: the result written over the input."""
    return input.copy_(result) if inplace else result


def relu(input, inplace=False):
    return _maybe_inplace(input, _prims.relu(input), inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"leaky_relu_cpu\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")
    # where, not max(x, a*x): the slope applies at 0 too, as PyTorch's backward does. relu on the
    # kept side: its gradient refers to the input, so one taken with create_graph keeps a graph (with
    # zero second derivative), as PyTorch's LeakyReluBackward does.
    return _maybe_inplace(input, _prims.where(input > 0, _prims.relu(input), input * negative_slope), inplace)


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
    """Zeroes each element with probability p (a uniform draw below p), scaling the rest by 1/(1-p)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0 or input.numel() == 0:  # nothing to drop: PyTorch returns the input itself
        return input
    keep = rand(list(input.shape)) >= p
    scale = 1.0 / (1.0 - p) if p < 1 else 0.0
    return input.mul_(keep).mul_(scale) if inplace else input * keep * scale


# ---- the other activations: each one node with PyTorch's name, value and derivative (the kinks
# included); the backwards are written with ops on the saved input, so the double backward follows.


def _check_floating(input, kernel):
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")


def _activation(name, input, value, gradient, inplace=False):
    """value(x) for x = input (computed without history) as the one node `name`, whose gradient is
    gradient(grad, x). The in-place form computes it from a copy, so the saved input stays intact."""
    source = input.clone() if inplace else input
    (result,) = _recorded(name, [source], [value(source.detach())], [source], lambda grads, x: [gradient(grads[0], x)])
    return input.copy_(result) if inplace else result


def _float_product(dtype, a, b):
    """a * b as PyTorch's kernels form it: in float32 arithmetic unless the tensor is float64."""
    return a * b if dtype is float64 else float(np.float32(a) * np.float32(b))


def _elu(name, input, alpha, scale, input_scale, inplace):
    _check_floating(input, "elu_cpu")
    negative = _float_product(input.dtype, alpha, scale)

    def value(x):
        return _prims.where(x > 0, x * scale, (x * input_scale).expm1() * negative)

    def gradient(grad, x):
        below = x.masked_fill(x > 0, 0.0)  # the exp of the unused side must not overflow
        return _prims.where(x <= 0, grad * input_scale * negative * (below * input_scale).exp(), grad * scale)

    return _activation(name, input, value, gradient, inplace)


def elu(input, alpha=1.0, inplace=False):
    return _elu("EluBackward0", input, alpha, 1.0, 1.0, inplace)


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    return _elu("EluBackward0", input, _SELU_ALPHA, _SELU_SCALE, 1.0, inplace)


def selu_(input):
    return selu(input, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _elu("CeluBackward0", input, alpha, 1.0, 1.0 / alpha, inplace)


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
        z = (x.masked_fill(linear, 0.0) * beta).exp()
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
    if not input.dtype.is_floating_point:  # the kernel reads the bounds as the input's integers
        min_val, max_val = int(min_val), int(max_val)

    def gradient(grad, x):
        return _zero_where((x <= min_val) | (x >= max_val), grad)

    return _activation("HardtanhBackward0", input, lambda x: x.clamp(min_val, max_val), gradient, inplace)


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
        return _zero_where((x <= -3) | (x >= 3), grad * _ONE_SIXTH)

    return _activation("HardsigmoidBackward0", input, lambda x: (x + 3).clamp(0, 6) / 6, gradient, inplace)


def logsigmoid(input):
    """min(x, 0) - log(1 + exp(-|x|)): no exp overflows."""
    _check_floating(input, "log_sigmoid_cpu")

    def gradient(grad, x):
        z = (-x.abs()).exp()
        share = z / (1 + z)
        return grad * _prims.where(x < 0, 1 - share, share)

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

    return _activation("SoftshrinkBackward0", input, value, lambda grad, x: _zero_where(_inside(x, lambd), grad))


def hardshrink(input, lambd=0.5):
    _check_floating(input, "hardshrink_cpu")
    return _activation(
        "HardshrinkBackward0",
        input,
        lambda x: _prims.where(_inside(x, lambd), 0.0, x),
        lambda grad, x: _zero_where(_inside(x, lambd), grad),
    )


def tanhshrink(input):
    return input - input.tanh()


def _thresholded(input, limit, value, inplace):
    """value where input <= limit, the input elsewhere."""
    if not input.dtype.is_floating_point:  # the kernel reads both as the input's integers
        limit, value = int(limit), int(value)
    return _activation(
        "ThresholdBackward0",
        input,
        lambda x: _prims.where(x <= limit, value, x),
        lambda grad, x: _zero_where(x <= limit, grad),
        inplace,
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
    _check_floating(input, "prelu_cpu")
    if weight.dim() > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.dim()}")
    channels = input.shape[1] if input.dim() >= 2 else 1
    if weight.numel() != 1 and weight.numel() != channels:
        raise RuntimeError(
            "Mismatch of parameter numbers and input channel size. Found parameter numbers = "
            f"{weight.numel()} and channel size = {channels}."
        )
    channel_shape = [-1 if d == 1 else 1 for d in range(input.dim())]

    def slopes(w):  # the weight broadcast along the input's channel dim
        return w.reshape(channel_shape) if input.dim() >= 2 else w.reshape([])

    def value(x, w):
        return _prims.where(x > 0, x, slopes(w) * x)

    def backward(grads, x, w):
        (grad,) = grads
        positive = x > 0
        grad_weight = _prims.where(positive, 0.0, x * grad)
        kept = [d for d in range(x.dim()) if not (d == 1 and weight.numel() > 1)]
        grad_weight = grad_weight.sum(kept) if kept else grad_weight
        return [_prims.where(positive, grad, slopes(w) * grad), grad_weight.reshape(weight.shape)]

    result = value(input.detach(), weight.detach())
    return _recorded("PreluKernelBackward0", [input, weight], [result], [input, weight], backward)[0]


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Training: each non-positive element times a slope drawn uniformly from [lower, upper]; in
    evaluation the mean slope, as leaky_relu."""
    if training:
        _check_floating(input, "rrelu_with_noise_out_cpu")
    else:
        _check_floating(input, "leaky_relu_cpu")
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if training and upper - lower > 1e-6:  # PyTorch's rule: a narrower range is the fixed slope
        noise = _prims.where(
            input.detach() > 0, 1.0, rand(list(input.shape), dtype=input.dtype) * (upper - lower) + lower
        )
        return _activation("RreluWithNoiseBackward0", input, lambda x: x * noise, lambda grad, x: grad * noise, inplace)
    slope = (lower + upper) / 2
    return _activation(
        "RreluWithNoiseBackward0",
        input,
        lambda x: _prims.where(x > 0, x, x * slope),
        lambda grad, x: _prims.where(x > 0, grad, grad * slope),
        inplace,
    )


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


# ---- normalization and lookup


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if not isinstance(normalized_shape, (tuple, list)):
        raise TypeError(
            "layer_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, "
            f"not {type(normalized_shape).__name__}"
        )
    shape = list(normalized_shape)
    if input.dim() < len(shape) or list(input.shape)[input.dim() - len(shape) :] != shape:
        raise RuntimeError(
            f"Given normalized_shape={shape}, expected input with shape "
            f"[*, {', '.join(map(str, shape))}], but got input of size{list(input.shape)}"
        )
    for name, tensor in (("weight", weight), ("bias", bias)):
        if tensor is not None and list(tensor.shape) != shape:
            raise RuntimeError(
                f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                f"{list(tensor.shape)} and normalized_shape = {shape}"
            )
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"LayerNormKernelImpl\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")
    return NativeLayerNorm.apply(input, weight, bias, list(range(-len(shape), 0)), eps)


# layer_norm is one node, as PyTorch's, and so is its gradient (input, weight and bias together): a
# gradient taken with create_graph then has a graph wherever any of them has one, as PyTorch's
# (the bias's gradient, a sum of the incoming gradient, too). Each backward is composed of ops, so
# gradients of any order follow.


def _normalized(x, dims, eps):
    """(x - mean) / std over `dims`, and 1 / std (PyTorch's rstd), both kept at x's rank."""
    std = (x.var(dims, unbiased=False, keepdim=True) + eps).sqrt()
    return (x - x.mean(dims, keepdim=True)) / std, 1 / std


def _normalized_input_grad(grad, xhat, rstd, dims):
    """The input's gradient for `grad` w.r.t. the normalized value xhat: rstd times grad projected
    off the row's mean and off xhat."""
    return rstd * (grad - grad.mean(dims, keepdim=True) - xhat * (grad * xhat).mean(dims, keepdim=True))


def _sum_over_rows(t, dims):
    """t summed over its leading (batch) dims: a gradient of the weight or bias."""
    return t.sum(list(range(t.dim() - len(dims)))) if t.dim() > len(dims) else t


class NativeLayerNorm(Function):
    @staticmethod
    def forward(ctx, input, weight, bias, dims, eps):
        ctx.save_for_backward(input, weight)
        ctx.dims, ctx.eps, ctx.has_bias = dims, eps, bias is not None
        output = _normalized(input, dims, eps)[0]
        if weight is not None:
            output = output * weight
        return output if bias is None else output + bias

    @staticmethod
    def backward(ctx, grad):
        input, weight = ctx.saved_tensors
        grad_input, grad_weight, grad_bias = NativeLayerNormBackward.apply(grad, input, weight, ctx.dims, ctx.eps)
        return grad_input, None if weight is None else grad_weight, grad_bias if ctx.has_bias else None, None, None


class NativeLayerNormBackward(Function):
    """(grad_input, grad_weight, grad_bias) of layer_norm for `grad`; the last two are computed even
    without a weight or bias (then unused)."""

    @staticmethod
    def forward(ctx, grad, input, weight, dims, eps):
        ctx.save_for_backward(grad, input, weight)
        ctx.dims, ctx.eps = dims, eps
        xhat, rstd = _normalized(input, dims, eps)
        scaled = grad if weight is None else grad * weight
        return (
            _normalized_input_grad(scaled, xhat, rstd, dims),
            _sum_over_rows(grad * xhat, dims),
            _sum_over_rows(grad, dims),
        )

    @staticmethod
    def backward(ctx, gg_input, gg_weight, gg_bias):
        grad, input, weight = ctx.saved_tensors
        dims = ctx.dims
        xhat, rstd = _normalized(input, dims, ctx.eps)
        scaled = grad if weight is None else grad * weight

        def mean(t):
            return t.mean(dims, keepdim=True)

        # gg_input . grad_input = rstd * <gg_input, P(scaled)>, P projecting off the row's mean and
        # off xhat (symmetric): linear in scaled; in the input through rstd and xhat.
        projected = _normalized_input_grad(gg_input, xhat, rstd, dims)
        d_grad = projected if weight is None else projected * weight
        d_weight = None if weight is None else _sum_over_rows(grad * projected, dims)
        m, p = mean(scaled * xhat), mean(gg_input * xhat)
        through_xhat = -rstd * (scaled * p + m * gg_input)
        through_rstd = mean(gg_input * scaled) - mean(gg_input) * mean(scaled) - m * p
        d_input = _normalized_input_grad(through_xhat, xhat, rstd, dims) - rstd * rstd * xhat * through_rstd
        # gg_weight . grad_weight = sum of gg_weight * grad * xhat; gg_bias . grad_bias = sum of gg_bias * grad
        # (an unused output's gradient comes as zeros: the Function materializes it)
        d_grad = d_grad + gg_weight * xhat + gg_bias
        d_input = d_input + _normalized_input_grad(gg_weight * grad, xhat, rstd, dims)
        return d_grad, d_input, d_weight, None, None


def _padding_index(padding_idx, num_embeddings):
    """A padding_idx in [-num, num) as a row number."""
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise AssertionError("Padding_idx must be within num_embeddings")
    return padding_idx % num_embeddings


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not supported")
    if input.dtype is not int64:
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: "
            f"Long, Int; but got {input.type()} instead (while checking arguments for embedding)"
        )
    if input.numel() and not weight.shape[0]:  # PyTorch checks this before the range
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    if input.numel() and (input.min().item() < 0 or input.max().item() >= weight.shape[0]):
        raise IndexError("index out of range in self")
    if padding_idx is not None:
        # the padding row is read as it is, but passes no gradient back
        is_padding = (arange(weight.shape[0]) == _padding_index(padding_idx, weight.shape[0])).unsqueeze(1)
        weight = _prims.where(is_padding, weight.detach(), weight)
    return weight[input]


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
