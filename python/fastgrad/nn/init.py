"""torch.nn.init: fills a tensor in place (under no_grad) with PyTorch's bounds and standard
deviations; the numbers come from the given generator or the backend's default one (so manual_seed
makes them reproducible)."""

import math
import warnings

from .. import linalg
from .._factories import empty_like, eye
from .._grad_mode import no_grad
from .._methods import diag, where
from .._sampling import randperm


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std) restricted to [a, b], PyTorch's way (so its numbers): when [a, b] holds more than
    0.3 of the mass, normal draws with the values outside redrawn (a whole new normal_ per round);
    otherwise uniform candidates in [a, b] kept with probability pdf / pdf(mode), by a log-uniform
    test. Each round keeps a value with probability 0.3 or more, or pdf(b) / pdf(a) for a far tail."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
            "The distribution of values may be incorrect.",
            stacklevel=2,
        )

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    with no_grad():
        if norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std) > 0.3:
            low, high = tensor.new_tensor(a).item(), tensor.new_tensor(b).item()  # the bounds in tensor's dtype
            result = tensor.normal_(mean, std, generator=generator)
            while (outside := (result < low) | (result > high)).any():
                result = where(outside, empty_like(result).normal_(mean, std, generator=generator), result)
            return tensor if result is tensor else tensor.copy_(result)
        mode = max(a, min(mean, b))
        log_peak = -0.5 * ((mode - mean) / std) ** 2

        def rejected(candidates):
            """Whether each candidate fails its test (it is overwritten by its log density)."""
            candidates.sub_(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak)
            return empty_like(candidates).uniform_(generator=generator).log_().gt(candidates)

        candidates = tensor.uniform_(a, b, generator=generator).clone()
        pending = rejected(candidates)
        if not pending.any():
            return tensor
        result = tensor
        for _ in range(_TRUNC_NORMAL_ROUNDS):
            candidates.uniform_(a, b, generator=generator)
            result = where(pending, candidates, result)
            pending = where(pending, rejected(candidates), pending)
            if not pending.any():
                return tensor.copy_(result)
        # PyTorch loops for ever here (a far tail, or a negative std, where no candidate passes)
        raise RuntimeError(
            f"trunc_normal_: no value accepted in {_TRUNC_NORMAL_ROUNDS} rounds: [{a}, {b}] lies too far in "
            f"the tail of N({mean}, {std})"
        )


# Rounds of the tail sampler before it gives up: a tail accepting one candidate in 300 fills a million
# values in ~4,000 rounds on average.
_TRUNC_NORMAL_ROUNDS = 100_000


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix over the trailing dims flattened: Q of the QR factorisation of a
    normal draw, its columns' signs fixed by R's diagonal so that Q is uniformly distributed."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.size(0)
    cols = tensor.numel() // rows
    flattened = tensor.new_empty((rows, cols)).normal_(0, 1, generator=generator)
    if rows < cols:
        flattened = flattened.t()
    q, r = linalg.qr(flattened)
    q = q * diag(r, 0).sign()
    if rows < cols:
        q = q.t()
    with no_grad():
        tensor.view_as(q).copy_(q)
        tensor.mul_(gain)
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Normal values with ceil(sparsity * rows) zeros in each column, at random rows."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        for column in range(cols):
            tensor[randperm(rows)[:num_zeros], column] = 0  # PyTorch draws these from the default generator
    return tensor


def eye_(tensor):
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        return tensor.copy_(eye(*tensor.shape, dtype=tensor.dtype))


def dirac_(tensor, groups=1):
    """The identity of a convolution: in each group, output channel d passes input channel d through
    the kernel's centre."""
    dimensions = tensor.dim()
    if dimensions not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if tensor.size(0) % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_channels_per_group = tensor.size(0) // groups
    centre = tuple(size // 2 for size in tensor.shape[2:])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min(out_channels_per_group, tensor.size(1))):
                tensor[(g * out_channels_per_group + d, d, *centre)] = 1
    return tensor


def constant_(tensor, val):
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    with no_grad():
        return tensor.zero_()


def calculate_gain(nonlinearity, param=None):
    if nonlinearity in (
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "sigmoid",
    ):
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive_field_size = math.prod(tensor.shape[2:])
    return tensor.size(1) * receptive_field_size, tensor.size(0) * receptive_field_size


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of {['fan_in', 'fan_out']}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _xavier_std(tensor, gain):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return gain * math.sqrt(2.0 / float(fan_in + fan_out))


def xavier_uniform_(tensor, gain=1.0, generator=None):
    bound = math.sqrt(3.0) * _xavier_std(tensor, gain)  # the uniform bounds with that standard deviation
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    return normal_(tensor, 0.0, _xavier_std(tensor, gain), generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    """The standard deviation, or None for a tensor without elements (which is left alone)."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    return tensor if std is None else uniform_(tensor, -math.sqrt(3.0) * std, math.sqrt(3.0) * std, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    return tensor if std is None else normal_(tensor, 0, std, generator)


def _deprecated(new):
    """The pre-0.4 name without the trailing underscore, warning as PyTorch's does."""
    old_name, new_name = new.__name__[:-1], new.__name__

    def deprecated_init(*args, **kwargs):
        warnings.warn(
            f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.", FutureWarning, stacklevel=2
        )
        return new(*args, **kwargs)

    deprecated_init.__name__ = deprecated_init.__qualname__ = old_name
    return deprecated_init


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
dirac = _deprecated(dirac_)
