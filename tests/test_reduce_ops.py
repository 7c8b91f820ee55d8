"""Reductions and set ops of issue 13 against PyTorch: the values, dtypes, node names and errors the
op cases (tests/op_cases.py) do not reach: infinities, integer inputs, empty inputs, options."""

import pytest

from oracle_helpers import same_error, same_on_both

INF = float("inf")


def test_logsumexp_is_stable_and_takes_infinities(fg, torch):
    def program(m):
        x = m.tensor([[-INF, -INF, -INF], [1e30, 1e30, 0.0], [INF, 1.0, 2.0], [100.0, 101.0, 99.0]])
        return m.logsumexp(x, 1), x.logsumexp(-1, keepdim=True)

    same_on_both(fg, torch, program)


def test_logsumexp_of_integers_empty_and_0d(fg, torch):
    def program(m):
        empty = m.zeros(0, 3)
        return [m.logsumexp(m.arange(3), 0), m.logsumexp(empty, 0), m.logsumexp(empty, 1), m.tensor(2.0).logsumexp(0)]

    same_on_both(fg, torch, program)


def test_logsumexp_gradient_and_out(fg, torch):
    def program(m):
        x = m.tensor([[0.5, -1.0, 2.0], [3.0, 3.0, -INF]], requires_grad=True)
        y = m.logsumexp(x, 1)
        y.backward(m.tensor([1.0, 2.0]))
        out = m.zeros(2)
        m.logsumexp(x.detach(), 1, out=out)
        return y, y.grad_fn.name(), x.grad, out

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [lambda m: m.logsumexp(m.ones(2, 3), (0, 0)), lambda m: m.logsumexp(m.ones(2, 3), 2)],
    ids=["repeated dim", "dim out of range"],
)
def test_logsumexp_errors(fg, torch, program):
    same_error(fg, torch, program)
