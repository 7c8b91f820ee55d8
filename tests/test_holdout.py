"""The holdout check of issue 19: PyTorch programs that draw their own random numbers, run unchanged
with `python -m fastgrad.run` and nothing pinned, print PyTorch's numbers step by step (float32
rounding: sums are taken in another order).

tests/holdout/ holds programs following the flows of PyTorch's "Learning PyTorch with examples"
tutorial (the cubic fit to sin(x) with tensors, autograd, a custom autograd Function, nn with a hand
update, optim.RMSprop, a custom Module, the dynamic net; randn starts, Linear's default init, fewer
steps than the tutorial) and a small classifier trained from torch.manual_seed(0) (randn data,
default init, dropout, a shuffled DataLoader, Adam). The seed articles' code (examples/seed*.py,
with `import torch`) runs the same way and prints what PyTorch prints (tests/seeds/expected).
"""

import contextlib
import io
import random
import runpy
from pathlib import Path

from semantics_helpers import assert_same_output, printed_by_each, strip_module
from test_seeds import SEEDS, expected, source

HOLDOUT = Path(__file__).resolve().parent / "holdout"
PROGRAMS = sorted(path.name for path in HOLDOUT.glob("*.py"))

# Each program in turn in one process (one import of the library), after a line with its name.
RUN_EACH = """
import os, runpy, sys
for script in sys.argv[1:]:
    print("=== " + os.path.basename(script), flush=True)
    sys.argv = [script]
    runpy.run_path(script, run_name="__main__")
"""


def printed(tmp_path, scripts, *command):
    """{script name: what it printed}, the scripts run one after another by `python *command`
    (`-m fastgrad.run`: `import torch` in them is fastgrad)."""
    return printed_by_each(tmp_path, RUN_EACH, scripts, *command)


def printed_by_torch(torch, scripts):
    """{script name: what it printed} under PyTorch, run in this process (whose import of torch the
    other tests share); the random states the programs seed are restored afterwards."""
    outputs, python_state = {}, random.getstate()
    with torch.random.fork_rng():
        for script in scripts:
            with contextlib.redirect_stdout(io.StringIO()) as output:
                runpy.run_path(str(script), run_name="__main__")
            outputs[script.name] = output.getvalue()
    random.setstate(python_state)
    return outputs


def test_programs_print_pytorchs_losses(tmp_path, torch):
    scripts = [HOLDOUT / name for name in PROGRAMS]
    theirs = printed_by_torch(torch, scripts)
    ours = printed(tmp_path, scripts, "-m", "fastgrad.run")
    assert list(ours) == list(theirs) == PROGRAMS
    for name in PROGRAMS:
        assert len(theirs[name].splitlines()) >= 11, name  # the losses were printed
        assert_same_output(ours[name], theirs[name])


def test_seed_articles_run_as_pytorch_scripts(tmp_path):
    scripts = []
    for name in SEEDS:
        scripts.append(tmp_path / f"{name}.py")
        scripts[-1].write_text(source(name), encoding="utf-8")  # the article's code, `import torch`
    ours = printed(tmp_path, scripts, "-m", "fastgrad.run")
    assert list(ours) == [f"{name}.py" for name in SEEDS]
    for name in SEEDS:
        assert strip_module(ours[f"{name}.py"]) == strip_module(expected(name)), name
