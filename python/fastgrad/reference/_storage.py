"""Element storage and the conversions between element types.

A Storage is a flat sequence of numbers plus the version counter that autograd uses to notice
in-place changes: usually an `array.array`, so that a float32 tensor rounds every value written to
it to float32 exactly like the C++ core; for `from_numpy` a memoryview of the numpy buffer, so
that both sides see each other's writes. Both index, slice and assign the same way.
"""

import threading
from array import array
from fractions import Fraction

from .._types import LEGACY_TYPE_NAME, SCALAR_TYPE_NAME, bool as bool_, int64, float32, float64  # noqa: F401 (re-exported)

TYPECODE = {bool_: "B", int64: "q", float32: "f", float64: "d"}
# The names PyTorch's dtype errors use ("result type Float can't be cast to ... Long").
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# float -> int64 conversion is defined for this range; outside it x86 yields INT64_MIN, and so do we.
_INT64_LIMIT = 9.2233720368547758e18


# torch.inference_mode, per thread: storages made while it is on are inference tensors' (see
# Storage.inference). Autograd records nothing meanwhile (the Python switch turns grad mode off).
_inference_mode = threading.local()


def is_inference_mode_enabled():
    return getattr(_inference_mode, "enabled", False)


def _set_inference_mode(enabled):
    _inference_mode.enabled = enabled


class Storage:
    # inference: made in inference mode; PyTorch's inference tensors, and all their views, are never
    # saved for backward and are written in place only in inference mode (_inplace.check_inplace).
    __slots__ = ("data", "version", "inference")

    def __init__(self, data, inference=None):
        self.data = data
        self.version = 0  # bumped by every in-place write through any tensor sharing this storage
        self.inference = is_inference_mode_enabled() if inference is None else inference


def to_int(value):
    """C++ static_cast<int64_t>(double): truncation toward zero."""
    return int(value) if -_INT64_LIMIT <= value < _INT64_LIMIT else INT64_MIN


def _int_to_float32(value):
    """An int64 rounded once to float32, as C++ converts it: through a double, an int with more than
    53 significant bits would be rounded twice (2**60 + 2**36 + 1 would end at 2**60, not 2**60 + 2**37)."""
    excess = abs(value).bit_length() - 24  # bits that float32's 24-bit significand cannot hold
    if excess <= 53 - 24:
        return value  # exact as a double: array("f") rounds it once
    return round(Fraction(value, 1 << excess)) << excess  # to nearest, ties to even; exact as a double


def _wrap_int64(value):
    # int64 arithmetic wraps around in the core; Python ints do not.
    return (value - INT64_MIN) % 2**64 + INT64_MIN


def check_dtype(dtype):
    """As the core's dtype check at its boundary."""
    if dtype is not bool_ and dtype not in TYPECODE:
        raise TypeError(f"argument 'dtype' must be fastgrad.dtype, not {type(dtype).__name__}")


def to_array(values, dtype):
    """A new array of `dtype` holding `values` (already of that dtype's kind, see cast)."""
    check_dtype(dtype)
    if dtype is bool_:
        return array("B", map(bool, values))
    try:
        return array(TYPECODE[dtype], values)
    except OverflowError:
        return array("q", [_wrap_int64(v) for v in values])


def cast(values, source, target):
    """Values of dtype `source` as the core's static_cast to `target` gives them."""
    if source is target:
        return values
    if target is float32:
        if source is int64:
            values = map(_int_to_float32, values)
        return array("f", values).tolist()  # rounds to float32
    if target is float64:
        return array("d", values).tolist()
    if target is bool_:
        return [v != 0 for v in values]  # NaN is true, as in C++
    if source.is_floating_point:
        return [to_int(v) for v in values]
    return list(values)  # bool -> int64: already 0 and 1


def cast_scalar(value, dtype):
    """A Python number converted to `dtype` the way the core converts its Scalar: a float as cast
    converts a double (truncated for int64), a bool or an int exactly (rounded once to a float dtype)."""
    if isinstance(value, float):
        return cast([value], float64, dtype)[0]
    return cast([int(value)], int64, dtype)[0]
