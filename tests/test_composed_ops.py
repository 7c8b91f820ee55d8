"""Tensor conveniences composed from the core ops in the shared layer (split, chunk, masked_fill,
all, any, gather, is_floating_point, new_*, uniform_, normal_): values, gradients and errors as PyTorch."""

import numpy as np
import pytest


def check_error(fg, torch, call):
    """`call(module)` raises the same exception type with the same message on fg and on torch."""
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(fg)
    assert str(ours.value) == str(theirs.value).replace("torch.", "fastgrad.")


DATA = np.array([[1.5, 0.0, -2.0, 4.0], [0.0, 3.0, 0.5, -1.0], [2.0, -0.5, 0.0, 1.0]])

CASES = [  # id, f(m, x) -> tensor or tuple of tensors
    ("split int", lambda m, x: x.split(2, 1)),
    ("split sizes", lambda m, x: m.split(x, [1, 2], dim=0)),
    ("split larger than dim", lambda m, x: x.split(5, -1)),
    ("chunk uneven", lambda m, x: x.chunk(3, 1)),
    ("chunk more than size", lambda m, x: m.chunk(x, 5, 0)),
    ("chunk of empty", lambda m, x: x[:, :0].chunk(3, 1)),
    ("masked_fill scalar", lambda m, x: x.masked_fill(x > 0.5, -7.0)),
    ("masked_fill broadcast mask", lambda m, x: m.masked_fill(x, m.tensor([True, False, True, False]), 2)),
    ("masked_fill 0-d tensor value", lambda m, x: x.masked_fill(x < 0, m.tensor(9.0, dtype=x.dtype))),
    ("gather dim 1", lambda m, x: x.gather(1, m.tensor([[3, 0], [1, 1], [0, 2]]))),
    ("gather dim 0 smaller index", lambda m, x: m.gather(x, 0, m.tensor([[2, 0, 1]]))),
    ("gather repeated index", lambda m, x: x.gather(-1, m.tensor([[1, 1, 1], [0, 0, 3], [2, 2, 2]]))),
    ("gather 1-d with 0-d index", lambda m, x: x[0].gather(0, m.tensor(2))),
]


@pytest.mark.parametrize("name, f", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_torch(fg, torch, name, f):
    def run(m):
        x = m.tensor(DATA, requires_grad=True)
        out = f(m, x)
        outs = out if isinstance(out, tuple) else (out,)
        sum(((o * (i + 1)).sum() for i, o in enumerate(outs)), m.tensor(0.0, dtype=m.float64)).backward()
        return [o.detach().numpy() for o in outs], x.grad.numpy()

    (ours, grad), (theirs, expected_grad) = run(fg), run(torch)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(grad, expected_grad)


def test_masked_fill_rounds_a_float_value_to_the_input_dtype(fg, torch):
    """A float32 input takes the value rounded once to float32 (one where with the scalar); float64 keeps it."""

    def run(m):
        x = m.tensor(DATA)
        filled = [x.float().masked_fill(x > 0.5, v) for v in (1e-50, 0.1, -float("inf"), float("nan"))]
        return [t.numpy() for t in filled + [x.masked_fill(x > 0.5, 1e300)]]

    for ours, theirs in zip(run(fg), run(torch), strict=True):
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize(
    "name, f", [c for c in CASES if "empty" not in c[0]], ids=[c[0] for c in CASES if "empty" not in c[0]]
)
def test_gradcheck(fg, name, f):
    x = fg.tensor(DATA + 0.25, requires_grad=True)  # away from the mask thresholds
    assert fg.autograd.gradcheck(lambda x: f(fg, x), (x,))


def test_split_is_a_view(fg):
    x = fg.arange(6.0).reshape(2, 3)
    first, _ = x.split(2, 1)
    first[0, 0] = 9.0
    assert x[0, 0].item() == 9.0


def test_all_any(fg, torch):
    for data in [[[1, 0], [2, 3]], [[True, True], [False, True]], [[0.5, 0.0], [-1.0, 2.0]], [[]]]:
        for call in [
            lambda m, t: t.all(),
            lambda m, t: m.any(t),
            lambda m, t: t.all(1),
            lambda m, t: t.any(0),
            lambda m, t: t.all(dim=-1, keepdim=True),
            lambda m, t: t.any(1, True),
        ]:
            ours, theirs = call(fg, fg.tensor(data)), call(torch, torch.tensor(data))
            assert ours.dtype == fg.bool and ours.tolist() == theirs.tolist()
    assert fg.zeros(0).all().item() is True and fg.zeros(0).any().item() is False


def test_is_floating_point(fg):
    assert fg.zeros(1).is_floating_point() and fg.is_floating_point(fg.zeros(1, dtype=fg.float64))
    assert not fg.zeros(1, dtype=fg.int64).is_floating_point() and not fg.tensor([True]).is_floating_point()


def test_new_tensors_take_self_dtype(fg, torch):
    for m in (fg, torch):
        x = m.zeros(2, dtype=m.float64, requires_grad=True)
        made = [
            x.new_zeros(3),
            x.new_ones((2, 2)),
            x.new_full((2,), 7),
            x.new_empty(1, 2),
            x.new_tensor([1, 2]),
            m.tensor([1, 2]).new_tensor([1.5]),
            x.new_zeros(2, dtype=m.int64, requires_grad=False),
            x.new_ones(2, requires_grad=True),
        ]
        results = [(list(t.shape), str(t.dtype).split(".")[-1], t.requires_grad) for t in made]
        values = [t.tolist() for i, t in enumerate(made) if i != 3]  # new_empty: uninitialized
        if m is fg:
            ours = results, values
        else:
            assert ours == (results, values)


def test_random_fills(fg):
    fg.manual_seed(3)
    x = fg.zeros(2000, dtype=fg.float64)
    assert x.uniform_(2, 3) is x
    values = x.numpy()
    assert values.min() >= 2 and values.max() < 3 and abs(values.mean() - 2.5) < 0.05
    values = x.normal_(1.0, 2.0).numpy()
    assert abs(values.mean() - 1.0) < 0.2 and abs(values.std() - 2.0) < 0.2
    fg.manual_seed(3)
    again = fg.zeros(2000, dtype=fg.float64).uniform_(2, 3)
    fg.manual_seed(3)
    assert fg.equal(again, fg.zeros(2000, dtype=fg.float64).uniform_(2, 3))


ERRORS = [
    lambda m: m.zeros(5).split(0),
    lambda m: m.zeros(5).split([2, 2]),
    lambda m: m.tensor(1.0).split(1),
    lambda m: m.zeros(5).chunk(0),
    lambda m: m.zeros(2, 3).split(1, 2),
    lambda m: m.zeros(2).masked_fill(m.tensor([1, 0]), 1.0),
    lambda m: m.zeros(2, 2).gather(1, m.tensor([[0.0]])),
    lambda m: m.zeros(2, 2).gather(1, m.tensor([0])),
    lambda m: m.zeros(2, 2).gather(1, m.tensor([[0], [0], [0]])),
    lambda m: m.zeros(2, requires_grad=True).uniform_(),
    lambda m: m.zeros(2, dtype=m.int64).uniform_(),
    lambda m: m.zeros(2).uniform_(3, 2),
    lambda m: m.zeros(2).normal_(0, -1),
]


@pytest.mark.parametrize("call", ERRORS, ids=range(len(ERRORS)))
def test_errors_match_torch(fg, torch, call):
    check_error(fg, torch, call)
