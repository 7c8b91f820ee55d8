"""`python -m fastgrad.bench --quick` runs in a child interpreter and prints well-formed markdown tables
(the structure only: timings are never asserted)."""

import re

import numpy as np

import pytest

import fastgrad
from semantics_helpers import run_python

GROUPS = ["op", "mlp", "matmul", "elementwise", "mv", "micrograd", "cnn", "seq", "random", "compile"]
HEADER = "| benchmark | fastgrad | torch | numpy | reference | vs torch | vs numpy | vs reference | target | met |"
LAYOUT_TITLE = "matmul: a transposed operand against x @ W"
COMPILE_HEADER = (
    "| benchmark | fastgrad compiled | fastgrad eager | torch eager | vs fastgrad eager | vs torch eager "
    "| capture call | memory plan | FLOP time at peak | target | met |"
)


def bench(*args):
    result = run_python(f"from fastgrad.bench import main; main({list(args)!r})", timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout


def tables(output):
    """{group: [row cells]} of every '### group' table in the output (the matmul group's table of
    operand layouts under its own title)."""
    found = {}
    for block in output.split("### ")[1:]:
        name, _, body = block.partition("\n")
        lines = [line for line in body.splitlines() if line.startswith("|")]
        if name.startswith(LAYOUT_TITLE):
            found[LAYOUT_TITLE] = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
            continue
        if name.startswith("compile: "):  # compiled against eager; no torch.compile in a quick run
            assert lines[0] == COMPILE_HEADER
            found["compile"] = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
            assert found["compile"] and all(len(r) == COMPILE_HEADER.count("|") - 1 for r in found["compile"])
            plan = r"[\d,.]+ KiB planned, [\d,.]+ KiB not(; lowered to [\d,]+ float operations)?"
            assert all(re.fullmatch(plan, r[-4]) for r in found["compile"])
            # the 0-d step, and it alone, replays as float arithmetic
            assert ["lowered" in r[-4] for r in found["compile"]] == [
                r[0].startswith("micrograd") for r in found["compile"]
            ]
            continue
        assert lines[0] == HEADER and set(lines[1]) <= set("|-")
        rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
        assert rows and all(len(r) == HEADER.count("|") - 1 for r in rows)
        found[name] = rows
    return found


@pytest.mark.slow
def test_quick_run_prints_every_group():
    output = bench("--quick")
    assert re.search(r"^Machine: CPU: .*; ISA: .*; numpy \S+; fastgrad \S+; torch .+$", output, re.MULTILINE)
    assert re.search(r"^Per-core float32 FMA peak \(register-only loop, \w+\): [\d,.]+ GFLOP/s$", output, re.MULTILINE)
    found = tables(output)
    layouts = found.pop(LAYOUT_TITLE)
    assert list(found) == GROUPS
    for rows in found.values():
        for name, fastgrad_time, *_, target, met in rows:
            assert re.fullmatch(r"[\d,.]+ (µs|ms|Gelem/s|GFLOP/s( \(\d+% of peak\))?)", fastgrad_time), fastgrad_time
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
        "tanh ",
        "sigmoid ",
        "micrograd step",
        "BatchNorm2d (8, 16, 28, 28) forward+backward",
        "GroupNorm 8 groups",
        "conv2d 3x3 16->16 32x32 b8 fwd+bwd",
        "conv2d 5x5 6->16 14x14 b64 forward",
        "LeNet-5 b8 step",
        "LeNet-5 b64 step",
        "max_pool2d 2x2 forward+backward",
        "char LSTM LM 65-64-128 seq 32 b16 step",
        "GRU encoder 128 seq 16 b1 step",
        "LayerNorm (1024, 384) forward+backward",
        "tiny GPT 65 block 32, 2 layers, 4 heads, 64 embd b16 step (AdamW)",
        "tiny GPT sampling 20 tokens top-k 10",
        "MLP 64-128-10 b32 step, nn.Linear+CrossEntropyLoss+Adam",
    ):
        assert any(n.startswith(expected) for n in names), expected
    # x @ W, then its transposed forms with their ratios to it, for fastgrad (and torch beside it)
    assert [row[0] for row in layouts] == ["64x784 @ 784x256", "256x1024 @ 1024x1024", "1x512 @ 512x512"]
    for row in layouts:
        assert re.fullmatch(r"[\d,.]+ µs", row[1]) and all(re.fullmatch(r"[\d,.]+ µs \([\d.]+x\)", c) for c in row[2:5])
        assert row[-2] == "fastgrad <= 1.05x x @ W" and row[-1] in ("met", "not met")
    # the reference runs next to fastgrad, and its ratio is reported
    mlp = next(r for r in found["mlp"] if r[0].endswith("raw tensors"))
    assert mlp[4] != "-" and mlp[7].endswith("x")


def test_numpy_blas_threads_follow_the_row():
    """numpy's bundled OpenBLAS reads OPENBLAS_NUM_THREADS only at load: the bench sets its threads
    per row through ctypes, so numpy's column in a two-thread row is numpy on two threads."""
    import numpy as np

    from fastgrad import bench

    blas = np.__config__.CONFIG["Build Dependencies"]["blas"]
    if "openblas" not in blas["name"]:
        pytest.skip(f"numpy's BLAS is {blas['name']}")
    assert bench.NUMPY_BLAS_THREADS is not None
    assert bench.numpy_threads_known(1) and bench.numpy_threads_known(2)


def test_fma_peak_is_a_positive_rate():
    import fastgrad

    assert 0 < fastgrad._C._fma_peak(0.001) < 1e5


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


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_jax_peer_step_is_the_mlp_step(optimizer):
    """The compile group's JAX jit peer does the work of the fastgrad step it is compared with: from
    the same weights, the same losses and parameters (to float32 rounding)."""
    from fastgrad import bench

    jax = bench.import_jax()
    if jax is None:
        pytest.skip("jax is not installed")
    sizes, batch = (8, 16, 4), 5
    step = bench.jax_mlp_step(jax, sizes, batch, optimizer)
    x, labels, weights = bench.mlp_data(np.random.default_rng(0), sizes, batch)
    linears = [fastgrad.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])]
    with fastgrad.no_grad():
        for layer, w, b in zip(linears, weights[::2], weights[1::2]):
            layer.weight.copy_(fastgrad.tensor(w.T))
            layer.bias.copy_(fastgrad.tensor(b))
    model = fastgrad.nn.Sequential(linears[0], fastgrad.nn.ReLU(), linears[1])
    params = model.parameters()
    opt = fastgrad.optim.Adam(params, lr=1e-3) if optimizer == "adam" else fastgrad.optim.SGD(params, bench.LR)
    x, labels = fastgrad.tensor(x), fastgrad.tensor(labels)
    for _ in range(3):
        opt.zero_grad()
        loss = fastgrad.nn.functional.cross_entropy(model(x), labels)
        loss.backward()
        opt.step()
        assert float(step()) == pytest.approx(loss.item(), rel=1e-5)
    for got, layer in zip(step.params()[::2], linears):
        np.testing.assert_allclose(got, layer.weight.detach().numpy().T, rtol=1e-4, atol=1e-6)
