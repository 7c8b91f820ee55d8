"""Convolution (F.conv1d, F.conv2d and the Conv1d/Conv2d modules) against PyTorch: values and the
input, weight and bias gradients over a table of cases on both backends, float64 gradcheck, results
bitwise independent of the thread count, and PyTorch's errors.

A case is a function of (F, x, w, b) run on both libraries with the same numpy data; the output is
backpropagated with the same upstream gradient.
"""

import numpy as np
import pytest

from op_helpers import (
    assert_conv_case_matches,
    assert_same_bits_at_thread_counts,
    gradcheck_for,
    kernel_reruns_here,
    rng_for,
    to_numpy,
)
from oracle_helpers import same_error

# PyTorch's (and fastgrad's) warning for 'same' with an even kernel: checked once, below.
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")

CASES = {  # id: (fn(F, x, w, b), input shape, weight shape, has bias)
    "2d plain": (lambda F, x, w, b: F.conv2d(x, w, b), (2, 3, 6, 5), (4, 3, 3, 3), True),
    "2d no bias": (lambda F, x, w, b: F.conv2d(x, w), (2, 3, 5, 5), (2, 3, 2, 3), False),
    "2d stride padding": (
        lambda F, x, w, b: F.conv2d(x, w, b, stride=(2, 3), padding=(1, 2)),
        (2, 2, 7, 8),
        (3, 2, 3, 3),
        True,
    ),
    "2d stride over kernel": (lambda F, x, w, b: F.conv2d(x, w, b, stride=3), (1, 2, 7, 7), (2, 2, 2, 2), True),
    "2d dilation": (lambda F, x, w, b: F.conv2d(x, w, b, padding=1, dilation=(2, 1)), (2, 2, 7, 6), (3, 2, 3, 2), True),
    "2d groups": (lambda F, x, w, b: F.conv2d(x, w, b, groups=2), (2, 4, 5, 5), (6, 2, 3, 3), True),
    # stride 1, the input gradient as the convolution of the output gradient by the flipped weight
    "2d groups padded dilated": (
        lambda F, x, w, b: F.conv2d(x, w, b, padding=(2, 1), dilation=(2, 1), groups=2),
        (2, 6, 6, 5),
        (4, 3, 3, 3),
        True,
    ),
    # padding past dilation * (kernel - 1): that convolution's padding would be negative (col2im instead)
    "2d padding over kernel": (lambda F, x, w, b: F.conv2d(x, w, b, padding=(2, 1)), (2, 3, 4, 5), (3, 3, 2, 2), True),
    "2d depthwise": (lambda F, x, w, b: F.conv2d(x, w, b, padding=1, groups=3), (2, 3, 5, 4), (6, 1, 3, 3), True),
    # depthwise (groups == channels): the direct kernels, with rows past a vector width and tails
    "2d depthwise wide": (lambda F, x, w, b: F.conv2d(x, w, b, padding=1, groups=3), (1, 3, 4, 37), (3, 1, 3, 3), True),
    "2d depthwise strided dilated": (
        lambda F, x, w, b: F.conv2d(x, w, b, stride=(2, 3), padding=(2, 1), dilation=(1, 2), groups=4),
        (2, 4, 9, 40),
        (4, 1, 3, 3),
        True,
    ),
    "1d depthwise": (lambda F, x, w, b: F.conv1d(x, w, b, padding=2, groups=4), (2, 4, 21), (8, 1, 5), True),
    "2d pointwise": (lambda F, x, w, b: F.conv2d(x, w, b), (3, 4, 3, 5), (5, 4, 1, 1), True),
    "2d pointwise groups": (lambda F, x, w, b: F.conv2d(x, w, b, groups=2), (2, 4, 3, 2), (2, 2, 1, 1), True),
    "2d same odd": (lambda F, x, w, b: F.conv2d(x, w, b, padding="same"), (2, 2, 5, 6), (3, 2, 3, 3), True),
    "2d same even": (lambda F, x, w, b: F.conv2d(x, w, b, padding="same"), (2, 2, 5, 6), (3, 2, 2, 4), True),
    "2d same dilated": (
        lambda F, x, w, b: F.conv2d(x, w, b, padding="same", dilation=(1, 3)),
        (1, 2, 5, 9),
        (2, 2, 3, 2),
        True,
    ),
    "2d valid": (lambda F, x, w, b: F.conv2d(x, w, b, padding="valid"), (2, 2, 5, 6), (3, 2, 3, 3), True),
    "2d unbatched": (lambda F, x, w, b: F.conv2d(x, w, b, padding=1), (3, 4, 5), (2, 3, 3, 3), True),
    "2d size-1 dims": (lambda F, x, w, b: F.conv2d(x, w, b), (1, 1, 1, 4), (2, 1, 1, 2), True),
    # stride 1 over 256+ output pixels: the forward (and the input gradient) as an implicit GEMM on the
    # zero-padded input; 8+ input channels per group: the weight gradient read from a channels-last
    # copy of the input, per kernel row (per tap when dilated in width)
    "2d implicit gemm": (
        lambda F, x, w, b: F.conv2d(x, w, b, padding=(2, 1), dilation=(2, 1), groups=2),
        (1, 16, 18, 16),
        (4, 8, 3, 3),
        True,
    ),
    "2d implicit gemm strided dilated weight gradient": (
        lambda F, x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2)),
        (2, 8, 9, 11),
        (2, 8, 3, 3),
        True,
    ),
    "1d implicit gemm": (lambda F, x, w, b: F.conv1d(x, w, b, padding=2), (1, 8, 260), (2, 8, 5), True),
    "1d plain": (lambda F, x, w, b: F.conv1d(x, w, b), (2, 3, 9), (4, 3, 3), True),
    "1d stride padding dilation": (
        lambda F, x, w, b: F.conv1d(x, w, b, stride=2, padding=3, dilation=2),
        (2, 2, 11),
        (3, 2, 4),
        True,
    ),
    "1d groups": (lambda F, x, w, b: F.conv1d(x, w, groups=2), (3, 4, 7), (4, 2, 3), False),
    "1d same even": (lambda F, x, w, b: F.conv1d(x, w, b, padding="same"), (2, 2, 7), (3, 2, 4), True),
    "1d unbatched": (lambda F, x, w, b: F.conv1d(x, w, b, padding=(1,)), (3, 6), (2, 3, 3), True),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", list(CASES))
def test_values_and_gradients_match_pytorch(fg, torch, case, dtype):
    fn, x_shape, w_shape, has_bias = CASES[case]
    assert_conv_case_matches(fg, torch, case, dtype, fn, x_shape, w_shape, w_shape[0] if has_bias else 0)


def test_grad_fn_is_convolution_backward_with_pytorchs_edges(fg, torch):
    for lib in (fg, torch):
        w = lib.ones(2, 1, 3, requires_grad=True)
        out = lib.nn.functional.conv1d(lib.ones(1, 1, 5), w)
        assert out.grad_fn.name().rsplit("::", 1)[-1] == "ConvolutionBackward0"
        edges = out.grad_fn.next_functions
        assert len(edges) == 3 and edges[0][0] is None and edges[2][0] is None and edges[1][0] is not None


GRADCHECKED = {  # float64 finite differences: (fn(F, x, w, b), shapes)
    "2d": (
        lambda F, x, w, b: F.conv2d(x, w, b, stride=(1, 2), padding=1, dilation=(2, 1)),
        [(2, 2, 4, 5), (2, 2, 2, 3), (2,)],
    ),
    "2d groups same": (
        lambda F, x, w, b: F.conv2d(x, w, b, padding="same", groups=2),
        [(1, 4, 3, 3), (2, 2, 2, 2), (2,)],
    ),
    "1d": (lambda F, x, w, b: F.conv1d(x, w, b, stride=2, padding=1), [(2, 2, 5), (3, 2, 3), (3,)]),
    "2d depthwise": (
        lambda F, x, w, b: F.conv2d(x, w, b, stride=(1, 2), padding=1, dilation=(2, 1), groups=2),
        [(2, 2, 5, 5), (4, 1, 2, 3), (4,)],
    ),
}


@pytest.mark.parametrize("case", list(GRADCHECKED))
def test_gradcheck(fg, case):
    fn, shapes = GRADCHECKED[case]
    rng = rng_for("gradcheck", case)
    inputs = [fg.tensor(rng.uniform(-2, 2, size=shape), requires_grad=True) for shape in shapes]
    assert gradcheck_for(fg)(lambda *xs: fn(fg.nn.functional, *xs), inputs, eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "channels, side, groups, padding, out_channels",
    [(6, 12, 1, 0, 8), (2, 34, 1, 0, 8), (4, 37, 4, 0, 8), (8, 12, 2, 1, 8), (8, 16, 1, 1, 8), (64, 16, 1, 1, 64)],
    ids=["blocks of images", "waves", "depthwise", "input gradient as a convolution", "implicit gemm", "split sums"],
)
def test_results_do_not_depend_on_the_thread_count(dtype, channels, side, groups, padding, out_channels):
    """The batch is split into whole blocks of images and the weight gradient summed in block order,
    so 1, 2 and 3 threads give the same bits: small images go several to a GEMM (the forward's
    blocks shrink with the thread count), 32x32 outputs one to a GEMM over several waves of blocks;
    the depthwise kernels split the planes (and the channels, for the weight gradient); a padded
    stride-1 input gradient runs as the forward pass of its own convolution; 16x16 outputs with 8
    input channels take the implicit GEMM and the channels-last weight gradient; with 64 channels
    the threads also split the elements of the weight gradient's sums and the bias gradient's channels."""
    import fastgrad

    rng = rng_for("threads", dtype)
    shapes = ((19, channels, side, side), (out_channels, channels // groups, 3, 3), (out_channels,))
    arrays = [rng.standard_normal(shape).astype(dtype) for shape in shapes]
    out_side = side - 2 + 2 * padding
    upstream = rng.standard_normal((19, out_channels, out_side, out_side)).astype(dtype)

    def run():
        x, w, b = (fastgrad.tensor(a, requires_grad=True) for a in arrays)
        out = fastgrad.nn.functional.conv2d(x, w, b, padding=padding, groups=groups)
        out.backward(fastgrad.tensor(upstream))
        return [to_numpy(t) for t in (out, x.grad, w.grad, b.grad)]

    assert_same_bits_at_thread_counts(run)


def test_one_pixel_outputs_do_not_depend_on_the_thread_count():
    """An image of one output pixel is one column of the input gradient's GEMM: split one image per
    thread, a batch of 2 made one-column products (gemv's chains, other bits than in a block of 2)."""
    import fastgrad

    rng = rng_for("one pixel")
    x, w, upstream = (
        rng.standard_normal(shape).astype("float32") for shape in ((2, 64, 3, 3), (256, 64, 3, 3), (2, 256, 1, 1))
    )

    def run():
        xt = fastgrad.tensor(x, requires_grad=True)
        fastgrad.nn.functional.conv2d(xt, fastgrad.tensor(w)).backward(fastgrad.tensor(upstream))
        return [to_numpy(xt.grad)]

    assert_same_bits_at_thread_counts(run, (1, 2))


@pytest.mark.slow
@pytest.mark.parametrize("isa", ["scalar", "avx2", "avx512"])
def test_depthwise_and_implicit_gemm_kernels_under_every_isa(isa):
    """The depthwise and implicit GEMM cases and their thread-count checks rerun in a child under a
    forced ISA (the direct kernels and the GEMM's offset reads are compiled once per ISA; the main
    run covers this process's own)."""
    import os
    import subprocess
    import sys

    import fastgrad

    config = fastgrad.config()
    if isa not in config["isas_available"] or isa == config["isa"] or os.environ.get("FASTGRAD_ISA"):
        pytest.skip(f"{isa}: not available, or this process's ISA")
    if not kernel_reruns_here(isa):
        pytest.skip(
            f"the kernel tests under {isa}: the other half of .ci/run reruns them (op_helpers.kernel_reruns_here)"
        )
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "depthwise or implicit",
            os.path.abspath(__file__),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=os.path.dirname(os.path.abspath(__file__)),
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)),
            "FASTGRAD_ISA": isa,
            "FASTGRAD_TEST_BACKENDS": "fastgrad",
        },
    )
    assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-2000:]
    assert " passed" in child.stdout


ERRORS = {  # id: program(lib) that PyTorch rejects
    "channels": lambda t: t.nn.functional.conv2d(t.ones(1, 4, 5, 5), t.ones(8, 3, 3, 3)),
    "kernel too big": lambda t: t.nn.functional.conv2d(t.ones(1, 3, 2, 2), t.ones(8, 3, 3, 3)),
    "kernel too big dilated": lambda t: t.nn.functional.conv2d(t.ones(1, 3, 5, 5), t.ones(8, 3, 3, 3), dilation=3),
    "kernel too big 1d": lambda t: t.nn.functional.conv1d(t.ones(1, 3, 2), t.ones(8, 3, 3)),
    "channels 1d": lambda t: t.nn.functional.conv1d(t.ones(1, 4, 5), t.ones(8, 3, 3)),
    "input rank": lambda t: t.nn.functional.conv2d(t.ones(3, 2), t.ones(8, 3, 3, 3)),
    "weight rank": lambda t: t.nn.functional.conv2d(t.ones(1, 3, 5, 5), t.ones(8, 3, 3)),
    "bias size": lambda t: t.nn.functional.conv2d(t.ones(1, 3, 5, 5), t.ones(8, 3, 3, 3), t.ones(7)),
    "same strided": lambda t: t.nn.functional.conv2d(t.ones(1, 3, 5, 5), t.ones(8, 3, 3, 3), stride=2, padding="same"),
    "padding string": lambda t: t.nn.functional.conv2d(t.ones(1, 3, 5, 5), t.ones(8, 3, 3, 3), padding="foo"),
    "negative padding": lambda t: t.nn.functional.conv2d(t.ones(1, 3, 5, 5), t.ones(8, 3, 3, 3), padding=-1),
    "zero stride": lambda t: t.nn.functional.conv2d(t.ones(1, 3, 5, 5), t.ones(8, 3, 3, 3), stride=0),
    "zero dilation": lambda t: t.nn.functional.conv2d(t.ones(1, 3, 5, 5), t.ones(8, 3, 3, 3), dilation=0),
    "zero groups": lambda t: t.nn.functional.conv2d(t.ones(1, 3, 5, 5), t.ones(8, 3, 3, 3), groups=0),
    "groups over out channels": lambda t: t.nn.functional.conv2d(t.ones(1, 2, 5, 5), t.ones(1, 2, 3, 3), groups=2),
    "groups not dividing": lambda t: t.nn.functional.conv2d(t.ones(1, 6, 5, 5), t.ones(3, 3, 3, 3), groups=2),
    "stride length": lambda t: t.nn.functional.conv2d(t.ones(1, 3, 5, 5), t.ones(8, 3, 3, 3), stride=(1, 2, 3)),
    "weight dtype": lambda t: t.nn.functional.conv2d(t.ones(1, 3, 5, 5, dtype=t.float64), t.ones(8, 3, 3, 3)),
    "bias dtype": lambda t: t.nn.functional.conv2d(t.ones(1, 3, 5, 5), t.ones(8, 3, 3, 3), t.ones(8, dtype=t.float64)),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_match_pytorch(fg, torch, case):
    same_error(fg, torch, ERRORS[case])


GRADGRADCHECKED = {  # float64 second derivatives: (fn(F, x, w, b), shapes); every parameter somewhere
    "2d stride padding groups": (
        lambda F, x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 0), groups=2),
        [(1, 4, 4, 3), (2, 2, 2, 2), (2,)],
    ),
    "2d dilation leftover rows": (
        lambda F, x, w, b: F.conv2d(x, w, b, stride=2, dilation=(2, 1)),
        [(2, 1, 6, 4), (2, 1, 2, 2), (2,)],
    ),
    "1d stride padding dilation": (
        lambda F, x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2),
        [(1, 2, 6), (2, 2, 2), (2,)],
    ),
}


@pytest.mark.parametrize("case", list(GRADGRADCHECKED))
def test_gradgradcheck(fg, case):
    fn, shapes = GRADGRADCHECKED[case]
    rng = rng_for("gradgradcheck", case)
    inputs = [fg.tensor(rng.uniform(-2, 2, size=shape), requires_grad=True) for shape in shapes]
    assert gradcheck_for(fg, "gradgradcheck")(lambda *xs: fn(fg.nn.functional, *xs), inputs)


def _second_order(lib, arrays):
    """The gradients of (sum of squares of conv2d's input and weight gradients) w.r.t. input and weight."""
    x, w, b = (lib.tensor(a, requires_grad=True) for a in arrays)
    out = lib.nn.functional.conv2d(x, w, b, stride=2, padding=1, groups=2)
    gx, gw, gb = lib.autograd.grad((out * out).sum(), (x, w, b), create_graph=True)
    names = [t.grad_fn.name().rsplit("::", 1)[-1] for t in (gx, gw)]
    gx2, gw2 = lib.autograd.grad((gx * gx).sum() + (gw * gw).sum() + (gb * gb).sum(), (x, w))
    return names, [to_numpy(t) for t in (gx, gw, gb, gx2, gw2)]


def test_double_backward_matches_pytorch(fg, torch):
    """The first-order gradients are recorded ops: the input's a transposed convolution
    (ConvolutionBackward0), the weight's ConvolutionBackwardBackward0 as PyTorch names it."""
    rng = rng_for("double backward")
    arrays = [rng.uniform(-1, 1, size=s) for s in ((2, 4, 5, 4), (4, 2, 3, 3), (4,))]
    (our_names, ours), (their_names, theirs) = (_second_order(lib, arrays) for lib in (fg, torch))
    assert our_names == ["ConvolutionBackward0", "ConvolutionBackwardBackward0"]
    assert their_names[1] == our_names[1]
    for got, expected in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.filterwarnings("error")
def test_same_padding_of_an_even_kernel_warns_as_pytorch(fg):
    with pytest.warns(UserWarning, match="Using padding='same' with even kernel lengths and odd dilation"):
        fg.nn.functional.conv1d(fg.ones(1, 1, 5), fg.ones(1, 1, 2), padding="same")


# ---- the modules


MODULES = {  # id: (constructor(nn), input shape)
    "Conv2d": (lambda nn: nn.Conv2d(3, 4, 3), (2, 3, 6, 5)),
    "Conv2d options": (
        lambda nn: nn.Conv2d(4, 6, (2, 3), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2, bias=False),
        (2, 4, 7, 8),
    ),
    "Conv2d same": (lambda nn: nn.Conv2d(2, 3, (2, 3), padding="same"), (1, 2, 5, 5)),
    "Conv2d reflect": (lambda nn: nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="reflect"), (2, 2, 5, 6)),
    "Conv2d replicate same": (lambda nn: nn.Conv2d(2, 2, 4, padding="same", padding_mode="replicate"), (1, 2, 5, 5)),
    "Conv2d circular": (lambda nn: nn.Conv2d(1, 2, 3, stride=2, padding=1, padding_mode="circular"), (2, 1, 6, 5)),
    "Conv2d unbatched": (lambda nn: nn.Conv2d(3, 2, 2), (3, 4, 4)),
    "Conv1d": (lambda nn: nn.Conv1d(2, 4, 3, stride=2, padding=1), (3, 2, 9)),
    "Conv1d depthwise reflect": (lambda nn: nn.Conv1d(3, 6, 3, padding=2, groups=3, padding_mode="reflect"), (2, 3, 7)),
}


def _module_run(lib, name, arrays):
    """The module with arrays[1:] as its parameters: its repr, state_dict keys, output and gradients."""
    constructor, _ = MODULES[name]
    module = constructor(lib.nn).double()
    with lib.no_grad():
        for p, values in zip(module.parameters(), arrays[1:]):
            p.copy_(lib.tensor(values))
    x = lib.tensor(arrays[0], requires_grad=True)
    out = module(x)
    (out**2).sum().backward()
    grads = [to_numpy(x.grad)] + [to_numpy(p.grad) for p in module.parameters()]
    return repr(module), list(module.state_dict()), [to_numpy(out)] + grads


@pytest.mark.parametrize("name", list(MODULES))
def test_modules_match_pytorch(fg, torch, name):
    constructor, shape = MODULES[name]
    rng = rng_for("module", name)
    shapes = [tuple(p.shape) for p in constructor(torch.nn).parameters()]
    arrays = [rng.uniform(-2, 2, size=s) for s in [shape] + shapes]
    (our_repr, our_keys, ours), (their_repr, their_keys, theirs) = (
        _module_run(lib, name, arrays) for lib in (fg, torch)
    )
    assert our_repr == their_repr and our_keys == their_keys
    for got, expected in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_default_initialization_is_kaiming_uniform_and_bias_by_fan_in(fg):
    """weight uniform in +-1/sqrt(fan_in) (kaiming_uniform_ with a=sqrt(5)), bias the same bound."""
    fg.manual_seed(0)
    conv = fg.nn.Conv2d(8, 16, 3, groups=2)  # fan_in = 4 * 3 * 3
    bound = 1 / 6
    weight, bias = to_numpy(conv.weight), to_numpy(conv.bias)
    assert weight.shape == (16, 4, 3, 3) and bias.shape == (16,)
    for values in (weight, bias):
        assert np.abs(values).max() <= bound and np.abs(values).max() > 0.8 * bound
    assert abs(weight.std() - bound / np.sqrt(3)) < 0.01  # a uniform's standard deviation


MODULE_ERRORS = {
    "groups": lambda nn: nn.Conv2d(4, 4, 3, groups=0),
    "in_channels": lambda nn: nn.Conv2d(3, 4, 3, groups=2),
    "out_channels": lambda nn: nn.Conv2d(4, 3, 3, groups=2),
    "same strided": lambda nn: nn.Conv2d(4, 4, 3, stride=2, padding="same"),
}


@pytest.mark.parametrize("case", list(MODULE_ERRORS))
def test_module_errors_match_pytorch(fg, torch, case):
    same_error(fg, torch, lambda lib: MODULE_ERRORS[case](lib.nn))


def test_module_errors_naming_a_set_match_pytorch(fg):
    """PyTorch's message shows a Python set, whose order changes with the hash seed: checked up to it."""
    with pytest.raises(ValueError, match=r"^Invalid padding string 'full', should be one of \{'(same|valid)', '"):
        fg.nn.Conv1d(4, 4, 3, padding="full")
    with pytest.raises(
        ValueError, match=r"^padding_mode must be one of \{.*'circular'.*\}, but got padding_mode='wrap'$"
    ):
        fg.nn.Conv2d(4, 4, 3, padding_mode="wrap")


def test_lazy_conv_takes_in_channels_from_the_first_input(fg):
    conv = fg.nn.LazyConv2d(5, 3, groups=1)
    out = conv(fg.ones(2, 3, 6, 6))
    assert type(conv) is fg.nn.Conv2d and conv.in_channels == 3
    assert tuple(conv.weight.shape) == (5, 3, 3, 3) and tuple(out.shape) == (2, 5, 4, 4)
    unbatched = fg.nn.LazyConv1d(2, 2, bias=False)
    assert tuple(unbatched(fg.ones(4, 5)).shape) == (2, 4) and tuple(unbatched.weight.shape) == (2, 4, 2)


# ---- a small convolutional network trained as in PyTorch


def _lenet_steps(lib, weights, batches, targets):
    """Conv2d -> ReLU -> Conv2d -> Flatten -> Linear from the given weights, 3 SGD steps of
    cross-entropy; the losses and the final parameters."""
    nn = lib.nn
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.Flatten(), nn.Linear(6 * 4 * 4, 5)
    ).double()
    with lib.no_grad():
        for p, values in zip(model.parameters(), weights, strict=True):
            p.copy_(lib.tensor(values))
    optimizer = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for batch, target in zip(batches, targets, strict=True):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(lib.tensor(batch)), lib.tensor(target))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, [to_numpy(p) for p in model.parameters()]


def test_lenet_style_training_matches_pytorch_step_by_step(fg, torch):
    torch.manual_seed(0)
    reference = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 6, 3, stride=2, padding=1), torch.nn.Flatten()
    )
    weights = [p.detach().double().numpy() for p in reference.parameters()]
    rng = rng_for("lenet")
    weights += [rng.uniform(-0.2, 0.2, size=(5, 96)), rng.uniform(-0.2, 0.2, size=(5,))]
    batches = [rng.standard_normal((4, 1, 10, 10)) for _ in range(3)]
    targets = [rng.integers(0, 5, size=4) for _ in range(3)]
    (our_losses, ours), (their_losses, theirs) = (_lenet_steps(lib, weights, batches, targets) for lib in (fg, torch))
    np.testing.assert_allclose(our_losses, their_losses, rtol=1e-10)
    for got, expected in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


REPEATED_CALLS = {  # a good call first (its checks are kept), then one PyTorch refuses
    "other dtype": lambda t, x, w: (t.nn.functional.conv2d(x, w), t.nn.functional.conv2d(x.double(), w)),
    "smaller input": lambda t, x, w: (t.nn.functional.conv2d(x, w), t.nn.functional.conv2d(x[..., :2, :], w)),
    "unbatched then 5-D": lambda t, x, w: (t.nn.functional.conv2d(x[0], w), t.nn.functional.conv2d(x[None], w)),
}


@pytest.mark.parametrize("case", list(REPEATED_CALLS))
def test_kept_argument_checks_still_refuse_what_pytorch_refuses(fg, torch, case):
    """The convolution keeps the checks of the arguments, shapes and dtypes it has seen; a later call
    with other ones is checked again."""
    same_error(fg, torch, lambda t: REPEATED_CALLS[case](t, t.ones(1, 2, 4, 5), t.ones(3, 2, 3, 3)))


def test_kept_argument_checks_still_refuse_a_float_size(fg):
    """1.0 equals 1, but PyTorch refuses it (with its argument parser's words: fastgrad's differ)."""
    x, w = fg.ones(1, 2, 4, 5), fg.ones(3, 2, 3, 3)
    fg.nn.functional.conv2d(x, w, stride=1)
    with pytest.raises(TypeError):
        fg.nn.functional.conv2d(x, w, stride=1.0)
    with pytest.raises(TypeError):
        fg.nn.functional.conv2d(x, w, stride=(1, 1.0))


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.nn.functional.conv1d(t.randn(0, 3, dtype=t.float64), t.rand(2, 0, 3, dtype=t.float64)),
        lambda t: t.nn.functional.conv1d(t.randn(2, 0, 5), t.rand(3, 0, 3), t.ones(3)),
        lambda t: t.nn.functional.conv2d(t.randn(1, 0, 3, 3), t.rand(2, 0, 3, 3)),
    ],
)
def test_no_input_channels_gives_pytorchs_empty_result(fg, torch, call):
    """Weights of zero input channels (a product of depth 0): PyTorch's result, no division by zero."""
    ours, theirs = call(fg), call(torch)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
