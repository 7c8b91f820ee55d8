"""The thread pool: set/get_num_threads as PyTorch's, and results that do not depend on the thread count.

The kernels split only independent outputs across threads (blocks of C, chunks of an elementwise
loop, whole results of a sum), so 1 and 2 threads must agree bit for bit. Two threads split the
work even on a one-core machine, so these tests exercise the split everywhere.
"""

import functools
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from semantics_helpers import run_python

import fastgrad


@pytest.fixture
def threads():
    """Runs fn under 1 and 2 threads and returns both results; restores the thread count."""
    saved = fastgrad.get_num_threads()

    def under(fn):
        out = []
        for n in (1, 2):
            fastgrad.set_num_threads(n)
            out.append(fn())
        return out

    yield under
    fastgrad.set_num_threads(saved)


def same_bits(x, y):
    x, y = x.detach().numpy(), y.detach().numpy()
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def test_set_get_round_trip(fg):
    saved = fg.get_num_threads()
    assert saved >= 1 and fg.config()["num_threads"] == saved
    try:
        for n in (3, 1, 2):
            fg.set_num_threads(n)
            assert fg.get_num_threads() == n and fg.config()["num_threads"] == n
    finally:
        fg.set_num_threads(saved)
    assert fg.get_num_threads() == saved


@pytest.mark.parametrize("value", [0, -1, 1.5, 2.0, "2", None, True, 10**10, 10**30])
def test_set_num_threads_errors_as_torch(fg, torch, value):
    saved, torch_saved = fg.get_num_threads(), torch.get_num_threads()
    with pytest.raises(Exception) as expected:
        torch.set_num_threads(value)
    with pytest.raises(type(expected.value), match="^" + __import__("re").escape(str(expected.value)) + "$"):
        fg.set_num_threads(value)
    assert fg.get_num_threads() == saved and torch.get_num_threads() == torch_saved


@functools.cache
def threads_at_start(omp=None, mkl=None):
    """The thread count fastgrad starts with under these OMP_NUM_THREADS and MKL_NUM_THREADS (None: unset)."""
    child_env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    child_env.update({k: v for k, v in (("OMP_NUM_THREADS", omp), ("MKL_NUM_THREADS", mkl)) if v is not None})
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    # The extension alone (what fastgrad.get_num_threads calls): a tenth of the package's import time.
    code = (
        "import importlib.machinery as m, importlib.util as u\n"
        "spec = m.PathFinder.find_spec('fastgrad._C', u.find_spec('fastgrad').submodule_search_locations)\n"
        "core = u.module_from_spec(spec)\n"
        "spec.loader.exec_module(core)\n"
        "print(core.get_num_threads())"
    )
    out = subprocess.run([sys.executable, "-c", code], env=child_env, capture_output=True, text=True, check=True)
    return int(out.stdout)


# PyTorch 2.13 (OpenMP build) at import, measured: MKL_NUM_THREADS wins over OMP_NUM_THREADS; a
# count above the logical CPUs is cut to their number; 0, negative and non-numeric values are
# ignored; blanks around the number and OpenMP's comma list (one count per nesting level) are read.
@pytest.mark.parametrize(
    "omp,mkl,expected",
    [
        ("1", None, 1),
        (" 1 ", None, 1),
        ("1,2", None, 1),
        ("+1", None, 1),
        ("1000", None, "cpus"),
        ("0", None, "default"),
        ("-2", None, "default"),
        ("abc", None, "default"),
        ("1abc", None, "default"),
        ("1.5", None, "default"),
        ("", None, "default"),
        ("2", "1", 1),
        ("1", "1000", "cpus"),
        ("1", "0", 1),
        ("1", "abc", 1),
        ("0", "1", 1),
    ],
)
def test_thread_count_from_environment_as_torch(omp, mkl, expected):
    expected = {"cpus": os.cpu_count(), "default": threads_at_start()}.get(expected, expected)
    assert threads_at_start(omp, mkl) == expected


def test_interop_threads_as_torch():
    """Recorded only (fastgrad has no inter-op pool), with PyTorch 2.13's checks and messages: the
    default is the CPU count, a bad value changes nothing, and a second setting is refused. In a
    fresh interpreter: the setting is once per process, as PyTorch's."""
    code = """
import os
import fastgrad, fastgrad.reference
TWICE = "Error: cannot set number of interop threads after parallel work has started or set_num_interop_threads called"
for fg in (fastgrad, fastgrad.reference):
    assert fg.get_num_interop_threads() == (os.cpu_count() or 1)
    for value, error, message in [
        (0, RuntimeError, "set_num_interop_threads expects a positive integer"),
        (-1, RuntimeError, "set_num_interop_threads expects a positive integer"),
        (1.5, RuntimeError, "set_num_interop_threads expects an int, but got float"),
        ("2", RuntimeError, "set_num_interop_threads expects an int, but got str"),
        (True, RuntimeError, "set_num_interop_threads expects an int, but got bool"),
        (10**10, ValueError, "Overflow when unpacking long"),
    ]:
        try:
            fg.set_num_interop_threads(value)
        except error as e:
            assert str(e) == message, (value, str(e))
        else:
            raise AssertionError(value)
    fg.set_num_interop_threads(3)
    assert fg.get_num_interop_threads() == 3
    try:
        fg.set_num_interop_threads(1)
    except RuntimeError as e:
        assert str(e) == TWICE, str(e)
    else:
        raise AssertionError("set twice")
    assert fg.get_num_interop_threads() == 3
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr


MATMUL_SHAPES = [
    ((1000,), (1000,)),  # dot
    ((700, 900), (900,)),  # mv
    ((3, 5), (5, 7)),  # tiny: never split
    ((300, 500), (500, 700)),  # split by rows
    ((20, 600), (600, 2000)),  # wide: split by column tiles
    ((2000, 64), (64, 3)),  # tall and narrow
    ((8, 100, 120), (8, 120, 90)),  # bmm: whole products per thread
    ((1, 257, 300), (300, 301)),  # one product of a batch, odd sizes
    ((530, 520), (520, 515)),  # several KC slices
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_bitwise_independent_of_threads(threads, sa, sb, dtype):
    rng = np.random.default_rng(0)
    a = fastgrad.tensor(rng.standard_normal(sa).astype(dtype))
    b = fastgrad.tensor(rng.standard_normal(sb).astype(dtype))
    one, two = threads(lambda: fastgrad.matmul(a, b))
    assert same_bits(one, two)
    np.testing.assert_allclose(
        two.numpy(),
        np.matmul(a.numpy().astype(np.float64), b.numpy().astype(np.float64)),
        rtol=1e-3 if dtype == "float32" else 1e-10,
        atol=1e-3 if dtype == "float32" else 1e-10,
    )


def test_column_split_never_leaves_one_column_to_a_thread():
    """C of 129 columns split by 64-column tiles among 3 threads: a block of the last column alone
    would be a matrix-vector product, whose elements are summed differently (gemm_impl.h)."""
    rng = np.random.default_rng(8)
    a = fastgrad.tensor(rng.standard_normal((8, 1100)).astype("float32"))
    b = fastgrad.tensor(rng.standard_normal((1100, 129)).astype("float32"))
    saved = fastgrad.get_num_threads()
    try:
        results = []
        for n in (1, 3):
            fastgrad.set_num_threads(n)
            results.append(a @ b)
    finally:
        fastgrad.set_num_threads(saved)
    assert same_bits(*results)


def test_matmul_transposed_views_and_backward(threads):
    rng = np.random.default_rng(1)
    a = fastgrad.tensor(rng.standard_normal((400, 300)).astype("float32"), requires_grad=True)
    b = fastgrad.tensor(rng.standard_normal((400, 500)).astype("float32"), requires_grad=True)

    def run():
        a.grad = b.grad = None
        out = a.t() @ b
        out.sum().backward()
        return out, a.grad, b.grad

    one, two = threads(run)
    assert all(same_bits(x, y) for x, y in zip(one, two))


def activation_gradient(activation):
    """The input's gradient of activation(x) given y as the output's gradient."""

    def gradient(x, y):
        x = x.detach().requires_grad_()
        activation(x).backward(y)
        return x.grad

    return gradient


ELEMENTWISE = {
    "add": lambda x, y: x + y,
    "mul_scalar": lambda x, y: x * 1.7,
    "rsub_scalar": lambda x, y: 2.0 - x,
    "div_broadcast_row": lambda x, y: x / (y[:1] + 3.0),
    "maximum": lambda x, y: fastgrad.maximum(x, y),
    "exp": lambda x, y: fastgrad.exp(x),
    "log": lambda x, y: fastgrad.log(y.abs()),
    "tanh": lambda x, y: fastgrad.tanh(x),
    "sigmoid": lambda x, y: fastgrad.sigmoid(x),
    "relu": lambda x, y: fastgrad.relu(x),
    "add_": lambda x, y: x.clone().add_(y),
    "leaky_relu": lambda x, y: fastgrad.nn.functional.leaky_relu(x, 0.2),
    "leaky_relu_gradient": activation_gradient(lambda x: fastgrad.nn.functional.leaky_relu(x, 0.2)),
    "hardtanh": lambda x, y: fastgrad.nn.functional.hardtanh(x, -0.5, 0.5),
    "hardtanh_gradient": activation_gradient(lambda x: fastgrad.nn.functional.hardtanh(x, -0.5, 0.5)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_bitwise_independent_of_threads(threads, name, dtype):
    rng = np.random.default_rng(2)
    x = fastgrad.tensor(rng.standard_normal((513, 1023)).astype(dtype))  # odd length: chunks end mid-vector
    y = fastgrad.tensor(rng.standard_normal((513, 1023)).astype(dtype))
    one, two = threads(lambda: ELEMENTWISE[name](x, y))
    assert same_bits(one, two)


# Operands that are not one contiguous run: runs of a row (or a repeated value) per row, and
# strided views the scalar loop walks; each result must equal numpy's (these ops round once).
BROADCAST = {
    "add_column": (lambda x, y: x + y[:, :1], lambda x, y: x + y[:, :1]),
    "mul_row": (lambda x, y: x * y[:1], lambda x, y: x * y[:1]),
    "sub_vector": (lambda x, y: x - y[0], lambda x, y: x - y[0]),
    "div_0d_tensor": (lambda x, y: x / y[3, 5], lambda x, y: x / y[3, 5]),
    "maximum_column_first": (lambda x, y: fastgrad.maximum(y[:, :1], x), lambda x, y: np.maximum(y[:, :1], x)),
    "add_transposed": (lambda x, y: x.t() + y.t(), lambda x, y: x.T + y.T),
    "mul_strided": (lambda x, y: x[:, 1::2] * y[:, 2::2], lambda x, y: x[:, 1::2] * y[:, 2::2]),
}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("name", sorted(BROADCAST))
def test_broadcast_and_strided_elementwise_split_bitwise(threads, name, dtype):
    rng = np.random.default_rng(6)
    x_np = (rng.standard_normal((513, 1023)) * 100).astype(dtype)  # odd row length: chunks end mid-row
    y_np = (rng.standard_normal((513, 1023)) * 100).astype(dtype)
    if dtype == "int64":
        y_np[y_np == 0] = 7
    op, reference = BROADCAST[name]
    x, y = fastgrad.tensor(x_np), fastgrad.tensor(y_np)
    one, two = threads(lambda: op(x, y))
    assert same_bits(one, two)
    expected = reference(x_np, y_np)
    if dtype == "int64" and name == "div_0d_tensor":
        expected = x_np / y_np[3, 5]  # true division: float32, as PyTorch's default
        np.testing.assert_allclose(two.numpy(), expected, rtol=1e-6)
    else:
        np.testing.assert_array_equal(two.numpy(), expected)


def test_elementwise_values_after_split(threads):
    x = np.arange(300001, dtype=np.float64)
    one, two = threads(lambda: fastgrad.tensor(x) * 2.0 + fastgrad.tensor(x))
    np.testing.assert_array_equal(two.numpy(), 3 * x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "shape,dim",
    [
        ((300, 1000), -1),
        ((1000, 300), 0),
        ((1 << 20,), None),
        ((40, 50, 600), (1, 2)),
        ((600, 50, 40), (0, 1)),
        ((20000, 20), 1),
    ],
)
def test_sum_bitwise_independent_of_threads(threads, shape, dim, dtype):
    x = fastgrad.tensor(np.random.default_rng(3).standard_normal(shape).astype(dtype))
    one, two = threads(lambda: x.sum() if dim is None else x.sum(dim))
    assert same_bits(one, two)
    expected = x.numpy().astype(np.float64).sum(axis=dim)
    np.testing.assert_allclose(two.numpy(), expected, rtol=1e-5, atol=1e-4)


# Reductions over views and middle dims: the vector sums over any strides (each result's blocks,
# or its rows of results) and the plain loop (max, argmax, prod, integer sums) split by results.
def transposed(shape):
    return lambda x: x.reshape(shape[::-1]).t() if isinstance(x, fastgrad.Tensor) else x.reshape(shape[::-1]).T


REDUCTIONS = [
    ("sum", (1000, 300), 0, None),
    ("sum", (300, 1000), 0, transposed((300, 1000))),  # contiguous blocks of a transposed view
    ("sum", (300, 1000), 1, transposed((300, 1000))),  # rows of results of a transposed view
    ("sum", (40, 50, 600), 1, None),  # a middle dim
    ("sum", (8, 16, 33, 31), (0, 2, 3), None),  # per channel: several blocks each
    ("sum", (1000, 3, 60), 1, None),  # short rows of results
    ("mean", (50, 40, 600), (0, 2), None),
    ("amax", (1000, 300), 0, None),
    ("amax", (300, 1000), 1, transposed((300, 1000))),
    ("argmax", (1000, 300), 0, None),
    ("prod", (40, 2000), 0, None),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("op,shape,dim,view", REDUCTIONS)
def test_strided_reductions_split_bitwise(threads, op, shape, dim, view, dtype):
    if dtype == "int64" and op == "mean":
        pytest.skip("mean is for floating types")
    rng = np.random.default_rng(7)
    x_np = rng.standard_normal(shape)
    x_np = (x_np * 100).astype(dtype) if dtype == "int64" else (1 + x_np / 100 if op == "prod" else x_np).astype(dtype)
    x = fastgrad.tensor(x_np)
    if view is not None:
        x, x_np = view(x), view(x_np)
    assert not x.is_contiguous() or view is None

    def run():
        if op == "argmax":
            return fastgrad.argmax(x, dim)
        return getattr(x, op)(dim)

    one, two = threads(run)
    assert same_bits(one, two)
    expected = getattr(np, op)(x_np.astype(np.float64) if dtype != "int64" else x_np, axis=dim)
    if op in ("amax", "argmax") or dtype == "int64":
        np.testing.assert_array_equal(two.numpy(), expected)
    else:
        np.testing.assert_allclose(two.numpy(), expected, rtol=1e-5, atol=1e-4)


def test_python_threads_run_products_concurrently(threads):
    """Several Python threads (the GIL released in the long kernels) share the pool correctly."""
    rng = np.random.default_rng(4)
    pairs = [
        (
            fastgrad.tensor(rng.standard_normal((200 + 10 * i, 300)).astype("float32")),
            fastgrad.tensor(rng.standard_normal((300, 250)).astype("float32")),
        )
        for i in range(6)
    ]
    big = fastgrad.tensor(rng.standard_normal(400000).astype("float32"))
    expected = threads(lambda: [a @ b for a, b in pairs] + [fastgrad.exp(big)])[0]
    results, errors = {}, []

    def work(i):
        try:
            for _ in range(5):
                a, b = pairs[i]
                results[i] = a @ b
                results["exp", i] = fastgrad.exp(big)
        except Exception as e:  # reported below: an exception in a thread would pass silently
            errors.append(e)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(len(pairs))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    for i in range(len(pairs)):
        assert same_bits(results[i], expected[i])
        assert same_bits(results["exp", i], expected[-1])


def test_pool_works_in_forked_child(threads):
    """A child forked after the pool started gets a fresh pool (the parent's workers do not exist there)."""
    import os

    a = fastgrad.tensor(np.random.default_rng(5).standard_normal((300, 300)).astype("float32"))
    expected = threads(lambda: a @ a)[1]  # leaves 2 threads: the pool has a worker now
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        ok = False
        try:
            ok = same_bits(a @ a, expected)
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
