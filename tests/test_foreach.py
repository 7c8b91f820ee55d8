"""The optimizers' list primitives (_prims.foreach_add_, foreach_zero_) on both backends: PyTorch's
add_(alpha=) values bit for bit, version bumps, any strides, and errors that leave every tensor
unchanged."""

import numpy as np
import pytest

_RNG = np.random.default_rng(3)


@pytest.fixture
def prims(fg):
    """The backend's primitives (PyTorch, as FASTGRAD_TEST_BACKENDS=torch, has no such layer)."""
    if not hasattr(getattr(fg, "_prims", None), "foreach_add_"):
        pytest.skip("fastgrad's own primitives")
    return fg._prims


def _pairs(lib, dtype=np.float32):
    shapes = [(5, 3), (7,), ()]
    return (
        [lib.tensor(np.asarray(_RNG.standard_normal(s), dtype)) for s in shapes],
        [lib.tensor(np.asarray(_RNG.standard_normal(s) * 1e-3, dtype)) for s in shapes],
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_foreach_add_matches_torch_add_alpha(fg, prims, torch, dtype):
    selves, others = _pairs(fg, dtype)
    expected = [torch.tensor(s.numpy()).add_(torch.tensor(o.numpy()), alpha=-0.1) for s, o in zip(selves, others)]
    versions = [s._version for s in selves]
    with fg.no_grad():
        prims.foreach_add_(selves, others, -0.1)
    for s, e, v in zip(selves, expected, versions):
        if dtype == np.float32:  # float64 rounds twice where PyTorch fuses: a last-bit difference
            np.testing.assert_array_equal(s.numpy(), e.numpy())
        else:
            np.testing.assert_allclose(s.numpy(), e.numpy(), rtol=1e-15, atol=0)
        assert s._version == v + 1


def test_foreach_add_writes_through_any_strides(fg, prims):
    base = fg.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    view = base.t()[1:]  # non-contiguous, with an offset
    other = fg.ones(3, 3).t()
    prims.foreach_add_([view], [other], 2.0)
    expected = np.arange(12, dtype=np.float32).reshape(3, 4)
    expected[:, 1:] += 2
    np.testing.assert_array_equal(base.numpy(), expected)


def test_foreach_zero_(fg, prims):
    tensors = [fg.ones(2, 3), fg.ones(4).double()]
    prims.foreach_zero_(tensors)
    assert [t.tolist() for t in tensors] == [[[0.0] * 3] * 2, [0.0] * 4]
    assert [t._version for t in tensors] == [1, 1]


@pytest.mark.parametrize(
    "case, message",
    [
        ("length", "foreach_add_(): expected lists of the same length, got 2 and 1"),
        ("shape", "foreach_add_(): expected floating tensors of one dtype and shape, got Float[3] and Float[2]"),
        ("dtype", "foreach_add_(): expected floating tensors of one dtype and shape, got Float[3] and Double[3]"),
        ("int", "foreach_add_(): expected floating tensors of one dtype and shape, got Long[3] and Long[3]"),
        ("grad", "foreach_add_() does not record gradients: call it under no_grad()"),
        ("leaf", "a leaf Variable that requires grad is being used in an in-place operation."),
    ],
)
def test_foreach_add_errors_leave_tensors_unchanged(fg, prims, case, message):
    first = fg.zeros(3)
    second = {
        "length": fg.zeros(3),
        "shape": fg.zeros(3),
        "dtype": fg.zeros(3),
        "int": fg.zeros(3, dtype=fg.int64),
        "grad": fg.zeros(3),
        "leaf": fg.zeros(3, requires_grad=True),
    }[case]
    other = {
        "shape": fg.ones(2),
        "dtype": fg.ones(3, dtype=fg.float64),
        "int": fg.ones(3, dtype=fg.int64),
        "grad": fg.ones(3, requires_grad=True),
    }.get(case, fg.ones(3))
    others = [fg.ones(3)] if case == "length" else [fg.ones(3), other]
    with pytest.raises(RuntimeError) as info:
        prims.foreach_add_([first, second], others, 1.0)
    assert str(info.value) == message
    assert first.tolist() == [0.0] * 3 and first._version == 0


def test_foreach_add_rejects_non_tensors(fg, prims):
    with pytest.raises(TypeError, match="expected Tensor as element 1 in argument 0, but got int"):
        prims.foreach_add_([fg.zeros(1), 3], [fg.zeros(1), fg.zeros(1)], 1.0)
