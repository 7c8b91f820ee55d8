"""The crash fuzzer: every public function and Tensor method, called with random arguments (wrong types,
extreme ints, NaN/inf, size-0 and huge shapes, views, tensors requiring grad), raises only Python
exceptions: no crash, no hang, no broken binding (SystemError, pybind11's "unknown exception").

The calls run in child processes (tests/crash_fuzz.py), a batch per child, so a segfault or abort
fails this test instead of killing pytest; the failure shows the crashing call as Python source.
Every CI run makes the same calls (fixed seeds). FASTGRAD_CRASH_EXAMPLES=<n> makes n calls,
FASTGRAD_CRASH_SEED=<s> another set of them.
"""

import os
import signal
import subprocess
import sys
import time

import fastgrad
import pytest
from fastgrad import _api

import crash_fuzz

EXAMPLES = int(os.environ.get("FASTGRAD_CRASH_EXAMPLES", "80000"))
SEED = int(os.environ.get("FASTGRAD_CRASH_SEED", "0"))
# A child process costs 0.7 s of CPU to start under ASan (CI's only run of these calls): 7 children, not 14.
BATCH = 12000
HANG_SECONDS = 60  # no single call may take this long (the slowest legitimate ones take about a second)


def run_batch(tmp_path, seed, count):
    """Runs one batch in a child process; returns None, or the failure (kind, call source, detail)."""
    log_path = tmp_path / f"calls-{seed}.log"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [
                os.path.dirname(os.path.dirname(fastgrad.__file__)),
                os.path.dirname(crash_fuzz.__file__),
                os.environ.get("PYTHONPATH", ""),
            ]
        ),
    )
    if crash_fuzz.under_address_sanitizer():
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), crash_fuzz.ASAN_MEMORY_CAP]))
    child = subprocess.Popen(
        [sys.executable, crash_fuzz.__file__, str(log_path), str(seed), str(count)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    last_size, last_change = -1, time.monotonic()
    while child.poll() is None:  # a hang: the log has not grown for HANG_SECONDS
        time.sleep(0.2)
        size = log_path.stat().st_size if log_path.exists() else 0
        if size != last_size:
            last_size, last_change = size, time.monotonic()
        elif time.monotonic() - last_change > HANG_SECONDS:
            child.kill()
            child.wait()
            return "hang", _last_call(log_path), f"no progress for {HANG_SECONDS} s"
    stderr = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    if child.returncode == 0:
        return None
    lines = log_path.read_text().splitlines() if log_path.exists() else []
    if child.returncode == 3 and lines and lines[-1].startswith("BROKEN\t"):
        return "broken binding", _last_call(log_path, skip=1), lines[-1].split("\t", 1)[1]
    if child.returncode < 0:
        kind = f"crash ({signal.Signals(-child.returncode).name})"
    elif "Sanitizer" in stderr:  # in a sanitizer build, a bad access ends in a report and exit status 1
        kind = "sanitizer report"
    else:
        kind = f"child exited with status {child.returncode}"
    return kind, _last_call(log_path), stderr[-2000:]


def _last_call(log_path, skip=0):
    lines = log_path.read_text().splitlines() if log_path.exists() else []
    lines = lines[: len(lines) - skip]
    return lines[-1].split("\t", 1)[1] if lines and "\t" in lines[-1] else "(before the first call)"


# A test per batch: a parallel run spreads them over its workers, and each batch reports its own failure.
@pytest.mark.slow
@pytest.mark.parametrize("batch", range((EXAMPLES + BATCH - 1) // BATCH))
def test_random_calls_raise_only_python_exceptions(tmp_path, batch):
    failure = run_batch(tmp_path, SEED * 1_000_003 + batch, min(BATCH, EXAMPLES - batch * BATCH))
    if failure is not None:
        kind, source, detail = failure
        pytest.fail(f"{kind}:\n    import fastgrad as fg, numpy as np\n    {source}\n{detail}", pytrace=False)


def test_every_public_name_is_a_target():
    called = {prefix for prefix, _, _ in crash_fuzz.targets()}
    tensor_methods = {name for name in _api.TENSOR if callable(getattr(fastgrad.Tensor, name))}
    assert {f"{{tensor}}.{name}" for name in tensor_methods} <= called
    objects = {name: getattr(fastgrad, name) for name in _api.MODULE}
    module_functions = {name for name, obj in objects.items() if callable(obj) and not isinstance(obj, fastgrad.dtype)}
    assert {f"fg.{name}" for name in module_functions} <= called


@pytest.mark.parametrize(
    "then, expected",
    [
        ("os.abort()", "crash (SIGABRT)"),
        ("time.sleep(30)", "hang"),
        ("log.write('BROKEN\\tSystemError: x\\n'); sys.exit(3)", "broken binding"),
    ],
)
def test_the_harness_names_the_failing_call(tmp_path, monkeypatch, then, expected):
    monkeypatch.setattr(crash_fuzz, "__file__", str(tmp_path / "failing_child.py"))
    monkeypatch.setattr(sys.modules[__name__], "HANG_SECONDS", 1)
    (tmp_path / "failing_child.py").write_text(
        "import os, sys, time\nlog = open(sys.argv[1], 'w', buffering=1)\nlog.write('0\\tfg.boom()\\n')\n" + then + "\n"
    )
    kind, source, _ = run_batch(tmp_path, 0, 1)
    assert (kind, source) == (expected, "fg.boom()")


# ---- what the fuzzer found, kept as plain tests ---------------------------------------------------
OVERFLOWING_VIEWS = pytest.mark.parametrize(
    "make",
    [
        lambda fg: fg.ones(3).expand(2**62, 3),
        lambda fg: fg.ones(2, 1).expand(2, 2**62),
        lambda fg: fg.zeros(0).reshape(2**62, 2**62, 0),
    ],
    ids=["expand leading", "expand size-1 dim", "reshape of size 0"],
)


@OVERFLOWING_VIEWS
def test_a_view_whose_element_count_overflows_int64_is_refused(fg, make):
    with pytest.raises(RuntimeError, match="^numel: integer multiplication overflow$"):
        make(fg)
    assert fg.ones(1).expand(2**62).shape == (2**62,)  # a count below 2**63 is fine: a view allocates nothing


@OVERFLOWING_VIEWS
def test_torch_refuses_the_same_views(torch, make):
    with pytest.raises(RuntimeError, match="^numel: integer multiplication overflow$"):
        make(torch)


def test_tensor_with_no_arguments_is_empty(fg):
    assert fg.Tensor().shape == (0,) and fg.Tensor().dtype == fg.float32


def test_torch_tensor_with_no_arguments_is_empty(torch):
    assert torch.Tensor().shape == (0,)


def test_in_place_bitwise_of_an_integer_tensor_with_history(fg):
    """eq_ with an operand that requires grad gives an integer tensor a history (as PyTorch's); a
    bitwise op on it in place then records nothing (it used to read the missing node: a crash)."""
    v = fg.tensor([0, 1, 2])
    v.eq_(fg.zeros(3, requires_grad=True))
    v &= v
    assert v.tolist() == [1, 0, 0]
