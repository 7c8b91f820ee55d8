"""The pooling functions of torch.nn.functional (re-exported by nn/functional.py): max, average,
adaptive and power-average pooling in 1-D and 2-D, and max_unpool. The 2-D pools are the backend's
primitives over the last two dims of a (C, H, W) or (N, C, H, W) input (_prims.max_pool2d,
avg_pool2d, adaptive_avg_pool2d, adaptive_max_pool2d, max_unpool2d); a 1-D pool is the 2-D one of a
height-1 plane, unsqueezed and squeezed around it as PyTorch does (so its grad_fn is
SqueezeBackward1). The argument checks are PyTorch's, in its order, with its messages.
"""

import operator

from .. import _prims
from fastgrad._types import SCALAR_TYPE_NAME, int64
from ._checked import CheckedArguments

Tensor = _prims.Tensor


def _size_str(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _int_list(value):
    """An int[] argument as PyTorch's parser takes it: one int, or a sequence of ints."""
    if isinstance(value, (tuple, list)):
        return [operator.index(v) for v in value]
    return [operator.index(value)]


def _pair(values):
    """A 2-D pool's int[2] argument after its length check: one value serves both dims."""
    return (values[0], values[-1])


def _check_tensor(input, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")


def _pooled_size(size, k, pad, stride, dilation, ceil_mode):
    """PyTorch's pooling_output_shape, with its checks."""
    if stride == 0:
        raise RuntimeError("stride should not be zero")
    if pad < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {pad}")
    if pad > ((k - 1) * dilation + 1) // 2:
        raise RuntimeError(
            f"pad should be at most half of effective kernel size, but got pad={pad}, kernel_size={k} and "
            f"dilation={dilation}"
        )
    out = (size + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _pool2d_shape_check(input, kernel, stride, padding, dilation, out_h, out_w):
    """PyTorch's pool2d_shape_check (for NCHW input)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    if kh <= 0 or kw <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {kh} kW: {kw}")
    if sh <= 0 or sw <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {sh} dW: {sw}")
    if dh <= 0 or dw <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {dh} dilationW: {dw}")
    ndim, shape = input.dim(), input.shape
    if not ((ndim == 3 and shape[0] != 0 or ndim == 4) and shape[-3] != 0 and shape[-2] != 0 and shape[-1] != 0):
        raise RuntimeError(
            "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:"
            + _size_str(shape)
        )
    if kw // 2 < pw or kh // 2 < ph:
        raise RuntimeError(
            f"pad should be smaller than or equal to half of kernel size, but got padW = {pw}, padH = {ph}, "
            f"kW = {kw}, kH = {kh}"
        )
    if out_h < 1 or out_w < 1:
        planes, h, w = shape[-3:]
        raise RuntimeError(
            f"Given input size: ({planes}x{h}x{w}). Calculated output size: ({planes}x{out_h}x{out_w}). "
            "Output size is too small"
        )


def _pool2d_args(op, kernel_size, stride, padding, dilation=1):
    """kernel, stride, padding and dilation of a 2-D pool as pairs, with PyTorch's checks on their
    lengths (stride None or empty: the kernel's)."""
    kernel = _int_list(kernel_size)
    if len(kernel) not in (1, 2):
        raise RuntimeError(f"{op}: kernel_size must either be a single int, or a tuple of two ints")
    strides = [] if stride is None else _int_list(stride)
    if len(strides) not in (0, 1, 2):
        raise RuntimeError(f"{op}: stride must either be omitted, a single int, or a tuple of two ints")
    pads = _int_list(padding)
    if len(pads) not in (1, 2):
        raise RuntimeError(f"{op}: padding must either be a single int, or a tuple of two ints")
    dilations = _int_list(dilation)
    if len(dilations) not in (1, 2):
        raise RuntimeError(f"{op}: dilation must be either a single int, or a tuple of two ints")
    return _pair(kernel), _pair(strides or kernel), _pair(pads), _pair(dilations)


# ---- max pooling


_CHECKS = CheckedArguments()


def _max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode):
    """(values, indices) of PyTorch's max_pool2d_with_indices."""
    _check_tensor(input, "max_pool2d_with_indices")
    sizes = _CHECKS.get(
        ("max_pool2d", input.shape),
        (kernel_size, stride, padding, dilation, ceil_mode),
        lambda: _check_max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode),
    )
    return _prims.max_pool2d(input, *sizes, bool(ceil_mode))


def _check_max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode):
    """PyTorch's checks; the primitive's kernel, stride, padding and dilation."""
    kernel, stride, padding, dilation = _pool2d_args("max_pool2d", kernel_size, stride, padding, dilation)
    if input.dim() not in (3, 4):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    h, w = input.shape[-2:]
    out_h = _pooled_size(h, kernel[0], padding[0], stride[0], dilation[0], ceil_mode)
    out_w = _pooled_size(w, kernel[1], padding[1], stride[1], dilation[1], ceil_mode)
    _pool2d_shape_check(input, kernel, stride, padding, dilation, out_h, out_w)
    return (*kernel, *stride, *padding, *dilation)


def max_pool2d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    return _max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    out = _max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)
    return out if return_indices else out[0]


def _check_max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode):
    """PyTorch's max_pool1d checks; the kernel, stride, padding and dilation as ints."""
    ndim, shape = input.dim(), input.shape
    if not (ndim == 2 and shape[0] != 0 and shape[1] != 0 or ndim == 3 and shape[1] != 0 and shape[2] != 0):
        raise RuntimeError(
            "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, but got:"
            f"{_size_str(shape)}"
        )
    kernel, strides, pads, dilations = (
        _int_list(kernel_size),
        [] if stride is None else _int_list(stride),
        _int_list(padding),
        _int_list(dilation),
    )
    if len(kernel) != 1:
        raise RuntimeError(
            "max_pool1d() kernel_size must be an int, list of ints or tuple of ints of size 1 but got size "
            f"{len(kernel)}"
        )
    if len(strides) > 1:
        raise RuntimeError(
            "max_pool1d() stride must be None, an int, list of ints, or tuple of ints of size 1 but got size "
            f"{len(strides)}"
        )
    if len(pads) != 1:
        raise RuntimeError(
            f"max_pool1d() padding must be an int, list of ints, or tuple of ints of size 1 but got size {len(pads)}"
        )
    if len(dilations) != 1:
        raise RuntimeError(
            "max_pool1d() dilation must be an int, list of ints or tuple of ints of size 1 but got size "
            f"{len(dilations)}"
        )
    (k,), (s,), (p,), (d,) = kernel, strides or kernel, pads, dilations
    if k <= 0:
        raise RuntimeError(f"max_pool1d() kernel_size must be greater than zero, but got {k}")
    if s <= 0:
        raise RuntimeError(f"max_pool1d() stride must be greater than zero, but got {s}")
    if p < 0:
        raise RuntimeError(f"max_pool1d() padding must be non-negative, but got {p}")
    if p > k // 2:
        raise RuntimeError(
            f"max_pool1d() padding should be at most half of kernel size, but got padding={p} and kernel_size={k}"
        )
    if d <= 0:
        raise RuntimeError(f"max_pool1d() dilation must be greater than zero, but got {d}")
    out = _pooled_size(shape[-1], k, p, s, d, ceil_mode)
    if out <= 0:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {out}")
    return k, s, p, d


def _max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, with_indices):
    """PyTorch's max_pool1d checks its arguments itself (with its own messages); its
    max_pool1d_with_indices (also max_pool1d's return_indices) checks their ranks and lengths, and
    leaves the rest to max_pool2d on the unsqueezed input."""
    _check_tensor(input, "max_pool1d")
    if not with_indices:
        k, s, p, d = _check_max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode)
        out, indices = _prims.max_pool2d(input.unsqueeze(-2), 1, k, 1, s, 0, p, 1, d, bool(ceil_mode))
        return out.squeeze(-2), indices.squeeze(-2)
    _check_dim_range(input, "max_pool1d", 2, 4)
    k = _one_int(kernel_size, "max_pool1d", "kernel_size")
    s = k if stride is None or _int_list(stride) == [] else _one_int(stride, "max_pool1d", "stride")
    p, d = _one_int(padding, "max_pool1d", "padding"), _one_int(dilation, "max_pool1d", "dilation")
    out, indices = _max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), (1, d), ceil_mode)
    return out.squeeze(-2), indices.squeeze(-2)


def max_pool1d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    return _max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    out = _max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)
    return out if return_indices else out[0]


# ---- average pooling


def avg_pool2d(
    input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
):
    _check_tensor(input, "avg_pool2d")
    sizes = _CHECKS.get(
        ("avg_pool2d", input.shape),
        (kernel_size, stride, padding, ceil_mode, divisor_override),
        lambda: _check_avg_pool2d(input, kernel_size, stride, padding, ceil_mode, divisor_override),
    )
    *window, divisor = sizes
    return _prims.avg_pool2d(input, *window, bool(ceil_mode), bool(count_include_pad), divisor)


def _check_avg_pool2d(input, kernel_size, stride, padding, ceil_mode, divisor_override):
    """PyTorch's checks; the primitive's kernel, stride, padding and divisor (0: the window's)."""
    kernel, stride, padding, _ = _pool2d_args("avg_pool2d", kernel_size, stride, padding)
    if divisor_override is not None and operator.index(divisor_override) == 0:
        raise RuntimeError("divisor must be not zero")
    if input.dim() < 3:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-max(input.dim(), 1)}, {max(input.dim(), 1) - 1}], "
            "but got -3)"
        )
    h, w = input.shape[-2:]
    out_h = _pooled_size(h, kernel[0], padding[0], stride[0], 1, ceil_mode)
    out_w = _pooled_size(w, kernel[1], padding[1], stride[1], 1, ceil_mode)
    _pool2d_shape_check(input, kernel, stride, padding, (1, 1), out_h, out_w)
    return (*kernel, *stride, *padding, 0 if divisor_override is None else operator.index(divisor_override))


def _check_dim_range(input, op, low, high):
    """PyTorch's checkDimRange(op, self, low, high) (high exclusive)."""
    if not low <= input.dim() < high:
        raise RuntimeError(
            f"Expected {low} to {high - 1} dimensions, but got {input.dim()}-dimensional tensor for argument #1 "
            f"'self' (while checking arguments for {op})"
        )


def _one_int(value, op, name):
    """PyTorch's check1d: an int[1] argument holds one int."""
    values = _int_list(value)
    if len(values) != 1:
        raise RuntimeError(f"{op}() argument '{name}' should contain one int (got {len(values)})")
    return values[0]


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    _check_tensor(input, "avg_pool1d")
    _check_dim_range(input, "avg_pool1d", 2, 4)
    k = _one_int(kernel_size, "avg_pool1d", "kernel_size")
    s = k if stride is None or _int_list(stride) == [] else _one_int(stride, "avg_pool1d", "stride")
    p = _one_int(padding, "avg_pool1d", "padding")
    return avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), ceil_mode, count_include_pad).squeeze(-2)


# ---- adaptive pooling


def _adaptive_output_size(input, output_size, dims):
    """output_size as `dims` ints; None entries keep the input's size (PyTorch's _list_with_default)."""
    if not isinstance(output_size, (tuple, list)):
        return [operator.index(output_size)] * dims
    sizes = list(output_size)
    if input.dim() <= len(sizes):
        raise ValueError(f"Input dimension should be at least {len(sizes) + 1}")
    return [input.shape[d - len(sizes)] if v is None else operator.index(v) for d, v in enumerate(sizes)]


def adaptive_avg_pool2d(input, output_size):
    _check_tensor(input, "adaptive_avg_pool2d")
    out_h, out_w = sizes = _adaptive_output_size(input, output_size, 2)
    if len(sizes) != 2:
        raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
    if out_h < 0 or out_w < 0:
        raise RuntimeError(
            "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received "
            f"{{{out_h}, {out_w}}}"
        )
    if out_h == 1 and out_w == 1:  # PyTorch takes the mean over the plane (MeanBackward1)
        return input.mean((-1, -2), keepdim=True)
    if input.dim() not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {_size_str(input.shape)}")
    for d in (-2, -1):
        if input.shape[d] <= 0:
            raise RuntimeError(
                "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch dimensions, but input has "
                f"sizes {_size_str(input.shape)} with dimension {d + input.dim()} being empty"
            )
    return _prims.adaptive_avg_pool2d(input, out_h, out_w)


def adaptive_avg_pool1d(input, output_size):
    _check_tensor(input, "adaptive_avg_pool1d")
    _check_dim_range(input, "adaptive_avg_pool1d", 2, 4)
    size = _one_int(output_size, "adaptive_avg_pool1d", "output_size")
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, size)).squeeze(-2)


def _adaptive_max_pool2d(input, output_size):
    _check_tensor(input, "adaptive_max_pool2d")
    sizes = _adaptive_output_size(input, output_size, 2)
    if input.dim() not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: {_size_str(input.shape)}")
    for d in range(1, input.dim()):
        if input.shape[d] <= 0:
            raise RuntimeError(
                "adaptive_max_pool2d(): Expected input to have non-zero size for non-batch dimensions, but input has "
                f"sizes {_size_str(input.shape)} with dimension {d} being empty"
            )
    if len(sizes) != 2:
        raise RuntimeError("adaptive_max_pool2d(): internal error: output_size.size() must be 2")
    return _prims.adaptive_max_pool2d(input, *sizes)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return _adaptive_max_pool2d(input, output_size)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    out = _adaptive_max_pool2d(input, output_size)
    return out if return_indices else out[0]


def _adaptive_max_pool1d(input, output_size):
    _check_tensor(input, "adaptive_max_pool1d")
    _check_dim_range(input, "adaptive_max_pool1d", 2, 4)
    size = _one_int(output_size, "adaptive_max_pool1d", "output_size")
    out, indices = _adaptive_max_pool2d(input.unsqueeze(-2), (1, size))
    return out.squeeze(-2), indices.squeeze(-2)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return _adaptive_max_pool1d(input, output_size)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    out = _adaptive_max_pool1d(input, output_size)
    return out if return_indices else out[0]


# ---- power-average pooling: PyTorch's formula, (sum over the window of x^p)^(1/p), as
# sign(s) * relu(|s|) * (kernel elements) with s the average of x^p, to the power 1/p.


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    kw, kh = _pair(_int_list(kernel_size))
    out = avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(kw * kh).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    out = avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(kernel_size).pow(1.0 / norm_type)


# ---- max_unpool: each value written at its index into a zero plane of the output size


def _unpool_output_size(input, kernel, stride, padding, output_size):
    """PyTorch's _unpool_output_size: the default size inverts the pool's, else output_size's last dims."""
    dims = len(kernel)
    default = [(input.shape[input.dim() - dims + d] - 1) * stride[d] + kernel[d] - 2 * padding[d] for d in range(dims)]
    if output_size is None:
        return default
    if len(output_size) == dims + 2:
        output_size = output_size[2:]
    if len(output_size) != dims:
        raise ValueError(
            f"output_size should be a sequence containing {dims} or {dims + 2} elements, but it has a length of "
            f"'{len(output_size)}'"
        )
    sizes = [operator.index(v) for v in output_size]
    for d in range(dims):
        low, high = default[d] - stride[d], default[d] + stride[d]
        if not low < sizes[d] < high:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {low} and {high})')
    return sizes


def _unpool_args(kernel_size, stride, padding, dims):
    def expanded(value):
        return tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims

    kernel = expanded(kernel_size)
    return kernel, expanded(stride) if stride is not None else kernel, expanded(padding)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    kernel, stride, padding = _unpool_args(kernel_size, stride, padding, 2)
    out_h, out_w = _unpool_output_size(input, kernel, stride, padding, output_size)
    _check_unpool(input, indices)
    return _prims.max_unpool2d(input, indices, out_h, out_w)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    kernel, stride, padding = _unpool_args(kernel_size, stride, padding, 1)
    (size,) = _unpool_output_size(input, kernel, stride, padding, output_size)
    _check_unpool(input.unsqueeze(-1), indices.unsqueeze(-1))
    return _prims.max_unpool2d(input.unsqueeze(-1), indices.unsqueeze(-1), size, 1).squeeze(-1)


def _check_unpool(input, indices):
    """PyTorch's max_unpooling2d_forward checks."""
    if indices.dtype != int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {SCALAR_TYPE_NAME[indices.dtype]}")
    if input.dim() not in (3, 4):
        raise RuntimeError(
            f"Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with {input.dim()} dimensions."
        )
    if input.shape != indices.shape:
        raise RuntimeError(
            f"Expected shape of indices to be same as that of the input tensor ({_size_str(input.shape)}) but got "
            f"indices tensor with shape: {_size_str(indices.shape)}"
        )
    empty = [d for d in range(1, input.dim()) if input.shape[d] <= 0]
    if empty:
        raise RuntimeError(
            "max_unpooling2d_forward_out_cpu(): Expected input to have non-zero size for non-batch dimensions, but got "
            f"{_size_str(input.shape)} with dimension {empty[0]} being empty."
        )


__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool1d",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d",
    "adaptive_max_pool2d_with_indices",
    "avg_pool1d",
    "avg_pool2d",
    "lp_pool1d",
    "lp_pool2d",
    "max_pool1d",
    "max_pool1d_with_indices",
    "max_pool2d",
    "max_pool2d_with_indices",
    "max_unpool1d",
    "max_unpool2d",
]
