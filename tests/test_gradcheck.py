"""fastgrad.autograd.gradcheck itself: it accepts correct gradients, rejects wrong ones, and follows
torch.autograd.gradcheck's conventions (inputs, tolerances, raise_exception, errors)."""

import re

import numpy as np
import pytest

from op_helpers import gradcheck_for, rng_for


def leaf(m, shape, key, requires_grad=True, dtype=np.float64):
    data = np.asarray(rng_for("gradcheck", key).uniform(0.5, 1.5, size=shape), dtype=dtype)
    return m.tensor(data, requires_grad=requires_grad)


CORRECT = [  # id, fn(m) -> (func, inputs)
    ("single tensor, not a tuple", lambda m: (lambda x: (x * x).sum(), leaf(m, (3,), "a"))),
    ("two inputs, broadcast", lambda m: (lambda a, b: a * b.exp(), (leaf(m, (2, 3), "a"), leaf(m, (3,), "b")))),
    ("tuple of outputs", lambda m: (lambda x: (x.sin(), x.sum() * 2), (leaf(m, (4,), "a"),))),
    ("identity output aliases its input", lambda m: (lambda x: x, (leaf(m, (2, 2), "a"),))),
    ("0-d input and output", lambda m: (lambda x: x * x * x, (leaf(m, (), "a"),))),
    (
        "non-contiguous leaf input",
        lambda m: (lambda x: x @ x, (leaf(m, (3, 3), "a", requires_grad=False).t().requires_grad_(),)),
    ),
    ("non-leaf input", lambda m: (lambda x: x.log(), (leaf(m, (3,), "a") * 2,))),
    ("non-tensor argument passes through", lambda m: (lambda x, k: x**k, (leaf(m, (3,), "a"), 3))),
    ("integer output is ignored", lambda m: (lambda x: (x * 2, x.argmax()), (leaf(m, (4,), "a"),))),
    (
        "input without requires_grad is not checked",
        lambda m: (lambda a, b: a * b.detach(), (leaf(m, (3,), "a"), leaf(m, (3,), "b", requires_grad=False))),
    ),
    ("no output requires grad, locally constant", lambda m: (lambda x: x.detach() * 0 + 1, (leaf(m, (3,), "a"),))),
    ("output independent of an input", lambda m: (lambda a, b: a.exp(), (leaf(m, (2,), "a"), leaf(m, (2,), "b")))),
]


@pytest.mark.parametrize("make", [c[1] for c in CORRECT], ids=[c[0] for c in CORRECT])
def test_accepts_correct_gradients(fg, make):
    func, inputs = make(fg)
    assert gradcheck_for(fg)(func, inputs) is True


def mismatch(output, input_):
    """PyTorch's first line; inputs are counted among those requiring grad."""
    return rf"(?s)^Jacobian mismatch for output {output} with respect to input {input_},.*max error"


WRONG = [  # id, fn(m) -> (func, inputs), expected message
    ("gradient too small", lambda m: (lambda x: x * x.detach(), (leaf(m, (3,), "a"),)), mismatch(0, 0)),
    (
        "second input detached",
        lambda m: (lambda a, b: a * b.detach(), (leaf(m, (2, 2), "a"), leaf(m, (2, 2), "b"))),
        mismatch(0, 1),
    ),
    (
        "input counted among those requiring grad",
        lambda m: (
            lambda c, a, k, b: a * b.detach() * c * k,
            (leaf(m, (2,), "c", requires_grad=False), leaf(m, (2,), "a"), 3, leaf(m, (2,), "b")),
        ),
        mismatch(0, 1),
    ),
    ("one of two outputs wrong", lambda m: (lambda x: (x * 2, x * x.detach()), (leaf(m, (3,), "a"),)), mismatch(1, 0)),
    (
        "output does not require grad",
        lambda m: (lambda x: x.detach() * 2, (leaf(m, (2,), "a"),)),
        "^Numerical gradient for function expected to be zero",
    ),
]


@pytest.mark.parametrize("make,message", [c[1:] for c in WRONG], ids=[c[0] for c in WRONG])
def test_rejects_wrong_gradients(fg, make, message):
    gradcheck = gradcheck_for(fg)
    func, inputs = make(fg)
    assert gradcheck(func, inputs, raise_exception=False) is False
    with pytest.raises(RuntimeError, match=message):
        gradcheck(func, inputs)


def test_tolerances_and_eps(fg):
    gradcheck = gradcheck_for(fg)
    x = fg.ones(3, dtype=fg.float64, requires_grad=True)
    cube = lambda t: t**3  # noqa: E731
    # central difference error of x**3 at 1 is eps**2: 0.01 relative to 3 is above rtol=1e-3
    assert gradcheck(cube, (x,)) is True
    assert gradcheck(cube, (x,), eps=0.1, raise_exception=False) is False
    assert gradcheck(cube, (x,), eps=0.1, rtol=0.01) is True
    # an analytical gradient off by 2e-4 relative: inside rtol=1e-3, outside rtol=0 and atol=1e-5
    nearly = lambda t: t + 1e-4 * t.detach() ** 2  # noqa: E731
    assert gradcheck(nearly, (x,)) is True
    assert gradcheck(nearly, (x,), rtol=0.0, raise_exception=False) is False
    assert gradcheck(nearly, (x,), rtol=0.0, atol=1e-3) is True


def test_leaves_input_grads_untouched(fg):
    x = leaf(fg, (3,), "a")
    y = leaf(fg, (3,), "b")
    y.grad = fg.ones(3, dtype=fg.float64)
    assert gradcheck_for(fg)(lambda a, b: a * b, (x, y)) is True
    assert x.grad is None
    assert y.grad.tolist() == [1.0, 1.0, 1.0]


def test_no_input_requires_grad_is_an_error(fg):
    x = leaf(fg, (3,), "a", requires_grad=False)
    with pytest.raises(ValueError, match="gradcheck expects at least one input tensor to require gradient"):
        gradcheck_for(fg)(lambda t: t * 2, (x,))


def test_single_precision_input_warns(fg):
    x = leaf(fg, (3,), "a", dtype=np.float32)
    with pytest.warns(
        UserWarning, match=re.escape("Input #0 requires gradient and is not a double precision floating point")
    ):
        gradcheck_for(fg)(lambda t: t * 2, (x,), atol=1e-2, rtol=1e-2, eps=1e-3)


def _wrong_backward_function(torch):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x  # should be 2 * grad * x

    return Square


def test_custom_function_with_wrong_backward_on_torch_tensors(torch):
    """The gradcheck file, handed real torch tensors, catches a wrong torch.autograd.Function."""
    gradcheck = gradcheck_for(torch)
    square = _wrong_backward_function(torch)
    x = leaf(torch, (2, 3), "a")
    with pytest.raises(RuntimeError, match=r"(?s)with respect to input 0,.*max error"):
        gradcheck(square.apply, (x,))
    assert gradcheck(lambda t: t * t, (x,)) is True


@pytest.mark.parametrize(
    "make", [c[1] for c in CORRECT] + [c[1] for c in WRONG], ids=[c[0] for c in CORRECT] + [c[0] for c in WRONG]
)
def test_agrees_with_torch_gradcheck(torch, make):
    func, inputs = make(torch)
    gradcheck = gradcheck_for(torch)
    theirs = torch.autograd.gradcheck(func, inputs, raise_exception=False)
    assert gradcheck(func, inputs, raise_exception=False) is theirs
    if not theirs:  # same first line: which output, which input
        messages = []
        for check in (gradcheck, torch.autograd.gradcheck):
            with pytest.raises(RuntimeError) as error:
                check(func, inputs)
            messages.append(str(error.value).splitlines()[0])
        assert messages[0] == messages[1]
