"""Size-0 tensors through every op of tests/op_cases.py and its backward, against PyTorch.

Each case runs again with its inputs' first (then last) dim set to 0. Where PyTorch takes those
shapes, fastgrad must give the same result shape, dtype, values and gradients (all empty, or
reductions of nothing); where PyTorch refuses them, fastgrad must raise the same exception type.
"""

import numpy as np
import pytest

from op_cases import CASES
from op_helpers import assert_close, dtype_name, make_arrays, to_numpy


def zeroed(shapes, axis):
    """shapes with dim `axis` of every input that has dims set to 0."""
    return tuple(tuple(0 if d == axis % len(s) else n for d, n in enumerate(s)) if s else s for s in shapes)


SIZE_ZERO = {}
for _case in CASES:
    for _axis in (0, -1):
        _shapes = zeroed(_case.shapes, _axis)
        if _shapes != _case.shapes:
            _id = f"{_case.name}-" + ",".join("x".join(map(str, s)) or "0d" for s in _shapes)
            SIZE_ZERO[_id] = (_case, _shapes)


def run(m, case, shapes):
    """The case's op on size-0 leaves and a backward of ones: (result, leaves)."""
    leaves = [m.tensor(a, requires_grad=True) for a in make_arrays(shapes, case.domain, np.float32, case.name)]
    out = case.fn(m, *leaves)
    out.backward(m.ones_like(out))
    return out, leaves


@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0")
@pytest.mark.parametrize("case,shapes", SIZE_ZERO.values(), ids=SIZE_ZERO.keys())
def test_size_zero_matches_torch(fg, torch, case, shapes):
    try:
        t_out, t_leaves = run(torch, case, shapes)
    except (RuntimeError, IndexError, ValueError) as refused:
        with pytest.raises(type(refused)):
            run(fg, case, shapes)
        return
    out, leaves = run(fg, case, shapes)
    assert dtype_name(out.dtype) == dtype_name(t_out.dtype)
    assert_close(to_numpy(out), to_numpy(t_out))
    for i, (leaf, t_leaf) in enumerate(zip(leaves, t_leaves)):
        if t_leaf.grad is None:
            assert leaf.grad is None, f"input {i}"
        else:
            assert_close(to_numpy(leaf.grad), to_numpy(t_leaf.grad), what=f"grad of input {i}")


def test_strides_of_huge_zero_element_tensors_wrap_as_pytorchs(fg):
    # the other dims multiply past int64 (found by the crash fuzzer as a UBSan overflow)
    assert fg.empty(0, 2**31 - 1, 2**31 - 1, 3).stride() == (-4611686031312289789, 6442450941, 3, 1)
    assert fg.empty(0, 2**62, 4, 3).stride() == (0, 12, 3, 1)
