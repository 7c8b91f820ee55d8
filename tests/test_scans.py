"""Scans along one dim (cumsum, cumprod, logcumsumexp, cummax, cummin and the in-place cumsum_,
cumprod_) against PyTorch: result dtypes, the (values, indices) results, ties and NaNs, cumprod's
gradient with zeros, the in-place forms' histories, and integer overflow. The op cases
(tests/op_cases.py) check values and gradients over layouts with gradcheck; errors are rows of
docs/errors.md."""

import math

from oracle_helpers import same_error, same_on_both


def nans_marked(m, t):
    """t with its NaNs as -7.0, so that results compare equal (NaN != NaN)."""
    return m.where(t != t, m.full(tuple(t.shape), -7.0, dtype=t.dtype), t)


def test_result_dtypes(fg, torch):
    same_on_both(
        fg,
        torch,
        lambda m: [
            m.tensor([1, 2, 3]).cumsum(0),
            m.tensor([True, False, True]).cumsum(0),
            m.tensor([True, True]).cumprod(0),
            m.tensor([1.5, 2.5]).cumsum(0, dtype=m.int64),
            m.tensor([1, 2]).cumprod(0, dtype=m.float64),
            m.tensor([[1.0, 2.0]]).cumsum(dim=1, dtype=m.float64),
            m.tensor([True, False]).cummax(0).values,
            m.tensor(2.5).cumsum(-1),
        ],
    )


def test_cummax_and_cummin_give_values_and_indices(fg, torch):
    def program(m):
        x = m.tensor([[1.0, 3.0, 2.0, 3.0], [0.0, -1.0, -1.0, 2.0]])
        maxes, mins = m.cummax(x, 1), x.cummin(dim=1)
        return type(maxes).__name__, tuple(maxes), (mins.values, mins.indices), tuple(x.cummin(0))

    same_on_both(fg, torch, program)


def test_cummax_takes_the_latest_of_ties_and_nans(fg, torch):
    def program(m):
        x = m.tensor([1.0, math.nan, 2.0, math.nan, 5.0])
        ties = m.tensor([2, 2, 1, 2])
        (maxes, at_max), (mins, at_min) = x.cummax(0), x.cummin(0)
        return nans_marked(m, maxes), at_max, nans_marked(m, mins), at_min, tuple(ties.cummax(0)), tuple(ties.cummin(0))

    same_on_both(fg, torch, program)


def test_cummax_gradient_goes_to_the_indices(fg, torch):
    def program(m):
        x = m.tensor([[1.0, 3.0, 2.0, 3.0], [4.0, 1.0, 5.0, 0.0]], requires_grad=True)
        values = x.cummax(1).values
        values.backward(m.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]))
        return values.grad_fn.name(), x.grad

    same_on_both(fg, torch, program)


def test_cumprod_gradient_with_zeros(fg, torch):
    def program(m):
        x = m.tensor([[2.0, 0.0, 3.0, 0.0, 5.0], [0.0, 1.5, 2.0, -1.0, 0.5]], dtype=m.float64, requires_grad=True)
        y = x.cumprod(1)
        (gx,) = m.autograd.grad(y, x, m.tensor([[1.0, 2.0, 3.0, 4.0, 5.0]] * 2, dtype=m.float64), create_graph=True)
        (ggx,) = m.autograd.grad(gx.sum(), x)
        return y.grad_fn.name(), gx, ggx

    same_on_both(fg, torch, program)


def test_logcumsumexp_of_large_and_infinite_values(fg, torch):
    def program(m):
        x = m.tensor([[1000.0, 1000.0, -math.inf], [-math.inf, -math.inf, 3.0]], requires_grad=True)
        y = m.logcumsumexp(x, 1)
        y.backward(m.tensor([[1.0, -2.0, 0.5], [1.0, 1.0, 1.0]]))
        return y, y.grad_fn.name(), nans_marked(m, x.grad)

    same_on_both(fg, torch, program)


def test_in_place_scans(fg, torch):
    def program(m):
        leaf = m.tensor([[1.0, 2.0, 3.0], [0.5, 0.0, 4.0]], requires_grad=True)
        y = leaf * 1
        y.cumsum_(1)
        names = [y.grad_fn.name()]
        y.cumprod_(dim=0)
        names.append(y.grad_fn.name())
        y.backward(m.ones(2, 3))
        ints = m.tensor([3, 4, 5])
        return y, names, leaf.grad, ints.cumprod_(0), ints

    same_on_both(fg, torch, program)


def test_out_and_integer_overflow(fg, torch):
    def program(m):
        out = m.empty(3)
        m.cumsum(m.tensor([1.0, 2.0, 3.0]), 0, out=out)
        big = m.tensor([2**62, 2**62, 4])
        return out, big.cumsum(0), big.cumprod(0)

    same_on_both(fg, torch, program)


def test_errors(fg, torch):
    same_error(fg, torch, lambda m: m.ones(2, requires_grad=True).cumprod(0, dtype=m.int64))
    same_error(fg, torch, lambda m: m.tensor([True]).cumsum_(0))
    same_error(fg, torch, lambda m: m.ones(2).cumsum_(0, dtype=m.float64))
    same_error(fg, torch, lambda m: m.ones(2, requires_grad=True).cumsum_(0))
    same_error(fg, torch, lambda m: m.ones(()).logcumsumexp(1))


def test_cumprod_gradient_with_zeros_reads_only_what_pytorch_reads(fg, torch):
    # Without create_graph, PyTorch's gradient with zeros never reads g after a line's second zero,
    # nor after its first zero for the elements before it: a NaN there does not spread.
    def program(m):
        x = m.tensor(
            [[2.0, 0.0, 3.0, 0.0, 5.0], [0.0, 1.5, 2.0, 0.0, 0.5], [1.0, 2.0, 0.0, 4.0, 0.0]], requires_grad=True
        )
        x.cumprod(1).backward(m.tensor([[1.0, 2.0, 3.0, math.nan, 5.0]] * 3))
        return nans_marked(m, x.grad)

    same_on_both(fg, torch, program)
