"""Memory soak: trains a small MLP (nn.Sequential + CrossEntropyLoss + Adam) for N steps and reports,
every 1,000 steps, the live graph nodes, the node arena's bytes and the process's resident memory.

    python benchmarks/soak.py [--steps 20000] [--every 1000] [--warmup 1000] [--json]

After each step no graph node may be left (the step's graph is freed by reference counting, not by
the cycle collector), and after warm-up the arena and RSS must stay flat: RSS may grow by less than
--max-rss-growth-mb (default 2 MB) from the end of warm-up to the last step. Exits 1 if either
fails. With --json, the last line of the output is the whole report as one JSON object (the CI
variant in tests/test_soak.py reads it).
"""

import argparse
import gc
import json
import os
import resource
import sys
import time

import numpy as np

import fastgrad
from fastgrad._C import graph_stats

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def rss_bytes():
    """Current resident set size (Linux /proc; elsewhere the peak, which can only overstate growth)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * PAGE_BYTES
    except OSError:
        scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def snapshot(step, loss):
    gc.collect()  # so that a figure never counts garbage the collector has yet to visit
    stats = graph_stats()
    return dict(
        step=step, loss=loss, live_nodes=stats["live_nodes"], arena_bytes=stats["arena_bytes"], rss_bytes=rss_bytes()
    )


def soak(steps, every, warmup, seed=0, report=print):
    """Trains for `steps` steps; returns the report (rows every `every` steps, the worst count of
    nodes left after a step once warmed up, and the growth of arena and RSS over the measured steps)."""
    fastgrad.manual_seed(seed)
    nn = fastgrad.nn
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 10))
    optimizer = fastgrad.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    rng = np.random.default_rng(seed)
    batches = [
        (fastgrad.tensor(rng.standard_normal((64, 32)).astype(np.float32)), fastgrad.tensor(rng.integers(0, 10, 64)))
        for _ in range(64)
    ]

    rows = [snapshot(0, None)]
    report(format_row(rows[0]))
    left_after_warmup = 0
    warm = rows[0]
    start = time.perf_counter()
    for step in range(1, steps + 1):
        x, y = batches[step % len(batches)]
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        value = loss.item()
        del loss
        if step > warmup:
            left_after_warmup = max(left_after_warmup, graph_stats()["live_nodes"])
        if step == warmup:
            warm = snapshot(step, value)
        if step % every == 0 or step == steps:
            rows.append(snapshot(step, value))
            report(format_row(rows[-1]))
    end = rows[-1]
    return dict(
        steps=steps,
        warmup=warmup,
        seconds=time.perf_counter() - start,
        rows=rows,
        warm=warm,
        left_after_warmup=left_after_warmup,
        arena_growth_bytes=end["arena_bytes"] - warm["arena_bytes"],
        rss_growth_bytes=end["rss_bytes"] - warm["rss_bytes"],
    )


def format_row(row):
    loss = "" if row["loss"] is None else f"{row['loss']:.4g}"
    return (
        f"{row['step']:>7} {loss:>8} {row['live_nodes']:>10} {row['arena_bytes']:>12} {row['rss_bytes'] / 2**20:>10.2f}"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--every", type=int, default=1_000)
    parser.add_argument("--warmup", type=int, default=1_000)
    parser.add_argument("--max-rss-growth-mb", type=float, default=2.0)
    parser.add_argument("--json", action="store_true", help="end with the report as one JSON line")
    args = parser.parse_args(argv)
    if not 0 <= args.warmup < args.steps:
        parser.error("--warmup must be at least 0 and less than --steps")

    print(f"{'step':>7} {'loss':>8} {'live_nodes':>10} {'arena_bytes':>12} {'rss_MiB':>10}")
    out = soak(args.steps, args.every, args.warmup)
    warm, end = out["warm"], out["rows"][-1]
    print(
        f"after warm-up (step {warm['step']}): live_nodes {warm['live_nodes']}, arena_bytes {warm['arena_bytes']}, "
        f"RSS {warm['rss_bytes'] / 2**20:.2f} MiB"
    )
    print(
        f"end (step {end['step']}): live_nodes {end['live_nodes']}, arena_bytes {end['arena_bytes']}, "
        f"RSS {end['rss_bytes'] / 2**20:.2f} MiB"
    )
    print(
        f"growth: arena {out['arena_growth_bytes']} B, RSS {out['rss_growth_bytes'] / 2**10:.0f} KiB; "
        f"most nodes left after a step past warm-up: {out['left_after_warmup']}; {out['seconds']:.1f} s"
    )
    ok = (
        out["left_after_warmup"] == 0
        and end["live_nodes"] == 0
        and out["arena_growth_bytes"] <= 0
        and out["rss_growth_bytes"] < args.max_rss_growth_mb * 2**20
    )
    if args.json:
        print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
