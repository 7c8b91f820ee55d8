"""The SIMD kernels (csrc/kernels) through the ops that use them, against numpy and long double.

Every fast path (contiguous, tensor-scalar, scalar-tensor, row and column broadcast) and the
strided fallback, at sizes around the vector widths; the ulp bounds of exp, log, tanh, sigmoid, sin,
cos and gelu stated in csrc/kernels/elementwise_impl.h (for float32 also over a strided sample of all 2^32
inputs on every ISA, and over all of them with FASTGRAD_EXHAUSTIVE_ULP=1); sums.
`test_suite_under_isa` reruns this file and the op tests in child interpreters with FASTGRAD_ISA
forcing each other available ISA.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import fastgrad
from op_helpers import SANITIZED, kernel_reruns_here, rng_for

SIZES = [0, 1, 7, 8, 15, 16, 17, 31, 33, 1000]
DTYPES = [np.float32, np.float64]
ISAS = ["scalar", "avx2", "avx512"]


def values(name, n, dtype, specials=True):
    """n normal values, with zeros, infinities and NaN mixed in (never tied zeros of both signs)."""
    x = rng_for(name).standard_normal(n) * 3
    if specials and n >= 8:
        x[[1, 4, 6]] = [np.inf, np.nan, -np.inf]
    return x.astype(dtype)


def tensor(x):
    return fastgrad.from_numpy(np.ascontiguousarray(x))


def assert_same(got, expected):
    """Bit-for-bit equal values (NaN equal to NaN)."""
    np.testing.assert_array_equal(got.numpy(), np.asarray(expected))
    assert got.numpy().dtype == np.asarray(expected).dtype


BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "maximum": (fastgrad.maximum, np.maximum),
    "minimum": (fastgrad.minimum, np.minimum),
}


@pytest.fixture(autouse=True)
def _quiet_numpy():
    with np.errstate(all="ignore"):
        yield


# ---- binary ops: exact, so equal to numpy's bit for bit on every path


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("n", SIZES)
def test_binary_contiguous_and_scalar_operands(op, n, dtype):
    ours, theirs = BINARY[op]
    a, b = values(op + "a", n, dtype), values(op + "b", n, dtype)
    assert_same(ours(tensor(a), tensor(b)), theirs(a, b))
    s = dtype(1.75)
    assert_same(ours(tensor(a), tensor(np.array(s))), theirs(a, s))  # 0-d tensor second
    assert_same(ours(tensor(np.array(s)), tensor(b)), theirs(s, b))  # and first
    if op in ("add", "sub", "mul", "div"):
        assert_same(ours(tensor(a), 1.75), theirs(a, s))  # Python number
        # reflected: 1.75 - x, and 1.75 / x computed as 1.75 * (1 / x), as PyTorch
        assert_same(ours(1.75, tensor(b)), s * (1 / b) if op == "div" else theirs(s, b))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("n", [1, 7, 16, 17, 33])
def test_binary_broadcasts_and_strided_fallback(op, n, dtype):
    ours, theirs = BINARY[op]
    a = values(op + "m", 5 * n, dtype).reshape(5, n)
    row, col = values(op + "r", n, dtype), values(op + "c", 5, dtype).reshape(5, 1)
    assert_same(ours(tensor(a), tensor(row)), theirs(a, row))  # last-dim (row) broadcast
    assert_same(ours(tensor(row), tensor(a)), theirs(row, a))
    assert_same(ours(tensor(a), tensor(col)), theirs(a, col))  # column broadcast
    assert_same(ours(tensor(col), tensor(row)), theirs(col, row))  # outer product shape
    t = tensor(a.T.copy()).t()  # transposed: the strided loop
    assert_same(ours(t, tensor(a)), theirs(a, a))
    wide = values(op + "w", 10 * n, dtype).reshape(5, 2 * n)
    assert_same(ours(tensor(wide)[:, ::2], tensor(wide)[:, 1::2]), theirs(wide[:, ::2], wide[:, 1::2]))  # strided
    b3 = values(op + "3", 2 * 5 * n, dtype).reshape(2, 5, n)
    assert_same(ours(tensor(b3), tensor(col)), theirs(b3, col))  # [2, 5, n] with [5, 1]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_relu_gradient_passes_the_gradient_where_the_result_is_positive_or_nan(n, dtype):
    """ReLU's backward (threshold_backward's vector kernel, and the element loop of a strided
    gradient): the incoming gradient where the result is above 0 or NaN, else +0."""
    x = values("relu x", n, dtype)
    if n >= 8:
        x[[0, 2]] = [0.0, -0.0]
    g = values("relu g", n, dtype, specials=False)
    expected = np.where((x > 0) | np.isnan(x), g, dtype(0))
    for incoming in (tensor(g), tensor(np.stack([g, g], 1))[:, 0]):  # contiguous, strided
        leaf = tensor(x).requires_grad_()
        leaf.relu().backward(incoming)
        assert_same(leaf.grad, expected)


def test_in_place_and_integer_ops_keep_their_paths():
    a = np.arange(20, dtype=np.float32)
    t = tensor(a.copy())
    t.add_(t)
    np.testing.assert_array_equal(t.numpy(), a + a)
    i = fastgrad.tensor(list(range(-20, 20)))
    assert (i * i - i).tolist() == [v * v - v for v in range(-20, 20)]
    assert fastgrad.maximum(i, fastgrad.tensor(3)).tolist() == [max(v, 3) for v in range(-20, 20)]


# ---- the activations with parameters: PyTorch's formulas in the tensor's type, exact, so equal to
# numpy's float arithmetic bit for bit (the parameters rounded to the type first, as PyTorch does)


def low(x):  # the bounds in x's type
    return x.dtype.type(-0.3)


def high(x):
    return x.dtype.type(1.7)


ACTIVATIONS = {
    # name: (fastgrad's, numpy's value, numpy's gradient g f'(x))
    "leaky_relu": (
        lambda F, x: F.leaky_relu(x, 0.01),
        lambda x: np.where(x > 0, x, x * x.dtype.type(0.01)),
        lambda g, x: np.where(x > 0, g, g * x.dtype.type(0.01)),
    ),
    "hardtanh": (  # x beyond a bound moved to it, else x itself (-0 and NaN stay)
        lambda F, x: F.hardtanh(x, -0.3, 1.7),
        lambda x: np.where(x < low(x), low(x), np.where(x > high(x), high(x), x)),
        lambda g, x: np.where((x <= low(x)) | (x >= high(x)), np.zeros_like(g), g),
    ),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ACTIVATIONS)
@pytest.mark.parametrize("n", SIZES)
def test_activation_values_and_gradients(op, n, dtype):
    ours, value, gradient = ACTIVATIONS[op]
    x = values(op, n, dtype)
    if n >= 8:
        x[[0, 2, 3, 5]] = [dtype(-0.3), 0.0, -0.0, dtype(1.7)]
    g = values(op + "g", n, dtype, specials=False)
    xt = fastgrad.tensor(x, requires_grad=True)
    y = ours(fastgrad.nn.functional, xt)
    assert_same(y.detach(), value(x))
    y.backward(tensor(g))
    assert_same(xt.grad, gradient(g, x))
    if n >= 2:  # a strided input and a repeated gradient (of a sum): the same values
        xs = fastgrad.tensor(x, requires_grad=True)
        y = ours(fastgrad.nn.functional, xs[::2])
        assert_same(y.detach(), value(x[::2]))
        y.sum().backward()
        expected = np.zeros_like(x)
        expected[::2] = gradient(np.ones_like(x[::2]), x[::2])
        assert_same(xs.grad, expected)


# ---- exact unary ops

UNARY_EXACT = {
    "neg": np.negative,
    "abs": np.abs,
    "sqrt": np.sqrt,
    "relu": lambda x: np.where((x > 0) | np.isnan(x), x, np.zeros_like(x)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", UNARY_EXACT)
@pytest.mark.parametrize("n", SIZES)
def test_exact_unary(op, n, dtype):
    x = values(op, n, dtype)
    if n >= 8:
        x[[2, 3]] = [0.0, -0.0]
    expected = UNARY_EXACT[op](x)
    got = getattr(fastgrad, op)(tensor(x))
    assert_same(got, expected)
    assert np.array_equal(np.signbit(got.numpy()[~np.isnan(expected)]), np.signbit(expected[~np.isnan(expected)]))
    if n >= 2:  # strided input: same values
        assert_same(getattr(fastgrad, op)(tensor(x)[::2]), expected[::2])


def test_abs_of_negative_zero_is_positive_zero(torch):
    got = fastgrad.abs(fastgrad.tensor([-0.0, 0.0]))
    assert np.signbit(got.numpy()).tolist() == np.signbit(torch.abs(torch.tensor([-0.0, 0.0])).numpy()).tolist()


# ---- exp, log, tanh, sigmoid, sin, cos: ulp bounds against long double

L = np.longdouble
EXTENDED = np.finfo(L).eps < np.finfo(np.float64).eps  # long double is wider than double here

EXACT = {
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "sin": np.sin,
    "cos": np.cos,
}
# The bounds stated in csrc/kernels/elementwise_impl.h, in ulps of the result's type.
BOUNDS = {
    np.float32: {"exp": 1.0, "log": 1.0, "tanh": 1.0, "sigmoid": 1.0, "sin": 1.0, "cos": 1.0},
    np.float64: {"exp": 1.5, "log": 1.0, "tanh": 1.5, "sigmoid": 3.0, "sin": 1.0, "cos": 1.0},
}


def sweep(name, dtype):
    """A dense sweep over each function's interesting range (denormal results and inputs included)."""
    tiny = np.finfo(dtype).smallest_subnormal
    big = np.finfo(dtype).max
    if name == "exp":
        top = np.log(big, dtype=np.float64)
        parts = [np.linspace(-top - 20, top + 1, 400_001), np.linspace(-1, 1, 100_001)]
    elif name == "log":
        parts = [np.geomspace(tiny, big, 400_001), np.linspace(0.5, 2, 100_001)]
    elif name == "tanh":
        parts = [np.linspace(-25, 25, 400_001), np.linspace(-0.7, 0.7, 100_001), np.geomspace(1e-30, 1e-3, 10_001)]
    elif name == "sigmoid":
        parts = [np.linspace(-np.log(big, dtype=np.float64) + 1, 50, 400_001), np.linspace(-2, 2, 100_001)]
    else:  # sin, cos: the vector range (|x| <= 2^17), the C library's beyond it, tiny inputs
        parts = [np.linspace(-200, 200, 200_001), np.linspace(-2e5, 2e5, 50_001), np.geomspace(tiny, 1e-3, 10_001)]
    return np.concatenate(parts).astype(dtype)


def max_ulp_error(got, x, name, dtype):
    exact = EXACT[name](x.astype(L))
    rounded = exact.astype(dtype)
    finite = np.isfinite(rounded)
    np.testing.assert_array_equal(got[~finite], rounded[~finite])  # overflow to inf where the exact value does
    ulp = np.spacing(np.abs(rounded[finite])).astype(L)
    return float(np.max(np.abs(got[finite].astype(L) - exact[finite]) / ulp))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", EXACT)
def test_transcendental_ulp_bounds(name, dtype):
    if not EXTENDED:
        pytest.skip("needs a long double wider than double as the oracle")
    x = sweep(name, dtype)
    got = getattr(fastgrad, name)(tensor(x)).numpy()
    assert max_ulp_error(got, x, name, dtype) <= BOUNDS[dtype][name]


@pytest.mark.parametrize("dtype", DTYPES)
def test_transcendental_special_values(dtype):
    fi = np.finfo(dtype)
    inf, nan = np.inf, np.nan
    x = np.array([0.0, -0.0, inf, -inf, nan, fi.smallest_subnormal, -1.0, fi.max, -fi.max], dtype=dtype)
    got = {name: getattr(fastgrad, name)(tensor(x)).numpy() for name in EXACT}
    np.testing.assert_array_equal(got["exp"][:5], [1, 1, inf, 0, nan])
    np.testing.assert_array_equal(got["exp"][7:], [inf, 0])
    np.testing.assert_array_equal(
        got["log"][:7], [-inf, -inf, inf, nan, nan, np.log(L(fi.smallest_subnormal)).astype(dtype), nan]
    )
    np.testing.assert_array_equal(got["tanh"][:5], [0, -0.0, 1, -1, nan])
    assert np.signbit(got["tanh"][1]) and not np.signbit(got["tanh"][0])
    np.testing.assert_array_equal(got["sigmoid"][:5], [0.5, 0.5, 1, 0, nan])
    np.testing.assert_array_equal(got["sin"][:6], [0, -0.0, nan, nan, nan, fi.smallest_subnormal])
    assert np.signbit(got["sin"][1]) and not np.signbit(got["sin"][0])
    np.testing.assert_array_equal(got["cos"][:6], [1, 1, nan, nan, nan, 1])
    # overflow and underflow thresholds of exp: the last finite result and the first infinite one
    top = np.nextafter(np.log(fi.max, dtype=dtype), dtype(0))
    edge = np.array([top, np.nextafter(top, dtype(np.inf)) * dtype(1.0001)], dtype=dtype)
    e = fastgrad.exp(tensor(edge)).numpy()
    assert np.isfinite(e[0]) and e[1] == inf
    low = np.array([np.log(L(fi.smallest_subnormal)) - 1, np.log(L(fi.smallest_subnormal)) + 1], dtype=dtype)
    np.testing.assert_array_equal(fastgrad.exp(tensor(low)).numpy(), [0, np.exp(low[1].astype(L)).astype(dtype)])
    if dtype == np.float32:  # lanes from -104 down are set to 0 (not scaled down); the lanes beside them as usual
        mixed = np.tile(np.array([-104.0, -1000.0, -103.9, -90.0, 1.0], dtype=dtype), 7)
        got = fastgrad.exp(tensor(mixed)).numpy()
        exact = np.exp(mixed.astype(L))
        assert np.all(got[mixed <= -104] == 0)
        assert np.all(np.abs(got.astype(L) - exact) <= np.spacing(exact.astype(dtype)).astype(L))


@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("n", SIZES)
def test_transcendental_layouts_agree(name, n):
    """Strided and broadcast inputs go through the same kernel: the same value gives the same bits."""
    x = values(name, 2 * n, np.float32).reshape(2, n)
    op = getattr(fastgrad, name)
    full = op(tensor(x)).numpy()
    np.testing.assert_array_equal(op(tensor(x.T.copy()).t()).numpy(), full)
    np.testing.assert_array_equal(op(tensor(x)[:, ::2]).numpy(), full[:, ::2])


def test_float32_transcendentals_are_within_one_ulp_of_the_reference():
    """The reference rounds the double result once; the kernels are within 1 ulp of the exact value."""
    import fastgrad.reference as ref

    x = values("ref", 200, np.float32) * 4
    for name in EXACT:
        ours = getattr(fastgrad, name)(tensor(x)).numpy()
        theirs = getattr(ref, name)(ref.tensor(x)).numpy()
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs), err_msg=name)
        distance = np.abs(ours.view(np.int32).astype(np.int64) - theirs.view(np.int32).astype(np.int64))
        assert distance[~np.isnan(ours)].max() <= 1, name


EXHAUSTIVE = os.environ.get("FASTGRAD_EXHAUSTIVE_ULP") == "1"


# gelu's kernels in the scan: the value and the gradient (incoming gradient 1) of approximate='none'
# and 'tanh', with the bounds of GELU_BOUNDS below
GELU_SCANS = {
    "gelu": ("none", "value"),
    "gelu_grad": ("none", "gradient"),
    "gelu_tanh": ("tanh", "value"),
    "gelu_tanh_grad": ("tanh", "gradient"),
}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", list(EXACT) + list(GELU_SCANS))
def test_float32_ulp_bound_over_the_bit_patterns(name, isa):
    """Every 4099th float32 bit pattern (about a million inputs, all signs and exponents, NaN and
    infinities), or all 2^32 with FASTGRAD_EXHAUSTIVE_ULP=1 (minutes per function and ISA), against
    the float64 kernel's result: the scan (csrc/kernels/ulp_scan.cpp) reports the largest error."""
    if isa not in fastgrad.config()["isas_available"]:
        pytest.skip(f"{isa} is not available on this machine")
    max_ulp, worst, checked = fastgrad._C._ulp_scan(name, isa, 0, 2**32, 1 if EXHAUSTIVE else 4099)
    assert checked == (2**32 if EXHAUSTIVE else -(-(2**32) // 4099))
    bound = GELU_BOUNDS[GELU_SCANS[name]] if name in GELU_SCANS else BOUNDS[np.float32][name]
    assert max_ulp <= bound, (max_ulp, worst)


def test_ulp_scan_measures_and_rejects_bad_arguments():
    # exp of the 1000 floats from 1.0 up: some error, within the bound
    max_ulp, worst, checked = fastgrad._C._ulp_scan("exp", "scalar", 0x3F800000, 0x3F800000 + 1000, 1)
    assert checked == 1000 and 0 < max_ulp <= 1 and 1 <= worst < 1.0002
    with pytest.raises(ValueError, match="unknown function sqrt"):
        fastgrad._C._ulp_scan("sqrt", "scalar", 0, 10, 1)
    with pytest.raises(ValueError, match="unknown ISA avx9000"):
        fastgrad._C._ulp_scan("exp", "avx9000", 0, 10, 1)
    with pytest.raises(ValueError, match="step >= 1"):
        fastgrad._C._ulp_scan("exp", "scalar", 0, 10, 0)


# ---- gelu: float32 'none' in float lanes, 'tanh' in double lanes, against the float64 kernels (the C
# library's erfc / tanh, the reference backend's arithmetic bit for bit: tests/test_nn_ops.py)

# The bounds stated in csrc/kernels/elementwise_impl.h, in float32 ulps of the float64 result: 1 ulp
# for approximate='none' (measured maxima over all 2^32 inputs: value 0.778, gradient 0.721 on AVX2
# and AVX-512; scalar 0.780 and 0.736), also next to the gradient's zero at x = -0.7518;
# 'tanh' is correctly rounded (measured maxima 0.5).
GELU_BOUNDS = {
    ("none", "value"): 1.0,
    ("none", "gradient"): 1.0,
    ("tanh", "value"): 0.501,
    ("tanh", "gradient"): 0.501,
}


def gelu_and_gradient(x, approximate):
    t = fastgrad.tensor(x, requires_grad=True)
    y = fastgrad.nn.functional.gelu(t, approximate=approximate)
    y.backward(fastgrad.ones_like(y))
    return {"value": y.detach().numpy(), "gradient": t.grad.numpy()}


def gelu_gradient(x, upstream, approximate):
    t = fastgrad.tensor(x, requires_grad=True)
    fastgrad.nn.functional.gelu(t, approximate=approximate).backward(fastgrad.tensor(upstream))
    return t.grad.numpy()


def assert_gelu_within_bounds(x, approximate):
    got, exact = gelu_and_gradient(x, approximate), gelu_and_gradient(x.astype(np.float64), approximate)
    for what in ("value", "gradient"):
        ours, wide = got[what], exact[what]
        rounded = wide.astype(np.float32)
        finite = np.isfinite(rounded) & np.isfinite(wide)
        # NaN and infinities where the float64 kernel has them; zeros of its sign
        np.testing.assert_array_equal(ours[~finite], rounded[~finite], err_msg=f"{approximate} {what}")
        np.testing.assert_array_equal(np.signbit(ours[ours == 0]), np.signbit(rounded[ours == 0]))
        error = np.abs(ours[finite].astype(np.float64) - wide[finite]) / np.spacing(np.abs(rounded[finite]))
        worst = int(np.argmax(error))
        assert error[worst] <= GELU_BOUNDS[approximate, what], (approximate, what, error[worst], x[finite][worst])


def gelu_table_edges():
    """The float32 'none' kernel's table intervals' ends ([0, 0.5), then 8 per binade up to 7), where
    its main path ends (x = -3) and the clamp at 7, each with 4 floats either side, of both signs."""
    ends = [0.5 * 2**k * (1 + j / 8) for k in range(4) for j in range(8)] + [3.0, 7.0]
    edges = np.float32(ends)[:, None].view(np.int32) + np.arange(-4, 5, dtype=np.int32)
    x = edges.ravel().view(np.float32)
    return np.concatenate([x, -x])


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_float32_ulp_bounds(approximate):
    """A dense sweep of the range where gelu is neither 0 nor x, the gradient's zero, tiny inputs and
    denormal results, and every 4099th float32 bit pattern (all signs and exponents, NaN and
    infinities); all 2^32 with FASTGRAD_EXHAUSTIVE_ULP=1 (minutes). test_suite_under_isa reruns it
    on every ISA."""
    sweep = [np.linspace(-16, 16, 400_001), np.linspace(-0.76, -0.74, 20_001), np.geomspace(1e-38, 1e-3, 20_001)]
    specials = [np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3e38, -3e38])]
    x = np.concatenate(sweep + [-part for part in sweep[2:]] + specials + [gelu_table_edges()]).astype(np.float32)
    assert_gelu_within_bounds(x, approximate)
    step, chunk = (1, 1 << 22) if EXHAUSTIVE else (4099, 1 << 32)
    for start in range(0, 1 << 32, chunk):
        bits = np.arange(start, start + chunk, step, dtype=np.uint64).astype(np.uint32)
        assert_gelu_within_bounds(bits.view(np.float32), approximate)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_float32_gradient_of_huge_incoming_gradients(approximate):
    """g gelu'(x) is rounded once: finite where g * gelu'(x) < 3.4e38 (the float32 kernel's g times
    its unscaled tail would overflow for x < 0), inf beyond, NaN for an infinite x, as the float64
    kernel's result rounded."""
    x = np.array([-13.0, -5.0, -1.0, -0.75, 0.5, 1.4, 3.0, 20.0, np.inf, -np.inf], np.float32)
    for g in (3e38, -3e38, np.inf, 1e-45):
        upstream = np.full_like(x, g)
        ours, wide = (gelu_gradient(x.astype(t), upstream.astype(t), approximate) for t in (np.float32, np.float64))
        expected = wide.astype(np.float32)
        finite = np.isfinite(expected)
        np.testing.assert_array_equal(ours[~finite], expected[~finite], err_msg=str(g))
        error = np.abs(ours[finite].astype(np.float64) - wide[finite]) / np.spacing(np.abs(expected[finite]))
        assert error.max(initial=0) <= GELU_BOUNDS[approximate, "gradient"], (g, error)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_gradient_of_a_zero_keeps_the_products_sign(approximate, dtype):
    """A zero incoming gradient g gives g gelu'(x), a zero with sign(g) sign(gelu'(x)) on every path
    (the float32 kernel's compensated sum once gave -0 + +0 = +0). gelu' < 0 below -0.7518..."""
    x = np.linspace(-12, 12, 961).astype(dtype)
    x = x[np.abs(x + 0.75179) > 1e-3]  # not at gelu''s own zero, whose sign is the rounding's
    for g in (0.0, -0.0):
        got = gelu_gradient(x, np.full_like(x, g), approximate)
        np.testing.assert_array_equal(got, 0.0)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(g) ^ (x < -0.75179), err_msg=str(g))


def test_gelu_float32_lanes_do_not_depend_on_their_neighbours():
    """The float32 'none' kernel takes its tail path (x <= -3, +inf, NaN) lane by lane: each value
    and gradient in a vector mixing both paths has the bits it has alone (a size-1 tensor)."""
    x = np.float32([-3.5, 0.3, -0.75, 5.0, -2.999, -13.0, np.inf, 1.5, -3.0, np.nan, -0.5, 8.0, -4.25, 2.0, 0.0, -1.0])
    x = np.concatenate([x, x[::-1], x[3:]])  # three vectors of 16 lanes (AVX-512), or 6 of 8 (AVX2)
    together = gelu_and_gradient(x, "none")
    for i, v in enumerate(x):
        alone = gelu_and_gradient(x[i : i + 1], "none")
        for what in ("value", "gradient"):
            np.testing.assert_array_equal(alone[what], together[what][i : i + 1], err_msg=f"{what} at {v}")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_layouts_and_thread_counts_give_the_same_bits(approximate, dtype):
    """Strided inputs, a repeated gradient (of a sum) and 1, 2 or 3 threads (70000 elements: split
    over threads) run the same elementwise kernel: the same bits."""
    x = values("gelu layouts", 70_000, dtype) * 2
    full = gelu_and_gradient(x, approximate)
    F = fastgrad.nn.functional
    strided = F.gelu(tensor(np.stack([x, x], 1)).t()[0], approximate=approximate).numpy()
    np.testing.assert_array_equal(strided, full["value"])
    leaf = fastgrad.tensor(x, requires_grad=True)
    F.gelu(leaf, approximate=approximate).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), full["gradient"])
    before = fastgrad.get_num_threads()
    try:
        for threads in (2, 3):
            fastgrad.set_num_threads(threads)
            for what, result in gelu_and_gradient(x, approximate).items():
                np.testing.assert_array_equal(result, full[what], err_msg=f"{threads} threads")
    finally:
        fastgrad.set_num_threads(before)


# ---- sums: double accumulation, fixed order


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_sums(n, dtype):
    x = values("sum", 3 * n, dtype, specials=False)
    exact = x.astype(L)
    tol = dict(rtol=1e-6 if dtype == np.float32 else 1e-14, atol=1e-6 if dtype == np.float32 else 1e-13)
    np.testing.assert_allclose(fastgrad.sum(tensor(x)).numpy(), exact.sum().astype(np.float64), **tol)
    m = tensor(x).reshape(3, n)
    for dims in [(1,), (0,), (0, 1)]:
        got = m.sum(dims).numpy()
        assert got.dtype == dtype
        np.testing.assert_allclose(got, exact.reshape(3, n).sum(axis=dims).astype(np.float64), **tol)
    t = tensor(x).reshape(3, n).t()  # not contiguous: the plain loop
    np.testing.assert_allclose(t.sum(0).numpy(), exact.reshape(3, n).sum(axis=1).astype(np.float64), **tol)
    cube = tensor(values("cube", 2 * 3 * n, dtype, specials=False)).reshape(2, 3, n)
    np.testing.assert_allclose(
        cube.sum((1, 2)).numpy(), cube.numpy().astype(L).sum(axis=(1, 2)).astype(np.float64), **tol
    )
    np.testing.assert_allclose(
        cube.sum((0, 1)).numpy(), cube.numpy().astype(L).sum(axis=(0, 1)).astype(np.float64), **tol
    )


def test_sum_of_float32_accumulates_in_double():
    x = np.full(1 << 20, 0.1, dtype=np.float32)
    x[0] = 1e8
    assert fastgrad.sum(tensor(x)).item() == np.float32(x.astype(np.float64).sum())


# ---- every ISA


def _child_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    env.update(extra)
    return env


def test_config_reports_the_isa():
    config = fastgrad.config()
    assert config["isa"] in config["isas_available"] and config["isas_available"][0] == "scalar"
    assert config["num_threads"] >= 1
    forced = os.environ.get("FASTGRAD_ISA")
    if forced:
        assert config["isa"] == forced
    import fastgrad.reference as ref

    assert set(ref.config()) == set(config)


@pytest.mark.not_rerun_per_isa
def test_unknown_isa_fails_the_import_with_the_reason():
    child = subprocess.run(
        [sys.executable, "-c", "import fastgrad"],
        capture_output=True,
        text=True,
        env=_child_env(FASTGRAD_ISA="avx9000"),
        timeout=120,
    )
    assert child.returncode != 0
    assert "FASTGRAD_ISA=avx9000 is not available on this machine (available: scalar" in child.stderr


DETERMINISM_PROBE = """
import hashlib, numpy as np, fastgrad
rng = np.random.default_rng(5)
h = hashlib.sha256()
for dtype in (np.float32, np.float64):
    for n in (1, 17, 1000, 4099):
        x = fastgrad.from_numpy((rng.standard_normal((3, n)) * 10).astype(dtype))
        y = fastgrad.from_numpy((rng.standard_normal((3, n)) * 10).astype(dtype))
        for r in (x.sum(), x.sum(1), x.sum(0), x + y, x * y - y / x, fastgrad.maximum(x, y), x.sqrt(), x.relu()):
            h.update(r.numpy().tobytes())
        # float64: the C library's; float32 'tanh': double lanes (or double scalars); float32 'none'
        # runs float lanes, with unfused multiply-adds on the scalar ISA (its bits may differ)
        for approximate in ("none", "tanh") if dtype == np.float64 else ("tanh",):
            h.update(fastgrad.nn.functional.gelu(x, approximate=approximate).numpy().tobytes())
        # float32: double lanes without fused multiply-adds (float_binary_impl.h); float64: the C library's
        for name in ("atan2", "hypot", "logaddexp", "logaddexp2"):
            h.update(getattr(fastgrad, name)(x, y).numpy().tobytes())
# the same over every exponent, with zeros, infinities and NaNs (signaling ones too, which the widening
# to double quiets): atan2's and logaddexp's special lanes
with np.errstate(over="ignore"):
    wide = np.ldexp(rng.standard_normal((2, 4099)), rng.integers(-150, 129, (2, 4099))).astype(np.float32)
signaling = np.array([0x7F800001, 0xFFA00000], np.uint32).view(np.float32)
specials = np.concatenate([np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0], np.float32), signaling])
wide[:, :40] = rng.choice(specials, (2, 40))
for name in ("atan2", "hypot", "logaddexp", "logaddexp2"):
    h.update(getattr(fastgrad, name)(fastgrad.from_numpy(wide[0]), fastgrad.from_numpy(wide[1])).numpy().tobytes())
fastgrad.manual_seed(3)
for n in (16, 17, 1000, 4099):  # float32 normals: the Box-Muller fill in AVX2 lanes or one lane (ops/random.cpp)
    h.update(fastgrad.randn(n).numpy().tobytes() + fastgrad.empty(n).normal_(0.5, 3.0).numpy().tobytes())
print(h.hexdigest())
"""


@pytest.mark.not_rerun_per_isa
def test_exact_kernels_sums_gelu_and_float_functions_are_identical_on_every_isa():
    available = fastgrad.config()["isas_available"]
    digests = {
        isa: subprocess.run(
            [sys.executable, "-c", DETERMINISM_PROBE],
            capture_output=True,
            text=True,
            env=_child_env(FASTGRAD_ISA=isa),
            timeout=300,
            check=True,
        ).stdout
        for isa in available
    }
    assert len(set(digests.values())) == 1, digests


# The files rerun under each other ISA: the kernel tests, which reach every fast path and tail of the
# kernels (where op_helpers.kernel_reruns_here says), and the op tests, which reach the kernels through
# every op: not under a sanitizer, where they would run the same kernel code again at its cost.
KERNEL_RERUN_FILES = ["test_kernels.py", "test_gemm.py", "test_optim_fused.py", "test_rnn_fused.py"]
OP_RERUN_FILES = [] if SANITIZED else ["test_ops.py", "test_nn_ops.py"]


@pytest.mark.slow
@pytest.mark.not_rerun_per_isa
@pytest.mark.parametrize("isa", ISAS)
def test_suite_under_isa(isa):
    """The kernel and op tests, on fastgrad only (the reference has no kernels), under a forced ISA."""
    config = fastgrad.config()
    if isa not in config["isas_available"]:
        pytest.skip(f"{isa} is not available on this CPU")
    if isa == config["isa"]:
        pytest.skip(f"{isa} is this process's ISA: the main run covers it")
    here = os.path.dirname(os.path.abspath(__file__))
    files = [
        os.path.join(here, name) for name in (KERNEL_RERUN_FILES if kernel_reruns_here(isa) else []) + OP_RERUN_FILES
    ]
    if not files:
        pytest.skip(
            f"the kernel tests under {isa}: the other half of .ci/run reruns them (op_helpers.kernel_reruns_here)"
        )
    # The op cases' strided and expanded layouts reach the kernels only through runs too short for
    # them (the strided loops): the contiguous layout is the one that differs under another ISA.
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-k", "not -strided] and not -expanded]"]
        + files,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=here,
        env=_child_env(FASTGRAD_ISA=isa, FASTGRAD_TEST_BACKENDS="fastgrad"),
    )
    assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-2000:]
