"""Creating tensors: from Python data and numpy arrays, filled, ranges, and random."""
import builtins
import numbers
import warnings

import numpy as np

from . import _C
from ._tensor import Tensor, _sizes
from ._types import device as _device, float32, float64, int64, bool as bool_

_NUMPY_TYPES = {bool_: np.bool_, int64: np.int64, float32: np.float32, float64: np.float64}
_rng = np.random.default_rng()


def _finish(t, requires_grad, device=None):
    if device is not None:
        _device(device)
    if requires_grad:
        if not t.dtype.is_floating_point:
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        _C.set_requires_grad(t, True)
    return t


def _dtype_of_array(array):
    """The fastgrad dtype that holds a numpy array's values: integers widen to int64, floats other
    than float64 become float32."""
    kind = array.dtype.kind
    if kind == "b":
        return bool_
    if kind in "iu":
        return int64
    if kind == "f":
        return float64 if array.dtype == np.float64 else float32
    raise TypeError(f"can't convert np.ndarray of type numpy.{array.dtype}. "
                    "The only supported types are: float64, float32, int64, and bool.")


def _scan(data, depth=0, shape=None, kinds=None):
    """Checks nested Python sequences are rectangular and numeric, as PyTorch does, and returns
    (shape, kinds) where kinds is the set of 'bool'/'int'/'float' seen."""
    shape = [] if shape is None else shape
    kinds = set() if kinds is None else kinds
    if isinstance(data, Tensor):
        if data.numel() != 1 and depth > 0:
            raise ValueError("only one element tensors can be converted to Python scalars")
        kinds.add("float" if data.dtype.is_floating_point else "bool" if data.dtype is bool_ else "int")
        return shape, kinds
    if isinstance(data, (list, tuple)):
        if len(shape) == depth:
            shape.append(len(data))
        elif shape[depth] != len(data):
            raise ValueError(f"expected sequence of length {shape[depth]} at dim {depth} (got {len(data)})")
        for item in data:
            _scan(item, depth + 1, shape, kinds)
        return shape, kinds
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
    return shape, kinds


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.clone().detach() or "
                      "sourceTensor.clone().detach().requires_grad_(True), rather than torch.tensor(sourceTensor).",
                      UserWarning, stacklevel=2)
        t = _C.clone(data.detach())
        t = t if dtype is None else _C.to_dtype(t, dtype)
    elif isinstance(data, np.ndarray):
        t = _C.from_numpy(np.asarray(data, dtype=_NUMPY_TYPES[dtype or _dtype_of_array(data)]), share_memory=False)
    else:
        _, kinds = _scan(data)
        inferred = float32 if "float" in kinds else int64 if "int" in kinds else bool_ if kinds else float32
        target = dtype or inferred
        values = np.array(data if not kinds or "float" not in kinds else data, dtype=_NUMPY_TYPES[target])
        t = _C.from_numpy(values, share_memory=False)
    return _finish(t, requires_grad, device)


as_tensor = tensor


def from_numpy(array):
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    return _C.from_numpy(array, share_memory=True)


def _legacy_new(cls, *args, device=None):
    """`fastgrad.Tensor([1, 2])` makes float32 data; `fastgrad.Tensor(2, 3)` an uninitialized 2x3."""
    if len(args) == 1 and not isinstance(args[0], numbers.Integral):
        return tensor(args[0], dtype=float32)
    return _C.empty(_sizes(args), float32)


def _filled(size, value, dtype, requires_grad, device, out=None):
    dtype = dtype or (float32 if isinstance(value, float) or value is None else int64 if isinstance(
        value, numbers.Integral) and not isinstance(value, bool) else bool_ if isinstance(value, bool) else float32)
    t = _C.empty(_sizes(size), dtype) if value is None else _C.full(_sizes(size), value, dtype)
    t = _finish(t, requires_grad, device)
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


def _like(input, dtype):
    return list(input.shape), dtype or input.dtype


def zeros_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dtype = _like(input, dtype)
    return _filled((shape,), 0, dtype, requires_grad, device)


def ones_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dtype = _like(input, dtype)
    return _filled((shape,), 1, dtype, requires_grad, device)


def empty_like(input, *, dtype=None, device=None, requires_grad=False):
    return zeros_like(input, dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    shape, dtype = _like(input, dtype)
    return _filled((shape,), fill_value, dtype, requires_grad, device)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False, out=None):
    if end is None:
        start, end = 0, start
    values = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if dtype is None:
        dtype = float32 if any(isinstance(v, float) for v in values) else int64
    t = _finish(_C.arange(*map(float, values), dtype), requires_grad, device)
    if out is not None:
        out.data = t
        return out
    return t


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    return _finish(_C.linspace(float(start), float(end), int(steps), dtype or float32), requires_grad, device)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    return _finish(_C.eye(n, n if m is None else m, dtype or float32), requires_grad, device)


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
    return _finish(_C.from_numpy(np.asarray(values, dtype=_NUMPY_TYPES[dtype]), share_memory=False), requires_grad,
                   device)


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None):
    return _random(_rng.random(_sizes(size)), dtype, requires_grad, device)


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None):
    return _random(_rng.standard_normal(_sizes(size)), dtype, requires_grad, device)


def rand_like(input, *, dtype=None, device=None, requires_grad=False):
    return rand(list(input.shape), dtype=dtype or input.dtype, requires_grad=requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad=False):
    return randn(list(input.shape), dtype=dtype or input.dtype, requires_grad=requires_grad)


def randint(low=0, high=None, size=None, *, dtype=None, device=None, requires_grad=False, generator=None):
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    values = _rng.integers(low, high, size=_sizes((size,)))
    return _finish(_C.from_numpy(np.asarray(values, dtype=_NUMPY_TYPES[dtype or int64]), share_memory=False),
                   requires_grad, device)


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
    return _random(values, dtype or (like.dtype if like is not None else None), requires_grad, device)
