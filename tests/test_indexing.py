"""__getitem__ / __setitem__ against numpy (the reference for values, view-vs-copy and gradients)
and PyTorch's own rules where the two differ.

An index is written once, module-neutrally: `T([...])` is an int64 index tensor, `M([...])` a bool
mask tensor, lists stay lists. `realize` turns it into the index for numpy or for a tensor module.
"""

import re
from dataclasses import dataclass

import numpy as np
import pytest

from op_helpers import assert_close, dtype_name, gradcheck_for, rng_for, to_numpy

SHAPE = (3, 4, 5)


class T(list):
    """An int64 index tensor."""


class M(list):
    """A bool mask tensor."""


def realize(index, m=None):
    """The index for module `m` (a tensor module), or for numpy when m is None."""

    def one(item):
        if isinstance(item, (T, M)):
            array = np.array(item, dtype=np.int64 if isinstance(item, T) else bool)
            return array if m is None else m.tensor(array)
        return item

    return tuple(one(i) for i in index) if isinstance(index, tuple) else one(index)


@dataclass(frozen=True)
class IndexCase:
    index: object
    grad_fn: object = None  # PyTorch's grad_fn name, checked for single-kind indices
    numpy_view: object = None  # for PyTorch/numpy differences: (basic part, rest) applied in turn
    basic: bool = True  # result is a view of the indexed tensor

    def __repr__(self):
        return repr(self.index).replace(" ", "")

    def np_get(self, a):
        if self.numpy_view is None:
            return a[realize(self.index)]
        first, rest = self.numpy_view
        return a[first][rest]

    def np_add_at(self, grad, g):
        """grad[index] += g with repeated indices accumulating."""
        target, index = (
            (grad, realize(self.index)) if self.numpy_view is None else (grad[self.numpy_view[0]], self.numpy_view[1])
        )
        np.add.at(target, index, g)

    def np_set(self, a, value):
        if self.numpy_view is None:
            a[realize(self.index)] = value
        else:
            a[self.numpy_view[0]][self.numpy_view[1]] = value


S = slice
ALL = slice(None)
GET_CASES = [
    # ints and negative ints
    IndexCase(1, "SelectBackward0"),
    IndexCase(-1, "SelectBackward0"),
    IndexCase((1, 2)),
    IndexCase((-1, -2, 0)),
    IndexCase((ALL, 2)),
    # slices with steps, negative bounds, out-of-range bounds, empty
    IndexCase(S(1, 3), "SliceBackward0"),
    IndexCase(S(None, None, 2), "SliceBackward0"),
    IndexCase((ALL, S(1, None, 2)), "SliceBackward0"),
    IndexCase((ALL, ALL, S(0, 5, 3)), "SliceBackward0"),
    IndexCase(S(-2, None)),
    IndexCase((ALL, S(None, -1))),
    IndexCase(S(1, 10)),
    IndexCase(S(2, 2)),
    IndexCase((S(None, None, 2), 1, S(1, None, 2))),
    # None and Ellipsis
    IndexCase(None, "UnsqueezeBackward0"),
    IndexCase((ALL, None), "UnsqueezeBackward0"),
    IndexCase((None, 1, None)),
    IndexCase((Ellipsis, 1), "SelectBackward0"),
    IndexCase((1, Ellipsis)),
    IndexCase((Ellipsis, None)),
    IndexCase((None, Ellipsis, S(None, None, 2))),
    IndexCase((1, Ellipsis, -1)),
    # integer index tensors and lists (copies, not views)
    IndexCase(T([0, 2]), "IndexBackward0", basic=False),
    IndexCase([2, 0, 2], "IndexBackward0", basic=False),  # repeated: gradients accumulate
    IndexCase(T([-1, 0]), basic=False),
    IndexCase(T([[0, 1], [2, 0]]), basic=False),
    IndexCase((T([0, 2]), T([1, 3])), basic=False),  # pairwise
    IndexCase((T([[0], [2]]), T([1, 3, 3])), basic=False),  # broadcast among index tensors
    IndexCase((ALL, T([0, 3, 0])), basic=False),
    IndexCase((ALL, T([0, 2]), T([1, 4])), basic=False),  # adjacent: stay in place
    IndexCase((T([0, 2]), ALL, T([1, 1])), basic=False),  # separated: go first
    IndexCase((Ellipsis, [4, 0]), basic=False),
    IndexCase((None, T([1, 1])), basic=False),
    IndexCase((S(None, None, 2), [1, 3]), basic=False),
    # lists the core reads itself (flat Python ints) and those it hands to numpy: bools, nesting, numpy ints
    IndexCase((ALL, [-1]), basic=False),
    IndexCase([True, False, True], basic=False),
    IndexCase([[0, 1], [2, 0]], basic=False),
    IndexCase((ALL, [np.int64(1), 0]), basic=False),
    # an int next to an index tensor: PyTorch selects the int first (numpy would count it as an
    # advanced index and move the broadcast dimension to the front)
    IndexCase((1, ALL, [0, 2]), numpy_view=(1, (ALL, [0, 2])), basic=False),
    # bool masks
    IndexCase(M([True, False, True]), basic=False),
    IndexCase((ALL, M([False, True, True, False])), basic=False),
]
SET_CASES = [c for c in GET_CASES if c.index not in ([2, 0, 2],)]  # no duplicate targets


def _get_params():
    return [pytest.param(c, id=repr(c)) for c in GET_CASES]


def _data(key, dtype=np.float32, shape=SHAPE):
    return np.asarray(rng_for("indexing", key).standard_normal(shape), dtype=dtype)


BASES = ["contiguous", "permuted"]


def indexed_tensor(fg, a, base, requires_grad=False):
    """(leaf, x): x holds a's values; for "permuted" x is a non-contiguous view of the leaf."""
    if base == "contiguous":
        leaf = fg.tensor(a, requires_grad=requires_grad)
        return leaf, leaf
    leaf = fg.tensor(np.ascontiguousarray(a.transpose(2, 1, 0)), requires_grad=requires_grad)
    return leaf, leaf.permute(2, 1, 0)


def as_leaf_layout(array, base):
    return array if base == "contiguous" else array.transpose(2, 1, 0)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("case", _get_params())
def test_getitem_values_and_views(fg, case, base):
    a = _data(repr(case))
    _, x = indexed_tensor(fg, a, base)
    out = x[realize(case.index, fg)]
    expected = case.np_get(a)
    assert tuple(out.shape) == expected.shape
    assert dtype_name(out.dtype) == "float32"
    assert_close(to_numpy(out), expected, rtol=0, atol=0)
    # basic indexing gives a view sharing storage, advanced indexing a copy (as in numpy)
    x += 1
    assert_close(to_numpy(out), expected + 1 if case.basic else expected, rtol=0, atol=0)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("case", _get_params())
def test_getitem_gradient(fg, case, base):
    a = _data(repr(case))
    leaf, x = indexed_tensor(fg, a, base, requires_grad=True)
    out = x[realize(case.index, fg)]
    assert out.requires_grad and not out.is_leaf
    if case.grad_fn is not None:
        assert out.grad_fn.name() == case.grad_fn
    g = _data(repr(case) + "g", shape=tuple(out.shape))
    out.backward(fg.tensor(g))
    expected = np.zeros(SHAPE, dtype=np.float32)
    case.np_add_at(expected, g)
    assert_close(to_numpy(leaf.grad), as_leaf_layout(expected, base))


@pytest.mark.parametrize("case", _get_params())
def test_getitem_gradcheck(fg, case):
    x = fg.tensor(_data(repr(case), np.float64, (3, 4, 5)), requires_grad=True)
    index = realize(case.index, fg)
    assert gradcheck_for(fg)(lambda t: t[index] * 1.5, (x,))


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("case", [pytest.param(c, id=repr(c)) for c in SET_CASES])
@pytest.mark.parametrize("value_kind", ["scalar", "full", "broadcast", "0-d"])
def test_setitem_values(fg, case, value_kind, base):
    a = _data(repr(case))
    target_shape = case.np_get(a).shape
    value = {
        "scalar": 2.5,
        "full": _data("full", shape=target_shape),
        "broadcast": _data("row", shape=target_shape[-1:]),
        "0-d": np.asarray(-3.0, dtype=np.float32),
    }[value_kind]
    leaf, x = indexed_tensor(fg, a, base)
    x[realize(case.index, fg)] = value if value_kind == "scalar" else fg.tensor(value)
    expected = a.copy()
    case.np_set(expected, value)
    assert_close(to_numpy(x), expected, rtol=0, atol=0)
    assert_close(to_numpy(leaf), as_leaf_layout(expected, base), rtol=0, atol=0)  # in place


@pytest.mark.parametrize("case", [pytest.param(c, id=repr(c)) for c in SET_CASES])
def test_setitem_gradient(fg, case):
    """y = x * 1; y[index] = v: x's gradient is cut where v was written; v gets the sum there."""
    a = _data(repr(case))
    target_shape = case.np_get(a).shape
    v_data = _data("v", shape=target_shape[-1:])  # broadcast along the leading dims
    x = fg.tensor(a, requires_grad=True)
    v = fg.tensor(v_data, requires_grad=True)
    y = x * 1
    y[realize(case.index, fg)] = v
    assert y.requires_grad
    g = _data("g", shape=SHAPE)
    y.backward(fg.tensor(g))
    expected_x = g.copy()
    case.np_set(expected_x, 0.0)
    assert_close(to_numpy(x.grad), expected_x)
    written = case.np_get(g).reshape((-1,) + target_shape[-1:])
    assert_close(to_numpy(v.grad), written.sum(axis=0))


def test_setitem_with_int_tensor_value_and_index_on_int_tensor(fg):
    x = fg.tensor(np.arange(6, dtype=np.int64))
    x[fg.tensor(np.array([1, 4]))] = 7
    x[::5] = -1
    assert x.tolist() == [-1, 7, 2, 3, 7, -1]
    assert dtype_name(x.dtype) == "int64"


OUT_OF_RANGE = [  # index, shape, message
    (5, (3,), "index 5 is out of bounds for dimension 0 with size 3"),
    (-4, (3,), "index -4 is out of bounds for dimension 0 with size 3"),
    ((ALL, 3), (2, 3), "index 3 is out of bounds for dimension 1 with size 3"),
    ((1, -7), (2, 3), "index -7 is out of bounds for dimension 1 with size 3"),
    (T([0, 5]), (3,), "index 5 is out of bounds for dimension 0 with size 3"),
    ([0, 5], (3,), "index 5 is out of bounds for dimension 0 with size 3"),
    ((0, 0), (3,), "too many indices for tensor of dimension 1"),
]


@pytest.mark.parametrize("index,shape,message", OUT_OF_RANGE, ids=[m for _, _, m in OUT_OF_RANGE])
@pytest.mark.parametrize("kind", ["get", "set"])
def test_index_out_of_range(fg, index, shape, message, kind):
    x = fg.tensor(np.zeros(shape, dtype=np.float32))
    with pytest.raises(IndexError, match=re.escape(message)):
        if kind == "get":
            x[realize(index, fg)]
        else:
            x[realize(index, fg)] = 1.0


def test_float_index_tensor_is_rejected(fg):
    x = fg.tensor(np.zeros(3, dtype=np.float32))
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool"):
        x[fg.tensor(np.array([0.0]))]


PYTHON_BOOL_KEYS = [True, False, (None, True), (True, 0), (Ellipsis, True), (True, False), (1, Ellipsis, True, None)]


@pytest.mark.parametrize("key", PYTHON_BOOL_KEYS, ids=repr)
@pytest.mark.parametrize("shape", [(), (2, 3)])
def test_python_bool_index_adds_a_dim_as_torch(fg, torch, key, shape):
    """x[True] is x[None] through an advanced index, x[False] the same with none of it: torch's values,
    shapes, grad_fn and gradients, on a 0-d and an n-d tensor."""

    def program(lib):
        x = lib.arange(float(np.prod(shape))).reshape(shape).requires_grad_()
        try:
            y = x[key]
        except IndexError as e:  # x[True, 0] of a 0-d tensor: too many indices
            return type(e).__name__
        (y * lib.arange(float(y.numel())).reshape(y.shape)).sum().backward()
        z = lib.zeros(shape)
        z[key] = 5.0
        return tuple(y.shape), y.tolist(), y.grad_fn.name(), x.grad.tolist(), z.tolist()

    assert program(fg) == program(torch)
