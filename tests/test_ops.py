"""Every op of the spec, driven by the table in op_cases.py.

(a) float64 finite-difference gradcheck on the backend, in contiguous, strided and expanded layouts (the
    reference's only where PyTorch is missing: conftest.FINITE_DIFFERENCE_BACKENDS);
(b) values, dtypes and gradients against PyTorch in float32, same data, same layouts;
(c) the result's grad_fn name is PyTorch's.
Non-differentiable ops (argmax, comparisons, equal, allclose) are compared against PyTorch too.
"""

import numpy as np
import pytest

from op_cases import CASES, NONDIFF_CASES
from op_helpers import (
    apply_layout,
    assert_close,
    dtype_name,
    gradcheck_for,
    layout_changes,
    make_arrays,
    rng_for,
    source_shape,
    to_numpy,
)

LAYOUT_PARAMS = [
    pytest.param(c, layout, id=f"{c.name}-{layout}")
    for c in CASES
    for layout in c.layouts
    if layout_changes(c.shapes, layout)
]


def make_leaves(m, case, layout, dtype):
    """Leaves (requires_grad) in the layout's source shapes; same numbers for every module."""
    sources = [source_shape(s, layout) for s in case.shapes]
    arrays = make_arrays(sources, case.domain, dtype, case.name, layout)
    return [m.tensor(a, requires_grad=True) for a in arrays]


def call(m, case, layout, leaves):
    """The case's op on the leaves, each turned into its layout (a view: gradients flow back)."""
    return case.fn(m, *[apply_layout(x, s, layout) for x, s in zip(leaves, case.shapes)])


@pytest.mark.parametrize("case,layout", LAYOUT_PARAMS)
def test_gradcheck(fg_finite_differences, case, layout):
    fg = fg_finite_differences
    gradcheck = gradcheck_for(fg)
    leaves = make_leaves(fg, case, layout, np.float64)
    assert gradcheck(lambda *xs: call(fg, case, layout, xs), tuple(leaves))


@pytest.mark.parametrize("case,layout", LAYOUT_PARAMS)
def test_matches_torch(fg, torch, case, layout):
    results = {}
    for m in (fg, torch):
        leaves = make_leaves(m, case, layout, np.float32)
        out = call(m, case, layout, leaves)
        upstream = rng_for(case.name, "upstream").standard_normal(tuple(out.shape))
        out.backward(m.tensor(np.asarray(upstream, dtype=np.float32)))
        results[m] = out, leaves
    (out, leaves), (t_out, t_leaves) = results[fg], results[torch]
    assert dtype_name(out.dtype) == dtype_name(t_out.dtype)
    assert out.requires_grad is True
    assert_close(to_numpy(out), to_numpy(t_out))
    for i, (leaf, t_leaf) in enumerate(zip(leaves, t_leaves)):
        if t_leaf.grad is None:  # input not used by the result (e.g. expand_as's target)
            assert leaf.grad is None, f"input {i}"
        else:
            assert leaf.grad is not None, f"input {i} got no gradient"
            assert_close(to_numpy(leaf.grad), to_numpy(t_leaf.grad), what=f"grad of input {i}")


@pytest.mark.not_rerun_per_isa  # the node an op records is chosen before any kernel runs
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_grad_fn_name(fg, case):
    leaves = make_leaves(fg, case, "contiguous", np.float32)
    out = call(fg, case, "contiguous", leaves)
    name = None if out.grad_fn is None else out.grad_fn.name()
    # A tuple lists PyTorch's name first and fastgrad's equivalent composite after it.
    accepted = case.grad_fn if isinstance(case.grad_fn, tuple) else (case.grad_fn,)
    assert name in accepted
    assert out.requires_grad
    assert out.is_leaf is (case.grad_fn is None)


@pytest.mark.parametrize("case", NONDIFF_CASES, ids=[c.name for c in NONDIFF_CASES])
def test_nondifferentiable_matches_torch(fg, torch, case):
    results = []
    for m in (fg, torch):
        arrays = make_arrays(case.shapes, case.domain, np.float32, case.name)
        results.append(case.fn(m, *[m.tensor(a, requires_grad=True) for a in arrays]))
    out, t_out = results
    if isinstance(t_out, bool):  # equal, allclose
        assert type(out) is bool and out == t_out
        return
    assert dtype_name(out.dtype) == dtype_name(t_out.dtype)
    assert out.requires_grad is False and out.grad_fn is None
    assert tuple(out.shape) == tuple(t_out.shape)
    np.testing.assert_array_equal(to_numpy(out), to_numpy(t_out))
