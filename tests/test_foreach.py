"""The optimizers' zero_grad primitive (_prims.foreach_zero_) on both backends; their fused updates
are tested in test_optim_fused.py."""

import pytest


@pytest.fixture
def prims(fg):
    """The backend's primitives (PyTorch, as FASTGRAD_TEST_BACKENDS=torch, has no such layer)."""
    if not hasattr(getattr(fg, "_prims", None), "foreach_zero_"):
        pytest.skip("fastgrad's own primitives")
    return fg._prims


def test_foreach_zero_(fg, prims):
    tensors = [fg.ones(2, 3), fg.ones(4).double()]
    prims.foreach_zero_(tensors)
    assert [t.tolist() for t in tensors] == [[[0.0] * 3] * 2, [0.0] * 4]
    assert [t._version for t in tensors] == [1, 1]
