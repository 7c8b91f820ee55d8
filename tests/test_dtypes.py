"""The narrower element types (int32, int16, int8, uint8, float16, bfloat16) against PyTorch:
promotion, creation and conversion, numpy, printing, and the ops that compute in them (integers
wrap around, 16-bit floats compute in float32 and round on store)."""

import numpy as np
import pytest

from oracle_helpers import same_error, same_on_both

NEW = ["int32", "int16", "int8", "uint8", "float16", "bfloat16"]
ALL = ["bool", "int64", "float32", "float64"] + NEW
INTS = ["int32", "int16", "int8", "uint8"]
HALVES = ["float16", "bfloat16"]
# Values that wrap (300, -1 in uint8), truncate (-2.7) and round (0.1, 65519 and 1e-8 in float16;
# 1.00390625 is a tie that bfloat16 rounds to even).
VALUES = [1.5, -2.7, 300.2, 0.1, 65519.0, 1e-8, 1.00390625, -0.0]


def name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def test_promote_types_all_pairs(fg, torch):
    for a in ALL:
        for b in ALL:
            expected = torch.promote_types(getattr(torch, a), getattr(torch, b))
            assert name(fg.promote_types(getattr(fg, a), getattr(fg, b))) == name(expected), (a, b)
            assert fg.can_cast(getattr(fg, a), getattr(fg, b)) == torch.can_cast(getattr(torch, a), getattr(torch, b))


@pytest.mark.parametrize(
    "program",
    [
        lambda t: t.tensor([1, 2], dtype=t.int8) + 1000,  # a Python number never widens a tensor
        lambda t: t.tensor([100, 2], dtype=t.int8) * t.tensor(3, dtype=t.int64),  # nor does a 0-d tensor
        lambda t: t.tensor([200, 2], dtype=t.uint8) + t.tensor([-1, 5], dtype=t.int8),  # int16
        lambda t: t.tensor([1.5, 2], dtype=t.float16) + t.tensor([70000, 3]),  # float16 (inf)
        lambda t: t.tensor([1.1, 2], dtype=t.bfloat16) + t.tensor([1.1, 3], dtype=t.float16),  # float32
        lambda t: t.tensor([3, 2], dtype=t.int32) / 2,
        lambda t: t.tensor([1, 2], dtype=t.int16) * 2.5,
        lambda t: t.tensor(3, dtype=t.int8) + t.tensor([1.0]),
        lambda t: t.tensor([3], dtype=t.uint8) - 5,
        # operands are converted to the result dtype first: 1000 is -24 in int8
        lambda t: [t.tensor([50, -7], dtype=t.int8) // 1000, t.tensor([50], dtype=t.int8) % t.tensor(1000)],
        lambda t: [t.tensor([50], dtype=t.int8) < 300, t.tensor([1.0], dtype=t.float16) == 1.0001],
        lambda t: [t.tensor([1.0, 3.0], dtype=t.float16) * 1.0001, t.tensor([1.0], dtype=t.bfloat16) * 2.7],
        lambda t: [name(t.result_type(t.tensor([1], dtype=t.int8), 1000)), name(t.result_type(2, 1.5))],
        lambda t: name(t.result_type(t.tensor(1, dtype=t.float16), t.tensor([1], dtype=t.int32))),
    ],
)
def test_promotion_with_numbers_and_0d(fg, torch, program):
    same_on_both(fg, torch, program)


def test_result_type_argument_error(fg, torch):
    same_error(fg, torch, lambda t: t.result_type("a", 1))


@pytest.mark.parametrize("dtype", NEW)
def test_dtype_facts(fg, torch, dtype):
    ours, theirs = getattr(fg, dtype), getattr(torch, dtype)
    assert (ours.itemsize, ours.is_floating_point, ours.is_signed) == (
        theirs.itemsize,
        theirs.is_floating_point,
        theirs.is_signed,
    )
    info = fg.finfo if ours.is_floating_point else fg.iinfo
    assert repr(info(ours)) == repr((torch.finfo if theirs.is_floating_point else torch.iinfo)(theirs))
    same_on_both(
        fg,
        torch,
        lambda t: [
            t.zeros(2, dtype=getattr(t, dtype)).element_size(),
            name(t.zeros(1, dtype=getattr(t, dtype)).type()),
        ],
    )


@pytest.mark.parametrize("dtype", NEW)
def test_conversions_round_and_wrap(fg, torch, dtype):
    def program(t):
        d = getattr(t, dtype)
        x = t.tensor(VALUES, dtype=t.float64)
        converted = [x.to(d), x.float().to(d), x.type(d), x.type_as(t.zeros(1, dtype=d)), t.tensor(VALUES).to(d)]
        back = x.to(d).double()
        return converted + [back, x.to(d)[0].item(), x.to(d).tolist(), name(x.to(d).type()), x.to(d).to(t.int64)]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("method", ["int", "short", "char", "byte", "half", "bfloat16"])
def test_conversion_methods(fg, torch, method):
    same_on_both(fg, torch, lambda t: getattr(t.tensor([-1.5, 2.5, 250.0]), method)())


@pytest.mark.parametrize("dtype", NEW)
def test_creation(fg, torch, dtype):
    def program(t):
        d = getattr(t, dtype)
        x = t.ones(2, 3, dtype=d)
        return [
            t.zeros(3, dtype=d),
            x,
            t.full((2,), 7, dtype=d),
            t.arange(5, dtype=d),
            t.arange(0, 2, 0.5, dtype=d) if d.is_floating_point else t.arange(1, 10, 3, dtype=d),
            t.zeros_like(x),
            t.full_like(x, 3),
            name(t.empty_like(x).dtype),
            t.tensor([[1, 2], [3, 4]], dtype=d),
            t.eye(2, dtype=d),
        ]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda t: t.full((2,), 1000, dtype=t.int8),
        lambda t: t.full((2,), -256, dtype=t.uint8),
        lambda t: t.full((1,), float("nan"), dtype=t.int32),
        lambda t: t.tensor([1000], dtype=t.int8),
        lambda t: t.tensor([127.5], dtype=t.int8),
        lambda t: t.zeros(2, dtype=t.bfloat16).numpy(),
        lambda t: t.tensor([1, 2], dtype=t.int8).mean(),
        lambda t: t.tensor([1, 2], dtype=t.float16).requires_grad_().int().sum().backward(),
    ],
)
def test_errors(fg, torch, program):
    same_error(fg, torch, program)


def test_values_in_range_are_accepted(fg, torch):
    same_on_both(fg, torch, lambda t: [t.full((2,), -255, dtype=t.uint8), t.tensor([-1, 127.0], dtype=t.int8).tolist()])


@pytest.mark.parametrize("dtype", ["int32", "int16", "int8", "uint8", "float16"])
def test_numpy_round_trip(fg, torch, dtype):
    array = np.array([1, 2, 120, 3], dtype=dtype)

    def program(t):
        x = t.from_numpy(array.copy())
        return [x, t.tensor(array), t.as_tensor(array), t.tensor(list(array)), x.numpy().dtype.name, x.numpy().tolist()]

    same_on_both(fg, torch, program)


def test_from_numpy_shares_memory(fg):
    array = np.array([1, 2], dtype=np.int8)
    fg.from_numpy(array)[0] = 100
    assert array.tolist() == [100, 2]


@pytest.mark.parametrize("dtype", NEW)
def test_printing(fg, torch, dtype):
    def program(t):
        d = getattr(t, dtype)
        values = [[1.5, -2.7, 100.25], [1e-5, 0.0, 3.0]]
        x = t.tensor(values).to(d)
        return [repr(x), repr(x[0, 0]), repr(t.zeros(0, dtype=d)), repr(t.zeros(2, 0, dtype=d)), str(x)]

    ours, theirs = program(fg), program(torch)
    assert [s.replace("fastgrad.", "torch.") for s in ours] == theirs


@pytest.mark.parametrize("dtype", NEW)
def test_elementwise_and_comparisons(fg, torch, dtype):
    def program(t):
        d = getattr(t, dtype)
        a = t.tensor([[100, -3, 7], [0, 120, 9]]).to(d)
        b = t.tensor([3, 5, -2]).to(d)
        return [a + b, a - b, a * b, a * a * a, a / b, a // 2, a % 3, -a if d is not t.uint8 else a, a.abs(), a < b,
                a == 7, a >= b, a.clamp(0, 50), t.maximum(a, b), t.where(a > b, a, b), a.masked_fill(a > 50, 1),
                a.pow(2), a * 2.5, 1 + a]  # fmt: skip

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("dtype", HALVES)
def test_float_functions_of_halves(fg, torch, dtype):
    def program(t):
        x = t.tensor([0.1, 1.7, 3.14159, 10.0]).to(getattr(t, dtype))
        return [x.exp(), x.sqrt(), x.sigmoid(), x.tanh(), x.log(), x / 3, 1 / x]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("dtype", NEW)
def test_reductions(fg, torch, dtype):
    def program(t):
        d = getattr(t, dtype)
        x = t.tensor([[100, -3, 7], [0, 120, 9]]).to(d)
        results = [x.sum(), x.sum(0), x.sum(1, keepdim=True), x.sum(dtype=t.int32), x.prod(1), x.max(), tuple(x.min(0)),
                   x.argmax(), x.amax(1), x.cumsum(1), tuple(x.sort(1)), tuple(x.topk(2)), tuple(x.cummax(1)),
                   x.any(), x.all(1), t.allclose(x, x)]  # fmt: skip
        if d.is_floating_point:  # the mean of float16 sums in float32 (60000 + 60000 overflows float16)
            results += [x.mean(), x.mean(0), t.tensor([60000.0, 60000.0]).to(d).mean()]
        return results

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("dtype", NEW)
def test_indexing_and_assignment(fg, torch, dtype):
    def program(t):
        d = getattr(t, dtype)
        x = t.arange(12).reshape(3, 4).to(d)
        idx32 = t.tensor([2, 0], dtype=t.int32)
        y = x.clone()
        y[idx32] = t.tensor([1, 2, 3, 4]).to(d)
        y[0, 1] += 1
        y[:, 2] = 7
        return [x[idx32], x[:, idx32], x[idx32, idx32], x.gather(1, idx32.reshape(2, 1)), x[x > 5], y]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("dtype", ["int32", "int8", "uint8", "float16", "bfloat16"])
def test_matmul(fg, torch, dtype):
    def program(t):
        d = getattr(t, dtype)
        a = t.tensor([[1.5, 2, 30], [4, -5, 6]]).to(d)
        b = t.tensor([[7, 8], [9, 10.25], [11, 12]]).to(d)
        return [a @ b, a[0] @ b, a @ b[:, 0], t.stack([a, a]) @ b, a.t() @ a]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("dtype", HALVES)
def test_autograd_of_halves(fg, torch, dtype):
    def program(t):
        d = getattr(t, dtype)
        x = t.tensor([[0.5, -1.25, 2.0], [3.0, 0.1, -0.7]]).to(d).requires_grad_()
        w = t.tensor([[1.5], [-2.0], [0.3]]).to(d).requires_grad_()
        y = ((x * 3 + 1).exp() / 10 @ w).sigmoid().sum() + x.sum(0).prod() + (x.float() ** 2).mean()
        y = y + x.softmax(1)[:, 0].sum() + x.log_softmax(0)[0].sum()
        y.backward()
        return [y, y.grad_fn.name(), x.grad, w.grad, x.sum().grad_fn.name(), x.prod().grad_fn.name()]

    same_on_both(fg, torch, program)


def test_bigram_counts(fg, torch):
    """makemore's bigram model: counts in an int32 table, incremented in place, then normalised rows."""

    def program(t):
        words = ["emma", "olivia", "ava", "isabella", "sophia"]
        stoi = {c: i + 1 for i, c in enumerate(sorted(set("".join(words))))}
        N = t.zeros((27, 27), dtype=t.int32)
        for w in words:
            chars = [0] + [stoi[c] for c in w] + [0]
            for i, j in zip(chars, chars[1:]):
                N[i, j] += 1
        P = (N + 1).float()
        P /= P.sum(1, keepdim=True)
        return [N.sum(), N[0], name(N.dtype), P[0, :8], P.sum(1)[:4]]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("dtype", NEW)
def test_save_load_round_trip(fg, dtype):
    import io

    t = fg.tensor([[1.5, -2.7, 300.2], [0.1, 65519.0, -0.0]]).to(getattr(fg, dtype))
    buffer = io.BytesIO()
    leaf = t.clone().requires_grad_() if t.dtype.is_floating_point else t.float().requires_grad_()
    fg.save({"t": t, "leaf": leaf}, buffer)
    back = fg.load(io.BytesIO(buffer.getvalue()))
    assert back["t"].dtype is t.dtype and back["t"].tolist() == t.tolist()
    assert back["leaf"].dtype is leaf.dtype and back["leaf"].requires_grad


def test_legacy_tensor_types(fg, torch):
    same_on_both(
        fg,
        torch,
        lambda t: [
            t.IntTensor([1, 2]),
            name(t.HalfTensor(2, 3).dtype),
            isinstance(t.zeros(1, dtype=t.int8), t.CharTensor),
            isinstance(t.zeros(1), t.ByteTensor),
            t.tensor([1.5, -1.0]).type("torch.ByteTensor"),
            t.BFloat16Tensor([1.1]),
        ],
    )
    same_error(fg, torch, lambda t: t.ShortTensor(t.zeros(1)))


# ---- torch.set_default_dtype: one setting for the process (both backends), restored after each test


def _with_default_dtype(name, program):
    def run(lib):
        before = lib.get_default_dtype()
        lib.set_default_dtype(getattr(lib, name))
        try:
            return program(lib)
        finally:
            lib.set_default_dtype(before)

    return run


def _made_with_the_default(lib):
    """The dtypes and printing of what takes the default dtype, and of what does not."""
    ints = lib.arange(3)
    made = [
        lib.get_default_dtype(),
        lib.tensor(1.5),
        lib.tensor([1, 2.5]),
        lib.tensor([1, 2]),
        lib.zeros(2),
        lib.full((2,), 1.0),
        lib.full((2,), 1),
        lib.arange(3.0),
        lib.linspace(0, 1, 3),
        lib.eye(2),
        lib.Tensor([1.0]),
        lib.FloatTensor([1.0]),
        lib.tensor(np.float32(1.5)),
        ints * 1.5,
        ints.sqrt(),
        ints / 2,
        lib.atan2(ints, ints),
        lib.where(ints > 0, ints, 0.5),
        lib.tensor([1.5], dtype=lib.float32) + 1.5,
    ]
    names = [str(d).split(".")[-1] for d in [made[0]] + [t.dtype for t in made[1:]]]
    return names + [
        repr(made[1]).replace("fastgrad", "torch"),
        repr(made[-1]).replace("fastgrad", "torch"),
        made[14].tolist(),
    ]


@pytest.mark.parametrize("name", ["float64", "float16", "bfloat16", "float32"])
def test_set_default_dtype(fg, torch, name):
    same_on_both(fg, torch, _with_default_dtype(name, _made_with_the_default))


def test_default_float64_trains_a_linear_layer(fg, torch):
    def program(lib):
        lib.manual_seed(0)
        layer = lib.nn.Linear(3, 1)
        with lib.no_grad():  # PyTorch's and fastgrad's random streams differ: the same weights by hand
            layer.weight.copy_(lib.tensor([[0.1, -0.2, 0.3]]))
            layer.bias.fill_(0.5)
        x = lib.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
        loss = ((layer(x) - 1.0) ** 2).mean()
        loss.backward()
        return str(layer.weight.dtype).split(".")[-1], loss, layer.weight.grad, layer.bias.grad

    same_on_both(fg, torch, _with_default_dtype("float64", program))


@pytest.mark.parametrize("value", ["int64", "str", "none"])
def test_set_default_dtype_refuses_non_floating_types(fg, torch, value):
    same_error(fg, torch, lambda lib: lib.set_default_dtype({"int64": lib.int64, "str": "float", "none": None}[value]))
