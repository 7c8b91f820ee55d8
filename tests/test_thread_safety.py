"""Autograd from several Python threads: grad mode is per thread, backward passes into one leaf
from several threads add up exactly, independent models trained side by side end bit for bit as
when trained one after another, and long kernels let other Python threads run (the GIL released).
"""

import functools
import sys
import threading
import time

import numpy as np
import pytest


def run_threads(target, n):
    """Runs target(i) in n threads started together; re-raises the first exception a thread hit."""
    errors = []
    start = threading.Barrier(n)

    def body(i):
        try:
            start.wait()
            target(i)
        except BaseException as e:  # reported below: an exception in a thread would pass silently
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_grad_mode_is_thread_local(fg, torch):
    seen = {}

    def worker(name, lib):
        seen[name] = lib.is_grad_enabled()  # a new thread starts with grad enabled, whatever its parent has
        with lib.no_grad():
            seen[name, "inside"] = lib.is_grad_enabled()
            seen[name, "record"] = (lib.ones(2, requires_grad=True) * 2).requires_grad

    for name, lib in (("fg", fg), ("torch", torch)):
        with lib.no_grad():
            t = threading.Thread(target=worker, args=(name, lib))
            t.start()
            t.join()
            assert not lib.is_grad_enabled()
        assert lib.is_grad_enabled()
    assert seen["fg"] is seen["torch"] is True
    assert seen["fg", "inside"] is seen["torch", "inside"] is False
    assert seen["fg", "record"] is seen["torch", "record"] is False


def test_no_grad_in_one_thread_does_not_leak_into_another(fg):
    """Two threads toggling grad mode in lockstep each see only their own setting."""
    rounds = 200
    step = threading.Barrier(2, timeout=60)  # a failing thread must not leave the other waiting
    seen = {0: [], 1: []}

    def worker(i):
        x = fg.ones(3, requires_grad=True)
        for r in range(rounds):
            enabled = (r + i) % 2 == 0
            with fg.set_grad_enabled(enabled):
                step.wait()  # both threads are now inside their own mode
                seen[i].append(((x * 2).requires_grad, fg.is_grad_enabled()))
                step.wait()

    run_threads(worker, 2)
    for i in (0, 1):
        assert seen[i] == [((r + i) % 2 == 0,) * 2 for r in range(rounds)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_concurrent_backward_into_a_shared_leaf_sums_exactly(fg, dtype):
    """Each of 8 threads backpropagates 25 graphs into w; every gradient is a small integer, so
    the total is exact whatever the order: a lost or doubled update would show. On fastgrad w is
    long enough that the forward ops run without the GIL, beside other threads' backward passes."""
    threads, passes = 8, 25
    n = 200_000 if fg.__name__ == "fastgrad" else 64
    dtype = getattr(fg, dtype)
    w = fg.zeros(n, dtype=dtype, requires_grad=True)
    coefficients = [fg.tensor(np.arange(n) % 7 + i, dtype=dtype) for i in range(threads)]

    def worker(i):
        for _ in range(passes):
            ((w * coefficients[i]).sum() + (w * w).sum()).backward()  # d/dw: c_i + 2w = c_i

    run_threads(worker, threads)
    expected = passes * sum(np.arange(n) % 7 + i for i in range(threads))
    assert w.grad.dtype == dtype
    np.testing.assert_array_equal(w.grad.numpy(), expected)


def test_graphs_on_a_shared_leaf_made_and_dropped_in_several_threads():
    """fastgrad: `w * c` runs without the GIL (200k elements) and finds or makes w's AccumulateGrad
    there, while other threads drop the last graph holding it (the lock in gradient_edge keeps a
    dying node from being revived). Afterwards no node is left and w's gradient arrives once."""
    import gc

    import fastgrad
    from fastgrad._C import graph_stats

    gc.collect()
    base = graph_stats()["live_nodes"]
    w = fastgrad.zeros(200_000, requires_grad=True)
    c = fastgrad.ones(200_000)

    def worker(i):
        for _ in range(1000):
            y = w * c
            del y

    run_threads(worker, 4)
    gc.collect()
    assert graph_stats()["live_nodes"] == base
    (w * c).sum().backward()
    assert w.grad.sum().item() == 200_000


def test_concurrent_autograd_grad_leaves_grad_alone(fg):
    """autograd.grad from several threads: each gets its own gradient; .grad is never written."""
    w = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    results = {}

    def worker(i):
        results[i] = [fg.autograd.grad((w**2 * (i + 1)).sum(), w)[0].tolist() for _ in range(20)]

    run_threads(worker, 4)
    assert w.grad is None
    for i in range(4):
        assert results[i] == [[2.0 * (i + 1), 4.0 * (i + 1), 6.0 * (i + 1)]] * 20


def train(fg, seed, steps, batch):
    """A small MLP trained with Adam on its own data; returns its parameters' bytes and the losses."""
    g = np.random.default_rng(seed)
    nn = fg.nn
    model = nn.Sequential(nn.Linear(12, 64), nn.Tanh(), nn.Linear(64, 3))
    with fg.no_grad():
        for p in model.parameters():
            p.copy_(fg.tensor(g.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
    optimizer = fg.optim.Adam(model.parameters(), lr=1e-2)
    x = fg.tensor(g.standard_normal((batch, 12)).astype(np.float32))
    y = fg.tensor(g.integers(0, 3, batch))
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return [p.detach().numpy().tobytes() for p in model.parameters()], losses


def test_four_threads_train_four_models_as_sequentially(fg):
    # fastgrad: a batch of 256, so that the first product runs without the GIL, alongside the
    # other threads; the pure-Python reference is slow, hence a smaller run.
    steps, batch = (60, 256) if fg.__name__ == "fastgrad" else (10, 16)
    sequential = [train(fg, seed, steps, batch) for seed in range(4)]
    threaded = {}
    run_threads(lambda i: threaded.__setitem__(i, train(fg, i, steps, batch)), 4)
    for seed in range(4):
        assert threaded[seed] == sequential[seed]  # bit for bit: parameters and every loss
    assert len({losses[-1] for _, losses in sequential}) == 4  # four different models


@functools.cache
def _retained_loss(big):
    """(w * big).exp().sum() for a row w that requires grad, its graph kept: a backward of it runs
    ExpBackward0 and MulBackward0 on gradients of big's 10M elements (long nodes, run without the GIL)."""
    import fastgrad

    w = fastgrad.ones(1, big.shape[1], requires_grad=True)
    return (w * big).exp().sum()


# Each call lasts milliseconds at least (exp over 10M elements: about 5 ms) or hundreds (softmax).
LONG_KERNELS = {
    "matmul": lambda a, big: a @ a,
    # (over 20M elements: a float32 exp of big alone, ~3 ms, ends before the window counted below)
    "exp": lambda a, big: big.expand(2, -1, -1).exp(),
    "softmax": lambda a, big: big.softmax(-1),
    "log_softmax": lambda a, big: big.log_softmax(0),
    # one of each other kind of kernel that runs without the GIL by the same rule (tensor_bind.cpp)
    "amax": lambda a, big: big.amax(1),
    "clamp": lambda a, big: big.clamp(-1.0, 1.0),
    "prod": lambda a, big: big.prod(1),
    # (three copies of ~750 selected 5000-wide rows: one, ~3 ms, can end before the counted window)
    "boolean-mask gather": lambda a, big: big[:1500].expand(3, -1, -1)[:, a[:, 0] > 0],
    "backward": lambda a, big: _retained_loss(big).backward(retain_graph=True),
}


@pytest.fixture(scope="module")
def long_operands():
    """A 1500 x 1500 matrix and a 2000 x 5000 tensor (float32), for fastgrad's long kernels; and the
    graph the backward row runs, made here so that its forward is not timed."""
    fastgrad = pytest.importorskip("fastgrad")
    fastgrad.manual_seed(0)
    a, big = fastgrad.randn(1500, 1500), fastgrad.randn(2000, 5000)
    _retained_loss(big)
    yield a, big
    _retained_loss.cache_clear()


@pytest.mark.serial  # needs the other core to itself
@pytest.mark.parametrize("name", sorted(LONG_KERNELS))
def test_a_python_thread_runs_while_a_long_kernel_runs(name, long_operands):
    """fastgrad only (the reference is Python): a pure-Python thread keeps counting while the main
    thread is inside a long kernel. Were the GIL held, the counter could run only in the first
    switch interval of a call (the main thread gives the GIL away at a bytecode boundary before
    the kernel starts) or at its end (after the kernel, the result's conversion), so only counts
    in the first half of a call, after that interval, are counted."""
    import fastgrad

    a, big = long_operands
    kernel = LONG_KERNELS[name]
    stop, started, beats, calls = threading.Event(), threading.Event(), [], []

    def count():
        started.set()
        while not stop.is_set():
            beats.append(time.perf_counter())

    saved, switch = fastgrad.get_num_threads(), sys.getswitchinterval()
    fastgrad.set_num_threads(1)  # leave the other core to the counting thread
    sys.setswitchinterval(0.001)
    counter = threading.Thread(target=count)
    try:
        counter.start()
        started.wait()
        while len(calls) < 2 or calls[-1][1] - calls[0][0] < 0.1:
            t0 = time.perf_counter()
            kernel(a, big)
            calls.append((t0, time.perf_counter()))
    finally:
        stop.set()
        counter.join()
        sys.setswitchinterval(switch)
        fastgrad.set_num_threads(saved)
    # after two switch intervals: the counter may hold the GIL for one before the kernel starts
    inside = [sum(t0 + 0.002 < t < (t0 + t1) / 2 for t in beats) for t0, t1 in calls]
    assert sum(inside) > 100, (inside, [t1 - t0 for t0, t1 in calls])
