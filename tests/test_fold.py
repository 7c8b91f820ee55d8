"""F.unfold (im2col) and F.fold (col2im), and nn.Unfold / nn.Fold, against PyTorch: values and
gradients over a table on both backends, grad_fn names (Im2ColBackward0 / Col2ImBackward0), float64
gradcheck and gradgradcheck (each op is the other's backward), results bitwise independent of the
thread count, PyTorch's errors in its order, the modules' repr."""

import numpy as np
import pytest

from op_helpers import assert_same_bits_at_thread_counts, gradcheck_for, rng_for, to_numpy
from oracle_helpers import same_error

CASES = {  # id: (fn(F, x), input shape)
    "unfold plain": (lambda F, x: F.unfold(x, 2), (2, 3, 4, 5)),
    "unfold options": (lambda F, x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), (2, 3, 5, 6)),
    "unfold stride over kernel": (lambda F, x: F.unfold(x, 2, stride=3), (1, 2, 7, 8)),
    "unfold unbatched": (lambda F, x: F.unfold(x, (3, 1), padding=(1, 0)), (2, 4, 3)),
    "unfold kernel of the image": (lambda F, x: F.unfold(x, (3, 4)), (2, 1, 3, 4)),
    "fold plain": (lambda F, x: F.fold(x, (4, 5), 2), (2, 12, 12)),
    "fold overlapping options": (
        lambda F, x: F.fold(x, (5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
        (2, 18, 12),
    ),
    "fold stride over kernel": (lambda F, x: F.fold(x, 7, 2, stride=3), (1, 8, 4)),
    "fold unbatched": (lambda F, x: F.fold(x, [4, 4], 2, stride=2), (12, 4)),
}


def _run(lib, case, array, upstream):
    fn, _ = CASES[case]
    x = lib.tensor(array, requires_grad=True)
    out = fn(lib.nn.functional, x)
    (out * lib.tensor(upstream(out.shape))).sum().backward()
    return [to_numpy(out), to_numpy(x.grad)], out.grad_fn.name()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", list(CASES))
def test_values_and_gradients_match_pytorch(fg, torch, case, dtype):
    array = rng_for(case, dtype).uniform(-2, 2, size=CASES[case][1]).astype(dtype)

    def upstream(shape):
        return rng_for(case, "upstream").uniform(-1, 1, size=tuple(shape)).astype(dtype)

    (ours, our_node), (theirs, their_node) = _run(fg, case, array, upstream), _run(torch, case, array, upstream)
    assert our_node == their_node
    for got, expected in zip(ours, theirs, strict=True):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-6 if dtype == "float32" else 1e-12, atol=1e-6)


CHECKED = ["unfold options", "unfold unbatched", "fold overlapping options", "fold unbatched"]


@pytest.mark.parametrize("check", ["gradcheck", "gradgradcheck"])
@pytest.mark.parametrize("case", CHECKED)
def test_gradcheck_and_gradgradcheck(fg, case, check):
    fn, shape = CASES[case]
    x = fg.tensor(rng_for("gradcheck", case).uniform(-2, 2, size=shape), requires_grad=True)
    assert gradcheck_for(fg, check)(lambda x: fn(fg.nn.functional, x), (x,))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_results_do_not_depend_on_the_thread_count(dtype):
    import fastgrad

    images = rng_for("threads", dtype).standard_normal((9, 8, 24, 24)).astype(dtype)

    def run():
        x = fastgrad.tensor(images, requires_grad=True)
        F = fastgrad.nn.functional
        out = F.fold(F.unfold(x, 3, padding=1, stride=2) * 1.5, (24, 24), 3, padding=1, stride=2)
        out.backward(fastgrad.tensor(images))
        return [to_numpy(out), to_numpy(x.grad)]

    assert_same_bits_at_thread_counts(run)


def _unfold(t, shape, *args, **kwargs):
    return t.nn.functional.unfold(t.ones(*shape, dtype=t.float64), *args, **kwargs)


def _fold(t, shape, *args, **kwargs):
    return t.nn.functional.fold(t.ones(*shape, dtype=t.float64), *args, **kwargs)


ERRORS = {
    "unfold 5-D": lambda t: _unfold(t, (1, 2, 3, 4, 5), 2),
    "unfold 2-D": lambda t: _unfold(t, (4, 5), 2),
    "unfold 1-D": lambda t: _unfold(t, (4,), 2),
    "unfold empty channels": lambda t: _unfold(t, (2, 0, 5, 5), 2),
    "unfold empty image": lambda t: _unfold(t, (2, 3, 0, 5), 2),
    "unfold kernel": lambda t: _unfold(t, (1, 2, 5, 5), 0, dilation=0),
    "unfold kernel length": lambda t: _unfold(t, (1, 2, 5, 5), (1, 2, 3)),
    "unfold dilation before padding": lambda t: _unfold(t, (1, 2, 5, 5), 2, dilation=0, padding=-1, stride=0),
    "unfold padding before stride": lambda t: _unfold(t, (1, 2, 5, 5), 2, padding=-1, stride=0),
    "unfold stride": lambda t: _unfold(t, (1, 2, 5, 5), 2, stride=0),
    "unfold kernel too big": lambda t: _unfold(t, (2, 3, 5, 7), (6, 9), padding=(0, 1)),
    "unfold int64": lambda t: t.nn.functional.unfold(t.ones(1, 2, 3, 3, dtype=t.int64), 2),
    "fold 4-D": lambda t: _fold(t, (1, 12, 16, 1), (5, 5), 2),
    "fold 1-D": lambda t: _fold(t, (4,), (5, 5), 2),
    "fold no blocks": lambda t: _fold(t, (2, 12, 0), (5, 5), 2),
    "fold output_size length": lambda t: _fold(t, (2, 12, 16), (5, 5, 5), 2),
    "fold stride before dilation": lambda t: _fold(t, (2, 12, 16), (5, 5), 2, dilation=0, padding=-1, stride=0),
    "fold dilation before padding": lambda t: _fold(t, (2, 12, 16), (5, 5), 2, dilation=0, padding=-1),
    "fold kernel": lambda t: _fold(t, (2, 12, 16), (5, 5), 0),
    "fold rows": lambda t: _fold(t, (2, 13, 16), (5, 5), 2),
    "fold columns": lambda t: _fold(t, (2, 12, 15), (5, 5), 2),
    "fold output too small": lambda t: _fold(t, (2, 4, 1), (1, 2), 2),
    "fold int64": lambda t: t.nn.functional.fold(t.ones(2, 4, 1, dtype=t.int64), 2, 2),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_match_pytorch(fg, torch, case):
    same_error(fg, torch, ERRORS[case])


def test_an_empty_batch_gives_an_empty_result(fg, torch):
    for lib in (fg, torch):
        assert tuple(_unfold(lib, (0, 3, 5, 5), 2).shape) == (0, 12, 16)
        assert tuple(_fold(lib, (0, 12, 16), (5, 5), 2).shape) == (0, 3, 5, 5)


def test_modules_match_pytorch(fg, torch):
    array = rng_for("modules").standard_normal((2, 3, 6, 6))
    results = []
    for lib in (fg, torch):
        unfold, fold = lib.nn.Unfold((2, 3), padding=1, stride=2), lib.nn.Fold([6, 6], (2, 3), padding=1, stride=2)
        results.append((repr(unfold), repr(fold), to_numpy(fold(unfold(lib.tensor(array))))))
    assert results[0][:2] == results[1][:2]
    np.testing.assert_allclose(results[0][2], results[1][2], rtol=1e-12)
