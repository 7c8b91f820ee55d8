"""Every op's shape/dtype rule (fastgrad._meta, named by its op-table row) gives exactly the shape and
dtype the op returns, on both backends, for every call of a table op that the op cases
(tests/op_cases.py, differentiable and not) make. PyTorch agrees: test_ops compares those results.

The check runs the cases with each table op (function, method, and the operators that call it)
wrapped: the wrapper asks the rule first, from the arguments as they are, then runs the op."""

import importlib

import numpy as np
import pytest

from conftest import BACKENDS
from fastgrad import _meta, _optable
import test_composed_ops
from op_cases import CASES, NONDIFF_CASES, NOT_IN_CASES
from op_helpers import make_arrays

# The Tensor operators and the op each one is: (row name, whether the operands come reflected).
OPERATORS = {
    "__add__": ("add", False),
    "__radd__": ("add", True),
    "__sub__": ("sub", False),
    "__rsub__": ("sub", True),
    "__mul__": ("mul", False),
    "__rmul__": ("mul", True),
    "__truediv__": ("div", False),
    "__rtruediv__": ("div", True),
    "__pow__": ("pow", False),
    "__rpow__": ("pow", True),
    "__matmul__": ("matmul", False),
    "__floordiv__": ("floor_divide", False),
    "__mod__": ("remainder", False),
    "__rmod__": ("remainder", True),
    "__and__": ("bitwise_and", False),
    "__or__": ("bitwise_or", False),
    "__xor__": ("bitwise_xor", False),
    "__neg__": ("neg", False),
    "__abs__": ("abs", False),
    "__invert__": ("bitwise_not", False),
    **{f"__{name}__": (name, False) for name in ["lt", "le", "gt", "ge", "eq", "ne"]},
}


def described(result):
    """The shape and dtype of a result, as a rule gives them (a tuple of them for several results)."""
    if isinstance(result, (tuple, list)):
        return tuple(described(r) for r in result)
    return _meta.Meta(tuple(result.shape), result.dtype)


class RuleChecker:
    """Wraps the table's ops of a backend so that each call is checked against its row's rule."""

    def __init__(self, fg, monkeypatch):
        self.calls = []  # (the op's row name, what the rule said, what the op returned)
        rows = {}
        for row in _optable.OPS:
            rule = getattr(_meta, row.meta) if row.meta else None  # None: not a tensor result, only counted
            if "function" in row.variants:
                monkeypatch.setattr(fg, row.name, self.checked(row.name, rule, getattr(fg, row.name)))
            if "method" in row.variants:
                monkeypatch.setattr(fg.Tensor, row.name, self.checked(row.name, rule, getattr(fg.Tensor, row.name)))
            if "inplace" in row.variants:
                name = f"{row.name}_"
                monkeypatch.setattr(fg.Tensor, name, self.checked(row.name, _meta.inplace, getattr(fg.Tensor, name)))
            rows.setdefault(row.name, rule)
        for dunder, (name, reflected) in OPERATORS.items():
            method = self.checked(name, rows[name], getattr(fg.Tensor, dunder), reflected)
            monkeypatch.setattr(fg.Tensor, dunder, method)

    def checked(self, name, rule, op, reflected=False):
        def call(*args, **kwargs):
            if rule is None:
                self.calls.append((name, None, None))
                return op(*args, **kwargs)
            expected = rule(*(args[::-1] if reflected else args), **kwargs)  # before the op runs
            result = op(*args, **kwargs)
            if result is not NotImplemented:
                self.calls.append((name, expected, described(result)))
            return result

        return call


@pytest.fixture(scope="module")
def rule_checkers():
    """The backends' ops wrapped once for this file's tests (about 1,000 attributes each: setting and
    restoring them for each of its 1,300 tests took most of their time)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield {name: RuleChecker(importlib.import_module(name), monkeypatch) for name in BACKENDS}


@pytest.fixture
def checker(fg, rule_checkers):
    """fg's RuleChecker, its record of calls empty."""
    checker = rule_checkers[fg.__name__]
    checker.calls.clear()
    return checker


def run_case(fg, case):
    arrays = make_arrays(case.shapes, case.domain, np.float32, case.name)
    case.fn(fg, *[fg.tensor(a, requires_grad=True) for a in arrays])


def run_composed_case(fg, fn):
    fn(fg, fg.tensor(test_composed_ops.DATA, requires_grad=True))


ALL_CASES = (
    [pytest.param(run_case, c, id=c.name) for c in CASES]
    + [pytest.param(run_case, c, id=f"nondiff {c.name}") for c in NONDIFF_CASES]
    + [pytest.param(run_composed_case, fn, id=f"composed {name}") for name, fn in test_composed_ops.CASES]
)


@pytest.mark.parametrize("run,case", ALL_CASES)
def test_rules_give_the_ops_shapes_and_dtypes(fg, checker, run, case):
    run(fg, case)
    for name, expected, got in checker.calls:
        assert expected == got, name


def test_every_op_has_op_cases(fg, checker):
    """Every op of the table is called by some op case, or op_cases.NOT_IN_CASES says where it is tested."""
    for case in CASES + NONDIFF_CASES:
        run_case(fg, case)
    called = {name for name, _, _ in checker.calls}
    assert sorted(ROW_NAMES - called - set(NOT_IN_CASES)) == []
    assert sorted(set(NOT_IN_CASES) & called) == []  # no stale exemption
    assert set(NOT_IN_CASES) <= ROW_NAMES


ROW_NAMES = {row.name for row in _optable.OPS}


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.ones(2, 3, dtype=m.int64) + 2.5,  # a float number promotes integers to float32
        lambda m: m.ones(2, 3, dtype=m.float64) * m.tensor(2.0),  # a 0-d tensor of the same category does not
        lambda m: m.ones(3, dtype=m.int64) / m.ones(3, dtype=m.int64),  # true division of integers
        lambda m: m.div(m.ones(3, dtype=m.int64), 2, rounding_mode="floor"),
        lambda m: m.ones(2, 3, dtype=m.bool) + m.tensor(1),
        lambda m: m.ones(2, 3, dtype=m.int64).sum(1),
        lambda m: m.ones(2, 3, dtype=m.bool).sum(),
        lambda m: m.ones(2, 3, dtype=m.int64).exp(),
        lambda m: m.clamp(m.ones(2, dtype=m.int64), 0.5),
        lambda m: m.where(m.ones(2, dtype=m.bool), m.ones(2, dtype=m.int64), 2.5),
        lambda m: m.ones(2, 3).sum(dim=1, dtype=m.float64),
        lambda m: m.cat([m.ones(2, dtype=m.int64), m.ones(3)]),
    ],
)
def test_rules_follow_dtype_promotion(fg, torch, checker, program):
    """Integer and bool operands, number operands, dtype= arguments: beyond the float32 op cases."""
    assert str(program(torch).dtype).split(".")[-1] == repr(program(fg).dtype).split(".")[-1]
    checker.calls.clear()
    program(fg)
    assert checker.calls
    for name, expected, got in checker.calls:
        assert expected == got, name
