"""The seed articles' code blocks run with `import <backend> as torch` and print exactly what
PyTorch prints (tests/seeds/expected/*.txt). The code lives once, in examples/, as users run it
(`import fastgrad as torch`); with `import torch` instead it is the articles' code verbatim."""

import json
from pathlib import Path

import pytest

from semantics_helpers import import_as_torch, run_python, strip_module

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXPECTED = Path(__file__).resolve().parent / "seeds" / "expected"
SEEDS = sorted(path.stem for path in EXAMPLES.glob("seed*.py"))

# The acceptance numbers of the core issue, as they appear in PyTorch's output.
ACCEPTANCE_LINES = {
    "seed000_linear": ["Output: 0.5"],
    "seed000_graph": ["Output e: 30.0", "Gradient w.r.t a: 21.0", "Gradient w.r.t b: 16.0"],
    "seed001_graph": [
        " wgrad : tensor([5.])",
        "is leaf : x : True w : True a : False b : False y : False",
        "grad : x : tensor([2.]) w : tensor([5.]) a : None b : None y : None",
    ],
}


def source(name):
    """The article's code, with its own `import torch`."""
    example = (EXAMPLES / f"{name}.py").read_text(encoding="utf-8")
    assert example.count("import fastgrad as torch\n") == 1
    return example.replace("import fastgrad as torch\n", "import torch\n")


def expected(name):
    return (EXPECTED / f"{name}.txt").read_text(encoding="utf-8")


def test_all_seeds_present():
    assert SEEDS == sorted(ACCEPTANCE_LINES)


# The programs of one library run in one child interpreter, one after the other, each in a fresh
# namespace with its own captured output: an import of PyTorch costs 2.4 s of CPU, the programs ms.
RUN_EACH = """
import contextlib, io, json, sys
outputs = []
for code in json.loads(sys.stdin.read()):
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        exec(compile(code, "<seed>", "exec"), {"__name__": "__main__"})
    outputs.append(printed.getvalue())
print(json.dumps(outputs))
"""


def printed_by(sources):
    """What each program of `sources` prints, run in order in one child interpreter."""
    result = run_python(RUN_EACH, stdin=json.dumps(sources))
    assert result.returncode == 0, result.stderr
    return dict(zip(SEEDS, json.loads(result.stdout)))


def test_seeds_print_expected_output(fg):
    printed = printed_by([import_as_torch(source(name), fg.__name__) for name in SEEDS])
    for name in SEEDS:
        # `torch.Size([1])` may be spelled with the backend's module name.
        assert strip_module(printed[name]) == strip_module(expected(name)), name


@pytest.mark.slow
def test_expected_output_is_what_torch_prints(torch):
    printed = printed_by([source(name) for name in SEEDS])
    for name in SEEDS:
        assert printed[name] == expected(name), name


@pytest.mark.parametrize("name", SEEDS)
def test_expected_output_has_acceptance_numbers(name):
    lines = expected(name).splitlines()
    for line in ACCEPTANCE_LINES[name]:
        assert line in lines
