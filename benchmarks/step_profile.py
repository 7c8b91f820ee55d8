"""Where a model's training step spends its time: a Linux perf profile of fastgrad running one of the
model rows of `python -m fastgrad.bench` (groups cnn and seq), its samples split into the SIMD kernels,
the rest of the C++ module (the ops' own loops, the autograd graph, the bindings), the Python
interpreter, numpy, the C/C++ runtime libraries and the OS kernel.

    python benchmarks/step_profile.py [--seconds 5] [--threads 1] [ROW-NAME-PART ...]

With no names, every model row. The release module is stripped: the C++ module's time is then one
row. For the split between the kernels and the rest, build the same code with its symbols kept
(RelWithDebInfo at the release flags; pybind11 strips only Release builds) and copy it into the package:

    cmake -S . -B build/profile -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \\
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O3 -DNDEBUG" -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=ON \\
      -Dpybind11_DIR="$(python -c 'import pybind11; print(pybind11.get_cmake_dir())')"
    cmake --build build/profile && cp build/profile/_C*.so python/fastgrad/
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

WARM_UP_SECONDS = 1.0

KERNELS = "SIMD kernels (fg::simd)"
MODULE_OTHER = "C++ module, other (ops' own loops, graph, bindings)"
MODULE_STRIPPED = "C++ module (stripped: kernels not told apart)"
BUCKETS = [
    KERNELS,
    MODULE_OTHER,
    MODULE_STRIPPED,
    "Python interpreter",
    "numpy",
    "libc, libm, libstdc++",
    "OS kernel",
    "other",
]


def model_rows():
    from fastgrad import bench

    rows = bench.model_rows(quick=False) + bench.seq_rows(quick=False)
    return {name: factory for name, factory, *_ in rows if " step" in name or "sampling" in name}


def run_step(name, seconds, threads):
    """The child: the row's fastgrad step, repeated for the warm-up and then `seconds`; prints the
    median step time."""
    import numpy as np

    import fastgrad

    fastgrad.set_num_threads(threads)
    step = model_rows()[name](fastgrad, np.random.default_rng(0))
    times = []
    end_of_warm_up = time.perf_counter() + WARM_UP_SECONDS
    while time.perf_counter() < end_of_warm_up:
        step()
    # perf samples only from here to the end of the steps (not the imports, which compile Python)
    control, ack = os.environ["STEP_PROFILE_FIFOS"].split(",")
    with open(control, "w") as commands, open(ack) as acks:
        commands.write("enable\n")
        commands.flush()
        acks.readline()
        end = time.perf_counter() + seconds
        while (start := time.perf_counter()) < end:
            step()
            times.append(time.perf_counter() - start)
        commands.write("disable\n")
        commands.flush()
        acks.readline()
    times.sort()
    print(f"{times[len(times) // 2] * 1e3:.3f} ms median over {len(times)} steps")


def bucket(dso, symbol):
    if dso.startswith("_C.") and dso.endswith(".so"):
        if symbol.startswith("0x"):
            return MODULE_STRIPPED
        return KERNELS if "fg::simd::" in symbol else MODULE_OTHER
    if dso.startswith(("libpython", "python")):
        return "Python interpreter"
    if "numpy" in dso or dso.startswith(("_multiarray", "libscipy_openblas", "libopenblas")):
        return "numpy"
    if dso.startswith(("libc.", "libc-", "libm.", "libm-", "libstdc++", "ld-linux", "libgcc")):
        return "libc, libm, libstdc++"
    if dso == "[kernel.kallsyms]":
        return "OS kernel"
    return "other"


# perf report's lines: "    12.34%  _C.cpython-311-x86_64-linux-gnu.so  [.] fg::simd::avx512::kernel(...)"
REPORT_LINE = re.compile(r"^\s*([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*)$")


def profile(name, seconds, threads):
    with tempfile.TemporaryDirectory() as tmp:
        data, control, ack = (os.path.join(tmp, name) for name in ("perf.data", "control", "ack"))
        os.mkfifo(control)
        os.mkfifo(ack)
        child = subprocess.run(
            ["perf", "record", "-q", "-F", "1999", "-D", "-1", "--control", f"fifo:{control},{ack}", "-o", data, "--"]
            + [sys.executable, os.path.abspath(__file__), "--run", name, "--seconds", str(seconds)]
            + ["--threads", str(threads)],
            capture_output=True,
            text=True,
            env={**os.environ, "STEP_PROFILE_FIFOS": f"{control},{ack}"},
        )
        if child.returncode != 0:
            sys.exit(f"perf record failed: {child.stderr.strip()}")
        report = subprocess.run(
            ["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "dso,sym", "--percent-limit", "0"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    shares = collections.Counter()
    for line in report.splitlines():
        match = REPORT_LINE.match(line)
        if match:
            percent, dso, symbol = match.groups()
            shares[bucket(dso, symbol)] += float(percent)
    return child.stdout.strip(), shares


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="parts of row names (default: every model row)")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--run", help=argparse.SUPPRESS)  # the child: runs the row's step
    args = parser.parse_args()
    if args.run:
        return run_step(args.run, args.seconds, args.threads)
    if shutil.which("perf") is None:
        sys.exit("needs Linux perf (the perf tool of linux-tools)")
    rows = [name for name in model_rows() if not args.names or any(part in name for part in args.names)]
    for name in rows:
        step_time, shares = profile(name, args.seconds, args.threads)
        print(f"\n{name}, {args.threads} thread(s): {step_time}")
        print("| where | share of samples |\n|---|---:|")
        for where in BUCKETS:
            if shares[where]:
                print(f"| {where} | {shares[where]:.1f}% |")
        outside = sum(shares.values()) - shares[KERNELS]
        if shares[KERNELS]:
            print(f"| **outside the SIMD kernels** | **{outside:.1f}%** |")


if __name__ == "__main__":
    main()
