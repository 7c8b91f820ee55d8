"""`python -m fastgrad.bench --quick` runs in a child interpreter and prints well-formed markdown tables
(the structure only: timings are never asserted)."""

import re

import pytest

from semantics_helpers import run_python

GROUPS = ["op", "mlp", "matmul", "elementwise", "mv", "micrograd"]
HEADER = "| benchmark | fastgrad | torch | numpy | reference | vs torch | vs numpy | vs reference | target | met |"


def bench(*args):
    result = run_python(f"from fastgrad.bench import main; main({list(args)!r})", timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout


def tables(output):
    """{group: [row cells]} of every '### group' table in the output."""
    found = {}
    for block in output.split("### ")[1:]:
        name, _, body = block.partition("\n")
        lines = [line for line in body.splitlines() if line.startswith("|")]
        assert lines[0] == HEADER and set(lines[1]) <= set("|-")
        rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
        assert rows and all(len(r) == HEADER.count("|") - 1 for r in rows)
        found[name] = rows
    return found


@pytest.mark.slow
def test_quick_run_prints_every_group():
    output = bench("--quick")
    assert re.search(r"^Machine: CPU: .*; ISA: .*; numpy \S+; fastgrad \S+; torch .+$", output, re.MULTILINE)
    found = tables(output)
    assert list(found) == GROUPS
    for rows in found.values():
        for name, fastgrad_time, *_, target, met in rows:
            assert re.fullmatch(r"[\d,.]+ (µs|ms|GFLOP/s|Gelem/s)", fastgrad_time), fastgrad_time
            # each target has a verdict, and a verdict needs a target
            assert len(target.split(", ")) == len(met.split(", "))
            assert set(met.split(", ")) <= {"met", "not met", "n/a", "-"}
    names = [row[0] for rows in found.values() for row in rows]
    for expected in (
        "op forward z=x*y+x",
        "op forward+backward",
        "MLP 64-128-10 b32 step, raw tensors",
        "MLP 64-128-10 b32 step, nn.Linear+optim.SGD",
        "MLP 784-256-10",
        "matmul 64 x 64",
        "add ",
        "exp ",
        "dot 256 float32",
        "mv 256 x 256 float32",
        "micrograd step",
    ):
        assert any(n.startswith(expected) for n in names), expected
    # the reference runs next to fastgrad, and its ratio is reported
    mlp = next(r for r in found["mlp"] if r[0].endswith("raw tensors"))
    assert mlp[4] != "-" and mlp[7].endswith("x")


def test_unknown_group_is_an_error():
    result = run_python("from fastgrad.bench import main; main(['--only', 'nope'])")
    assert result.returncode == 2 and "unknown group(s) nope" in result.stderr


def test_only_selects_groups_and_openblas_variables_are_reported_not_changed():
    code = (
        "import os; os.environ['OPENBLAS_CORETYPE'] = 'Haswell'; from fastgrad.bench import main; "
        "main(['--quick', '--only', 'op']); assert os.environ['OPENBLAS_CORETYPE'] == 'Haswell'"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert "warning: OPENBLAS_CORETYPE=Haswell is set and slows numpy" in result.stderr
    assert list(tables(result.stdout)) == ["op"]
