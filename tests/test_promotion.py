"""PyTorch's type promotion for arithmetic and comparisons.

The expected dtypes come from a small model of PyTorch's documented rules (below), checked against
every pairing of float32/float64/int64/bool tensors (with dimensions and 0-d) and Python
float/int/bool scalars; a short table of headline cases spells the rules out literally.
"""

import operator
import re

import numpy as np
import pytest

from op_helpers import dtype_name

CATEGORY = {"bool": 0, "int64": 1, "float32": 2, "float64": 2}
DEFAULT_FOR_CATEGORY = {0: "bool", 1: "int64", 2: "float32"}  # Python scalars, default float32

# operand kind -> (dtype, priority: 2 tensor with dimensions, 1 0-d tensor, 0 Python scalar)
OPERANDS = {
    "f32": ("float32", 2),
    "f64": ("float64", 2),
    "i64": ("int64", 2),
    "b": ("bool", 2),
    "f32_0d": ("float32", 1),
    "f64_0d": ("float64", 1),
    "i64_0d": ("int64", 1),
    "b_0d": ("bool", 1),
    "float": ("float32", 0),
    "int": ("int64", 0),
    "bool": ("bool", 0),
}
PY_VALUE = {"float": 2.5, "int": 2, "bool": True}
TENSOR_VALUE = {"float32": 2.0, "float64": 2.0, "int64": 2, "bool": True}

OPS = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "**": operator.pow,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
COMPARISONS = {"<", "<=", ">", ">=", "==", "!="}


def _wider(d1, d2):
    if CATEGORY[d1] != CATEGORY[d2]:
        return d1 if CATEGORY[d1] > CATEGORY[d2] else d2
    return "float64" if "float64" in (d1, d2) else d1


def result_type(kind_a, kind_b):
    """torch.result_type: the highest-priority operands decide unless a lower-priority operand has
    a higher category; then that operand's dtype (the default dtype for a Python scalar) wins."""
    by_priority = {}
    for kind in (kind_a, kind_b):
        dtype, priority = OPERANDS[kind]
        by_priority[priority] = _wider(by_priority.get(priority, dtype), dtype)
    levels = sorted(by_priority, reverse=True)
    result = by_priority[levels[0]]
    for level in levels[1:]:
        lower = by_priority[level]
        if CATEGORY[lower] > CATEGORY[result]:
            result = lower if level == 1 else DEFAULT_FOR_CATEGORY[CATEGORY[lower]]
    return result


def expected(op, kind_a, kind_b):
    """(dtype name, None) or (None, (exception type, message regex))."""
    dtypes = [OPERANDS[k][0] for k in (kind_a, kind_b)]
    if op == "-" and "bool" in dtypes:
        which = "two bool tensors" if dtypes == ["bool", "bool"] else "a bool tensor"
        return None, (RuntimeError, re.escape(f"Subtraction, the `-` operator, with {which} is not supported."))
    dtype = result_type(kind_a, kind_b)
    if op == "**" and dtype == "bool" and OPERANDS[kind_b][1] > 0:  # bool tensor exponent
        return None, (RuntimeError, re.escape("\"pow\" not implemented for 'Bool'"))
    if op in COMPARISONS:
        return "bool", None
    if op == "/" and CATEGORY[dtype] < 2:
        return "float32", None
    return dtype, None


def make(fg, kind):
    if kind in PY_VALUE:
        return PY_VALUE[kind]
    dtype, priority = OPERANDS[kind]
    value = TENSOR_VALUE[dtype]
    data = value if priority == 1 else [value, value, value]
    return fg.tensor(data, dtype=getattr(fg, dtype))


def value_of(kind):
    if kind in PY_VALUE:
        return PY_VALUE[kind]
    return TENSOR_VALUE[OPERANDS[kind][0]]


CASTS = {"bool": bool, "int64": int, "float32": float, "float64": float}
PAIRS = [
    (op, a, b) for op in OPS for a in OPERANDS for b in OPERANDS if not (OPERANDS[a][1] == 0 and OPERANDS[b][1] == 0)
]


@pytest.mark.parametrize("op,a,b", PAIRS, ids=[f"{a}{op}{b}" for op, a, b in PAIRS])
def test_binary_promotion(fg, op, a, b):
    dtype, error = expected(op, a, b)
    lhs, rhs = make(fg, a), make(fg, b)
    if error is not None:
        with pytest.raises(error[0], match=error[1]):
            OPS[op](lhs, rhs)
        return
    out = OPS[op](lhs, rhs)
    assert dtype_name(out.dtype) == dtype
    both_0d = all(OPERANDS[k][1] < 2 for k in (a, b))
    assert tuple(out.shape) == (() if both_0d else (3,))
    value = CASTS[dtype](OPS[op](value_of(a), value_of(b)))
    assert np.allclose(np.asarray(out.tolist(), dtype=np.float64), float(value), rtol=1e-6)


HEADLINE = [  # (description, fn, dtype)
    ("float32 tensor * 2.5", lambda fg: fg.ones(2) * 2.5, "float32"),
    ("int64 tensor * 0.5", lambda fg: fg.tensor([1, 2]) * 0.5, "float32"),
    ("int64 tensor * 2", lambda fg: fg.tensor([1, 2]) * 2, "int64"),
    ("int64 / int64", lambda fg: fg.tensor([1, 2]) / fg.tensor([2, 2]), "float32"),
    ("float32 + 0-d float64", lambda fg: fg.ones(2) + fg.tensor(1.0, dtype=fg.float64), "float32"),
    ("int64 + 0-d float64", lambda fg: fg.tensor([1, 2]) + fg.tensor(1.0, dtype=fg.float64), "float64"),
    ("0-d float32 + 0-d float64", lambda fg: fg.tensor(1.0) + fg.tensor(1.0, dtype=fg.float64), "float64"),
    ("bool + bool", lambda fg: fg.tensor([True]) + fg.tensor([True]), "bool"),
    ("bool + 1", lambda fg: fg.tensor([True]) + 1, "int64"),
    ("float64 + float32 tensors", lambda fg: fg.ones(2, dtype=fg.float64) + fg.ones(2), "float64"),
    ("int64 < 2.5 compares as float", lambda fg: fg.tensor([2, 3]) < 2.5, "bool"),
    ("sum of int64", lambda fg: fg.tensor([1, 2]).sum(), "int64"),
    ("sum of bool", lambda fg: fg.tensor([True, True]).sum(), "int64"),
    ("argmax", lambda fg: fg.ones(3).argmax(), "int64"),
    ("float32 += float64 keeps float32", lambda fg: _iadd(fg.ones(2), fg.ones(2, dtype=fg.float64)), "float32"),
]


def _iadd(a, b):
    a += b
    return a


@pytest.mark.parametrize("fn,dtype", [c[1:] for c in HEADLINE], ids=[c[0] for c in HEADLINE])
def test_headline_promotions(fg, fn, dtype):
    assert dtype_name(fn(fg).dtype) == dtype


def test_promoted_values(fg):
    assert (fg.tensor([1, 3]) / fg.tensor([2, 2])).tolist() == [0.5, 1.5]
    assert (fg.tensor([2, 3]) < 2.5).tolist() == [True, False]
    assert (fg.tensor([1, 2]) * 0.5).tolist() == [0.5, 1.0]
    assert (fg.tensor([True, False]) + fg.tensor([True, False])).tolist() == [True, False]
    assert (fg.tensor([True, True]).sum()).item() == 2


@pytest.mark.parametrize(
    "fn,message",
    [
        (lambda fg: _iadd(fg.tensor([1, 2]), 2.5), "result type Float can't be cast to the desired output type Long"),
        (
            lambda fg: fg.tensor([1, 2]).mean(),
            "mean(): could not infer output dtype. Input dtype must be either a floating point or "
            "complex dtype. Got: Long",
        ),
        (lambda fg: fg.tensor([2]) ** -1, "Integers to negative integer powers are not allowed."),
        (lambda fg: -fg.tensor([True]), "Negation, the `-` operator, on a bool tensor is not supported."),
    ],
    ids=["int64 += 2.5", "mean of int64", "int ** negative int", "-bool"],
)
def test_promotion_errors(fg, fn, message):
    with pytest.raises(RuntimeError, match=re.escape(message)):
        fn(fg)
