"""Keyword options of ops, checked against PyTorch on the same data: alpha=, correction=/unbiased=,
norm's p and dims, clamp with tensor bounds, out=, and max/min(dim) results."""

import math

import numpy as np
import pytest

from op_helpers import assert_close
from oracle_helpers import same_error

X = np.array([[0.5, -1.5, 2.0], [3.0, -0.25, 1.0]], dtype=np.float32)
Y = np.array([[1.0, 2.0, -3.0], [0.5, 0.5, 4.0]], dtype=np.float32)

CASES = {
    "add alpha": lambda m, x, y: m.add(x, y, alpha=2.5),
    "sub alpha": lambda m, x, y: x.sub(y, alpha=-2),
    "var correction=0": lambda m, x, y: x.var(dim=1, correction=0),
    "var unbiased=False": lambda m, x, y: x.var(1, False),
    "var unbiased positional": lambda m, x, y: x.var(False),
    "std correction=2 keepdim": lambda m, x, y: x.std(dim=1, correction=2, keepdim=True),
    "norm p=1": lambda m, x, y: x.norm(p=1),
    "norm p=3 dim": lambda m, x, y: x.norm(p=3, dim=1),
    "norm p=inf": lambda m, x, y: x.norm(p=math.inf),
    "norm fro dims": lambda m, x, y: x.norm(p="fro", dim=(0, 1)),
    "clamp tensor min": lambda m, x, y: x.clamp(min=y),
    "clamp tensor max": lambda m, x, y: m.clamp(x, max=y),
    "max dim values": lambda m, x, y: x.max(dim=1).values,
    "min dim keepdim values": lambda m, x, y: x.min(0, keepdim=True)[0],
    "mean dtype": lambda m, x, y: x.mean(dtype=m.float64),
    "sum dim tuple": lambda m, x, y: x.sum(dim=(1, 0), keepdim=True),
    "pow scalar base": lambda m, x, y: m.pow(2.0, x),
}


@pytest.mark.parametrize("name", CASES)
def test_option_matches_torch(fg, torch, name):
    results = []
    for m in (fg, torch):
        x = m.tensor(X, requires_grad=True)
        y = m.tensor(Y, requires_grad=True)
        out = CASES[name](m, x, y)
        out.sum().backward()
        results.append((out.detach().numpy(), x.grad.numpy(), None if y.grad is None else y.grad.numpy()))
    (out_f, gx_f, gy_f), (out_t, gx_t, gy_t) = results
    assert out_f.shape == out_t.shape
    assert_close(out_f, out_t)
    assert_close(gx_f, gx_t, what="grad x")
    assert (gy_f is None) == (gy_t is None)
    if gy_f is not None:
        assert_close(gy_f, gy_t, what="grad y")


def test_max_dim_indices_and_out(fg, torch):
    for m in (fg, torch):
        x = m.tensor(X)
        values, indices = x.max(dim=1)
        assert indices.tolist() == [2, 0]
        assert values.tolist() == [2.0, 3.0]
        out = m.zeros(2, 3)
        assert m.add(x, 1.0, out=out) is out
        assert_close(out.numpy(), X + 1.0)


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.log(m.ones(2, 2), out=m.full((1,), 2.0, requires_grad=True)[..., 1:]),
        lambda m: m.sum(m.ones(2, requires_grad=True), 0, out=m.empty(())),
        lambda m: m.exp(m.ones(2), out=m.zeros(2, requires_grad=True)),
    ],
)
def test_out_refuses_a_graph(fg, torch, program):
    """out= results are not recorded, so an input or out= tensor that requires grad is an error."""
    same_error(fg, torch, program)


def test_a_gradient_of_another_shape_fails_cleanly():
    """The C++ core (the reference has no memory to misread): a view's values swapped for another
    shape under the graph (.data) give an error, not a read past the shape."""
    import fastgrad

    v = fastgrad.full((1,), 2.0, requires_grad=True)[..., 1:]
    v.data = fastgrad.ones(2, 2)
    with pytest.raises(RuntimeError):
        v.mean().backward()
