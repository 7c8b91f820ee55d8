"""The scatter/gather/index family (issue 13) beyond the op cases of tests/op_cases.py: integer and
bool dtypes, scalar and keyword forms, out=, 0-d tensors, in-place rules and the gradients PyTorch
refuses, each against PyTorch on both backends."""

import warnings

import numpy as np
import pytest
from oracle_helpers import same_error, same_on_both

DATA = np.array([[1.5, 0.0, -2.0, 4.0], [0.0, 3.0, 0.5, -1.0], [2.0, -0.5, 0.0, 1.0]])


def outcome(call):
    """(values, dtype name) of call()'s result, or (exception type name, message)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = call()
    except Exception as e:  # noqa: BLE001 - compared with PyTorch's
        return type(e).__name__, str(e).replace("torch.", "fastgrad.")
    return result.tolist(), str(result.dtype).split(".")[-1]


VALUES = [  # id, f(m) -> tensor: values and dtypes, no gradients
    ("gather int64", lambda m: m.arange(12).reshape(3, 4).gather(0, m.tensor([[2, 1, 0, 2]]))),
    ("gather out=", lambda m: m.gather(m.ones(2, 2), 1, m.tensor([[1], [0]]), out=m.zeros(5))),
    ("index_select bool", lambda m: m.tensor([True, False, True]).index_select(0, m.tensor([1, 2, 1]))),
    ("index_select 0-d index", lambda m: m.arange(6.0).reshape(2, 3).index_select(1, m.tensor(2))),
    ("index_select of 0-d", lambda m: m.tensor(4.0).index_select(0, m.tensor([0]))),
    ("scatter int value", lambda m: m.zeros(3, 4, dtype=m.int64).scatter(0, m.tensor([[1, 2]]), 2.7)),
    ("scatter keyword value", lambda m: m.scatter(m.zeros(2, 2), dim=1, index=m.tensor([[1], [0]]), value=-3)),
    ("scatter reduce add", lambda m: m.ones(2, 2).scatter(0, m.tensor([[1, 1]]), m.full((1, 2), 4.0), reduce="add")),
    ("scatter_ reduce multiply", lambda m: m.full((3,), 2.0).scatter_(0, m.tensor([0, 0]), 3.0, reduce="multiply")),
    ("scatter out=", lambda m: m.scatter(m.zeros(2), 0, m.tensor([1]), m.ones(1), out=m.empty(2))),
    (
        "scatter_add bool",
        lambda m: m.zeros(2, 3, dtype=m.bool).scatter_add(1, m.tensor([[0, 0]]), m.ones(1, 2, dtype=m.bool)),
    ),
    (
        "scatter_add repeated int",
        lambda m: m.zeros(3, dtype=m.int64).scatter_add(0, m.tensor([2, 2, 0]), m.tensor([5, 6, 7])),
    ),
    (
        "index_add int alpha",
        lambda m: m.ones(3, dtype=m.int64).index_add(0, m.tensor([0, 0]), m.tensor([2, 3]), alpha=4),
    ),
    ("index_add of 0-d", lambda m: m.tensor(1.0).index_add(0, m.tensor([0]), m.tensor(2.0))),
    ("index_copy 0-d index", lambda m: m.zeros(2, 2).index_copy(0, m.tensor(1), m.ones(1, 2))),
    ("index_fill int value float", lambda m: m.zeros(3, dtype=m.int64).index_fill(0, m.tensor([0, 2]), 2.7)),
    ("index_fill of 0-d", lambda m: m.tensor(1.0).index_fill(0, m.tensor([0, 0]), 2.0)),
    ("index_fill_ negative", lambda m: m.zeros(2, 3).index_fill_(1, m.tensor([-1]), 5.0)),
    # several entries out of range: PyTorch names the first (not the smallest or the largest)
    ("index_copy_ first bad", lambda m: m.zeros(3, 4).index_copy_(1, m.tensor([1, 9, -3]), m.ones(3, 3))),
    ("index_fill_ first bad", lambda m: m.zeros(3, 4).index_fill_(1, m.tensor([7, -9]), 2.0)),
    ("index_select first bad", lambda m: m.zeros(4).index_select(0, m.tensor([2, 5, -1]))),
    ("take first bad", lambda m: m.zeros(3, 4).take(m.tensor([[3, -30], [20, 0]]))),
    ("put first bad", lambda m: m.zeros(3, 4).put(m.tensor([20, -30]), m.ones(2))),
    ("gather index larger than input", lambda m: m.zeros(2, 2).gather(1, m.tensor([[0], [0], [0]]))),
    ("gather float index", lambda m: m.zeros(2, 2).gather(1, m.tensor([[0.0]]))),
    ("gather dims mismatch", lambda m: m.zeros(2, 2).gather(1, m.tensor([0]))),
    ("index_select float index", lambda m: m.zeros(3).index_select(0, m.tensor([0.0]))),
    ("index_select negative", lambda m: m.zeros(3).index_select(0, m.tensor([-1]))),
    ("index_select of 0-d, two", lambda m: m.tensor(1.0).index_select(0, m.tensor([0, 0]))),
    ("index_select along size 0", lambda m: m.zeros(0, 2).index_select(0, m.tensor([0]))),
    ("index_fill of size 0 out of bounds", lambda m: m.zeros(3, 0).index_fill(0, m.tensor([5]), 1.0)),
    ("index_select bad dim", lambda m: m.zeros(3).index_select(1, m.tensor([0]))),
    ("scatter out of bounds", lambda m: m.zeros(3).scatter(0, m.tensor([3]), 1.0)),
    ("scatter negative", lambda m: m.zeros(3).scatter_(0, m.tensor([-1]), m.ones(1))),
    ("scatter float index", lambda m: m.zeros(3).scatter(0, m.tensor([0.0]), m.ones(1))),
    ("scatter_add dims mismatch", lambda m: m.zeros(3, 2).scatter_add(0, m.tensor([0]), m.ones(1))),
    ("scatter_add dtype", lambda m: m.zeros(3).scatter_add(0, m.tensor([0]), m.ones(1, dtype=m.float64))),
    ("index_add count", lambda m: m.zeros(3, 2).index_add(0, m.tensor([0]), m.ones(2, 2))),
    ("index_add dtype", lambda m: m.zeros(3).index_add(0, m.tensor([0]), m.ones(1, dtype=m.float64))),
    ("index_add 2-d index", lambda m: m.zeros(3).index_add(0, m.tensor([[0]]), m.ones(1))),
    ("index_add float index", lambda m: m.zeros(3).index_add(0, m.tensor([0.0]), m.ones(1))),
    ("index_add negative", lambda m: m.zeros(3).index_add(0, m.tensor([-1]), m.ones(1))),
    (
        "index_add float alpha of ints",
        lambda m: m.zeros(3, dtype=m.int64).index_add(0, m.tensor([0]), m.ones(1, dtype=m.int64), alpha=0.5),
    ),
    ("index_copy slice shapes", lambda m: m.zeros(3, 4).index_copy(0, m.tensor([0, 1]), m.ones(2, 3))),
    ("index_copy count", lambda m: m.zeros(3, 4).index_copy(0, m.tensor([0]), m.ones(2, 4))),
    ("index_copy dtype", lambda m: m.zeros(3).index_copy(0, m.tensor([0]), m.ones(1, dtype=m.float64))),
    ("index_copy 2-d index", lambda m: m.zeros(3).index_copy(0, m.tensor([[0]]), m.ones(1))),
    ("index_copy float index", lambda m: m.zeros(3).index_copy(0, m.tensor([0.0]), m.ones(1))),
    ("index_fill 2-d index", lambda m: m.zeros(3).index_fill(0, m.tensor([[0]]), 1.0)),
    ("index_fill float index", lambda m: m.zeros(3).index_fill(0, m.tensor([0.0]), 1.0)),
    ("index_fill out of bounds", lambda m: m.zeros(3).index_fill(0, m.tensor([3]), 1.0)),
    ("nonzero bool", lambda m: m.tensor([[True, False], [False, True]]).nonzero()),
    ("nonzero out=", lambda m: m.nonzero(m.tensor([0, 3, 0, 4]), out=m.empty(0, dtype=m.int64))),
    ("argwhere of 0-d", lambda m: m.argwhere(m.tensor(2))),
    ("masked_select int", lambda m: m.arange(6).reshape(2, 3).masked_select(m.tensor([True, False, True]))),
    ("masked_select int mask", lambda m: m.zeros(3).masked_select(m.tensor([1, 0, 1]))),
    ("masked_select shapes", lambda m: m.zeros(3).masked_select(m.tensor([True, False]))),
    ("take out of bounds", lambda m: m.zeros(2, 3).take(m.tensor([1, 6]))),
    ("take negative out of bounds", lambda m: m.zeros(2, 3).take(m.tensor([-7]))),
    ("take float index", lambda m: m.zeros(3).take(m.tensor([1.0]))),
    ("take of nothing", lambda m: m.take(m.zeros(0), m.tensor([], dtype=m.int64))),
    ("take_along_dim float", lambda m: m.zeros(2, 3).take_along_dim(m.tensor([[0.0]]), 1)),
    ("take_along_dim dims", lambda m: m.zeros(2, 3).take_along_dim(m.tensor([0]), 1)),
    ("take_along_dim strided", lambda m: m.zeros(3, 2).t().take_along_dim(m.tensor([0]))),
    ("take_along_dim of 0-d", lambda m: m.tensor(1.0).take_along_dim(m.tensor(0), 0)),
    ("take_along_dim out=", lambda m: m.take_along_dim(m.ones(2, 3), m.tensor([[1]]), 1, out=m.zeros(1))),
    ("index_put int accumulate", lambda m: m.zeros(3, dtype=m.int64).index_put((m.tensor([1, 1]),), m.tensor(5), True)),
    ("index_put_ indices a tensor", lambda m: m.zeros(3).index_put_(m.tensor([0]), m.tensor(1.0))),
    ("index_put_ None index", lambda m: m.zeros(3, 2).index_put_((None, m.tensor([0])), m.tensor(1.0))),
    ("index_put_ number value", lambda m: m.zeros(3).index_put_((m.tensor([0]),), 1.0)),
    # int32 indices: PyTorch takes them for gather, scatter*, index_select and index_add, not the others
    ("scatter int32", lambda m: m.zeros(2, 3).scatter(1, m.tensor([[2], [0]], dtype=m.int32), 1.0)),
    ("scatter_add int32", lambda m: m.zeros(3).scatter_add(0, m.tensor([1, 1], dtype=m.int32), m.ones(2))),
    ("index_select int32", lambda m: m.arange(6).reshape(2, 3).index_select(1, m.tensor([2, 0], dtype=m.int32))),
    ("index_add int32", lambda m: m.zeros(3).index_add(0, m.tensor([2, 2], dtype=m.int32), m.ones(2))),
    ("index_add 2-d int32", lambda m: m.zeros(3).index_add(0, m.tensor([[0]], dtype=m.int32), m.ones(1))),
    ("index_copy int32", lambda m: m.zeros(3).index_copy(0, m.tensor([0], dtype=m.int32), m.ones(1))),
    ("index_fill int32", lambda m: m.zeros(3).index_fill(0, m.tensor([0], dtype=m.int32), 1.0)),
    ("take int32", lambda m: m.zeros(3).take(m.tensor([0], dtype=m.int32))),
    ("take_along_dim int32", lambda m: m.zeros(2, 3).take_along_dim(m.tensor([[0]], dtype=m.int32), 1)),
    ("take_along_dim flat int32", lambda m: m.arange(6).reshape(2, 3).take_along_dim(m.tensor([4], dtype=m.int32))),
    ("take_along_dim flat negative", lambda m: m.zeros(3).take_along_dim(m.tensor([-1]))),
    ("gather int16", lambda m: m.zeros(3).gather(0, m.tensor([0], dtype=m.int16))),
    ("index_select int16", lambda m: m.zeros(3).index_select(0, m.tensor([0], dtype=m.int16))),
    # scatter_reduce, put, masked_scatter: dtypes and misuse
    (
        "scatter_reduce mean of ints",
        lambda m: m.tensor([1, 2, -3]).scatter_reduce(
            0, m.tensor([0, 0, 2], dtype=m.int32), m.tensor([4, 5, 2]), "mean"
        ),
    ),
    (
        "scatter_reduce mean of ints, without self",
        lambda m: m.tensor([1, 2, -3]).scatter_reduce(
            0, m.tensor([0, 0, 2]), m.tensor([4, 5, -2]), "mean", include_self=False
        ),
    ),
    (
        "scatter_reduce amax of ints, without self",
        lambda m: m.tensor([9, 2, 9]).scatter_reduce(0, m.tensor([0, 0]), m.tensor([4, 5]), "amax", include_self=False),
    ),
    (
        "scatter_reduce amin NaN",
        lambda m: (
            m.tensor([1.0, 2.0])
            .scatter_reduce(0, m.tensor([0, 0, 1]), m.tensor([float("nan"), 0.0, 5.0]), "amin")
            .nan_to_num(-7.0)
        ),
    ),
    (
        "scatter_reduce_ prod bool",
        lambda m: m.tensor([True, True]).scatter_reduce_(0, m.tensor([0, 1]), m.tensor([False, True]), "prod"),
    ),
    (
        "scatter_reduce out=",
        lambda m: m.scatter_reduce(m.ones(2), 0, m.tensor([1]), m.full((1,), 3.0), "sum", out=m.empty(2)),
    ),
    ("scatter_reduce max", lambda m: m.ones(3).scatter_reduce(0, m.tensor([0, 0]), m.tensor([5.0, -1.0]), "max")),
    ("scatter_reduce bad reduce", lambda m: m.zeros(3).scatter_reduce(0, m.tensor([0]), m.ones(1), "add")),
    ("scatter_reduce float index", lambda m: m.zeros(3).scatter_reduce(0, m.tensor([0.0]), m.ones(1), "sum")),
    (
        "scatter_reduce dtype",
        lambda m: m.zeros(3).scatter_reduce(0, m.tensor([0]), m.ones(1, dtype=m.float64), "sum"),
    ),
    ("scatter_reduce out of bounds", lambda m: m.zeros(3).scatter_reduce(0, m.tensor([3]), m.ones(1), "amax")),
    (
        "scatter_reduce mean bool",
        lambda m: m.zeros(2, dtype=m.bool).scatter_reduce(0, m.tensor([0]), m.ones(1, dtype=m.bool), "mean"),
    ),
    ("put int", lambda m: m.arange(6).reshape(2, 3).put(m.tensor([[5], [-6]]), m.tensor([7, 8]))),
    ("put_ accumulate repeated", lambda m: m.zeros(3).put_(m.tensor([0, 0]), m.tensor([1.0, 2.0]), accumulate=True)),
    ("put of nothing", lambda m: m.zeros(0).put(m.tensor([], dtype=m.int64), m.ones(0))),
    ("put out of bounds", lambda m: m.zeros(2, 3).put(m.tensor([0, 6]), m.ones(2))),
    ("put negative out of bounds", lambda m: m.zeros(2, 3).put(m.tensor([-7]), m.ones(1))),
    ("put into empty", lambda m: m.zeros(0).put(m.tensor([0]), m.ones(1))),
    ("put int32 index", lambda m: m.zeros(3).put(m.tensor([0], dtype=m.int32), m.ones(1))),
    ("put count", lambda m: m.zeros(3).put(m.tensor([0, 1]), m.ones(1))),
    ("put dtype", lambda m: m.zeros(3).put(m.tensor([0]), m.ones(1, dtype=m.float64))),
    ("masked_scatter int", lambda m: m.zeros(2, 2, dtype=m.int64).masked_scatter(m.tensor([True, False]), m.arange(5))),
    (
        "masked_scatter_ bool",
        lambda m: m.zeros(3, dtype=m.bool).masked_scatter_(m.tensor(True), m.ones(3, dtype=m.bool)),
    ),
    ("masked_scatter source too small", lambda m: m.zeros(2, 2).masked_scatter(m.ones(2, 2, dtype=m.bool), m.ones(3))),
    ("masked_scatter float mask", lambda m: m.zeros(2).masked_scatter(m.ones(2), m.ones(2))),
    ("masked_scatter dtype", lambda m: m.zeros(2).masked_scatter(m.ones(2, dtype=m.bool), m.ones(2, dtype=m.int64))),
    ("masked_scatter shapes", lambda m: m.zeros(4).masked_scatter(m.ones(3, dtype=m.bool), m.ones(4))),
    ("masked_scatter_ shapes", lambda m: m.zeros(4).masked_scatter_(m.ones(3, dtype=m.bool), m.ones(4))),
]


@pytest.mark.parametrize("name, f", VALUES, ids=[c[0] for c in VALUES])
def test_values_and_errors_match_torch(fg, torch, name, f):
    assert outcome(lambda: f(fg)) == outcome(lambda: f(torch))


GRADIENTS = [  # id, f(m, x) -> tensor; x is a (3, 4) leaf
    (
        "gather then scatter_add",
        lambda m, x: m.zeros(3, 4, dtype=m.float64).scatter_add(
            1, m.tensor([[0, 0]] * 3), x.gather(1, m.tensor([[3, 1]] * 3))
        ),
    ),
    ("index_select repeated", lambda m, x: x.index_select(0, m.tensor([2, 2, 0]))),
    ("scatter_ of a view", lambda m, x: (x * 1)[1:].scatter_(1, m.tensor([[3], [0]]), x[:2, :1] * 2)),
    ("scatter_add_ repeated", lambda m, x: (x * 1).scatter_add_(0, m.tensor([[0, 0, 0, 0]]), x[:1] * 3)),
    ("index_fill_ 0-d value", lambda m, x: (x * 1).index_fill_(1, m.tensor([0, 2]), x[0, 0].double())),
    ("index_put accumulate", lambda m, x: x.index_put((m.tensor([0, 0]),), x[1] * 2, accumulate=True)),
    ("masked_select broadcast", lambda m, x: m.masked_select(x[0], m.tensor([[True], [False], [True]]))),
    ("take repeated", lambda m, x: x.take(m.tensor([[1, 1], [-1, 0]]))),
    ("take_along_dim of argsort", lambda m, x: m.take_along_dim(x, x.argsort(0), 0)),
    ("index_copy repeated rows of source", lambda m, x: x.index_copy(1, m.tensor([3, 0]), x[:, 1:3] * 2)),
]


@pytest.mark.parametrize("name, f", GRADIENTS, ids=[c[0] for c in GRADIENTS])
def test_gradients_match_torch(fg, torch, name, f):
    def run(m):
        x = m.tensor(DATA, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = f(m, x)
        (out * m.arange(out.numel(), dtype=out.dtype).reshape(out.shape)).sum().backward()
        return out.detach().tolist(), out.grad_fn.name(), x.grad.tolist()

    assert run(fg) == run(torch)


BACKWARD_ERRORS = [  # PyTorch records these but refuses their backward
    ("scatter reduce multiply", lambda m, x: x.scatter(0, m.tensor([[0, 1]]), x[:1, :2] * 1, reduce="multiply")),
    ("scatter_ reduce add", lambda m, x: (x * 1).scatter_(0, m.tensor([[0, 1]]), 2.0, reduce="add")),
    (
        "scatter src larger than index",
        lambda m, x: m.zeros(3, 4, dtype=m.float64).scatter(0, m.tensor([[0, 1]]), x[:2]),
    ),
    (
        "scatter_add src larger than index",
        lambda m, x: m.zeros(3, 4, dtype=m.float64).scatter_add(1, m.tensor([[0]]), x),
    ),
]


@pytest.mark.parametrize("name, f", BACKWARD_ERRORS, ids=[c[0] for c in BACKWARD_ERRORS])
def test_refused_backward_matches_torch(fg, torch, name, f):
    def run(m):
        x = m.tensor(DATA, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = f(m, x)
        return out.grad_fn.name(), outcome(lambda: out.sum().backward())

    assert run(fg) == run(torch)


def test_in_place_rules_match_torch(fg, torch):
    def run(m):
        leaf = m.zeros(3, requires_grad=True)
        shared = m.zeros(4)
        return [
            outcome(lambda: leaf.scatter_(0, m.tensor([0]), 1.0)),
            outcome(lambda: leaf.index_add_(0, m.tensor([0]), m.ones(1))),
            outcome(lambda: shared[:2].scatter_(0, m.tensor([0, 1]), shared[1:3])),
            outcome(lambda: m.zeros(1).expand(3).scatter_(0, m.tensor([0]), m.ones(1))),
        ]

    assert run(fg) == run(torch)


def test_reduce_with_src_warns_as_torch(fg):
    with pytest.warns(UserWarning, match="The reduce argument of torch.scatter with Tensor src is deprecated"):
        fg.zeros(2).scatter(0, fg.tensor([0]), fg.ones(1), reduce="add")


def test_nonzero_as_tuple_matches_torch(fg, torch):
    def run(m):
        return [[t.tolist() for t in x.nonzero(as_tuple=True)] for x in (m.tensor([[0, 2], [3, 0]]), m.tensor(1.5))]

    assert run(fg) == run(torch)


def test_double_backward_matches_torch(fg, torch):
    def run(m):
        x = m.tensor(DATA, requires_grad=True)
        y = (x.gather(1, m.tensor([[1, 1]] * 3)) ** 2).sum() + (x.index_select(0, m.tensor([0, 0])) ** 3).sum()
        (g,) = m.autograd.grad(y, x, create_graph=True)
        (gg,) = m.autograd.grad((g * g).sum(), x)
        return g.tolist(), gg.tolist()

    assert run(fg) == run(torch)


# ---- scatter_reduce, put, masked_scatter (issue 13, scatter family)

SCATTER_REDUCE_INDEX = [[0, 1, 2, 0], [0, 0, 1, 1], [2, 2, 0, 0], [0, 1, 2, 0]]


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_gradients_match_torch(fg, torch, reduce, include_self):
    """src's rows 0 and 3 are equal and land together (ties for amax/amin, with self's row 0 too),
    and two zeros land on one place (prod)."""

    def run(m):
        x = m.tensor(DATA, requires_grad=True)
        src = m.cat([x, x[:1]]) * 1
        out = x.scatter_reduce(0, m.tensor(SCATTER_REDUCE_INDEX), src, reduce, include_self=include_self)
        (out * m.arange(1.0, 13.0, dtype=out.dtype).reshape(3, 4)).sum().backward()
        return out, out.grad_fn.name(), x.grad

    same_on_both(fg, torch, run)


PUT_AND_MASKED_SCATTER = [  # id, f(m, x) -> tensor; x is a (3, 4) leaf
    ("put negative", lambda m, x: x.put(m.tensor([[0, -1], [5, 0]]), x[1:, :2] * 2)),
    ("put, then written in place", lambda m, x: x.put(m.tensor([1]), x[0, :1] * 2, accumulate=True).mul_(2)),
    ("masked_scatter, then written in place", lambda m, x: x.t().masked_scatter(x.t() > 0, x.t() * 2).add_(1)),
    ("put accumulate", lambda m, x: m.put(x, m.tensor([1, 1, -12]), x[0, :3] * 2, accumulate=True)),
    ("put_ of a transpose", lambda m, x: (x * 1).t().put_(m.tensor([1, 4]), x[2, :2] * 3)),
    ("masked_scatter", lambda m, x: x.masked_scatter(x > 0, x.flip(0) * 2)),
    ("masked_scatter broadcast", lambda m, x: m.masked_scatter(x[0], m.tensor([[True], [False], [True]]), x * 2)),
    ("masked_scatter_", lambda m, x: (x * 1).masked_scatter_(m.tensor([False, True, True, False]), x[1:] * 2)),
]


@pytest.mark.parametrize("name, f", PUT_AND_MASKED_SCATTER, ids=[c[0] for c in PUT_AND_MASKED_SCATTER])
def test_put_and_masked_scatter_match_torch(fg, torch, name, f):
    def run(m):
        x = m.tensor(DATA, requires_grad=True)
        out = f(m, x)
        (out * m.arange(out.numel(), dtype=out.dtype).reshape(out.shape)).sum().backward()
        # the in-place forms copy their result back (CopyBackwards), where PyTorch's node is the op's own
        return out, None if name.endswith("_") else out.grad_fn.name(), x.grad

    same_on_both(fg, torch, run)


@pytest.mark.parametrize(
    "write",
    [
        lambda m, v, s: v.scatter_reduce_(0, m.tensor([0, 0, 2]), s, "amax"),
        lambda m, v, s: v.put_(m.tensor([2, 0]), s[:2], accumulate=True),
        lambda m, v, s: v.masked_scatter_(m.tensor([True, False, True]), s),
    ],
    ids=["scatter_reduce_", "put_", "masked_scatter_"],
)
def test_in_place_forms_record_their_ops_node(fg, torch, write):
    """PyTorch's node of the op (not a copy's), one version bump, gradients, and the leaf error."""

    def program(m):
        x = m.tensor([0.5, -1.0, 2.0], requires_grad=True)
        source = m.tensor([1.5, 0.25, -3.0], requires_grad=True)
        v = x * 1
        result = write(m, v, source)
        (result * m.tensor([1.0, 2.0, 3.0])).sum().backward()
        return result is v, v.grad_fn.name(), v._version, v, x.grad, source.grad

    same_on_both(fg, torch, program)
    same_error(fg, torch, lambda m: write(m, m.tensor([1.0, 2.0, 3.0], requires_grad=True), m.ones(3)))
