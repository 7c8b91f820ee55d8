"""The fused neural-network ops: softmax, log_softmax, nll_loss and gelu.

softmax and log_softmax are public (fastgrad.softmax, Tensor.softmax); nll_loss and gelu are
primitives (`_prims.nll_loss(input, target, weight, reduction, ignore_index)`,
`_prims.gelu(input, approximate)`) that nn.functional is written over; against torch they are
compared with torch.nn.functional's. Table-driven softmax cases (layouts, gradcheck, grad_fn) are in
op_cases.py; here: more shapes and dims, size-0 and 0-d tensors, stability, -inf, the loss and
GELU, errors, the two backends agreeing, and the kernels' bits not depending on the thread count.
"""

import types

import numpy as np
import pytest

from op_helpers import assert_close, dtype_name, gradcheck_for, rng_for, to_numpy
from oracle_helpers import same_on_both

DTYPES = ["float32", "float64"]


def ops_for(m):
    """nll_loss and gelu with the primitives' signatures: the backend's _prims, or torch's F."""
    if m.__name__ == "torch":
        F = m.nn.functional
        return types.SimpleNamespace(
            nll_loss=lambda x, t, w, reduction, ignore_index: F.nll_loss(
                x, t, weight=w, reduction=reduction, ignore_index=ignore_index
            ),
            gelu=lambda x, approximate: F.gelu(x, approximate=approximate),
        )
    return m._prims


def leaf(m, array, dtype):
    return m.tensor(np.asarray(array, dtype=dtype), requires_grad=True)


def run_both(fg, torch, fn, arrays, dtype, upstream_key):
    """fn(m, *leaves) on both modules with the same data; backward with the same random upstream
    gradient. Returns [(out, leaves)] for fg, then torch."""
    results = []
    for m in (fg, torch):
        leaves = [leaf(m, a, dtype) for a in arrays]
        out = fn(m, *leaves)
        upstream = rng_for(upstream_key).standard_normal(tuple(out.shape)).astype(dtype)
        if out.numel():
            out.backward(m.tensor(upstream))
        results.append((out, leaves))
    return results


def assert_same(results, rtol, atol):
    (out, leaves), (t_out, t_leaves) = results
    assert dtype_name(out.dtype) == dtype_name(t_out.dtype)
    assert_close(to_numpy(out), to_numpy(t_out), rtol, atol)
    for x, t_x in zip(leaves, t_leaves):
        if t_x.grad is None:
            assert x.grad is None
        else:
            assert_close(to_numpy(x.grad), to_numpy(t_x.grad), rtol, atol, what="grad")


TOLERANCES = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14)}

# ---- softmax and log_softmax

SOFTMAX_SHAPES = [
    ((5,), 0),
    ((5,), -1),
    ((3, 4), 0),
    ((3, 4), 1),
    ((3, 4), -2),
    ((2, 3, 4), 0),
    ((2, 3, 4), 1),
    ((2, 3, 4), 2),
    ((2, 1, 3), 1),
    ((), 0),
    ((), -1),
    ((0, 3), 0),
    ((0, 3), 1),
    ((2, 0, 3), 1),
    ((2, 0, 3), -1),
    ((3, 0), 0),
]


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", SOFTMAX_SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_matches_torch(fg, torch, name, shape, dim, dtype):
    x = 3 * rng_for(name, shape, dim).standard_normal(shape)
    results = run_both(fg, torch, lambda m, x: getattr(m, name)(x, dim), [x], dtype, (name, shape))
    assert_same(results, *TOLERANCES[dtype])
    out = results[0][0]
    assert tuple(out.shape) == shape and out.requires_grad
    assert out.grad_fn.name() == {"softmax": "SoftmaxBackward0", "log_softmax": "LogSoftmaxBackward0"}[name]


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_of_views_matches_torch(fg, torch, name, dtype):
    """Transposed, sliced and expanded inputs (the kernel copies them dense first), method form."""
    x = rng_for(name, "views").standard_normal((4, 6))
    for view in [lambda t: t.t(), lambda t: t[:, ::2], lambda t: t[:1].expand(3, 6), lambda t: t.t()[1:3]]:
        for dim in (0, 1):
            results = run_both(fg, torch, lambda m, x: getattr(view(x), name)(dim), [x], dtype, (name, dim))
            assert_same(results, *TOLERANCES[dtype])


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_dtype_argument(fg, name):
    x = fg.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    out = getattr(fg, name)(x, 1, dtype=fg.float64)
    assert out.dtype == fg.float64
    assert out.grad_fn.next_functions[0][0].name() == "ToCopyBackward0"
    ints = getattr(fg, name)(fg.tensor([0, 1, 2]), 0, dtype=fg.float64)  # an int tensor, converted first
    np.testing.assert_allclose(to_numpy(ints), to_numpy(getattr(fg, name)(fg.tensor([0.0, 1.0, 2.0]).double(), 0)))
    assert getattr(x, name)(dim=1).dtype == fg.float32


def test_softmax_rows_sum_to_one(fg):
    x = fg.tensor(rng_for("rows").standard_normal((3, 5, 4)) * 10)
    for dim in range(3):
        assert_close(
            to_numpy(x.softmax(dim).sum(dim)),
            np.ones([n for d, n in enumerate(x.shape) if d != dim]),
            rtol=0,
            atol=1e-6,
        )
        assert_close(
            to_numpy(x.log_softmax(dim).exp().sum(dim)),
            np.ones([n for d, n in enumerate(x.shape) if d != dim]),
            rtol=0,
            atol=1e-6,
        )


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_is_stable_for_huge_logits(fg, torch, name, dtype):
    """Logits of size 1e4 overflow exp() unless the row's maximum is subtracted first."""
    x = 1e4 * rng_for(name, "huge").standard_normal((4, 7))
    for dim in (0, 1):
        results = run_both(fg, torch, lambda m, x: getattr(m, name)(x, dim), [x], dtype, (name, "huge"))
        out, (leaf_,) = results[0]
        assert np.isfinite(to_numpy(out)).all() and np.isfinite(to_numpy(leaf_.grad)).all()
        assert_same(results, 1e-5, 1e-6)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_infinities_and_nan_as_torch(fg, torch, name, dtype):
    """-inf entries get probability 0 (log -inf); a row of only -inf, or holding +inf or NaN, is NaN."""
    inf, nan = float("inf"), float("nan")
    x = np.array([[-inf, 0.0, 1.0], [-inf, -inf, -inf], [inf, 1.0, 2.0], [nan, 1.0, 2.0], [-inf, 5.0, -inf]])
    for dim in (1, 0):
        results = run_both(fg, torch, lambda m, x: getattr(m, name)(x, dim), [x], dtype, (name, "inf"))
        assert_same(results, 1e-6, 1e-7)  # NaNs compare equal: they must be in the same places


# A row of shifted values around exp's underflow: a denormal result, one rounding to the smallest
# denormal, below the kernel's clamp (exp is 0 there: the kernel skips it), -inf (a masked score)
VANISHING_ROWS = {
    "float32": ([0.0, -90.0, -103.0, -104.5, -1e30, -np.inf], 1.5e-45),  # (row, one denormal ulp and a half)
    "float64": ([0.0, -700.0, -740.0, -746.5, -1e300, -np.inf], 1e-323),
}


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_of_vanishing_terms(fg, dtype):
    """Terms whose exp underflows to 0 (masked scores of -inf among them) come out exactly 0, those
    just above it as the float64 formula's tiny or denormal value: along rows and across columns,
    with vector tails (the row is repeated to 3 * 6 + 1 values: no term is its row's maximum but 0)."""
    values, atol = VANISHING_ROWS[dtype]
    row = np.array(values * 3 + [-np.inf], dtype=dtype)
    expected = np.exp(row.astype(np.float64)) / 3  # the row's sum is 3 plus terms far below its ulp
    along_row = to_numpy(fg.softmax(fg.tensor(row), 0))
    across_columns = to_numpy(fg.softmax(fg.tensor(np.repeat(row[:, None], 5, axis=1)), 0)).T
    for got in (along_row, *across_columns):
        assert_close(got, expected, rtol=1e-6, atol=atol)
        assert (got[expected == 0] == 0).all()


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", [((4,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), 1), ((), 0)])
def test_softmax_gradcheck(fg, name, shape, dim):
    x = leaf(fg, rng_for(name, shape, "gc").standard_normal(shape), np.float64)
    assert gradcheck_for(fg)(lambda t: getattr(t, name)(dim), (x,))


def test_softmax_of_empty_and_int_empty(fg):
    x = fg.zeros(0, 3, requires_grad=True)
    out = fg.softmax(x, 1)
    assert tuple(out.shape) == (0, 3) and out.grad_fn.name() == "SoftmaxBackward0"
    out.sum().backward()
    assert tuple(x.grad.shape) == (0, 3)
    ints = fg.log_softmax(fg.zeros(2, 0, dtype=fg.int64), 0)  # PyTorch skips the dtype check when empty
    assert ints.dtype == fg.int64 and tuple(ints.shape) == (2, 0)


def test_softmax_saved_output_is_version_checked(fg):
    x = fg.tensor([[1.0, 2.0], [3.0, 5.0]], requires_grad=True)
    y = x.softmax(1)
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


# ---- nll_loss

NLL_CASES = [  # id, input shape, targets, weights (None or per class), reduction, ignore_index
    ("mean", (4, 5), [0, 4, 2, 2], None, "mean", -100),
    ("sum", (4, 5), [0, 4, 2, 2], None, "sum", -100),
    ("none", (4, 5), [0, 4, 2, 2], None, "none", -100),
    ("weighted mean", (4, 5), [0, 4, 2, 2], [0.5, 1.0, 2.0, 3.0, 0.25], "mean", -100),
    ("weighted sum", (4, 5), [0, 4, 2, 2], [0.5, 1.0, 2.0, 3.0, 0.25], "sum", -100),
    ("weighted none", (4, 5), [0, 4, 2, 2], [0.5, 1.0, 2.0, 3.0, 0.25], "none", -100),
    ("ignored mean", (4, 5), [0, -100, 2, -100], None, "mean", -100),
    ("ignored weighted mean", (4, 5), [1, 3, 1, 0], [0.5, 1.0, 2.0, 3.0, 0.25], "mean", 1),
    ("ignored none", (4, 5), [1, 3, 1, 0], None, "none", 3),
    ("all ignored mean", (3, 4), [-100, -100, -100], None, "mean", -100),  # 0 / 0: NaN
    ("all ignored sum", (3, 4), [-100, -100, -100], None, "sum", -100),
    ("all ignored weighted mean", (3, 4), [2, 2, 2], [1.0, 2.0, 3.0, 4.0], "mean", 2),
    ("zero weight mean", (3, 4), [0, 0, 1], [0.0, 0.0, 1.0, 1.0], "mean", -100),  # NaN, and NaN gradients
    ("empty mean", (0, 4), [], None, "mean", -100),
    ("empty sum", (0, 4), [], None, "sum", -100),
    ("empty none", (0, 4), [], None, "none", -100),
    ("1-D mean", (5,), 3, None, "mean", -100),
    ("1-D weighted mean", (5,), 3, [0.5, 1.0, 2.0, 3.0, 0.25], "mean", -100),
    ("1-D weighted none", (5,), 3, [0.5, 1.0, 2.0, 3.0, 0.25], "none", -100),
    ("1-D sum", (5,), 1, None, "sum", -100),
    ("1-D, target of shape (1,), one class", (1,), [0], [2.0], "sum", -100),
    ("1-D ignored", (5,), 1, None, "mean", 1),
    ("one class", (3, 1), [0, 0, 0], [2.0], "mean", -100),
]


def nll_inputs(m, case, dtype):
    _, shape, targets, weights, reduction, ignore_index = case
    x = leaf(m, rng_for("nll", case[0]).standard_normal(shape), dtype)
    weight = None if weights is None else m.tensor(np.asarray(weights, dtype=dtype))
    return x, m.tensor(targets, dtype=m.int64), weight, reduction, ignore_index


@pytest.mark.parametrize("case", NLL_CASES, ids=[c[0] for c in NLL_CASES])
@pytest.mark.parametrize("dtype", DTYPES)
def test_nll_loss_matches_torch(fg, torch, case, dtype):
    results = []
    for m in (fg, torch):
        x, target, weight, reduction, ignore_index = nll_inputs(m, case, dtype)
        out = ops_for(m).nll_loss(x, target, weight, reduction, ignore_index)
        upstream = rng_for("nll upstream").standard_normal(tuple(out.shape)).astype(dtype)
        out.backward(m.tensor(upstream))
        results.append((out, [x]))
    assert_same(results, *TOLERANCES[dtype])
    assert results[0][0].grad_fn.name() == "NllLossBackward0"


NAN_LOSSES = ("zero weight mean", "all ignored mean", "all ignored weighted mean", "1-D ignored")  # 0 / 0


@pytest.mark.parametrize("case", [c for c in NLL_CASES if c[0] not in NAN_LOSSES], ids=lambda c: c[0])
def test_nll_loss_gradcheck(fg, case):
    x, target, weight, reduction, ignore_index = nll_inputs(fg, case, np.float64)
    prims = ops_for(fg)
    assert gradcheck_for(fg)(lambda t: prims.nll_loss(t, target, weight, reduction, ignore_index), (x,))


def test_nll_loss_of_log_softmax_views(fg, torch):
    """A transposed (non-contiguous) input, fed by log_softmax: the classifier's usual loss."""
    logits = rng_for("nll views").standard_normal((5, 3))
    results = []
    for m in (fg, torch):
        x = leaf(m, logits, np.float32)
        out = ops_for(m).nll_loss(x.t().log_softmax(1), m.tensor([4, 0, 2]), None, "mean", -100)
        out.backward()
        results.append((out, [x]))
    assert_same(results, 1e-5, 1e-6)


def test_nll_loss_edges(fg):
    prims = ops_for(fg)
    x = fg.tensor([[-1.0, -2.0], [-3.0, -4.0]], requires_grad=True)
    out = prims.nll_loss(x, fg.tensor([1, 0]), fg.tensor([1.0, 3.0]), "mean", -100)
    assert out.grad_fn.name() == "NllLossBackward0" and len(out.grad_fn.next_functions) == 1
    assert out.item() == pytest.approx((2.0 * 3 + 3.0 * 1) / 4)
    out.backward()
    assert x.grad.tolist() == [[0.0, -0.75], [-0.25, 0.0]]
    with fg.no_grad():  # a weight that requires grad is fine when nothing is recorded
        assert prims.nll_loss(x, fg.tensor([1, 0]), fg.ones(2, requires_grad=True), "sum", -100).item() == 5.0
    y = x * 1
    loss = prims.nll_loss(y, fg.tensor([1, 0]), None, "sum", -100)
    y.add_(1)  # the input is saved, as in PyTorch
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_nll_loss_1d_target_backward_fails_as_torch(fg, torch):
    """PyTorch's forward takes a 1-D input with a target of shape (1,), but its backward checks the
    target's size against the number of classes; fastgrad does the same."""
    for m in (fg, torch):
        x = m.zeros(5, requires_grad=True)
        loss = ops_for(m).nll_loss(x, m.tensor([3]), None, "mean", -100)
        assert loss.item() == 0.0
        with pytest.raises(RuntimeError) as info:
            loss.backward()
        assert str(info.value) == "size mismatch (got input: [5], target: [1])"


# id, fn(m, ops) with the primitives' signatures, exception, PyTorch's message
def _x(m, *shape, dtype=None):
    return m.zeros(shape, dtype=dtype or m.float32)


NLL_ERRORS = [
    (
        "0-d input",
        lambda m, o: o.nll_loss(_x(m), m.tensor(0), None, "mean", -100),
        ValueError,
        "Expected 1 or more dimensions (got 0)",
    ),
    (
        "batch mismatch",
        lambda m, o: o.nll_loss(_x(m, 3, 4), m.tensor([0, 1]), None, "mean", -100),
        ValueError,
        "Expected input batch_size (3) to match target batch_size (2).",
    ),
    (
        "0-d target of a batch",
        lambda m, o: o.nll_loss(_x(m, 3, 4), m.tensor(1), None, "mean", -100),
        ValueError,
        "Expected input batch_size (3) to match target batch_size (0).",
    ),
    (
        "0-d target of an empty batch",
        lambda m, o: o.nll_loss(_x(m, 0, 4), m.tensor(1), None, "mean", -100),
        IndexError,
        "Dimension specified as 0 but tensor has no dimensions",
    ),
    (
        "2-D target",
        lambda m, o: o.nll_loss(_x(m, 3, 4), m.tensor([[0], [1], [1]]), None, "mean", -100),
        RuntimeError,
        "0D or 1D target tensor expected, multi-target not supported",
    ),
    (
        "float target",
        lambda m, o: o.nll_loss(_x(m, 3, 4), m.tensor([0.0, 1.0, 1.0]), None, "mean", -100),
        RuntimeError,
        "expected target dtype to be Long or Byte, but got Float",
    ),
    (
        "bool target",
        lambda m, o: o.nll_loss(_x(m, 2, 4), m.tensor([True, False]), None, "sum", -100),
        RuntimeError,
        "expected target dtype to be Long or Byte, but got Bool",
    ),
    (
        "1-D input, 1-D target of 2",
        lambda m, o: o.nll_loss(_x(m, 4), m.tensor([0, 1]), None, "mean", -100),
        ValueError,
        "For 1D input, 1D target must have size 1, but got target size: 2",
    ),
    (
        "target out of bounds",
        lambda m, o: o.nll_loss(_x(m, 3, 4), m.tensor([0, 5, 1]), None, "mean", -100),
        IndexError,
        "Target 5 is out of bounds.",
    ),
    (
        "negative target",
        lambda m, o: o.nll_loss(_x(m, 3, 4), m.tensor([0, -1, 1]), None, "none", -100),
        IndexError,
        "Target -1 is out of bounds.",
    ),
    (
        "1-D target out of bounds",
        lambda m, o: o.nll_loss(_x(m, 4), m.tensor(4), None, "sum", -100),
        IndexError,
        "Target 4 is out of bounds.",
    ),
    (
        "weight of the wrong size",
        lambda m, o: o.nll_loss(_x(m, 3, 4), m.tensor([0, 1, 1]), m.ones(3), "mean", -100),
        RuntimeError,
        "weight tensor should be defined either for all 4 classes or no classes but got weight tensor of shape: [3]",
    ),
    (
        "2-D weight",
        lambda m, o: o.nll_loss(_x(m, 3, 4), m.tensor([0, 1, 1]), m.ones(1, 4), "mean", -100),
        RuntimeError,
        "weight tensor should be defined either for all 4 classes or no classes but got weight tensor of shape: [1, 4]",
    ),
    (
        "weight dtype",
        lambda m, o: o.nll_loss(_x(m, 3, 4), m.tensor([0, 1, 1]), m.ones(4, dtype=m.float64), "mean", -100),
        RuntimeError,
        "expected scalar type Float but found Double",
    ),
    (
        "int input",
        lambda m, o: o.nll_loss(_x(m, 3, 4, dtype=m.int64), m.tensor([0, 1, 1]), None, "mean", -100),
        NotImplementedError,
        "\"nll_loss_out_frame\" not implemented for 'Long'",
    ),
    (
        "weight requires grad",
        lambda m, o: o.nll_loss(_x(m, 3, 4), m.tensor([0, 1, 1]), m.ones(4, requires_grad=True), "mean", -100),
        RuntimeError,
        "The function 'nll_loss_forward' is not differentiable with respect to argument 'weight'. This "
        "input cannot have requires_grad True.",
    ),
    (
        "bad reduction",
        lambda m, o: o.nll_loss(_x(m, 3, 4), m.tensor([0, 1, 1]), None, "avg", -100),
        ValueError,
        "avg is not a valid value for reduction",
    ),
]
GELU_ERRORS = [
    (
        "gelu approximate",
        lambda m, o: o.gelu(_x(m, 3), "Tanh"),
        RuntimeError,
        "approximate argument must be either none or tanh.",
    ),
    (
        "gelu of int",
        lambda m, o: o.gelu(_x(m, 3, dtype=m.int64), "none"),
        NotImplementedError,
        "\"GeluKernelImpl\" not implemented for 'Long'",
    ),
    (
        "gelu of bool",
        lambda m, o: o.gelu(_x(m, 3, dtype=m.bool), "tanh"),
        NotImplementedError,
        "\"GeluKernelImpl\" not implemented for 'Bool'",
    ),
    (
        "relu6 of bool",
        lambda m, o: m.nn.functional.relu6(_x(m, 3, dtype=m.bool)),
        RuntimeError,
        "Bool inputs not supported for hardtanh",
    ),
    (
        "threshold of bool",
        lambda m, o: m.nn.functional.threshold(_x(m, 3, dtype=m.bool), 0.5, 0.0),
        NotImplementedError,
        "\"threshold_cpu\" not implemented for 'Bool'",
    ),
]
SOFTMAX_ERRORS = [
    (
        "softmax of int, last dim",
        lambda m, o: m.softmax(_x(m, 2, 3, dtype=m.int64), 1),
        NotImplementedError,
        "\"softmax_lastdim_kernel_impl\" not implemented for 'Long'",
    ),
    (
        "softmax of int, dim 0",
        lambda m, o: m.softmax(_x(m, 2, 3, dtype=m.int64), 0),
        NotImplementedError,
        "\"softmax_kernel_impl\" not implemented for 'Long'",
    ),
    (
        "log_softmax of int, dim 0",
        lambda m, o: _x(m, 2, 3, dtype=m.int64).log_softmax(0),
        NotImplementedError,
        "\"log_softmax_kernel_impl\" not implemented for 'Long'",
    ),
    (
        "log_softmax of 0-d int",
        lambda m, o: m.log_softmax(m.tensor(3), 0),
        NotImplementedError,
        "\"log_softmax_lastdim_kernel_impl\" not implemented for 'Long'",
    ),
    (
        "softmax of bool",
        lambda m, o: m.softmax(m.tensor([True]), 0),
        NotImplementedError,
        "\"softmax_lastdim_kernel_impl\" not implemented for 'Bool'",
    ),
    (
        "softmax dim out of range",
        lambda m, o: m.softmax(_x(m, 2, 3), 2),
        IndexError,
        "Dimension out of range (expected to be in range of [-2, 1], but got 2)",
    ),
    (
        "log_softmax of 0-d, dim 1",
        lambda m, o: m.log_softmax(_x(m), 1),
        IndexError,
        "Dimension out of range (expected to be in range of [-1, 0], but got 1)",
    ),
]
ERRORS = NLL_ERRORS + GELU_ERRORS + SOFTMAX_ERRORS


@pytest.mark.parametrize("fn,exc,message", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors(fg, fn, exc, message):
    with pytest.raises(exc) as info:
        fn(fg, ops_for(fg))
    assert str(info.value) == message


@pytest.mark.parametrize("fn,exc,message", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_error_table_is_torchs(torch, fn, exc, message):
    """The expected errors above are PyTorch's own (type and wording)."""
    with pytest.raises(exc) as info:
        fn(torch, ops_for(torch))
    assert str(info.value) == message


def test_primitive_argument_types(fg):
    """Arguments the primitives' bindings do not convert are TypeErrors, on both backends."""
    if fg.__name__ == "torch":
        pytest.skip("fastgrad's own primitives")
    prims, x = fg._prims, fg.zeros(2, 3)
    for call in [
        lambda: prims.softmax(x, None),
        lambda: prims.softmax(x, 1.0),
        lambda: prims.gelu(x, None),
        lambda: prims.nll_loss(x, fg.tensor([0, 1]), 3, "mean", -100),
        lambda: prims.nll_loss(x, fg.tensor([0, 1]), None, "mean", 0.5),
    ]:
        with pytest.raises(TypeError, match="received an invalid combination of arguments"):
            call()


# ---- gelu


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(3, 4), (7,), (), (0, 2)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_matches_torch(fg, torch, approximate, shape, dtype):
    x = 2.5 * rng_for("gelu", shape).standard_normal(shape)
    results = run_both(fg, torch, lambda m, x: ops_for(m).gelu(x, approximate), [x], dtype, ("gelu", shape))
    assert_same(results, *TOLERANCES[dtype])
    assert results[0][0].grad_fn.name() == "GeluBackward0"


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_of_views_and_extremes_matches_torch(fg, torch, approximate):
    """A strided view, and values far in both tails (where gelu is x or -0, its gradient 1 or 0)."""
    x = np.array([[-40.0, -8.0, -1e-3, 0.0], [1e-3, 3.0, 8.0, 40.0]])
    results = run_both(fg, torch, lambda m, x: ops_for(m).gelu(x.t(), approximate), [x], np.float64, "gelu tails")
    assert_same(results, 1e-12, 1e-14)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_gradcheck(fg, approximate):
    x = leaf(fg, 2 * rng_for("gelu gc").standard_normal((3, 4)), np.float64)
    prims = ops_for(fg)
    assert gradcheck_for(fg)(lambda t: prims.gelu(t[:, ::2], approximate), (x,))


# ---- the two backends: nll_loss does the same arithmetic (identical float32 results); softmax and
# log_softmax use the vector exp (within 1 ulp of the double one), so their float32 results are
# within a few ulps of the reference's; float32 gelu and its gradient are computed in float lanes
# ('none') or double lanes ('tanh') with the core's own normal distribution and exp
# (csrc/kernels/elementwise_impl.h), within 1 ulp of the reference's libm-based double result rounded
# once (float64: the same libm arithmetic, the same bits: test_gelu_float64_is_the_reference_bit_for_bit)


def test_backends_agree():
    import fastgrad
    import fastgrad.reference

    data = rng_for("bits").standard_normal((6, 5)).astype(np.float32) * 4
    programs = {
        "softmax": lambda m, x: m.softmax(x, 1),
        "softmax dim 0": lambda m, x: x.softmax(0),
        "log_softmax": lambda m, x: m.log_softmax(x.t(), 1),
        "nll_loss": lambda m, x: m._prims.nll_loss(
            x.log_softmax(1), m.tensor([0, 4, 2, -100, 1, 1]), m.tensor([0.3, 1.0, 2.0, 0.7, 1.5]), "mean", -100
        ),
        "gelu": lambda m, x: m._prims.gelu(x, "none"),
        "gelu tanh": lambda m, x: m._prims.gelu(x, "tanh"),
    }
    for name, program in programs.items():
        results = []
        for m in (fastgrad, fastgrad.reference):
            x = m.tensor(data, requires_grad=True)
            out = program(m, x)
            out.backward(m.ones_like(out) * 0.75)
            results.append((to_numpy(out), to_numpy(x.grad)))
        for got, expected in zip(results[0], results[1], strict=True):
            if "softmax" in name or name == "nll_loss":  # nll_loss's input is a log_softmax
                # a few ulps of each value; gradients that cancel to about 0, a few ulps of 1
                np.testing.assert_allclose(got, expected, rtol=4e-7, atol=4e-7, err_msg=name)
            else:
                assert ulp_distance(got, expected).max() <= 1, name


def ulp_distance(a, b):
    """How many float32 values lie between a and b, elementwise (finite values of one sign here)."""
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_float64_is_the_reference_bit_for_bit(approximate):
    """float64 gelu and its gradient are the C library's erfc / tanh in double, as the reference's
    math.erfc / math.tanh: the same bits, tails and non-finite values included."""
    import fastgrad
    import fastgrad.reference

    data = np.concatenate([rng_for("gelu64").standard_normal(50) * 4, [-40, -12, -9, -0.0, 0.0, 30, np.inf, -np.inf]])
    results = []
    for m in (fastgrad, fastgrad.reference):
        x = m.tensor(data, requires_grad=True)
        out = m._prims.gelu(x, approximate)
        out.backward(m.ones_like(out) * 0.75)
        results.append((to_numpy(out), to_numpy(x.grad)))
    for got, expected in zip(results[0], results[1], strict=True):
        nan = np.isnan(expected)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~nan].view(np.int64), expected[~nan].view(np.int64))  # -0 included


SOFTMAX_BLOCKS = [
    ((1100, 65), 1),  # contiguous rows with a partial vector at each end, enough of them for threads
    ((3, 70, 333), 1),  # rows across columns: whole and partial blocks of 64 columns, and a partial vector
    ((2, 40000), 0),  # two values per row, 40000 rows side by side
]


@pytest.mark.parametrize("shape,dim", SOFTMAX_BLOCKS, ids=lambda v: str(v))
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_kernel_bits_do_not_depend_on_thread_count(torch, shape, dim, name, dtype):
    """The rows are split over threads whole (contiguous rows) or in blocks of columns; each row is
    computed the same way wherever it falls: 1, 2 and 3 threads give the same bits, and the values
    (forward and input gradient) match PyTorch's float64 ones."""
    import fastgrad

    rng = rng_for("blocks", shape, name)
    x, upstream = (3 * rng.standard_normal(shape).astype(dtype) for _ in range(2))
    results, before = [], fastgrad.get_num_threads()
    try:
        for threads in (1, 2, 3):
            fastgrad.set_num_threads(threads)
            leaf_x = fastgrad.tensor(x, requires_grad=True)
            out = getattr(fastgrad, name)(leaf_x, dim)
            out.backward(fastgrad.tensor(upstream))
            results.append((to_numpy(out), to_numpy(leaf_x.grad)))
    finally:
        fastgrad.set_num_threads(before)
    for other in results[1:]:
        for got, expected in zip(other, results[0], strict=True):
            np.testing.assert_array_equal(got, expected)
    t_x = torch.tensor(x.astype(np.float64), requires_grad=True)  # in float64: float32 PyTorch is off by 2e-6 here
    t_out = getattr(torch, name)(t_x, dim)
    t_out.backward(torch.tensor(upstream.astype(np.float64)))
    assert_close(results[0][0], t_out.detach().numpy(), *TOLERANCES[dtype])
    assert_close(results[0][1], t_x.grad.numpy(), *TOLERANCES[dtype], what="grad")


@pytest.mark.parametrize("loss", ["mse_loss", "smooth_l1_loss", "huber_loss"])
def test_pointwise_losses_of_every_dtype_pair(fg, torch, loss):
    """The kernels run in the promoted dtype of input and target, floats only (bool and integer
    operands count as numbers; NotImplementedError, or huber's cast error, otherwise)."""

    def program(lib):
        results = []
        for a in (lib.bool, lib.int64, lib.float32, lib.float64):
            for b in (lib.bool, lib.int64, lib.float32, lib.float64):
                try:
                    r = getattr(lib.nn.functional, loss)(lib.tensor([1, 0], dtype=a), lib.tensor([1, 1], dtype=b))
                    results.append((str(r.dtype).split(".")[-1], r.item()))
                except (RuntimeError, NotImplementedError) as error:
                    results.append((type(error).__name__, str(error)))
        return results

    same_on_both(fg, torch, program)
