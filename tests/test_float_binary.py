"""atan2, hypot, logaddexp, logaddexp2 and copysign, computed by the core's kernels
(csrc/ops/float_binary.cpp) and by the reference's twin (reference/_math.py): what the op cases and
tests/test_binary_ops.py leave out. Values at the edges of the float types against PyTorch, result
dtypes of mixed operands, the two backends' bits, the thread count, and float64 gradients against
finite differences."""

import math

import numpy as np
import pytest

import fastgrad
import fastgrad.reference as ref
from op_helpers import gradcheck_for, rng_for
from oracle_helpers import same_error, same_on_both
from test_binary_ops import with_grads

# Values beyond float32's range become infinities on purpose; fastgrad.tensor converts them through
# numpy, which warns (PyTorch does not).
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")

NAMES = ["atan2", "hypot", "logaddexp", "logaddexp2", "copysign"]
NAN, INF = math.nan, math.inf
# Signed zeros, infinities, NaN, the extremes of float64 (infinities and zeros in float32),
# subnormals, and differences where exp underflows (logaddexp's -745).
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 4.0, INF, -INF, NAN, 1e300, -1e300, 1e-300, 5e-324, -5e-324]
EDGES += [1.7976931348623157e308, 1e-40, 88.0, 700.0, -745.0, 1e-8]


def ulps_apart(ours, theirs):
    """How many units in the last place of `theirs` the two arrays differ by, element by element:
    0 where both are the same NaN, infinity or zero (signs compared), or where both are within 4
    epsilons of zero (a sum that cancels: logaddexp2(-1, -1) is 0, PyTorch's float32 -1e-8), inf
    where one is NaN or infinite and the other is not."""
    same = (ours == theirs) & (np.signbit(ours) == np.signbit(theirs)) | np.isnan(ours) & np.isnan(theirs)
    finite = np.isfinite(ours) & np.isfinite(theirs)
    with np.errstate(all="ignore"):
        near_zero = finite & (np.abs(ours - theirs) <= 4 * np.finfo(theirs.dtype).eps) & (np.abs(theirs) < 1)
        apart = np.abs(ours - theirs) / np.spacing(np.abs(theirs).astype(theirs.dtype))
    return np.where(same | near_zero, 0.0, np.where(finite, apart, np.inf))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", NAMES)
def test_edge_values_match_torch(fg, torch, name, dtype):
    """Every pair of EDGES (a column against a row): NaN where PyTorch has NaN, infinities and zeros
    with their signs, other values within 2 ulps (PyTorch's float32 kernels compute in float32 with
    its vector math library, ours in double rounded once)."""

    def run(m):
        x, y = m.tensor(EDGES, dtype=getattr(m, dtype)).reshape(-1, 1), m.tensor(EDGES, dtype=getattr(m, dtype))
        return getattr(m, name)(x, y).numpy()

    apart = ulps_apart(run(fg), run(torch))
    assert apart.max() <= 2, [(EDGES[i], EDGES[j]) for i, j in zip(*np.nonzero(apart > 2))]


MIXED = {
    "int64 by int64": (lambda m: m.arange(-2, 3), lambda m: m.tensor([[1], [-1]])),
    "float16 by 0-d float64": (
        lambda m: m.tensor([1.5, -2.0, 0.0], dtype=m.float16),
        lambda m: m.tensor(3.0, dtype=m.float64),
    ),
    "bfloat16 by float32": (lambda m: m.tensor([1.5, -2.0], dtype=m.bfloat16), lambda m: m.tensor([[0.25], [-4.0]])),
    "int32 by float64": (lambda m: m.tensor([1, 2], dtype=m.int32), lambda m: m.tensor([0.5, -0.5], dtype=m.float64)),
    "bool by float16": (lambda m: m.tensor([True, False]), lambda m: m.tensor([-1.0, 2.0], dtype=m.float16)),
    "float32 by 0-d int64": (lambda m: m.tensor([[1.0, -3.0]]), lambda m: m.tensor(-2)),
}


@pytest.mark.parametrize("operands", MIXED)
@pytest.mark.parametrize("name", NAMES)
def test_mixed_dtypes_promote_as_torch(fg, torch, name, operands):
    make_x, make_y = MIXED[operands]

    def run(m):
        result = getattr(m, name)(make_x(m), make_y(m))
        return str(result.dtype).rsplit(".", 1)[-1], list(result.shape), result.double().numpy()

    try:
        theirs = run(torch)
    except (RuntimeError, NotImplementedError):  # hypot and logaddexp refuse integers
        same_error(fg, torch, lambda m: run(m))
        return
    ours = run(fg)
    assert ours[:2] == theirs[:2]
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-2 if "16" in ours[0] else 1e-6)


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.hypot(m.tensor([3.0, -5.0]), m.tensor([[4.0], [12.0]]), out=m.empty(2, 2)),
        lambda m: m.logaddexp(m.tensor([1.0, 2.0]), m.tensor([0.0]), out=m.empty(0)),  # out resized
        lambda m: m.logaddexp2(
            m.tensor([1.0, -INF], dtype=m.float64), 3.0 - m.tensor([2.0, INF]), out=m.empty(2, dtype=m.float64)
        ),
        lambda m: m.copysign(m.tensor([1.0, 2.0]), -0.0, out=m.empty(2)),
        lambda m: m.copysign(m.tensor([1, 2]), m.tensor([-1, 0])),
        lambda m: m.tensor([0.5, -0.5]).copysign(True),
        lambda m: m.tensor([[1.0, 0.0], [-1.0, 2.0]]).t().atan2(m.tensor([1.0, -1.0])),  # a transposed operand
        lambda m: m.tensor([2.0, 3.0], dtype=m.float64).hypot_(m.tensor(4.0)),
        lambda m: m.tensor([1e38, -1e38]).hypot(m.tensor([1e38, 1e38])),  # no overflow on the way
        lambda m: m.tensor([1e-45, 1e-40]).hypot(m.tensor([1e-45, 0.0])),  # nor underflow
        lambda m: m.logaddexp(m.tensor([-INF, INF, INF, 1e38]), m.tensor([-INF, INF, -INF, 1e38])),
        lambda m: m.atan2(m.zeros(2, 0), m.zeros(1)),
    ],
)
def test_forms_and_special_values(fg, torch, program):
    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.hypot(m.zeros(2), m.zeros(3)),
        lambda m: m.ones(2).hypot_(m.ones(2, 2)),
        lambda m: m.copysign(m.ones(2), "a"),
        lambda m: m.logaddexp(m.tensor([True]), m.tensor([False])),
        lambda m: m.logaddexp2(m.ones(2), 1.0),
        lambda m: m.hypot(m.ones(2, dtype=m.int8), m.ones(2, dtype=m.int8)),
    ],
)
def test_errors(fg, torch, program):
    same_error(fg, torch, program)


@pytest.mark.parametrize("name", NAMES)
def test_gradients_at_the_edges_match_torch(fg, torch, name):
    data = (
        [0.0, 0.0, -0.0, 2.0, INF, -INF, INF, NAN, 1e300, -3.0],
        [0.0, -1.0, 0.0, 0.0, INF, -INF, 1.0, 1.0, 1e300, 4.0],
    )

    def run(m):
        return with_grads(m, lambda m, a, b: getattr(m, name)(a.double(), b.double()), *data)

    same_on_both(fg, torch, run)


# The exponents of each type's finite values, subnormals included (bfloat16 has float32's range).
EXPONENTS = {"float64": (-1074, 1024), "float32": (-149, 128), "bfloat16": (-133, 128), "float16": (-24, 16)}


def _wide_values(rng, shape, dtype):
    """Values over the whole range of `dtype` (both signs, subnormals), EDGES among the first."""
    low, high = EXPONENTS[dtype]
    values = np.ldexp(rng.random(shape), rng.integers(low, high, shape)) * rng.choice([-1.0, 1.0], shape)
    values.reshape(-1)[: len(EDGES)] = EDGES
    return values


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", NAMES)
def test_core_and_reference_give_the_same_bits(name, dtype):
    """Both compute each value in double with the same steps and round it once: same bits, NaNs
    included, for tensors of every float type, broadcast and transposed, and for a number. Most
    pairs are of like magnitude (where hypot and logaddexp do the most work), others far apart."""
    rng = rng_for(name, dtype)
    x = _wide_values(rng, (64, 64), dtype)
    with np.errstate(over="ignore"):  # up to 4 times the largest value: infinities, on purpose
        y = x * rng.uniform(0.25, 4, (64, 64))
    y[:8] = _wide_values(rng, (8, 64), dtype)
    x[8:16] = rng.standard_normal((8, 64))  # ordinary values too, beside one another
    results = []
    for m in (fastgrad, ref):
        a, b = (m.tensor(v.tolist(), dtype=getattr(m, dtype)) for v in (x, y))
        op = getattr(m, name)
        # contiguous; transposed (copied first); expanded and transposed (the strided loop)
        outs = [op(a, b), op(a.t(), b[0]), op(a[:1], b.t()), op(a.t()[None].expand(2, 64, 64), b)]
        if name == "copysign":
            outs += [op(a, -0.0), op(a, 2)]
        wide = m.float64 if dtype == "float64" else m.float32  # exact: numpy has no bfloat16
        results.append([_nan_unsigned(t.to(wide).numpy(), dtype) for t in outs])
    assert results[0] == results[1]


def _nan_unsigned(values, dtype):
    """The bytes of `values`; for bfloat16 with every NaN as +NaN: the backends' conversions of a
    float32 NaN to bfloat16 keep different bits (the core's is c10::BFloat16's, 0x7FC0 whatever the
    sign; the reference keeps the sign), which is not these ops' doing."""
    if dtype == "bfloat16":
        values = np.where(np.isnan(values), np.float32(np.nan), values)
    return values.tobytes()


# float64 oracles: the double value rounded to float32 is the correctly rounded float result (but for
# a double rounding, once in 2^29 or so)
DOUBLE_ORACLES = {"atan2": np.arctan2, "hypot": np.hypot, "logaddexp": np.logaddexp, "logaddexp2": np.logaddexp2}


def _float_pairs(rng, n):
    """Pairs of finite floats: of any exponent and sign, of like magnitude (within a factor 4), standard
    normal x 10, and next to logaddexp's cancellation (sums of exponentials near 1)."""
    any_bits = rng.integers(0, 2**32, (3, n), dtype=np.uint64).astype(np.uint32).view(np.float32)
    any_bits = np.where(np.isfinite(any_bits), any_bits, np.float32(1))
    with np.errstate(over="ignore"):
        like = np.clip(any_bits[2] * rng.uniform(0.25, 4, n), -3e38, 3e38).astype(np.float32)
    normal = (rng.standard_normal((2, n)) * 10).astype(np.float32)
    near_ln2 = (-0.6931472 + rng.integers(-64, 64, (2, n)) * 6e-8).astype(np.float32)
    return np.concatenate([any_bits[:2], np.stack([any_bits[2], like]), normal, near_ln2], axis=1)


@pytest.mark.parametrize("name", ["atan2", "hypot", "logaddexp", "logaddexp2"])
def test_float32_results_are_within_an_ulp_of_the_correctly_rounded_value(name):
    """The float32 kernels (double lanes, explicit algorithms: kernels/float_binary_impl.h) over 800,000
    random pairs: every result within 1 ulp of the correctly rounded value, and nearly all of them it."""
    a, b = _float_pairs(rng_for(name, "ulp"), 200_000)
    ours = getattr(fastgrad, name)(fastgrad.from_numpy(a), fastgrad.from_numpy(b)).numpy()
    with np.errstate(all="ignore"):
        rounded = DOUBLE_ORACLES[name](a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    apart = np.abs(_ordinal(ours) - _ordinal(rounded))  # floats between them, +1
    assert apart.max() <= 1, [(a[i], b[i], ours[i], rounded[i]) for i in np.nonzero(apart > 1)[0][:5]]
    assert np.count_nonzero(apart) <= 8


def _ordinal(values):
    """float32 values as integers in their order (-0 and +0 both 0): neighbours differ by 1."""
    bits = values.view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


@pytest.mark.parametrize("name", NAMES)
def test_results_do_not_depend_on_the_thread_count(name):
    rng = rng_for(name)
    a = fastgrad.tensor(rng.standard_normal((300, 700)).astype(np.float32) * 30)
    b = fastgrad.tensor(rng.standard_normal(700).astype(np.float32) * 30)
    saved, results = fastgrad.get_num_threads(), []
    try:
        for n in (1, 2):
            fastgrad.set_num_threads(n)
            results.append(getattr(fastgrad, name)(a, b).numpy().tobytes())
    finally:
        fastgrad.set_num_threads(saved)
    assert results[0] == results[1]


GRADIENT_PROGRAMS = {
    "atan2": lambda m, a, b: m.atan2(a, b),
    "arctan2 of a row": lambda m, a, b: b.arctan2(a),
    "hypot": lambda m, a, b: m.hypot(a, b),
    "logaddexp": lambda m, a, b: m.logaddexp(a, b),
    "logaddexp far apart": lambda m, a, b: m.logaddexp(a * 30, b),
    "logaddexp2": lambda m, a, b: a.logaddexp2(b),
    "copysign": lambda m, a, b: m.copysign(a, b),
    "copysign(number)": lambda m, a, b: a.copysign(-1.5) * b,
    "atan2_": lambda m, a, b: (a * 1).atan2_(b),
    "hypot_": lambda m, a, b: (a * 1).hypot_(b),
}


@pytest.mark.parametrize("name", GRADIENT_PROGRAMS)
def test_float64_gradients_match_finite_differences(fg_finite_differences, name):
    """First and second derivatives (the nodes' backward formulas are differentiable ops), with
    broadcasting, at points away from the kinks (zeros)."""
    fg = fg_finite_differences
    rng = rng_for(name)
    a = rng.uniform(0.5, 2.0, (3, 4)) * rng.choice([-1.0, 1.0], (3, 4))
    b = rng.uniform(0.5, 2.0, 4) * rng.choice([-1.0, 1.0], 4)
    inputs = tuple(fg.tensor(v, dtype=fg.float64, requires_grad=True) for v in (a, b))
    program = GRADIENT_PROGRAMS[name]
    assert gradcheck_for(fg)(lambda x, y: program(fg, x, y), inputs)
    assert gradcheck_for(fg, "gradgradcheck")(lambda x, y: program(fg, x, y), inputs)


IN_PLACE_PROGRAMS = {
    "atan2_": lambda a, b: (a * 1).atan2_(b),
    "arctan2_ of a view": lambda a, b: (lambda x: (x[1:].arctan2_(b), x)[1])(a * 1),
    "hypot_": lambda a, b: (a * 1).hypot_(b),
    "copysign_": lambda a, b: (a * 1).copysign_(b),
    "copysign_(number)": lambda a, b: (a * 1).copysign_(-1.0) * b,
}


@pytest.mark.parametrize("name", IN_PLACE_PROGRAMS)
def test_compiled_in_place_forms_are_captured_and_replay_the_eager_bits(name):
    def step(a, b):
        result = IN_PLACE_PROGRAMS[name](a, b)
        result.sum().backward()
        return result

    runs = []
    for run in (step, fastgrad.compile(step)):
        rng = rng_for(name)
        a, b = (fastgrad.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in [(3, 4), 4])
        results = [run(a, b).detach().numpy().tobytes() for _ in range(3)]  # a capture, then replays
        runs.append([results, a.grad.numpy().tobytes(), b.grad.numpy().tobytes()])
    assert run.eager_reason is None
    assert runs[0] == runs[1]
