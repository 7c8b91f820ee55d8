"""docs/errors.md, the error contract, stays true: every row of its table is run here, on both
backends and on PyTorch, and must raise the exception it names with a message containing its text."""

import builtins
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "errors.md"
CODE_SPAN = re.compile(r"^(`+) ?(.*?) ?\1$")
PYTORCH_DIFFERS = re.compile(r"^`(\w+)` \(PyTorch: `(\w+)`\)$")
TYPE_NAME = re.compile(r"\btorch\.(Size|dtype)\b")  # types each library names after itself


def code(cell):
    """The text of a cell that is one code span (`x` or ``x`` when x holds a backtick)."""
    match = CODE_SPAN.match(cell)
    assert match, f"not a code span: {cell}"
    return match.group(2)


def contract_rows(text):
    """[(input, example, fastgrad's exception, PyTorch's exception, message)] from the table."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("| ") or line.startswith("| Input |"):
            continue
        what, example, exception, message = (cell.strip() for cell in line.strip("|").split(" | "))
        differs = PYTORCH_DIFFERS.match(exception)
        ours, theirs = differs.groups() if differs else (code(exception),) * 2
        rows.append((what, code(example), ours, theirs, code(message)))
    return rows


ROWS = contract_rows(DOC.read_text(encoding="utf-8"))


def test_table_is_parsed():
    table = (
        "| Input | Example | Exception | Message |\n|---|---|---|---|\n"
        "| a | `f(1)` | `TypeError` | ``x `y` z`` |\n"
        "| b | `g()` | `MemoryError` (PyTorch: `RuntimeError`) | `m` |\n"
    )
    assert contract_rows(table) == [
        ("a", "f(1)", "TypeError", "TypeError", "x `y` z"),
        ("b", "g()", "MemoryError", "RuntimeError", "m"),
    ]
    assert len(ROWS) >= 50 and len({row[0] for row in ROWS}) == len(ROWS)


def expected(module, row):
    """(exception name, message) the row asks of `module`: where fastgrad differs, PyTorch's type only."""
    _, _, ours, theirs, message = row
    if module.__name__ != "torch":
        return ours, message
    return theirs, message if theirs == ours else ""


def raises(module, example, exception, message):
    with pytest.raises(getattr(builtins, exception)) as error:
        eval(example, {"torch": module})
    message = TYPE_NAME.sub(module.__name__.split(".")[0] + r".\1", message)  # torch.Size -> fastgrad.Size
    assert message in str(error.value), f"{example} raised {error.value!r}"


@pytest.mark.parametrize("row", ROWS, ids=[row[0] for row in ROWS])
def test_contract(fg, row):
    raises(fg, row[1], *expected(fg, row))


@pytest.mark.parametrize("row", ROWS, ids=[row[0] for row in ROWS])
def test_contract_is_pytorchs(torch, row):
    raises(torch, row[1], *expected(torch, row))
