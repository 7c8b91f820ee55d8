"""The binary/ternary elementwise ops of issue 13 (clamp_min/max, ...): what the op cases of
tests/op_cases.py do not cover, against PyTorch on both backends: ties, special values, dtypes, the
in-place and out= forms, and errors."""

import pytest

from oracle_helpers import same_error, same_on_both


def with_grads(m, program, *data):
    """program's result (its NaNs as a mask: they do not compare) and each input's gradient of its sum."""
    inputs = [m.tensor(d, requires_grad=True) for d in data]
    result = program(m, *inputs)
    result.sum().backward()
    nans = result.isnan()
    return nans, m.where(nans, 0.0, result), result.grad_fn.name(), [x.grad for x in inputs]


@pytest.mark.parametrize(
    "program",
    [
        lambda m, x, b: m.clamp_min(x, b),
        lambda m, x, b: x.clamp_max(b),
        lambda m, x, b: m.clamp_min(x, 0.5),
        lambda m, x, b: x.clamp_max(0.5),
        lambda m, x, b: m.clamp_min(x, float("nan")),
    ],
)
def test_clamp_bounds_ties_and_nan(fg, torch, program):
    nan = float("nan")
    data = [0.5, 1.0, 0.2, nan, nan, 0.3], [0.5, 0.5, 0.5, 0.5, nan, nan]
    same_on_both(fg, torch, lambda m: with_grads(m, program, *data))


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.clamp_min(m.arange(5), 2),
        lambda m: m.clamp_min(m.arange(5), 2.5),
        lambda m: m.clamp_max(m.arange(5), m.tensor(2.5, dtype=m.float64)),
        lambda m: m.clamp_max(m.arange(4.0), 1, out=m.empty(4)),
        lambda m: m.clamp_min_(m.arange(4.0), 1.5),
        lambda m: m.arange(4.0).clamp_max_(m.tensor([0.0, 3.0, 1.0, 1.0])),
    ],
)
def test_clamp_bounds_dtypes_and_forms(fg, torch, program):
    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda m, x, b: x.clone().clamp_min_(1.5),
        lambda m, x, b: m.clamp_max_(x.clone(), b),
    ],
)
def test_clamp_bounds_in_place_gradients(fg, torch, program):
    def values_and_grads(m):  # not the node: fastgrad's in-place forms end in a copy_
        nans, values, node, grads = with_grads(m, program, [0.0, 1.5, 2.0, 3.0], 1.5)
        return nans, values, grads

    same_on_both(fg, torch, values_and_grads)


def test_clamp_bounds_errors(fg, torch):
    same_error(fg, torch, lambda m: m.clamp_min(m.zeros(2), m.zeros(3)))


@pytest.mark.parametrize(
    "program",
    [
        lambda m, x, b: m.lerp(x, b, 0.5),
        lambda m, x, b: x.lerp(b, b),
        lambda m, x, b: x.addcmul(b, x, value=2),
        lambda m, x, b: m.addcdiv(x, x, b, value=-1),
        lambda m, x, b: x.clone().lerp_(b, 0.25) * 1,
        lambda m, x, b: x.clone().addcmul_(b, b) * 1,
        lambda m, x, b: x.clone().addcdiv_(b, x, value=0.5) * 1,
    ],
)
def test_lerp_addcmul_addcdiv_values_and_gradients(fg, torch, program):
    same_on_both(fg, torch, lambda m: with_grads(m, program, [0.5, -1.0, 2.0, 1e30], [1.5, 0.25, -2.0, 3.0]))


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.addcmul(m.zeros(2), m.ones(2, dtype=m.float64), m.ones(2)),
        lambda m: m.addcmul(m.arange(3), m.arange(3), m.arange(3), value=2),
        lambda m: m.addcdiv(m.arange(3.0), m.arange(3.0), m.full((3,), 4.0), out=m.empty(3)),
        lambda m: m.lerp(m.zeros(3), m.ones(3), 0.25, out=m.empty(3)),
        lambda m: m.lerp(m.zeros(3), m.ones(3), m.tensor(1)),
        lambda m: with_grads(m, lambda m, x, w: m.lerp(x, x * 2, w.double()), [1.0, 2.0], 0.25),
    ],
)
def test_lerp_addcmul_addcdiv_dtypes(fg, torch, program):
    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.lerp(m.zeros(2), m.zeros(2, dtype=m.float64), 0.5),
        lambda m: m.lerp(m.zeros(2), m.zeros(2), m.zeros(2, dtype=m.float64)),
        lambda m: m.lerp(m.arange(2), m.arange(2), 0.5),
        lambda m: m.lerp(m.zeros(2), m.zeros(3), 0.5),
        lambda m: m.addcdiv(m.zeros(2), m.arange(2), m.arange(2)),
        lambda m: m.addcdiv(m.arange(2), m.arange(2), m.arange(2), value=2.5),
    ],
)
def test_lerp_addcmul_addcdiv_errors(fg, torch, program):
    same_error(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.atan2(m.tensor([0.0, -0.0, 1.0, float("inf")]), m.tensor([-0.0, -1.0, 0.0, float("inf")])),
        lambda m: m.atan2(m.arange(3), m.arange(3), out=m.empty(3)),
        lambda m: m.logaddexp(m.tensor([float("-inf"), 1e30, 0.0]), m.tensor([float("-inf"), 1e30, -1.0])),
        lambda m: m.logaddexp2(m.tensor([1.0, 2.0], dtype=m.float64), m.tensor(3.0)),
        lambda m: m.arange(4).true_divide(m.tensor(2)),
        lambda m: m.hypot(m.tensor([3.0, float("inf"), float("nan")]), m.tensor([4.0, float("nan"), 1.0])).isnan(),
    ],
)
def test_atan2_logaddexp_true_divide_values(fg, torch, program):
    same_on_both(fg, torch, program)


def test_atan2_gradient_at_the_origin(fg, torch):
    same_on_both(fg, torch, lambda m: with_grads(m, lambda m, a, b: m.atan2(a, b), [0.0, 1.0], [0.0, 0.0]))


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.atan2(m.zeros(2), 2.0),
        lambda m: m.logaddexp(m.arange(2), m.arange(2)),
        lambda m: m.logaddexp2(m.zeros(2), m.zeros(3)),
        lambda m: m.hypot(m.arange(2), m.arange(2)),
    ],
)
def test_atan2_logaddexp_errors(fg, torch, program):
    same_error(fg, torch, program)
