"""PyTorch checkpoints: fastgrad.load of torch.save files and torch.load of fastgrad.save files
(save's default format), compared with real PyTorch; hostile files refused with nothing run."""

import collections
import io
import os
import pickle
import struct
import zipfile

import numpy as np
import pytest

import fastgrad
import fastgrad.reference


def torch_saved(torch, obj, **options):
    buffer = io.BytesIO()
    torch.save(obj, buffer, **options)
    return buffer.getvalue()


def fg_saved(fg, obj):
    buffer = io.BytesIO()
    fg.save(obj, buffer)
    return buffer.getvalue()


def bits(t):
    """The stored values as numpy, bit for bit; bfloat16 as float32 with NaNs made one NaN (fastgrad
    builds bfloat16 tensors from float32, which keeps every value but not NaN payloads)."""
    if str(t.dtype).endswith("bfloat16"):
        t = t.float().nan_to_num(nan=12345.0)
    a = np.atleast_1d(t.detach().numpy())
    return a.view(f"u{a.itemsize}") if a.dtype.kind == "f" else a


def same_tensor(ours, theirs):
    """Equal dtype, shape, strides, offset, requires_grad and bits; ours fastgrad, theirs PyTorch, either way."""
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    assert tuple(ours.shape) == tuple(theirs.shape) and tuple(ours.stride()) == tuple(theirs.stride())
    assert ours.storage_offset() == theirs.storage_offset() and ours.requires_grad == theirs.requires_grad
    assert np.array_equal(bits(ours), bits(theirs))


def zip_file(records, prefix="archive", compression=zipfile.ZIP_STORED):
    """A checkpoint-shaped zip holding exactly `records` ({name: bytes}): what a hostile writer can make."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in records.items():
            archive.writestr(f"{prefix}/{name}", data)
    return buffer.getvalue()


def records_of(blob):
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        return {name.split("/", 1)[1]: archive.read(name) for name in archive.namelist()}


def message(lib, error):
    """The error's text with the library's own serialization module named as PyTorch's."""
    return str(error).replace(f"{lib.__name__}.serialization", "torch.serialization")


def load_error(lib, blob, **options):
    with pytest.raises(Exception) as info:
        lib.load(io.BytesIO(blob), **options)
    return info.value


def same_load_error(fg, torch, blob, **options):
    ours, theirs = load_error(fg, blob, **options), load_error(torch, blob, **options)
    assert type(ours) is type(theirs) and str(theirs).startswith(message(fg, ours))  # PyTorch's may add a hint


# ---- hand-written pickles (protocol 2 opcodes)


def text(s):
    return b"X" + struct.pack("<I", len(s.encode())) + s.encode()


def integer(n):
    return (
        b"J" + struct.pack("<i", n)
        if -(2**31) <= n < 2**31
        else b"\x8a" + bytes([len(pickle.encode_long(n))]) + pickle.encode_long(n)
    )


def int_tuple(values):
    return b"(" + b"".join(integer(v) for v in values) + b"t"


def tensor_pickle(size, stride, offset, numel, storage="FloatStorage"):
    """data.pkl of one tensor over storage "0" of `numel` elements, whatever its geometry."""
    pid = b"(" + text("storage") + f"ctorch\n{storage}\n".encode() + text("0") + text("cpu") + integer(numel) + b"tQ"
    args = pid + integer(offset) + int_tuple(size) + int_tuple(stride) + b"\x89ccollections\nOrderedDict\n)R"
    return b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(" + args + b"tR."


def one_tensor_file(pkl, data=b"\0" * 16, **extra):
    return zip_file({"data.pkl": pkl, "byteorder": b"little", "data/0": data, "version": b"3\n", **extra})


class Point:
    """A user class, pickled as NEWOBJ + BUILD: weights-only loads need it allow-listed."""

    def __init__(self, x, y):
        self.x, self.y = x, y


# ---- PyTorch -> fastgrad


def mlp(lib):
    return lib.nn.Sequential(lib.nn.Linear(3, 5), lib.nn.Tanh(), lib.nn.Linear(5, 2))


def train(lib, model, optimizer, x, y, steps):
    for _ in range(steps):
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()


def test_a_model_and_optimizer_trained_in_pytorch_resume_in_fastgrad_and_back(fg, torch):
    torch.manual_seed(0)
    x, y = torch.randn(6, 3), torch.randn(6, 2)
    theirs = mlp(torch)
    their_optimizer = torch.optim.Adam(theirs.parameters(), lr=0.01)
    train(torch, theirs, their_optimizer, x, y, 3)
    checkpoint = fg.load(
        io.BytesIO(torch_saved(torch, {"model": theirs.state_dict(), "opt": their_optimizer.state_dict()}))
    )

    state = checkpoint["model"]
    assert type(state) is collections.OrderedDict and list(state) == list(theirs.state_dict())
    assert state._metadata == theirs.state_dict()._metadata
    for key, value in theirs.state_dict().items():
        same_tensor(state[key], value)
    ours = mlp(fg)
    ours.load_state_dict(state)
    our_optimizer = fg.optim.Adam(ours.parameters(), lr=0.01)
    our_optimizer.load_state_dict(checkpoint["opt"])
    fx, fy = fg.tensor(x.numpy()), fg.tensor(y.numpy())
    np.testing.assert_allclose(ours(fx).detach().numpy(), theirs(x).detach().numpy(), rtol=1e-6, atol=1e-7)

    train(fg, ours, our_optimizer, fx, fy, 3)  # resumed mid-training, in both
    train(torch, theirs, their_optimizer, x, y, 3)
    np.testing.assert_allclose(ours(fx).detach().numpy(), theirs(x).detach().numpy(), rtol=1e-5, atol=1e-6)

    back = torch.load(io.BytesIO(fg_saved(fg, {"model": ours.state_dict(), "opt": our_optimizer.state_dict()})))
    resumed = mlp(torch)
    resumed.load_state_dict(back["model"])
    assert torch.load(io.BytesIO(fg_saved(fg, state)))._metadata == state._metadata  # kept when there is one
    for key, value in ours.state_dict().items():
        same_tensor(value, back["model"][key])
    np.testing.assert_allclose(resumed(x).detach().numpy(), ours(fx).detach().numpy(), rtol=1e-6, atol=1e-7)
    assert back["opt"]["param_groups"] == their_optimizer.state_dict()["param_groups"]
    for index, entry in our_optimizer.state_dict()["state"].items():
        for name, value in entry.items():
            same_tensor(value, back["opt"]["state"][index][name])


SPECIAL = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.5, -2.25, 3.0]


def every_dtype(lib):
    """A tensor of every dtype both libraries have, with extreme values; a view among them."""
    floats = lib.tensor(SPECIAL)
    values = {
        "float32": floats,
        "float64": lib.tensor(SPECIAL, dtype=lib.float64) * 1e300,
        "float16": floats.half(),
        "bfloat16": floats.bfloat16(),
        "int64": lib.tensor([2**63 - 1, -(2**63), 0, -1]),
        "int32": lib.tensor([2**31 - 1, -(2**31), 7], dtype=lib.int32),
        "int16": lib.tensor([32767, -32768], dtype=lib.int16),
        "int8": lib.tensor([127, -128, 0], dtype=lib.int8),
        "uint8": lib.tensor([0, 255, 17], dtype=lib.uint8),
        "bool": lib.tensor([True, False, True]),
        "scalar": lib.tensor(2.5),
        "empty": lib.zeros(0, 3),
    }
    values["view"] = values["float64"].reshape(2, 4).t()[1:]
    return values


def test_every_dtype_both_ways(fg, torch):
    ours = fg.load(io.BytesIO(torch_saved(torch, every_dtype(torch))))
    for key, theirs in every_dtype(torch).items():
        same_tensor(ours[key], theirs)
    theirs = torch.load(io.BytesIO(fg_saved(fg, every_dtype(fg))), weights_only=True)
    for key, value in every_dtype(fg).items():
        same_tensor(value, theirs[key])


def shared_views(lib):
    base = lib.arange(12.0).reshape(3, 4)
    return {"base": base, "t": base.t(), "strided": base[1:, ::2], "row": base[2], "expanded": base[0].expand(2, 4)}


def test_views_keep_their_storage_both_ways(fg, torch):
    ours = fg.load(io.BytesIO(torch_saved(torch, shared_views(torch))))
    theirs = shared_views(torch)
    for key in theirs:
        same_tensor(ours[key], theirs[key])
    ours["base"][2, 0] = -1.0  # one storage: the write is seen through every view
    assert ours["t"][0, 2].item() == ours["row"][0].item() == -1.0

    back = torch.load(io.BytesIO(fg_saved(fg, shared_views(fg))), weights_only=True)
    assert len({t.untyped_storage().data_ptr() for t in back.values()}) == 1
    for key, value in shared_views(fg).items():
        same_tensor(value, back[key])


def containers(lib):
    w = lib.tensor([[1.0, 2.0]], requires_grad=True)
    return {
        "state": {0: {"step": 3, "buffer": w}, 1: {}},
        "groups": [{"lr": 0.1, "betas": (0.9, 0.999), "name": None, "nesterov": False}],
        "misc": [float("inf"), -0.0, 2**70, -(2**40), "text", b"\x00\xff", {1, 2}, 1 + 2j, bytearray(b"ab")],
        "torch": [lib.Size([2, 3]), lib.float16, lib.device("cpu"), lib.nn.Parameter(lib.ones(2))],
        "grad": w * 2,
        "shared": [w, w],
        "counter": collections.Counter("abca"),
    }


def test_nested_containers_both_ways(fg, torch):
    def plain(obj):
        """The tree with tensors as (dtype name, values, requires_grad, type name) and the rest as is."""
        if isinstance(obj, (fg.Tensor, torch.Tensor)):
            kind = "Parameter" if isinstance(obj, (fg.nn.Parameter, torch.nn.Parameter)) else "Tensor"
            return str(obj.dtype).split(".")[-1], obj.tolist(), obj.requires_grad, kind
        if isinstance(obj, (fg.dtype, torch.dtype, fg.device, torch.device)):
            return type(obj).__name__, str(obj).split(".")[-1]
        if isinstance(obj, (fg.Size, torch.Size)):
            return "Size", tuple(obj)
        if isinstance(obj, dict):
            return type(obj).__name__, [(k, plain(v)) for k, v in obj.items()]
        if isinstance(obj, (list, tuple)):
            return type(obj).__name__, [plain(v) for v in obj]
        return type(obj).__name__, obj

    ours = fg.load(io.BytesIO(torch_saved(torch, containers(torch))))
    assert plain(ours) == plain(containers(torch))
    assert ours["shared"][0] is ours["shared"][1] and ours["state"][0]["buffer"] is ours["shared"][0]
    theirs = torch.load(io.BytesIO(fg_saved(fg, containers(fg))), weights_only=True)
    assert plain(theirs) == plain(containers(fg))
    assert isinstance(theirs["torch"][0], torch.Size) and theirs["torch"][1] is torch.float16


def test_tensor_attributes_are_kept_and_dunders_refused(fg, torch):
    t = torch.ones(2)
    t.note = "x"
    blob = torch_saved(torch, {"t": t})
    assert fg.load(io.BytesIO(blob))["t"].note == torch.load(io.BytesIO(blob))["t"].note == "x"
    records = records_of(blob)
    records["data.pkl"] = records["data.pkl"].replace(text("note"), text("__class__"))
    with pytest.raises(pickle.UnpicklingError, match="tensor attribute '__class__'"):
        fg.load(io.BytesIO(zip_file(records)))


def test_both_backends_write_the_same_bytes():
    assert fg_saved(fastgrad, every_dtype(fastgrad)) == fg_saved(fastgrad.reference, every_dtype(fastgrad.reference))


def test_written_records_are_pytorchs(fg, torch, tmp_path):
    fg.save({"a": fg.ones(3), "b": fg.zeros(2, dtype=fg.int8)}, tmp_path / "model.pt")
    torch.save({"a": torch.ones(3), "b": torch.zeros(2, dtype=torch.int8)}, tmp_path / "theirs.pt")
    ours, theirs = zipfile.ZipFile(tmp_path / "model.pt"), zipfile.ZipFile(tmp_path / "theirs.pt")
    assert [i.filename.replace("model/", "") for i in ours.infolist()] == [
        i.filename.replace("theirs/", "") for i in theirs.infolist()
    ]
    raw = (tmp_path / "model.pt").read_bytes()
    for info in ours.infolist():  # every record's data starts 64-byte aligned, as PyTorch's
        name_length, extra_length = struct.unpack_from("<HH", raw, info.header_offset + 26)
        assert (info.header_offset + 30 + name_length + extra_length) % 64 == 0
        assert ours.read(info) == theirs.read(info.filename.replace("model/", "theirs/")) or "serialization_id" in (
            info.filename
        )
    loaded = torch.load(tmp_path / "model.pt", mmap=True, weights_only=True)
    assert loaded["a"].tolist() == [1.0, 1.0, 1.0] and loaded["b"].dtype is torch.int8


def test_big_endian_files(fg, torch):
    records = records_of(
        torch_saved(torch, {"x": torch.tensor([1.5, -2.0]), "h": torch.tensor([7], dtype=torch.int16)})
    )
    records["byteorder"] = b"big"
    for name in [n for n in records if n.startswith("data/")]:
        itemsize = 4 if len(records[name]) == 8 else 2
        records[name] = np.frombuffer(records[name], f"<u{itemsize}").astype(f">u{itemsize}").tobytes()
    blob = zip_file(records)
    ours, theirs = fg.load(io.BytesIO(blob)), torch.load(io.BytesIO(blob))
    assert ours["x"].tolist() == theirs["x"].tolist() == [1.5, -2.0] and ours["h"].tolist() == theirs["h"].tolist()
    records["byteorder"] = b"middle"
    same_load_error(fg, torch, zip_file(records))


def test_map_location_and_mmap(fg, torch, tmp_path):
    records = records_of(torch_saved(torch, torch.tensor([1.0, 2.0])))
    records["data.pkl"] = records["data.pkl"].replace(text("cpu"), text("cuda:0"))  # saved on a GPU
    blob = zip_file(records)
    same_load_error(fg, torch, blob)
    for where in [{"cuda:0": "cpu"}, "cpu", lambda storage, location: storage]:
        assert fg.load(io.BytesIO(blob), map_location=where).tolist() == [1.0, 2.0]

    torch.save({"w": torch.arange(4.0)}, tmp_path / "w.pt")
    mapped = fg.load(tmp_path / "w.pt", mmap=True)
    mapped["w"][0] = 9.0  # copy on write: the file keeps its values
    assert mapped["w"].tolist() == [9.0, 1.0, 2.0, 3.0] and fg.load(tmp_path / "w.pt")["w"].tolist()[0] == 0.0
    with open(tmp_path / "w.pt", "rb") as f:
        ours = pytest.raises(ValueError, fg.load, f, mmap=True).value
    with open(tmp_path / "w.pt", "rb") as f:
        assert str(ours) == str(pytest.raises(ValueError, torch.load, f, mmap=True).value)


def test_whole_modules_need_weights_only_false(fg, tmp_path):
    model = mlp(fg)
    fg.save(model, tmp_path / "model.pt")
    with pytest.raises(pickle.UnpicklingError, match=f"GLOBAL {type(model).__module__}.Sequential was not an allowed"):
        fg.load(tmp_path / "model.pt")
    loaded = fg.load(tmp_path / "model.pt", weights_only=False)
    x = fg.randn(2, 3)
    assert type(loaded) is type(model) and fg.equal(loaded(x), model(x))
    assert isinstance(loaded[0].weight, fg.nn.Parameter) and loaded[0].weight.requires_grad


def test_safe_globals(fg, torch):
    blob = torch_saved(torch, {"p": Point(1, [2.0])})
    same_load_error(fg, torch, blob)
    with fg.serialization.safe_globals([Point]):
        assert fg.serialization.get_safe_globals() == [Point]
        point = fg.load(io.BytesIO(blob))["p"]
    assert type(point) is Point and (point.x, point.y) == (1, [2.0])
    assert fg.serialization.get_safe_globals() == []
    fg.serialization.add_safe_globals([(Point, f"{Point.__module__}.Point")])
    try:
        assert type(fg.load(io.BytesIO(blob))["p"]) is Point
    finally:
        fg.serialization.clear_safe_globals()
    assert fg.serialization.get_safe_globals() == []

    def registry(lib):
        """Whether the globals are allowed inside and after a safe_globals block over one added before."""
        ours = {Point, collections.UserDict}
        lib.serialization.add_safe_globals([Point])
        with lib.serialization.safe_globals(list(ours)):
            inside = ours <= set(lib.serialization.get_safe_globals())
        return inside, ours & set(lib.serialization.get_safe_globals())

    assert registry(fg) == registry(torch)


def test_unsafe_globals_in_checkpoint(fg, torch):
    blob = torch_saved(torch, {"p": Point(1, 2), "s": frozenset([1]), "w": torch.ones(1), "n": {1}})
    ours = fg.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(blob))
    assert ours == sorted(torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(blob)))
    assert ours == ["builtins.frozenset", f"{__name__}.Point"]
    with fg.serialization.safe_globals([Point]):
        assert fg.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(blob)) == ["builtins.frozenset"]
    with pytest.raises(ValueError, match="Expected input to be a checkpoint returned by torch.save"):
        fg.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(b"FASTGRAD, not a zip"))


# ---- refused files


def test_code_in_a_pickle_never_runs(fg, torch, tmp_path):
    witness = tmp_path / "ran"

    class Exploit:
        def __reduce__(self):
            return os.system, (f"touch {witness}",)

    for hostile in [
        torch_saved(torch, {"x": Exploit()}),  # posix.system: a blocked module
        one_tensor_file(b"\x80\x02cos\nsystem\n" + text(f"touch {witness}") + b"\x85R."),
        one_tensor_file(b"\x80\x02c__builtin__\neval\n" + text("print(1)") + b"\x85R."),
        one_tensor_file(b"\x80\x02cfastgrad\nload\n" + text("x") + b"\x85R."),
    ]:
        same_load_error(fg, torch, hostile)
        assert not witness.exists()
    assert "Unsupported global: GLOBAL eval was not an allowed global" in str(
        load_error(fg, one_tensor_file(b"\x80\x02c__builtin__\neval\n" + text("print(1)") + b"\x85R."))
    )


@pytest.mark.parametrize(
    "pkl",
    [
        b"\x80\x02c_codecs\nencode\n" + text("ab") + text("latin1") + b"\x86R)R.",  # REDUCE on bytes
        b"\x80\x02c__builtin__\nset\n]\x85R" + b"(K\x01K\x02u.",  # SETITEMS on a set
        b"\x80\x02]K\x01K\x02s.",  # SETITEM on a list
        b"\x80\x02K\x01K\x02\x81.",  # NEWOBJ of an int
        b"\x80\x02(X\x03\x00\x00\x00fooK\x01tQ.",  # a persistent id of something else than a storage
        b"\x80\x02\xff.",  # an unknown opcode
    ],
)
def test_malformed_pickles_fail_as_in_pytorch(fg, torch, pkl):
    same_load_error(fg, torch, one_tensor_file(pkl))


@pytest.mark.parametrize(
    "pkl, why",
    [
        (b"\x80\x02(\x85.", "malformed pickle"),  # a MARK where a value is expected
        (b"\x80\x02h\x07.", "malformed pickle"),  # a memo entry never stored
        (b"\x80\x02X\xff\xff\xff\x7fab", "truncated"),
        (b"\x80\x02" + b"(" * 5000, "nested deeper than 1000"),
        (b"\x80\x02c__builtin__\nset\n" + b"]" * 10**4 + b"a" * (10**4 - 1) + b"\x85\x85R.", "unhashable"),
        (b"\x80\x02K\x01", "truncated"),
        (b"\x80\x02X\x02\x00\x00\x00\xff\xfe.", "malformed pickle string"),
        (b"\x80\x02K\x01K\x02\x86Q.", "Only persistent_load of storage"),  # PyTorch: an AssertionError
        (b"\x80\x02" + text("storage") + b"K\x02\x86Q.", "malformed storage id"),
        (b"\x80\x02]Q.", "persistent_load id must be tuple or int"),
        (b"\x80\x02\x85.", "malformed pickle"),  # PyTorch: an IndexError
    ],
)
def test_damaged_pickles_raise_unpickling_errors(fg, pkl, why):
    error = load_error(fg, one_tensor_file(pkl))
    assert type(error) is pickle.UnpicklingError and why in str(error)


@pytest.mark.parametrize(
    "size, stride, offset, numel",
    [
        ((2, 3), (3, 1), 0, 5),  # one element past the storage
        ((4,), (1,), 2, 4),  # the offset pushes it out
        ((2,), (7,), 0, 4),
    ],
)
def test_tensors_outside_their_storage_are_refused_as_in_pytorch(fg, torch, size, stride, offset, numel):
    blob = one_tensor_file(tensor_pickle(size, stride, offset, numel), data=b"\0" * 4 * numel)
    same_load_error(fg, torch, blob)


def test_bad_geometry_and_storages(fg):
    for pkl, data, why in [
        (tensor_pickle((-2,), (1,), 0, 4), b"\0" * 16, "invalid tensor geometry"),
        (tensor_pickle((2,), (1,), -1, 4), b"\0" * 16, "storage offset -1"),
        (tensor_pickle((4,), (1,), 0, 4), b"\0" * 15, "truncated or damaged"),
        (tensor_pickle((4,), (1,), 0, 2**40), b"\0" * 16, "truncated or damaged"),  # no huge allocation
        (tensor_pickle((2,), (1,), 0, 4, storage="ComplexFloatStorage"), b"\0" * 32, "no dtype for"),
    ]:
        with pytest.raises(RuntimeError, match=why):
            fg.load(io.BytesIO(one_tensor_file(pkl, data=data)))


def test_bad_zip_files(fg, torch):
    good = records_of(torch_saved(torch, torch.ones(2)))
    same_load_error(fg, torch, zip_file({k: v for k, v in good.items() if k != "data/0"}))  # missing data/0
    same_load_error(fg, torch, zip_file({k: v for k, v in good.items() if k != "data.pkl"}))
    with pytest.raises(RuntimeError, match="compressed"):
        fg.load(io.BytesIO(zip_file(good, compression=zipfile.ZIP_DEFLATED)))
    with pytest.raises(RuntimeError, match="not a valid PyTorch checkpoint"):
        fg.load(io.BytesIO(zip_file({})))
    blob = torch_saved(torch, {"w": torch.arange(6.0)})
    for n in range(0, len(blob), 11):  # every truncation: a clear error
        with pytest.raises((RuntimeError, pickle.UnpicklingError)):
            fg.load(io.BytesIO(blob[:n]))
    for bit in range(0, len(blob) * 8, 41):  # bit flips: a zip or CRC error, or a load that reads the same
        damaged = bytearray(blob)
        damaged[bit // 8] ^= 1 << (bit % 8)
        try:
            loaded = fg.load(io.BytesIO(bytes(damaged)))
        except (RuntimeError, pickle.UnpicklingError, ValueError):
            continue
        assert loaded["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_legacy_format_is_refused(fg, torch):
    with pytest.raises(RuntimeError, match="legacy checkpoint format"):
        fg.load(io.BytesIO(torch_saved(torch, torch.ones(2), _use_new_zipfile_serialization=False)))
    with pytest.raises(ValueError, match="format must be 'torch' or 'fastgrad'"):
        fg.save(fg.ones(1), io.BytesIO(), format="npz")
