"""Shared fixtures.

`fg` is the library under test. Tests are written once against the PyTorch API and run on every
backend listed in FASTGRAD_TEST_BACKENDS (comma separated module names, default: the C++ fastgrad
and the pure-Python fastgrad.reference).
Setting FASTGRAD_TEST_BACKENDS=torch runs the suite against PyTorch itself, which is how the
expectations in the tests are checked.

`torch` is the oracle: real PyTorch, or a clean skip when it is not installed.
"""

import gc
import importlib
import importlib.util
import os

import pytest

try:
    import fcntl
except ImportError:  # Windows: parallel runs there do not keep serial tests alone
    fcntl = None

BACKENDS = [name for name in os.environ.get("FASTGRAD_TEST_BACKENDS", "fastgrad,fastgrad.reference").split(",") if name]

# Hypothesis now and then draws a number found in the source of the local modules loaded so far
# ("local constants"). Which modules those are depends on the tests run before in the same process
# and on whether fastgrad is installed or imported from the tree, so the fuzzers' programs did too:
# CI drew programs no local run had. With the pool kept empty, the draws depend on the seed alone.
# (A private API: a Hypothesis without it has no such pool to pin.)
try:
    from hypothesis.internal.conjecture import providers as _hypothesis_providers

    _NO_LOCAL_CONSTANTS = _hypothesis_providers.Constants()
    _hypothesis_providers._get_local_constants = lambda: _NO_LOCAL_CONSTANTS
except (ImportError, AttributeError):
    pass


@pytest.fixture(params=BACKENDS)
def fg(request):
    return importlib.import_module(request.param)


# The reference's derivatives are compared with PyTorch's wherever PyTorch is installed (test_ops'
# test_matches_torch in every layout, test_higher_order's second derivatives in float64 to 1e-6):
# its finite-difference checks of the op table (29 s of CPU per run) then only repeat them, and run
# only where PyTorch is missing. fastgrad's run everywhere.
TORCH_INSTALLED = importlib.util.find_spec("torch") is not None
FINITE_DIFFERENCE_BACKENDS = [name for name in BACKENDS if not (name == "fastgrad.reference" and TORCH_INSTALLED)]


@pytest.fixture(params=FINITE_DIFFERENCE_BACKENDS)
def fg_finite_differences(request):
    """`fg` for the op table's gradcheck and gradgradcheck (see FINITE_DIFFERENCE_BACKENDS)."""
    return importlib.import_module(request.param)


@pytest.fixture(scope="session")
def torch():
    torch = pytest.importorskip("torch")
    # Where opt_einsum is installed (jax brings it), torch.einsum of three or more operands takes the
    # contraction order opt_einsum picks, whose shape checks raise its ValueError first; the oracle is
    # torch's own left-to-right path, which fastgrad follows.
    torch.backends.opt_einsum.enabled = False
    return torch


# ---- parallel runs (pytest-xdist, `-n auto`): tests marked `serial` run alone
#
# Every test of a parallel run holds a shared lock on one file of the run while it runs (setup,
# call and teardown); a `serial` test holds it exclusively, so no test runs in another worker
# meanwhile. A second lock, taken briefly before the first, keeps a waiting serial test from being
# starved by the other workers' stream of shared holders. The files live in the run's base
# temporary directory (each worker's is a folder in it), which pytest deletes a few runs later.


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item):
    if not hasattr(item.config, "workerinput") or fcntl is None:  # not an xdist worker: nothing runs beside this test
        yield
        return
    base = os.path.join(item.config._tmp_path_factory.getbasetemp().parent, "fastgrad-tests")
    alone = item.get_closest_marker("serial") is not None
    with open(base + ".turnstile", "a") as turnstile, open(base + ".lock", "a") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def pytest_collection_finish(session):
    """The objects collection made (test modules, parametrize tables: over a million) live to the
    end of the run: frozen, the garbage collector stops walking them on every full collection, the
    tests' own gc.collect() calls included (these took seconds each)."""
    gc.collect()
    gc.freeze()


def pytest_runtest_setup(item):
    if os.environ.get("FASTGRAD_ISA") and item.get_closest_marker("not_rerun_per_isa"):
        pytest.skip("the same under every ISA: the run without a forced ISA covers it")


def pytest_collection_modifyitems(items):
    """`slow` tests first: a parallel run hands tests out in this order, and one started last would
    leave the other workers idle until it ends."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
