"""Random tensor programs, run on every backend and compared (the differential fuzzer).

A program is a list of Python lines written against the PyTorch API, e.g.

    x0 = torch.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
    v0 = x0.t()[::2]
    v1 = torch.maximum(v0, 0.5 * v0)
    v1.add_(x1)

`torch` in those lines is whichever backend runs them (fastgrad, fastgrad.reference, torch), so
the repr of a program is also its source. Every backend gets the same leaves (built from the same
numpy arrays); the program ends with a scalar loss (a weighted sum of every float value, with
fixed weights) and `loss.backward()`.

The generator draws ops from OPS, one entry per op form: a template whose {placeholders} are each
filled by a drawer (pick a tensor of some dtype, a broadcastable partner, dims, an index, ...).
While it draws, the generator runs each line on fastgrad, so drawers see real shapes (including
data-dependent ones such as mask indexing); when fastgrad raises, the program ends there and the
other backends must raise the same exception at the same line.

This module holds the entry points, programs() and draw_step(), and re-exports what the tests use;
the rest is split by family:
- fuzz_run.py: Program (and Leaf), running a program on one backend (run, Outcome), the loss weights,
  minimize, backends();
- fuzz_compare.py: comparing outcomes (assert_same_outcome, TOLERANCES, TORCH_BUGS, DIFFERENCES,
  rounding) and finite differences;
- fuzz_drawers.py: the generator's state (Gen) and the drawers;
- fuzz_ops.py: the op table (OPS) and CONSTRUCTS, what the census counts.
"""

import numpy as np
from hypothesis import strategies as st

from fuzz_compare import (
    DIFFERENCES,
    TOLERANCES,
    TORCH_BUGS,
    assert_gradients_match_finite_differences,
    assert_same_outcome,
    torch_bug,
)
from fuzz_drawers import Gen, sampled_from
from fuzz_ops import CONSTRUCTS, OPS, Op, constructs
from fuzz_run import ANY, FLOAT, NUM, Leaf, Outcome, Program, backends, dtype_name, loss_weight, minimize, run

# What tests take from here (np too: test_program_source_runs_as_python runs sources with fuzz_programs.np).
__all__ = [
    "ANY",
    "CONSTRUCTS",
    "DIFFERENCES",
    "FLOAT",
    "NUM",
    "OPS",
    "TOLERANCES",
    "TORCH_BUGS",
    "Gen",
    "Leaf",
    "Op",
    "Outcome",
    "Program",
    "assert_gradients_match_finite_differences",
    "assert_same_outcome",
    "backends",
    "constructs",
    "draw_step",
    "dtype_name",
    "loss_weight",
    "minimize",
    "np",
    "programs",
    "run",
    "torch_bug",
]


def draw_step(g, op_):
    got = {}
    for placeholder, drawer in op_.drawers:
        got[placeholder] = drawer(g, got)
    g.program.ops.append(op_)
    g.program.args.append(got)
    if op_.statement:
        return g.run(op_.template.format(**got))
    if "{out}" in op_.template:  # a statement that makes the value itself (with ...: {out} = ...)
        return g.new_value(op_.template.format(**got, out="{out}"))
    return g.new_value("{out} = " + op_.template.format(**got))


OP_DRAWS = st.sampled_from(OPS)  # made once: a strategy computes its label from its ~600 options


@st.composite
def programs(draw, max_ops=20, first=None):
    """Random programs; with `first` (an entry of OPS), programs whose first op is that one."""
    g = Gen(draw, draw(sampled_from(FLOAT)))
    g.leaf()
    if draw(st.booleans()):
        g.leaf()
    if first is not None and not draw_step(g, first):
        return g.finish()
    # One "go on" draw before each op (rather than a length drawn first), so that shrinking can
    # delete any op with its draws.
    while len(g.program.lines) < max_ops and (not g.program.lines or draw(st.integers(0, 15)) < 15):
        if not draw_step(g, draw(OP_DRAWS)):
            break  # fastgrad raised: the program ends with this line
    return g.finish()
