"""PyTorch's legacy tensor types (FloatTensor, LongTensor, ...): constructors, isinstance, Tensor.type()."""

import numpy as np
import pytest

from oracle_helpers import same_error, same_on_both

NAMES = ["FloatTensor", "DoubleTensor", "LongTensor", "BoolTensor"]


def made(lib, name):
    cls = getattr(lib, name)
    from_sizes = [cls(2, 3), cls(lib.Size([4])), cls(), cls(0)]
    from_data = [cls([1, 0, 2]), cls((2, 3)), cls([[1.5, -2.0]]), cls(np.array([3, 0])), cls([])]
    return (
        [(tuple(t.shape), str(t.dtype).split(".")[1]) for t in from_sizes],
        from_data,
        str(cls.dtype).split(".")[1],
        cls.__name__,
        cls(2, 3).requires_grad,
    )


@pytest.mark.parametrize("name", NAMES)
def test_constructors(fg, torch, name):
    same_on_both(fg, torch, lambda lib: made(lib, name))


def checks(lib):
    x = lib.ones(2)
    return [
        isinstance(x, lib.FloatTensor),
        isinstance(x, lib.DoubleTensor),
        isinstance(x.long(), lib.LongTensor),
        isinstance([1.0], lib.FloatTensor),
        issubclass(lib.FloatTensor, lib.Tensor),
        x.type(lib.LongTensor),
        x.type("torch.DoubleTensor"),
        x.type(lib.bool),
        lib.FloatTensor(x),
    ]


def test_isinstance_and_type(fg, torch):
    same_on_both(fg, torch, checks)


def test_type_names_the_legacy_type(fg):
    assert [fg.ones(1).to(t).type() for t in (fg.float32, fg.float64, fg.int64, fg.bool)] == [
        "fastgrad.FloatTensor",
        "fastgrad.DoubleTensor",
        "fastgrad.LongTensor",
        "fastgrad.BoolTensor",
    ]


MISUSES = {
    "a float": lambda lib: lib.FloatTensor(2.5),
    "a bool": lambda lib: lib.FloatTensor(True),
    "a string": lambda lib: lib.FloatTensor("a"),
    "a string size": lambda lib: lib.FloatTensor(2, "a"),
    "a negative size": lambda lib: lib.FloatTensor(-1),
    "two lists": lambda lib: lib.FloatTensor([1], [2]),
    "a tensor of another dtype": lambda lib: lib.FloatTensor(lib.ones(2).double()),
    "requires_grad": lambda lib: lib.FloatTensor([1.0], requires_grad=True),
    "an unknown type name": lambda lib: lib.ones(2).type("foo"),
}


@pytest.mark.parametrize("misuse", MISUSES.values(), ids=MISUSES.keys())
def test_misuse_raises_as_pytorch(fg, torch, misuse):
    error = same_error(fg, torch, misuse)
    assert error is not None


def variables(lib):
    """torch.autograd.Variable: a new leaf sharing its argument's data, whatever the argument's history."""
    Variable = lib.autograd.Variable
    source = lib.ones(2, requires_grad=True) * 2
    wrapped, plain, empty = Variable(source, requires_grad=True), Variable(source), Variable()
    wrapped.data[0] = 5.0  # the same storage as source
    (wrapped * 3).sum().backward()
    return [
        (wrapped.requires_grad, wrapped.is_leaf, wrapped.grad_fn, wrapped.grad),
        (plain.requires_grad, plain.is_leaf, plain.grad_fn, plain is source),
        source.detach(),
        (empty, str(empty.dtype).split(".")[1]),
        [isinstance(t, Variable) for t in (source, lib.tensor(1), 1.0, [1.0])],
    ]


def test_variable(fg, torch):
    same_on_both(fg, torch, variables)


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.autograd.Variable([1.0]),
        lambda lib: lib.autograd.Variable(lib.tensor([1, 2]), requires_grad=True),
        lambda lib: lib.autograd.Variable(lib.ones(2), True, True),
        lambda lib: lib.autograd.variable(lib.ones(2)),
    ],
)
def test_variable_errors(fg, torch, call):
    same_error(fg, torch, call)


def test_volatile_warns_and_has_no_effect(fg):
    with pytest.warns(UserWarning, match="volatile was removed and now has no effect"):
        v = fg.autograd.Variable(fg.ones(2), volatile=True)
    assert not v.requires_grad
    with fg.autograd.no_grad():  # the grad-mode switches are torch.autograd's names too
        assert not fg.is_grad_enabled()
