"""Small math of the torch namespace against PyTorch, beyond the op cases (tests/op_cases.py: values
and gradients by gradcheck): fmax/fmin's NaNs and ties, sinc at 0 and of integers, sinc_, isin,
the directional splits and split_with_sizes, is_same_size, is_inference."""

import math

import pytest

from oracle_helpers import same_error, same_on_both

NAN = math.nan


def _spelled(t):
    return [repr(v) for v in t.reshape(-1).tolist()]


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_ignore_nans_and_give_ties_to_the_first_operand(fg, torch, name):
    def program(m):
        a = m.tensor([1.0, NAN, 3.0, 2.0, NAN, -0.0], dtype=m.float64, requires_grad=True)
        b = m.tensor([1.0, 2.0, NAN, 5.0, NAN, 0.0], dtype=m.float64, requires_grad=True)
        y = getattr(m, name)(a, b)
        (y * m.arange(1.0, 7.0, dtype=m.float64)).sum().backward()
        ints = getattr(m.tensor([1, 5]), name)(m.tensor([[3], [2]]))
        mixed = getattr(m, name)(m.tensor([1, 2]), m.tensor([1.5]))
        dtype = str(mixed.dtype).rsplit(".")[-1]
        return y.grad_fn.name(), _spelled(y), _spelled(a.grad), _spelled(b.grad), ints, mixed, dtype

    same_on_both(fg, torch, program)
    same_error(fg, torch, lambda m: getattr(m, name)(m.ones(2), 2.0))


def test_sinc(fg, torch):
    def program(m):
        x = m.tensor([0.0, 0.5, -1.25, 3.0, 1e-20, -0.0], dtype=m.float64, requires_grad=True)
        y = m.sinc(x)
        y.sum().backward()
        ints = m.sinc(m.tensor([0, 1, 2]))
        h = x * 1
        result = m.sinc_(h)
        in_place = result is h, h.grad_fn.name(), [round(v, 12) for v in h.tolist()]
        values = [round(v, 12) for v in y.tolist() + x.grad.tolist()]
        return y.grad_fn.name(), values, str(ints.dtype).rsplit(".")[-1], in_place

    same_on_both(fg, torch, program)
    same_error(fg, torch, lambda m: m.tensor([1, 2]).sinc_())


def test_isin(fg, torch):
    def program(m):
        elements = m.tensor([[1, 2], [3, 4]])
        return [
            m.isin(elements, m.tensor([4, 1, 9])),
            m.isin(elements, 3),
            m.isin(2, m.tensor([1, 2])),
            m.isin(m.tensor([1.0, 2.5]), m.tensor([2, 1]), invert=True),
            m.isin(elements, m.tensor([], dtype=m.int64), assume_unique=True),
        ]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "call",
    [
        lambda m, x: m.hsplit(x, 2),
        lambda m, x: x.hsplit([1, 3]),
        lambda m, x: m.hsplit(x.flatten(), 3),
        lambda m, x: m.vsplit(x, [1]),
        lambda m, x: x.reshape(1, 2, 6).dsplit(3),
        lambda m, x: m.split_with_sizes(x, [1, 5, 0], 1),
        lambda m, x: x.split_with_sizes([2], 0),
    ],
)
def test_splits(fg, torch, call):
    def program(m):
        x = m.arange(12.0, dtype=m.float64).reshape(2, 6).requires_grad_()
        parts = call(m, x)
        sum(part.sum() * (i + 1) for i, part in enumerate(parts)).backward()
        return [part.tolist() for part in parts], x.grad.tolist()

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.hsplit(m.ones(3), 2),
        lambda m: m.hsplit(m.ones(2, 4), 3),
        lambda m: m.vsplit(m.ones(3), 2),
        lambda m: m.dsplit(m.ones(2, 2), 2),
        lambda m: m.split_with_sizes(m.ones(5), [2, 2]),
        lambda m: m.is_same_size(m.ones(2), 2),
    ],
)
def test_split_and_size_errors(fg, torch, call):
    same_error(fg, torch, call)


def test_is_same_size_and_is_inference(fg, torch):
    def program(m):
        x = m.ones(2, 3)
        with m.inference_mode():
            y = m.ones(1)
        return m.is_same_size(x, m.zeros(2, 3)), x.is_same_size(m.ones(3, 2)), m.is_inference(x), m.is_inference(y)

    same_on_both(fg, torch, program)


def test_rsub(fg, torch):
    def program(m):
        a = m.tensor([1.5, -2.0, 0.1], dtype=m.float64, requires_grad=True)
        b = m.tensor([0.3, 4.0, 1e-3], dtype=m.float64, requires_grad=True)
        results = [m.rsub(a, b), m.rsub(a, b, alpha=0.7), m.rsub(a, 2.5), m.rsub(a, 2, alpha=3)]
        sum((r * (i + 1)).sum() for i, r in enumerate(results)).backward()
        ints = [m.rsub(m.tensor([1, 2]), 2.5), m.rsub(m.tensor([1, 2]), 3, alpha=2)]
        return [_spelled(r) for r in results], _spelled(a.grad), _spelled(b.grad), [t.tolist() for t in ints]

    same_on_both(fg, torch, program)
    same_error(fg, torch, lambda m: m.rsub(m.tensor([1]), 2, alpha=1.5))
    same_error(fg, torch, lambda m: m.rsub(m.tensor([True]), m.tensor([True])))


def test_unravel_index(fg, torch):
    def program(m):
        return [
            [t.tolist() for t in m.unravel_index(m.tensor([4, 1, -1, 6]), (2, 3))],
            [t.tolist() for t in m.unravel_index(m.tensor([[1234], [5678]]), (10, 10, 10, 10))],
            [t.tolist() for t in m.unravel_index(m.tensor(5), 4)],
            m.unravel_index(m.tensor([0]), ()),
        ]

    same_on_both(fg, torch, program)
    same_error(fg, torch, lambda m: m.unravel_index(m.tensor([1.0]), (2, 3)))
    same_error(fg, torch, lambda m: m.unravel_index(m.tensor([1]), (2, -3)))


@pytest.mark.parametrize(
    "call",
    [
        lambda m, y, x: m.trapezoid(y),
        lambda m, y, x: m.trapezoid(y, dx=0.5, dim=0),
        lambda m, y, x: m.trapezoid(y, x),
        lambda m, y, x: m.trapz(y, dx=2),
        lambda m, y, x: m.trapz(y, x.reshape(1, 4).expand(3, 4) * 2),
        lambda m, y, x: m.cumulative_trapezoid(y),
        lambda m, y, x: m.cumulative_trapezoid(y, x, dim=-1),
        lambda m, y, x: m.cumulative_trapezoid(y, dx=3, dim=0),
        lambda m, y, x: m.trapezoid(y[:, :1]),
        lambda m, y, x: m.trapezoid(y[:, :0]),
        lambda m, y, x: m.cumulative_trapezoid(y[:, :0]),
    ],
)
def test_trapezoid_rules(fg, torch, call):
    def program(m):
        y = m.tensor([[1.0, 3.0, 2.0, 5.0], [0.5, -1.0, 4.0, 2.0], [3.0, 3.0, 1.0, 0.0]], dtype=m.float64)
        y.requires_grad_()
        x = m.tensor([0.0, 1.0, 3.0, 4.5], dtype=m.float64)
        result = call(m, y, x)
        if result.requires_grad:  # not an integral over no samples: PyTorch's is zeros without history
            result.sum().backward()
        # node names: tests/op_cases.py (PyTorch's scalar overloads MulBackward1/DivBackward1 are fastgrad's
        # MulBackward0/DivBackward0)
        return list(result.shape), result.requires_grad, _spelled(result), y.grad is None or _spelled(y.grad)

    same_on_both(fg, torch, program)


def test_trapezoid_of_integers_and_its_checks(fg, torch):
    def program(m):
        y = m.tensor([1, 2, 4])
        return [m.trapezoid(y), m.trapezoid(y, dx=2), m.cumulative_trapezoid(y), m.trapezoid(m.tensor([5.0]))]

    same_on_both(fg, torch, program)
    same_error(fg, torch, lambda m: m.trapezoid(m.ones(3), m.ones(2)))
