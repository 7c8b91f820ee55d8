"""F.affine_grid and F.grid_sample (issue 16's optional image helpers) against PyTorch: values, the
gradients of the input, the grid and theta, node names, warnings and errors; gradcheck and
gradgradcheck in float64 (tests/op_cases.py has their op cases too)."""

import itertools
import warnings

import numpy as np
import pytest

from op_helpers import gradcheck_for

# (spatial dims, mode, padding_mode, align_corners): every 2-D combination, 3-D without bicubic
# (PyTorch's 3-D sampler has none)
SAMPLINGS = [
    (d, mode, padding, corners)
    for d, mode, padding, corners in itertools.product(
        (2, 3), ("bilinear", "nearest", "bicubic"), ("zeros", "border", "reflection"), (False, True)
    )
    if not (d == 3 and mode == "bicubic")
]


def _operands(d, dtype, seed=0):
    rng = np.random.default_rng(seed)
    image = (2, 3, 5, 4) if d == 2 else (2, 2, 3, 4, 5)
    points = (2, 3, 4) if d == 2 else (2, 2, 3, 2)
    # beyond [-1, 1]: the padding modes decide those points
    return (
        rng.standard_normal(image).astype(dtype),
        rng.uniform(-1.4, 1.4, points + (d,)).astype(dtype),
        rng.standard_normal(image[:2] + points[1:]).astype(dtype),
    )


def _sample(lib, x, grid, upstream, mode, padding, corners):
    x, grid = lib.tensor(x, requires_grad=True), lib.tensor(grid, requires_grad=True)
    out = lib.nn.functional.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=corners)
    out.backward(lib.tensor(upstream))
    return out.detach().numpy(), x.grad.numpy(), grid.grad.numpy(), out.grad_fn.name()


@pytest.mark.parametrize("d,mode,padding,corners", SAMPLINGS, ids=lambda v: str(v))
def test_grid_sample_matches_torch(fg, torch, d, mode, padding, corners):
    for dtype, tolerance in ((np.float64, 1e-12), (np.float32, 3e-5)):
        operands = _operands(d, dtype)
        ours = _sample(fg, *operands, mode, padding, corners)
        theirs = _sample(torch, *operands, mode, padding, corners)
        for what, got, want in zip(("output", "input grad", "grid grad"), ours, theirs):
            np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance, err_msg=f"{what} {dtype.__name__}")
        assert ours[3] == theirs[3] == f"GridSampler{d}DBackward0"


@pytest.mark.parametrize("size", [(2, 1, 3, 4), (1, 2, 1, 5), (2, 1, 2, 3, 4)])
@pytest.mark.parametrize("corners", [False, True])
def test_affine_grid_matches_torch(fg, torch, size, corners):
    d = len(size) - 2
    rng = np.random.default_rng(len(size))
    theta = rng.standard_normal((size[0], d, d + 1))
    upstream = rng.standard_normal((size[0], *size[2:], d))
    results = []
    for lib in (fg, torch):
        t = lib.tensor(theta, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's unit-size warning with align_corners
            grid = lib.nn.functional.affine_grid(t, size, align_corners=corners)
        grid.backward(lib.tensor(upstream))
        results.append((grid.detach().numpy(), t.grad.numpy(), grid.grad_fn.name()))
    (grid, grad, name), (t_grid, t_grad, t_name) = results
    np.testing.assert_allclose(grid, t_grid, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, t_grad, rtol=1e-12, atol=1e-12)
    assert name == t_name == "AffineGridGeneratorBackward0"


def test_affine_grid_may_be_written_in_place(fg, torch):
    """The grid is the op's own result, not a view made inside a custom Function (which autograd
    forbids writing in place)."""
    theta = np.random.default_rng(5).standard_normal((2, 2, 3))
    grads = []
    for lib in (fg, torch):
        t = lib.tensor(theta, requires_grad=True)
        grid = lib.nn.functional.affine_grid(t, (2, 1, 3, 2), align_corners=False)
        grid.mul_(2.0).sum().backward()
        grads.append((t.grad.numpy(), grid.grad_fn.name()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-12, atol=1e-12)
    assert grads[0][1] == grads[1][1] == "MulBackward0"


def test_spatial_transformer_step_matches_torch(fg, torch):
    """The spatial transformer tutorial's flow: theta from a layer, affine_grid, grid_sample, a loss;
    the gradient reaches the layer's weights through both."""
    rng = np.random.default_rng(3)
    images, weight = rng.standard_normal((2, 1, 6, 6)), rng.standard_normal((6, 36)) * 0.05
    grads = []
    for lib in (fg, torch):
        w = lib.tensor(weight, requires_grad=True)
        x = lib.tensor(images)
        theta = (x.flatten(1) @ w.t() + lib.tensor([1.0, 0, 0, 0, 1, 0], dtype=lib.float64)).view(-1, 2, 3)
        grid = lib.nn.functional.affine_grid(theta, x.size(), align_corners=False)
        lib.nn.functional.grid_sample(x, grid, align_corners=False).square().mean().backward()
        grads.append(w.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode,padding", [("bilinear", "reflection"), ("bicubic", "border"), ("nearest", "zeros")])
def test_gradcheck_and_gradgradcheck(fg_finite_differences, mode, padding):
    fg = fg_finite_differences
    x, grid, _ = _operands(2, np.float64, seed=1)
    x, grid = fg.tensor(x[:1, :1], requires_grad=True), fg.tensor(grid[:1, :2], requires_grad=mode != "nearest")

    def sample(x, *grid_):
        return fg.nn.functional.grid_sample(x, grid_[0] if grid_ else grid, mode, padding, align_corners=True)

    leaves = (x, grid) if grid.requires_grad else (x,)
    assert gradcheck_for(fg)(sample, leaves)
    assert gradcheck_for(fg, "gradgradcheck")(sample, leaves)
    theta = fg.tensor(np.random.default_rng(2).standard_normal((2, 2, 3)), requires_grad=True)
    assert gradcheck_for(fg)(lambda t: fg.nn.functional.affine_grid(t, (2, 1, 3, 2), align_corners=False), (theta,))


def test_align_corners_none_warns_as_torch(fg):
    x, grid = fg.ones(1, 1, 2, 2), fg.zeros(1, 1, 1, 2)
    for call in (
        lambda: fg.nn.functional.grid_sample(x, grid),
        lambda: fg.nn.functional.affine_grid(fg.zeros(1, 2, 3), (1, 1, 2, 2)),
    ):
        with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
            call()


ERRORS = {
    "mode": lambda t: t.nn.functional.grid_sample(t.ones(1, 1, 2, 2), t.zeros(1, 1, 1, 2), "area", align_corners=False),
    "padding": lambda t: t.nn.functional.grid_sample(t.ones(1, 1, 2, 2), t.zeros(1, 1, 1, 2), padding_mode="same"),
    "ranks": lambda t: t.nn.functional.grid_sample(t.ones(1, 1, 2, 2), t.zeros(1, 1, 2), align_corners=False),
    "batch": lambda t: t.nn.functional.grid_sample(t.ones(2, 1, 2, 2), t.zeros(1, 1, 1, 2), align_corners=False),
    "last dim": lambda t: t.nn.functional.grid_sample(t.ones(1, 1, 2, 2), t.zeros(1, 1, 1, 3), align_corners=False),
    "dtype": lambda t: t.nn.functional.grid_sample(
        t.ones(1, 1, 2, 2), t.zeros(1, 1, 1, 2, dtype=t.float64), align_corners=False
    ),
    "empty": lambda t: t.nn.functional.grid_sample(t.ones(1, 1, 0, 2), t.zeros(1, 1, 1, 2), align_corners=False),
    "rank 3": lambda t: t.nn.functional.grid_sample(t.ones(1, 1, 2), t.zeros(1, 1, 1), align_corners=False),
    "integer": lambda t: t.nn.functional.grid_sample(
        t.ones(1, 1, 2, 2, dtype=t.int64), t.zeros(1, 1, 1, 2, dtype=t.int64), align_corners=False
    ),
    "bicubic 3-D": lambda t: t.nn.functional.grid_sample(
        t.ones(1, 1, 2, 2, 2), t.zeros(1, 1, 1, 1, 3), "bicubic", align_corners=False
    ),
    "theta dtype": lambda t: t.nn.functional.affine_grid(t.zeros(1, 2, 3, dtype=t.int64), (1, 1, 2, 2)),
    "theta shape": lambda t: t.nn.functional.affine_grid(t.zeros(1, 3, 4), (1, 1, 2, 2), align_corners=False),
    "size rank": lambda t: t.nn.functional.affine_grid(t.zeros(1, 2, 3), (1, 2, 2), align_corners=False),
    "size zero": lambda t: t.nn.functional.affine_grid(t.zeros(1, 2, 3), (1, 1, 0, 2), align_corners=False),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_as_torch(fg, torch, name):
    errors = []
    for lib in (fg, torch):
        with pytest.raises(Exception) as info:
            ERRORS[name](lib)
        errors.append(info.value)
    ours, theirs = errors
    assert type(ours) is type(theirs)
    assert str(ours).replace("fastgrad", "torch") == str(theirs), (str(ours), str(theirs))


def test_grid_made_from_the_input_and_second_derivatives_match_torch(fg, torch):
    """The input's gradient is a partial one (the grid held) plus the grid's path back to the input;
    a gradient penalty differentiates grid_sample twice."""
    x = np.random.default_rng(4).standard_normal((1, 2, 3, 4))
    results = []
    for lib in (fg, torch):
        leaf = lib.tensor(x, requires_grad=True)
        grid = leaf[:, 0, :, :2].unsqueeze(1).tanh() * 1.2
        out = lib.nn.functional.grid_sample(leaf, grid, "bicubic", "reflection", align_corners=False)
        (first,) = lib.autograd.grad(out.square().sum(), leaf, create_graph=True)
        (second,) = lib.autograd.grad(first.square().sum(), leaf)
        results.append((first.detach().numpy(), second.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
