"""Float functions of one tensor (log10 ... rad2deg: issue 13's elementwise math), each forward
with its backward. Integer and bool tensors compute in float32, as PyTorch; the gradients are
PyTorch's formulas, written with ops so that they have gradients too. Python's math raises where
IEEE arithmetic gives inf or NaN: the wrappers below give the IEEE values, as the core does."""

import math

from .._types import bool as bool_, compute_type, float32
from ._autograd import Function, no_grad
from ._elementwise import ReciprocalBackward0, _sin, elementwise, float_type, ieee_div, result_type, unary
from ._storage import cast_scalar
from ._tensor import new_tensor, read

_NAN, _INF = math.nan, math.inf


def _log_base(log):
    return lambda v: log(v) if v > 0 else -_INF if v == 0 else _NAN


def _exp2(v):
    try:
        return 2.0**v
    except OverflowError:
        return _INF


def _tan(v):
    return math.tan(v) if math.isfinite(v) else _NAN  # math.tan refuses infinities


def _sinh(v):
    try:
        return math.sinh(v)
    except OverflowError:
        return math.copysign(_INF, v)


def _cosh(v):
    try:
        return math.cosh(v)
    except OverflowError:
        return _INF


def _in_domain(fn, lo, hi):
    """fn where lo <= v <= hi, NaN elsewhere (math raises there)."""
    return lambda v: fn(v) if lo <= v <= hi else _NAN


def _atanh(v):
    return math.copysign(_INF, v) if abs(v) == 1 else math.atanh(v) if abs(v) < 1 else _NAN


def _lgamma(v):
    try:
        return math.lgamma(v)
    except (ValueError, OverflowError):  # poles at 0, -1, -2, ...; overflow
        return _INF


def _rsqrt(v):
    return 1.0 / math.sqrt(v) if v > 0 else math.copysign(_INF, v) if v == 0 else _NAN


# ---- special functions, with PyTorch's algorithms (ATen/native/Math.h, from Cephes)


def erfinv(y):
    """A rational first guess, then two Newton steps on erf(x) = y."""
    a = (0.886226899, -1.645349621, 0.914624893, -0.140543331)
    b = (-2.118377725, 1.442710462, -0.329097515, 0.012229801)
    c = (-1.970840454, -1.624906493, 3.429567803, 1.641345311)
    d = (3.543889200, 1.637067800)
    y_abs = abs(y)
    if not y_abs <= 1:
        return _NAN
    if y_abs == 1:
        return math.copysign(_INF, y)
    if y_abs <= 0.7:
        z = y * y
        num = ((a[3] * z + a[2]) * z + a[1]) * z + a[0]
        dem = (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1.0
        x = y * num / dem
    else:
        z = math.sqrt(-math.log((1.0 - y_abs) / 2.0))
        num = ((c[3] * z + c[2]) * z + c[1]) * z + c[0]
        dem = (d[1] * z + d[0]) * z + 1.0
        x = math.copysign(num, y) / dem
    for _ in range(2):
        x -= (math.erf(x) - y) / ((2.0 / math.sqrt(math.pi)) * math.exp(-x * x))
    return x


_DIGAMMA_SERIES = (
    8.33333333333333333333e-2,
    -2.10927960927960927961e-2,
    7.57575757575757575758e-3,
    -4.16666666666666666667e-3,
    3.96825396825396825397e-3,
    -8.33333333333333333333e-3,
    8.33333333333333333333e-2,
)


def digamma(x):
    """Reflection for negative x, the recurrence up to 10, then the asymptotic series."""
    if x == 0:
        return math.copysign(_INF, -x)
    if x != x:
        return _NAN
    if x < 0:
        if math.isinf(x) or x.is_integer():
            return _NAN
        return digamma(1 - x) - math.pi / math.tan(math.pi * math.modf(x)[0])
    result = 0.0
    while x < 10:
        result -= 1 / x
        x += 1
    if x == 10:
        return result + 2.25175258906672110764
    y = 0.0
    if x < 1.0e17:
        z = 1.0 / (x * x)
        series = _DIGAMMA_SERIES[0]
        for coefficient in _DIGAMMA_SERIES[1:]:
            series = series * z + coefficient
        y = z * series
    return result + math.log(x) - (0.5 / x) - y


def _trigamma(x):
    sign, result = 1.0, 0.0
    if x < 0.5:
        sign = -1.0
        s = _sin(math.pi * x)
        result -= ieee_div(math.pi * math.pi, s * s)
        x = 1 - x
    for _ in range(6):
        result += 1 / (x * x)
        x += 1
    ixx = 1 / (x * x)
    result += (1 + 1 / (2 * x) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / x
    return sign * result


_ZETA_SERIES = (
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1.8924375803183791606e9,
    7.47242496e10,
    -2.950130727918164224e12,
    1.1646782814350067249e14,
    -4.5979787224074726105e15,
    1.8152105401943546773e17,
    -7.1661652561756670113e18,
)


def _zeta(x, q):
    """The Hurwitz zeta function zeta(x, q), by Euler-Maclaurin summation."""
    machep = 1.11022302462515654042e-16
    if x == 1:
        return _INF
    if x < 1:
        return _NAN
    if q <= 0:
        if math.isinf(q) or q.is_integer():
            return _INF
        if not x.is_integer():
            return _NAN
    s, a, b, i = q**-x, q, 0.0, 0
    while i < 9 or a <= 9:
        i += 1
        a += 1
        b = a**-x
        s += b
        if -machep * s < b < machep * s:
            return s
    w, k = a, 0.0
    s += b * w / (x - 1)
    s -= 0.5 * b
    a = 1.0
    for coefficient in _ZETA_SERIES:
        a *= x + k
        b /= w
        t = a * b / coefficient
        s += t
        if abs(t / s) < machep:
            return s
        k += 1
        a *= x + k
        b /= w
        k += 1
    return s


def polygamma_value(n, x):
    """The n-th derivative of digamma."""
    if n == 0:
        return digamma(x)
    if n == 1:
        return _trigamma(x)
    return (1.0 if n % 2 else -1.0) * math.exp(math.lgamma(n + 1.0)) * _zeta(n + 1.0, x)


# ---- the ops


class _FloatFunction(Function):
    """out = fn(x) in x's float type; `saves`: what backward reads ("input", "result" or None)."""

    saves = "input"

    def forward(self, x):
        out = unary(self.fn, x, float_type(x._dtype))
        if self.saves == "input":
            self.save(x)
        elif self.saves == "result":
            self.save(out, is_output=True)
        return out


def _square(x):
    return x * x


class Log10Backward0(_FloatFunction):
    fn = staticmethod(_log_base(math.log10))

    def backward(self, g):
        return g / (self.unpack(0) * 2.3025850929940456)


class Log2Backward0(_FloatFunction):
    fn = staticmethod(_log_base(math.log2))

    def backward(self, g):
        return g / (self.unpack(0) * 0.6931471805599453)


class Exp2Backward0(_FloatFunction):
    fn, saves = staticmethod(_exp2), "result"

    def backward(self, g):
        return g * self.unpack(0) * 0.6931471805599453


class SinhBackward0(_FloatFunction):
    fn = staticmethod(_sinh)

    def backward(self, g):
        return g * CoshBackward0.run(self.unpack(0))


class CoshBackward0(_FloatFunction):
    fn = staticmethod(_cosh)

    def backward(self, g):
        return g * SinhBackward0.run(self.unpack(0))


class AsinhBackward0(_FloatFunction):
    fn = staticmethod(math.asinh)

    def backward(self, g):
        return g * RsqrtBackward0.run(_square(self.unpack(0)) + 1)


class AcoshBackward0(_FloatFunction):
    fn = staticmethod(_in_domain(math.acosh, 1, _INF))

    def backward(self, g):
        return g * RsqrtBackward0.run(_square(self.unpack(0)) - 1)


class AtanhBackward0(_FloatFunction):
    fn = staticmethod(_atanh)

    def backward(self, g):
        return g / (1 - _square(self.unpack(0)))


class AsinBackward0(_FloatFunction):
    fn = staticmethod(_in_domain(math.asin, -1, 1))

    def backward(self, g):
        return g * RsqrtBackward0.run(1 - _square(self.unpack(0)))


class AcosBackward0(_FloatFunction):
    fn = staticmethod(_in_domain(math.acos, -1, 1))

    def backward(self, g):
        return g * -RsqrtBackward0.run(1 - _square(self.unpack(0)))


class TanBackward0(_FloatFunction):
    fn, saves = staticmethod(_tan), "result"

    def backward(self, g):
        return g * (_square(self.unpack(0)) + 1)


class AtanBackward0(_FloatFunction):
    fn = staticmethod(math.atan)

    def backward(self, g):
        return g / (_square(self.unpack(0)) + 1)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


class ErfBackward0(_FloatFunction):
    fn = staticmethod(math.erf)

    def backward(self, g):
        return (-_square(self.unpack(0))).exp() * _TWO_OVER_SQRT_PI * g


class ErfcBackward0(_FloatFunction):
    fn = staticmethod(math.erfc)

    def backward(self, g):
        return (-_square(self.unpack(0))).exp() * -_TWO_OVER_SQRT_PI * g


class ErfinvBackward0(_FloatFunction):
    fn = staticmethod(erfinv)

    def backward(self, g):
        return _square(ErfinvBackward0.run(self.unpack(0))).exp() * (1 / _TWO_OVER_SQRT_PI) * g


class LgammaBackward0(_FloatFunction):
    fn = staticmethod(_lgamma)

    def backward(self, g):
        return g * DigammaBackward0.run(self.unpack(0))


class DigammaBackward0(_FloatFunction):
    fn = staticmethod(digamma)

    def backward(self, g):
        return g * PolygammaBackward0.run(self.unpack(0), n=1)


class PolygammaBackward0(Function):
    """digamma's n-th derivative (for digamma's gradients)."""

    def forward(self, x, n):
        self.n = n
        self.save(x)
        return unary(lambda v: polygamma_value(n, v), x, float_type(x._dtype))

    def backward(self, g):
        return g * PolygammaBackward0.run(self.unpack(0), n=self.n + 1)


class RsqrtBackward0(_FloatFunction):
    fn, saves = staticmethod(_rsqrt), "result"

    def backward(self, g):
        y = self.unpack(0)
        return g * (y * _square(y)) * -0.5


class _ScaleFunction(Function):
    """x times a constant, rounded to x's float type first, as PyTorch's x * (pi / 180)."""

    def forward(self, x):
        dtype = float_type(x._dtype)
        factor = cast_scalar(self.factor, dtype)
        return unary(lambda v: v * factor, x, dtype)

    def backward(self, g):
        return g * self.factor


class Deg2RadBackward0(_ScaleFunction):
    factor = math.pi / 180


class Rad2DegBackward0(_ScaleFunction):
    factor = 180 / math.pi


class _NoInplaceDerivative(Function):
    """What asinh_, acosh_ and atanh_ write: PyTorch has no derivative for them, their node
    (AsinhBackward1, ...) raises in backward."""

    def forward(self, x):
        with no_grad():
            return self.op_node.run(x)

    def name(self):
        return f"{self.op_node.__name__[:-1]}1"

    def backward(self, g):
        op = self.op_node.__name__.removesuffix("Backward0").lower()
        raise NotImplementedError(f"the derivative for 'inplace version of {op}' is not implemented.")


class AsinhInPlace(_NoInplaceDerivative):
    op_node = AsinhBackward0


class AcoshInPlace(_NoInplaceDerivative):
    op_node = AcoshBackward0


class AtanhInPlace(_NoInplaceDerivative):
    op_node = AtanhBackward0


def signbit(x):
    """The sign bit of floats (so -0.0 and -NaN are negative), x < 0 for integers; bool."""
    sign = (lambda v: math.copysign(1.0, v) < 0) if x._dtype.is_floating_point else (lambda v: v < 0)
    return new_tensor([sign(v) for v in read(x)], x._shape, bool_)


# ---- float functions of two operands: the values of atan2, hypot, logaddexp, logaddexp2 and
# copysign, without a node (the shared Python layer records PyTorch's). The core's steps in double
# (float64: kernels/special_functions.h; float32 and the 16-bit floats: the *_of_floats functions,
# kernels/float_binary_impl.h's lanes); storing the result rounds it once to the element type.


def _first_nan(x, y):
    return x if x != x else y


def _atan2(y, x):
    return _first_nan(y, x) if y != y or x != x else math.atan2(y, x)  # math's NaN is always +NaN


def _hypot(x, y):
    """Borges' corrected sqrt(x^2 + y^2), operands outside [2^-400, 2^400] scaled to [0.5, 1) first,
    as the core's: math.hypot (another algorithm) differs from it in the last bit now and then."""
    if math.isinf(x) or math.isinf(y):
        return _INF
    if x != x or y != y:
        return _first_nan(x, y)
    a, b = max(abs(x), abs(y)), min(abs(x), abs(y))
    if b == 0 or b < a * 2.0**-54:
        return a
    e = 0
    if a > 2.0**400 or b < 2.0**-400:
        e = math.frexp(a)[1]
        a, b = math.ldexp(a, -e), math.ldexp(b, -e)
    h = math.sqrt(a * a + b * b)
    if h <= 2 * b:
        d = h - b
        error = a * (2 * d - a) + (d - 2 * (a - b)) * d
    else:
        d = h - a
        error = 2 * d * (a - 2 * b) + ((4 * d - b) * b + d * d)
    h -= error / (2 * h)
    try:
        return math.ldexp(h, e) if e else h
    except OverflowError:
        return _INF


def _hypot_of_floats(x, y):
    """The core's hypot of float32 operands: exact squares in double, the plain formula."""
    if math.isinf(x) or math.isinf(y):
        return _INF
    if x != x or y != y:
        return _first_nan(x, y)
    return math.sqrt(x * x + y * y)


_INVERSE_LN2 = 1.4426950408889634  # 1 / ln 2 rounded, as PyTorch's


# The float32 kernels' algorithms (kernels/float_binary_impl.h, which explains them): the same IEEE
# operations in the same order, each rounded once (Python's floats never fuse a multiply-add).
_TAN_EIGHTH_PI = 0.41421356237309503
_ATAN_P = (
    0.021259793447206497,
    -0.043590909504491064,
    0.05692537441818354,
    -0.0664112088083165,
    0.07690068262541097,
    -0.09090782409558172,
    0.11111106653450764,
    -0.14285714195257618,
    0.19999999999088905,
    -0.3333333333333015,
)
_EXP_Q = (
    2.7476793834852516e-07,
    2.7634991579553766e-06,
    2.4801931730823122e-05,
    0.0001984118523420112,
    0.0013888888516209441,
    0.008333333370871703,
    0.04166666666813658,
    0.16666666666611551,
    0.49999999999998324,
)
# fdlibm's log (e_log.c): ln 2 in two parts (exp's reduction) and Lg7 ... Lg1
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10
_LOG_LG = (
    1.479819860511658591e-01,
    1.531383769920937332e-01,
    1.818357216161805012e-01,
    2.222219843214978396e-01,
    2.857142874366239149e-01,
    3.999999999940941908e-01,
    6.666666666666735130e-01,
)
_LOG2E, _LN2 = 1.4426950408889634, 0.6931471805599453
_SQRT2_MINUS_1 = 0.41421356237309503


def _polynomial(r, coefficients):
    """The polynomial of `coefficients` (highest power first) at r by Estrin's scheme: pairs a + b r,
    then pairs of those with r^2, r^4, ... (the kernels' polynomial<false>)."""
    terms = coefficients[::-1]
    while len(terms) > 1:
        pairs = [terms[2 * i + 1] * r + terms[2 * i] for i in range(len(terms) // 2)]
        terms = pairs + [terms[-1]] * (len(terms) % 2)
        r = r * r
    return terms[0]


def _atan_reduced(r):
    z = r * r
    return r + r * z * _polynomial(z, _ATAN_P)


def _atan2_of_floats(y, x):
    if y != y or x != x:
        return _first_nan(y, x)
    ax, ay = abs(x), abs(y)
    lo, hi = min(ax, ay), max(ax, ay)
    if hi == 0:
        v = 0.0
    elif lo == _INF:
        v = math.pi / 4
    elif lo > hi * _TAN_EIGHTH_PI:
        v = _atan_reduced((lo - hi) / (lo + hi)) + math.pi / 4
    else:
        v = _atan_reduced(lo / hi)
    if ay > ax:
        v = math.pi / 2 - v
    if math.copysign(1.0, x) < 0:
        v = math.pi - v
    return math.copysign(v, y)


def _log1p_of_fraction(e):
    """log(1 + e) for e in (0, 1]."""
    upper = e > _SQRT2_MINUS_1
    f = (e - 1.0) * 0.5 if upper else e
    s = f / (2.0 + f)
    z = s * s
    log1p_f = (s + s) + s * (z * _polynomial(z, _LOG_LG))
    return log1p_f + _LN2 if upper else log1p_f


def _logaddexp_of_floats(a, b, base2=False):
    if a != a or b != b:
        return _first_nan(a, b)
    if math.isinf(a) and a == b:
        return a
    m = b if b > a else a
    t = -min(abs(a - b), 160.0 if base2 else 110.0)
    if base2:
        n = round(t)
        r = (t - n) * _LN2
    else:
        n = round(t * _LOG2E)
        r = (t - n * _LN2_HI) - n * _LN2_LO
    log1p = _log1p_of_fraction(math.ldexp(1.0 + (r + r * r * _polynomial(r, _EXP_Q)), n))
    return m + (log1p * _INVERSE_LN2 if base2 else log1p)


def _logaddexp2_of_floats(a, b):
    return _logaddexp_of_floats(a, b, base2=True)


def _logaddexp(a, b):
    if a != a or b != b:
        return _first_nan(a, b)
    if math.isinf(a) and a == b:
        return a
    return max(a, b) + math.log1p(math.exp(-abs(a - b)))


def _logaddexp2(a, b):
    if a != a or b != b:
        return _first_nan(a, b)
    if math.isinf(a) and a == b:
        return a
    return max(a, b) + math.log1p(2.0 ** -abs(a - b)) * _INVERSE_LN2


def _float_binary(fn, fn_of_floats=None):
    """fn of two operands (the second a tensor or a number) in their promoted float type; where
    given, fn_of_floats in its place for the types that compute in float32."""

    def values(a, b):
        dtype = float_type(result_type(a, b))
        single = fn_of_floats is not None and compute_type(dtype) is float32
        return elementwise(fn_of_floats if single else fn, a, b, dtype)

    return values


FLOAT_BINARY = {
    "atan2": _float_binary(_atan2, _atan2_of_floats),
    "hypot": _float_binary(_hypot, _hypot_of_floats),
    "logaddexp": _float_binary(_logaddexp, _logaddexp_of_floats),
    "logaddexp2": _float_binary(_logaddexp2, _logaddexp2_of_floats),
    "copysign": _float_binary(math.copysign),
}


# The ops by name, each computed by its node (the in-place forms are in reference/_prims.py).
FLOAT_FUNCTIONS = {
    "log10": Log10Backward0,
    "log2": Log2Backward0,
    "exp2": Exp2Backward0,
    "sinh": SinhBackward0,
    "cosh": CoshBackward0,
    "asinh": AsinhBackward0,
    "acosh": AcoshBackward0,
    "atanh": AtanhBackward0,
    "asin": AsinBackward0,
    "acos": AcosBackward0,
    "tan": TanBackward0,
    "atan": AtanBackward0,
    "erf": ErfBackward0,
    "erfc": ErfcBackward0,
    "erfinv": ErfinvBackward0,
    "lgamma": LgammaBackward0,
    "digamma": DigammaBackward0,
    "rsqrt": RsqrtBackward0,
    "reciprocal": ReciprocalBackward0,
    "deg2rad": Deg2RadBackward0,
    "rad2deg": Rad2DegBackward0,
}
# The nodes of the in-place forms that differ from their op's.
IN_PLACE = {"asinh": AsinhInPlace, "acosh": AcoshInPlace, "atanh": AtanhInPlace}
