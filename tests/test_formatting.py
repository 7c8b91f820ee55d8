"""fastgrad._formatting must print exactly what PyTorch prints for the same data."""

import importlib.util
import pathlib
import tracemalloc

import numpy as np
import pytest

torch = pytest.importorskip("torch")

# Loaded by path so that fastgrad/__init__.py (which needs the compiled core) never runs.
_PATH = pathlib.Path(__file__).resolve().parents[1] / "python" / "fastgrad" / "_formatting.py"
_spec = importlib.util.spec_from_file_location("fastgrad_formatting", _PATH)
formatting = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(formatting)

INF, NAN = float("inf"), float("nan")


def _handpicked():
    f32, f64 = np.float32, np.float64
    return [
        # 0-d
        np.array(30.0, f32),
        np.array(0.5, f32),
        np.array(-0.0, f32),
        np.array(NAN, f32),
        np.array(-INF, f64),
        np.array(1e10, f32),
        np.array(1e-6, f64),
        np.array(0.0, f32),
        np.array(7, np.int64),
        np.array(True),
        np.array(0.1, f32),
        # int mode, fixed, scientific, and the edges of each rule
        np.array([2.0], f32),
        np.array([1, 2, 3], f32),
        np.array([-1.5, 0.25, 3], f32),
        np.array([1.0, 1000.0], f32),
        np.array([1.0, 1001.0], f32),
        np.array([1e8], f32),
        np.array([1.5e8], f64),
        np.array([1e-4], f64),
        np.array([9e-5], f64),
        np.array([1e10, 1.0], f32),
        np.array([123456789.0], f64),
        np.array([0.1, 0.2, 0.3], f64),
        # zeros, negative zero, nan and inf never pick the style or the width
        np.array([0.0, 0.0], f32),
        np.array([-0.0, 1.5], f32),
        np.array([-0.0, 2.0], f32),
        np.array([NAN, INF, -INF], f32),
        np.array([NAN, 1.0, -INF], f32),
        np.array([NAN, 0.5, INF], f64),
        np.array([1e-5, NAN, 1e5, -INF], f32),
        # line wrapping of vectors and of rows inside matrices
        np.arange(30, dtype=f32),
        np.arange(30, dtype=f32) / 7,
        np.arange(60, dtype=f64) * 1e6,
        np.arange(30, dtype=f32).reshape(2, 15) / 3,
        np.arange(100, dtype=np.int64) ** 3,
        # nesting
        np.arange(6, dtype=f32).reshape(2, 3),
        np.arange(24, dtype=f32).reshape(2, 3, 4) - 10,
        np.arange(48, dtype=f64).reshape(2, 2, 3, 4) / 9,
        np.ones((1, 1, 1, 1), f32),
        # ints and bools
        np.array([1, -2, 300], np.int64),
        np.array([2**62, -(2**63)], np.int64),
        np.array([True, False]),
        np.array([[True], [True]]),
        np.array([False] * 30),
        # empty
        np.zeros(0, f32),
        np.zeros((0, 3), f32),
        np.zeros((2, 0, 4), f64),
        np.zeros(0, np.int64),
        np.zeros((3, 0), bool),
        np.zeros(0, f64),
        # summarized (more than 1000 elements)
        np.arange(1001, dtype=f32),
        np.arange(2000, dtype=np.int64),
        np.linspace(-1, 1, 1200),
        np.arange(1200, dtype=f32).reshape(40, 30) / 3,
        np.arange(1001, dtype=f32).reshape(1, 1001),
        np.arange(1100, dtype=f32).reshape(10, 10, 11) * 1e6,
        np.arange(2401).reshape(7, 7, 7, 7) % 2 == 0,
        # the hidden middle must not affect the style: a tiny value only in the hidden part
        np.concatenate([np.ones(600, f32), [1e-9], np.ones(600, f32)]).astype(f32),
    ]


def _random(count, seed=0):
    """Arrays of random rank, shape, magnitude and dtype, sprinkled with special values."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        ndim = int(rng.integers(0, 5))
        shape = tuple(int(n) for n in rng.integers(1, 7 if ndim > 2 else 13, size=ndim))
        kind = rng.choice(["float32", "float64", "int64", "bool"], p=[0.5, 0.25, 0.15, 0.1])
        scale = 10.0 ** rng.uniform(-6, 10)
        if kind == "bool":
            values = rng.random(shape) < 0.5
        elif kind == "int64":
            values = np.asarray(rng.integers(-int(scale) - 1, int(scale) + 1, size=shape), np.int64)
        else:
            values = rng.standard_normal(shape) * scale
            if rng.random() < 0.3:
                values = np.round(values)
            if values.ndim and rng.random() < 0.3:
                flat = values.reshape(-1)
                flat[rng.integers(0, flat.size, size=2)] = rng.choice([NAN, INF, -INF, -0.0, 0.0], size=2)
            values = np.asarray(values, dtype=kind)
        cases.append(np.asarray(values))
    return cases


CASES = _handpicked() + _random(300)


def _id(values):
    return f"{values.dtype}-{'x'.join(map(str, values.shape)) or 'scalar'}"


def _expected_and_actual(values, mode):
    """torch's repr of the data next to ours; mode is 'plain', 'requires_grad' or 'grad_fn'."""
    tensor = torch.tensor(values)
    if mode != "plain":
        tensor.requires_grad_(True)
    if mode == "grad_fn":
        tensor = tensor * 2
    grad_fn = type(tensor.grad_fn).__name__ if tensor.grad_fn is not None else None
    actual = formatting.tensor_repr(
        tensor.detach().numpy(),
        dtype_name=str(tensor.dtype),
        show_dtype=tensor.dtype not in (torch.float32, torch.int64, torch.bool),
        grad_fn=grad_fn,
        requires_grad=tensor.requires_grad,
    )
    return repr(tensor), actual


@pytest.mark.parametrize("values", CASES, ids=_id)
def test_matches_torch(values):
    expected, actual = _expected_and_actual(values, "plain")
    assert actual == expected
    assert actual == str(torch.tensor(values))


FLOAT_CASES = [v for v in CASES if v.dtype.kind == "f"]


@pytest.mark.parametrize("mode", ["requires_grad", "grad_fn"])
@pytest.mark.parametrize("values", FLOAT_CASES, ids=_id)
def test_suffixes_match_torch(values, mode):
    expected, actual = _expected_and_actual(values, mode)
    assert actual == expected


def test_long_suffixes_wrap_onto_their_own_line():
    # Vector lengths chosen so the last line is nearly full: torch moves the suffixes down.
    wrapped = []
    for n in range(1, 40):
        expected, actual = _expected_and_actual(np.arange(n, dtype=np.float64) * 1.5, "grad_fn")
        assert actual == expected
        wrapped.append(",\n       grad_fn=" in expected)
    assert any(wrapped) and not all(wrapped)


def test_prefix_of_tensor_subclass():
    class MyTensor(torch.Tensor):
        pass

    values = np.arange(40, dtype=np.float32).reshape(2, 20) / 3
    expected = repr(torch.tensor(values).as_subclass(MyTensor))
    actual = formatting.tensor_repr(values, dtype_name="torch.float32", show_dtype=False, prefix="MyTensor(")
    assert actual == expected


SCALARS = [
    np.array(30.0, np.float32),
    np.array(0.1, np.float32),
    np.array(-2.5, np.float64),
    np.array(NAN, np.float32),
    np.array(-7, np.int64),
    np.array(True),
]


@pytest.mark.parametrize("spec", ["", ".2f", ".3e", ">12", "+", "g"])
@pytest.mark.parametrize("value", SCALARS, ids=_id)
def test_format_scalar_matches_torch(value, spec):
    expected = format(torch.tensor(value), spec)
    assert formatting.format_scalar(value, spec) == expected
    assert formatting.format_scalar(value[()], spec) == expected  # numpy scalar
    assert formatting.format_scalar(value.item(), spec) == expected  # Python scalar


@pytest.mark.parametrize(
    "program",
    [
        lambda lib: lib.ones(1).expand(10**6, 10**6),
        lambda lib: (lib.arange(7.0) / 3).reshape(7, 1, 1).expand(7, 10**6, 10**6),
    ],
    ids=["ones_1e12", "arange_7e12"],
)
def test_expanded_tensor_prints_without_materialising(fg, torch, program):
    """Printing reads only the elements it shows: an expand standing for 1e12 elements prints as
    torch prints it, and the print allocates a few KiB (tracemalloc sees numpy's buffers too)."""
    tensor = program(fg)
    tracemalloc.start()
    try:
        text = repr(tensor)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text == repr(program(torch))
    assert peak < 2**20
