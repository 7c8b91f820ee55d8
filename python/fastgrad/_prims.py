"""The primitives that fastgrad's Python layer (_methods, _factories, _grad_mode) is written over,
for the C++ backend: the core's functions (fastgrad._C, bound in csrc/python/tensor_bind.cpp) plus
the few the core leaves to Python, done here over numpy. fastgrad.reference._prims provides the
same names with the same semantics in pure Python.
"""

import numpy as np

from ._C import *  # noqa: F401,F403  add, sum, reshape, full, from_numpy, ...: the core's fixed-signature ops
from ._C import (  # noqa: F401
    Tensor,
    _CPUGenerator,
    _capture_abandon,
    _capture_abort,
    _capture_begin,
    _capture_end,
    _capture_host_call,
    _capturing,
    _call_key,
    _key_words,
    _module_call,
    _register_layer_primitive,
    _register_module_getattr,
    _register_sizes_methods,
    _register_types,
    _run_fused_update,
    _set_grad_enabled,
    _set_inference_mode,
    from_numpy,
    from_python_data,
    is_grad_enabled,
    is_inference_mode_enabled,
    to_dtype,
    to_numpy,
)
from ._meta import broadcast_shapes
from ._types import ALL_DTYPES, NUMPY_TYPES, Size, bfloat16, compute_type, float32

_register_types(ALL_DTYPES, Size)  # the dtype and Size objects the core hands out


def strides(t):
    return t._strides()


def from_values(values, shape, dtype, kind):
    """A new tensor of `shape` and `dtype` holding Python numbers (row-major) of `kind`, the widest
    dtype among them. numpy converts them here (`kind` is for the reference, which converts by hand)."""
    if compute_type(dtype) is dtype:
        return from_python_data(np.array(values, dtype=NUMPY_TYPES[dtype]).reshape(shape))
    return to_dtype(from_values(values, shape, compute_type(dtype), kind), dtype)  # rounded/wrapped as the core casts


def isclose(input, other, rtol, atol, equal_nan):
    """numpy.isclose of the two tensors' values, as a bool tensor (shapes that do not broadcast: PyTorch's error)."""
    broadcast_shapes(input.shape, other.shape)
    input, other = (to_dtype(t.detach(), float32) if t.dtype is bfloat16 else t.detach() for t in (input, other))
    close = np.isclose(to_numpy(input), to_numpy(other), rtol=rtol, atol=atol, equal_nan=equal_nan)  # no bfloat16
    return from_numpy(np.asarray(close), share_memory=False)
