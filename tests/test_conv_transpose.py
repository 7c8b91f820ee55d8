"""Transposed convolution (F.conv_transpose1d/2d, nn.ConvTranspose1d/2d and their lazy forms) against
PyTorch: values and the input, weight and bias gradients over a table of cases on both backends,
float64 gradcheck and gradgradcheck, results bitwise independent of the thread count, PyTorch's
errors, the modules' output_size argument, parameters, initialization and repr.

A case is a function of (F, x, w, b) run on both libraries with the same numpy data; the output is
backpropagated with the same upstream gradient.
"""

import numpy as np
import pytest

from op_helpers import assert_conv_case_matches, assert_same_bits_at_thread_counts, gradcheck_for, rng_for, to_numpy
from oracle_helpers import same_error

CASES = {  # id: (fn(F, x, w, b), input shape, weight shape (in, out / groups, *kernel), bias size or 0)
    "2d plain": (lambda F, x, w, b: F.conv_transpose2d(x, w, b), (2, 3, 4, 5), (3, 4, 3, 3), 4),
    "2d no bias": (lambda F, x, w, b: F.conv_transpose2d(x, w), (2, 3, 4, 4), (3, 2, 2, 3), 0),
    "2d stride padding output_padding": (
        lambda F, x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 3), padding=(1, 2), output_padding=(1, 2)),
        (2, 2, 4, 3),
        (2, 3, 3, 4),
        3,
    ),
    "2d stride over kernel": (lambda F, x, w, b: F.conv_transpose2d(x, w, b, stride=3), (1, 2, 3, 3), (2, 2, 2, 2), 2),
    "2d dilation": (
        lambda F, x, w, b: F.conv_transpose2d(x, w, b, padding=1, dilation=(2, 1)),
        (2, 2, 4, 5),
        (2, 3, 3, 2),
        3,
    ),
    # output_padding past the stride, allowed because it is below the dilation
    "2d output_padding under dilation": (
        lambda F, x, w, b: F.conv_transpose2d(x, w, b, padding=1, output_padding=(2, 1), dilation=(3, 2)),
        (2, 2, 3, 4),
        (2, 2, 3, 2),
        2,
    ),
    "2d pointwise output_padding": (
        lambda F, x, w, b: F.conv_transpose2d(x, w, b, output_padding=1, dilation=2),
        (2, 3, 3, 2),
        (3, 2, 1, 1),
        2,
    ),
    "2d groups": (lambda F, x, w, b: F.conv_transpose2d(x, w, b, stride=2, groups=2), (2, 4, 3, 3), (4, 3, 3, 3), 6),
    "2d depthwise": (
        lambda F, x, w, b: F.conv_transpose2d(x, w, b, padding=1, groups=3),
        (2, 3, 4, 4),
        (3, 2, 3, 3),
        6,
    ),
    "2d unbatched": (
        lambda F, x, w, b: F.conv_transpose2d(x, w, b, stride=2, output_padding=1),
        (3, 3, 4),
        (3, 2, 3, 3),
        2,
    ),
    "2d size-1 dims": (lambda F, x, w, b: F.conv_transpose2d(x, w, b), (1, 1, 1, 3), (1, 2, 1, 2), 2),
    "1d plain": (lambda F, x, w, b: F.conv_transpose1d(x, w, b), (2, 3, 6), (3, 4, 3), 4),
    "1d stride padding output_padding dilation": (
        lambda F, x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=2, output_padding=2, dilation=2),
        (2, 2, 5),
        (2, 3, 4),
        3,
    ),
    "1d groups no bias": (lambda F, x, w, b: F.conv_transpose1d(x, w, groups=2), (3, 4, 5), (4, 1, 3), 0),
    "1d unbatched": (lambda F, x, w, b: F.conv_transpose1d(x, w, b, padding=(1,)), (3, 6), (3, 2, 3), 2),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", list(CASES))
def test_values_and_gradients_match_pytorch(fg, torch, case, dtype):
    fn, x_shape, w_shape, bias_size = CASES[case]
    assert_conv_case_matches(fg, torch, case, dtype, fn, x_shape, w_shape, bias_size)


def test_grad_fn_has_pytorchs_edges(fg, torch):
    for lib in (fg, torch):
        w = lib.ones(1, 2, 3, requires_grad=True)
        edges = lib.nn.functional.conv_transpose1d(lib.ones(1, 1, 5), w).grad_fn.next_functions
        assert len(edges) == 3 and edges[0][0] is None and edges[2][0] is None and edges[1][0] is not None


CHECKED = {  # float64 finite differences, first and second order: (fn(F, x, w, b), shapes)
    "2d stride output_padding groups": (
        lambda F, x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 1), padding=(0, 1), output_padding=(1, 0), groups=2),
        [(1, 4, 2, 3), (4, 1, 2, 2), (2,)],
    ),
    "2d output_padding under dilation": (
        lambda F, x, w, b: F.conv_transpose2d(x, w, b, output_padding=1, dilation=2),
        [(2, 1, 2, 2), (1, 2, 2, 2), (2,)],
    ),
    "1d stride padding dilation": (
        lambda F, x, w, b: F.conv_transpose1d(x, w, b, stride=2, padding=1, dilation=2),
        [(1, 2, 4), (2, 2, 2), (2,)],
    ),
}


@pytest.mark.parametrize("check", ["gradcheck", "gradgradcheck"])
@pytest.mark.parametrize("case", list(CHECKED))
def test_gradcheck_and_gradgradcheck(fg, case, check):
    fn, shapes = CHECKED[case]
    rng = rng_for("gradcheck", case)
    inputs = [fg.tensor(rng.uniform(-2, 2, size=shape), requires_grad=True) for shape in shapes]
    assert gradcheck_for(fg, check)(lambda *xs: fn(fg.nn.functional, *xs), inputs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_results_do_not_depend_on_the_thread_count(dtype):
    """The passes split the batch into whole images and sum the weight gradient in image order, so
    1, 2 and 3 threads give the same bits (a batch over several waves of images, big enough to split)."""
    import fastgrad

    rng = rng_for("threads", dtype)
    arrays = [rng.standard_normal(shape).astype(dtype) for shape in ((19, 8, 10, 10), (8, 6, 3, 3), (6,))]
    upstream = rng.standard_normal((19, 6, 22, 22)).astype(dtype)

    def run():
        x, w, b = (fastgrad.tensor(a, requires_grad=True) for a in arrays)
        out = fastgrad.nn.functional.conv_transpose2d(x, w, b, stride=2, output_padding=1)
        out.backward(fastgrad.tensor(upstream))
        return [to_numpy(t) for t in (out, x.grad, w.grad, b.grad)]

    assert_same_bits_at_thread_counts(run)


def _t(lib, *shape):
    return lib.ones(*shape, dtype=lib.float64)


def _conv_t2d(lib, x_shape, w_shape, *args, **kwargs):
    return lib.nn.functional.conv_transpose2d(_t(lib, *x_shape), _t(lib, *w_shape), *args, **kwargs)


X, W = (2, 4, 5, 5), (4, 3, 3, 3)
ERRORS = {
    "input rank": lambda t: _conv_t2d(t, (4, 5), W),
    "weight rank": lambda t: _conv_t2d(t, X, (4, 3, 3)),
    "weight of two dims": lambda t: _conv_t2d(t, X, (4, 3)),
    "1d weight rank": lambda t: t.nn.functional.conv_transpose1d(_t(t, 2, 4, 5), _t(t, *W)),
    "output_padding": lambda t: _conv_t2d(t, X, W, output_padding=1),
    "output_padding of one dim": lambda t: _conv_t2d(t, X, W, stride=2, output_padding=(1, 2)),
    "1d output_padding": lambda t: t.nn.functional.conv_transpose1d(_t(t, 2, 4, 5), _t(t, 4, 3, 3), output_padding=1),
    "negative output_padding": lambda t: _conv_t2d(t, X, W, output_padding=-1),
    "output_padding length": lambda t: _conv_t2d(t, X, W, output_padding=(1, 1, 1)),
    "channels": lambda t: _conv_t2d(t, X, (3, 3, 3, 3)),
    "groups not dividing": lambda t: _conv_t2d(t, X, W, groups=3),
    "groups over channels": lambda t: _conv_t2d(t, X, W, groups=8),
    "bias size": lambda t: _conv_t2d(t, X, W, _t(t, 4)),
    "bias size of groups": lambda t: _conv_t2d(t, X, W, _t(t, 3), groups=2),
    "negative padding": lambda t: _conv_t2d(t, X, W, padding=-1),
    "zero stride": lambda t: _conv_t2d(t, X, W, stride=0),
    "zero dilation": lambda t: _conv_t2d(t, X, W, dilation=0),
    "zero groups": lambda t: _conv_t2d(t, X, W, groups=0),
    "output too small": lambda t: _conv_t2d(t, X, W, padding=5),
    "1d output too small": lambda t: t.nn.functional.conv_transpose1d(_t(t, 2, 4, 5), _t(t, 4, 3, 3), padding=5),
    "empty image": lambda t: _conv_t2d(t, (2, 4, 0, 5), W),
    "weight dtype": lambda t: t.nn.functional.conv_transpose2d(_t(t, *X), _t(t, *W).float()),
    "no output channels": lambda t: _conv_t2d(t, X, (4, 0, 3, 3)),
    "1d no output channels": lambda t: t.nn.functional.conv_transpose1d(_t(t, 2, 4, 5), _t(t, 4, 0, 3)),
    "empty kernel": lambda t: _conv_t2d(t, X, (4, 3, 3, 0)),
    "1d empty kernel": lambda t: t.nn.functional.conv_transpose1d(_t(t, 2, 4, 5), _t(t, 4, 3, 0)),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_match_pytorch(fg, torch, case):
    same_error(fg, torch, ERRORS[case])


EMPTY_BATCHES = {  # an empty batch's images may be empty too: the output has the formula's sizes
    "2d": lambda F, x, w: F.conv_transpose2d(x, w, stride=2),
    "2d empty image": lambda F, x, w: F.conv_transpose2d(x[:, :, :0], w),
    "2d empty image, no width": lambda F, x, w: F.conv_transpose2d(x[:, :, :0, :0], w, stride=3, dilation=2),
    "1d empty image": lambda F, x, w: F.conv_transpose1d(x[:, :, 0, :0], w[:, :, 0]),
}


@pytest.mark.parametrize("case", list(EMPTY_BATCHES))
def test_an_empty_batch_gives_an_empty_output_and_zero_gradients(fg, torch, case):
    results = []
    for lib in (fg, torch):
        x, w = (lib.ones(shape, dtype=lib.float64, requires_grad=True) for shape in ((0, *X[1:]), W))
        out = EMPTY_BATCHES[case](lib.nn.functional, x, w)
        out.sum().backward()
        results.append((tuple(out.shape), out.grad_fn.name(), tuple(x.grad.shape), to_numpy(w.grad).tolist()))
    assert results[0] == results[1]


# ---- the modules


MODULES = {  # id: (constructor(nn), input shape, output_size or None)
    "ConvTranspose2d": (lambda nn: nn.ConvTranspose2d(3, 4, 3), (2, 3, 4, 5), None),
    "ConvTranspose2d options": (
        lambda nn: nn.ConvTranspose2d(
            4, 6, (2, 3), stride=(2, 1), padding=(1, 2), output_padding=(1, 0), groups=2, bias=False, dilation=(1, 2)
        ),
        (2, 4, 4, 5),
        None,
    ),
    "ConvTranspose2d output_size": (
        lambda nn: nn.ConvTranspose2d(2, 3, 3, stride=(3, 2), padding=1),
        (2, 2, 3, 4),
        [9, 8],
    ),
    "ConvTranspose2d output_size with batch": (
        lambda nn: nn.ConvTranspose2d(2, 3, 3, stride=2),
        (1, 2, 3, 3),
        (1, 3, 8, 7),
    ),
    "ConvTranspose2d unbatched output_size": (lambda nn: nn.ConvTranspose2d(2, 2, 2, stride=2), (2, 3, 3), [2, 7, 6]),
    "ConvTranspose1d": (lambda nn: nn.ConvTranspose1d(2, 4, 3, stride=2, padding=1, output_padding=1), (3, 2, 5), None),
    "ConvTranspose1d depthwise output_size": (
        lambda nn: nn.ConvTranspose1d(3, 6, 3, stride=3, groups=3),
        (2, 3, 4),
        [14],
    ),
}


def _module_run(lib, name, arrays):
    """The module with arrays[1:] as its parameters: its repr, state_dict keys, output and gradients."""
    constructor, _, output_size = MODULES[name]
    module = constructor(lib.nn).double()
    with lib.no_grad():
        for p, values in zip(module.parameters(), arrays[1:]):
            p.copy_(lib.tensor(values))
    x = lib.tensor(arrays[0], requires_grad=True)
    out = module(x, output_size=output_size)
    (out**2).sum().backward()
    grads = [to_numpy(x.grad)] + [to_numpy(p.grad) for p in module.parameters()]
    return repr(module), list(module.state_dict()), [to_numpy(out)] + grads


@pytest.mark.parametrize("name", list(MODULES))
def test_modules_match_pytorch(fg, torch, name):
    constructor, shape, _ = MODULES[name]
    rng = rng_for("module", name)
    shapes = [tuple(p.shape) for p in constructor(torch.nn).parameters()]
    arrays = [rng.uniform(-2, 2, size=s) for s in [shape] + shapes]
    (our_repr, our_keys, ours), (their_repr, their_keys, theirs) = (
        _module_run(lib, name, arrays) for lib in (fg, torch)
    )
    assert our_repr == their_repr and our_keys == their_keys
    for got, expected in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_default_initialization_takes_fan_in_from_the_weights_dim_1(fg):
    """weight (in, out / groups, kh, kw) uniform in +-1/sqrt(fan_in), fan_in = out / groups * kh * kw
    (PyTorch's _calculate_fan_in_and_fan_out reads dim 1), bias the same bound."""
    fg.manual_seed(0)
    conv = fg.nn.ConvTranspose2d(8, 32, 3, groups=2)  # fan_in = 16 * 3 * 3
    bound = 1 / 12
    weight, bias = to_numpy(conv.weight), to_numpy(conv.bias)
    assert weight.shape == (8, 16, 3, 3) and bias.shape == (32,)
    for values in (weight, bias):
        assert np.abs(values).max() <= bound and np.abs(values).max() > 0.8 * bound
    assert abs(weight.std() - bound / np.sqrt(3)) < 0.01  # a uniform's standard deviation


MODULE_ERRORS = {
    "padding mode": lambda t: t.nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect"),
    "lazy padding mode": lambda t: t.nn.LazyConvTranspose1d(2, 3, padding_mode="circular"),
    "groups": lambda t: t.nn.ConvTranspose2d(4, 4, 3, groups=0),
    "in_channels": lambda t: t.nn.ConvTranspose2d(3, 4, 3, groups=2),
    "output_size out of range": lambda t: t.nn.ConvTranspose2d(2, 2, 3, stride=2)(t.ones(1, 2, 4, 4), [12, 9]),
    "output_size length": lambda t: t.nn.ConvTranspose2d(2, 2, 3)(t.ones(1, 2, 4, 4), output_size=[1, 2, 3]),
    "1d output_size length": lambda t: t.nn.ConvTranspose1d(2, 2, 3)(t.ones(2, 4), output_size=[1, 2, 3]),
}


@pytest.mark.parametrize("case", list(MODULE_ERRORS))
def test_module_errors_match_pytorch(fg, torch, case):
    same_error(fg, torch, MODULE_ERRORS[case])


def test_lazy_conv_transpose_takes_in_channels_from_the_first_input(fg):
    conv = fg.nn.LazyConvTranspose2d(6, 3, stride=2, output_padding=1, groups=2)
    out = conv(fg.ones(2, 4, 3, 3))
    assert type(conv) is fg.nn.ConvTranspose2d and conv.in_channels == 4
    assert tuple(conv.weight.shape) == (4, 3, 3, 3) and tuple(out.shape) == (2, 6, 8, 8)
    unbatched = fg.nn.LazyConvTranspose1d(2, 2, bias=False)
    assert tuple(unbatched(fg.ones(4, 5)).shape) == (2, 6) and tuple(unbatched.weight.shape) == (4, 2, 2)


def test_spectral_norm_of_a_transposed_convolution_normalizes_over_its_output_channels(fg, torch):
    dims = [
        lib.nn.utils.parametrizations.spectral_norm(lib.nn.ConvTranspose2d(4, 6, 3)).parametrizations.weight[0].dim
        for lib in (fg, torch)
    ]
    assert dims == [1, 1]
