"""How this backend was built and what it runs on: torch.__config__'s show() and parallel_info(), and
fastgrad.show_config(), which prints show()'s text (as numpy.show_config does)."""

import platform

import numpy

from fastgrad._version import __version__

from . import _prims


def show():
    """A human-readable text block: versions, the compiler and flags, the SIMD ISA in use, threads."""
    config = _prims.config()
    isa = f"SIMD ISA: {config['isa']} (available: {', '.join(config['isas_available'])}"
    if config["compiler"] is None:
        build = ["Core: pure Python (fastgrad.reference), nothing compiled", f"{isa})"]
    else:
        build = [
            f"Compiler: {config['compiler']}",
            f"Build type: {config['build_type']}",
            f"CXX flags: {config['cxx_flags'] or '(none)'}",
            f"{isa}; FASTGRAD_ISA forces one)",
            cache_info(config),
        ]
    items = [
        f"Python {platform.python_version()} ({platform.python_implementation()}), numpy {numpy.__version__}",
        f"Platform: {platform.system()} {platform.machine()}",
        *build,
        parallel_info(),
    ]
    return "\n".join([f"fastgrad {__version__}", *(f"  - {item}" for item in items)])


def _size(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n >> 10} KiB"


def cache_info(config):
    """The data caches the compiled core detected and the GEMM blocks it derived from them."""
    caches = config["caches"]
    levels = [f"L1d {_size(caches['l1d'])}", f"L2 {_size(caches['l2'])}"]
    if caches["l3"]:
        levels.append(f"L3 {_size(caches['l3'])}")
    blocks = "; ".join(
        f"{dtype} {b['mr']}x{b['nr']} tiles, KC {b['kc']}, MC {b['mc']}, NC {b['nc']}"
        for dtype, b in config["gemm_blocks"].items()
    )
    return f"CPU caches: {', '.join(levels)} (from {caches['source']}); GEMM blocks: {blocks}"


def parallel_info():
    """The threads the long kernels (GEMM, large elementwise ops, sums) use."""
    return f"Threads: {_prims.config()['num_threads']} (set_num_threads changes it)"


def show_config():
    """Print show()'s text."""
    print(show())
