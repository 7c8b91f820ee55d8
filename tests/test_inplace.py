"""In-place ops: values, the leaf rule, gradients through in-place ops, version counters, __setitem__."""

import operator
import re

import numpy as np
import pytest

from oracle_helpers import same_error, same_on_both
from semantics_helpers import assert_values, dtype_name, grad_of, node_name

A = [[1.0, 2.0], [3.0, 4.0]]
LEAF_IN_PLACE = "^" + re.escape("a leaf Variable that requires grad is being used in an in-place operation.")
VIEW_OF_LEAF_IN_PLACE = "^" + re.escape(
    "a view of a leaf Variable that requires grad is being used in an in-place operation."
)
MODIFIED = "^" + re.escape(
    "one of the variables needed for gradient computation has been modified by an inplace operation"
)

ARITHMETIC = {  # name: (in-place call, numpy equivalent)
    "add_": (lambda t, o: t.add_(o), np.add),
    "sub_": (lambda t, o: t.sub_(o), np.subtract),
    "mul_": (lambda t, o: t.mul_(o), np.multiply),
    "div_": (lambda t, o: t.div_(o), np.divide),
    "+=": (operator.iadd, np.add),
    "-=": (operator.isub, np.subtract),
    "*=": (operator.imul, np.multiply),
    "/=": (operator.itruediv, np.divide),
}
OPERANDS = {  # name: (make operand from the backend, the same operand for numpy)
    "same_shape": (lambda fg: fg.tensor([[2.0, -1.0], [0.5, 4.0]]), np.array([[2.0, -1.0], [0.5, 4.0]])),
    "row": (lambda fg: fg.tensor([10.0, -4.0]), np.array([10.0, -4.0])),
    "column": (lambda fg: fg.tensor([[2.0], [-8.0]]), np.array([[2.0], [-8.0]])),
    "0-d": (lambda fg: fg.tensor(4.0), np.array(4.0)),
    "int": (lambda fg: 2, 2),
    "float": (lambda fg: 0.5, 0.5),
    "float64_tensor": (lambda fg: fg.tensor([0.25, 8.0], dtype=fg.float64), np.array([0.25, 8.0])),
}


def _with_operand_two(call):
    return lambda fg, t: call(t, 2.0)


# In-place ops on a leaf that requires grad (all must raise outside no_grad).
LEAF_OPS = {
    **{name: _with_operand_two(call) for name, (call, _) in ARITHMETIC.items()},
    "zero_": lambda fg, t: t.zero_(),
    "fill_": lambda fg, t: t.fill_(7.0),
    "copy_": lambda fg, t: t.copy_(fg.ones(2, 2)),
    "clamp_": lambda fg, t: t.clamp_(1.5, 3.5),
}


# --- values ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("operand", OPERANDS)
@pytest.mark.parametrize("op", ARITHMETIC)
def test_arithmetic_in_place_values(fg, op, operand):
    call, np_op = ARITHMETIC[op]
    make, np_other = OPERANDS[operand]
    t = fg.tensor(A)
    result = call(t, make(fg))
    assert result is t
    assert dtype_name(t.dtype) == "float32"
    assert_values(t, np_op(np.array(A), np_other))


def test_int_tensor_in_place_with_int_operands_stays_int64(fg):
    i = fg.tensor([1, 2, 3])
    i += 1
    i.mul_(fg.tensor([2, 2, 2]))
    i -= fg.tensor(1)
    assert dtype_name(i.dtype) == "int64"
    assert i.tolist() == [3, 5, 7]


@pytest.mark.parametrize("call", [lambda i: i.add_(0.5), lambda i: i.div_(2), lambda i: i.mul_(i.float())])
def test_int_tensor_in_place_with_float_result_raises(fg, call):
    i = fg.tensor([1, 2])
    with pytest.raises(
        RuntimeError, match="^" + re.escape("result type Float can't be cast to the desired output type Long")
    ):
        call(i)
    assert i.tolist() == [1, 2]


def test_in_place_operand_must_broadcast_to_self(fg):
    t = fg.zeros(2)
    with pytest.raises(
        RuntimeError, match="^" + re.escape("output with shape [2] doesn't match the broadcast shape [2, 2]")
    ):
        t.add_(fg.ones(2, 2))


def test_zero_fill_copy_clamp(fg):
    t = fg.tensor(A)
    assert t.zero_() is t and t.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert t.fill_(2.5) is t and t.tolist() == [[2.5, 2.5], [2.5, 2.5]]
    t.fill_(fg.tensor(-1.0))
    assert t.tolist() == [[-1.0, -1.0], [-1.0, -1.0]]
    assert t.copy_(fg.tensor(A)) is t and t.tolist() == A
    t.copy_(fg.tensor([5.0, 6.0]))  # broadcast source
    assert t.tolist() == [[5.0, 6.0], [5.0, 6.0]]
    t.copy_(fg.tensor([[1, 2], [3, 4]]))  # int64 source converted to self's dtype
    assert dtype_name(t.dtype) == "float32" and t.tolist() == A
    assert t.clamp_(1.5, 3.5) is t and t.tolist() == [[1.5, 2.0], [3.0, 3.5]]
    t.clamp_(min=2.5)
    assert t.tolist() == [[2.5, 2.5], [3.0, 3.5]]
    t.clamp_(max=3.0)
    assert t.tolist() == [[2.5, 2.5], [3.0, 3.0]]


def test_in_place_on_views_writes_through_to_base(fg):
    t = fg.zeros(2, 3)
    t[0].fill_(1.0)
    t[:, 1].add_(5.0)
    t.T[2].mul_(0.0)  # a non-contiguous view
    t[1, ::2] += 3.0
    assert t.tolist() == [[1.0, 6.0, 0.0], [3.0, 5.0, 3.0]]


# --- the leaf rule --------------------------------------------------------------------------------


@pytest.mark.parametrize("op", LEAF_OPS)
def test_in_place_on_leaf_that_requires_grad_raises(fg, op):
    x = fg.tensor(A, requires_grad=True)
    with pytest.raises(RuntimeError, match=LEAF_IN_PLACE):
        LEAF_OPS[op](fg, x)
    assert x.tolist() == A
    assert x.is_leaf and x.grad_fn is None


def test_in_place_on_view_of_leaf_that_requires_grad_raises(fg):
    x = fg.tensor(A, requires_grad=True)
    with pytest.raises(RuntimeError, match=VIEW_OF_LEAF_IN_PLACE):
        x[0] = 5.0
    with pytest.raises(RuntimeError, match=VIEW_OF_LEAF_IN_PLACE):
        x[1].add_(1.0)
    assert x.tolist() == A


@pytest.mark.parametrize("op", LEAF_OPS)
def test_in_place_on_leaf_allowed_under_no_grad(fg, op):
    x = fg.tensor(A, requires_grad=True)
    expected = fg.tensor(A)
    LEAF_OPS[op](fg, expected)
    with fg.no_grad():
        assert LEAF_OPS[op](fg, x) is x
    assert x.tolist() == expected.tolist()
    assert x.requires_grad and x.is_leaf and x.grad_fn is None
    (x * x).sum().backward()  # the graph sees the new values
    assert_values(x.grad, 2 * np.array(expected.tolist()))


# --- gradients through in-place ops on non-leaves ---------------------------------------------------


def test_in_place_chain_on_non_leaf(fg):
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.add_(1)
    y.mul_(3)
    assert y.tolist() == [9.0, 15.0, 21.0]
    assert y.is_leaf is False and node_name(y.grad_fn) == "MulBackward0"
    y.sum().backward()
    assert grad_of(x) == [6.0, 6.0, 6.0]


NON_LEAF_OPS = {  # name: (in-place op on y = x * 1, expected d sum(y) / dx for x = [1, 2, 3])
    "add_": (lambda fg, y: y.add_(2.0), [1.0, 1.0, 1.0]),
    "sub_": (lambda fg, y: y.sub_(fg.tensor([1.0, 2.0, 3.0])), [1.0, 1.0, 1.0]),
    "mul_": (lambda fg, y: y.mul_(3.0), [3.0, 3.0, 3.0]),
    "div_": (lambda fg, y: y.div_(4.0), [0.25, 0.25, 0.25]),
    "/=": (lambda fg, y: operator.itruediv(y, fg.tensor([1.0, 2.0, 4.0])), [1.0, 0.5, 0.25]),
    "zero_": (lambda fg, y: y.zero_(), [0.0, 0.0, 0.0]),
    "fill_": (lambda fg, y: y.fill_(5.0), [0.0, 0.0, 0.0]),
    "copy_": (lambda fg, y: y.copy_(fg.ones(3)), [0.0, 0.0, 0.0]),
    "clamp_": (lambda fg, y: y.clamp_(1.5, 2.5), [0.0, 1.0, 0.0]),
}


@pytest.mark.parametrize("op", NON_LEAF_OPS)
def test_gradient_through_in_place_op_on_non_leaf(fg, op):
    call, expected = NON_LEAF_OPS[op]
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1.0
    assert call(fg, y) is y
    assert y.requires_grad is True and y.is_leaf is False
    y.sum().backward()
    assert_values(x.grad, expected)


def test_in_place_with_operand_that_requires_grad(fg):
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = fg.zeros(3)
    y.add_(x)
    assert y.requires_grad is True and y.is_leaf is False
    y.mul_(x)  # y = x * x
    y.sum().backward()
    assert grad_of(x) == [2.0, 4.0, 6.0]
    c = fg.zeros(3)
    c.copy_(x * 3)
    assert c.requires_grad is True
    x.grad = None
    c.sum().backward()
    assert grad_of(x) == [3.0, 3.0, 3.0]


# --- version counters -----------------------------------------------------------------------------


def modify_exp_result(fg, x, b):
    y = x.exp()
    y.add_(1)  # exp saves its result
    return y


def modify_saved_input(fg, x, b):
    a = x + 0
    z = a * b  # mul saves a for b's gradient
    a.mul_(2)
    return z


def modify_saved_input_through_view(fg, x, b):
    a = x + 0
    z = a * b
    a[1:].mul_(2)
    return z


def modify_saved_input_with_setitem(fg, x, b):
    a = x + 0
    z = a * b
    a[0] = 0.0
    return z


def modify_saved_leaf_under_no_grad(fg, x, b):
    z = x * x
    with fg.no_grad():
        x.add_(1)
    return z


def modify_through_detach(fg, x, b):
    y = x.exp()
    y.detach().zero_()  # detach() shares the version counter
    return y


@pytest.mark.parametrize(
    "build",
    [
        modify_exp_result,
        modify_saved_input,
        modify_saved_input_through_view,
        modify_saved_input_with_setitem,
        modify_saved_leaf_under_no_grad,
        modify_through_detach,
    ],
)
def test_modifying_tensor_saved_for_backward_raises(fg, build):
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = fg.tensor([4.0, 5.0, 6.0], requires_grad=True)
    out = build(fg, x, b)  # the in-place op itself is fine
    with pytest.raises(RuntimeError, match=MODIFIED):
        out.sum().backward()


# --- __setitem__ -----------------------------------------------------------------------------------


def test_setitem_scalar_on_non_leaf(fg):
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    y[0] = 5.0
    assert y.tolist() == [5.0, 2.0, 3.0]
    assert y.requires_grad and not y.is_leaf
    y.sum().backward()
    assert grad_of(x) == [0.0, 1.0, 1.0]


@pytest.mark.parametrize(
    "index,value,values,grad",
    [
        ([0, 2], 0.0, [0.0, 2.0, 0.0], [0.0, 1.0, 0.0]),
        (slice(None, None, 2), [7.0, 8.0], [7.0, 2.0, 8.0], [0.0, 1.0, 0.0]),
        (slice(1, None), -1.0, [1.0, -1.0, -1.0], [1.0, 0.0, 0.0]),
        (Ellipsis, 4.0, [4.0, 4.0, 4.0], [0.0, 0.0, 0.0]),
    ],
)
def test_setitem_indices_on_non_leaf(fg, index, value, values, grad):
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    y[index] = fg.tensor(value) if isinstance(value, list) else value
    assert y.tolist() == values
    y.sum().backward()
    assert grad_of(x) == grad


def test_setitem_value_that_requires_grad(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = fg.zeros(4)
    y[1:3] = x
    assert y.requires_grad is True and y.is_leaf is False
    assert y.tolist() == [0.0, 1.0, 2.0, 0.0]
    (y * fg.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert grad_of(x) == [2.0, 3.0]


def test_setitem_from_the_same_tensor(fg):
    x = fg.tensor(A, requires_grad=True)
    m = x * 1
    m[:, 0] = m[:, 1] * 2
    assert m.tolist() == [[4.0, 2.0], [8.0, 4.0]]
    m.sum().backward()
    assert grad_of(x) == [[0.0, 3.0], [0.0, 3.0]]


def test_in_place_on_view_of_non_leaf(fg):
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    v = y[1:]
    v.mul_(3)
    assert y.tolist() == [1.0, 6.0, 9.0]
    assert v.tolist() == [6.0, 9.0]
    y.sum().backward()
    assert grad_of(x) == [1.0, 3.0, 3.0]


def test_setitem_on_leaf_allowed_under_no_grad(fg):
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with fg.no_grad():
        x[1] = 0.0
        x[fg.tensor([0, 2])] = fg.tensor([5.0, 6.0])
    assert x.tolist() == [5.0, 0.0, 6.0]
    assert x.is_leaf and x.requires_grad and x.grad_fn is None


# --- nodes that keep more than two saved tensors ------------------------------------------------


def clamp_between_tensors(lib, x):
    lo, hi = lib.tensor([0.0, 0.0, 0.0]), lib.tensor([2.5, 2.5, 2.5])
    return x.clamp(lo, hi), hi


def pow_of_tensors(lib, x):
    out = x.pow(x + 0)
    return out, out


def nll_loss_with_weight(lib, x):
    weight = lib.tensor([1.0, 2.0, 3.0])
    return lib.nn.functional.nll_loss(x.reshape(1, 3), lib.tensor([2]), weight=weight), weight


def index_by_three_tensors(lib, x):
    i, j, k = lib.tensor([0]), lib.tensor([0]), lib.tensor([1])
    return x.reshape(1, 1, 3)[i, j, k], k


@pytest.mark.parametrize("build", [clamp_between_tensors, pow_of_tensors, nll_loss_with_weight, index_by_three_tensors])
@pytest.mark.parametrize("twice", [False, True], ids=["modified", "backward_twice"])
def test_saved_tensor_past_the_second(fg, torch, build, twice):
    # The last tensor each node saves is checked as the first two are: for its version, and for
    # having been freed by a backward without retain_graph.
    def program(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out, last = build(lib, x)
        if twice:
            out.sum().backward()
        else:
            last.mul_(1)
        out.sum().backward()

    same_error(fg, torch, program)


# Outside autograd an elementwise in-place op writes its result straight over a contiguous self (one
# pass): the cases where the result buffer is, or must not be, self's memory.
@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.arange(6.0).reshape(2, 3).add_(m.arange(6.0).reshape(2, 3)[0]),  # a row broadcast
        lambda m: (lambda x: (x.mul_(x), x))(m.arange(4.0)),  # self as the operand
        lambda m: (lambda x: (x.sub_(x.view(2, 2).view(4), alpha=0.5), x))(m.arange(4.0)),  # a full view
        lambda m: (lambda x: (x.t().div_(m.tensor([2.0, 4.0])), x))(m.arange(4.0).reshape(2, 2)),  # strided self
        lambda m: (lambda x: (x[1:].add_(1.5, alpha=2), x))(m.arange(4.0)),  # an offset self
        lambda m: m.arange(4, dtype=m.float16).add_(m.ones(4, dtype=m.float16), alpha=0.3),
        lambda m: m.arange(4, dtype=m.int32).add_(m.arange(4), alpha=3),  # int64 result into int32
        lambda m: m.arange(4.0).mul_(m.tensor(2, dtype=m.float64)),
    ],
)
def test_in_place_result_written_over_self(fg, torch, program):
    with fg.no_grad(), torch.no_grad():
        same_on_both(fg, torch, program)


def test_in_place_write_over_self_keeps_views_and_versions(fg):
    x = fg.arange(4.0)
    view = x[1:]
    version = x._version
    x.add_(fg.ones(4), alpha=2)
    assert view.tolist() == [3.0, 4.0, 5.0] and x._version == version + 1
