"""Rounding and sign ops of one tensor (issue 13): floor, ceil, trunc, round (to decimals), frac, sgn
and nan_to_num, each forward with its backward, the twins of csrc/ops/rounding.cpp. As PyTorch:
integer tensors keep their dtype (floor, ceil, trunc and round copy them; bool raises), frac and
round(decimals=) take floats only."""

import math
import operator

from .._types import SCALAR_TYPE_NAME, bool as bool_, float16, bfloat16, float32, float64
from ._autograd import Function, no_grad
from ._elementwise import SignBackward0, unary, zeros_like
from ._inplace import _apply_inplace
from ._storage import cast_scalar
from ._tensor import new_tensor, read


def _whole(fn):
    """fn as a float, with the input's sign on a zero result (floor(-0.5) is -0.0, as C's); inf and
    NaN as they are."""
    return lambda v: v if not math.isfinite(v) else math.copysign(0.0, v) if fn(v) == 0 else float(fn(v))


_trunc, _rint = _whole(math.trunc), _whole(round)  # Python's round takes halves to even


def _require(x, kernel, accepted):
    if not accepted:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{SCALAR_TYPE_NAME[x._dtype]}'")


class _WholeNumber(Function):
    """fn(x) for floats, a copy for integers; piecewise constant, so the gradient is zero (but, as in
    PyTorch, the op is recorded)."""

    def forward(self, x):
        _require(x, self.kernel, x._dtype is not bool_)
        fn = self.fn if x._dtype.is_floating_point else (lambda v: v)
        return unary(fn, x, x._dtype)

    def backward(self, g):
        return zeros_like(g)


class FloorBackward0(_WholeNumber):
    fn, kernel = staticmethod(_whole(math.floor)), "floor_vml_cpu"


class CeilBackward0(_WholeNumber):
    fn, kernel = staticmethod(_whole(math.ceil)), "ceil_vml_cpu"


class TruncBackward0(_WholeNumber):
    fn, kernel = staticmethod(_trunc), "trunc_vml_cpu"


class RoundBackward0(_WholeNumber):
    fn, kernel = staticmethod(_rint), "round_vml_cpu"


class RoundBackward1(Function):
    """round(x, decimals=d), as PyTorch's kernel: nearbyint(x * 10^d) / 10^d, or for d < 0
    nearbyint(x / 10^-d) * 10^-d, each step rounded to x's computation type (float32 for the
    16-bit floats)."""

    def forward(self, x, decimals):
        _require(x, "round_cpu", x._dtype.is_floating_point)
        compute = float64 if x._dtype is float64 else float32
        # 10^|d| past the double range is inf, as C's pow gives it (Python's ** raises instead)
        p = cast_scalar(10.0 ** abs(decimals) if abs(decimals) <= 308 else math.inf, compute)

        def rounded(v):
            scaled = cast_scalar(v / p if decimals < 0 else v * p, compute)
            whole = _rint(scaled)
            return cast_scalar(whole * p if decimals < 0 else whole / p, compute)

        return unary(rounded, x, x._dtype)

    def backward(self, g):
        return zeros_like(g)


class FracBackward0(Function):
    """x - trunc(x): its gradient is the incoming one."""

    def forward(self, x):
        _require(x, "frac_cpu", x._dtype.is_floating_point)
        return unary(lambda v: v - _trunc(v), x, x._dtype)  # inf - inf is NaN

    def backward(self, g):
        return g


class SgnBackward0(Function):
    """The sign of a real tensor (0 for NaN), with a zero gradient."""

    def forward(self, x):
        with no_grad():
            return SignBackward0.run(x)

    def backward(self, g):
        return zeros_like(g)


_LARGEST_FINITE = {float16: 65504.0, bfloat16: 3.3895313892515355e38, float32: 3.4028234663852886e38}


class NanToNumBackward0(Function):
    """NaN, +inf and -inf replaced by the given values (by default 0, the dtype's largest and lowest
    finite values), converted to x's dtype; integers are copied. The gradient passes where x is finite."""

    def forward(self, x, nan, posinf, neginf):
        self.save(x)
        if not x._dtype.is_floating_point:
            return unary(lambda v: v, x, x._dtype)
        largest = _LARGEST_FINITE.get(x._dtype, 1.7976931348623157e308)
        nan = 0.0 if nan is None else nan
        posinf = largest if posinf is None else posinf
        neginf = -largest if neginf is None else neginf
        compute = float64 if x._dtype is float64 else float32
        nan, posinf, neginf = (cast_scalar(float(v), compute) for v in (nan, posinf, neginf))
        return unary(lambda v: nan if v != v else (posinf if v > 0 else neginf) if math.isinf(v) else v, x, x._dtype)

    def backward(self, g):
        x = self.unpack(0)
        finite = new_tensor([math.isfinite(v) for v in read(x)], x._shape, bool_)
        return g * finite


# The ops by name (the in-place forms of floor ... sgn are made in reference/_prims.py).
UNARY = {
    "floor": FloorBackward0,
    "ceil": CeilBackward0,
    "trunc": TruncBackward0,
    "frac": FracBackward0,
    "sgn": SgnBackward0,
}


def _round_node(decimals):
    """round without decimals is RoundBackward0, with them (even 0) RoundBackward1, as PyTorch."""
    return (RoundBackward0, {}) if decimals is None else (RoundBackward1, {"decimals": decimals})


def round_to(x, decimals):
    if decimals is not None:
        decimals = operator.index(decimals)  # a TypeError for a float, as PyTorch's
    node, params = _round_node(decimals)
    return node.run(x, **params)


def round_to_(x, decimals):
    node, params = _round_node(decimals)
    return _apply_inplace(node, x, (), False, **params)


def _check_replacements(**values):
    for name, value in values.items():
        if value is not None and not isinstance(value, (int, float)):
            raise TypeError(f"nan_to_num(): argument '{name}' must be float, not {type(value).__name__}")


def nan_to_num(x, nan, posinf, neginf):
    _check_replacements(nan=nan, posinf=posinf, neginf=neginf)
    return NanToNumBackward0.run(x, nan=nan, posinf=posinf, neginf=neginf)


def nan_to_num_(x, nan, posinf, neginf):
    _check_replacements(nan=nan, posinf=posinf, neginf=neginf)
    return _apply_inplace(NanToNumBackward0, x, (), True, nan=nan, posinf=posinf, neginf=neginf)
