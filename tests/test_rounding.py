"""Rounding and sign ops of issue 13 against PyTorch, beyond the op cases (tests/op_cases.py): special
values and signed zeros, dtypes (integers kept or refused, bools refused), round's decimals,
nan_to_num's replacements, gradients (sgn's, which the op cases cannot take), the in-place and out=
forms."""

import math

import pytest

from oracle_helpers import same_on_both

SPECIAL = [0.5, 1.5, 2.5, -0.5, -2.5, 2.675, -0.3, 0.0, -0.0, 1234.5678, 1e20, math.inf, -math.inf, math.nan]
PROGRAMS = {
    "floor": lambda m, x: m.floor(x),
    "ceil": lambda m, x: x.ceil(),
    "trunc": lambda m, x: m.trunc(x),
    "fix": lambda m, x: x.fix(),
    "round": lambda m, x: m.round(x),
    "round(decimals=2)": lambda m, x: m.round(x, decimals=2),
    "round(decimals=-1)": lambda m, x: x.round(decimals=-1),
    "round(decimals=50)": lambda m, x: x.round(decimals=50),  # 10^50 is inf in float32
    "round(decimals=int64 min)": lambda m, x: x.round(decimals=-(2**63)),  # its negation overflowed
    "frac": lambda m, x: m.frac(x),
    "sgn": lambda m, x: x.sgn(),
    "nan_to_num": lambda m, x: m.nan_to_num(x),
    "nan_to_num(values)": lambda m, x: x.nan_to_num(nan=-1.0, posinf=1e40, neginf=2.5),
}


def spelled(t):
    """(exact values as text, dtype name): NaNs and signed zeros compare."""
    return [repr(v) for v in t.double().tolist()], str(t.dtype).rsplit(".", 1)[-1]


def outcome(program):
    """The spelled result, or the exception's type and message."""
    try:
        return spelled(program())
    except Exception as e:  # noqa: BLE001 (the outcome compared is the exception)
        return type(e).__name__, str(e)


@pytest.mark.parametrize("name", PROGRAMS)
def test_special_values_and_dtypes(fg, torch, name):
    """Floats of three widths with their special values; integers and bools kept, or refused with
    PyTorch's NotImplementedError ("frac_cpu" not implemented for 'Long')."""

    def program(m):
        floats = [PROGRAMS[name](m, m.tensor(SPECIAL, dtype=dt)) for dt in (m.float32, m.float64, m.float16)]
        integers = [m.tensor([3, 0, 250], dtype=dt) for dt in (m.int64, m.int32, m.uint8)]
        return [spelled(t) for t in floats] + [
            outcome(lambda x=x: PROGRAMS[name](m, x)) for x in integers + [m.tensor([True, False])]
        ]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("name", PROGRAMS)
def test_gradients(fg, torch, name):
    """Zero for the piecewise constant ops (sgn's too), the incoming gradient for frac, and for
    nan_to_num where the input is finite."""

    def program(m):
        x = m.tensor([0.3, -1.7, 2.5, math.nan, math.inf], dtype=m.float64, requires_grad=True)
        y = PROGRAMS[name](m, x)
        (y * m.arange(1.0, 6.0, dtype=m.float64)).sum().backward()
        return y.grad_fn.name(), spelled(x.grad + 0)  # + 0: PyTorch gives sgn a ZeroTensor

    same_on_both(fg, torch, program)


def test_argument_types(fg, torch):
    """A float for decimals, a string for a replacement: TypeErrors."""
    for program in (lambda m: m.round(m.ones(2), decimals=1.5), lambda m: m.ones(2).nan_to_num(nan="a")):
        for m in (fg, torch):
            with pytest.raises(TypeError):
                program(m)


IN_PLACE = [
    ("floor", {}),
    ("ceil", {}),
    ("trunc", {}),
    ("fix", {}),
    ("round", {}),
    ("round", {"decimals": 1}),
    ("frac", {}),
    ("sgn", {}),
    ("nan_to_num", {"posinf": 3.0}),
]


@pytest.mark.parametrize("name, options", IN_PLACE)
def test_in_place_and_out_forms(fg, torch, name, options):
    """x.<name>_() writes the op's values into x, whose history becomes the op's node; out= writes
    into the given tensor."""

    def program(m):
        leaf = m.tensor([0.66, -1.25, math.inf], dtype=m.float64, requires_grad=True)
        x = leaf * 1
        y = getattr(x, f"{name}_")(**options)
        recorded = y is x, x.grad_fn.name(), x._version, spelled(x)
        x.sum().backward()
        out = m.empty(3)
        result = getattr(m, name)(m.tensor([0.66, -1.25, -2.5]), **options, out=out)
        return recorded, spelled(leaf.grad + 0), result is out, spelled(out)

    same_on_both(fg, torch, program)
