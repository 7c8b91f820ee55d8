"""Elementwise throughput: a + b, a * b and exp(a) on contiguous float32 vectors of 1e3, 1e6 and 1.6e7
elements, out of place, in numpy, fastgrad (its active SIMD ISA; FASTGRAD_ISA forces one) and PyTorch
(one thread, as fastgrad; when installed). Each cell is the median of --repeats samples, each sample
long enough to time; the ratio columns are peer time / fastgrad time (> 1: fastgrad is faster).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/elementwise.py [--repeats 7]
"""

import argparse

import numpy as np

import fastgrad
from fastgrad.bench import Timer, machine_line  # the fixed method: warm-up, median of samples

SIZES = [1_000, 1_000_000, 16_000_000]
OPS = {"add": lambda m, a, b: a + b, "mul": lambda m, a, b: a * b, "exp": lambda m, a, b: m.exp(a)}


def libraries():
    libs = {"numpy": (np, lambda x: x), "fastgrad": (fastgrad, fastgrad.from_numpy)}
    try:
        import torch

        torch.set_num_threads(1)
        libs["torch"] = (torch, torch.from_numpy)
    except ImportError:
        pass
    return libs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    libs = libraries()
    timer = Timer(min_seconds=0.05, samples=args.repeats)
    peers = [name for name in libs if name != "fastgrad"]
    print(machine_line(libs["torch"][0] if "torch" in libs else None))
    print()
    print(
        "| op | elements | "
        + " | ".join(f"{name} (us)" for name in libs)
        + " | "
        + " | ".join(f"{peer} / fastgrad" for peer in peers)
        + " |"
    )
    print("|---" * (2 + len(libs) + len(peers)) + "|")
    rng = np.random.default_rng(0)
    for n in SIZES:
        a_np = rng.standard_normal(n).astype(np.float32)
        b_np = rng.standard_normal(n).astype(np.float32)
        for op, f in OPS.items():
            times = {}
            for name, (m, wrap) in libs.items():
                a, b = wrap(a_np), wrap(b_np)
                times[name] = timer(lambda: f(m, a, b))
            cells = [f"{times[name] * 1e6:.1f}" for name in libs]
            ratios = [f"{times[peer] / times['fastgrad']:.2f}" for peer in peers]
            print(f"| {op} | {n:.0e} | " + " | ".join(cells + ratios) + " |")


if __name__ == "__main__":
    main()
