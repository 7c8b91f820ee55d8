"""The per-ISA pooling and normalization kernels (csrc/kernels/pool_impl.h, norm_impl.h) on rows
wide enough for whole vectors and their tails: values, indices and gradients against PyTorch, the
same bits for 1, 2 and 3 threads, and the same bits under every ISA (children with FASTGRAD_ISA
forced compute the cases again and the results are compared bit for bit).
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import fastgrad

from op_helpers import rng_for, to_numpy


def _pool_input(rng, dtype):
    """(2, 3, 13, 70): 35 outputs of a 2x2 pool per row, past two AVX-512 vectors; with ties (values
    rounded to halves), -inf and NaN in some windows."""
    x = np.round(rng.standard_normal((2, 3, 13, 70)) * 2) / 2
    x[0, 0, 3, 5] = x[1, 2, 7, 40] = np.nan
    x[0, 1, 0:2, 0:2] = -np.inf
    return x.astype(dtype)


POOLS = {  # id: fn(F, x) -> output or (output, indices)
    "max 2x2": lambda F, x: F.max_pool2d(x, 2, return_indices=True),
    "max 3x3 s2 p1": lambda F, x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
    "max 3x2 s(1,3) dilation (2,2)": lambda F, x: F.max_pool2d(x, (3, 2), (1, 3), 1, 2, return_indices=True),
    "max 1x1 stride 1": lambda F, x: F.max_pool2d(x, (2, 1), 1, return_indices=True),
    "adaptive max 7": lambda F, x: F.adaptive_max_pool2d(x, (13, 7), return_indices=True),
    "avg 2x2": lambda F, x: F.avg_pool2d(x, 2),
    "avg 3x3 s2 p1 exclude": lambda F, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    "avg 1x3 s1": lambda F, x: F.avg_pool2d(x, (1, 3), 1),
    "adaptive avg divisible": lambda F, x: F.adaptive_avg_pool2d(x, (13, 10)),
    "adaptive avg uneven": lambda F, x: F.adaptive_avg_pool2d(x, (4, 9)),
}

NORMS = {  # id: (fn(F, x, w, b), input shape); the weight and bias have one value per channel (dim 1)
    "batch 2d": (lambda F, x, w, b: F.batch_norm(x, None, None, w, b, training=True), (3, 5, 7, 11)),
    "batch 1d columns": (lambda F, x, w, b: F.batch_norm(x, None, None, w, b, training=True), (9, 37)),
    "batch 3d long planes": (lambda F, x, w, b: F.batch_norm(x, None, None, w, b, training=True), (2, 3, 5, 9, 7)),
    "group": (lambda F, x, w, b: F.group_norm(x, 3, w, b), (2, 6, 17, 3)),
    "instance": (lambda F, x, w, b: F.instance_norm(x, weight=w, bias=b), (2, 4, 9, 21)),
    # rows of 37 (vectors and a tail), enough of them that 2 and 3 threads split the rows (and the
    # weight's and bias's gradients split the columns)
    "layer": (lambda F, x, w, b: F.layer_norm(x, (37,), w, b), (2000, 37)),
}


def results(lib):
    """name -> numpy array: every case's outputs and input gradients (float32 and float64)."""
    out = {}
    F = lib.nn.functional
    for dtype in ("float32", "float64"):
        rng = rng_for("pool-norm-kernels", dtype)
        data = _pool_input(rng, dtype)
        for name, fn in POOLS.items():
            x = lib.tensor(data, requires_grad=True)
            result = fn(F, x)
            value, indices = result if isinstance(result, tuple) else (result, None)
            upstream = rng.standard_normal(tuple(value.shape)).astype(dtype)
            value.backward(lib.tensor(upstream))
            out[f"{name} {dtype} value"] = to_numpy(value)
            out[f"{name} {dtype} grad"] = to_numpy(x.grad)
            if indices is not None:
                out[f"{name} {dtype} indices"] = to_numpy(indices)
        for name, (fn, shape) in NORMS.items():
            # a mean far from zero against the spread: the shifted sums must not cancel
            x = lib.tensor((rng.standard_normal(shape) * 0.5 + 100).astype(dtype), requires_grad=True)
            w = lib.tensor(rng.standard_normal(shape[1]).astype(dtype), requires_grad=True)
            b = lib.tensor(rng.standard_normal(shape[1]).astype(dtype), requires_grad=True)
            value = fn(F, x, w, b)
            value.backward(lib.tensor(rng.standard_normal(shape).astype(dtype)))
            for part, t in (("value", value), ("grad", x.grad), ("weight grad", w.grad), ("bias grad", b.grad)):
                out[f"{name} {dtype} {part}"] = to_numpy(t)
    return out


def test_cases_match_pytorch(torch):
    ours, theirs = results(fastgrad), results(torch)
    for key, expected in theirs.items():
        tolerance = 2e-5 if "float32" in key else 1e-11
        if any(key.startswith(f"{name} ") for name in NORMS):
            tolerance *= 20  # PyTorch sums the statistics in another order, of inputs 200 deviations from 0
        np.testing.assert_allclose(ours[key], expected, rtol=tolerance, atol=tolerance, err_msg=key)


def test_results_do_not_depend_on_the_thread_count():
    before = fastgrad.get_num_threads()
    try:
        runs = []
        for threads in (1, 2, 3):
            fastgrad.set_num_threads(threads)
            runs.append(results(fastgrad))
    finally:
        fastgrad.set_num_threads(before)
    for other in runs[1:]:
        for key, expected in runs[0].items():
            np.testing.assert_array_equal(other[key], expected, err_msg=key)


CHILD = """
import sys
import numpy as np
sys.path.insert(0, {tests!r})
import fastgrad
from test_pool_norm_kernels import results
assert fastgrad.config()["isa"] == {isa!r}, fastgrad.config()["isa"]
fastgrad.set_num_threads(2)
np.savez({path!r}, **results(fastgrad))
"""


@pytest.mark.parametrize("isa", ["scalar", "avx2", "avx512"])
def test_same_bits_under_every_isa(isa, tmp_path):
    config = fastgrad.config()
    if isa not in config["isas_available"] or isa == config["isa"]:
        pytest.skip(f"{isa}: not available, or this process's ISA")
    path = str(tmp_path / "results.npz")
    tests = os.path.dirname(os.path.abspath(__file__))
    child = subprocess.run(
        [sys.executable, "-c", CHILD.format(tests=tests, isa=isa, path=path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)),
            "FASTGRAD_ISA": isa,
        },
    )
    assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-2000:]
    theirs = np.load(path)
    for key, expected in results(fastgrad).items():
        np.testing.assert_array_equal(theirs[key], expected, err_msg=f"{key} under {isa}")
