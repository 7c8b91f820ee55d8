"""The op table (fastgrad._optable) is what the backends register: each row's variants exist under
its name, and a row implemented by hand in the shared layer has the row's signature."""

import ast
import inspect
import re

import pytest

import fuzz_ops
from fastgrad import _meta, _optable

ROWS = [pytest.param(row, id=row.signature.partition("(")[0]) for row in _optable.OPS]


def row_signature(row):
    """The Python signature the row declares: its parameters, then out= for the `out` variant."""
    kinds = {
        False: inspect.Parameter.POSITIONAL_OR_KEYWORD,
        True: inspect.Parameter.KEYWORD_ONLY,
    }
    params = []
    for p in row.params:
        if p.type.endswith("..."):
            params.append(inspect.Parameter(p.name, inspect.Parameter.VAR_POSITIONAL))
            continue
        default = inspect.Parameter.empty if p.default is None else ast.literal_eval(p.default)
        params.append(inspect.Parameter(p.name, kinds[p.keyword_only], default=default))
    if "out" in row.variants:
        params.append(inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None))
    return inspect.Signature(params)


@pytest.mark.parametrize("row", ROWS)
def test_each_variant_is_registered(fg, row):
    if "function" in row.variants:
        assert inspect.signature(getattr(fg, row.name)) == row_signature(row)
    if "method" in row.variants and row.impl != "Tensor":
        assert inspect.signature(getattr(fg.Tensor, row.name)) == row_signature(row)
    if "method" in row.variants:
        assert callable(getattr(fg.Tensor, row.name))
    if "inplace" in row.variants:
        assert callable(getattr(fg.Tensor, f"{row.name}_"))
    if "inplace_function" in row.variants:
        in_place = [inspect.Parameter("input", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        in_place += [p for p in row_signature(row).parameters.values() if p.name not in ("input", "out")]
        assert inspect.signature(getattr(fg, f"{row.name}_")) == inspect.Signature(in_place)


def test_a_generated_wrapper_is_plain_code():
    """What the table generates for a primitive: parameters converted by type (a bool tested inline),
    out= handled once."""
    (sum_row,) = [row for row in _optable.OPS if row.name == "sum"]
    assert _optable.wrapper_source(sum_row, "sum") == (
        "def sum(input, dim=None, keepdim=False, *, dtype=None, out=None):\n"
        "    return _with_out(_prims.sum(input, _dims(dim), (keepdim if keepdim is True or keepdim is False "
        'else _not_bool("sum", "keepdim", keepdim)), dtype), out)\n'
    )


def test_generated_wrappers_behave_as_their_op(fg, torch):
    """Wrappers generated from rows take PyTorch's argument forms (both backends, as torch)."""

    def program(m):
        x = m.arange(24.0).reshape(2, 3, 4)
        return [
            x.sum((0, 2), keepdim=True),
            m.transpose(x, 0, -1),
            x.view(4, -1),
            x.view((6, 4)),
            m.reshape(x, (-1,)),
            x.expand(2, 2, 3, 4),
            m.neg(x, out=m.empty(0)),  # exact on both (exp, sqrt: within an ulp of each other)
            x.clamp_(max=10.0),
        ]

    for mine, theirs in zip(program(fg), program(torch)):
        assert tuple(mine.shape) == tuple(theirs.shape)
        assert mine.numpy().tolist() == theirs.numpy().tolist()


@pytest.mark.parametrize("row", ROWS)
def test_each_tensor_op_names_its_shape_rule(row):
    """A row whose op returns tensors names its rule in fastgrad._meta (None: not a tensor result)."""
    returns = row.signature.partition(" -> ")[2] or "Tensor"
    assert (row.meta is None) == (returns not in ("Tensor", "Tensor[]"))
    assert row.meta is None or callable(getattr(_meta, row.meta))


# Ops the fuzzer's templates call by their operator: `{a} == {b}` is eq, `{a} %= {b}` remainder_.
BINARY_OPERATORS = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**", "matmul": "@", "floor_divide": "//", "remainder": "%",
    "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==",
    "ne": "!=",
}  # fmt: skip
OPERATORS = {
    **{name: f" {symbol} " for name, symbol in BINARY_OPERATORS.items()},
    **{f"{name}_": f" {symbol}= " for name, symbol in BINARY_OPERATORS.items()},  # augmented assignments
    "neg": "-{",
    "abs": "abs(",
    "bitwise_not": "~{",
}


def test_every_op_is_in_the_fuzzer_grammar():
    """Each op of the table is called by some template of tests/fuzz_ops.py, by name or by its
    operator, or fuzz_ops.NOT_IN_GRAMMAR says why not."""
    names = {row.name for row in _optable.OPS} | {f"{r.name}_" for r in _optable.OPS if "inplace" in r.variants}
    templates = [op.template for op in fuzz_ops.OPS]

    def called(name):
        by_name = re.compile(rf"\.{name}\(")
        return any(by_name.search(t) or (name in OPERATORS and OPERATORS[name] in t) for t in templates)

    in_grammar = {name for name in names if called(name)}
    assert sorted(names - in_grammar - set(fuzz_ops.NOT_IN_GRAMMAR)) == []
    assert sorted(set(fuzz_ops.NOT_IN_GRAMMAR) & in_grammar) == []  # no stale exemption
