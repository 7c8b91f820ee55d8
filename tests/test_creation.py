"""Tensor creation, dtypes and devices, conversions, attributes, Python protocols, repr of the seed tensors."""

import os
import re

import numpy as np
import pytest

from semantics_helpers import assert_values, dtype_name, strip_module


def info(t):
    """(dtype name, shape tuple, values) of a tensor."""
    return dtype_name(t.dtype), tuple(t.shape), t.tolist()


# --- tensor() -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data,expected",
    [
        (2.5, ("float32", (), 2.5)),
        (3, ("int64", (), 3)),
        (True, ("bool", (), True)),
        ([1.0, 2.0], ("float32", (2,), [1.0, 2.0])),
        ([1, 2], ("int64", (2,), [1, 2])),
        ([1, 2.5], ("float32", (2,), [1.0, 2.5])),
        ([True, False], ("bool", (2,), [True, False])),
        ([True, 2], ("int64", (2,), [1, 2])),
        ([[1, 2, 3], [4, 5, 6]], ("int64", (2, 3), [[1, 2, 3], [4, 5, 6]])),
        ([[[1.0]], [[2.0]]], ("float32", (2, 1, 1), [[[1.0]], [[2.0]]])),
        ([], ("float32", (0,), [])),
    ],
)
def test_tensor_from_python_data(fg, data, expected):
    assert info(fg.tensor(data)) == expected


@pytest.mark.parametrize(
    "array,expected",
    [
        (np.array([1.5, 2.0]), ("float64", (2,), [1.5, 2.0])),
        (np.array([1.5, 2.0], dtype=np.float32), ("float32", (2,), [1.5, 2.0])),
        (np.array([[1, 2]], dtype=np.int64), ("int64", (1, 2), [[1, 2]])),
        (np.array([True, False]), ("bool", (2,), [True, False])),
        (np.array(2.0), ("float64", (), 2.0)),
        (np.arange(6.0).reshape(2, 3).T, ("float64", (3, 2), [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]])),
    ],
)
def test_tensor_from_numpy_array(fg, array, expected):
    array = array.copy()  # the parameter is shared by every backend's run of this test
    t = fg.tensor(array)
    assert info(t) == expected
    array[...] = 0  # tensor() copies
    assert t.tolist() == expected[2]


def test_tensor_dtype_and_requires_grad_kwargs(fg):
    assert info(fg.tensor([1, 2], dtype=fg.float32)) == ("float32", (2,), [1.0, 2.0])
    assert info(fg.tensor([1.7, -1.7], dtype=fg.int64)) == ("int64", (2,), [1, -1])
    assert info(fg.tensor([0.0, 2.0], dtype=fg.bool)) == ("bool", (2,), [False, True])
    assert info(fg.tensor(np.array([1.0, 2.0]), dtype=fg.float32)) == ("float32", (2,), [1.0, 2.0])
    t = fg.tensor([1.0], dtype=fg.float64, requires_grad=True)
    assert t.requires_grad and t.is_leaf and dtype_name(t.dtype) == "float64"


def test_legacy_tensor_constructor(fg):
    assert info(fg.Tensor([1, 2])) == ("float32", (2,), [1.0, 2.0])
    assert info(fg.Tensor([[1.5], [2.5]])) == ("float32", (2, 1), [[1.5], [2.5]])
    assert isinstance(fg.tensor([1.0]), fg.Tensor)


def test_tensor_errors(fg):
    with pytest.raises(ValueError, match=re.escape("expected sequence of length 2 at dim 1 (got 1)")):
        fg.tensor([[1, 2], [3]])
    with pytest.raises(TypeError):
        fg.tensor("abc")
    with pytest.raises(TypeError):
        fg.tensor([1.0, "a"])


NESTED_DATA = [  # rows of Python numbers take tensor()'s quick path: the same results and errors
    list(range(32)),
    [[1.0, 2.0, 3.0]] * 4,
    [[True, False], [1, 0]],
    [[1, 2.5], [3, 4]],
    [(1, 2), [3, 4]],
    [[[1.0], [2.0]], [[3.0], [4.0]]],
    [[], []],
    [[1, 2], [3]],
    [[1.0], [2.0, 3.0]],
    [[[1.0]], [2.0]],
    [[1.0], 2.0],
    [1.0, [2.0]],
    [2**63],
    [-(2**63), 2**63 - 1],
]


@pytest.mark.parametrize("data", NESTED_DATA, ids=[str(d)[:40] for d in NESTED_DATA])
def test_tensor_of_nested_data_as_torch(fg, torch, data):
    def outcome(lib):
        try:
            t = lib.tensor(data)
        except (TypeError, ValueError) as e:
            return type(e).__name__, str(e)
        return t.tolist(), str(t.dtype).split(".")[-1], tuple(t.shape)

    assert outcome(fg) == outcome(torch)


# --- factories ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("factory,fill", [("zeros", 0.0), ("ones", 1.0)])
def test_zeros_ones(fg, factory, fill):
    make = getattr(fg, factory)
    for t in (make(2, 3), make((2, 3)), make([2, 3])):
        assert info(t) == ("float32", (2, 3), [[fill] * 3] * 2)
    assert info(make(())) == ("float32", (), fill)
    assert info(make(2, dtype=fg.int64)) == ("int64", (2,), [int(fill)] * 2)
    t = make(2, requires_grad=True, device="cpu")
    assert t.requires_grad and t.is_leaf


def test_full(fg):
    assert info(fg.full((2,), 7.5)) == ("float32", (2,), [7.5, 7.5])
    assert info(fg.full((2,), 7)) == ("int64", (2,), [7, 7])
    assert info(fg.full((1,), True)) == ("bool", (1,), [True])
    assert info(fg.full((2, 1), 3, dtype=fg.float64)) == ("float64", (2, 1), [[3.0], [3.0]])


def test_empty(fg):
    for t in (fg.empty(2, 3), fg.empty((2, 3))):
        assert dtype_name(t.dtype) == "float32" and t.shape == (2, 3)
    assert dtype_name(fg.empty(4, dtype=fg.int64).dtype) == "int64"
    # bool memory is written (False): recycled bytes that are neither 0 nor 1 summed to more than numel
    for _ in range(3):  # the freed float block comes back for the bool tensor
        scratch = fg.full((4000,), 0.1)
        del scratch
        flags = fg.empty(4000, dtype=fg.bool)
        assert flags.sum().item() == 0 and fg.empty_like(flags).sum().item() == 0


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the resident set from /proc")
def test_empty_does_not_write_its_memory():
    """PyTorch's empty leaves memory uninitialized; a zero-fill touched every page (2 GB took 0.85 s).
    Untouched pages of a fresh 512 MB block (above what the buffer cache keeps) never become resident."""
    import fastgrad

    size = 2**27  # float32 elements: 512 MB
    makers = [
        lambda: fastgrad.empty(size),
        lambda: fastgrad.empty_like(fastgrad.ones(1).expand(size)),
        lambda: fastgrad.ones(1).new_empty(size),
        lambda: fastgrad.FloatTensor(size),
    ]
    for make in makers:
        before = resident_bytes()
        t = make()
        assert t.shape == (size,) and resident_bytes() - before < 64 * 2**20
        del t


def test_like_factories(fg):
    src = fg.tensor([[1, 2, 3]])
    assert info(fg.zeros_like(src)) == ("int64", (1, 3), [[0, 0, 0]])
    assert info(fg.ones_like(src, dtype=fg.float32)) == ("float32", (1, 3), [[1.0, 1.0, 1.0]])
    assert info(fg.full_like(src, 2.7)) == ("int64", (1, 3), [[2, 2, 2]])
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    assert fg.zeros_like(x).requires_grad is False
    assert fg.ones_like(x, requires_grad=True).requires_grad is True
    assert info(fg.full_like(x, 0.5)) == ("float32", (2,), [0.5, 0.5])


def test_rand_randn_shapes_and_ranges(fg):
    fg.manual_seed(0)
    r = fg.rand(100, 50)
    assert dtype_name(r.dtype) == "float32" and r.shape == (100, 50)
    values = np.array(r.tolist())
    assert values.min() >= 0.0 and values.max() < 1.0
    assert abs(values.mean() - 0.5) < 0.05
    n = np.array(fg.randn(100, 50).tolist())
    assert n.shape == (100, 50)
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1.0) < 0.1
    assert fg.rand((3, 2)).shape == (3, 2) and fg.randn(()).shape == ()
    assert dtype_name(fg.rand(2, dtype=fg.float64).dtype) == "float64"


def test_randint(fg):
    fg.manual_seed(0)
    t = fg.randint(2, 5, (200,))
    assert dtype_name(t.dtype) == "int64" and t.shape == (200,)
    assert set(t.tolist()) == {2, 3, 4}
    u = fg.randint(3, (4, 5))
    assert u.shape == (4, 5) and all(0 <= v < 3 for row in u.tolist() for v in row)


def test_rand_like_randn_like(fg):
    src = fg.zeros(3, 4, dtype=fg.float64)
    for t in (fg.rand_like(src), fg.randn_like(src)):
        assert dtype_name(t.dtype) == "float64" and t.shape == (3, 4)
    assert all(0.0 <= v < 1.0 for row in fg.rand_like(src).tolist() for v in row)


def test_normal(fg):
    fg.manual_seed(0)
    t = fg.normal(3.0, 0.5, size=(100, 40))
    assert dtype_name(t.dtype) == "float32" and t.shape == (100, 40)
    values = np.array(t.tolist())
    assert abs(values.mean() - 3.0) < 0.05 and abs(values.std() - 0.5) < 0.05
    u = fg.normal(fg.tensor([0.0, 100.0]), fg.tensor([1e-3, 1e-3]))
    assert u.shape == (2,)
    assert_values(u, [0.0, 100.0], atol=0.1)


@pytest.mark.parametrize(
    "draw",
    [
        lambda fg: fg.rand(5),
        lambda fg: fg.randn(2, 3),
        lambda fg: fg.randint(0, 1000, (5,)),
        lambda fg: fg.normal(0.0, 1.0, size=(4,)),
    ],
)
def test_manual_seed_reproducible(fg, draw):
    fg.manual_seed(1234)
    first = draw(fg).tolist()
    second = draw(fg).tolist()
    fg.manual_seed(1234)
    assert draw(fg).tolist() == first
    assert second != first


def test_arange(fg):
    assert info(fg.arange(5)) == ("int64", (5,), [0, 1, 2, 3, 4])
    assert info(fg.arange(2, 8, 3)) == ("int64", (2,), [2, 5])
    assert info(fg.arange(5.0)) == ("float32", (5,), [0.0, 1.0, 2.0, 3.0, 4.0])
    assert info(fg.arange(0, 1, 0.25)) == ("float32", (4,), [0.0, 0.25, 0.5, 0.75])
    assert info(fg.arange(1, 2.5, 0.5)) == ("float32", (3,), [1.0, 1.5, 2.0])
    assert info(fg.arange(3, 0, -1)) == ("int64", (3,), [3, 2, 1])
    assert info(fg.arange(3, dtype=fg.float64)) == ("float64", (3,), [0.0, 1.0, 2.0])


def test_linspace(fg):
    assert info(fg.linspace(0, 1, 5)) == ("float32", (5,), [0.0, 0.25, 0.5, 0.75, 1.0])
    assert info(fg.linspace(-1, 1, steps=1)) == ("float32", (1,), [-1.0])
    assert info(fg.linspace(0, 3, 4, dtype=fg.float64)) == ("float64", (4,), [0.0, 1.0, 2.0, 3.0])


# (start, end, steps): bounds that no float type holds, halves computed from each end, odd lengths
LINSPACES = [(-3.141592653589793, 3.141592653589793, 2000), (0, 1, 1001), (-3.7, 11.3, 777), (0.1, 0.7, 33),
             (5, -2.5, 2), (0, 5000, 5001), (-(2**40), 2**40, 1001), (1e-3, 7.25, 0)]  # fmt: skip
# (start, end, step): runs of two 32-byte vectors and the values left after them
ARANGES = [(0, 100, 0.37), (-5, 5, 0.01), (-3.3, 7.7, 0.013), (1, 2, 1e-3), (10, -7.5, -0.3)]
FLOATING = ["float32", "float64", "float16", "bfloat16"]


def bits(t):
    """A tensor's values as bytes of its dtype (16-bit floats widened exactly to float32)."""
    if t.dtype.is_floating_point and t.element_size() == 2:
        t = t.float()
    return t.numpy().tobytes()


@pytest.mark.parametrize("dtype", [*FLOATING, "int64", "int32"])
def test_linspace_is_pytorchs_bit_for_bit(fg, torch, dtype):
    cases = LINSPACES if fg.__name__ == "fastgrad" else LINSPACES[1:5]
    narrow = dtype in ("int32", "float16", "bfloat16")  # PyTorch refuses bounds they cannot hold
    for start, end, steps in [case for case in cases if not narrow or abs(case[0]) < 2**31]:
        expected = torch.linspace(start, end, steps, dtype=getattr(torch, dtype))
        assert bits(fg.linspace(start, end, steps, dtype=getattr(fg, dtype))) == bits(expected), (start, end, steps)
    with pytest.raises(NotImplementedError, match="\"linspace_cpu\" not implemented for 'Bool'"):
        fg.linspace(0, 1, 3, dtype=fg.bool)


@pytest.mark.parametrize("dtype", FLOATING)
def test_arange_is_pytorchs_bit_for_bit(fg, torch, dtype):
    for start, end, step in ARANGES:
        expected = torch.arange(start, end, step, dtype=getattr(torch, dtype))
        assert bits(fg.arange(start, end, step, dtype=getattr(fg, dtype))) == bits(expected), (start, end, step)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_long_arange_splits_as_pytorchs_threads(torch, threads):
    """Past 32768 values PyTorch's arange splits the range among its threads, and each part starts
    its own runs of vectors: fastgrad's values follow its own thread count the same way."""
    import fastgrad

    saved = fastgrad.get_num_threads(), torch.get_num_threads()
    fastgrad.set_num_threads(threads)
    torch.set_num_threads(threads)
    try:
        for dtype in ("float32", "float64"):
            expected = torch.arange(0.1, 1e4, 0.3, dtype=getattr(torch, dtype))
            assert bits(fastgrad.arange(0.1, 1e4, 0.3, dtype=getattr(fastgrad, dtype))) == bits(expected)
    finally:
        fastgrad.set_num_threads(saved[0])
        torch.set_num_threads(saved[1])


def test_eye(fg):
    assert info(fg.eye(2)) == ("float32", (2, 2), [[1.0, 0.0], [0.0, 1.0]])
    assert info(fg.eye(2, 3)) == ("float32", (2, 3), [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    assert info(fg.eye(2, dtype=fg.int64)) == ("int64", (2, 2), [[1, 0], [0, 1]])


# --- numpy interop ----------------------------------------------------------------------------------


def test_from_numpy_shares_memory_both_ways(fg):
    array = np.zeros(3)
    t = fg.from_numpy(array)
    assert dtype_name(t.dtype) == "float64"
    array[0] = 1.0
    t[1] = 2.0
    t.add_(1.0)
    assert t.tolist() == [2.0, 3.0, 1.0]
    assert array.tolist() == [2.0, 3.0, 1.0]
    assert info(fg.from_numpy(np.array([[1, 2]], dtype=np.int64))) == ("int64", (1, 2), [[1, 2]])


@pytest.mark.parametrize("make", ["from_numpy", "tensor", "frombuffer_tensor", "strided_from_numpy"])
def test_bools_whose_bytes_are_not_0_or_1_read_as_true(fg, torch, make):
    """numpy bools made by .view(bool) or np.frombuffer can hold any byte: PyTorch reads them as True."""

    def program(lib):
        raw = np.array([[0, 1, 2, 255], [3, 0, 128, 1]], dtype=np.uint8)
        t = {
            "from_numpy": lambda: lib.from_numpy(raw.view(bool)),
            "tensor": lambda: lib.tensor(raw.view(bool)),
            "frombuffer_tensor": lambda: lib.tensor(np.frombuffer(raw.tobytes(), dtype=bool).reshape(2, 4)),
            "strided_from_numpy": lambda: lib.from_numpy(raw.view(bool)[:, ::2]),
        }[make]()
        equals_true = (t == True).tolist()  # noqa: E712 -- the == operator with a Python bool
        return (
            t.long().tolist(),
            equals_true,
            t.tolist(),
            t.sum().item(),
            t.float().tolist(),
            (t == lib.ones_like(t)).all().item(),
            t.any(dim=0).tolist(),
        )

    assert program(fg) == program(torch)


def test_from_numpy_of_odd_bools_still_shares_memory(fg):
    array = np.array([0, 2, 255], dtype=np.uint8).view(bool)
    t = fg.from_numpy(array)
    t[0] = True
    array[1] = False
    assert t.tolist() == [True, False, True] and array.tolist() == [True, False, True]


def test_numpy_shares_memory(fg):
    t = fg.zeros(3)
    array = t.numpy()
    assert array.dtype == np.float32 and array.shape == (3,)
    array[0] = 5.0
    t.add_(1.0)
    assert t.tolist() == [6.0, 1.0, 1.0]
    assert array.tolist() == [6.0, 1.0, 1.0]


def test_numpy_of_tensor_that_requires_grad_raises(fg):
    x = fg.tensor([1.0], requires_grad=True)
    with pytest.raises(
        RuntimeError,
        match=re.escape("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."),
    ):
        x.numpy()
    assert x.detach().numpy().tolist() == [1.0]


# --- devices and dtypes -------------------------------------------------------------------------------


def test_cpu_device(fg):
    t = fg.tensor([1.0], device="cpu")
    assert t.device == fg.device("cpu")
    assert t.device.type == "cpu" and str(t.device) == "cpu"
    assert fg.zeros(2, device=fg.device("cpu")).device == fg.device("cpu")
    assert t.cpu() is t
    assert t.to("cpu") is t
    assert t.to(fg.device("cpu")) is t


# A size no machine can allocate: the device is refused first, without taking (or trying to take) memory.
@pytest.mark.parametrize(
    "make",
    [
        lambda fg, **kw: fg.empty(2**62, **kw),
        lambda fg, **kw: fg.full((2**62,), 1.0, **kw),
        lambda fg, **kw: fg.randn(2**62, **kw),
        lambda fg, **kw: fg.randint(3, (2**62,), **kw),
        lambda fg, **kw: fg.arange(2**62, **kw),
        lambda fg, **kw: fg.eye(2**31, **kw),
        lambda fg, **kw: fg.nn.Linear(1, 2**62, **kw),
    ],
)
def test_an_unavailable_device_is_refused_before_allocating(fg, make):
    with pytest.raises(AssertionError, match="^Torch not compiled with CUDA enabled$"):  # a CPU-only PyTorch's
        make(fg, device="cuda")


def test_dtype_aliases(fg):
    assert fg.float is fg.float32
    assert fg.double is fg.float64
    assert fg.long is fg.int64
    assert [dtype_name(d) for d in (fg.float32, fg.float64, fg.int64, fg.bool)] == [
        "float32",
        "float64",
        "int64",
        "bool",
    ]
    assert strip_module(repr(fg.float64)) == "float64"


def test_dtype_conversions(fg):
    t = fg.tensor([-1.7, 0.0, 2.5])
    assert info(t.double()) == ("float64", (3,), [-1.7000000476837158, 0.0, 2.5])
    assert info(t.long()) == ("int64", (3,), [-1, 0, 2])
    assert info(t.to(fg.bool)) == ("bool", (3,), [True, False, True])
    assert info(t.type(fg.int64)) == ("int64", (3,), [-1, 0, 2])
    assert info(t.to(fg.float64).float()) == info(t)
    assert info(fg.tensor([1, 2]).float()) == ("float32", (2,), [1.0, 2.0])
    assert t.float() is t and t.to(fg.float32) is t and t.type(fg.float32) is t


def test_dtype_conversion_is_differentiable(fg):
    x = fg.tensor([1.0, 2.0], dtype=fg.float64, requires_grad=True)
    y = x.float()
    assert dtype_name(y.dtype) == "float32" and y.requires_grad and not y.is_leaf
    (y * 3).sum().backward()
    assert dtype_name(x.grad.dtype) == "float64"
    assert x.grad.tolist() == [3.0, 3.0]


def test_clone_copies(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    c = x.clone()
    assert c.tolist() == [1.0, 2.0] and c.requires_grad and not c.is_leaf
    with fg.no_grad():
        c.add_(1.0)
    assert x.tolist() == [1.0, 2.0]
    (c * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


# --- attributes -------------------------------------------------------------------------------------


def test_shape_and_size(fg):
    t = fg.zeros(2, 3, 4)
    assert isinstance(t.shape, tuple) and isinstance(t.shape, fg.Size)
    assert t.shape == (2, 3, 4) and t.size() == (2, 3, 4)
    assert t.shape[1] == 3 and t.shape[-1] == 4 and list(t.shape) == [2, 3, 4]
    assert t.size(0) == 2 and t.size(-1) == 4 and t.size(dim=1) == 3
    assert t.dim() == 3 and t.ndim == 3 and t.numel() == 24
    scalar = fg.tensor(1.5)
    assert scalar.shape == () and scalar.dim() == 0 and scalar.numel() == 1
    assert strip_module(repr(t.shape)) == "Size([2, 3, 4])"


def test_transpose_attribute(fg):
    t = fg.tensor([[1, 2, 3], [4, 5, 6]])
    assert t.T.shape == (3, 2)
    assert t.T.tolist() == [[1, 4], [2, 5], [3, 6]]


def test_item_and_tolist(fg):
    assert fg.tensor(2.5).item() == 2.5 and type(fg.tensor(2.5).item()) is float
    assert fg.tensor([7]).item() == 7 and type(fg.tensor([7]).item()) is int
    assert fg.tensor([[True]]).item() is True
    assert fg.tensor(3).tolist() == 3
    assert fg.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    with pytest.raises(RuntimeError, match=re.escape("a Tensor with 2 elements cannot be converted to Scalar")):
        fg.tensor([1.0, 2.0]).item()


def test_len_and_iter(fg):
    t = fg.tensor([[1, 2], [3, 4], [5, 6]])
    assert len(t) == 3
    rows = list(t)
    assert len(rows) == 3 and all(isinstance(r, fg.Tensor) for r in rows)
    assert [r.tolist() for r in rows] == [[1, 2], [3, 4], [5, 6]]
    assert [e.shape for e in fg.tensor([1.0, 2.0])] == [(), ()]
    with pytest.raises(TypeError, match=re.escape("len() of a 0-d tensor")):
        len(fg.tensor(1.0))


def test_python_number_conversions(fg):
    assert bool(fg.tensor([0.0])) is False and bool(fg.tensor(3)) is True
    assert float(fg.tensor([2.5])) == 2.5 and float(fg.tensor(3)) == 3.0
    assert int(fg.tensor(2.7)) == 2 and int(fg.tensor([-2.7])) == -2
    with pytest.raises(RuntimeError, match=re.escape("Boolean value of Tensor with more than one value is ambiguous")):
        bool(fg.tensor([1.0, 2.0]))


def test_format(fg):
    assert f"{fg.tensor(1.5):+.2f}" == "+1.50"
    assert f"{fg.tensor(-3):5d}" == "   -3"
    assert "{:.1f}".format(fg.tensor(2.25, requires_grad=True)) == "2.2"
    t = fg.tensor([1.0, 2.0])
    assert f"{t}" == str(t)
    with pytest.raises(TypeError, match=re.escape("unsupported format string passed to Tensor.__format__")):
        f"{t:.2f}"


def test_repr_of_seed_tensors(fg):
    x = fg.tensor([2.0], requires_grad=True)
    assert repr(x) == "tensor([2.], requires_grad=True)"
    a = fg.tensor(2.0, requires_grad=True)
    b = fg.tensor(3.0, requires_grad=True)
    e = (a + b) * (a * b)
    assert repr(e) == "tensor(30., grad_fn=<MulBackward0>)"
    e.backward()
    assert repr(a.grad) == "tensor(21.)"
    w = fg.tensor([1.0], requires_grad=True)
    fg.mul(fg.add(x, w), fg.add(w, 1)).backward()
    assert repr(w.grad) == "tensor([5.])"
    assert str(w.grad) == "tensor([5.])"


def test_repr_with_dtype(fg):
    assert strip_module(repr(fg.tensor([1.0, 2.0], dtype=fg.float64))) == "tensor([1., 2.], dtype=float64)"
    assert repr(fg.tensor([1, 2])) == "tensor([1, 2])"


# --- out= ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,expected", [("add", [4.0, 6.0]), ("mul", [3.0, 8.0]), ("matmul", 11.0)])
def test_out_argument(fg, name, expected):
    a = fg.tensor([1.0, 2.0])
    b = fg.tensor([3.0, 4.0])
    out = fg.empty(2) if name != "matmul" else fg.empty(())
    result = getattr(fg, name)(a, b, out=out)
    assert result is out
    assert out.tolist() == expected


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor")  # new_tensor(a tensor) warns, as PyTorch's
def test_shape_rules_of_the_new_methods(fg):
    from fastgrad import _meta, _optable

    rows = {row.name: row for row in _optable.OPS}
    x = fg.ones(2, dtype=fg.float64)
    calls = [("new_zeros", (x, 2, 3)), ("new_ones", (x, (4,))), ("new_empty", (x, [1, 2]))]
    calls += [("new_full", (x, (2,), 1.5)), ("new_tensor", (x, [[1, 2], [3, 4]])), ("new_tensor", (x, fg.ones(3)))]
    for name, args in calls:
        result = getattr(args[0], name)(*args[1:])
        assert getattr(_meta, rows[name].meta)(*args) == (tuple(result.shape), result.dtype), name
