"""Elementwise ops with broadcasting and PyTorch's type promotion, and dtype conversions.

Each op is one Function: `forward` computes the values, `backward` the gradients of its inputs.
The second operand of a binary op is a tensor or a Python number (bool, int or float).
"""

import builtins
import itertools
import math
import operator
from fractions import Fraction

from .._types import (
    SCALAR_TYPE_NAME,
    bool as bool_,
    compute_type,
    get_default_dtype,
    int64,
    float32,
    float64,
    promote_types,
)
from ._autograd import Function, gradient_edge
from ._storage import cast, cast_scalar
from ._tensor import Tensor, broadcast_shapes, full, new_tensor, number_or_none, read

# ---- type promotion, as PyTorch: tensors with dims decide first; 0-d tensors, then Python
# numbers, may only raise the category (bool < integral < floating), never the width.


def scalar_dtype(number):
    return bool_ if isinstance(number, bool) else int64 if isinstance(number, int) else get_default_dtype()


def _promote(a, b):
    return b if a is None else promote_types(a, b)


def _combine(higher, lower):
    if higher is None:
        return lower
    if lower is None or higher.is_floating_point:
        return higher
    if higher is bool_ or lower.is_floating_point:
        return _promote(higher, lower)
    return higher


def result_type(*operands):
    dimmed = zero_dim = wrapped = None
    for x in operands:
        if not isinstance(x, Tensor):
            wrapped = _promote(wrapped, scalar_dtype(x))
        elif x._shape:
            dimmed = _promote(dimmed, x._dtype)
        else:
            zero_dim = _promote(zero_dim, x._dtype)
    return _combine(dimmed, _combine(zero_dim, wrapped))


def float_type(dtype):
    """Float functions of integer tensors compute in the default dtype, as PyTorch's."""
    return dtype if dtype.is_floating_point else get_default_dtype()


# ---- loops


def elementwise(fn, a, b, dtype, out_dtype=None):
    """fn(a, b) over the broadcast shape, computed in `dtype` and stored as `out_dtype` (default dtype)."""
    if isinstance(b, Tensor):
        shape = broadcast_shapes(a._shape, b._shape)
        others = cast(read(b, shape), b._dtype, dtype)
    else:
        shape = a._shape
        # A number is converted to `dtype` (int8 50 // 1000 is 50 // -24), except in the arithmetic of
        # the 16-bit floats, which keeps it in float32 (float16 1 * 1.0001), as in PyTorch.
        kept = dtype.is_floating_point and out_dtype in (None, dtype)
        others = itertools.repeat(cast_scalar(b, compute_type(dtype) if kept else dtype))
    values = cast(read(a, shape), a._dtype, dtype)
    return new_tensor(list(map(fn, values, others)), shape, out_dtype or dtype)


def zeros_like(t):
    return full(t._shape, 0, t._dtype)


def unary(fn, x, dtype):
    return new_tensor(list(map(fn, cast(read(x), x._dtype, dtype))), x._shape, dtype)


def converted(x, dtype):
    return new_tensor(cast(read(x), x._dtype, dtype), x._shape, dtype)


# ---- IEEE results where Python's math raises (x / 0, exp overflow, log of 0, ...)

# The NaN an invalid operation gives on x86 (its "default NaN", sign bit set), as the core's and
# PyTorch's CPU kernels give it: 0 / 0, x % 0, sin(inf), ... (a NaN operand propagates itself).
_INVALID = -math.nan


def ieee_div(x, y):
    try:
        return x / y
    except ZeroDivisionError:
        if x != x or x == 0:
            return x if x != x else _INVALID
        return math.copysign(math.inf, x) * math.copysign(1.0, y)


def _exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _log(x):
    return math.log(x) if x > 0 else -math.inf if x == 0 else math.nan


def _log1p(x):
    return math.log1p(x) if x > -1 else -math.inf if x == -1 else x if x != x else _INVALID


def _expm1(x):
    try:
        return math.expm1(x)
    except OverflowError:
        return math.inf


def _sqrt(x):
    return math.sqrt(x) if x >= 0 else x if x != x else _INVALID  # (PyTorch's MKL sqrt: +NaN)


def _sin(x):
    return math.sin(x) if math.isfinite(x) else x if x != x else _INVALID


def _cos(x):
    return math.cos(x) if math.isfinite(x) else x if x != x else _INVALID


def _sigmoid(x):
    return 1.0 / (1.0 + _exp(-x))


def _pow(x, y):
    """C's pow: overflow gives +-inf, a zero base with a negative exponent a signed inf, a negative
    base with a fractional exponent NaN."""
    odd_integer = y % 2 == 1
    try:
        return math.pow(x, y)
    except OverflowError:
        return -math.inf if x < 0 and odd_integer else math.inf
    except ValueError:
        return (math.copysign(math.inf, x) if odd_integer else math.inf) if x == 0 else _INVALID


def _pow_in(dtype):
    """x ** y computed as the core computes it in `dtype` (integers through double, like std::pow)."""
    if dtype.is_floating_point:
        return _pow
    if compute_type(dtype) is int64:
        return _int_pow
    return lambda x, y: _pow(x, y) != 0


def _int_pow(x, y):
    """PyTorch's integer power: by repeated squaring, wrapping on overflow (as the int64 storage
    does), where a negative exponent gives 1, -1 or 0 instead of a fraction."""
    if y < 0:
        return (x if y % 2 else 1) if x in (1, -1) else 0
    return builtins.pow(x, y, 2**64)


def _special_pow(exponent, dtype):
    """x ** exponent for the exponents PyTorch computes of float tensors with other functions
    (sqrt(-inf) is NaN where pow(-inf, 0.5) is inf), each step rounded to `dtype` as in the core;
    None for the others."""
    r = (lambda v: cast([v], float64, float32)[0]) if compute_type(dtype) is float32 else (lambda v: v)
    return {
        0.5: lambda x, _: _sqrt(x),
        -0.5: lambda x, _: ieee_div(1.0, r(_sqrt(x))),
        2: lambda x, _: x * x,
        3: lambda x, _: r(x * x) * x,
        -1: lambda x, _: ieee_div(1.0, x),
        -2: lambda x, _: ieee_div(1.0, r(x * x)),
    }.get(exponent)


def _maximum(x, y):
    return x if x > y or x != x else y  # NaN wins, as in PyTorch


def _minimum(x, y):
    return x if x < y or x != x else y


# ---- conversions


class ToCopyBackward0(Function):
    def forward(self, x, dtype):
        return converted(x, dtype)

    def backward(self, g):
        return g.to(self.inputs[0][1])


def to_dtype(x, dtype):
    """x itself when the dtype already matches; only float-to-float conversions carry gradients."""
    if x._dtype is dtype:
        return x
    if dtype.is_floating_point and x._dtype.is_floating_point:
        return ToCopyBackward0.run(x, dtype=dtype)
    return converted(x, dtype)


class CloneBackward0(Function):
    def forward(self, x):
        return converted(x, x._dtype)

    def backward(self, g):
        return g


def clone(x):
    return CloneBackward0.run(x)


def contiguous(x):
    return x if x.is_contiguous() else clone(x)


# ---- binary arithmetic


def _check_bool_subtraction(a, b):
    dtypes = [a._dtype, b._dtype if isinstance(b, Tensor) else scalar_dtype(b)]
    if dtypes == [bool_, bool_]:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
            "`logical_xor()` operator instead."
        )
    if bool_ in dtypes:
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
            "invert a mask, use the `~` or `logical_not()` operator instead."
        )


def _to_float32(exact, estimate):
    """The Fraction `exact` rounded once to float32 (ties to even, denormals at 2^-149); `estimate`:
    exact rounded to float64, which gives the exponent (where it rounds up to the next power of two
    the coarser step rounds exact to that same power)."""
    step = max(math.frexp(estimate)[1] - 24, -149)
    rounded = math.ldexp(round(exact / Fraction(2) ** step), step)
    return math.copysign(math.inf, rounded) if abs(rounded) >= 2.0**128 else rounded


def fused_multiply_add(a, b, c, dtype):
    """a * b + c rounded once to dtype (float32 or float64), as an FMA instruction computes it
    (math.fma arrives in Python 3.13)."""
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c  # infinities and NaN: no rounding to care about
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:  # then a * b = -c is exact in float64, which gives the sign of the zero
        return a * b + c
    try:
        estimate = float(exact)
    except OverflowError:
        return math.copysign(math.inf, exact)
    return estimate if dtype is float64 else _to_float32(exact, estimate)


def fused_multiply_add_values(x, y, z, dtype):
    """x * y + z of tensors, broadcast, rounded once in floating dtype's compute type."""
    shape = broadcast_shapes(broadcast_shapes(x._shape, y._shape), z._shape)
    compute = compute_type(dtype)
    xs, ys, zs = (cast(read(t, shape), t._dtype, compute) for t in (x, y, z))
    return new_tensor([fused_multiply_add(a, b, c, compute) for a, b, c in zip(xs, ys, zs)], shape, dtype)


def _added(a, b, alpha):
    """a + alpha * b, as the core's add with alpha: for floating types rounded once."""
    dtype = result_type(a, b)
    if alpha == 1:
        return elementwise(operator.add, a, b, dtype)
    if not dtype.is_floating_point:
        return elementwise(lambda x, y: x + alpha * y, a, b, dtype)
    compute = compute_type(dtype)
    scale = cast_scalar(float(alpha), dtype)  # the numbers rounded to dtype (float16 too), as PyTorch's
    if not isinstance(b, Tensor):
        b = cast_scalar(float(b), dtype)
    return elementwise(lambda x, y: fused_multiply_add(y, scale, x, compute), a, b, dtype)


class AddBackward0(Function):
    def forward(self, a, b, alpha=1):
        self.alpha = alpha
        return _added(a, b, alpha)

    def backward(self, g):
        return self.reduce(0, g), self.reduce(1, _times(g, self.alpha)) if self.needs_input_grad(1) else None


def _difference(a, b, alpha):
    """a - alpha * b: sub's and rsub's values."""
    _check_bool_subtraction(a, b)
    if alpha == 1:
        return elementwise(operator.sub, a, b, result_type(a, b))
    return _added(a, b, -alpha)


class SubBackward0(Function):
    def forward(self, a, b, alpha=1):
        self.alpha = alpha
        return _difference(a, b, alpha)

    def backward(self, g):
        return self.reduce(0, g), self.reduce(1, _times(-g, self.alpha)) if self.needs_input_grad(1) else None


def _times(g, alpha):
    """g * alpha, as add and sub pass their gradient on to the scaled operand."""
    return g if alpha == 1 else g * alpha


class RsubBackward0(Function):
    """torch.rsub(a, b, alpha): b - alpha * a, as sub(b, a, alpha), with a's edge first."""

    def forward(self, a, b, alpha=1):
        self.alpha = alpha
        return _difference(b, a, alpha)

    def backward(self, g):
        return (
            self.reduce(0, _times(-g, self.alpha)) if self.needs_input_grad(0) else None,
            self.reduce(1, g) if self.needs_input_grad(1) else None,
        )


class RsubBackward1(Function):
    """number - alpha * x"""

    scalar_edge = False

    def forward(self, x, number, alpha=1):
        _check_bool_subtraction(x, number)
        self.alpha = alpha
        dtype = result_type(x, number)
        if alpha == 1:
            return elementwise(lambda v, s: s - v, x, number, dtype)
        return _added(full(x._shape, number, dtype), x, -alpha)

    def backward(self, g):
        return self.reduce(0, _times(-g, self.alpha))


def rsub(a, b, alpha=1):
    return (RsubBackward0 if isinstance(b, Tensor) else RsubBackward1).run(a, b, alpha=alpha)


class MulBackward0(Function):
    def forward(self, a, b):
        if isinstance(b, Tensor):
            self.save(a)
            self.save(b)
        return elementwise(operator.mul, a, b, result_type(a, b))

    def backward(self, g):
        return (
            self.reduce(0, g * self.operand(1)) if self.needs_input_grad(0) else None,
            self.reduce(1, g * self.operand(0)) if self.needs_input_grad(1) else None,
        )


class DivBackward0(Function):
    def forward(self, a, b):
        if isinstance(b, Tensor):
            self.save(a)
            self.save(b)
        return elementwise(ieee_div, a, b, float_type(result_type(a, b)))

    def backward(self, g):
        other = self.operand(1)
        return (
            self.reduce(0, g / other) if self.needs_input_grad(0) else None,
            # -g * ((a / b) / b), as PyTorch: b * b would overflow long before the quotient does.
            self.reduce(1, -(g * (self.operand(0) / other / other))) if self.needs_input_grad(1) else None,
        )


class ReciprocalBackward0(Function):
    def forward(self, x):
        out = unary(lambda v: ieee_div(1.0, v), x, float_type(x._dtype))
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        y = self.unpack(0)
        return -(g * (y * y))


def rdiv(x, number):
    """number / x is number * (1 / x), as PyTorch computes (and names) it."""
    return MulBackward0.run(ReciprocalBackward0.run(x), number)


class PowBackward0(Function):
    """x ** number"""

    scalar_edge = False

    def forward(self, x, exponent):
        if not x._dtype.is_floating_point and type(exponent) is int and exponent < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        self.save(x)
        dtype = result_type(x, exponent)
        special = _special_pow(cast_scalar(exponent, dtype), dtype) if dtype.is_floating_point else None
        return elementwise(special or _pow_in(dtype), x, exponent, dtype)

    def backward(self, g):
        x, p = self.unpack(0), float(self.inputs[1])  # x checked even when unused, as PyTorch
        if p == 0:
            return zeros_like(g)
        return self.reduce(0, g * (x ** (p - 1) * p))


class PowBackward1(Function):
    """x ** y for tensors; d/dy is x**y * log(x), taken as 0 where x == 0 and y >= 0 (the limit)."""

    def forward(self, x, y):
        dtype = result_type(x, y)
        if dtype is bool_:
            raise NotImplementedError("\"pow\" not implemented for 'Bool'")
        out = elementwise(_pow_in(dtype), x, y, dtype)
        self.save(x)
        self.save(y)
        self.save(out, is_output=True)  # d/dy reads it (as PyTorch's, so in-place changes to it fail alike)
        return out

    def backward(self, g):
        x, y, result = self.unpack(0), self.unpack(1), self.unpack(2)
        gx = gy = None
        if self.needs_input_grad(0):  # taken as 0 where y == 0: x ** 0 is constant, even at x == 0
            d = g * (y * x ** (y - 1))  # masked after the product: a NaN gradient too gives 0 there
            gx = self.reduce(0, where(y == 0, zeros_like(d), d))
        if self.needs_input_grad(1):
            d = result * to_dtype(x, result._dtype).log()  # log in the result's precision, as PyTorch
            gy = self.reduce(1, g * where(logical_and(x == 0, y >= 0), zeros_like(d), d))
        return gx, gy


class PowBackward2(Function):
    """number ** x. For number == 0, d/dx (0 * log 0) is taken as 0 where x >= 0, as PyTorch."""

    scalar_edge = False

    def forward(self, x, base):
        dtype = result_type(x, base)
        if dtype is bool_:
            raise NotImplementedError("\"pow\" not implemented for 'Bool'")
        power = _pow_in(dtype)
        out = elementwise(lambda v, s: power(s, v), x, base, dtype)
        self.save(x)
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        x, result, base = self.unpack(0), self.unpack(1), float(self.inputs[1])
        d = result * _log(base)
        if base == 0:
            d = where(x >= 0, zeros_like(d), d)
        return self.reduce(0, g * d)


def pow(x, exponent):
    return PowBackward1.run(x, exponent) if isinstance(exponent, Tensor) else PowBackward0.run(x, exponent)


class MaximumBackward0(Function):
    """The gradient goes to the larger input; ties split it evenly. As in PyTorch, an input gets
    all of it unless it lost, so both get it where a NaN was compared."""

    pick, loses = staticmethod(_maximum), operator.lt

    def forward(self, a, b):
        self.save(a)
        self.save(b)
        return elementwise(self.pick, a, b, result_type(a, b))

    def backward(self, g):
        a, b = self.unpack(0), self.unpack(1)
        shared, zero = where(a == b, g * 0.5, g), zeros_like(g)
        return (
            self.reduce(0, where(self.loses(a, b), zero, shared)) if self.needs_input_grad(0) else None,
            self.reduce(1, where(self.loses(b, a), zero, shared)) if self.needs_input_grad(1) else None,
        )


class MinimumBackward0(MaximumBackward0):
    """The gradient goes to the smaller input; ties split it evenly."""

    pick, loses = staticmethod(_minimum), operator.gt


class WhereBackward0(Function):
    """The condition routes each gradient element to the input it came from."""

    def forward(self, a, b, condition):
        if condition._dtype is not bool_:
            raise RuntimeError(
                "where expected condition to be a boolean tensor, but got a tensor with dtype "
                f"{SCALAR_TYPE_NAME[condition._dtype]}"
            )
        dtype = result_type(a, b)
        shape = broadcast_shapes(broadcast_shapes(condition._shape, a._shape), b._shape)
        values = zip(
            read(condition, shape), cast(read(a, shape), a._dtype, dtype), cast(read(b, shape), b._dtype, dtype)
        )
        self.save(condition)
        return new_tensor([x if c else y for c, x, y in values], shape, dtype)

    def backward(self, g):
        condition, zero = self.unpack(0), zeros_like(g)
        return (
            self.reduce(0, where(condition, g, zero)) if self.needs_input_grad(0) else None,
            self.reduce(1, where(condition, zero, g)) if self.needs_input_grad(1) else None,
        )


def where(condition, a, b):
    return WhereBackward0.run(a, b, condition=condition)


# ---- division rounded down (floor_divide), and what it leaves: remainder (the divisor's sign) and
# fmod (the dividend's sign, C's %), computed as the core computes them in each dtype. Integer
# division by zero raises (PyTorch's message is the bare name).


def _rounding(dtype):
    """Rounds a step's result to `dtype`, as the core's arithmetic in that dtype does."""
    return (lambda v: cast([v], float64, float32)[0]) if compute_type(dtype) is float32 else (lambda v: v)


def _check_divisor(y):
    if y == 0:
        raise RuntimeError("ZeroDivisionError")


def _ieee_fmod(x, y):
    if x != x:
        return x
    return _INVALID if y == 0 or math.isinf(x) else math.fmod(x, y)


def _whole(fn, v):
    """math.floor / math.trunc as C's, which keep infinities, NaN and the sign of zero."""
    return math.copysign(float(fn(v)), v) if math.isfinite(v) else v


def _fmod_in(dtype):
    if compute_type(dtype) is not int64:
        return _ieee_fmod

    def fmod(x, y):
        _check_divisor(y)
        return builtins.abs(x) % builtins.abs(y) * (1 if x >= 0 else -1)

    return fmod


def _remainder_in(dtype):
    fmod = _fmod_in(dtype)

    def remainder(x, y):
        r = fmod(x, y)
        return r + y if r != 0 and (r < 0) != (y < 0) else r

    return remainder


def _floor_divide_in(dtype):
    if compute_type(dtype) is int64:

        def floor_divide(x, y):
            _check_divisor(y)
            return x // y  # INT64_MIN // -1 wraps in the storage

        return floor_divide
    r = _rounding(dtype)

    def floor_divide(x, y):
        if y == 0:
            return ieee_div(x, y)
        # (x - fmod(x, y)) / y is a whole number up to rounding: floored, or rounded up where rounding left
        # it just below one.
        mod = _ieee_fmod(x, y)
        div = r(ieee_div(r(x - mod), y))
        if mod != 0 and (y < 0) != (mod < 0):
            div = r(div - 1)
        if div == 0:
            return math.copysign(0.0, ieee_div(x, y))
        floored = _whole(math.floor, div)
        return floored + 1 if div - floored > 0.5 else floored

    return floor_divide


def _trunc_divide_in(dtype):
    if compute_type(dtype) is int64:

        def trunc_divide(x, y):
            _check_divisor(y)
            quotient = builtins.abs(x) // builtins.abs(y)
            return quotient if (x >= 0) == (y > 0) else -quotient  # INT64_MIN / -1 wraps in the storage

        return trunc_divide
    r = _rounding(dtype)
    return lambda x, y: _whole(math.trunc, r(ieee_div(x, y)))


def _division(values_in, kernel, a, b, reversed=False):
    """a op b (b a tensor or a number) in the promoted dtype, which PyTorch's kernels (named `kernel`)
    refuse for bool; `reversed` computes b op a for a number b."""
    if isinstance(b, Tensor):
        broadcast_shapes(a._shape, b._shape)  # checked first, as PyTorch
    dtype = result_type(a, b)
    if dtype is bool_:
        raise NotImplementedError(f"\"{kernel}_cpu\" not implemented for 'Bool'")
    fn = values_in(dtype)
    return elementwise((lambda x, y: fn(y, x)) if reversed else fn, a, b, dtype)


class DivBackward2(Function):
    """a / b rounded down or toward zero (div's rounding_mode "floor", "trunc"): piecewise constant,
    its gradient is zero (but, as in PyTorch, it is recorded)."""

    def forward(self, a, b, rounding_mode):
        if rounding_mode == "floor":
            return _division(_floor_divide_in, "div_floor", a, b)
        return _division(_trunc_divide_in, "div_trunc", a, b)

    def backward(self, g):
        return tuple(
            full(self.inputs[i][0], 0, self.inputs[i][1]) if self.needs_input_grad(i) else None
            for i in range(len(self.next_edges))
        )


class NoDerivative(Function):
    """An op PyTorch has no derivative for (floor_divide, number % tensor): the result requires grad,
    and backward through it raises. As PyTorch's, the node has edges only to the inputs that require grad."""

    op = ""
    records_integer_result = False

    def connect(self, inputs, edges=None):
        return super().connect(inputs, [gradient_edge(x) for x in inputs if isinstance(x, Tensor) and x.requires_grad])

    def name(self):
        return "torch::autograd::NotImplemented"

    def backward(self, g):
        raise RuntimeError(f"derivative for {self.op} is not implemented")


class FloorDivide(NoDerivative):
    op = "aten::floor_divide"

    def forward(self, a, b):
        return _division(_floor_divide_in, "div_floor", a, b)


class FloorDivideInPlace(FloorDivide):
    """a //= b: PyTorch's error names the in-place op."""

    op = "aten::floor_divide_"


class RFloorDivide(FloorDivide):
    """number // x"""

    def forward(self, x, number):
        return _division(_floor_divide_in, "div_floor", x, number, reversed=True)


class RRemainder(NoDerivative):
    """number % x"""

    op = "aten::remainder"

    def forward(self, x, number):
        return _division(_remainder_in, "remainder", x, number, reversed=True)


class RemainderBackward0(Function):
    """x % number: the gradient passes unchanged."""

    values_in, kernel = staticmethod(_remainder_in), "remainder"
    scalar_edge = False

    def forward(self, x, number):
        return _division(self.values_in, self.kernel, x, number)

    def backward(self, g):
        return g


class FmodBackward0(RemainderBackward0):
    """fmod(x, number)"""

    values_in, kernel = staticmethod(_fmod_in), "fmod"


class RemainderBackward1(Function):
    """a - b * q for q = a / b rounded down: the gradient is g for a and -g * q for b."""

    values_in, kernel, rounding_mode = staticmethod(_remainder_in), "remainder", "floor"

    def forward(self, a, b):
        self.save(a)
        self.save(b)
        return _division(self.values_in, self.kernel, a, b)

    def backward(self, g):
        gb = None
        if self.needs_input_grad(1):  # only then are the operands read (and checked for in-place changes)
            quotient = DivBackward2.run(self.unpack(0), self.unpack(1), rounding_mode=self.rounding_mode)
            gb = self.reduce(1, -(g * quotient))
        return self.reduce(0, g) if self.needs_input_grad(0) else None, gb


class FmodBackward1(RemainderBackward1):
    """a - b * q for q = a / b rounded toward zero."""

    values_in, kernel, rounding_mode = staticmethod(_fmod_in), "fmod", "trunc"


def remainder(a, b):
    return (RemainderBackward1 if isinstance(b, Tensor) else RemainderBackward0).run(a, b)


def fmod(a, b):
    return (FmodBackward1 if isinstance(b, Tensor) else FmodBackward0).run(a, b)


# ---- bitwise ops: bool and integer tensors only, never recorded (they require grad only after an eq_
# into them, see check_differentiable_output)


def _check_bitwise_dtype(name, dtype):
    if dtype.is_floating_point:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{SCALAR_TYPE_NAME[dtype]}'")


class Bitwise(Function):
    """a & b, a | b, a ^ b: `name` is bitwise_and, bitwise_or or bitwise_xor."""

    OPS = {"bitwise_and": operator.and_, "bitwise_or": operator.or_, "bitwise_xor": operator.xor}
    records_integer_result = False

    def forward(self, a, b, name):
        if isinstance(b, Tensor):
            broadcast_shapes(a._shape, b._shape)  # checked first, as PyTorch
        dtype = result_type(a, b)
        _check_bitwise_dtype(name, dtype)
        return elementwise(self.OPS[name], a, b, dtype)


class BitwiseNot(Function):
    records_integer_result = False

    def forward(self, x):
        _check_bitwise_dtype("bitwise_not", x._dtype)
        return unary(operator.not_ if x._dtype is bool_ else operator.invert, x, x._dtype)


# ---- predicates (no gradient)


def compare(a, b, op):
    """op is operator.lt, le, gt, ge, eq or ne; b a tensor or a number."""
    return elementwise(op, a, b, result_type(a, b), bool_)


def logical_and(a, b):
    return elementwise(lambda x, y: bool(x and y), a, b, bool_)


def logical_or(a, b):
    return elementwise(lambda x, y: bool(x or y), a, b, bool_)


class SignBackward0(Function):
    """sign is piecewise constant: its gradient is zero (but, as in PyTorch, it is recorded)."""

    def forward(self, x):
        return unary(lambda v: (v > 0) - (v < 0), x, x._dtype)

    def backward(self, g):
        return zeros_like(g)


def sign(x):
    return SignBackward0.run(x)


# ---- unary ops


class NegBackward0(Function):
    def forward(self, x):
        if x._dtype is bool_:
            raise RuntimeError(
                "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                "invert a mask, use the `~` or `logical_not()` operator instead."
            )
        return unary(operator.neg, x, x._dtype)

    def backward(self, g):
        return -g


class AbsBackward0(Function):
    def forward(self, x):
        if x._dtype is bool_:
            raise NotImplementedError("\"abs_cpu\" not implemented for 'Bool'")
        self.save(x)
        return unary(lambda v: -v if v < 0 else v, x, x._dtype)  # keeps -0.0, as the core does

    def backward(self, g):
        return g * sign(self.unpack(0))


class ExpBackward0(Function):
    def forward(self, x):
        out = unary(_exp, x, float_type(x._dtype))
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        return g * self.unpack(0)


class LogBackward0(Function):
    def forward(self, x):
        self.save(x)
        return unary(_log, x, float_type(x._dtype))

    def backward(self, g):
        return g / self.unpack(0)


class Log1PBackward0(Function):
    def forward(self, x):
        self.save(x)
        return unary(_log1p, x, float_type(x._dtype))

    def backward(self, g):
        return g / (self.unpack(0) + 1)


class Expm1Backward0(Function):
    def forward(self, x):
        out = unary(_expm1, x, float_type(x._dtype))
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        return g * (self.unpack(0) + 1)


class SqrtBackward0(Function):
    def forward(self, x):
        out = unary(_sqrt, x, float_type(x._dtype))
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        return g / (self.unpack(0) * 2)


class SinBackward0(Function):
    def forward(self, x):
        self.save(x)
        return unary(_sin, x, float_type(x._dtype))

    def backward(self, g):
        return g * self.unpack(0).cos()


class CosBackward0(Function):
    def forward(self, x):
        self.save(x)
        return unary(_cos, x, float_type(x._dtype))

    def backward(self, g):
        return g * -self.unpack(0).sin()


class TanhBackward0(Function):
    def forward(self, x):
        out = unary(math.tanh, x, float_type(x._dtype))
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        y = self.unpack(0)
        return g * (1 - y * y)


class SigmoidBackward0(Function):
    def forward(self, x):
        dtype = float_type(x._dtype)
        out = unary(_sigmoid, x, dtype)
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        y = self.unpack(0)
        return g * (y * (1 - y))


class ReluBackward0(Function):
    def forward(self, x):
        if x._dtype is bool_:
            raise RuntimeError("Boolean inputs not supported for relu")
        out = unary(lambda v: v if v > 0 or v != v else 0, x, x._dtype)  # NaN stays NaN
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        return threshold_backward(g, self.unpack(0))


class ThresholdBackwardBackward0(Function):
    """ReLU's gradient, as PyTorch's threshold_backward(g, result, 0): g cut where the result is <= 0
    (so it passes where the result is NaN). Recorded with the result as an input, so a gradient taken
    with create_graph keeps its graph, as PyTorch's does; the result's gradient is zeros, as PyTorch's
    (so autograd.grad finds the result used)."""

    def forward(self, g, result):
        self.save(result)
        return where(result <= 0, zeros_like(g), g)

    def backward(self, gg):
        result = self.unpack(0)
        return threshold_backward(gg, result), zeros_like(result) if self.needs_input_grad(1) else None


def threshold_backward(g, result):
    return ThresholdBackwardBackward0.run(g, result)


class ClampBackward1(Function):
    """clamp with number bounds: max(x, min), then min(that, max), each keeping NaN from either side
    (with min > max every element is max, a NaN bound makes every element NaN, as PyTorch). The
    gradient passes where min <= x <= max (boundaries included)."""

    def forward(self, x, min, max):
        for bound in (min, max):
            if bound is not None and number_or_none(bound) is None:
                raise TypeError(f"clamp(): min and max must be numbers, not {type(bound).__name__}")
        if min is None and max is None:
            raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
        self.min, self.max = (None if b is None else number_or_none(b) for b in (min, max))
        # The bounds take part in type promotion as Python numbers: an int64 tensor clamped to 0.5 is float32.
        dtype = result_type(x, *(b for b in (self.min, self.max) if b is not None))
        if dtype is bool_:  # PyTorch's clamp kernels have no bool case
            kernel = "clamp" if min is not None and max is not None else "clamp_min" if min is not None else "clamp_max"
            raise NotImplementedError(f"\"{kernel}_scalar_cpu\" not implemented for 'Bool'")
        self.save(x)
        values = cast(read(x), x._dtype, dtype)
        # A bound replaces x only where x is past it or the bound is NaN: -0 clamped to 0 stays -0.
        for bound, past in ((self.min, operator.lt), (self.max, operator.gt)):
            if bound is not None:
                bound = cast_scalar(bound, dtype)  # in the computation dtype, as PyTorch converts it
                values = [bound if past(v, bound) or bound != bound else v for v in values]
        return new_tensor(values, x._shape, dtype)

    def backward(self, g):
        # where, not a product with the mask: an infinite gradient outside the range still gives 0.
        x, zero = self.unpack(0), zeros_like(g)
        if self.min is not None:
            g = where(x >= self.min, g, zero)
        if self.max is not None:
            g = where(x <= self.max, g, zero)
        return g


class ClampBackward0(Function):
    """clamp with tensor bounds (either may be missing). As PyTorch: x gets the gradient where
    min <= x <= max, min where x < min (unless min >= max: then max wins), max where x > max or
    max < min."""

    def forward(self, x, min, max):
        if min is None and max is None:
            raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
        dtype = result_type(*(t for t in (x, min, max) if t is not None))
        if dtype is bool_ and min is not None and max is not None:  # PyTorch's clamp kernel has no bool case
            raise NotImplementedError("\"clamp_cpu\" not implemented for 'Bool'")
        out = converted(x, dtype)
        if min is not None:  # maximum/minimum keep NaN from either side, as clamp does
            out = elementwise(_maximum, out, converted(min, dtype), dtype)
        if max is not None:
            out = elementwise(_minimum, out, converted(max, dtype), dtype)
        for t in (x, min, max):
            self.save(t)
        return out

    def backward(self, g):
        x, lo, hi = self.unpack(0), self.unpack(1), self.unpack(2)
        zero, grads = zeros_like(g), [None, None, None]
        if self.needs_input_grad(0):
            inside = x >= lo if lo is not None else x <= hi
            if lo is not None and hi is not None:
                inside = logical_and(inside, x <= hi)
            grads[0] = self.reduce(0, where(inside, g, zero))
        if self.needs_input_grad(1):
            below = x < lo if hi is None else logical_and(x < lo, lo < hi)
            grads[1] = self.reduce(1, where(below, g, zero))
        if self.needs_input_grad(2):
            above = x > hi if lo is None else logical_or(x > hi, hi < lo)
            grads[2] = self.reduce(2, where(above, g, zero))
        return tuple(grads)
