"""fastgrad-specific: backward nodes live in an arena and are given back (fastgrad._C.graph_stats()).

Node counts are compared with a baseline taken at the start of each in-process test (other tests'
tracebacks may keep graphs alive); the long-running checks run in a fresh interpreter, where the
counts start at zero and a crash (e.g. a stack overflow) fails the test instead of the suite.
"""

import gc
import json
import os
import textwrap

import pytest

from conftest import BACKENDS
from semantics_helpers import run_python

if "fastgrad" not in BACKENDS:
    pytest.skip("graph_stats() is fastgrad's own introspection", allow_module_level=True)
fastgrad = pytest.importorskip("fastgrad")
graph_stats = pytest.importorskip("fastgrad._C").graph_stats


UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")


def live_nodes():
    gc.collect()
    return graph_stats()["live_nodes"]


def run_fastgrad(code):
    """Run `code` (which prints one JSON line) in a fresh interpreter; return the decoded JSON."""
    result = run_python(textwrap.dedent(code))
    assert result.returncode == 0, f"exit status {result.returncode}\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def leaves():
    a = fastgrad.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    b = fastgrad.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    return a, b


def test_graph_stats_reports_live_nodes_and_arena_bytes():
    stats = graph_stats()
    assert isinstance(stats, dict)
    assert {"live_nodes", "arena_bytes"} <= set(stats)
    assert all(isinstance(stats[key], int) and stats[key] >= 0 for key in ("live_nodes", "arena_bytes"))


def test_graph_dropped_without_backward_frees_its_nodes():
    base = live_nodes()
    a, b = leaves()
    z = a * b
    y = (z + a).sum()
    assert live_nodes() > base
    with_y = live_nodes()
    del y
    assert base < live_nodes() < with_y  # z still holds its own node
    del z
    del a, b
    assert live_nodes() == base


def test_graph_freed_after_backward_once_unreferenced():
    base = live_nodes()
    a, b = leaves()
    (a * b + a).sum().backward()
    assert a.grad.tolist() == [2.0, 3.0, 4.0, 5.0]
    del a, b
    assert live_nodes() == base


def test_retained_graph_freed_when_output_deleted():
    base = live_nodes()
    a, b = leaves()
    y = (a * b + a).sum()
    y.backward(retain_graph=True)
    assert live_nodes() > base
    y.backward()
    assert b.grad.tolist() == [2.0, 4.0, 6.0, 8.0]
    del y
    del a, b
    assert live_nodes() == base


def test_many_iterations_leave_no_nodes_and_bounded_arena():
    out = run_fastgrad("""
        import gc, json
        import fastgrad
        from fastgrad._C import graph_stats

        a = fastgrad.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        b = fastgrad.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        start = graph_stats()
        for _ in range(1_000):
            (a * b + a).sum().backward()
        gc.collect()
        warm = graph_stats()
        for _ in range(99_000):
            (a * b + a).sum().backward()
        gc.collect()
        end = graph_stats()
        grads = [a.grad.tolist(), b.grad.tolist()]
        del a, b
        gc.collect()
        print(json.dumps(dict(start=start, warm=warm, end=end, final=graph_stats(), grads=grads)))
    """)
    assert out["start"]["live_nodes"] == 0
    assert out["grads"] == [[200_000.0, 300_000.0, 400_000.0, 500_000.0], [100_000.0, 200_000.0, 300_000.0, 400_000.0]]
    assert out["end"]["live_nodes"] == out["warm"]["live_nodes"]
    assert out["end"]["arena_bytes"] <= out["warm"]["arena_bytes"]
    assert out["final"]["live_nodes"] == 0


@pytest.mark.slow
def test_million_op_chain_backward_and_release():
    """Also: the arena gives the chain's slabs back. With no node alive every slab is empty, and the
    arena keeps at most 64 empty 64 KiB slabs (4 MiB) for reuse; the chain itself needs ~450 MB.
    Under AddressSanitizer 200,000 ops (8 s -> 2 s): a recursive release would still overflow the stack."""
    length = 200_000 if UNDER_ASAN else 1_000_000
    out = run_fastgrad(f"""
        import gc, json
        import fastgrad
        from fastgrad._C import graph_stats

        x = fastgrad.tensor(1.0, requires_grad=True)
        y = x
        for _ in range({length}):
            y = y + 1.0
        built = graph_stats()
        y.backward()
        result = dict(built=built, value=y.item(), grad=x.grad.item())
        del y, x
        gc.collect()
        result["after_backward"] = graph_stats()

        z = fastgrad.tensor(1.0, requires_grad=True)
        y = z
        for _ in range({length}):
            y = y * 1.0
        del y, z  # dropped without backward: must not recurse either
        gc.collect()
        result["after_drop"] = graph_stats()
        print(json.dumps(result))
    """)
    assert out["built"]["live_nodes"] >= length
    # Under AddressSanitizer every node comes from the heap (arena.cpp's kHeapOnly), so it sees each one.
    assert out["built"]["arena_bytes"] == 0 if UNDER_ASAN else out["built"]["arena_bytes"] > 100 * 2**20
    assert out["value"] == length + 1.0
    assert out["grad"] == 1.0
    for after in (out["after_backward"], out["after_drop"]):  # fastgrad only: the reference has no arena
        assert after["live_nodes"] == 0
        assert after["arena_bytes"] <= 4 * 2**20


def test_training_loop_with_modules_and_optimizer_does_not_grow():
    """nn.Sequential + CrossEntropyLoss + Adam: after each step no graph node is left, and neither
    the arena nor the process memory grows after warm-up."""
    out = run_fastgrad("""
        import gc, json, resource
        import numpy as np
        import fastgrad
        from fastgrad._C import graph_stats

        fastgrad.manual_seed(0)
        model = fastgrad.nn.Sequential(fastgrad.nn.Linear(8, 32), fastgrad.nn.ReLU(), fastgrad.nn.Linear(32, 4))
        optimizer = fastgrad.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = fastgrad.nn.CrossEntropyLoss()
        rng = np.random.default_rng(0)
        x = fastgrad.tensor(rng.standard_normal((64, 8)).astype(np.float32))
        y = fastgrad.tensor(rng.integers(0, 4, 64))

        def steps(n):
            left = 0
            for _ in range(n):
                optimizer.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()
                del loss
                left = max(left, graph_stats()["live_nodes"])
            return left

        steps(500)
        gc.collect()
        warm, rss_warm = graph_stats(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        left = steps(5_000)
        gc.collect()
        end, rss_end = graph_stats(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps(dict(warm=warm, end=end, left=left, rss_growth_kb=rss_end - rss_warm)))
    """)
    assert out["left"] == 0 and out["end"]["live_nodes"] == 0
    assert out["end"]["arena_bytes"] <= out["warm"]["arena_bytes"]
    if not UNDER_ASAN:  # ASan's quarantine holds freed memory (up to 256 MB): there RSS says nothing
        assert out["rss_growth_kb"] < 2048


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True:UserWarning")
def test_create_graph_graphs_are_freed():
    """A recorded backward pass refers to the forward graph (saved outputs come back as outputs of
    their node): dropping the gradients frees both; a .grad with history holds its graph until reset."""
    base = live_nodes()
    a, b = leaves()
    (g,) = fastgrad.autograd.grad((a.exp() * b).sum(), a, create_graph=True)
    (h,) = fastgrad.autograd.grad(g.sum(), a)
    assert live_nodes() > base
    del g, h
    assert live_nodes() == base
    (a**3 * b).sum().backward(create_graph=True)
    assert a.grad.grad_fn is not None and live_nodes() > base
    a.grad = b.grad = None  # breaks the leaf -> .grad -> graph -> leaf cycle, as PyTorch advises
    assert live_nodes() == base
