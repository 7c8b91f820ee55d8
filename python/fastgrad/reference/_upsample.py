"""F.interpolate's nearest, nearest-exact, (bi/tri)linear and bicubic resampling of the 1 to 3
spatial dims of an (N, C, *spatial) input, antialiased or not (bilinear and bicubic), the twin of
csrc/ops/upsample.cpp. Along each axis, PyTorch's CPU rule for the source positions (in its opmath
type: float32 arithmetic emulated by rounding each step) becomes a table of taps (input index,
weight) per output; each plane is resampled one axis at a time, the last first, an identity axis
skipped, in Python floats (double) rounded once when stored.

The backward spreads each output's gradient over its taps, the transpose, the first axis first, in
the same order as the core; it is linear in the gradient, and its gradient is the forward again.
PyTorch's argument checks are the caller's (nn/functional.py); the checks here only keep direct
calls well-defined."""

import math
import struct

from .._types import compute_type, float32, float64
from ._autograd import Function
from ._nn import _not_implemented_for
from ._tensor import new_tensor, read


def _float32(value):
    """value rounded to float32 (one float32 operation on float32 operands, done in double and
    rounded, gives float32's own result)."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _double(value):
    return value


class _Axis:
    """The taps of one axis: output j reads inputs index[j][t] with weight[j][t]."""

    def __init__(self, size, out, index, weight):
        self.size, self.out, self.index, self.weight = size, out, index, weight

    def identity(self):
        """Every output is its own input (a cubic table of an unchanged size has zero weights around it)."""
        return self.size == self.out and all(
            [at for at, w in zip(taps, weights) if w != 0.0] == [j] and 1.0 in weights
            for j, (taps, weights) in enumerate(zip(self.index, self.weight))
        )


def _source_scale(r, size, out, factor):
    """PyTorch's compute_scales_value (r: its opmath type's rounding)."""
    return r(1.0 / factor) if factor > 0 else r(size / out)


def _pixel_scale(r, size, out, factor, align_corners):
    """PyTorch's area_pixel_compute_scale."""
    if align_corners:
        return r((size - 1) / (out - 1)) if out > 1 else 0.0
    return _source_scale(r, size, out, factor)


def _linear_source(r, o, size, out, factor, align_corners, cubic=False):
    """PyTorch's area_pixel_compute_source_index: a negative source clamped to 0 but for cubic."""
    scale = _pixel_scale(r, size, out, factor, align_corners)
    if align_corners:
        return r(scale * o)
    source = r(r(scale * r(o + 0.5)) - 0.5)
    return source if cubic else max(source, 0.0)


def _floor_within(value, lowest, size):
    """The source's floor as PyTorch takes it (floorf: rounded to float32 first), below size and at or
    above lowest (0; -1 for cubic), an infinite or NaN source (a direct call's huge scale) included."""
    value = _float32(value)
    return size - 1 if value >= size - 1 else math.floor(value) if value >= lowest else lowest


def _nearest_source(r, mode, spatial, o, size, out, factor):
    if mode == "nearest-exact":
        return _floor_within(_linear_source(r, o, size, out, factor, False) + 0.5, 0, size)
    if spatial == 2:  # nearest_idx, in float32
        if out == size:
            return o
        if out == 2 * size:
            return o >> 1
        return _floor_within(_float32(o * _source_scale(_float32, size, out, factor)), 0, size)
    return _floor_within(r(o * _source_scale(r, size, out, factor)), 0, size)


def _floor_and_fraction(r, source, lowest, size):
    """PyTorch's guard_index_and_lambda."""
    low = _floor_within(source, lowest, size)
    return low, min(max(r(source - low), 0.0), 1.0)


def _cubic_near(r, x, a):
    """Keys' cubic convolution kernel on [0, 1] (cubic_convolution1, in its operation order)."""
    return r(r(r(r(r(r(a + 2) * x) - r(a + 3)) * x) * x) + 1)


def _cubic_far(r, x, a):
    """... and on [1, 2] (cubic_convolution2)."""
    return r(r(r(r(r(r(a * x) - r(5 * a)) * x) + r(8 * a)) * x) - r(4 * a))


def _antialias_filter(r, mode, x):
    """PyTorch's (Pillow's) antialiasing filters: the triangle, or Keys' cubic with a = -0.5."""
    x = abs(x)
    if mode == "linear":
        return r(1.0 - x) if x < 1.0 else 0.0
    return _cubic_near(r, x, -0.5) if x < 1.0 else _cubic_far(r, x, -0.5) if x < 2.0 else 0.0


def _antialiased_axis(r, mode, size, out, factor, align_corners):
    """PyTorch's _compute_indices_min_size_weights_aa in the storage type: the filter's support widened
    by the downscale factor, the weights normalized; an axis of unchanged size is copied."""
    if size == out:
        return _Axis(size, out, [[o] for o in range(out)], [[1.0]] * out)
    scale = _pixel_scale(r, size, out, factor, align_corners)
    half_width = 2.0 if mode == "cubic" else 1.0
    support = r(half_width * scale) if scale >= 1.0 else r(half_width)
    widest = math.ceil(support) * 2 + 1
    inverse_scale = r(1.0 / scale) if scale >= 1.0 else 1.0
    index, weight = [], []
    for i in range(out):
        center = r(scale * (i + 0.5))
        low = max(int(r(center - support) + 0.5), 0)
        count = min(max(min(int(r(center + support) + 0.5), size) - low, 0), widest)
        w, total = [], 0.0
        for j in range(count):
            w.append(_antialias_filter(r, mode, r((r((low + j) - center) + 0.5) * inverse_scale)))
            total = r(total + w[-1])
        index.append([low + j for j in range(count)] or [min(low, size - 1)])  # PyTorch reads one with weight 0
        weight.append([r(v / total) if total != 0.0 else v for v in w] or [0.0])
    return _Axis(size, out, index, weight)


def _axis(r, mode, spatial, size, out, factor, align_corners):
    """The nearest modes' table, linear's (an axis of unchanged size copied), or cubic's: the 4 inputs
    from the floor - 1 clamped into the axis, weighted by Keys' kernel with a = -0.75."""
    if mode in ("nearest", "nearest-exact") or size == out and mode == "linear":
        index = [o if mode == "linear" else _nearest_source(r, mode, spatial, o, size, out, factor) for o in range(out)]
        return _Axis(size, out, [[at] for at in index], [[1.0]] * out)
    index, weight = [], []
    for o in range(out):
        if mode == "linear":
            low, lam = _floor_and_fraction(r, _linear_source(r, o, size, out, factor, align_corners), 0, size)
            index.append([low, low + (low < size - 1)])
            weight.append([r(1.0 - lam), lam])
            continue
        low, t = _floor_and_fraction(r, _linear_source(r, o, size, out, factor, align_corners, cubic=True), -1, size)
        far = r(1.0 - t)
        index.append([max(min(low + k - 1, size - 1), 0) for k in range(4)])
        weight.append(
            [
                _cubic_far(r, r(t + 1.0), -0.75),
                _cubic_near(r, t, -0.75),
                _cubic_near(r, far, -0.75),
                _cubic_far(r, r(far + 1.0), -0.75),
            ]
        )
    return _Axis(size, out, index, weight)


def _resample_axis(src, outer, inner, axis):
    """(outer, size, inner) -> (outer, out, inner): the weighted taps added in order."""
    dst = []
    for o in range(outer):
        base = o * axis.size * inner
        for taps, weights in zip(axis.index, axis.weight):
            rows = [(base + at * inner, w) for at, w in zip(taps, weights)]
            for i in range(inner):
                total = rows[0][1] * src[rows[0][0] + i]
                for start, w in rows[1:]:
                    total += w * src[start + i]
                dst.append(total)
    return dst


def _spread_axis(src, outer, inner, axis):
    """The transpose of _resample_axis: (outer, out, inner) -> (outer, size, inner)."""
    dst = [0.0] * (outer * axis.size * inner)
    for o in range(outer):
        base, row = o * axis.size * inner, o * axis.out * inner
        for j, (taps, weights) in enumerate(zip(axis.index, axis.weight)):
            for at, w in zip(taps, weights):
                start = base + at * inner
                for i in range(inner):
                    dst[start + i] += w * src[row + j * inner + i]
    return dst


class _Resampling:
    """The mode, spatial sizes in and out, scale factors (0: none) and align_corners of one upsampling."""

    def __init__(self, mode, size, out, scales, align_corners, antialias):
        self.mode, self.size, self.out, self.scales = mode, size, out, scales
        self.align_corners, self.antialias = align_corners, antialias

    def axes(self, dtype):
        """(axis, taps) of the axes that are not the identity, the last axis first."""
        r = _double if dtype is float64 else _float32
        spatial, found = len(self.size), []
        for d in reversed(range(spatial)):
            factor = self.scales[d] if self.scales else 0.0
            if self.antialias:
                axis = _antialiased_axis(r, self.mode, self.size[d], self.out[d], factor, self.align_corners)
            else:
                axis = _axis(r, self.mode, spatial, self.size[d], self.out[d], factor, self.align_corners)
            if not axis.identity():
                found.append((d, axis))
        return found

    def node(self, backward):
        name = {"nearest": "Nearest", "nearest-exact": "NearestExact", "cubic": "Bicubic"}.get(self.mode)
        name = name or ("Linear", "Bilinear", "Trilinear")[len(self.size) - 1]
        aa = "Aa" if self.antialias else ""
        return _NODES[f"Upsample{name}{len(self.size)}D{aa}Backward{'Backward' if backward else ''}0"]


def _check_type(x, resampling):
    """PyTorch's kernels' dtypes: float16 and bfloat16 computed in float32, but antialiased."""
    if resampling.antialias and x._dtype not in (float32, float64):
        raise _not_implemented_for("compute_index_ranges_weights", x._dtype)
    if compute_type(x._dtype) not in (float32, float64):
        kernel = {"linear": "linear", "cubic": "cubic"}.get(resampling.mode, "nearest")
        raise _not_implemented_for(f"compute_indices_weights_{kernel}", x._dtype)


def _planes(x, sizes, axes, step, forward):
    """step(values, outer, inner, axis) over each (N, C) plane of x (spatial `sizes`), axis by axis."""
    values, plane, out = read(x), math.prod(sizes), []
    for p in range(x._shape[0] * x._shape[1]):
        current, shape = values[p * plane : (p + 1) * plane], list(sizes)
        for d, axis in axes:
            current = step(current, math.prod(shape[:d]), math.prod(shape[d + 1 :]), axis)
            shape[d] = axis.out if forward else axis.size
        out += current
    return out


class _Upsample(Function):
    def forward(self, x, resampling):
        _check_type(x, resampling)
        self.resampling = r = resampling
        values = _planes(x, r.size, r.axes(compute_type(x._dtype)), _resample_axis, True)
        return new_tensor(values, (*x._shape[:2], *r.out), x._dtype)

    def backward(self, grad):
        return self.resampling.node(True).run(grad, resampling=self.resampling)


class _UpsampleBackward(Function):
    def forward(self, grad, resampling):
        _check_type(grad, resampling)
        self.resampling = r = resampling
        axes = list(reversed(r.axes(compute_type(grad._dtype))))
        values = _planes(grad, r.out, axes, _spread_axis, False)
        return new_tensor(values, (*grad._shape[:2], *r.size), grad._dtype)

    def backward(self, gg):
        return self.resampling.node(False).run(gg, resampling=self.resampling)


_NODES = {
    f"{kind}Backward{twice}0": type(f"{kind}Backward{twice}0", (_UpsampleBackward if twice else _Upsample,), {})
    for kind in (
        *(f"Upsample{name}1D" for name in ("Nearest", "NearestExact", "Linear")),
        *(f"Upsample{name}2D" for name in ("Nearest", "NearestExact", "Bilinear", "Bicubic")),
        *(f"Upsample{name}2DAa" for name in ("Bilinear", "Bicubic")),
        *(f"Upsample{name}3D" for name in ("Nearest", "NearestExact", "Trilinear")),
    )
    for twice in ("", "Backward")
}


def upsample(x, mode, output_size, scales, align_corners, antialias):
    """The primitive, under the core's name and signature."""
    spatial = len(output_size)
    if not 1 <= spatial <= 3 or x.dim() != spatial + 2 or (scales and len(scales) != spatial):
        raise RuntimeError("upsample: expected an (N, C, *spatial) input with 1 to 3 spatial dims, and a size for each")
    if mode not in ("nearest", "nearest-exact", "linear", "cubic"):
        raise ValueError(f"upsample: unknown mode '{mode}'")
    if (mode == "cubic" or antialias) and spatial != 2:
        raise RuntimeError("upsample: cubic and antialiased resampling take 2 spatial dims")
    if antialias and mode not in ("linear", "cubic"):
        raise RuntimeError("upsample: antialiasing is for the linear and cubic modes")
    size = x._shape[2:]
    if min(size) < 1 or min(output_size) < 1:
        raise RuntimeError("upsample: input and output sizes should be greater than 0")
    if antialias and any(factor > 0 and not 1.0 / factor <= 2.0 * n for n, factor in zip(size, scales)):
        raise RuntimeError("upsample: an antialiased scale factor should be at least 1 / (2 * input size)")
    resampling = _Resampling(mode, tuple(size), tuple(output_size), tuple(scales), align_corners, antialias)
    return resampling.node(False).run(x, resampling=resampling)
