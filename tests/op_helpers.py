"""Helpers shared by the op, indexing and gradcheck tests.

Everything here works on any tensor module with PyTorch's API (`fg` or real `torch`): data is made
with numpy and handed to `module.tensor(array)`, so both libraries see identical numbers.
"""

import importlib.util
import os
import pathlib
import zlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
GRADCHECK_FILE = ROOT / "python" / "fastgrad" / "autograd" / "gradcheck.py"


# .ci/sanitize preloads the sanitizer runtime; .ci/run's normal run says FASTGRAD_KERNEL_RERUNS_SANITIZED=1.
SANITIZED = "san.so" in os.environ.get("LD_PRELOAD", "")
RERUNS_SANITIZED = bool(os.environ.get("FASTGRAD_KERNEL_RERUNS_SANITIZED"))


def kernel_reruns_here(isa):
    """Whether this run reruns the kernel tests under a forced `isa`. .ci/run splits them: its
    sanitized run (any run under a sanitizer) takes the vector ISAs, whose tails and masked loads are
    where an access can run past a buffer; its normal run the scalar ISA, one element at a time (30 s
    of CPU under the sanitizers, 6 without). An unsanitized run without
    FASTGRAD_KERNEL_RERUNS_SANITIZED reruns them all."""
    if SANITIZED:
        return isa != "scalar"
    return not RERUNS_SANITIZED or isa == "scalar"


def gradcheck_for(fg, name="gradcheck"):
    """fastgrad's gradcheck (or gradgradcheck) for the module under test.

    When the suite runs against real PyTorch (FASTGRAD_TEST_BACKENDS=torch) the fastgrad package
    may not be importable, so the gradcheck source file is loaded on its own: it uses only methods
    of the tensors it is given (and, for gradgradcheck, their library's autograd.grad), so it checks
    torch tensors as well.
    """
    if fg.__name__.split(".")[0] == "fastgrad":  # fastgrad, or its pure-Python reference twin
        return getattr(importlib.import_module("fastgrad.autograd"), name)
    spec = importlib.util.spec_from_file_location("_fastgrad_gradcheck", GRADCHECK_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def dtype_name(dtype):
    """'torch.float32' / 'fastgrad.float32' -> 'float32'."""
    return str(dtype).split(".")[-1]


def rng_for(*keys):
    """A numpy Generator seeded from the test's identity, so every run sees the same data."""
    return np.random.default_rng(zlib.crc32("/".join(map(str, keys)).encode()))


# ---------------------------------------------------------------------------------------------
# Input domains: values that keep every op away from its kinks, poles and ties, so central
# differences with eps=1e-6 are accurate.


def _from_intervals(rng, shape, intervals):
    """Uniform samples from a union of intervals (one picked at random per element)."""
    lo, hi = np.array(intervals, dtype=np.float64).T
    pick = rng.integers(0, len(intervals), size=shape)
    return rng.uniform(size=shape) * (hi - lo)[pick] + lo[pick]


def _with_zero(x):
    if x.size:
        x.reshape(-1)[x.size // 2] = 0.0
    return x


NONZERO = [(-2.0, -0.2), (0.2, 2.0)]
DOMAINS = {
    "real": lambda rng, shape: rng.standard_normal(shape),
    "pos": lambda rng, shape: rng.uniform(0.5, 2.0, size=shape),
    "unit": lambda rng, shape: rng.uniform(-0.8, 0.8, size=shape),
    "above_one": lambda rng, shape: rng.uniform(1.2, 2.5, size=shape),  # acosh
    # |x| >= 0.2: abs, relu, division, prod, where(x > 0)
    "nonzero": lambda rng, shape: _from_intervals(rng, shape, NONZERO),
    # away from 0 and from the clamp bounds used in the tables (-0.5, 0.5)
    "clamp": lambda rng, shape: _from_intervals(rng, shape, [(-2.0, -0.6), (-0.4, -0.1), (0.1, 0.4), (0.6, 2.0)]),
    # small integers stored as floats: ties for comparisons, argmax, equal
    "int": lambda rng, shape: rng.integers(-2, 3, size=shape).astype(np.float64),
    # nonzero with one exact zero: prod's gradient must not divide by the input
    "one_zero": lambda rng, shape: _with_zero(_from_intervals(rng, shape, NONZERO)),
}


def make_arrays(shapes, domains, dtype, *keys):
    """One numpy array per shape; `domains` is one name or one per input."""
    if isinstance(domains, str):
        domains = [domains] * len(shapes)
    rng = rng_for(*keys)
    return [np.asarray(DOMAINS[d](rng, tuple(s)), dtype=dtype) for s, d in zip(shapes, domains)]


# ---------------------------------------------------------------------------------------------
# Memory layouts. Each input of a case is created as a leaf of `source_shape(shape, layout)` and
# turned into a tensor of `shape` by `apply_layout`, so the op sees non-contiguous or expanded
# (stride 0) data and its gradient flows back through the view.

LAYOUTS = ("contiguous", "strided", "expanded")


def source_shape(shape, layout):
    shape = tuple(shape)
    if layout == "strided":
        if len(shape) >= 2:  # transpose, then take every other column
            return shape[:-2] + (2 * shape[-1], shape[-2])
        if len(shape) == 1:  # every other element
            return (2 * shape[0],)
    if layout == "expanded":
        for d, n in enumerate(shape):
            if n > 1:
                return shape[:d] + (1,) + shape[d + 1 :]
    return shape


def apply_layout(x, shape, layout):
    shape = tuple(shape)
    if source_shape(shape, layout) == shape:
        return x
    if layout == "strided":
        return x.transpose(-1, -2)[..., ::2] if len(shape) >= 2 else x[::2]
    return x.expand(*shape)


def layout_changes(shapes, layout):
    """True if the layout makes at least one input differ from a plain contiguous tensor."""
    return layout == "contiguous" or any(tuple(source_shape(s, layout)) != tuple(s) for s in shapes)


def to_numpy(t):
    return np.asarray(t.detach().numpy())


def assert_same_bits_at_thread_counts(run, counts=(1, 2, 3)):
    """run() (a list of numpy arrays, computed by fastgrad) gives the same bits with each of `counts`
    threads in fastgrad's pool: the kernels' fixed-order contract."""
    import fastgrad

    results, before = [], fastgrad.get_num_threads()
    try:
        for threads in counts:
            fastgrad.set_num_threads(threads)
            results.append(run())
    finally:
        fastgrad.set_num_threads(before)
    for other in results[1:]:
        for got, expected in zip(other, results[0], strict=True):
            np.testing.assert_array_equal(got, expected)


def assert_close(actual, expected, rtol=1e-4, atol=1e-5, what="values"):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


def assert_conv_case_matches(fg, torch, case, dtype, fn, x_shape, w_shape, bias_size):
    """fn(F, x, w, b) (b None when bias_size is 0) on uniform inputs in [-2, 2]: the output, its
    grad_fn's name and the input, weight and bias gradients of a random upstream gradient equal
    PyTorch's (a convolution test table's row)."""
    rng = rng_for(case, dtype)
    arrays = [rng.uniform(-2, 2, size=shape).astype(dtype) for shape in (x_shape, w_shape, (bias_size,))]

    def run(lib):
        x, w = (lib.tensor(a, requires_grad=True) for a in arrays[:2])
        b = lib.tensor(arrays[2], requires_grad=True) if bias_size else None
        out = fn(lib.nn.functional, x, w, b)
        upstream = rng_for(case, "upstream").uniform(-1, 1, size=tuple(out.shape)).astype(dtype)
        (out * lib.tensor(upstream)).sum().backward()
        grads = [x.grad, w.grad] + ([b.grad] if bias_size else [])
        return [to_numpy(t) for t in [out, *grads]], out.grad_fn.name()

    (ours, our_node), (theirs, their_node) = run(fg), run(torch)
    assert our_node.rsplit("::", 1)[-1] == their_node
    tolerance = dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    for got, expected in zip(ours, theirs, strict=True):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_allclose(got, expected, **tolerance)
