"""fastgrad.safetensors: round trips, files exchanged with the `safetensors` package (byte for byte
where its writer is deterministic), memory-mapped loading, and refusal of hostile headers."""

import gc
import json
import struct

import numpy as np
import pytest

DTYPES = ["float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]


@pytest.fixture(scope="module")
def package():
    """The safetensors package, or a clean skip."""
    return pytest.importorskip("safetensors")


def sample(lib, dtype, shape=(2, 3), seed=0):
    """A tensor of lib (fastgrad or torch) holding values exact in every dtype, the same for both."""
    values = np.random.default_rng(seed).integers(-8, 8, size=shape) * 0.5
    if dtype == "bool":
        values = values > 0
    elif dtype in ("uint8",):
        values = np.abs(values)
    tensor = lib.tensor(values.tolist(), dtype=lib.float64)
    return tensor.to(getattr(lib, dtype))


def tensors_of(lib):
    named = {f"t_{dtype}": sample(lib, dtype, seed=i) for i, dtype in enumerate(DTYPES)}
    named["empty"] = lib.zeros(0, 3)
    named["scalar"] = lib.tensor(2.5)
    return named


def as_numpy(t):
    """Values of a fastgrad or torch tensor as float64/bool numpy (bfloat16 included)."""
    return np.array(t.tolist())


def assert_same_tensors(ours, theirs):
    assert sorted(ours) == sorted(theirs)
    for name in ours:
        assert str(ours[name].dtype).split(".")[-1] == str(theirs[name].dtype).split(".")[-1], name
        assert tuple(ours[name].shape) == tuple(theirs[name].shape), name
        np.testing.assert_array_equal(as_numpy(ours[name]), as_numpy(theirs[name]))


def test_round_trip_bytes_and_file(fg, tmp_path):
    tensors = tensors_of(fg)
    assert_same_tensors(fg.safetensors.load(fg.safetensors.save(tensors)), tensors)
    path = tmp_path / "model.safetensors"
    fg.safetensors.save_file(tensors, path, metadata={"format": "pt"})
    assert_same_tensors(fg.safetensors.load_file(path), tensors)
    with fg.safetensors.safe_open(path, framework="pt") as f:
        assert f.metadata() == {"format": "pt"}
        assert f.keys() == sorted(tensors)


@pytest.mark.parametrize("metadata", [None, {}, {"format": "pt"}])
def test_bytes_equal_the_package_writer(fg, torch, package, metadata):
    import safetensors.torch

    ours = fg.safetensors.save(tensors_of(fg), metadata=metadata)
    assert ours == safetensors.torch.save(tensors_of(torch), metadata=metadata)
    header_length = struct.unpack("<Q", ours[:8])[0]
    assert header_length % 8 == 0 and ours[8 + header_length - 1 : 8 + header_length] in (b" ", b"}")


def test_files_exchanged_with_the_package(fg, torch, package, tmp_path):
    import safetensors.torch

    theirs_path, ours_path = tmp_path / "theirs.safetensors", tmp_path / "ours.safetensors"
    safetensors.torch.save_file(tensors_of(torch), theirs_path, metadata={"k": "v"})
    assert_same_tensors(fg.safetensors.load_file(theirs_path), tensors_of(torch))
    with fg.safetensors.safe_open(theirs_path, framework="pt") as f:
        assert f.metadata() == {"k": "v"}
    fg.safetensors.save_file(tensors_of(fg), ours_path, metadata={"k": "v"})
    assert_same_tensors(safetensors.torch.load_file(ours_path), tensors_of(fg))
    with package.safe_open(ours_path, framework="pt") as f:
        assert f.metadata() == {"k": "v"}
    data = fg.safetensors.save(tensors_of(fg))
    assert_same_tensors(safetensors.torch.load(data), fg.safetensors.load(data))


def address(t):
    return t.numpy().__array_interface__["data"][0]


def test_load_file_maps_the_file_copy_on_write(fg, tmp_path):
    path = tmp_path / "m.safetensors"
    fg.safetensors.save_file({"a": fg.arange(4.0), "b": fg.arange(3), "c": fg.ones(2, 2)}, path)
    loaded = fg.safetensors.load_file(path)
    header_length = struct.unpack("<Q", path.read_bytes()[:8])[0]
    offsets = {k: v["data_offsets"][0] for k, v in json.loads(path.read_bytes()[8 : 8 + header_length]).items()}
    # views of one mapping: the tensors lie apart exactly as their bytes in the file (copies would not)
    assert address(loaded["b"]) - address(loaded["a"]) == offsets["b"] - offsets["a"]
    assert address(loaded["c"]) - address(loaded["a"]) == offsets["c"] - offsets["a"]
    before = path.read_bytes()
    loaded["a"].add_(1)  # writable, and the file keeps its bytes
    assert path.read_bytes() == before
    kept = loaded["c"]
    del loaded
    gc.collect()
    path.unlink()
    np.testing.assert_array_equal(kept.numpy(), np.ones((2, 2), np.float32))  # the mapping lives on with the tensor


def test_safe_open_like_the_package(fg, torch, package, tmp_path):
    import safetensors.torch

    path = tmp_path / "s.safetensors"
    safetensors.torch.save_file({"w": torch.arange(24.0).reshape(2, 3, 4), "b": torch.ones(2)}, path)
    indexes = [(slice(None), slice(1, None)), 1, (0, 2), (Ellipsis, 1), (slice(0, 2, 2),)]
    with fg.safetensors.safe_open(path, framework="pt") as ours, package.safe_open(path, framework="pt") as theirs:
        assert ours.keys() == theirs.keys() and ours.metadata() == theirs.metadata()
        ours_slice, theirs_slice = ours.get_slice("w"), theirs.get_slice("w")
        assert ours_slice.get_shape() == theirs_slice.get_shape()
        assert ours_slice.get_dtype() == theirs_slice.get_dtype()
        for index in indexes:
            ours_part, theirs_part = ours_slice[index], theirs_slice[index]
            assert tuple(ours_part.shape) == tuple(theirs_part.shape), index
            np.testing.assert_array_equal(as_numpy(ours_part), as_numpy(theirs_part))
        for opened, error in ((ours, fg.safetensors.SafetensorError), (theirs, package.SafetensorError)):
            with pytest.raises(error, match="^File does not contain tensor x$"):
                opened.get_tensor("x")
    with pytest.raises(fg.safetensors.SafetensorError, match="^File is closed$"):
        ours.keys()
    with pytest.raises(fg.safetensors.SafetensorError, match="^framework xx is invalid$"):
        fg.safetensors.safe_open(path, framework="xx")
    with fg.safetensors.safe_open(path, framework="np") as f:
        np.testing.assert_array_equal(f.get_tensor("b"), np.ones(2, np.float32))


def test_shared_memory_refused_as_by_the_package(fg, torch, package):
    import safetensors.torch

    def error(lib, save):
        base = lib.arange(6.0)
        with pytest.raises(RuntimeError) as info:
            save({"a": base, "b": base[2:]})
        return str(info.value)

    ours, theirs = error(fg, fg.safetensors.save), error(torch, safetensors.torch.save)
    assert ours in (theirs, theirs.replace("{'a', 'b'}", "{'b', 'a'}"), theirs.replace("{'b', 'a'}", "{'a', 'b'}"))
    # disjoint parts of one storage, and a non-contiguous view (saved as a contiguous copy), are saved
    base, transposed = fg.arange(6.0).reshape(2, 3), fg.arange(6.0).reshape(2, 3).t()
    loaded = fg.safetensors.load(fg.safetensors.save({"a": base[0], "b": base[1], "t": transposed}))
    np.testing.assert_array_equal(loaded["a"].numpy(), base[0].numpy())
    np.testing.assert_array_equal(loaded["t"].numpy(), transposed.numpy())


@pytest.mark.parametrize(
    "tensors, metadata",
    [([1], None), ({"a": [1.0]}, None), ({1: None}, None), ({}, {"k": 1}), ({}, {2: "v"}), ({}, "meta")],
)
def test_bad_arguments_to_save_as_the_package(fg, torch, package, tensors, metadata):
    import safetensors.torch

    def error(lib, save):
        named = (
            {name: lib.ones(1) if value is None else value for name, value in tensors.items()}
            if isinstance(tensors, dict)
            else tensors
        )
        with pytest.raises((ValueError, TypeError)) as info:
            save(named, metadata=metadata)
        return type(info.value), str(info.value)

    assert error(fg, fg.safetensors.save) == error(torch, safetensors.torch.save)


def header(entries, data=b"", raw=None):
    text = raw if raw is not None else json.dumps(entries).encode()
    return struct.pack("<Q", len(text)) + text + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


# Files the package refuses: ours must refuse them with its message
REFUSED_BY_BOTH = {
    "too small": b"abc",
    "header past the end": struct.pack("<Q", 1000) + b"{}",
    "header too large": struct.pack("<Q", 2**63) + b"{}",
    "overlapping": header({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 2, 6)}, bytes(6)),
    "past the data": header({"a": entry("F32", [2], 0, 8)}, bytes(4)),
    "gap": header({"a": entry("F32", [1], 4, 8)}, bytes(8)),
    "data left over": header({"a": entry("F32", [1], 0, 4)}, bytes(8)),
    "reversed offsets": header({"a": entry("F32", [0], 4, 0)}, bytes(4)),
    "size differs from offsets": header({"a": entry("F32", [3], 0, 8)}, bytes(8)),
    "huge shape": header({"a": entry("F32", [2**62, 2**62], 0, 8)}, bytes(8)),
}
# Refused by both with different wordings (the package's are serde's), or accepted by the package
REFUSED = {
    "invalid json": header(None, raw=b"{not json"),
    "invalid utf-8": header(None, raw=b'{"\xff": 1}'),
    "not an object": header([1, 2]),
    "unknown dtype": header({"a": entry("Q9", [1], 0, 4)}, bytes(4)),
    "negative dimension": header({"a": entry("F32", [-1], 0, 4)}, bytes(4)),
    "missing field": header({"a": {"dtype": "F32", "shape": [1]}}, bytes(4)),
    "metadata not strings": header({"__metadata__": {"k": 1}}),
    "dtype fastgrad lacks": header({"a": entry("C64", [1], 0, 8)}, bytes(8)),
    "duplicate keys": header(
        None, bytes(4), raw=b'{"a": %s, "a": %s}' % ((json.dumps(entry("F32", [1], 0, 4)).encode(),) * 2)
    ),
    "bool not 0 or 1": header({"a": entry("BOOL", [2], 0, 2)}, b"\x00\x02"),
    "huge shape of no elements": header({"a": entry("F32", [0, 2**62], 0, 0)}),
    "too many dimensions": header({"a": entry("U8", [1] * 65, 0, 1)}, bytes(1)),
}


@pytest.mark.parametrize("name", sorted(REFUSED_BY_BOTH) + sorted(REFUSED))
def test_hostile_bytes_and_files_refused(fg, tmp_path, name):
    data = REFUSED_BY_BOTH.get(name) or REFUSED[name]
    with pytest.raises(fg.safetensors.SafetensorError, match="^Error while deserializing: "):
        fg.safetensors.load(data)
    path = tmp_path / "hostile.safetensors"
    path.write_bytes(data)
    with pytest.raises(fg.safetensors.SafetensorError, match="^Error while deserializing header: "):
        fg.safetensors.load_file(path)


@pytest.mark.parametrize("name", sorted(REFUSED_BY_BOTH))
def test_hostile_bytes_refused_with_the_package_message(fg, package, name):
    with pytest.raises(fg.safetensors.SafetensorError) as ours:
        fg.safetensors.load(REFUSED_BY_BOTH[name])
    with pytest.raises(package.SafetensorError) as theirs:
        package.deserialize(REFUSED_BY_BOTH[name])
    assert str(ours.value) == str(theirs.value)
