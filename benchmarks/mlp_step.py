"""One training step of a 64-128-10 MLP (batch 32, softmax cross-entropy, SGD) written with raw
tensors, timed on each backend in the same process: fastgrad, fastgrad.reference and PyTorch
(when installed). Prints median times and the ratios between backends.

    python benchmarks/mlp_step.py [--repeats 7] [--backends fastgrad,fastgrad.reference,torch]
"""
import argparse
import importlib
import statistics
import time

import numpy as np

BATCH, IN, HIDDEN, OUT = 32, 64, 128, 10
LR = 0.1


def make_problem(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((BATCH, IN)).astype(np.float32),
        "y": rng.integers(0, OUT, size=BATCH).astype(np.int64),
        "w1": (rng.standard_normal((IN, HIDDEN)) / np.sqrt(IN)).astype(np.float32),
        "b1": np.zeros(HIDDEN, dtype=np.float32),
        "w2": (rng.standard_normal((HIDDEN, OUT)) / np.sqrt(HIDDEN)).astype(np.float32),
        "b2": np.zeros(OUT, dtype=np.float32),
    }


def make_step(lib, problem):
    """Returns a function running one SGD step on `lib` (any module with the PyTorch API)."""
    x, y = lib.tensor(problem["x"]), lib.tensor(problem["y"])
    params = [lib.tensor(problem[k], requires_grad=True) for k in ("w1", "b1", "w2", "b2")]
    rows = lib.arange(BATCH)

    def step():
        w1, b1, w2, b2 = params
        hidden = (x @ w1 + b1).relu()
        logits = hidden @ w2 + b2
        shifted = logits - logits.amax(dim=1, keepdim=True)
        log_probs = shifted - shifted.exp().sum(dim=1, keepdim=True).log()
        loss = -log_probs[rows, y].mean()
        loss.backward()
        with lib.no_grad():
            for p in params:
                p -= LR * p.grad
                p.grad = None
        return loss.item()

    return step


def time_step(step, repeats, min_seconds=0.2):
    """Median seconds per call over `repeats` runs, each long enough to time reliably."""
    step()  # warm-up
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            step()
        if time.perf_counter() - start >= min_seconds / 4 or calls >= 1 << 16:
            break
        calls *= 2
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            step()
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--backends", default="fastgrad,fastgrad.reference,torch")
    args = parser.parse_args()
    problem = make_problem()
    results, losses = {}, {}
    for name in args.backends.split(","):
        try:
            lib = importlib.import_module(name)
        except ImportError:
            print(f"{name}: not installed, skipped")
            continue
        if name == "torch":
            lib.set_num_threads(1)
        losses[name] = make_step(lib, problem)()
        results[name] = time_step(make_step(lib, problem), args.repeats)
    print(f"MLP {IN}-{HIDDEN}-{OUT}, batch {BATCH}, one SGD step (median of {args.repeats})")
    print("| backend | time per step | first-step loss |")
    print("|---|---|---|")
    for name, seconds in results.items():
        print(f"| {name} | {seconds * 1e6:,.1f} µs | {losses[name]:.6f} |")
    if "fastgrad" in results:
        for name, seconds in results.items():
            if name != "fastgrad":
                print(f"fastgrad is {seconds / results['fastgrad']:.2f}x as fast as {name}")


if __name__ == "__main__":
    main()
