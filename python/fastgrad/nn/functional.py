"""torch.nn.functional: activations, dropout, layer_norm, embedding, one_hot and the losses.

softmax, log_softmax, the negative log likelihood and gelu are the backend's fused primitives;
everything else is composed from tensor ops here, with PyTorch's formulas (so the same values,
and gradients by the chain rule), argument checks and messages.
"""

import math
import warnings

import numpy as np

from .. import _prims
from .._methods import broadcast_shapes
from .._methods import cosine_similarity, pairwise_distance  # noqa: F401 (PyTorch's torch functions, here too)
from .._factories import arange, ones_like
from .._grad_mode import is_grad_enabled, no_grad
from .._sampling import rand
from ..autograd.function import Function
from fastgrad._types import SCALAR_TYPE_NAME, bool as bool_, can_cast, finfo, float32, float64, int64, promote_types

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


# ---- normalization and lookup


def _checked_normalized_shape(op, input, normalized_shape, **params):
    """normalized_shape as a list, after PyTorch's checks of it, of the input's trailing dims and of
    the parameters' shapes (layer_norm and rms_norm word them slightly differently)."""
    if not isinstance(normalized_shape, (tuple, list)):
        raise TypeError(
            f"{op}(): argument 'normalized_shape' (position 2) must be tuple of ints, "
            f"not {type(normalized_shape).__name__}"
        )
    shape = list(normalized_shape)
    if op == "rms_norm" and input.dim() < len(shape):
        raise ValueError(f"Input tensor must have at least {len(shape)} dimensions, but got {input.dim()}")
    if input.dim() < len(shape) or list(input.shape)[input.dim() - len(shape) :] != shape:
        trailing = ("*, " if op == "layer_norm" else "*") + ", ".join(map(str, shape))
        raise RuntimeError(
            f"Given normalized_shape={shape}, expected input with shape [{trailing}], "
            f"but got input of size{list(input.shape)}"
        )
    for name, tensor in params.items():
        if tensor is not None and list(tensor.shape) != shape:
            raise RuntimeError(
                f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                f"{list(tensor.shape)} and normalized_shape = {shape}"
            )
    return shape


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = _checked_normalized_shape("layer_norm", input, normalized_shape, weight=weight, bias=bias)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"LayerNormKernelImpl\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")
    return NativeLayerNorm.apply(input, weight, bias, list(range(-len(shape), 0)), eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the trailing dims, times weight: composed as PyTorch's CPU
    path composes it (float16/bfloat16 computed in float32; eps None = the computing dtype's eps)."""
    shape = _checked_normalized_shape("rms_norm", input, normalized_shape, weight=weight)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"rms_norm\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")
    upcast = input if input.dtype in (float32, float64) else input.float()
    if eps is None:
        eps = finfo(upcast.dtype).eps
    rstd = upcast.pow(2).mean(list(range(-len(shape), 0)), keepdim=True).add(eps).rsqrt()
    result = (upcast * rstd).type_as(input)
    return result if weight is None else (result * weight).type_as(result)


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


def _loss_reduction(size_average, reduce, reduction):
    """The reduction of a loss with legacy flags: checked up front, as PyTorch's _Reduction.get_enum does."""
    if size_average is not None or reduce is not None:
        return _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


# ATen's `constexpr float EPSILON = 1e-12`: a float, so float64 kernels see its float32 value
_ATEN_EPSILON = float(np.float32(1e-12))


def _check_floating_kernel(kernel, input):
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")


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
    _check_floating_kernel("binary_cross_entropy", input)
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
    if not (input.dtype.is_floating_point and target.dtype.is_floating_point):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    loss = target.exp() * (target - input) if log_target else target.xlogy(target) - target * input
    loss = _reduce(loss, summed_as)
    return loss / input.shape[0] if reduction == "batchmean" and input.dim() != 0 else loss


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
    # z[r, j, i] = 1 - x[r, label j] + x[r, i], over label j and non-target class i; relu: no
    # gradient at z = 0, as PyTorch's z > 0
    z = 1 - x.gather(1, labels).unsqueeze(2) + x.unsqueeze(1)
    pairs = is_label.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss_rows = _prims.where(pairs, z.relu(), 0.0).sum((1, 2)) / classes
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
    _check_floating_kernel("multi_margin_loss_cpu_kernel", input)
    _check_not_differentiable("multi_margin_loss", "weight", weight)
    if target.numel() and (target.min().item() < 0 or target.max().item() >= classes):
        raise RuntimeError("target out of range")
    x, labels = input.reshape(rows, classes), target.reshape(rows, 1)
    # relu: no gradient at z = 0, as PyTorch's z > 0
    hinge = (margin - x.gather(1, labels) + x).relu()
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
