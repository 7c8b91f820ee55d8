"""The primitives that fastgrad's Python layer (_methods, _factories, _grad_mode) is written over,
for the C++ backend: the core's functions (fastgrad._C, bound in csrc/python/tensor_bind.cpp) plus
the few the core leaves to Python, done here over numpy. fastgrad.reference._prims provides the
same names with the same semantics in pure Python.
"""

import numpy as np

from ._C import *  # noqa: F401,F403  add, sum, reshape, full, from_numpy, ...: the core's fixed-signature ops
from ._C import (  # noqa: F401
    Tensor,
    _register_types,
    _set_grad_enabled,
    _set_inference_mode,
    from_numpy,
    is_grad_enabled,
    is_inference_mode_enabled,
    to_numpy,
)
from ._meta import broadcast_shapes
from ._types import ALL_DTYPES, Size, bool as bool_, int64, float32, float64

_register_types(ALL_DTYPES, Size)  # the dtype and Size objects the core hands out

_NUMPY_TYPES = {bool_: np.bool_, int64: np.int64, float32: np.float32, float64: np.float64}


def strides(t):
    return t._strides()


def from_values(values, shape, dtype, kind):
    """A new tensor of `shape` and `dtype` holding Python numbers (row-major) of `kind`, the widest
    dtype among them. numpy converts them here (`kind` is for the reference, which converts by hand)."""
    return from_numpy(np.array(values, dtype=_NUMPY_TYPES[dtype]).reshape(shape), share_memory=False)


def isclose(input, other, rtol, atol, equal_nan):
    """numpy.isclose of the two tensors' values, as a bool tensor (shapes that do not broadcast: PyTorch's error)."""
    broadcast_shapes(input.shape, other.shape)
    close = np.isclose(to_numpy(input.detach()), to_numpy(other.detach()), rtol=rtol, atol=atol, equal_nan=equal_nan)
    return from_numpy(np.asarray(close), share_memory=False)
