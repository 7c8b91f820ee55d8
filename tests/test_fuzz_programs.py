"""The differential fuzzer: random programs (tests/fuzz_programs.py) give the same values, leaf
gradients and exceptions on fastgrad, on fastgrad.reference (when importable) and on PyTorch (when
installed); in float64, fastgrad's gradients agree with finite differences. Fewer programs compare
their second derivatives (gradients of the gradients, create_graph=True) across the backends.

Derandomized, so every CI run checks the same programs. FASTGRAD_FUZZ_EXAMPLES=<n> runs n programs
(and FASTGRAD_FUZZ_SEED=<s> another set of them); FASTGRAD_FUZZ_BACKENDS=fastgrad,torch picks the
backends. A failure prints the shrunk program as Python source. FASTGRAD_FUZZ_CENSUS=<file> writes
there, per test, how many programs used each construct of fuzz_programs.CONSTRUCTS.
"""

import collections
import functools
import json
import os
import re
import warnings

import pytest
from hypothesis import HealthCheck, Phase, given, note, seed, settings
from hypothesis.control import current_build_context

import fuzz_programs
from fuzz_programs import OPS, assert_gradients_match_finite_differences, assert_same_outcome, programs, run

EXAMPLES = int(os.environ.get("FASTGRAD_FUZZ_EXAMPLES", "1000"))
PER_OP_EXAMPLES = max(3, EXAMPLES // 300)  # ~530 templates: 3 programs each by default
SECOND_ORDER_EXAMPLES = max(10, EXAMPLES // 5)
SEED = os.environ.get("FASTGRAD_FUZZ_SEED")
BACKENDS = fuzz_programs.backends()


def fuzz_settings(test, examples=EXAMPLES):
    phases = [p for p in Phase if p is not Phase.shrink or os.environ.get("FASTGRAD_FUZZ_SHRINK", "1") != "0"]
    test = settings(
        max_examples=examples,
        derandomize=SEED is None,
        deadline=None,
        database=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )(test)
    return seed(int(SEED))(test) if SEED is not None else test


CENSUS = collections.defaultdict(collections.Counter)  # test name -> construct -> programs


@pytest.fixture(scope="module", autouse=True)
def write_census():
    yield
    if os.environ.get("FASTGRAD_FUZZ_CENSUS"):
        with open(os.environ["FASTGRAD_FUZZ_CENSUS"], "w") as f:
            json.dump(CENSUS, f, indent=1, sort_keys=True)


def check(program, order=1, census=None):
    if census:
        CENSUS[census].update(fuzz_programs.constructs(program) | {"programs"})
    fastgrad = BACKENDS[0]
    ours = run(program, fastgrad, order=order)
    for module in BACKENDS[1:]:
        theirs = run(program, module, order=order)
        if module.__name__ == "torch" and fuzz_programs.torch_bug(program, ours, theirs):
            continue
        strict = module.__name__.startswith("fastgrad")  # the reference must match exactly
        exact = (
            lambda: run(program, fastgrad, upcast=True, order=order),
            lambda module=module: run(program, module, upcast=True, order=order),
        )
        assert_same_outcome(program, ours, theirs, strict=strict, exact=exact, second_order=order == 2)
    if program.dtype == "float64" and order == 1:
        assert_gradients_match_finite_differences(program, ours)


def _failure(program):
    """What check(program) reports, with line numbers left out (None if it passes)."""
    try:
        check(program)
    except AssertionError as e:
        return re.sub(r"line \d+", "line ?", "\n".join(str(e).split("\n")[:2]))
    except Exception:  # noqa: BLE001 -- a smaller program that breaks differently is not wanted
        return "other"
    return None


@pytest.mark.slow
@fuzz_settings
@given(programs())
def test_backends_agree(program):
    try:
        check(program, census="test_backends_agree")
    except AssertionError:
        if current_build_context().is_final:  # the shrunk example, replayed once: cut it further
            failure = _failure(program)
            smaller = fuzz_programs.minimize(program, lambda p: _failure(p) == failure)
            if smaller.lines != program.lines or smaller.leaves != program.leaves:
                note(f"The same failure, with lines and leaves deleted:\n{smaller.source()}")
        raise


@pytest.mark.slow
@functools.partial(fuzz_settings, examples=SECOND_ORDER_EXAMPLES)
@given(programs())
def test_second_derivatives_agree(program):
    check(program, order=2, census="test_second_derivatives_agree")


UNIQUE_OPS = list({op.template: op for op in OPS}.values())  # OPS repeats an op to weight it


@pytest.mark.parametrize("op", UNIQUE_OPS, ids=[op.template for op in UNIQUE_OPS])
def test_each_op_first(op):
    """Every op of the table is fuzzed in every run, whatever the random programs drew: a few
    programs start with it."""

    @functools.partial(fuzz_settings, examples=PER_OP_EXAMPLES)
    @given(programs(first=op))
    def run_programs(program):
        check(program, census="test_each_op_first")

    run_programs()


def test_program_source_runs_as_python(fg):
    """A failing program is reported as its source: that text runs as is."""

    @settings(max_examples=20, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(programs())
    def check(program):
        namespace = {
            "torch": fg,
            "np": fuzz_programs.np,
            "w": lambda i, v: fg.tensor(fuzz_programs.loss_weight(i, tuple(v.shape)), dtype=v.dtype),
        }
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # what programs warn about (run() ignores it too)
                exec(program.source(), namespace)
        except Exception as e:  # noqa: BLE001
            outcome = run(program, fg)
            assert outcome.error is not None and type(e) is outcome.error[1]

    check()
