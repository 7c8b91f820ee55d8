"""float32 square matrix products, single thread: GFLOP/s of fastgrad vs numpy (its BLAS) vs PyTorch,
measured in one run with fastgrad.bench's method (warm-up, median of samples each long enough to time).
Goals: at least 90% of numpy for n >= 256, faster than numpy for n <= 64.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 python benchmarks/matmul.py [--samples 7]

OPENBLAS_NUM_THREADS must be set before numpy is imported, hence on the command line.
"""

import argparse
import os
import sys

import numpy as np

import fastgrad
from fastgrad.bench import Timer, machine_line

SIZES = (16, 32, 64, 128, 256, 512, 1024)


def operands(lib, n):
    rng = np.random.default_rng(n)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    return (a, b) if lib is np else (lib.tensor(a), lib.tensor(b))


def goal(n, ratio):
    if n >= 256:
        return "met" if ratio >= 0.9 else "not met"
    if n <= 64:
        return "met" if ratio > 1.0 else "not met"
    return "-"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--min-seconds", type=float, default=0.05)
    args = parser.parse_args()
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        print("warning: OPENBLAS_NUM_THREADS is not 1: numpy may use several threads", file=sys.stderr)
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        torch = None
    libs = {"fastgrad": fastgrad, "numpy": np, **({"torch": torch} if torch else {})}
    timer = Timer(args.min_seconds, args.samples)
    print(machine_line(torch))
    print()
    print("| n | fastgrad GFLOP/s | numpy GFLOP/s | torch GFLOP/s | vs numpy | vs torch | goal vs numpy |")
    print("|---|---|---|---|---|---|---|")
    for n in SIZES:
        flops = 2 * n**3
        rate = {}
        for name, lib in libs.items():
            a, b = operands(lib, n)
            rate[name] = flops / timer(lambda: a @ b) / 1e9
        vs_numpy = rate["fastgrad"] / rate["numpy"]
        vs_torch = f"{rate['fastgrad'] / rate['torch']:.2f}x" if torch else "-"
        torch_rate = f"{rate['torch']:.1f}" if torch else "-"
        print(
            f"| {n} | {rate['fastgrad']:.1f} | {rate['numpy']:.1f} | {torch_rate} | {vs_numpy:.2f}x | {vs_torch} "
            f"| {goal(n, vs_numpy)} |"
        )


if __name__ == "__main__":
    main()
