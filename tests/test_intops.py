"""The operators // % & | ^ ~ (floor_divide, remainder, bitwise_and/or/xor/not), fmod and logical_*,
in their operator, named, reflected and in-place forms: values, dtypes, errors and gradients, on
both backends against PyTorch."""

import operator

import pytest

from oracle_helpers import plain, same_error

DTYPES = ["bool", "int64", "float32", "float64"]
DATA = {  # per dtype: (dividend, divisor); the bool divisor's False divides integers by zero
    "bool": ([True, False, True, True], [True, True, False, True]),
    "int64": ([7, -7, 0, -9], [2, -3, 4, 5]),
    "float32": ([7.5, -7.5, -0.0, -9.25], [2.0, -3.0, 0.5, -1.5]),
    "float64": ([7.5, -7.5, 0.0, -9.25], [-2.0, 3.0, 0.75, 1.5]),
}
SCALARS = [True, 3, -2, 0, 2.5, -0.75, 0.0]
BINARY = {  # name: (op(m, a, b), whether a number may come first)
    "//": (lambda m, a, b: a // b, True),
    "%": (lambda m, a, b: a % b, True),
    "fmod": (lambda m, a, b: m.fmod(a, b), False),
    "&": (lambda m, a, b: a & b, True),
    "|": (lambda m, a, b: a | b, True),
    "^": (lambda m, a, b: a ^ b, True),
    "floor_divide": (lambda m, a, b: m.floor_divide(a, b), True),
    "remainder": (lambda m, a, b: m.remainder(a, b), True),
    "bitwise_xor": (lambda m, a, b: m.bitwise_xor(a, b), True),
    "div floor": (lambda m, a, b: m.div(a, b, rounding_mode="floor"), False),
    "div trunc": (lambda m, a, b: a.div(b, rounding_mode="trunc"), False),
    "logical_and": (lambda m, a, b: m.logical_and(a, b), False),
    "logical_xor": (lambda m, a, b: m.logical_xor(a, b), False),
}


def outcome(program, m):
    """The result (values, dtype, requires_grad; repr, so that NaN and -0.0 compare) or the exception."""
    try:
        return repr(plain(program(m)))
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def outcomes(m, programs):
    return {label: outcome(program, m) for label, program in programs.items()}


def assert_same_outcomes(fg, torch, programs):
    ours, theirs = outcomes(fg, programs), outcomes(torch, programs)
    for label in programs:
        assert ours[label] == theirs[label], label


def data(m, dtype, which=0, requires_grad=False):
    return m.tensor(DATA[dtype][which], dtype=getattr(m, dtype), requires_grad=requires_grad)


@pytest.mark.parametrize("name", BINARY)
def test_every_dtype_pair_and_number_gives_pytorchs_result_or_error(fg, torch, name):
    op, number_first = BINARY[name]
    programs = {}
    for a in DTYPES:
        for b in DTYPES:
            programs[f"{a} {name} {b}"] = lambda m, a=a, b=b: op(m, data(m, a), data(m, b, 1))
        for s in SCALARS:
            programs[f"{a} {name} {s!r}"] = lambda m, a=a, s=s: op(m, data(m, a), s)
            if number_first:
                programs[f"{s!r} {name} {a}"] = lambda m, a=a, s=s: op(m, s, data(m, a, 1))
        # 0-d tensors promote as numbers do: they raise the category, never the width
        programs[f"{a} {name} shapes that do not broadcast"] = lambda m, a=a: op(m, data(m, a), data(m, a)[:3])
        programs[f"{a} {name} 0-d int64"] = lambda m, a=a: op(m, data(m, a), m.tensor(3))
        programs[f"{a} {name} 0-d float64"] = lambda m, a=a: op(m, data(m, a), m.tensor(-1.5, dtype=m.float64))
    assert_same_outcomes(fg, torch, programs)


def test_division_edge_values_match_pytorch(fg, torch):
    inf, nan = float("inf"), float("nan")
    floats = [inf, -inf, nan, 5.0, -5.0, 0.0, -0.0, 1e-30, 7.0, -7.0]
    divisors = [2.0, -2.0, 3.0, inf, -inf, 0.0, -0.0, 3.0, 1e-30, -1e-30]
    programs = {}
    for dtype in ["float32", "float64"]:
        for name in ["//", "%", "fmod", "div trunc"]:
            op = BINARY[name][0]
            programs[f"{dtype} {name}"] = lambda m, op=op, d=dtype: op(
                m, m.tensor(floats, dtype=getattr(m, d)), m.tensor(divisors, dtype=getattr(m, d))
            )
            programs[f"{dtype} {name} 0"] = lambda m, op=op, d=dtype: op(m, m.tensor(floats, dtype=getattr(m, d)), 0)
    big = -(2**63)
    programs.update(
        {
            "int64 min // -1": lambda m: m.tensor([big, 2**63 - 1]) // -1,
            "int64 min % -1": lambda m: m.tensor([big]) % m.tensor([-1]),
            "int64 min fmod -1": lambda m: m.fmod(m.tensor([big]), -1),
            "int64 trunc division": lambda m: m.div(
                m.tensor([7, -7, 7, -7, big]), m.tensor([2, 2, -2, -2, 3]), rounding_mode="trunc"
            ),
            "int // 0": lambda m: m.tensor([1, 2]) // 0,
            "int % zero tensor": lambda m: m.tensor([1, 2]) % m.tensor([1, 0]),
            "0 // int tensor": lambda m: 0 // m.tensor([3, 0]),
            "fmod int by zero": lambda m: m.fmod(m.tensor([4]), m.tensor(0)),
            "empty int // 0": lambda m: m.zeros(0, dtype=m.int64) // 0,
            "empty int % zero tensor": lambda m: m.zeros(2, 0, dtype=m.int64) % m.zeros(1, dtype=m.int64),
            "bool // True": lambda m: m.tensor([True]) // True,
            "fmod of bools": lambda m: m.fmod(m.tensor([True]), True),
            "number % bool": lambda m: 2 % m.tensor([True]),
        }
    )
    assert_same_outcomes(fg, torch, programs)


def test_unary_bitwise_and_logical_not_match_pytorch(fg, torch):
    programs = {}
    for dtype in DTYPES:
        programs[f"~{dtype}"] = lambda m, d=dtype: ~data(m, d)
        programs[f"bitwise_not({dtype})"] = lambda m, d=dtype: m.bitwise_not(data(m, d))
        programs[f"{dtype}.bitwise_not()"] = lambda m, d=dtype: data(m, d).bitwise_not()
        programs[f"logical_not({dtype})"] = lambda m, d=dtype: m.logical_not(data(m, d, requires_grad=d[0] == "f"))
        programs[f"{dtype}.logical_or"] = lambda m, d=dtype: data(m, d).logical_or(m.tensor([0.0, 0.0, 1.0, 0.0]))
    programs["~ of a 0-d bool"] = lambda m: ~m.tensor(False)
    programs["logical_and with a number"] = lambda m: m.logical_and(m.tensor([1]), 1)
    programs["logical_and of NaN"] = lambda m: m.logical_and(m.tensor([float("nan"), 0.0]), m.tensor([1, 1]))
    assert_same_outcomes(fg, torch, programs)


def test_layouts_and_broadcasting_give_pytorchs_result(fg, torch):
    """Strided, transposed and expanded operands, broadcasting and size-0 shapes."""

    def operands(m, dtype):
        base = m.arange(-12, 12).reshape(4, 6).to(getattr(m, dtype))
        strided = base.t()[::2]  # (3, 4), not contiguous
        expanded = m.tensor([[3], [-5], [7]]).to(getattr(m, dtype)).expand(3, 4)  # stride 0
        return strided, expanded

    programs = {}
    for dtype in ["int64", "float64", "bool"]:
        for name in ["//", "%", "fmod", "div trunc", "&", "|", "^"]:
            op = BINARY[name][0]
            programs[f"{dtype} {name} strided/expanded"] = lambda m, op=op, d=dtype: op(m, *operands(m, d))
            programs[f"{dtype} {name} broadcast"] = lambda m, op=op, d=dtype: op(
                m, operands(m, d)[0][:, None, :], operands(m, d)[1][:1, :]
            )
            programs[f"{dtype} {name} size 0"] = lambda m, op=op, d=dtype: op(
                m, m.ones(0, 4, dtype=getattr(m, d)), operands(m, d)[1][0]
            )
    assert_same_outcomes(fg, torch, programs)


def test_floor_divide_and_number_remainder_have_no_derivative(fg, torch):
    """As PyTorch: the result requires grad with a NotImplemented node (one edge per tensor), and
    backward through it raises."""

    def graph(m, form):
        x = m.tensor([7.5, -7.5, 1.0], dtype=m.float64, requires_grad=True)
        y = m.tensor([2.0, 3.0, -2.0], dtype=m.float64, requires_grad=True)
        out = form(m, x, y)
        return out, out.requires_grad, out.grad_fn.name(), len(out.grad_fn.next_functions)

    forms = {
        "x // y": lambda m, x, y: x // y,
        "x // 2": lambda m, x, y: x // 2,
        "2 // x": lambda m, x, y: 2 // x,
        "floor_divide(x, y)": lambda m, x, y: m.floor_divide(x, y),
        "2 % x": lambda m, x, y: 2 % x,
        "remainder(2, x)": lambda m, x, y: m.remainder(2, x),
        "x // int": lambda m, x, y: x // m.tensor([2, 3, 4]),
        "x * 1 //= y": lambda m, x, y: (x * 1).floor_divide_(y),
        "x // no-grad y": lambda m, x, y: x // y.detach(),
        "int // x": lambda m, x, y: m.tensor([2, 3, 4]) // x,
    }
    assert_same_outcomes(fg, torch, {label: lambda m, f=f: graph(m, f) for label, f in forms.items()})
    for form in forms.values():
        same_error(fg, torch, lambda m, f=form: graph(m, f)[0].sum().backward())


def test_div_with_a_rounding_mode_records_a_zero_gradient(fg, torch):
    def graph(m, form):
        x = m.tensor([7.5, -7.5, 1.0], requires_grad=True)
        y = m.tensor([2.0, 3.0, -2.0], requires_grad=True)
        out = form(m, x, y)
        out.backward(m.ones_like(out))
        return out, out.grad_fn.name(), len(out.grad_fn.next_functions), x.grad, y.grad

    assert_same_outcomes(
        fg,
        torch,
        {
            label: lambda m, f=f: graph(m, f)
            for label, f in {
                "div(x, y, floor)": lambda m, x, y: m.div(x, y, rounding_mode="floor"),
                "x.div(2, trunc)": lambda m, x, y: x.div(2, rounding_mode="trunc"),
                "div(x, no-grad y[0], trunc)": lambda m, x, y: m.div(x, y.detach()[0], rounding_mode="trunc"),
            }.items()
        },
    )
    same_error(fg, torch, lambda m: m.div(m.ones(2), 2, rounding_mode="round"))


def test_remainder_and_fmod_gradients_match_pytorch_and_finite_differences(fg, torch):
    """d/da = 1, d/db = -(a / b rounded down for remainder, toward zero for fmod); for numbers and 0-d
    tensors too; then gradcheck in float64. (op_cases.py runs them over every layout.)"""
    forms = {
        "a % b": lambda m, a, b: a % b,
        "fmod(a, b)": lambda m, a, b: m.fmod(a, b),
        "a % b[0]": lambda m, a, b: a % b[0],
        "a.fmod(-0.75)": lambda m, a, b: a.fmod(-0.75),
        "a.remainder(2)": lambda m, a, b: a.remainder(2),
        "b % a[:, :1]": lambda m, a, b: b % a[:, :1],
    }

    def grads(m, form):
        a = m.tensor([[7.5, -7.5, 1.25], [5.0, -0.3, 2.2]], dtype=m.float64, requires_grad=True)
        b = m.tensor([2.0, -3.0, 0.5], dtype=m.float64, requires_grad=True)
        out = form(m, a, b)
        out.backward(m.ones_like(out) * m.tensor([1.0, -2.0, 0.5], dtype=m.float64))
        return out, out.grad_fn.name(), a.grad, b.grad

    assert_same_outcomes(fg, torch, {label: lambda m, f=form: grads(m, f) for label, form in forms.items()})
    a = fg.tensor([[7.3, -7.4, 1.25], [5.1, -0.3, 2.2]], dtype=fg.float64, requires_grad=True)
    b = fg.tensor([2.0, -3.0, 0.7], dtype=fg.float64, requires_grad=True)
    for form in forms.values():
        assert fg.autograd.gradcheck(lambda a, b, f=form: f(fg, a, b), (a, b))


def test_remainder_reads_its_operands_only_for_the_divisors_gradient(fg, torch):
    """As PyTorch: operands written in place after the op fail backward only if the divisor needs a
    gradient (the only formula that reads them)."""

    def backward_after_in_place_writes(m, op, divisor_requires_grad):
        x = m.tensor([5.0, -3.5], requires_grad=True)
        dividend = x * 1
        divisor = x * 0 + 2 if divisor_requires_grad else m.tensor([2.0, 1.5])
        out = op(m, dividend, divisor)
        dividend.add_(1)
        divisor.add_(1)
        try:
            out.sum().backward()
        except RuntimeError as e:  # the messages differ in the library's name
            return "modified by an inplace operation" in str(e)
        return x.grad

    assert_same_outcomes(
        fg,
        torch,
        {
            f"{name}, divisor requires grad: {flag}": lambda m, n=name, f=flag: backward_after_in_place_writes(
                m, BINARY[n][0], f
            )
            for name in ["%", "fmod"]
            for flag in [False, True]
        },
    )


AUGMENTED = {  # statement, the dtype it runs on, its operand
    "t //= 2": (operator.ifloordiv, "float32", 2),
    "t %= 3": (operator.imod, "int64", 3),
    "t //= other": (operator.ifloordiv, "int64", "int64"),
    "t %= other": (operator.imod, "float64", "float64"),
    "m &= other": (operator.iand, "bool", "bool"),
    "t |= 8": (operator.ior, "int64", 8),
    "t ^= mask": (operator.ixor, "int64", "bool"),
    "m ^= True": (operator.ixor, "bool", True),
    "t.floor_divide_(-2.5)": (lambda t, o: t.floor_divide_(o), "float64", -2.5),
    "t.remainder_(other)": (lambda t, o: t.remainder_(o), "int64", "int64"),
    "t.fmod_(other)": (lambda t, o: t.fmod_(o), "float32", "float32"),
    "t.bitwise_and_(6)": (lambda t, o: t.bitwise_and_(o), "int64", 6),
    "t.bitwise_or_(other)": (lambda t, o: t.bitwise_or_(o), "int64", "int64"),
    "t.bitwise_xor_(other)": (lambda t, o: t.bitwise_xor_(o), "bool", "bool"),
    "t.bitwise_not_()": (lambda t, o: t.bitwise_not_(), "int64", None),
}


@pytest.mark.parametrize("label", AUGMENTED)
def test_augmented_assignment_writes_in_place_on_a_tensor_and_on_a_view(fg, torch, label):
    op, dtype, operand = AUGMENTED[label]

    def run(m, through_view):
        other = data(m, operand, 1) if isinstance(operand, str) else operand
        base = m.stack([data(m, dtype), data(m, dtype)])
        t = base[1] if through_view else base[0]
        before = id(t)
        t = op(t, other)
        return t, id(t) == before, base

    assert_same_outcomes(fg, torch, {"tensor": lambda m: run(m, False), "view": lambda m: run(m, True)})


def test_in_place_errors_match_pytorch(fg, torch):
    cases = {
        "a leaf that requires grad": lambda m: m.ones(2, requires_grad=True).__ifloordiv__(2),
        "a view of such a leaf": lambda m: m.ones(2, requires_grad=True)[:1].__imod__(2),
        "an integer by a float": lambda m: m.tensor([5, 6]).__ifloordiv__(2.5),
        "an integer by a float tensor": lambda m: m.tensor([5, 6]).remainder_(m.tensor([1.5])),
        "bool &= int": lambda m: m.tensor([True, False]).__iand__(m.tensor([1, 2])),
        "bool &= 1": lambda m: m.tensor([True, False]).bitwise_and_(1),
        "int &= 1.5 (the cast is checked first)": lambda m: m.tensor([1, 2]).__iand__(1.5),
        "float &= 1": lambda m: m.tensor([1.0]).__iand__(1),
        "float.bitwise_not_()": lambda m: m.tensor([1.0]).bitwise_not_(),
        "int //= 0": lambda m: m.tensor([1, 2]).__ifloordiv__(0),
        "a broadcast result": lambda m: m.tensor([1, 2]).__ior__(m.ones(2, 2, dtype=m.int64)),
    }
    for program in cases.values():
        same_error(fg, torch, program)


def test_in_place_remainder_through_a_view_sends_pytorchs_gradients(fg, torch):
    def grads(m):
        x = m.tensor([7.5, -7.5, 1.25, 3.0], dtype=m.float64, requires_grad=True)
        y = m.tensor([2.0, -0.5], dtype=m.float64, requires_grad=True)
        t = x * 1
        view = t[1:3]
        view %= y
        t.fmod_(1.5)
        t.sum().backward()
        return t, t.grad_fn.name(), x.grad, y.grad

    assert_same_outcomes(fg, torch, {"grads": grads})


def test_named_forms_take_pytorchs_arguments(fg, torch):
    t = lambda m: m.tensor([5, -6, 7])  # noqa: E731
    assert_same_outcomes(
        fg,
        torch,
        {
            "remainder(number, tensor)": lambda m: m.remainder(5, m.tensor([2, -3])),
            "floor_divide(number, tensor)": lambda m: m.floor_divide(-7.5, m.tensor([2, -3])),
            "bitwise_or(number, tensor)": lambda m: m.bitwise_or(8, t(m)),
            "bitwise_and(tensor, number)": lambda m: m.bitwise_and(t(m), True),
            "Tensor.remainder": lambda m: t(m).remainder(m.tensor(4)),
            "Tensor.floor_divide": lambda m: t(m).floor_divide(-4),
            "Tensor.bitwise_xor": lambda m: t(m).bitwise_xor(t(m)),
            "out=": lambda m: m.remainder(t(m), 4, out=m.empty(3, dtype=m.int64)),
            "logical_or(out=)": lambda m: m.logical_or(t(m), t(m), out=m.empty(3, dtype=m.bool)),
        },
    )
    # A TypeError for operands of the wrong type (PyTorch's message lists its overloads).
    for program in [
        lambda m: m.floor_divide(t(m), "a"),
        lambda m: m.fmod(5, t(m)),
        lambda m: t(m) // "a",
        lambda m: t(m) & [1],
        lambda m: m.remainder("a", t(m)),
        lambda m: t(m).bitwise_and_(None),
    ]:
        for m in (fg, torch):
            with pytest.raises(TypeError):
                program(m)
