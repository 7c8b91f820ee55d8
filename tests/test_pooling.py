"""Pooling (F.max_pool1d/2d, avg_pool1d/2d, adaptive_avg/max_pool1d/2d, lp_pool1d/2d, max_unpool1d/2d
and their modules) against PyTorch: values, indices and input gradients over a table of cases on
both backends, NaN and ties, float64 gradcheck and gradgradcheck, results bitwise independent of
the thread count, grad_fn names, and PyTorch's errors.

A case is a function of (F, x) run on both libraries with the same numpy data; its first output is
backpropagated with the same upstream gradient.
"""

import numpy as np
import pytest

from op_helpers import gradcheck_for, rng_for, to_numpy
from oracle_helpers import same_error

CASES = {  # id: (fn(F, x) -> output or (output, indices), input shape)
    "max2d 2x2": (lambda F, x: F.max_pool2d(x, 2, return_indices=True), (2, 3, 6, 5)),
    "max2d 3x3 s2 p1": (lambda F, x: F.max_pool2d(x, 3, 2, 1, return_indices=True), (2, 2, 7, 8)),
    "max2d stride over kernel": (lambda F, x: F.max_pool2d(x, 2, 3, return_indices=True), (1, 2, 8, 7)),
    "max2d dilation": (lambda F, x: F.max_pool2d(x, (2, 3), 1, (1, 0), (3, 2), return_indices=True), (2, 2, 7, 9)),
    "max2d ceil": (lambda F, x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True), (1, 2, 6, 8)),
    "max2d ceil drops a window": (lambda F, x: F.max_pool2d(x, 2, 2, 1, ceil_mode=True), (1, 1, 4, 4)),
    "max2d unbatched": (lambda F, x: F.max_pool2d(x, (2, 1), return_indices=True), (3, 5, 4)),
    "max2d size-1": (lambda F, x: F.max_pool2d(x, 1, return_indices=True), (1, 2, 1, 3)),
    "max2d with indices": (lambda F, x: F.max_pool2d_with_indices(x, 2, 1), (1, 2, 3, 4)),
    "max1d": (lambda F, x: F.max_pool1d(x, 3, 2, 1, 2, return_indices=True), (2, 3, 11)),
    "max1d ceil unbatched": (lambda F, x: F.max_pool1d(x, 2, ceil_mode=True, return_indices=True), (3, 7)),
    "avg2d": (lambda F, x: F.avg_pool2d(x, 2), (2, 3, 6, 5)),
    "avg2d pad": (lambda F, x: F.avg_pool2d(x, 3, 2, 1), (2, 2, 7, 6)),
    "avg2d pad exclude": (lambda F, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), (2, 2, 7, 6)),
    "avg2d ceil": (lambda F, x: F.avg_pool2d(x, (3, 2), (2, 3), (1, 1), ceil_mode=True), (1, 2, 8, 7)),
    "avg2d ceil exclude": (
        lambda F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        (1, 2, 6, 6),
    ),
    "avg2d divisor": (lambda F, x: F.avg_pool2d(x, 3, 2, 1, divisor_override=5), (1, 2, 7, 7)),
    "avg2d unbatched": (lambda F, x: F.avg_pool2d(x, 2, 1), (3, 4, 4)),
    "avg1d": (lambda F, x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), (2, 3, 10)),
    "adaptive avg2d": (lambda F, x: F.adaptive_avg_pool2d(x, (4, 3)), (2, 3, 9, 7)),
    "adaptive avg2d larger": (lambda F, x: F.adaptive_avg_pool2d(x, (5, 4)), (1, 2, 3, 3)),
    "adaptive avg2d None": (lambda F, x: F.adaptive_avg_pool2d(x, (None, 2)), (1, 2, 3, 5)),
    "adaptive avg2d global": (lambda F, x: F.adaptive_avg_pool2d(x, 1), (2, 3, 4, 5)),
    "adaptive avg1d": (lambda F, x: F.adaptive_avg_pool1d(x, 4), (3, 9)),
    "adaptive max2d": (lambda F, x: F.adaptive_max_pool2d(x, (4, 3), return_indices=True), (2, 3, 9, 7)),
    "adaptive max2d unbatched": (lambda F, x: F.adaptive_max_pool2d(x, 3, True), (2, 5, 4)),
    "adaptive max1d": (lambda F, x: F.adaptive_max_pool1d(x, 3, return_indices=True), (2, 2, 8)),
    "lp2d": (lambda F, x: F.lp_pool2d(x.abs() + 0.5, 2.0, 2), (1, 2, 6, 5)),
    "lp1d": (lambda F, x: F.lp_pool1d(x.abs() + 0.5, 3.0, 3, 2), (2, 2, 9)),
    "unpool2d": (lambda F, x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2), (2, 2, 6, 4)),
    "unpool2d size": (
        lambda F, x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2, output_size=(1, 2, 7, 5)),
        (1, 2, 7, 5),
    ),
    "unpool1d": (lambda F, x: F.max_unpool1d(*F.max_pool1d(x, 2, return_indices=True), 2), (2, 3, 8)),
}


def _run(lib, case, data, upstream):
    fn, _ = CASES[case]
    x = lib.tensor(data, requires_grad=True)
    result = fn(lib.nn.functional, x)
    out, rest = (result[0], list(result[1:])) if isinstance(result, tuple) else (result, [])
    (out * lib.tensor(upstream(out.shape))).sum().backward()
    name = out.grad_fn.name().rsplit("::", 1)[-1]
    return [to_numpy(out), to_numpy(x.grad)] + [to_numpy(t) for t in rest], name


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", list(CASES))
def test_values_indices_and_gradients_match_pytorch(fg, torch, case, dtype):
    rng = rng_for(case, dtype)
    data = rng.uniform(-2, 2, size=CASES[case][1]).astype(dtype)

    def upstream(shape):
        return rng_for(case, "upstream").uniform(-1, 1, size=tuple(shape)).astype(dtype)

    (ours, our_node), (theirs, their_node) = _run(fg, case, data, upstream), _run(torch, case, data, upstream)
    assert our_node == their_node
    tolerance = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    for got, expected in zip(ours, theirs, strict=True):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_allclose(got, expected, **tolerance)


def test_nan_propagates_and_ties_pick_the_first_maximum(fg, torch):
    """A NaN is the maximum (the last NaN of a window gives the index); among equal maxima the
    first wins, and the gradient goes to that one only."""
    nan = float("nan")
    data = np.array([[[[1.0, 1.0, nan, 2.0], [1.0, 0.0, 3.0, nan], [-np.inf, -np.inf, 5.0, 5.0]]]])
    results = []
    for lib in (fg, torch):
        x = lib.tensor(data, requires_grad=True)
        F = lib.nn.functional
        out, indices = F.max_pool2d(x, 2, 1, return_indices=True)
        amax, aindices = F.adaptive_max_pool2d(x, (2, 2), return_indices=True)
        (out.sum() + amax.sum()).backward()
        results.append([to_numpy(t) for t in (out, indices, amax, aindices, x.grad)])
    for got, expected in zip(*results, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_int64_max_pool_matches_pytorch(fg, torch):
    data = np.array([[[[-5, -3, 7], [-2, -7, 7], [4, 4, -1]]]], dtype=np.int64)
    ours, theirs = (lib.nn.functional.max_pool2d(lib.tensor(data), 2, 1, return_indices=True) for lib in (fg, torch))
    for got, expected in zip(ours, theirs, strict=True):
        assert got.dtype == fg.int64
        np.testing.assert_array_equal(to_numpy(got), to_numpy(expected))


GRADCHECKED = {  # float64 finite differences, and second derivatives (gradgradcheck)
    "max2d": (lambda F, x: F.max_pool2d(x, 2, 1, 1), (1, 2, 4, 3)),
    "max1d dilated": (lambda F, x: F.max_pool1d(x, 2, 1, dilation=2), (2, 5)),
    "avg2d": (lambda F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), (1, 2, 4, 5)),
    "adaptive avg2d": (lambda F, x: F.adaptive_avg_pool2d(x, (3, 2)), (1, 2, 5, 3)),
    "adaptive max2d": (lambda F, x: F.adaptive_max_pool2d(x, (2, 3)), (2, 4, 4)),
    "unpool2d": (
        lambda F, x: F.max_unpool2d(x, x.detach().new_tensor([[[[0, 3], [9, 14]]]]).long(), 2, output_size=(4, 4)),
        (1, 1, 2, 2),
    ),
}


@pytest.mark.parametrize("case", list(GRADCHECKED))
def test_gradcheck_and_gradgradcheck(fg, case):
    fn, shape = GRADCHECKED[case]
    # Distinct values far apart, so that no finite difference moves a window's maximum.
    values = rng_for("gradcheck", case).permutation(int(np.prod(shape))).reshape(shape) * 0.1
    x = fg.tensor(values.astype(np.float64), requires_grad=True)

    def f(t):
        return fn(fg.nn.functional, t)

    assert gradcheck_for(fg)(f, (x,), eps=1e-6, atol=1e-5)
    assert gradcheck_for(fg, "gradgradcheck")(f, (x,), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize(
    "op, node",
    [
        (lambda F, x: F.max_pool2d(x, 2), "MaxPool2DWithIndicesBackwardBackward0"),
        (lambda F, x: F.avg_pool2d(x, 2), "AvgPool2DBackwardBackward0"),
        (lambda F, x: F.adaptive_avg_pool2d(x, 2), "AdaptiveAvgPool2DBackwardBackward0"),
        (lambda F, x: F.adaptive_max_pool2d(x, 2), "AdaptiveMaxPool2DBackwardBackward0"),
    ],
)
def test_the_gradient_records_pytorchs_double_backward_node(fg, torch, op, node):
    """The gradient is an op of the upstream gradient and of the pool's input (whose derivative is
    zero), as PyTorch's: recorded even when the upstream gradient needs none."""
    for lib in (fg, torch):
        x = lib.ones(1, 1, 4, 4, requires_grad=True)
        (grad,) = lib.autograd.grad(op(lib.nn.functional, x).sum(), x, create_graph=True)
        assert grad.grad_fn.name() == node
        edges = grad.grad_fn.next_functions
        assert len(edges) == 2 and edges[0][0] is None and edges[1][0] is not None
        (second,) = lib.autograd.grad(grad.sum(), x)
        np.testing.assert_array_equal(to_numpy(second), np.zeros((1, 1, 4, 4), np.float32))


def test_results_do_not_depend_on_the_thread_count():
    """Threads split whole planes, so 1, 2 and 3 threads give the same bits."""
    import fastgrad

    rng = rng_for("threads")
    data = rng.standard_normal((8, 16, 20, 20)).astype(np.float32)
    F = fastgrad.nn.functional
    ops = [
        lambda x: F.max_pool2d(x, 3, 2, 1),
        lambda x: F.avg_pool2d(x, 3, 2, 1),
        lambda x: F.adaptive_avg_pool2d(x, 7),
        lambda x: F.adaptive_max_pool2d(x, 6),
    ]
    results, before = [], fastgrad.get_num_threads()
    try:
        for threads in (1, 2, 3):
            fastgrad.set_num_threads(threads)
            run = []
            for op in ops:
                x = fastgrad.tensor(data, requires_grad=True)
                out = op(x)
                (out * out).sum().backward()
                run += [to_numpy(out), to_numpy(x.grad)]
            results.append(run)
    finally:
        fastgrad.set_num_threads(before)
    for other in results[1:]:
        for got, expected in zip(other, results[0], strict=True):
            np.testing.assert_array_equal(got, expected)


ERRORS = {  # id: program(lib) that PyTorch rejects
    "max2d pad": lambda t: t.nn.functional.max_pool2d(t.ones(1, 1, 4, 4), 3, padding=2),
    "max2d too small": lambda t: t.nn.functional.max_pool2d(t.ones(1, 1, 2, 2), 3),
    "max2d kernel length": lambda t: t.nn.functional.max_pool2d(t.ones(1, 1, 4, 4), (1, 2, 3)),
    "max2d stride length": lambda t: t.nn.functional.max_pool2d(t.ones(1, 1, 4, 4), 2, (1, 2, 3)),
    "max2d zero stride": lambda t: t.nn.functional.max_pool2d(t.ones(1, 1, 4, 4), 2, stride=0),
    "max2d zero kernel": lambda t: t.nn.functional.max_pool2d(t.ones(1, 1, 4, 4), 0, 1),
    "max2d zero dilation": lambda t: t.nn.functional.max_pool2d(t.ones(1, 1, 4, 4), 2, dilation=0),
    "max2d negative padding": lambda t: t.nn.functional.max_pool2d(t.ones(1, 1, 4, 4), 2, padding=-1),
    "max2d rank": lambda t: t.nn.functional.max_pool2d(t.ones(2, 2), 1),
    "max2d empty channels": lambda t: t.nn.functional.max_pool2d(t.ones(1, 0, 4, 4), 2),
    "max1d rank": lambda t: t.nn.functional.max_pool1d(t.ones(2), 1),
    "max1d kernel length": lambda t: t.nn.functional.max_pool1d(t.ones(1, 1, 4), (1, 2)),
    "max1d pad": lambda t: t.nn.functional.max_pool1d(t.ones(1, 1, 4), 3, padding=2),
    "max1d too small": lambda t: t.nn.functional.max_pool1d(t.ones(1, 1, 2), 3),
    # with indices, PyTorch checks ranks and lengths, then leaves the rest to max_pool2d (its messages)
    "max1d indices rank": lambda t: t.nn.functional.max_pool1d(t.ones(2), 1, return_indices=True),
    "max1d indices kernel length": lambda t: t.nn.functional.max_pool1d(t.ones(1, 1, 4), (1, 2), return_indices=True),
    "max1d indices pad": lambda t: t.nn.functional.max_pool1d_with_indices(t.ones(1, 1, 4), 3, padding=2),
    "max1d indices too small": lambda t: t.nn.functional.max_pool1d(t.ones(1, 1, 2), 3, return_indices=True),
    "avg2d pad": lambda t: t.nn.functional.avg_pool2d(t.ones(1, 1, 4, 4), 3, padding=2),
    "avg2d too small": lambda t: t.nn.functional.avg_pool2d(t.ones(1, 1, 2, 2), 3),
    "avg2d divisor": lambda t: t.nn.functional.avg_pool2d(t.ones(1, 1, 4, 4), 2, divisor_override=0),
    "avg2d kernel length": lambda t: t.nn.functional.avg_pool2d(t.ones(1, 1, 4, 4), (1, 2, 3)),
    "avg2d rank": lambda t: t.nn.functional.avg_pool2d(t.ones(2, 2), 1),
    "avg1d rank": lambda t: t.nn.functional.avg_pool1d(t.ones(2), 1),
    "avg1d too small": lambda t: t.nn.functional.avg_pool1d(t.ones(1, 1, 2), 3),
    "avg2d int32": lambda t: t.nn.functional.avg_pool2d(t.ones(1, 1, 4, 4, dtype=t.int32), 2),
    "adaptive avg2d rank": lambda t: t.nn.functional.adaptive_avg_pool2d(t.ones(2, 2), 2),
    "adaptive avg2d tuple rank": lambda t: t.nn.functional.adaptive_avg_pool2d(t.ones(2, 2), (2, None)),
    "adaptive max2d tuple rank": lambda t: t.nn.functional.adaptive_max_pool2d(t.ones(3), (2, 2)),
    "adaptive avg2d negative": lambda t: t.nn.functional.adaptive_avg_pool2d(t.ones(1, 2, 2), -1),
    "adaptive avg1d rank": lambda t: t.nn.functional.adaptive_avg_pool1d(t.ones(2), 1),
    "adaptive max2d rank": lambda t: t.nn.functional.adaptive_max_pool2d(t.ones(2, 2), 1),
    "adaptive max2d empty": lambda t: t.nn.functional.adaptive_max_pool2d(t.ones(1, 2, 0, 3), 1),
    "unpool bad index": lambda t: t.nn.functional.max_unpool2d(
        t.ones(1, 1, 2, 2), t.full((1, 1, 2, 2), 150, dtype=t.int64), 2
    ),
    # an empty output takes no index (PyTorch checks none); its gradient's gather refuses them
    "unpool empty output backward": lambda t: (
        t.nn.functional.max_unpool2d(
            t.ones(1, 1, 1, 1, requires_grad=True), t.zeros(1, 1, 1, 1, dtype=t.int64), 2, 1, 1
        )
        .sum()
        .backward()
    ),
    "unpool index dtype": lambda t: t.nn.functional.max_unpool2d(t.ones(1, 1, 2, 2), t.ones(1, 1, 2, 2), 2),
    "unpool index shape": lambda t: t.nn.functional.max_unpool2d(
        t.ones(1, 1, 2, 2), t.zeros(1, 1, 2, 1, dtype=t.int64), 2
    ),
    "unpool output size": lambda t: t.nn.functional.max_unpool2d(
        t.ones(1, 1, 2, 2), t.zeros(1, 1, 2, 2, dtype=t.int64), 2, output_size=(9, 9)
    ),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_match_pytorch(fg, torch, case):
    same_error(fg, torch, ERRORS[case])


MODULES = {  # id: (constructor(nn), input shape)
    "MaxPool1d": (lambda nn: nn.MaxPool1d(3, 2, 1), (2, 3, 9)),
    "MaxPool2d": (lambda nn: nn.MaxPool2d(3, 2, 1, 2, ceil_mode=True), (2, 2, 9, 8)),
    "MaxPool2d defaults": (lambda nn: nn.MaxPool2d((2, 3)), (1, 2, 6, 6)),
    "AvgPool1d": (lambda nn: nn.AvgPool1d(3, count_include_pad=False), (2, 3, 9)),
    "AvgPool2d": (lambda nn: nn.AvgPool2d(3, 2, 1, divisor_override=4), (2, 2, 7, 6)),
    "AdaptiveAvgPool1d": (lambda nn: nn.AdaptiveAvgPool1d(4), (2, 3, 9)),
    "AdaptiveAvgPool2d": (lambda nn: nn.AdaptiveAvgPool2d((None, 3)), (1, 2, 5, 7)),
    "AdaptiveMaxPool1d": (lambda nn: nn.AdaptiveMaxPool1d(4), (2, 3, 9)),
    "AdaptiveMaxPool2d": (lambda nn: nn.AdaptiveMaxPool2d(3), (1, 2, 5, 7)),
    "LPPool1d": (lambda nn: nn.LPPool1d(2, 3), (2, 3, 9)),
    "LPPool2d": (lambda nn: nn.LPPool2d(1.5, (3, 2), 1, ceil_mode=True), (1, 2, 5, 6)),
}


def _module_run(lib, name, data):
    constructor, _ = MODULES[name]
    module = constructor(lib.nn)
    x = lib.tensor(data, requires_grad=True)
    out = module(x)
    (out**2).sum().backward()
    return repr(module), [to_numpy(out), to_numpy(x.grad)]


@pytest.mark.parametrize("name", list(MODULES))
def test_modules_match_pytorch(fg, torch, name):
    data = rng_for("module", name).uniform(0.5, 2, size=MODULES[name][1])
    (our_repr, ours), (their_repr, theirs) = (_module_run(lib, name, data) for lib in (fg, torch))
    assert our_repr == their_repr
    for got, expected in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_unpool_modules_invert_the_pool_as_pytorch(fg, torch):
    data = rng_for("unpool modules").standard_normal((2, 2, 5, 6))
    results = []
    for lib in (fg, torch):
        pool, unpool = lib.nn.MaxPool2d(2, return_indices=True), lib.nn.MaxUnpool2d(2)
        out, indices = pool(lib.tensor(data))
        pool1, unpool1 = lib.nn.MaxPool1d(2, return_indices=True), lib.nn.MaxUnpool1d(2)
        out1, indices1 = pool1(lib.tensor(data[0]))
        results.append(
            [
                repr(unpool),
                repr(unpool1),
                to_numpy(unpool(out, indices, output_size=(5, 6))),
                to_numpy(unpool1(out1, indices1)),
            ]
        )
    assert results[0][:2] == results[1][:2]
    for got, expected in zip(results[0][2:], results[1][2:], strict=True):
        np.testing.assert_array_equal(got, expected)


BITWISE = [
    "max2d 3x3 s2 p1",
    "max2d dilation",
    "avg2d",  # windows that share no input: the gradient is a gather in T
    "avg2d unbatched",  # stride 1: each input takes up to four outputs, in their order
    "avg2d ceil",
    "avg2d pad exclude",
    "adaptive avg2d",
    "adaptive max2d",
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_core_and_the_reference_give_the_same_bits(dtype):
    """Both take each window's sum in double in the same order and round once (the core's tap-major
    rows too), so values and gradients agree to the bit."""
    import fastgrad
    import fastgrad.reference

    for case in BITWISE:
        data = rng_for("bitwise", case, dtype).uniform(-2, 2, size=CASES[case][1]).astype(dtype)
        results = []

        def upstream(shape):  # unequal values, so that the order of the gradient's sums shows in the bits
            return rng_for("bitwise upstream", case, dtype).uniform(-2, 2, size=tuple(shape)).astype(dtype)

        for lib in (fastgrad, fastgrad.reference):
            results.append(_run(lib, case, data, upstream)[0])
        for got, expected in zip(*results, strict=True):
            np.testing.assert_array_equal(got, expected)


def test_a_negative_zero_gradient_is_added_to_zeros_as_pytorch(fg, torch):
    """The gradients of pools whose windows share no input are stored, not summed: as PyTorch's
    scatter-add into zeros, a -0 gradient still gives +0, while max_unpool2d keeps the -0 it stores."""
    results = []
    for lib in (fg, torch):
        F = lib.nn.functional
        minus_zero = lib.tensor(np.full((1, 1, 2, 2), -0.0))
        x = lib.tensor(np.arange(16.0).reshape(1, 1, 4, 4), requires_grad=True)
        out, indices = F.max_pool2d(x, 2, return_indices=True)
        (out + F.avg_pool2d(x, 2)).backward(minus_zero)
        results.append([np.signbit(to_numpy(t)) for t in (x.grad, F.max_unpool2d(minus_zero, indices, 2))])
    for got, expected in zip(*results, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_a_window_wholly_in_the_padding_gives_a_clear_error_in_backward(fg):
    """A dilated window can miss the input entirely: as PyTorch, its value is -inf and its index the
    first tap (outside the plane); PyTorch's backward then writes outside the gradient's plane, while
    fastgrad's refuses the index."""
    x = fg.ones(1, 2, 1, requires_grad=True)
    out, indices = fg.nn.functional.max_pool1d(x, 3, padding=1, dilation=2, ceil_mode=True, return_indices=True)
    assert to_numpy(out).tolist() == [[[-np.inf], [-np.inf]]] and to_numpy(indices).tolist() == [[[1], [1]]]
    with pytest.raises(RuntimeError, match=r"^Found an invalid max index: 1 \(output volumes are of size 1x1\)"):
        out.sum().backward()


REPEATED_CALLS = {  # a good call first (its checks are kept), then one PyTorch refuses
    "bool ceil_mode then too small": lambda t, x: (
        t.nn.functional.max_pool2d(x, 3, ceil_mode=True),
        t.nn.functional.max_pool2d(x[..., :1, :1], 3, padding=2),
    ),
    "avg divisor zero": lambda t, x: (
        t.nn.functional.avg_pool2d(x, 2, divisor_override=3),
        t.nn.functional.avg_pool2d(x, 2, divisor_override=0),
    ),
    "smaller input": lambda t, x: (t.nn.functional.avg_pool2d(x, 4), t.nn.functional.avg_pool2d(x[..., :3], 4)),
}


@pytest.mark.parametrize("case", list(REPEATED_CALLS))
def test_kept_argument_checks_still_refuse_what_pytorch_refuses(fg, torch, case):
    """The pools keep the checks of the arguments and shapes they have seen; a later call with other
    arguments or shapes is checked again."""
    same_error(fg, torch, lambda t: REPEATED_CALLS[case](t, t.ones(1, 2, 4, 5)))


def test_kept_argument_checks_still_refuse_a_float_size(fg):
    """2.0 equals 2, but PyTorch refuses it (with its argument parser's words: fastgrad's differ)."""
    x = fg.ones(1, 2, 4, 5)
    fg.nn.functional.max_pool2d(x, 2)
    fg.nn.functional.avg_pool2d(x, (2, 2))
    with pytest.raises(TypeError):
        fg.nn.functional.max_pool2d(x, 2.0)
    with pytest.raises(TypeError):
        fg.nn.functional.avg_pool2d(x, (2, 2.0))
