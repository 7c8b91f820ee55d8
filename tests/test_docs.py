"""docs/autograd.md stays true: its ```python blocks run in order in one namespace, and each block's
printed output is exactly the ```text (or ```mermaid) block that follows it in the doc. A block
that prints must be followed by its output, so no output goes unchecked."""

import contextlib
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "autograd.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
OUTPUT_LANGUAGES = {"text", "mermaid"}


def python_blocks_with_output(text):
    """[(line number, code, the output shown right after it or None)] for every ```python block."""
    fences = list(FENCE.finditer(text))
    blocks = []
    for i, fence in enumerate(fences):
        if fence.group(1) != "python":
            continue
        after = fences[i + 1] if i + 1 < len(fences) else None
        shown = (
            after is not None and after.group(1) in OUTPUT_LANGUAGES and text[fence.end() : after.start()].strip() == ""
        )
        blocks.append((text.count("\n", 0, fence.start()) + 1, fence.group(2), after.group(2) if shown else None))
    return blocks


def test_fences_are_parsed():
    doc = "intro\n```python\nprint(1)\n```\n\n```text\n1\n```\nprose\n```python\nx = 2\n```\n```text\n2\n```\n"
    assert python_blocks_with_output(doc) == [(2, "print(1)\n", "1\n"), (10, "x = 2\n", "2\n")]
    assert python_blocks_with_output("```python\nx = 1\n```\nprose\n```text\n1\n```\n") == [(1, "x = 1\n", None)]


def run_doc(backend):
    text = DOC.read_text(encoding="utf-8")
    assert text.count("import fastgrad as torch\n") == 1
    blocks = python_blocks_with_output(text.replace("import fastgrad as torch\n", f"import {backend} as torch\n"))
    assert len(blocks) >= 5
    namespace = {"__name__": "__doc__"}
    for line, code, shown in blocks:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"{DOC.name}:{line}", "exec"), namespace)
        assert printed.getvalue() == (shown or ""), f"the block at {DOC.name}:{line} printed something else"


# The doc shows the seed's `print(a.grad)` on a non-leaf, which warns as in PyTorch, and an anomaly
# mode error, which warns with its forward traceback.
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
@pytest.mark.filterwarnings("ignore:Error detected in LogBackward0")
def test_autograd_doc_prints_what_it_shows(fg):
    run_doc(fg.__name__)


@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
@pytest.mark.filterwarnings("ignore:Error detected in LogBackward0")
def test_autograd_doc_prints_the_same_with_pytorch(torch):
    run_doc("torch")
