"""fastgrad.reference itself: what the shared, backend-parametrized suite cannot say about it.

The shared tests (FASTGRAD_TEST_BACKENDS=fastgrad.reference) check its semantics one behaviour at
a time; here: it computes in pure Python, it agrees with fastgrad bit for bit where both do the
same float32 arithmetic, the same seed draws the same numbers, and the Python layers above the
tensor are fastgrad's own code bound to the reference.
"""

import importlib
import pathlib
import re

import numpy as np
import pytest

import fastgrad
import fastgrad.reference as ref

REFERENCE_DIR = pathlib.Path(ref.__file__).parent
# The only modules that may touch numpy: creation (numpy arrays in, random numbers), the tensor
# (.numpy() and printing) and indexing (numpy arrays as indices). The math is elsewhere.
NUMPY_AT_THE_EDGES = {"_creation.py", "_tensor.py", "_index.py"}


def test_acceptance_example():
    a = ref.tensor(2.0, requires_grad=True)
    b = ref.tensor(3.0, requires_grad=True)
    e = (a + b) * (a * b)
    e.backward()
    assert (repr(a.grad), repr(b.grad)) == ("tensor(21.)", "tensor(16.)")
    assert repr(e) == "tensor(30., grad_fn=<MulBackward0>)"


@pytest.mark.parametrize("path", sorted(REFERENCE_DIR.glob("*.py")), ids=lambda p: p.name)
def test_math_is_pure_python(path):
    uses_numpy = re.search(r"^\s*(import numpy|from numpy)", path.read_text(encoding="utf-8"), re.MULTILINE)
    assert not uses_numpy or path.name in NUMPY_AT_THE_EDGES


def test_tensors_are_not_fastgrads():
    t = ref.tensor([1.0, 2.0])
    assert isinstance(t, ref.Tensor) and not isinstance(t, fastgrad.Tensor)
    assert (t * 2).grad_fn is None and type(t * t).__module__.startswith("fastgrad.reference")


def test_shared_layers_are_bound_to_the_reference():
    assert ref.autograd is not fastgrad.autograd
    assert ref.autograd.gradcheck is not fastgrad.autograd.gradcheck
    x = ref.tensor([0.5, -1.5, 2.0], dtype=ref.float64, requires_grad=True)
    assert ref.autograd.gradcheck(lambda t: (t * t.exp()).sum(), (x,))


def _float32_arrays(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for shape in shapes]


PROGRAMS = {  # same float32 arithmetic in the same order on both backends: results must be identical
    "arithmetic": lambda m, a, b: ((a + b) * a - b / (a * a + 1.0)) ** 2,
    "scalars": lambda m, a, b: 0.1 * a + 2.5 - 1 / (b.abs() + 0.3),
    "sqrt": lambda m, a, b: (a * a + b * b).sqrt(),
    "sums": lambda m, a, b: a.sum(0) + (a * b).sum(1, keepdim=True).mean() - b.var(),
    "matmul": lambda m, a, b: a @ b.T @ a,
    "softmax": lambda m, a, b: (a * b - (a * b).amax(1, keepdim=True)).exp().sum(1).log(),
}


# fastgrad's GEMM fuses each multiply-add on the SIMD ISAs (one rounding per step, see
# csrc/kernels/gemm_impl.h) where the reference rounds the product and then the sum: identical bits on
# the scalar ISA only. Otherwise each product of these 5 x 7 programs is within k u sum|a||b| (k <= 7,
# u = 2^-24, tests/test_gemm.py) of the other, about 1e-6 relative here; rtol/atol 1e-5 leave room for
# the two chained products and their gradients.
FUSED = {"matmul"} if fastgrad.config()["isa"] != "scalar" else set()
# fastgrad's float32 exp and log are within 1 ulp of the exact value (csrc/kernels/elementwise_impl.h)
# where the reference rounds its double result once: an ulp apart at times, a few after the sums.
WITHIN_ULPS = {"softmax"}


@pytest.mark.parametrize("name", PROGRAMS)
def test_float32_results_and_gradients_match_fastgrad_exactly(name):
    a_values, b_values = _float32_arrays(len(name), (5, 7), (5, 7))
    results = []
    for m in (fastgrad, ref):
        a, b = m.tensor(a_values, requires_grad=True), m.tensor(b_values, requires_grad=True)
        out = PROGRAMS[name](m, a, b)
        out.sum().backward()
        results.append([out.detach().numpy().copy(), a.grad.numpy().copy(), b.grad.numpy().copy()])
    for ours, theirs in zip(*results):
        if name in FUSED:
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
        elif name in WITHIN_ULPS:
            np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("draw", ["rand", "randn", "randint", "normal"])
def test_same_seed_same_numbers_as_fastgrad(draw):
    calls = {
        "rand": lambda m: m.rand(3, 4),
        "randn": lambda m: m.randn(5, dtype=m.float64),
        "randint": lambda m: m.randint(0, 10, (6,)),
        "normal": lambda m: m.normal(2.0, 0.5, size=(4,)),
    }
    values = []
    for m in (fastgrad, ref):
        m.manual_seed(7)
        values.append(calls[draw](m).tolist())
    assert values[0] == values[1]


def test_views_share_storage_and_version():
    x = ref.zeros(2, 3)
    v = x.t()[1]
    v.fill_(5.0)
    assert x.tolist() == [[0.0, 5.0, 0.0], [0.0, 5.0, 0.0]]
    assert x._version == v._version == 1


def test_numpy_memory_is_shared_both_ways():
    array = np.zeros((2, 3))
    t = ref.from_numpy(array.T)  # non-contiguous numpy memory, viewed in place
    array[0, 1] = 4.0
    t[2, 1] = 7.0
    assert t.tolist() == [[0.0, 0.0], [4.0, 0.0], [0.0, 7.0]]
    assert array[1, 2] == 7.0
    out = t.numpy()
    out[0, 0] = -1.0
    assert array[0, 0] == -1.0


def test_long_chain_backward_needs_no_recursion():
    x = ref.tensor(1.0, dtype=ref.float64, requires_grad=True)
    y = x
    for _ in range(20_000):
        y = y * 1.0001
    y.backward()
    assert x.grad.item() == pytest.approx(1.0001**20_000)


def test_reload_keeps_one_tensor_type():
    # The package may be imported by name from elsewhere (tests, pickles): always the same module.
    assert importlib.import_module("fastgrad.reference") is ref
