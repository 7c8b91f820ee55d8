"""PyTorch's top-level forms of nn.functional ops (torch.conv2d, torch.dropout, torch.layer_norm, ...).

They are ATen's native functions, which nn.functional wraps, so their signatures are ATen's and not
nn.functional's: torch.dropout(input, p, train) has no defaults and no inplace flag (dropout_ is the
in-place form), torch.batch_norm takes weight and bias before the running statistics,
torch.embedding takes the weight first, the losses take `reduction` as an int (0 none, 1 mean,
2 sum), max_pool1d has no return_indices (max_pool1d_with_indices has). Each is one call of
nn.functional's op (no second copy of its code), so values, gradients and node names are its.

Written once for both backends (a shared module, see _shared).
"""

from .nn import functional as F

__all__ = [
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "max_pool1d",
    "max_pool2d",
    "max_pool1d_with_indices",
    "avg_pool1d",
    "adaptive_avg_pool1d",
    "adaptive_max_pool1d",
    "dropout",
    "dropout_",
    "alpha_dropout",
    "alpha_dropout_",
    "feature_dropout",
    "feature_dropout_",
    "feature_alpha_dropout",
    "feature_alpha_dropout_",
    "layer_norm",
    "group_norm",
    "instance_norm",
    "batch_norm",
    "rms_norm",
    "embedding",
    "bilinear",
    "celu",
    "celu_",
    "selu",
    "selu_",
    "threshold",
    "threshold_",
    "rrelu",
    "rrelu_",
    "prelu",
    "hardshrink",
    "binary_cross_entropy_with_logits",
    "cosine_embedding_loss",
    "hinge_embedding_loss",
    "kl_div",
    "margin_ranking_loss",
    "triplet_margin_loss",
    "poisson_nll_loss",
    "pixel_shuffle",
    "pixel_unshuffle",
    "channel_shuffle",
    "pdist",
    "constant_pad_nd",
]

# the same signature as nn.functional's
conv1d, conv2d = F.conv1d, F.conv2d
conv_transpose1d, conv_transpose2d = F.conv_transpose1d, F.conv_transpose2d
adaptive_avg_pool1d, bilinear, prelu, hardshrink = F.adaptive_avg_pool1d, F.bilinear, F.prelu, F.hardshrink
pixel_shuffle, pixel_unshuffle, channel_shuffle, pdist = F.pixel_shuffle, F.pixel_unshuffle, F.channel_shuffle, F.pdist


# ---- pooling: an empty stride (ATen's default) is the kernel size, as nn.functional's None


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool2d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode, return_indices=True)


def avg_pool1d(input, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True):
    return F.avg_pool1d(input, kernel_size, stride or None, padding, ceil_mode, count_include_pad)


def adaptive_max_pool1d(input, output_size):
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


# ---- dropout: ATen checks p with a RuntimeError (nn.functional's Python check raises ValueError)


def _checked(p):
    if p < 0 or p > 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    return p


def dropout(input, p, train):
    return F.dropout(input, _checked(p), train)


def dropout_(input, p, train):
    return F.dropout(input, _checked(p), train, inplace=True)


def alpha_dropout(input, p, train):
    return F.alpha_dropout(input, _checked(p), train)


def alpha_dropout_(input, p, train):
    return F.alpha_dropout(input, _checked(p), train, inplace=True)


def feature_dropout(input, p, train):
    return F._noisy(input, _checked(p), train, False, feature=True, alpha=False)


def feature_dropout_(input, p, train):
    return F._noisy(input, _checked(p), train, True, feature=True, alpha=False)


def feature_alpha_dropout(input, p, train):
    return F.feature_alpha_dropout(input, _checked(p), train)


def feature_alpha_dropout_(input, p, train):
    return F.feature_alpha_dropout(input, _checked(p), train, inplace=True)


# ---- normalization (cudnn_enable(d) chooses a GPU library: nothing to choose on the CPU)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    return F.group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    return F.rms_norm(input, normalized_shape, weight, eps)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """ATen's padding_idx is -1 for none (nn.functional has already made a negative index positive)."""
    return F.embedding(indices, weight, None if padding_idx < 0 else padding_idx, None, 2.0, scale_grad_by_freq, sparse)


# ---- activations: the in-place form is its own function, not a flag


def celu(input, alpha=1.0):
    return F.celu(input, alpha)


def celu_(input, alpha=1.0):
    return F.celu_(input, alpha)


def selu(input):
    return F.selu(input)


def selu_(input):
    return F.selu_(input)


def threshold(input, threshold, value):
    return F.threshold(input, threshold, value)


def threshold_(input, threshold, value):
    return F.threshold_(input, threshold, value)


def rrelu(input, lower=0.125, upper=0.3333333333333333, training=False, generator=None):
    return F._rrelu(input, lower, upper, training, False, generator)


def rrelu_(input, lower=0.125, upper=0.3333333333333333, training=False, generator=None):
    return F._rrelu(input, lower, upper, training, True, generator)


# ---- losses: ATen's reduction is an int; any value but mean (1) and sum (2) reduces nothing. ATen's
# default is mean, but PyTorch's Python binding reads that default as 0: called without a reduction,
# torch.kl_div(input, target) and the others return the unreduced loss, and so do these.


def _reduction(reduction):
    return {1: "mean", 2: "sum"}.get(reduction, "none")


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=0):
    return F.binary_cross_entropy_with_logits(
        input, target, weight, reduction=_reduction(reduction), pos_weight=pos_weight
    )


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    return F.cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def kl_div(input, target, reduction=0, *, log_target=False):
    return F._kl_div(input, target, _reduction(reduction), log_target)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    return F.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-06, swap=False, reduction=0):
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction=_reduction(reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=_reduction(reduction))


def constant_pad_nd(input, pad, value=0):
    return F.pad(input, pad, "constant", value)
