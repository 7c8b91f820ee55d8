"""IEEE special values through every op and its gradient, against PyTorch: NaN and inf propagate
(nothing masks a NaN), log(0) is -inf, and softmax / log_softmax / cross_entropy stay finite for
logits of magnitude 1e4, forward and backward."""

import itertools
import math

import numpy as np
import pytest

nan, inf = math.nan, math.inf
SPECIAL = [nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 0.5]
DTYPES = ["float32", "float64"]


def _functional(m):
    return m.nn.functional


UNARY = {
    "neg": lambda m, x: -x,
    "abs": lambda m, x: x.abs(),
    "exp": lambda m, x: x.exp(),
    "log": lambda m, x: x.log(),
    "sqrt": lambda m, x: x.sqrt(),
    "sin": lambda m, x: x.sin(),
    "cos": lambda m, x: x.cos(),
    "tanh": lambda m, x: x.tanh(),
    "sigmoid": lambda m, x: x.sigmoid(),
    "relu": lambda m, x: x.relu(),
    "sign": lambda m, x: x.sign(),
    "clamp": lambda m, x: x.clamp(-2.0, 2.0),
    "clamp(min)": lambda m, x: x.clamp(min=0.5),
    "x**2": lambda m, x: x**2,
    "x**0.5": lambda m, x: x**0.5,
    "x**-1": lambda m, x: x**-1.0,
    "x**0": lambda m, x: x**0.0,
    "2**x": lambda m, x: 2.0**x,
    "1/x": lambda m, x: 1 / x,
    "x*0": lambda m, x: x * 0,
    "x-inf": lambda m, x: x - inf,
    "gelu": lambda m, x: _functional(m).gelu(x),
    "gelu(tanh)": lambda m, x: _functional(m).gelu(x, approximate="tanh"),
    "leaky_relu": lambda m, x: _functional(m).leaky_relu(x, 0.1),
    "mse_loss": lambda m, x: _functional(m).mse_loss(x, m.zeros_like(x), reduction="none"),
    "l1_loss": lambda m, x: _functional(m).l1_loss(x, m.zeros_like(x), reduction="none"),
    "smooth_l1_loss": lambda m, x: _functional(m).smooth_l1_loss(x, m.zeros_like(x), reduction="none"),
    "huber_loss": lambda m, x: _functional(m).huber_loss(x, m.zeros_like(x), reduction="none", delta=2.0),
}

BINARY = {
    "add": lambda m, a, b: a + b,
    "sub": lambda m, a, b: a - b,
    "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b,
    "pow": lambda m, a, b: a**b,
    "maximum": lambda m, a, b: m.maximum(a, b),
    "minimum": lambda m, a, b: m.minimum(a, b),
}

# One row per case; each reduces or normalizes along dim 1.
ROWS = [
    [1.0, nan, 2.0],
    [1.0, inf, 2.0],
    [1.0, -inf, 2.0],
    [inf, -inf, 0.0],
    [-inf, -inf, -inf],
    [inf, inf, 1.0],
    [1e4, -1e4, 0.0],
    [-1e4, -1e4, -1e4],
    [0.0, 0.0, 0.0],
    [0.0, -0.0, 1.0],
]
ROW_OPS = {
    "sum": lambda m, x: x.sum(1),
    "mean": lambda m, x: x.mean(1),
    "prod": lambda m, x: x.prod(1),
    "max(dim)": lambda m, x: x.max(1)[0],
    "min(dim)": lambda m, x: x.min(1)[0],
    "max": lambda m, x: x.max(),
    "min": lambda m, x: x.min(),
    "amax": lambda m, x: x.amax(1),
    "amin": lambda m, x: x.amin(1),
    "argmax": lambda m, x: x.argmax(1),
    "argmin": lambda m, x: x.argmin(1),
    "norm": lambda m, x: x.norm(dim=1),
    "norm(p=1)": lambda m, x: x.norm(p=1, dim=1),
    "norm(p=inf)": lambda m, x: x.norm(p=inf, dim=1),
    "var": lambda m, x: x.var(1),
    "std": lambda m, x: x.std(1),
    "softmax": lambda m, x: x.softmax(1),
    "log_softmax": lambda m, x: x.log_softmax(1),
    "cross_entropy": lambda m, x: _functional(m).cross_entropy(x, m.tensor([1]), reduction="none"),
    "cross_entropy(label_smoothing)": lambda m, x: _functional(m).cross_entropy(
        x, m.tensor([0]), reduction="none", label_smoothing=0.1
    ),
    "layer_norm": lambda m, x: _functional(m).layer_norm(x, (3,)),
    "matmul": lambda m, x: x @ m.ones(3, 2, dtype=x.dtype),
    "dot": lambda m, x: x[0] @ m.tensor([1.0, 2.0, 3.0], dtype=x.dtype),
}


def _numbers(t):
    return np.asarray(t.detach().tolist(), dtype=np.float64)


def _run(m, fn, columns, dtype):
    """fn on one tensor per column of values; its value and each input's gradient (ones seeded), as numpy."""
    inputs = [m.tensor(values, dtype=getattr(m, dtype), requires_grad=True) for values in columns]
    out = fn(m, *inputs)
    if not out.dtype.is_floating_point:  # argmax: no gradient
        return _numbers(out), []
    out.backward(m.ones_like(out))
    return _numbers(out), [_numbers(x.grad) for x in inputs]


def _assert_same(got, expected, what):
    """Same NaNs, same infinities (with their signs), finite values close."""
    assert got.shape == expected.shape, what
    assert np.array_equal(np.isnan(got), np.isnan(expected)), f"{what}: {got} vs {expected}"
    assert np.array_equal(np.isposinf(got), np.isposinf(expected)), f"{what}: {got} vs {expected}"
    assert np.array_equal(np.isneginf(got), np.isneginf(expected)), f"{what}: {got} vs {expected}"
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-5, atol=1e-6, err_msg=what)


def _assert_like_torch(fg, torch, fn, columns, dtype):
    value, grads = _run(fg, fn, columns, dtype)
    expected_value, expected_grads = _run(torch, fn, columns, dtype)
    _assert_same(value, expected_value, f"value at {columns}")
    for k, (grad, expected) in enumerate(zip(grads, expected_grads)):
        _assert_same(grad, expected, f"gradient {k} at {columns}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_special_values_like_torch(fg, torch, name, dtype):
    values = SPECIAL
    if name == "gelu" and dtype == "float32":
        values = [v for v in SPECIAL if v != inf]  # see test_gelu_of_inf
    _assert_like_torch(fg, torch, UNARY[name], [values], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary_special_values_like_torch(fg, torch, name, dtype):
    pairs = list(itertools.product(SPECIAL, SPECIAL))
    _assert_like_torch(fg, torch, BINARY[name], [[a for a, _ in pairs], [b for _, b in pairs]], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ROW_OPS)
def test_reductions_and_normalizations_of_special_values_like_torch(fg, torch, name, dtype):
    for row in ROWS:
        _assert_like_torch(fg, torch, ROW_OPS[name], [[row]], dtype)


def test_log_of_zero_and_below(fg):
    x = fg.tensor([0.0, -0.0, -1.0, inf], requires_grad=True)
    y = x.log()
    values = y.tolist()
    assert values[:2] == [-inf, -inf] and math.isnan(values[2]) and values[3] == inf
    y.sum().backward()
    assert x.grad.tolist()[:2] == [inf, -inf]  # 1 / x keeps the sign of zero


@pytest.mark.parametrize("dtype", DTYPES)
def test_clamp_keeps_the_sign_of_a_zero_at_a_zero_bound_like_torch(fg, torch, dtype):
    """A number bound replaces x only where x is past it: -0 clamped at 0 stays -0 (and +0 at -0
    stays +0), as PyTorch's clamp kernels; 1 / clamp(x) shows the sign."""
    zeros = [-0.0, 0.0] * 20  # long enough for the vector path
    for bounds in [{"min": 0.0}, {"max": 0.0}, {"min": -0.0}, {"max": -0.0}, {"min": 0.0, "max": 0.0}]:
        ours = (1 / fg.tensor(zeros, dtype=getattr(fg, dtype)).clamp(**bounds)).tolist()
        theirs = (1 / torch.tensor(zeros, dtype=getattr(torch, dtype)).clamp(**bounds)).tolist()
        assert ours == theirs, bounds


def test_nan_is_never_masked(fg):
    """Ops that choose or clip (relu, clamp, max) return NaN for NaN, and pass a NaN gradient on
    where they pass the gradient."""
    x = fg.tensor([nan, 1.0])
    for out in [x.relu(), x.clamp(0.0, 0.5), fg.maximum(x, fg.zeros(2)), x.max().reshape(1), x.amax(0, True)]:
        assert math.isnan(out.tolist()[0])
    x = fg.tensor([0.25], requires_grad=True)
    for fn in (lambda x: x.relu(), lambda x: x.clamp(0.0, 0.5), lambda x: fg.maximum(x, fg.zeros(1))):
        x.grad = None
        fn(x).backward(fg.tensor([nan]))
        assert math.isnan(x.grad.tolist()[0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("magnitude", [1e4, -1e4])
def test_softmax_family_stays_finite_at_large_logits(fg, torch, dtype, magnitude):
    rows = [[magnitude, 0.0, -magnitude, 1.0], [magnitude] * 4, [magnitude, magnitude - 1, 0.0, -1.0]]
    target = [0, 3, 2]
    cases = {
        "softmax": lambda m, x: x.softmax(1),
        "log_softmax": lambda m, x: x.log_softmax(1),
        "cross_entropy": lambda m, x: _functional(m).cross_entropy(x, m.tensor(target)),
        "cross_entropy(none)": lambda m, x: _functional(m).cross_entropy(x, m.tensor(target), reduction="none"),
        "cross_entropy(label_smoothing)": lambda m, x: _functional(m).cross_entropy(
            x, m.tensor(target), label_smoothing=0.2
        ),
        "nll_loss(log_softmax)": lambda m, x: _functional(m).nll_loss(x.log_softmax(1), m.tensor(target)),
    }
    for name, fn in cases.items():
        value, (grad,) = _run(fg, fn, [rows], dtype)
        assert np.isfinite(value).all() and np.isfinite(grad).all(), name
        _assert_like_torch(fg, torch, fn, [rows], dtype)


def test_division_gradient_does_not_overflow(fg, torch):
    """d(a/b)/db = -(a/b)/b, not -a/(b*b): b*b overflows float32 at 1e20."""
    fn = BINARY["div"]
    _assert_like_torch(fg, torch, fn, [[1e30, inf, -inf, 1e20], [1e30, 1e30, 1e30, 1e25]], "float32")
    _, (_, grad_b) = _run(fg, fn, [[1e30], [1e30]], "float32")
    assert grad_b[0] == pytest.approx(-1e-30, rel=1e-5)


def test_gelu_of_inf(fg, torch):
    """gelu(inf) = inf * P(X <= inf) = inf, as PyTorch gives in float64 and for a single float32 value;
    its vectorized float32 kernel gives NaN for longer tensors, which fastgrad does not copy."""
    for dtype in DTYPES:
        x = fg.tensor([inf] * 9, dtype=getattr(fg, dtype))
        assert _functional(fg).gelu(x).tolist() == [inf] * 9
    assert _functional(torch).gelu(torch.tensor([inf])).item() == inf
    assert _functional(torch).gelu(torch.tensor([inf] * 9, dtype=torch.float64)).tolist() == [inf] * 9


def test_huber_losses_at_infinity_have_unit_slope(fg):
    """Their quadratic branch, not taken there, must not send 0 * inf = NaN back."""
    for loss in (_functional(fg).smooth_l1_loss, _functional(fg).huber_loss):
        x = fg.tensor([inf, -inf, 3.0], requires_grad=True)
        loss(x, fg.zeros(3), reduction="sum").backward()
        assert x.grad.tolist() == [1.0, -1.0, 1.0]


INVALID_OPERATIONS = {  # name: (program, PyTorch's sign bits differ: its MKL sqrt/pow give +NaN)
    "0/0": (lambda m: m.zeros(2) / m.zeros(2), False),
    "x % 0": (lambda m: m.tensor([1.5, -1.5]) % 0, False),
    "fmod(inf, 2)": (lambda m: m.fmod(m.tensor([math.inf, -math.inf], dtype=m.float64), 2), False),
    "log1p(-2)": (lambda m: m.log1p(m.tensor([-2.0, -3.0])), False),
    "sin(inf)": (lambda m: m.sin(m.tensor([math.inf, -math.inf])), False),
    "NaN / 0 propagates": (lambda m: m.tensor([math.nan, -math.nan]) / 0, False),
    "sqrt(-1)": (lambda m: m.sqrt(m.tensor([-1.0, -2.0])), True),
    "(-2) ** 0.5": (lambda m: m.pow(m.tensor([-2.0, -3.0]), 0.5), True),
}


@pytest.mark.parametrize("name", INVALID_OPERATIONS)
def test_nan_sign_of_invalid_operations(fg, torch, name):
    """x86's default NaN (sign set) from an invalid operation, a NaN operand's own sign otherwise: the
    same bits on both backends (so copysign(x, x % 0) agrees), and PyTorch's but for its MKL sqrt/pow."""
    program, unlike_torch = INVALID_OPERATIONS[name]
    ours, theirs = (np.signbit(np.asarray(program(m).tolist())).tolist() for m in (fg, torch))
    assert (ours != theirs) == unlike_torch and all(np.isnan(program(fg).tolist()))
    if unlike_torch:
        assert ours == [True, True]
