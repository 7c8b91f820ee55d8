"""Scans along one dim: cumsum, cumprod, logcumsumexp, cummax and cummin. As the core
(csrc/ops/scan.cpp), each line along the dim is walked in order (or in reverse, for the reversed
scans the gradients use) with the running value a Python float (an int for integers), rounded to the
result's dtype once when stored: both backends give the same bits.
"""

import math
import sys

from .._types import bool as bool_, float32, float64, int64
from ._autograd import Function, is_grad_enabled, no_grad
from ._elementwise import to_dtype, where
from ._index import index_put_
from ._inplace import _apply_inplace
from ._matmul import _c_type_name
from ._nn import _not_implemented_for
from ._reduce import sum
from ._shape import cat, reshape
from ._tensor import full, new_tensor, read, wrap_dim

_LOWEST = {float32: -3.4028234663852886e38, float64: -sys.float_info.max}


def _lines(shape, dim):
    """The positions of every line along `dim` of row-major values of `shape` (a 0-d tensor: one line of one)."""
    outer, n, inner = math.prod(shape[:dim]), (shape[dim] if shape else 1), math.prod(shape[dim + 1 :])
    return [range(o * n * inner + i, (o * n + n) * inner + i, inner) for o in range(outer) for i in range(inner)]


def _log_add_exp(x, acc):
    """log(exp(x) + exp(acc)), as PyTorch's _log_add_exp_helper: NaN spreads, and equal infinities
    (where exp(lo - hi) would be NaN) give x."""
    lo, hi = (acc, acc) if math.isnan(acc) else (min(x, acc), max(x, acc))
    if lo != hi or math.isfinite(lo):
        return math.log1p(math.exp(lo - hi)) + hi
    return x


_STEPS = {
    "sum": (0, lambda acc, v: acc + v),
    "prod": (1, lambda acc, v: acc * v),
    "logsumexp": (-math.inf, lambda acc, v: _log_add_exp(v, acc)),
}


def _scan(x, dim, op, reverse):
    """out[k] = op(x[0], ..., x[k]) along dim, or op(x[k], ..., x[n-1]) when `reverse`; x's dtype."""
    start, step = _STEPS[op]
    values = read(x)
    out = [0] * len(values)
    for line in _lines(x._shape, dim):
        acc = start
        for at in reversed(line) if reverse else line:
            acc = step(acc, values[at])
            out[at] = acc
    return new_tensor(out, x._shape, x._dtype)


def _scan_dtype(x, dtype, kernel):
    """cumsum and cumprod compute in `dtype`: by default x's, int64 for integers and bools."""
    out = dtype or (x._dtype if x._dtype.is_floating_point else int64)
    if out is bool_:
        raise _not_implemented_for(kernel, out)
    return out


def _converted(x, dtype):
    """x in the scan's dtype (an integer result of an x that requires grad is refused when it is
    recorded: check_differentiable_output)."""
    with no_grad():
        return to_dtype(x, dtype)


class _Scan(Function):
    """A scan of `src` (x converted to the result's dtype, or x itself), recorded for x."""

    def forward(self, x, src, dim, reverse=False):
        self.dim, self.reverse = dim, reverse
        return self.scan(src)

    @classmethod
    def along(cls, x, dim, reverse=False, src=None):
        return cls.run(x, src=x if src is None else src, dim=dim, reverse=reverse)


class CumsumBackward0(_Scan):
    """cumsum: the gradient is the cumulative sum of the gradient the other way."""

    def scan(self, src):
        return _scan(src, self.dim, "sum", self.reverse)

    def backward(self, g):
        return to_dtype(CumsumBackward0.along(g, self.dim, not self.reverse), self.inputs[0][1])


def cumsum(x, dim, dtype):
    d = wrap_dim(dim, x.dim())
    return CumsumBackward0.along(x, d, src=_converted(x, _scan_dtype(x, dtype, "cumsum_out_cpu")))


class LogcumsumexpBackward0(_Scan):
    """PyTorch's logcumsumexp_backward: at k, the sum over j >= k of g[j] exp(x[k] - out[j]), taken
    in log space, for the positive and negative parts of g apart."""

    def scan(self, src):
        out = _scan(src, self.dim, "logsumexp", self.reverse)
        self.save(src)
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        x, out = self.unpack(0), self.unpack(1)  # first: a saved tensor changed in place is an error here too
        if g.dim() == 0 or g.numel() == 0:
            return g
        lowest = full((), _LOWEST[g._dtype], g._dtype)
        log_abs = g.abs().log()

        def part(sign):
            log_g = where(sign, log_abs, lowest)
            return (LogcumsumexpBackward0.along(log_g - out, self.dim, not self.reverse) + x).exp()

        return part(g > 0) - part(g < 0)


def logcumsumexp(x, dim):
    d = wrap_dim(dim, x.dim())
    if not x._dtype.is_floating_point:
        raise _not_implemented_for("logcumsumexp_out_cpu", x._dtype)
    return LogcumsumexpBackward0.along(x, d)


class CumprodBackward0(_Scan):
    """PyTorch's cumprod_backward: without zeros in the input, the reversed cumulative sum of out * g,
    divided by x; with zeros (where that divides by zero), at k the sum over j >= k of g[j] times the
    product of x[0..j] without x[k], one k at a time."""

    def scan(self, src):
        out = _scan(src, self.dim, "prod", False)
        self.save(src)
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        x, out = self.unpack(0), self.unpack(1)
        return to_dtype(self.grad(x, out, g), self.inputs[0][1])

    def grad(self, x, out, g):
        dim = self.dim
        if x.numel() <= 1 or x._shape[dim] == 1:
            return g
        if 0 not in read(x):
            w = out * g
            return CumsumBackward0.along(w, dim, True) / x
        if not is_grad_enabled():
            return _cumprod_grad_with_zeros(x, out, g, dim)
        n = x._shape[dim]
        along = [1] * x.dim()
        along[dim] = n
        positions = new_tensor(list(range(n)), along, int64)
        one, zero = full((), 1, x._dtype), full((), 0, g._dtype)
        columns = []
        for k in range(n):
            without_k = CumprodBackward0.along(where(positions == k, one, x), dim)
            columns.append(sum(where(positions >= k, without_k * g, zero), [dim], True))
        return cat(columns, dim)


def _cumprod_grad_with_zeros(x, out, g, dim):
    """PyTorch's O(n) case with zeros, for a backward that records nothing (its derivative is not the
    second derivative of cumprod). On each line, z1 and z2 its first two zeros: at k < z1, the sum over
    k <= j < z1 of out[j] g[j], over x[k]; at z1, the product of x before z1 times the sum over
    z1 <= j < z2 of g[j] times the product of x(z1, j]; after z1, zero (g there is never read)."""
    xs, outs, gs = read(x), read(out), read(g)
    grad = [0.0] * len(xs)
    for line in _lines(x._shape, dim):
        z1 = next((i for i, p in enumerate(line) if xs[p] == 0), len(line))
        tail = 0.0
        for p in reversed(line[:z1]):
            tail += outs[p] * gs[p]
            grad[p] = tail / xs[p]
        if z1 == len(line):
            continue
        total, product = gs[line[z1]], 1.0
        for p in line[z1 + 1 :]:
            if xs[p] == 0:
                break
            product *= xs[p]
            total += gs[p] * product
        grad[line[z1]] = (1.0 if z1 == 0 else outs[line[z1 - 1]]) * total
    return new_tensor(grad, x._shape, g._dtype)


def cumprod(x, dim, dtype):
    d = wrap_dim(dim, x.dim())
    return CumprodBackward0.along(x, d, src=_converted(x, _scan_dtype(x, dtype, "cumprod_out_cpu")))


def _check_scan_dtype(self, dtype):
    """In place, the scan runs in self's own dtype (a bool self is refused by the kernel)."""
    if dtype is not None and dtype is not self._dtype:
        raise RuntimeError(
            f"Bad in-place call: input tensor dtype {_c_type_name(self._dtype)} and output tensor dtype "
            f"{_c_type_name(dtype)} should match"
        )


class _InOwnDtype:
    """The out-of-place scan that _apply_inplace runs for cumsum_ and cumprod_: in self's dtype."""

    def __init__(self, scan):
        self.scan = scan

    def run(self, x, dim):
        return self.scan(x, dim, x._dtype)


def cumsum_(self, dim, dtype):
    _check_scan_dtype(self, dtype)
    return _apply_inplace(_InOwnDtype(cumsum), self, (), False, dim=dim)


def cumprod_(self, dim, dtype):
    _check_scan_dtype(self, dtype)
    return _apply_inplace(_InOwnDtype(cumprod), self, (), True, dim=dim)


class CummaxBackward0(Function):
    """cummax: values and the index each value came from (the latest of equal values, and of NaNs,
    which win). The gradient goes back to those indices."""

    want_max = True

    def forward(self, x, dim):
        self.dim = wrap_dim(dim, x.dim())
        values = read(x)
        best, at = [0] * len(values), [0] * len(values)
        for line in _lines(x._shape, self.dim):
            top, top_at = None, 0
            for i, p in enumerate(line):
                v = values[p]
                if i == 0 or v != v or (top == top and (v >= top if self.want_max else v <= top)):
                    top, top_at = v, i
                best[p], at[p] = top, top_at
        indices = new_tensor(at, x._shape, int64)
        self.save(indices, is_output=True)
        self.save(x)  # as PyTorch's node: only its version matters
        return new_tensor(best, x._shape, x._dtype), indices

    def backward(self, g):
        shape = self.inputs[0][0]
        indices, _ = self.unpack(0), self.unpack(1)
        if not shape or g.numel() == 0:
            return g
        where_to = [  # index_put_'s coordinates: the saved indices along dim, every position elsewhere
            indices if d == self.dim else reshape(new_tensor(list(range(n)), (n,), int64), _along(len(shape), d, n))
            for d, n in enumerate(shape)
        ]
        return index_put_(full(shape, 0, g._dtype), where_to, g, True)


def _along(ndim, dim, n):
    along = [1] * ndim
    along[dim] = n
    return along


class CumminBackward0(CummaxBackward0):
    """cummin: as cummax"""

    want_max = False


def cummax(x, dim):
    return CummaxBackward0.run(x, dim=dim)


def cummin(x, dim):
    return CumminBackward0.run(x, dim=dim)
