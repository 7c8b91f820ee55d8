"""Elementwise math of issue 13 against PyTorch, beyond the op cases (tests/op_cases.py, which
check values and gradients with gradcheck): special values (inf, NaN, -0.0, poles), result dtypes
of integer and bool inputs, the in-place forms (values, histories, gradients, refusals), and
gradients of gradients that go deeper than the op cases' second order."""

import math

import pytest

from oracle_helpers import same_error, same_on_both

FLOAT_FUNCTIONS = ["log10", "log2", "exp2", "sinh", "cosh", "asinh", "acosh", "atanh", "asin", "acos", "atan"]
FLOAT_FUNCTIONS += ["erf", "erfc", "erfinv", "lgamma", "digamma", "rsqrt", "reciprocal", "deg2rad", "rad2deg"]
ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh", "arccosh": "acosh"}
ALIASES["arctanh"] = "atanh"
SPECIAL = [0.3, -0.7, 1.5, 0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, -2.0, 1e-30, 50.0, -50.5, 100.0]


def spelled(t):
    """float64 values as text to 12 digits: NaNs compare equal."""
    return [f"{v:.12g}" for v in t.tolist()]


def close_values(m, t):
    """(rounded values as text, dtype name): NaNs, infs and signed zeros compare; float32 rounding
    may differ in the last places between the libraries' math libraries."""
    spelled = [f"{v:.5g}" if math.isfinite(v) and v != 0 else repr(v) for v in t.double().tolist()]
    return spelled, str(t.dtype).rsplit(".", 1)[-1]


@pytest.mark.parametrize("name", FLOAT_FUNCTIONS)
def test_special_values_and_dtypes(fg, torch, name):
    def program(m):
        op = getattr(m, name)
        results = [close_values(m, op(m.tensor(SPECIAL, dtype=dt))) for dt in (m.float32, m.float64)]
        return results + [str(op(m.tensor(v)).dtype) for v in ([1, 2, 3], [True, False])]

    ours, theirs = program(fg), program(torch)
    assert ours[:2] == theirs[:2]
    assert [d.replace("fastgrad", "torch") for d in ours[2:]] == theirs[2:]


UNARY_OPS = ["neg", "negative", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tanh"]
UNARY_OPS += ["sigmoid", "relu"]
NO_IN_PLACE_DERIVATIVE = ["asinh", "acosh", "atanh", "arcsinh", "arccosh", "arctanh"]  # PyTorch's backward raises


def method_call(m, x, name):
    return getattr(x, name)()


def function_call(m, x, name):
    return getattr(m, name)(x)


def in_place_program(name, backward, call=method_call):
    def program(m):
        leaf = m.tensor([0.6, 0.25, 0.8], dtype=m.float64, requires_grad=True)
        x = leaf * 1
        y = call(m, x, f"{name}_")
        recorded = y is x, x.grad_fn.name(), x._version, spelled(x)
        if backward:
            y.sum().backward()
        with m.no_grad():
            plain = m.tensor([0.6, 0.25], dtype=m.float64)
            call(m, plain, f"{name}_")
        return recorded, leaf.grad is None or spelled(leaf.grad), spelled(plain)

    return program


@pytest.mark.parametrize("name", FLOAT_FUNCTIONS + list(ALIASES) + UNARY_OPS)
def test_in_place_forms(fg, torch, name):
    """x.<name>_() writes the op's values into x, whose history becomes the op's node; a leaf's
    gradient flows through it (or, as PyTorch's, backward raises: asinh_, acosh_, atanh_)."""
    backward = name not in NO_IN_PLACE_DERIVATIVE
    same_on_both(fg, torch, in_place_program(name, backward))
    if not backward:
        same_error(fg, torch, in_place_program(name, True))


# PyTorch's module has the in-place form of each of these but erfinv, lgamma, digamma and sign
MODULE_IN_PLACE = [n for n in FLOAT_FUNCTIONS + list(ALIASES) + UNARY_OPS if n not in ("erfinv", "lgamma", "digamma")]
MODULE_IN_PLACE.remove("sign")


@pytest.mark.parametrize("name", MODULE_IN_PLACE)
def test_module_in_place_functions(fg, torch, name):
    """torch.<name>_(x) is x.<name>_(): same values, node and gradient; an integer tensor is refused."""
    same_on_both(fg, torch, in_place_program(name, name not in NO_IN_PLACE_DERIVATIVE, function_call))
    if name not in ("neg", "negative", "abs", "relu"):  # float results: an integer tensor cannot hold them
        error = same_error(fg, torch, lambda m: getattr(m, f"{name}_")(m.tensor([1, 2])))
        assert isinstance(error, RuntimeError)


def test_in_place_functions_only_where_pytorch_has_them(fg, torch):
    names = [f"{n}_" for n in FLOAT_FUNCTIONS + list(ALIASES) + UNARY_OPS + ["sgn", "fmod", "bitwise_not"]]
    assert [hasattr(fg, n) for n in names] == [hasattr(torch, n) for n in names]


@pytest.mark.parametrize("name", ["exp2", "log10", "sqrt", "sigmoid"])
def test_in_place_form_refuses_an_integer_tensor_and_a_leaf(fg, torch, name):
    same_error(fg, torch, lambda m: getattr(m.tensor([1, 2]), f"{name}_")())
    same_error(fg, torch, lambda m: getattr(m.tensor([1.0, 2.0], requires_grad=True), f"{name}_")())


def test_out_keyword(fg, torch):
    def program(m):
        out = m.empty(3)
        result = m.erfinv(m.tensor([0.5, -0.25, 0.0]), out=out)
        return result is out, close_values(m, out)

    same_on_both(fg, torch, program)


def test_digamma_derivatives_of_any_order(fg, torch):
    """digamma's gradient is polygamma(1, x), whose gradient is polygamma(2, x), and so on."""

    def program(m):
        x = m.tensor([0.7, -1.3, 3.0, 12.5], dtype=m.float64, requires_grad=True)
        y, orders = m.lgamma(x).sum(), []
        for _ in range(4):
            (y,) = m.autograd.grad(y, x, create_graph=True)
            orders.append([round(v, 9) for v in y.tolist()])
            y = y.sum()
        return orders

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("name", FLOAT_FUNCTIONS)
def test_backward_reads_what_pytorch_saves(fg, torch, name):
    """Writing over the op's input, or its result, after the op: backward refuses where PyTorch's
    does (the tensor it saved was modified), and runs where PyTorch's does."""

    def outcome(m, overwrite_result):
        x = m.tensor([0.6, 0.25], dtype=m.float64, requires_grad=True) * 1
        y = getattr(x, name)()
        with m.no_grad():
            (y if overwrite_result else x).mul_(1)
        try:
            y.sum().backward()
        except RuntimeError as e:
            return "modified by an inplace operation" in str(e)
        return "ran"

    for overwrite_result in (False, True):
        assert outcome(fg, overwrite_result) == outcome(torch, overwrite_result)


def test_predicates(fg, torch):
    """Bool results with no history, for floats (special values, -0.0 and -NaN), integers and bools."""

    def program(m):
        floats = m.tensor([1.0, -0.0, 0.0, math.nan, -math.nan, math.inf, -math.inf, -2.5], requires_grad=True)
        results = []
        for x in (floats, m.tensor([3, -1, 0]), m.tensor([True, False])):
            for name in ["signbit", "isnan", "isinf", "isposinf", "isneginf", "isfinite", "isreal"]:
                results += [getattr(m, name)(x), getattr(x, name)()]
        out = m.empty(8, dtype=m.bool)
        return results, m.isposinf(floats, out=out) is out, out, m.signbit(floats, out=out)

    same_on_both(fg, torch, program)


def test_square(fg, torch):
    """pow(x, 2), as PyTorch's: PowBackward0, bools become int64; square_ writes in place."""

    def program(m):
        x = m.tensor([1.5, -2.0], requires_grad=True)
        y = m.square(x)
        z = x * 1
        z.square_()
        (y + z).sum().backward()
        ints = m.tensor([3, -2])
        ints.square_()
        return y, y.grad_fn.name(), z.grad_fn.name(), x.grad, m.square(m.tensor([True, False])), ints

    same_on_both(fg, torch, program)
    same_error(fg, torch, lambda m: m.tensor([True]).square_())
