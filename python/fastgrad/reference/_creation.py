"""The creation primitives, as the core's (csrc/ops/creation.cpp and the numpy bridge): from_numpy
(over the array's memory, or a copy), from_values, full/empty, arange, linspace, eye. The public
functions with their PyTorch signatures (tensor, zeros, rand, ...) are fastgrad's _factories, shared.
"""

import builtins
import ctypes
import math

import numpy as np

from .._types import DTYPE_OF_NUMPY, float16, float32, float64, int64, bool as bool_
from ._random import _f32, _fma, _fmaf
from ._storage import SIXTEEN_BIT_ROUNDING, Storage, TYPECODE, cast
from ._tensor import Tensor, full, new_tensor, to_numpy


def empty(shape, dtype):
    return full(shape, 0, dtype)


# ---- from data


def from_values(values, shape, dtype, kind):
    """A new tensor of `shape` and `dtype` holding Python numbers (row-major) of `kind`, the widest
    dtype among them. Floats are truncated toward zero for int64, as the core's cast does."""
    if dtype.is_floating_point:
        values = [builtins.float(v) for v in values]
    elif dtype is bool_:
        values = [builtins.bool(v) for v in values]
    elif kind.is_floating_point:
        values = cast([builtins.float(v) for v in values], float64, int64)
    else:
        values = [int(v) for v in values]
    return new_tensor(values, shape, dtype)


def exact_dtype_of_array(array):
    """The dtype whose elements are laid out as the numpy array's, for sharing its memory."""
    dtype = DTYPE_OF_NUMPY.get(array.dtype.newbyteorder("="))
    if dtype is None:
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{array.dtype}. "
            "The only supported types are: float64, float32, float16, complex64, complex128, int64, int32, int16, "
            "int8, uint64, uint32, uint16, uint8, and bool."
        )
    return dtype


def from_numpy(array, share_memory):
    """A tensor over the numpy array's own memory (writes on either side are seen by the other), or
    with share_memory=False a copy of its values."""
    dtype, itemsize = exact_dtype_of_array(array), array.dtype.itemsize
    if not share_memory or dtype is float16:  # float16 is stored as float32 values (_storage): copied
        return new_tensor(array.ravel().tolist(), array.shape, dtype)
    if not array.dtype.isnative:  # as PyTorch (fastgrad's core reads such bytes as native ones)
        raise ValueError(
            "given numpy array has byte order different from the native byte order. Conversion "
            "between byte orders is currently not supported."
        )
    if any(s < 0 for s in array.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative, and tensors with negative strides "
            "are not currently supported. (You can probably work around this by making a copy of your "
            "array  with array.copy().) "
        )
    if any(s % itemsize for s in array.strides):
        raise ValueError(
            "given numpy array strides not a multiple of the element byte size. Copy the numpy array to "
            "reallocate the memory."
        )
    if not array.flags.writeable:  # checked after the strides, as by the core
        raise ValueError("array is not writeable")
    strides = tuple(s // itemsize for s in array.strides)
    if array.size == 0:
        return new_tensor([], array.shape, dtype)
    # One flat run of elements from the first to the last one the array shows, viewed in place.
    extent = 1 + builtins.sum((n - 1) * s for n, s in zip(array.shape, strides))
    span = np.lib.stride_tricks.as_strided(array, shape=(extent,), strides=(itemsize,))
    memory = memoryview(span).cast("B").cast(TYPECODE[dtype])
    return Tensor._make(Storage(memory), tuple(array.shape), strides, 0, dtype)


# ---- ranges


def arange(start, end, step, dtype):
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not math.isfinite(start) or not math.isfinite(end):
        raise RuntimeError(f"unsupported range: {start:g} -> {end:g}")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    n = math.ceil((end - start) / step)
    if not dtype.is_floating_point:
        return new_tensor(cast([start + i * step for i in range(n)], float64, dtype), (n,), dtype)
    return new_tensor(_floating_arange(n, start, step, dtype), (n,), dtype)


def _aten_chunks(n):
    """The chunks ATen's parallel_for hands its threads (the core's for_each_aten_chunk), for this
    backend's thread count."""
    from ._prims import get_num_threads  # _prims imports this module

    threads = get_num_threads()
    chunks = min(threads, -(-n // 32768)) if n > 32768 and threads > 1 else 1
    size = max(-(-n // chunks), 1)
    return [(begin, min(n, begin + size)) for begin in range(0, n, size)]


def _floating_arange(n, start, step, dtype):
    """ATen's arange kernel as the core's fill_arange runs it: start + step * i fused in the
    accumulate type (double; float for the 16-bit floats), and in each chunk runs of two 32-byte
    vectors whose lanes are the vector's first value, rounded, + j * step (fused)."""
    if dtype is float64 or dtype is float32:
        fused, rounded = _fma, (_f32 if dtype is float32 else float)
    else:
        start, step = _f32(start), _f32(step)
        fused, rounded = _fmaf, SIXTEEN_BIT_ROUNDING[dtype]
    lanes = 32 // (8 if dtype is float64 else 4 if dtype is float32 else 2)
    values = [0.0] * n
    for begin, end in _aten_chunks(n):
        i = begin
        while i + 2 * lanes <= end:
            for vector in (i, i + lanes):
                first = rounded(fused(step, float(vector), start))
                for j in range(lanes):
                    values[vector + j] = rounded(fused(float(j), step, first))
            i += 2 * lanes
        for k in range(i, end):
            values[k] = rounded(fused(step, float(k), start))
    return values


def linspace(start, end, steps, dtype):
    """ATen's linspace kernel (the core's fill_linspace): a step in the dtype, the first half fused
    start + step * i, the second end - step * (steps - 1 - i); each operation rounded to 16 bits for
    the 16-bit floats; integers from a double step, truncated."""
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    if dtype is bool_:
        raise NotImplementedError("\"linspace_cpu\" not implemented for 'Bool'")
    if steps == 1:
        return new_tensor(cast([start], float64, dtype), (1,), dtype)
    halfway = steps // 2
    if dtype is float64:
        step = (end - start) / (steps - 1)
        values = [_fma(step, i, start) if i < halfway else _fma(-step, steps - 1 - i, end) for i in range(steps)]
    elif dtype is float32:
        first, last = _f32(start), _f32(end)
        step = _f32(_f32(last - first) / _f32(steps - 1))
        values = [
            _fmaf(step, _f32(i), first) if i < halfway else _fmaf(-step, _f32(steps - 1 - i), last)
            for i in range(steps)
        ]
    elif dtype.is_floating_point:

        def r(x):
            return SIXTEEN_BIT_ROUNDING[dtype](_f32(x))

        first, last = r(start), r(end)
        step = r(r(last - first) / r(steps - 1))
        values = [first + r(step * r(i)) if i < halfway else last - r(step * r(steps - 1 - i)) for i in range(steps)]
        values = [r(v) for v in values]
    else:
        first, last = (builtins.float(v) for v in cast([start, end], float64, int64))
        step = (last - first) / (steps - 1)
        values = [_fma(step, i, first) if i < halfway else _fma(-step, steps - 1 - i, last) for i in range(steps)]
        return new_tensor(cast(values, float64, dtype), (steps,), dtype)
    return new_tensor(values, (steps,), dtype)


def eye(n, m, dtype):
    if n < 0 or m < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n if n < 0 else m}")
    values = [builtins.float(i == j) for i in range(n) for j in range(m)]
    return new_tensor(cast(values, float64, dtype), (n, m), dtype)


# ---- DLPack, through numpy's (the reference has no C structs of its own)


def to_dlpack(t, versioned, copied):
    """A DLPack capsule over t's memory as numpy exports it (to_numpy shares it but for float16)."""
    return to_numpy(t).__dlpack__(max_version=(1, 0) if versioned else None, copy=True if copied else None)


_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.argtypes = (ctypes.py_object, ctypes.c_char_p)


class _Capsule:
    """A capsule behind the protocol numpy.from_dlpack takes (an object with __dlpack__)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def from_dlpack(capsule):
    """A tensor over a DLPack capsule's memory, read by numpy; read-only memory is copied, as by the core."""
    if not builtins.any(_capsule_is_valid(capsule, name) for name in (b"dltensor_versioned", b"dltensor")):
        raise RuntimeError(
            "from_dlpack received an invalid capsule. Note that DLTensor capsules can be consumed only once, so you "
            "might have already constructed a tensor from it once."
        )
    array = np.from_dlpack(_Capsule(capsule))
    if array.dtype not in DTYPE_OF_NUMPY:  # the core's error type for it
        raise RuntimeError(f"Unsupported dtype in DLTensor: {array.dtype}")
    return from_numpy(array if array.flags.writeable else array.copy(), share_memory=True)
