"""Pooling over the last two dims of a (C, H, W) or (N, C, H, W) input, the twin of
csrc/ops/pool.cpp: max pooling (values and int64 indices into each H x W plane), average pooling and
their adaptive forms, and max_unpool2d. Along each axis, the window rule becomes a table of (first
input, taps, step, padded span); every output element then reads its window of its plane. Sums are
taken in Python floats (double) in the core's order and rounded once when stored.

Max pooling's gradient scatters (adds) the incoming gradient at the saved indices, and a scatter's
gradient is the gather at the same indices, and back; average pooling's gradient spreads each
output's gradient over its window, and that op's gradient is the average pool again. PyTorch's
argument checks are the caller's (nn/functional.py); the checks here only keep direct calls
well-defined."""

import math

from .._types import compute_type, float32, float64, int64
from ._autograd import Function
from ._nn import _not_implemented_for
from ._tensor import full, new_tensor, read


class _Axis:
    """The windows along one axis: output o reads the inputs first[o] + t * step for t < taps[o]; an
    average that counts the padding divides by span[o]."""

    def __init__(self, step=1):
        self.first, self.taps, self.span, self.step = [], [], [], step

    def add(self, first, taps, span):
        self.first.append(first)
        self.taps.append(taps)
        self.span.append(span)


def _pooled_size(size, k, s, p, d, ceil_mode):
    """PyTorch's pooling_output_shape: with ceil_mode, the last window must start inside the input
    or its left padding."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _sliding(size, k, s, p, d, ceil_mode, average):
    axis = _Axis(d)
    for o in range(_pooled_size(size, k, s, p, d, ceil_mode)):
        begin = o * s - p
        if average:
            padded_end = min(begin + k, size + p)
            end = min(padded_end, size)
            span, begin = padded_end - begin, max(begin, 0)
            axis.add(begin, max(end - begin, 0), span)
            continue
        end = min(begin + (k - 1) * d + 1, size)
        if begin < 0:
            begin += (-begin + d - 1) // d * d  # the first tap inside the input
        taps = (end - begin + d - 1) // d if end > begin else 0
        axis.add(begin, taps, taps)
    return axis


def _adaptive(size, out):
    """PyTorch's adaptive windows: output o reads [floor(o * size / out), ceil((o + 1) * size / out))."""
    axis = _Axis()
    for o in range(out):
        begin, end = o * size // out, -(-(o + 1) * size // out)
        axis.add(begin, end - begin, end - begin)
    return axis


def _windows(wy, wx):
    """(oy, ox) of every output of a plane, row-major."""
    return ((oy, ox) for oy in range(len(wy.first)) for ox in range(len(wx.first)))


def _taps(wy, wx, width, oy, ox):
    """The in-plane offset of every input that output (oy, ox) reads, row by row."""
    for ty in range(wy.taps[oy]):
        row = (wy.first[oy] + ty * wy.step) * width
        for tx in range(wx.taps[ox]):
            yield row + wx.first[ox] + tx * wx.step


def _zeros(shape, dtype):
    return full(shape, 0.0, dtype)


def _planes(shape):
    return math.prod(shape[:-2])


def _with_plane(shape, h, w):
    return (*shape[:-2], h, w)


def _check_input(x, op):
    if x.dim() not in (3, 4):
        raise RuntimeError(f"{op}: expected a 3-D or 4-D input")


def _check_output_size(h, w, op, adaptive):
    """A sliding pool's output has at least one element per plane; an adaptive one may have none."""
    if (h < 0 or w < 0) if adaptive else (h < 1 or w < 1):
        raise RuntimeError(f"{op}: output size is too small")


def _check_params(kernel, stride, padding, dilation, op):
    limit = 2**31
    for k, s, p, d in zip(kernel, stride, padding, dilation):
        if k < 1 or s < 1 or p < 0 or d < 1 or max(k, s, p, d) > limit:
            raise RuntimeError(f"{op}: invalid kernel size, stride, padding or dilation")


def _check_pooled_type(x, kernel, integers):
    computed = compute_type(x._dtype)
    if computed not in (float32, float64) and not (integers and computed is int64):
        raise _not_implemented_for(kernel, x._dtype)


def _check_plane_indices(indices, h, w):
    for i in read(indices):
        if not 0 <= i < h * w:
            raise RuntimeError(f"Found an invalid max index: {i} (output volumes are of size {h}x{w})")


# ---- max pooling: scatter and gather at the indices


class _ScatterPlanes(Function):
    """out (values' leading dims, h, w) = 0, then out[plane][indices[i]] = values[i] (added with
    `accumulate`) for the elements i of each plane. A max pool's gradient also takes the pool's
    input (an edge with a zero gradient, as PyTorch's max_pool2d_with_indices_backward(grad, self))."""

    def forward(self, values, *pool_input, indices, h, w, accumulate):
        if values.dim() < 2 or indices._shape != values._shape or indices._dtype is not int64:
            raise RuntimeError("scatter_planes: expected values and int64 indices of the same shape")
        _check_pooled_type(values, "max_unpool2d", False)
        _check_plane_indices(indices, h, w)
        vs, at = read(values), read(indices)
        plane = values._shape[-2] * values._shape[-1]
        out = []
        for p in range(_planes(values._shape)):
            acc = [0.0] * (h * w)
            for i in range(p * plane, (p + 1) * plane):
                acc[at[i]] = acc[at[i]] + vs[i] if accumulate else float(vs[i])
            out += acc
        self.save(indices)
        return new_tensor(out, _with_plane(values._shape, h, w), values._dtype)

    def backward(self, gg):
        grad = GatherBackward0.run(gg, indices=self.unpack(0)) if self.needs_input_grad(0) else None
        if len(self.inputs) == 1:
            return grad
        return grad, _zeros(*self.inputs[1]) if self.needs_input_grad(1) else None


class MaxPool2DWithIndicesBackwardBackward0(_ScatterPlanes):
    pass


class AdaptiveMaxPool2DBackwardBackward0(_ScatterPlanes):
    pass


class MaxUnpool2DBackward0(_ScatterPlanes):
    pass


class ScatterAddBackward0(_ScatterPlanes):
    pass


class _SelectPlanes(Function):
    """A node whose gradient is scattered (added) at its saved indices into planes of the input's
    size, by `scatter` (a _ScatterPlanes)."""

    scatter = ScatterAddBackward0

    def backward(self, grad):
        pool_input = self._saved[1:] and [self.unpack(1)]  # a max pool's input (saved after the indices)
        return self.scatter.run(grad, *pool_input, indices=self.unpack(0), h=self.in_h, w=self.in_w, accumulate=True)


class GatherBackward0(_SelectPlanes):
    """out[i] = values[plane][indices[i]] for the elements i of each plane of `indices`."""

    def forward(self, values, indices):
        if (
            values.dim() != indices.dim()
            or values.dim() < 2
            or indices._dtype is not int64
            or values._shape[:-2] != indices._shape[:-2]
        ):
            raise RuntimeError("gather_planes: expected values and int64 indices with the same leading dims")
        self.in_h, self.in_w = values._shape[-2:]
        _check_plane_indices(indices, self.in_h, self.in_w)
        vs, at = read(values), read(indices)
        plane, in_plane = indices._shape[-2] * indices._shape[-1], self.in_h * self.in_w
        out = [vs[(i // plane) * in_plane + at[i]] if plane else 0 for i in range(len(at))]
        self.save(indices)
        return new_tensor(out, indices._shape, values._dtype)


class _IndexedMaxPool(_SelectPlanes):
    """The largest value of each window and its offset in the plane. NaN is the largest (the last NaN
    of the window wins) and the first of equal maxima wins, as PyTorch."""

    def forward(self, x, out_h, out_w, windows, kernel):
        _check_pooled_type(x, kernel, True)
        self.in_h, self.in_w = h, w = x._shape[-2:]
        if h < 1 or w < 1:
            raise RuntimeError(f"{kernel}: expected a non-empty input plane")
        wy, wx = windows(h, w)
        xs = read(x)
        lowest = -math.inf if x._dtype.is_floating_point else -(2**63)
        out, indices = [], []
        for p in range(_planes(x._shape)):
            base = p * h * w
            for oy, ox in _windows(wy, wx):
                best, best_at = lowest, wy.first[oy] * w + wx.first[ox]
                for at in _taps(wy, wx, w, oy, ox):
                    v = xs[base + at]
                    if v > best or v != v:
                        best, best_at = v, at
                out.append(best)
                indices.append(best_at)
        shape = _with_plane(x._shape, out_h, out_w)
        indices = new_tensor(indices, shape, int64)
        self.save(indices, is_output=True)
        self.save(x)
        return new_tensor(out, shape, x._dtype), indices


class MaxPool2DWithIndicesBackward0(_IndexedMaxPool):
    scatter = MaxPool2DWithIndicesBackwardBackward0


class AdaptiveMaxPool2DBackward0(_IndexedMaxPool):
    scatter = AdaptiveMaxPool2DBackwardBackward0


# ---- average pooling


class _AveragePool:
    """What an average pool needs to rebuild its windows for an input plane of any size: sliding
    (kernel, stride, padding, ceil_mode) or adaptive (the output size), and its divisor rule: a
    divisor > 0 overrides it; else count_include_pad divides by the padded span, otherwise by the taps."""

    def __init__(self, adaptive, params=None, out_size=None, count_include_pad=False, divisor=0):
        self.adaptive, self.params, self.out_size = adaptive, params, out_size
        self.count_include_pad, self.divisor = count_include_pad, divisor

    def output_size(self, h, w):
        if self.adaptive:
            return self.out_size
        (kh, kw), (sh, sw), (ph, pw), ceil_mode = self.params
        return _pooled_size(h, kh, sh, ph, 1, ceil_mode), _pooled_size(w, kw, sw, pw, 1, ceil_mode)

    def windows(self, h, w):
        if self.adaptive:
            return _adaptive(h, self.out_size[0]), _adaptive(w, self.out_size[1])
        (kh, kw), (sh, sw), (ph, pw), ceil_mode = self.params
        return _sliding(h, kh, sh, ph, 1, ceil_mode, True), _sliding(w, kw, sw, pw, 1, ceil_mode, True)

    def divisor_of(self, wy, wx, oy, ox):
        if self.divisor > 0:
            return float(self.divisor)
        if self.count_include_pad:
            return float(wy.span[oy] * wx.span[ox])
        return float(wy.taps[oy] * wx.taps[ox])


class _AvgPoolForward(Function):
    def forward(self, x, pool):
        op = "adaptive_avg_pool2d" if pool.adaptive else "avg_pool2d"
        _check_input(x, op)
        _check_pooled_type(x, op, False)
        self.pool = pool
        h, w = x._shape[-2:]
        out_h, out_w = pool.output_size(h, w)
        wy, wx = pool.windows(h, w)
        xs, out = read(x), []
        for p in range(_planes(x._shape)):
            base = p * h * w
            for oy, ox in _windows(wy, wx):
                total = 0.0
                for at in _taps(wy, wx, w, oy, ox):
                    total += xs[base + at]
                # A window wholly in the padding gives 0, as PyTorch (it skips the division).
                empty_window = wy.taps[oy] == 0 or wx.taps[ox] == 0
                out.append(0.0 if empty_window else total / pool.divisor_of(wy, wx, oy, ox))
        self.save(x)
        return new_tensor(out, _with_plane(x._shape, out_h, out_w), x._dtype)

    def backward(self, grad):
        node = AdaptiveAvgPool2DBackwardBackward0 if self.pool.adaptive else AvgPool2DBackwardBackward0
        return node.run(grad, self.unpack(0), pool=self.pool)


class AvgPool2DBackward0(_AvgPoolForward):
    pass


class AdaptiveAvgPool2DBackward0(_AvgPoolForward):
    pass


class _AvgPoolBackward(Function):
    """Each output's gradient over its divisor, added to every input of its window. Takes the pool's
    input too (an edge with a zero gradient, as PyTorch's avg_pool2d_backward(grad, self))."""

    def forward(self, grad, pool_input, pool):
        self.pool = pool
        h, w = pool_input._shape[-2:]
        wy, wx = pool.windows(h, w)
        gs, out = read(grad), []
        for p in range(_planes(grad._shape)):
            acc = [0.0] * (h * w)
            g = iter(gs[p * len(wy.first) * len(wx.first) :])
            for oy, ox in _windows(wy, wx):
                share = next(g) / pool.divisor_of(wy, wx, oy, ox)
                for at in _taps(wy, wx, w, oy, ox):
                    acc[at] += share
            out += acc
        return new_tensor(out, _with_plane(grad._shape, h, w), grad._dtype)

    def backward(self, gg):
        node = AdaptiveAvgPool2DBackward0 if self.pool.adaptive else AvgPool2DBackward0
        return (
            node.run(gg, pool=self.pool) if self.needs_input_grad(0) else None,
            _zeros(*self.inputs[1]) if self.needs_input_grad(1) else None,
        )


class AvgPool2DBackwardBackward0(_AvgPoolBackward):
    pass


class AdaptiveAvgPool2DBackwardBackward0(_AvgPoolBackward):
    pass


# ---- the primitives, under the core's names and signatures


def max_pool2d(x, kh, kw, sh, sw, ph, pw, dh, dw, ceil_mode):
    _check_input(x, "max_pool2d")
    kernel, stride, padding, dilation = (kh, kw), (sh, sw), (ph, pw), (dh, dw)
    _check_params(kernel, stride, padding, dilation, "max_pool2d")
    h, w = x._shape[-2:]
    sizes = [_pooled_size(n, *args, ceil_mode) for n, *args in zip((h, w), kernel, stride, padding, dilation)]
    _check_output_size(*sizes, "max_pool2d", False)

    def windows(h, w):
        return tuple(
            _sliding(n, *args, ceil_mode, False) for n, *args in zip((h, w), kernel, stride, padding, dilation)
        )

    return MaxPool2DWithIndicesBackward0.run(x, out_h=sizes[0], out_w=sizes[1], windows=windows, kernel="max_pool2d")


def adaptive_max_pool2d(x, out_h, out_w):
    _check_input(x, "adaptive_max_pool2d")
    _check_output_size(out_h, out_w, "adaptive_max_pool2d", True)
    return AdaptiveMaxPool2DBackward0.run(
        x,
        out_h=out_h,
        out_w=out_w,
        windows=lambda h, w: (_adaptive(h, out_h), _adaptive(w, out_w)),
        kernel="adaptive_max_pool2d",
    )


def avg_pool2d(x, kh, kw, sh, sw, ph, pw, ceil_mode, count_include_pad, divisor_override):
    _check_input(x, "avg_pool2d")
    _check_params((kh, kw), (sh, sw), (ph, pw), (1, 1), "avg_pool2d")
    if divisor_override < 0:
        raise RuntimeError("avg_pool2d: invalid divisor")
    pool = _AveragePool(False, ((kh, kw), (sh, sw), (ph, pw), ceil_mode), None, count_include_pad, divisor_override)
    _check_output_size(*pool.output_size(*x._shape[-2:]), "avg_pool2d", False)
    return AvgPool2DBackward0.run(x, pool=pool)


def adaptive_avg_pool2d(x, out_h, out_w):
    _check_input(x, "adaptive_avg_pool2d")
    _check_output_size(out_h, out_w, "adaptive_avg_pool2d", True)
    return AdaptiveAvgPool2DBackward0.run(x, pool=_AveragePool(True, out_size=(out_h, out_w)))


def max_unpool2d(x, indices, out_h, out_w):
    _check_input(x, "max_unpool2d")
    if out_h < 0 or out_w < 0:
        raise RuntimeError("max_unpool2d: invalid output size")
    return MaxUnpool2DBackward0.run(x, indices=indices, h=out_h, w=out_w, accumulate=False)
