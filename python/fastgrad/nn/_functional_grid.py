"""F.affine_grid and F.grid_sample (spatial transformer networks): sampling an image at the points of a
grid of normalised coordinates, as PyTorch 2.13's CPU grid sampler computes it.

Both are compositions of tensor ops (one definition for both backends). grid_sample's node is
PyTorch's (GridSampler2DBackward0 / GridSampler3DBackward0): its backward differentiates the same
composition again, so gradients of gradients work too. The coordinate arithmetic follows PyTorch's
vectorised 2-D CPU kernel (unnormalise as (x + 1) * (size / 2) - 0.5, bilinear weights from
x - floor(x)), so float32 results agree with PyTorch's to rounding.
"""

import itertools
import math
import warnings

from .. import _factories, _prims
from .._grad_mode import enable_grad, is_grad_enabled
from .._methods import where
from ..autograd.function import Function
from ..autograd.gradients import grad as autograd_grad
from fastgrad._types import SCALAR_TYPE_NAME, int64

__all__ = ["affine_grid", "grid_sample"]

_ALIGN_CORNERS_WARNING = (
    "Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. Please specify "
    "align_corners=True if the old behavior is desired. See the documentation of grid_sample for details."
)
_CUBIC_A = -0.75  # PyTorch's cubic convolution coefficient (as its bicubic upsampling)


def _default_align_corners(align_corners):
    if align_corners is None:
        warnings.warn(_ALIGN_CORNERS_WARNING, stacklevel=3)
        return False
    return align_corners


# ---- affine_grid


def _linspace_from_neg_one(theta, steps, align_corners):
    """The normalised coordinates of `steps` pixel centres (their corners' with align_corners)."""
    if steps <= 1:
        return _factories.zeros(max(steps, 1), dtype=theta.dtype)
    points = _factories.linspace(-1, 1, steps, dtype=theta.dtype)
    return points if align_corners else points * ((steps - 1) / steps)


def affine_grid(theta, size, align_corners=None):
    align_corners = _default_align_corners(align_corners)
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    if len(size) == 4:
        if theta.dim() != 3 or theta.shape[-2] != 2 or theta.shape[-1] != 3:
            raise ValueError(
                f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got {theta.shape}."
            )
    elif len(size) == 5:
        if theta.dim() != 3 or theta.shape[-2] != 3 or theta.shape[-1] != 4:
            raise ValueError(
                f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. Got {theta.shape}."
            )
    else:
        raise NotImplementedError(
            "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, respectively. "
            f"Got size {size}."
        )
    spatial = list(size[2:])
    if align_corners and min(spatial) == 1:
        warnings.warn(
            "Since version 1.3.0, affine_grid behavior has changed for unit-size grids when align_corners=True. "
            "This is not an intended use case of affine_grid. See the documentation of affine_grid for details.",
            stacklevel=2,
        )
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    return AffineGridGenerator.apply(theta, [int(n) for n in size], align_corners)


def _base_grid(theta, size, align_corners):
    """(N, prod(spatial), d + 1): each output point's normalised (x, y[, z], 1), x along the last dim."""
    spatial = size[2:]
    d = len(spatial)
    columns = []
    for axis in range(d):  # x, y, z
        points = _linspace_from_neg_one(theta, spatial[d - 1 - axis], align_corners)
        columns.append(points.view([-1] + [1] * axis).expand(spatial))
    columns.append(_factories.ones(spatial, dtype=theta.dtype))
    return _prims.stack(columns, -1).expand([size[0]] + spatial + [d + 1]).reshape(size[0], math.prod(spatial), d + 1)


class AffineGridGenerator(Function):
    """grid = base @ theta^T: linear in theta, whose gradient is grad^T @ base."""

    _node_name = "AffineGridGeneratorBackward0"

    @staticmethod
    def forward(ctx, theta, size, align_corners):
        base = _base_grid(theta, size, align_corners)
        ctx.save_for_backward(base)  # saved, not an attribute: a compiled replay's node saves its own
        # a copy, not a view of the product: PyTorch's grid is an op's own result, which in-place ops may write
        return base.bmm(theta.transpose(1, 2)).view(size[:1] + size[2:] + [len(size) - 2]).clone()

    @staticmethod
    def backward(ctx, grad):
        n, d = grad.shape[0], grad.shape[-1]
        (base,) = ctx.saved_tensors
        return grad.reshape(n, -1, d).transpose(1, 2).bmm(base), None, None


# ---- grid_sample


def _reflected(x, twice_low, twice_high):
    """x reflected into [twice_low / 2, twice_high / 2] by the borders, as many times as it takes."""
    if twice_low == twice_high:
        return x * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    x = (x - low).abs()
    extra = x.fmod(span)
    flips = (x * (1 / span)).floor()
    return where(flips.fmod(2) == 0, extra + low, span - extra + low)


def _padded(x, size, padding_mode, align_corners):
    """Source coordinates moved inside the image by 'border' and 'reflection' padding."""
    if padding_mode == "border":
        return x.clamp(0, size - 1)
    if padding_mode == "reflection":
        x = _reflected(x, 0, 2 * (size - 1)) if align_corners else _reflected(x, -1, 2 * size - 1)
        return x.clamp(0, size - 1)
    return x


def _unnormalized(coordinate, size, align_corners):
    if align_corners:
        return (coordinate + 1) * ((size - 1) / 2)
    return (coordinate + 1) * (size / 2) - 0.5


def _taps(flat_input, positions, spatial):
    """flat_input (N, C, prod(spatial)) at the integer positions (one (N, P) tensor per spatial dim,
    outermost first): (N, C, P), zeros where a position is outside the image."""
    inside, index = None, None
    for position, size in zip(positions, spatial):
        within = (position >= 0) & (position < size)
        inside = within if inside is None else inside & within
        index = position if index is None else index * size + position
    index = where(inside, index, 0)
    n, c = flat_input.shape[:2]
    values = flat_input.gather(2, index.unsqueeze(1).expand(n, c, index.shape[1]))
    return where(inside.unsqueeze(1), values, 0)


def _cubic_coefficients(t):
    """The four cubic-convolution weights of the taps at -1, 0, 1, 2 for the fraction t."""

    def near(u):  # |u| <= 1
        return ((_CUBIC_A + 2) * u - (_CUBIC_A + 3)) * u * u + 1

    def far(u):  # 1 < |u| < 2
        return ((_CUBIC_A * u - 5 * _CUBIC_A) * u + 8 * _CUBIC_A) * u - 4 * _CUBIC_A

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _sampled(input, grid, mode, padding_mode, align_corners):
    """The composition: input (N, C, *spatial) sampled at grid (N, *out, d) -> (N, C, *out)."""
    n, c, spatial = input.shape[0], input.shape[1], list(input.shape[2:])
    out, d = list(grid.shape[1:-1]), len(spatial)
    flat_input = input.reshape(n, c, math.prod(spatial))
    coordinates = grid.reshape(n, math.prod(out), d)
    # the grid's last dim is (x, y[, z]): x indexes the last spatial dim
    sources = [
        _unnormalized(coordinates[..., d - 1 - dim], spatial[dim], align_corners) for dim in range(d)
    ]  # outermost dim first
    if mode == "bicubic":
        lows = [x.detach().floor() for x in sources]
        (ty, tx), (y0, x0) = [x - low for x, low in zip(sources, lows)], lows
        rows = []
        for j, wy in zip(range(-1, 3), _cubic_coefficients(ty)):
            y = _padded(y0 + j, spatial[0], padding_mode, align_corners).to(int64)
            row = None
            for i, wx in zip(range(-1, 3), _cubic_coefficients(tx)):
                x = _padded(x0 + i, spatial[1], padding_mode, align_corners).to(int64)
                term = _taps(flat_input, [y, x], spatial) * wx.unsqueeze(1)
                row = term if row is None else row + term
            rows.append(row * wy.unsqueeze(1))
        result = rows[0] + rows[1] + rows[2] + rows[3]
    else:
        sources = [_padded(x, size, padding_mode, align_corners) for x, size in zip(sources, spatial)]
        # a non-finite coordinate samples nothing (PyTorch moves it to -100, outside every image)
        sources = [where(x.isfinite(), x, -100.0) for x in sources]
        if mode == "nearest":
            result = _taps(flat_input, [x.round().to(int64) for x in sources], spatial)
        else:  # bilinear: the 2**d corners, each weighted by the opposite fractions
            lows = [x.detach().floor() for x in sources]
            fractions = [x - low for x, low in zip(sources, lows)]
            result = None
            for corner in itertools.product((0, 1), repeat=d):
                weight = None
                for high, fraction in zip(corner, fractions):
                    w = fraction if high else 1 - fraction
                    weight = w if weight is None else weight * w
                positions = [(low + high).to(int64) for low, high in zip(lows, corner)]
                term = _taps(flat_input, positions, spatial) * weight.unsqueeze(1)
                result = term if result is None else result + term
    return result.view([n, c] + out)


class _GridSampler(Function):
    @staticmethod
    def forward(ctx, input, grid, mode, padding_mode, align_corners):
        ctx.save_for_backward(input, grid)
        ctx.options = mode, padding_mode, align_corners
        return _sampled(input, grid, mode, padding_mode, align_corners)

    @staticmethod
    def backward(ctx, grad):
        create_graph = is_grad_enabled()  # the engine's grad mode: on in a create_graph backward
        needed = ctx.needs_input_grad[:2]
        with enable_grad():
            # The composition again, on views of the saved tensors: the gradients are partial ones
            # (the input's with the grid held, even when the grid was made from the input) and, as
            # functions of the views, differentiable again through the saved tensors' history.
            views = [t.view_as(t) for t in ctx.saved_tensors]
            output = _sampled(*views, *ctx.options)
            wanted = [view for view, need in zip(views, needed) if need]
            grads = iter(
                autograd_grad(
                    output, wanted, grad, create_graph=create_graph, allow_unused=True, materialize_grads=True
                )
            )
        return tuple(next(grads) if need else None for need in needed) + (None, None, None)


class GridSampler2D(_GridSampler):
    _node_name = "GridSampler2DBackward0"


class GridSampler3D(_GridSampler):
    _node_name = "GridSampler3DBackward0"


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(
            f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: '{mode}'"
        )
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(
            "nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or 'reflection', "
            f"but got: '{padding_mode}'"
        )
    align_corners = _default_align_corners(align_corners)
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(
            "grid_sampler(): expected grid and input to have same batch size, but got input with sizes "
            f"{list(input.shape)} and grid with sizes {list(grid.shape)}"
        )
    if input.dtype != grid.dtype:
        raise RuntimeError(
            f"expected scalar type {SCALAR_TYPE_NAME[input.dtype]} but found {SCALAR_TYPE_NAME[grid.dtype]}"
        )
    d = input.dim() - 2
    if grid.shape[-1] != d:
        raise RuntimeError(
            f"grid_sampler(): expected grid to have size {d} in last dimension, but got grid with sizes "
            f"{list(grid.shape)}"
        )
    for dim in range(2, input.dim()):
        if input.shape[dim] <= 0:
            raise RuntimeError(
                "grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes "
                f"{list(input.shape)} with dimension {dim} being empty"
            )
    rank = 4 if d == 2 else 5
    if input.dim() != rank or grid.dim() != rank:
        raise RuntimeError(
            f"grid_sampler(): expected {rank}D input and grid with same number of dimensions, but got input with "
            f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
        )
    if mode == "bicubic" and d == 3:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not input.is_floating_point():
        kernel = "grid_sampler_2d_cpu_kernel_impl" if d == 2 else "grid_sampler3d_cpu"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")
    sampler = GridSampler2D if d == 2 else GridSampler3D
    return sampler.apply(input, grid, mode, padding_mode, align_corners)
