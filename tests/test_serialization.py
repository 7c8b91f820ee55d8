"""fastgrad.save / fastgrad.load in fastgrad's own format (format="fastgrad"): bit-exact round trips,
and refusal of damaged or hostile files. PyTorch's format, save's default: tests/test_checkpoints.py."""

import io
import json
import struct
import zlib

import collections

import numpy as np
import pytest

import fastgrad
import fastgrad.reference


def roundtrip(fg, obj):
    buffer = io.BytesIO()
    fg.save(obj, buffer, format="fastgrad")
    return fg.load(io.BytesIO(buffer.getvalue()))


def saved_bytes(fg, obj):
    buffer = io.BytesIO()
    fg.save(obj, buffer, format="fastgrad")
    return buffer.getvalue()


def bits(t):
    """The exact stored values, as numpy (NaN payloads and -0.0 included)."""
    a = np.atleast_1d(t.numpy())
    return a.view(np.uint8) if a.dtype.kind == "f" else a


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_tensors_round_trip_bit_exact(fg, dtype):
    special = {
        "float32": np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38, -1.5], np.float32),
        "float64": np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1.7e308, 0.1]),
        "int64": np.array([0, -1, 2**63 - 1, -(2**63), 1, 2, 3, 4]),
        "bool": np.array([True, False] * 4),
    }[dtype]
    payload_nan = np.array([0x7FC00001, 0xFFF00002], dtype=np.uint32).view(np.float32)  # NaNs with payloads
    for array in [special, special.reshape(2, 4), np.zeros((0, 3), dtype), np.array(7, dtype)]:
        t = fg.tensor(array)
        back = roundtrip(fg, t)
        assert back.dtype == t.dtype and back.shape == t.shape
        assert np.array_equal(bits(back), bits(t))
    if dtype == "float32":
        back = roundtrip(fg, fg.from_numpy(payload_nan.copy()))
        assert back.numpy().view(np.uint32).tolist() == [0x7FC00001, 0xFFF00002]


def test_views_are_saved_as_their_values(fg):
    base = fg.arange(12.0).reshape(3, 4)
    for view in [base.t(), base[:, 1::2], base[1], base.expand(2, 3, 4)[1]]:
        back = roundtrip(fg, view)
        assert back.shape == view.shape and back.tolist() == view.tolist() and back.is_contiguous()


def test_nested_containers_keep_their_types(fg):
    w = fg.randn(2, 3)
    obj = {
        "state": {0: {"momentum_buffer": w, "step": 3}, 1: {}},
        "param_groups": [{"lr": 0.1, "params": [0, 1], "nesterov": False, "betas": (0.9, 0.999), "name": None}],
        "floats": [float("inf"), -0.0, 1e-300, 2**70],
    }
    back = roundtrip(fg, obj)
    assert back["param_groups"] == obj["param_groups"]
    assert set(back["state"]) == {0, 1} and back["state"][0]["step"] == 3
    assert fg.equal(back["state"][0]["momentum_buffer"], w)
    assert back["floats"][0] == float("inf") and str(back["floats"][1]) == "-0.0" and back["floats"][3] == 2**70
    assert isinstance(back["param_groups"][0]["betas"], tuple)


def test_requires_grad_is_kept_and_loaded_tensors_are_leaves(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    back = roundtrip(fg, {"x": x, "y": y})
    assert back["x"].requires_grad and back["x"].is_leaf
    assert back["y"].requires_grad and back["y"].is_leaf and back["y"].grad_fn is None


def test_paths_and_file_objects(fg, tmp_path):
    t = fg.tensor([[1.0, 2.0]])
    fg.save({"t": t}, tmp_path / "a.fg", format="fastgrad")
    fg.save({"t": t}, str(tmp_path / "b.fg"), format="fastgrad")
    assert fg.load(tmp_path / "a.fg")["t"].tolist() == [[1.0, 2.0]]
    assert fg.load(str(tmp_path / "b.fg"), map_location="cpu")["t"].tolist() == [[1.0, 2.0]]
    assert (tmp_path / "a.fg").read_bytes() == (tmp_path / "b.fg").read_bytes()
    with open(tmp_path / "a.fg", "rb") as f:
        assert fg.load(f, weights_only=True)["t"].tolist() == [[1.0, 2.0]]


def test_both_backends_read_each_others_files():
    obj = {"w": fastgrad.tensor([[0.1, -2.0]], dtype=fastgrad.float64), "n": fastgrad.tensor([3, 4])}
    assert saved_bytes(fastgrad, obj) == saved_bytes(
        fastgrad.reference,
        {
            "w": fastgrad.reference.tensor([[0.1, -2.0]], dtype=fastgrad.reference.float64),
            "n": fastgrad.reference.tensor([3, 4]),
        },
    )
    back = fastgrad.reference.load(io.BytesIO(saved_bytes(fastgrad, obj)))
    assert isinstance(back["w"], fastgrad.reference.Tensor) and back["w"].tolist() == [[0.1, -2.0]]


def test_unsupported_objects_are_refused(fg):
    with pytest.raises(TypeError, match="cannot save an object of type set"):
        fg.save({1, 2}, io.BytesIO(), format="fastgrad")
    with pytest.raises(TypeError, match="cannot save an object of type function"):
        fg.save({"f": lambda: 0}, io.BytesIO(), format="fastgrad")
    with pytest.raises(RuntimeError, match="CUDA device"):
        fg.load(io.BytesIO(saved_bytes(fg, 1)), map_location="cuda")


SAMPLE = {
    "w": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
    "i": np.array([5, -6]),
    "meta": [1, "two", (3.0, None)],
}


def sample_file(fg):
    return saved_bytes(fg, {k: fg.tensor(v) if isinstance(v, np.ndarray) else v for k, v in SAMPLE.items()})


def test_every_truncation_is_refused(fg):
    blob = sample_file(fg)
    for n in range(len(blob)):
        with pytest.raises(RuntimeError, match="not a valid fastgrad file"):
            fg.load(io.BytesIO(blob[:n]))


def test_every_bit_flip_is_refused(fg):
    blob = sample_file(fg)
    step = 1 if fg is fastgrad else 7  # the reference is slower: every 7th bit
    for bit in range(0, len(blob) * 8, step):
        damaged = bytearray(blob)
        damaged[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(RuntimeError):
            fg.load(io.BytesIO(bytes(damaged)))


def forge(header, data=b"", version=1):
    """A file with a valid checksum around an arbitrary header: what a hostile writer can make."""
    head = json.dumps(header).encode() if not isinstance(header, bytes) else header
    body = head + data
    return struct.pack("<8sIIQ", b"FASTGRAD", version, zlib.crc32(body), len(head)) + body


def tensor_entry(**fields):
    entry = {"dtype": "float32", "shape": [2], "offset": 0, "requires_grad": False}
    entry.update(fields)
    return {"tensor": entry}


@pytest.mark.parametrize(
    "header, data, message",
    [
        (tensor_entry(shape=[2**40, 2**40]), b"\0" * 8, "past the end of the data"),  # no huge allocation
        (tensor_entry(shape=[-1]), b"", "malformed tensor shape"),
        (tensor_entry(shape=[2.0]), b"\0" * 8, "malformed tensor shape"),
        (tensor_entry(offset=-8), b"\0" * 8, "malformed tensor shape or offset"),
        (tensor_entry(dtype="object"), b"\0" * 8, "malformed tensor entry"),
        (tensor_entry(dtype="int64", shape=[1], requires_grad=True), b"\0" * 8, "cannot require grad"),
        ({"list": [tensor_entry(), tensor_entry()]}, b"\0" * 8, "overlaps or leaves gaps"),
        (tensor_entry(), b"\0" * 16, "data section longer"),
        ({"pickle": "cos\nsystem\n(S'echo hi'\ntR."}, b"", "unknown entry 'pickle'"),
        ({"dict": [[{"list": []}, 1]]}, b"", "malformed dict key"),
        ({"dict": [[1]]}, b"", "malformed dict entry"),
        (b"[" * 100000 + b"]" * 100000, b"", "not a valid fastgrad file"),  # deep nesting
        (b"\xff\xfe", b"", "unreadable header"),
        (tensor_entry(shape=[0, 2**62]), b"", "too large to index"),  # no elements, but more than numpy can index
        (tensor_entry(shape=[2**70, 0]), b"", "too large to index"),
        (tensor_entry(shape=[1] * 65), b"\0" * 4, "65 dimensions, more than 64"),
        ({"numpy": {"dtype": "object", "value": 1}}, b"", "malformed numpy scalar"),
        ({"numpy": {"dtype": "float32", "value": "1"}}, b"", "malformed numpy scalar"),
        ({"numpy": {"dtype": "int8", "value": 300}}, b"", "out of range for int8"),
    ],
)
def test_hostile_headers_are_refused(fg, header, data, message):
    with pytest.raises(RuntimeError, match=message):
        fg.load(io.BytesIO(forge(header, data)))


def test_foreign_files_are_refused(fg):
    with pytest.raises(RuntimeError, match="magic"):
        fg.load(io.BytesIO(b"GIF89a an image"))
    with pytest.raises(RuntimeError, match="not a valid PyTorch checkpoint"):
        fg.load(io.BytesIO(b"PK\x03\x04 a damaged zip file"))
    with pytest.raises(RuntimeError, match="format version 2"):
        fg.load(io.BytesIO(forge(1, version=2)))


def test_random_garbage_is_refused(fg):
    rng = np.random.default_rng(0)
    blob = sample_file(fg)
    for _ in range(200):
        damaged = bytearray(blob)
        start = int(rng.integers(0, len(blob)))
        damaged[start : start + 8] = rng.bytes(8)
        if bytes(damaged) != blob:
            with pytest.raises(RuntimeError):
                fg.load(io.BytesIO(bytes(damaged)))


def test_module_and_optimizer_state_round_trip(fg, tmp_path):
    """A checkpoint (model + optimizer state_dicts) saved mid-training resumes exactly."""

    def model_and_optimizer():
        fg.manual_seed(0)
        model = fg.nn.Sequential(fg.nn.Linear(3, 4), fg.nn.ReLU(), fg.nn.Linear(4, 2))
        return model, fg.optim.Adam(model.parameters(), lr=0.01)

    def step(model, optimizer):
        optimizer.zero_grad()
        loss = fg.nn.functional.cross_entropy(model(x), target)
        loss.backward()
        optimizer.step()
        return loss.item()

    x, target = fg.tensor([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]]), fg.tensor([1, 0])
    model, optimizer = model_and_optimizer()
    for _ in range(3):
        step(model, optimizer)
    fg.save(
        {"model": model.state_dict(), "optimizer": optimizer.state_dict()},
        tmp_path / "checkpoint.fg",
        format="fastgrad",
    )
    expected = [step(model, optimizer) for _ in range(3)]

    resumed, resumed_optimizer = model_and_optimizer()
    checkpoint = fg.load(tmp_path / "checkpoint.fg")
    resumed.load_state_dict(checkpoint["model"])
    resumed_optimizer.load_state_dict(checkpoint["optimizer"])
    assert [step(resumed, resumed_optimizer) for _ in range(3)] == expected
    for a, b in zip(model.parameters(), resumed.parameters()):
        assert fg.equal(a, b)


def torch_roundtrip(lib, obj, format=None, **load_options):
    """Saved and loaded by lib, in save's default format (format: fastgrad's save format)."""
    buffer = io.BytesIO()
    lib.save(obj, buffer, **({"format": format} if format else {}))
    return lib.load(io.BytesIO(buffer.getvalue()), **load_options)


def location(lib, where):
    """A map_location with ("device", name) standing for lib.device(name), also as a dict value."""
    if isinstance(where, tuple):
        return lib.device(where[1])
    if isinstance(where, dict):
        return {k: location(lib, v) for k, v in where.items()}
    return where


@pytest.mark.parametrize(
    "map_location",
    [
        "cpu",
        ("device", "cpu"),
        {"cuda:0": "cpu"},
        {"cpu": "cpu"},
        {},
        lambda storage, location: storage,
        lambda storage, location: None,
    ],
)
def test_map_location_forms_that_lead_to_the_cpu(fg, torch, map_location):
    def program(lib):
        t = torch_roundtrip(lib, {"t": lib.tensor([1.0, 2.0])}, map_location=location(lib, map_location))["t"]
        return t.tolist(), str(t.device)

    assert program(fg) == program(torch)


@pytest.mark.parametrize(
    "map_location", ["cuda", "cpu:0", ("device", "cpu:0"), {"cpu": "cuda:0"}, {"cpu": ("device", "cpu")}, 3]
)
def test_map_location_forms_that_leave_the_cpu_are_refused(fg, torch, map_location):
    def program(lib):
        return torch_roundtrip(lib, lib.tensor([1.0]), map_location=location(lib, map_location))

    ours, theirs = pytest.raises(Exception, program, fg).value, pytest.raises(Exception, program, torch).value
    assert type(ours) is type(theirs)


def test_numpy_scalars_and_ordered_dicts_round_trip(fg, torch):
    obj = collections.OrderedDict(
        [("b", np.float32(1.5)), ("a", [np.int64(-3), np.bool_(True), np.float64(0.1), np.uint8(255), np.float16(2.5)])]
    )
    ours, theirs = torch_roundtrip(fg, obj, format="fastgrad"), torch_roundtrip(torch, obj, weights_only=False)
    assert type(ours) is type(theirs) is collections.OrderedDict and list(ours) == list(theirs) == ["b", "a"]
    assert [type(v) for v in ours["a"]] == [type(v) for v in theirs["a"]] and ours["a"] == theirs["a"]
    assert type(ours["b"]) is type(theirs["b"]) and ours["b"] == theirs["b"]
    assert type(torch_roundtrip(fg, {"k": 1}, format="fastgrad")) is dict
    ours = torch_roundtrip(fg, obj, weights_only=False)  # PyTorch's format: numpy scalars are pickled
    assert type(ours) is collections.OrderedDict and ours == theirs


def test_loaded_bools_whose_bytes_are_not_0_or_1_read_as_true(fg, torch):
    """A file's bool bytes other than 0/1 read as True, as the same bytes do in PyTorch (from numpy)."""
    raw = bytes([0, 1, 2, 255])
    t = fg.load(io.BytesIO(forge(tensor_entry(dtype="bool", shape=[4]), raw)))
    expected = torch.from_numpy(np.frombuffer(raw, dtype=bool).copy())
    assert t.long().tolist() == expected.long().tolist() and (t == True).tolist() == (expected == True).tolist()  # noqa: E712
