"""Creating tensors: from Python data and numpy arrays, filled, ranges, and random.

Random values come from a numpy Generator, as in fastgrad (generating numbers is not tensor
math): the same seed gives the reference and fastgrad the same values.
"""
import builtins
import math
import numbers
import warnings

import numpy as np

from .._types import device as _device, float32, float64, int64, bool as bool_
from ._elementwise import clone, to_dtype
from ._methods import sizes as _sizes
from ._storage import Storage, TYPECODE, cast
from ._tensor import Tensor, full as _full, new_tensor

_NUMPY_TYPES = {bool_: np.bool_, int64: np.int64, float32: np.float32, float64: np.float64}
_rng = np.random.default_rng()


def _finish(t, requires_grad, device=None):
    if device is not None:
        _device(device)
    if requires_grad:
        if not t._dtype.is_floating_point:
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        t._requires_grad_leaf = True
    return t


# ---- from data

def _dtype_of_array(array):
    """The dtype that holds a numpy array's values: integers widen to int64, floats other than
    float64 become float32."""
    kind = array.dtype.kind
    if kind == "b":
        return bool_
    if kind in "iu":
        return int64
    if kind == "f":
        return float64 if array.dtype == np.float64 else float32
    raise TypeError(f"can't convert np.ndarray of type numpy.{array.dtype}. "
                    "The only supported types are: float64, float32, int64, and bool.")


def _from_array(array, dtype):
    """A copy of a numpy array's values as a tensor of `dtype` (numpy converts them)."""
    values = np.asarray(array, dtype=_NUMPY_TYPES[dtype])
    return new_tensor(values.ravel().tolist(), values.shape, dtype)


def _scan(data, depth, shape, kinds, values):
    """Checks nested Python sequences are rectangular and numeric, as PyTorch does, collecting
    their shape, the kinds of numbers seen ('bool', 'int', 'float') and the numbers in order."""
    if isinstance(data, Tensor):
        if data.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        kinds.add("float" if data._dtype.is_floating_point else "bool" if data._dtype is bool_ else "int")
        values.append(data.item())
        return
    if isinstance(data, (list, tuple)):
        if len(shape) == depth:
            shape.append(len(data))
        elif shape[depth] != len(data):
            raise ValueError(f"expected sequence of length {shape[depth]} at dim {depth} (got {len(data)})")
        for item in data:
            _scan(item, depth + 1, shape, kinds, values)
        return
    if len(shape) > depth:
        raise ValueError(f"expected sequence of length {shape[depth]} at dim {depth} (got 0)")
    if isinstance(data, (builtins.bool, np.bool_)):
        kinds.add("bool")
    elif isinstance(data, (numbers.Integral, np.integer)):
        kinds.add("int")
    elif isinstance(data, numbers.Real):
        kinds.add("float")
    else:
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    values.append(data)


def _python_values(values, kinds, dtype):
    """Numbers of mixed kinds converted to `dtype` (floats are truncated toward zero for int64)."""
    if dtype.is_floating_point:
        return [builtins.float(v) for v in values]
    if dtype is bool_:
        return [builtins.bool(v) for v in values]
    return cast([builtins.float(v) for v in values], float64, int64) if "float" in kinds else [int(v) for v in values]


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.clone().detach() or "
                      "sourceTensor.clone().detach().requires_grad_(True), rather than torch.tensor(sourceTensor).",
                      UserWarning, stacklevel=2)
        t = clone(data.detach())
        t = t if dtype is None else to_dtype(t, dtype)
    elif isinstance(data, np.ndarray):
        t = _from_array(data, dtype or _dtype_of_array(data))
    else:
        shape, kinds, values = [], set(), []
        _scan(data, 0, shape, kinds, values)
        inferred = float32 if "float" in kinds else int64 if "int" in kinds else bool_ if kinds else float32
        target = dtype or inferred
        t = new_tensor(_python_values(values, kinds, target), shape, target)
    return _finish(t, requires_grad, device)


as_tensor = tensor


def exact_dtype_of_array(array):
    """The dtype whose elements are laid out as the numpy array's, for sharing its memory."""
    dtype = {("f", 4): float32, ("f", 8): float64, ("i", 8): int64, ("b", 1): bool_}.get(
        (array.dtype.kind, array.dtype.itemsize))
    if dtype is None:
        raise TypeError(f"can't convert np.ndarray of type numpy.{array.dtype}. "
                        "The only supported types are: float64, float32, int64, and bool.")
    return dtype


def from_numpy(array):
    """A tensor over the numpy array's own memory: writes on either side are seen by the other."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    dtype, itemsize = exact_dtype_of_array(array), array.dtype.itemsize
    if not array.dtype.isnative:  # as PyTorch (fastgrad's core reads such bytes as native ones)
        raise ValueError("given numpy array has byte order different from the native byte order. Conversion "
                         "between byte orders is currently not supported.")
    if not array.flags.writeable:
        raise ValueError("array is not writeable")
    if any(s < 0 for s in array.strides):
        raise ValueError("At least one stride in the given numpy array is negative, and tensors with negative strides "
                         "are not currently supported. (You can probably work around this by making a copy of your "
                         "array  with array.copy().) ")
    if any(s % itemsize for s in array.strides):
        raise ValueError("given numpy array strides not a multiple of the element byte size. Copy the numpy array to "
                         "reallocate the memory.")
    strides = tuple(s // itemsize for s in array.strides)
    if array.size == 0:
        return new_tensor([], array.shape, dtype)
    # One flat run of elements from the first to the last one the array shows, viewed in place.
    extent = 1 + builtins.sum((n - 1) * s for n, s in zip(array.shape, strides))
    span = np.lib.stride_tricks.as_strided(array, shape=(extent,), strides=(itemsize,))
    memory = memoryview(span).cast("B").cast(TYPECODE[dtype])
    return Tensor._make(Storage(memory), tuple(array.shape), strides, 0, dtype)


def _legacy_new(cls, *args, device=None):
    """`Tensor([1, 2])` makes float32 data; `Tensor(2, 3)` an uninitialized 2x3."""
    if len(args) == 1 and not isinstance(args[0], numbers.Integral):
        return tensor(args[0], dtype=float32)
    return _full(_sizes(args), 0, float32)


# ---- filled

def _filled(size, value, dtype, requires_grad, device, out=None):
    dtype = dtype or (float32 if isinstance(value, builtins.float) or value is None else int64 if isinstance(
        value, numbers.Integral) and not isinstance(value, builtins.bool) else bool_ if isinstance(
        value, builtins.bool) else float32)
    t = _finish(_full(_sizes(size), value, dtype), requires_grad, device)
    if out is not None:
        out.data = t
        return out
    return t


def zeros(*size, dtype=None, device=None, requires_grad=False, out=None):
    return _filled(size, 0, dtype or float32, requires_grad, device, out)


def ones(*size, dtype=None, device=None, requires_grad=False, out=None):
    return _filled(size, 1, dtype or float32, requires_grad, device, out)


def empty(*size, dtype=None, device=None, requires_grad=False, out=None):
    return _filled(size, 0, dtype or float32, requires_grad, device, out)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False, out=None):
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _filled((size,), fill_value, dtype, requires_grad, device, out)


def zeros_like(input, *, dtype=None, device=None, requires_grad=False):
    return _filled((input._shape,), 0, dtype or input._dtype, requires_grad, device)


def ones_like(input, *, dtype=None, device=None, requires_grad=False):
    return _filled((input._shape,), 1, dtype or input._dtype, requires_grad, device)


def empty_like(input, *, dtype=None, device=None, requires_grad=False):
    return zeros_like(input, dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    return _filled((input._shape,), fill_value, dtype or input._dtype, requires_grad, device)


# ---- ranges

def _arange(start, end, step, dtype):
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not math.isfinite(start) or not math.isfinite(end):
        raise RuntimeError(f"unsupported range: {start:g} -> {end:g}")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    n = math.ceil((end - start) / step)
    return new_tensor(cast([start + i * step for i in range(n)], float64, dtype), (n,), dtype)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False, out=None):
    if end is None:
        start, end = 0, start
    values = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if dtype is None:
        dtype = float32 if any(isinstance(v, builtins.float) for v in values) else int64
    t = _finish(_arange(*map(builtins.float, values), dtype), requires_grad, device)
    if out is not None:
        out.data = t
        return out
    return t


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    start, end, steps, dtype = builtins.float(start), builtins.float(end), int(steps), dtype or float32
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    half = 1 if steps == 1 else steps // 2
    # The second half is filled from the end, as PyTorch does, so that the last value is exactly `end`.
    values = [start + step * i if i < half else end - step * (steps - 1 - i) for i in range(steps)]
    return _finish(new_tensor(cast(values, float64, dtype), (steps,), dtype), requires_grad, device)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    m, dtype = n if m is None else m, dtype or float32
    if n < 0 or m < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n if n < 0 else m}")
    values = [builtins.float(i == j) for i in range(n) for j in range(m)]
    return _finish(new_tensor(cast(values, float64, dtype), (n, m), dtype), requires_grad, device)


# ---- random numbers (numpy's generator; manual_seed makes runs reproducible)

def manual_seed(seed):
    global _rng
    _rng = np.random.default_rng(int(seed))
    return _rng


def seed():
    manual_seed(np.random.SeedSequence().entropy % (2 ** 63))


def _random(values, dtype, requires_grad, device):
    dtype = dtype or float32
    if not dtype.is_floating_point:
        raise RuntimeError(f"\"check_uniform_bounds\" not implemented for '{dtype}'")
    return _finish(_from_array(values, dtype), requires_grad, device)


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None):
    return _random(_rng.random(_sizes(size)), dtype, requires_grad, device)


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None):
    return _random(_rng.standard_normal(_sizes(size)), dtype, requires_grad, device)


def rand_like(input, *, dtype=None, device=None, requires_grad=False):
    return rand(list(input._shape), dtype=dtype or input._dtype, requires_grad=requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad=False):
    return randn(list(input._shape), dtype=dtype or input._dtype, requires_grad=requires_grad)


def randint(low=0, high=None, size=None, *, dtype=None, device=None, requires_grad=False, generator=None):
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    values = _rng.integers(low, high, size=_sizes((size,)))
    return _finish(_from_array(values, dtype or int64), requires_grad, device)


def normal(mean=0.0, std=1.0, size=None, *, dtype=None, device=None, requires_grad=False, generator=None):
    means = mean.detach().numpy() if isinstance(mean, Tensor) else mean
    stds = std.detach().numpy() if isinstance(std, Tensor) else std
    if size is None and not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        raise TypeError("normal() with float mean and std needs a size")
    if np.any(np.asarray(stds) < 0):
        raise RuntimeError(f"normal expects std >= 0.0, but found std {np.min(stds)}")
    shape = None if size is None else _sizes((size,))
    values = _rng.normal(means, stds, size=shape)
    like = mean if isinstance(mean, Tensor) else std if isinstance(std, Tensor) else None
    return _random(values, dtype or (like._dtype if like is not None else None), requires_grad, device)

