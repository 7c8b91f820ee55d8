"""Helpers shared by the seed, autograd-semantics, grad-mode, in-place, creation, memory and example tests.

Everything here goes through the public PyTorch-style API of the backend under test (`fg`), so the
same helpers work for fastgrad, for the pure-Python reference and for PyTorch itself.
"""

import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import pytest

# "torch.float64", "fastgrad.float64", "fastgrad.reference.Size" ... -> "float64", "Size".
_MODULE_PREFIX = re.compile(
    r"\b(?:torch|fastgrad(?:\.\w+)*)\.(?=(?:Size|float32|float64|int64|bool|float|double|long)\b)"
)


def strip_module(text):
    """Drop the module prefix from dtype and Size reprs, so backends can be compared."""
    return _MODULE_PREFIX.sub("", str(text))


def dtype_name(dtype):
    """'float32' for torch.float32 / fastgrad.float32."""
    return strip_module(dtype)


def assert_values(tensor, expected, rtol=1e-6, atol=0.0):
    """Compare a tensor's values (via the public tolist()) to a number or nested list."""
    got = np.asarray(tensor.tolist(), dtype=np.float64)
    want = np.asarray(expected, dtype=np.float64)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# A printed number with a decimal point (and an exponent: a coefficient that cancels to -5.7e-10).
_NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")


def assert_same_output(ours, theirs, rel=1e-5):
    """Two programs' printed text equal, their numbers with a decimal point equal to float32 rounding
    (relative `rel`, absolute 2e-6: a value that cancels to about zero may print as 0.0)."""
    assert _NUMBER.sub("#", ours) == _NUMBER.sub("#", theirs), (ours, theirs)
    assert [float(n) for n in _NUMBER.findall(ours)] == pytest.approx(
        [float(n) for n in _NUMBER.findall(theirs)], rel=rel, abs=2e-6
    )


def grad_of(tensor):
    """The leaf's accumulated gradient as (nested) Python floats."""
    assert tensor.grad is not None, "no gradient was accumulated"
    return tensor.grad.tolist()


def node_name(fn):
    """fn.name() without a C++ namespace (PyTorch names its leaf node 'torch::autograd::AccumulateGrad')."""
    return fn.name().rsplit("::", 1)[-1]


def graph_names(grad_fn):
    """Names of a grad_fn's next functions (None for inputs that need no gradient)."""
    return [None if fn is None else node_name(fn) for fn, _ in grad_fn.next_functions]


def run_python(code, timeout=300, stdin=None):
    """Run `code` in a fresh interpreter that imports modules as this one does, `stdin` its input;
    return CompletedProcess.

    The child gets this process's sys.path, so it finds the same backend module. Warnings are
    reported on stderr and never turned into errors (the seed code reads `.grad` of non-leaf
    tensors, which warns in PyTorch).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    env["PYTHONWARNINGS"] = "default"
    env["PYTHONIOENCODING"] = "utf-8"
    # An empty working directory: a stray module file in a shared /tmp must not shadow anything.
    with tempfile.TemporaryDirectory() as cwd:
        return subprocess.run(
            [sys.executable, "-c", code],
            input=stdin,
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=env,
            timeout=timeout,
            cwd=cwd,
        )


def printed_by_each(tmp_path, wrapper_source, scripts, *command):
    """{script name: what it printed}: `python *command wrapper scripts...` in tmp_path, where the
    wrapper (its source given) runs the scripts one after another in one process, which pays the
    library's import once, printing "=== name" before each."""
    wrapper = tmp_path / "run_each.py"
    wrapper.write_text(wrapper_source, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)))
    result = subprocess.run(
        [sys.executable, *command, str(wrapper), *map(str, scripts)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    sections = result.stdout.split("=== ")[1:]
    return {name: text for name, _, text in (section.partition("\n") for section in sections)}


IMPORT_TORCH = re.compile(r"^import torch[ \t]*$", re.MULTILINE)


def import_as_torch(source, module_name):
    """Replace the seed code's single `import torch` line by `import <module_name> as torch`."""
    code, count = IMPORT_TORCH.subn(f"import {module_name} as torch", source)
    assert count == 1, "expected exactly one `import torch` line"
    return code
