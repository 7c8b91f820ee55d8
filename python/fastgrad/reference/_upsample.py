"""F.interpolate's nearest, nearest-exact and (bi/tri)linear resampling of the 1 to 3 spatial dims
of an (N, C, *spatial) input, the twin of csrc/ops/upsample.cpp. Along each axis, PyTorch's CPU rule
for the source positions (in its opmath type: float32 arithmetic emulated by rounding each step)
becomes a table of taps (input index, weight) per output; each plane is resampled one axis at a
time, the last first, an identity axis skipped, in Python floats (double) rounded once when stored.

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
        return self.size == self.out and all(taps == [j] for j, taps in enumerate(self.index))


def _source_scale(r, size, out, factor):
    """PyTorch's compute_scales_value (r: its opmath type's rounding)."""
    return r(1.0 / factor) if factor > 0 else r(size / out)


def _linear_source(r, o, size, out, factor, align_corners):
    """PyTorch's area_pixel_compute_source_index (not cubic)."""
    if align_corners:
        return r((r((size - 1) / (out - 1)) if out > 1 else 0.0) * o)
    source = r(r(_source_scale(r, size, out, factor) * r(o + 0.5)) - 0.5)
    return max(source, 0.0)


def _floorf(value, size):
    """The source's floor as PyTorch takes it (floorf: rounded to float32 first), below size."""
    return min(math.floor(_float32(value)), size - 1)


def _nearest_source(r, mode, spatial, o, size, out, factor):
    if mode == "nearest-exact":
        return _floorf(_linear_source(r, o, size, out, factor, False) + 0.5, size)
    if spatial == 2:  # nearest_idx, in float32
        if out == size:
            return o
        if out == 2 * size:
            return o >> 1
        return _floorf(_float32(o * _source_scale(_float32, size, out, factor)), size)
    return _floorf(r(o * _source_scale(r, size, out, factor)), size)


def _axis(r, mode, spatial, size, out, factor, align_corners):
    if mode != "linear" or size == out:  # a linear axis of unchanged size is copied
        index = [o if mode == "linear" else _nearest_source(r, mode, spatial, o, size, out, factor) for o in range(out)]
        return _Axis(size, out, [[at] for at in index], [[1.0]] * out)
    index, weight = [], []
    for o in range(out):
        source = _linear_source(r, o, size, out, factor, align_corners)
        low = _floorf(source, size)
        lam = min(max(r(source - low), 0.0), 1.0)
        index.append([low, low + (low < size - 1)])
        weight.append([r(1.0 - lam), lam])
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

    def __init__(self, mode, size, out, scales, align_corners):
        self.mode, self.size, self.out, self.scales, self.align_corners = mode, size, out, scales, align_corners

    def axes(self, dtype):
        """(axis, taps) of the axes that are not the identity, the last axis first."""
        r = _double if dtype is float64 else _float32
        spatial, found = len(self.size), []
        for d in reversed(range(spatial)):
            factor = self.scales[d] if self.scales else 0.0
            axis = _axis(r, self.mode, spatial, self.size[d], self.out[d], factor, self.align_corners)
            if not axis.identity():
                found.append((d, axis))
        return found

    def node(self, backward):
        name = {"nearest": "Nearest", "nearest-exact": "NearestExact"}.get(self.mode)
        name = name or ("Linear", "Bilinear", "Trilinear")[len(self.size) - 1]
        return _NODES[f"Upsample{name}{len(self.size)}DBackward{'Backward' if backward else ''}0"]


def _check_type(x, mode):
    if compute_type(x._dtype) not in (float32, float64):
        kernel = "compute_indices_weights_linear" if mode == "linear" else "compute_indices_weights_nearest"
        raise _not_implemented_for(kernel, x._dtype)


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
        _check_type(x, resampling.mode)
        self.resampling = r = resampling
        values = _planes(x, r.size, r.axes(compute_type(x._dtype)), _resample_axis, True)
        return new_tensor(values, (*x._shape[:2], *r.out), x._dtype)

    def backward(self, grad):
        return self.resampling.node(True).run(grad, resampling=self.resampling)


class _UpsampleBackward(Function):
    def forward(self, grad, resampling):
        _check_type(grad, resampling.mode)
        self.resampling = r = resampling
        axes = list(reversed(r.axes(compute_type(grad._dtype))))
        values = _planes(grad, r.out, axes, _spread_axis, False)
        return new_tensor(values, (*grad._shape[:2], *r.size), grad._dtype)

    def backward(self, gg):
        return self.resampling.node(False).run(gg, resampling=self.resampling)


_NODES = {
    f"Upsample{name}{spatial}DBackward{twice}0": type(
        f"Upsample{name}{spatial}DBackward{twice}0", (_UpsampleBackward if twice else _Upsample,), {}
    )
    for spatial, names in (
        (1, ("Nearest", "NearestExact", "Linear")),
        (2, ("Nearest", "NearestExact", "Bilinear")),
        (3, ("Nearest", "NearestExact", "Trilinear")),
    )
    for name in names
    for twice in ("", "Backward")
}


def upsample(x, mode, output_size, scales, align_corners):
    """The primitive, under the core's name and signature."""
    spatial = len(output_size)
    if not 1 <= spatial <= 3 or x.dim() != spatial + 2 or (scales and len(scales) != spatial):
        raise RuntimeError("upsample: expected an (N, C, *spatial) input with 1 to 3 spatial dims, and a size for each")
    if mode not in ("nearest", "nearest-exact", "linear"):
        raise ValueError(f"upsample: unknown mode '{mode}'")
    size = x._shape[2:]
    if min(size) < 1 or min(output_size) < 1:
        raise RuntimeError("upsample: input and output sizes should be greater than 0")
    resampling = _Resampling(mode, tuple(size), tuple(output_size), tuple(scales), align_corners)
    return resampling.node(False).run(x, resampling=resampling)
