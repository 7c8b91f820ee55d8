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


# Arguments of the wrong type: PyTorch refuses a bool parameter given 1, 0.5, None or numpy.bool_, and an
# int parameter given a bool, with a TypeError naming the argument. (Its "(position N)" for an argument
# passed by position is left out: a Python wrapper cannot tell it from a keyword. PyTorch's ops with
# several overloads, such as sort, std and all, report "received an invalid combination of arguments":
# fastgrad names the argument, and those are checked for the exception type only.)
WRONG_TYPES = {
    "sum keepdim=0.5": lambda m, x: x.sum(0, keepdim=0.5),
    "sum keepdim=numpy.bool_": lambda m, x: m.sum(x, 0, keepdim=np.bool_(True)),
    "mean keepdim=None": lambda m, x: x.mean(0, keepdim=None),
    "amax keepdim=1": lambda m, x: x.amax(0, keepdim=1),
    "argmax dim=True": lambda m, x: x.argmax(dim=True),
    "max keepdim=1": lambda m, x: x.max(0, keepdim=1),
    "median dim=True": lambda m, x: x.median(dim=True),
    "kthvalue keepdim=1": lambda m, x: x.kthvalue(1, 0, keepdim=1),
    "mode dim=numpy.bool_": lambda m, x: x.mode(dim=np.bool_(False)),
    "logsumexp keepdim=1": lambda m, x: x.logsumexp(0, keepdim=1),
    "topk largest=0": lambda m, x: x.topk(1, largest=0),
    "topk sorted=0.0": lambda m, x: m.topk(x, 1, sorted=0.0),
    "cat dim=True": lambda m, x: m.cat([x, x], dim=True),
    "stack dim=1.0": lambda m, x: m.stack([x, x], dim=1.0),
    "unsqueeze dim=True": lambda m, x: x.unsqueeze(dim=True),
    "transpose dim1=True": lambda m, x: x.transpose(dim0=0, dim1=True),
    "softmax dim=True": lambda m, x: x.softmax(dim=True),
    "cumsum dim=False": lambda m, x: m.cumsum(x, dim=False),
}
OTHER_WORDING = {
    "sort descending=1": lambda m, x: x.sort(descending=1),
    "sort stable=1": lambda m, x: x.sort(stable=1),
    "argsort descending=1.0": lambda m, x: x.argsort(descending=1.0),
    "std unbiased=1": lambda m, x: x.std(0, unbiased=1),
    "var keepdim=0": lambda m, x: x.var(0, keepdim=0),
    "all keepdim=1": lambda m, x: x.all(0, keepdim=1),
}


@pytest.mark.parametrize("name", WRONG_TYPES)
def test_wrong_argument_types_give_pytorchs_type_error(fg, torch, name):
    same_error(fg, torch, lambda m: WRONG_TYPES[name](m, m.tensor(X)))


@pytest.mark.parametrize("name", OTHER_WORDING)
def test_wrong_argument_types_of_overloaded_ops_are_type_errors(fg, torch, name):
    for m in (fg, torch):
        with pytest.raises(TypeError, match="bool"):
            OTHER_WORDING[name](m, m.tensor(X))


def test_right_argument_types_still_pass(fg, torch):
    def program(m):
        x = m.tensor(X)
        return [
            x.sum(np.int64(1), keepdim=True),
            x.std(0, True),
            x.var(False),
            x.unsqueeze(m.tensor(0)).shape,
            m.cat([x, x], np.int32(1)),
            x.max(1, False).values,
            x.sort(dim=0, stable=None).values,
            x.topk(np.int64(2)).values,
        ]

    for ours, theirs in zip(program(fg), program(torch)):
        assert_close(np.asarray(ours), np.asarray(theirs))
