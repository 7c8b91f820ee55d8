"""fastgrad.safetensors: the `safetensors` package's API (safetensors.torch) for fastgrad tensors.

The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length N, N
bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}} with an optional
"__metadata__" {str: str}, then the tensors' bytes back to back (offsets relative to the end of the
header). As the package's writer, save() orders tensors by decreasing dtype size then name, and pads
the header with spaces so that the data starts at a multiple of 8 bytes. Non-contiguous tensors are
saved as contiguous copies (the package refuses them); tensors sharing memory are refused as it does.

load_file() and safe_open() map the file copy-on-write: each tensor is a view of the mapping (no
copy; writes to it do not reach the file), which stays mapped while any tensor uses it. A tensor
whose bytes cannot be shared (bfloat16, float16 on the reference backend, misaligned offsets) and
every tensor of load(bytes) is one copy. Every header is checked before any tensor is made.
"""

import json
import os

import numpy as np

from . import _prims
from ._pickling import RAW_TYPES, raw_values, tensor_from_raw
from fastgrad._types import bfloat16, bool as bool_, float16, float32, float64, int8, int16, int32, int64, uint8

__all__ = ["SafetensorError", "load", "load_file", "safe_open", "save", "save_file"]


class SafetensorError(Exception):
    """A malformed file, or a failed safetensors operation (as the package's SafetensorError)."""


# The format's dtype names, in the order of its Dtype enum (the writer sorts by it); None: not in fastgrad
_FORMAT_DTYPES = {
    "BOOL": bool_,
    "F4": None,
    "F6_E2M3": None,
    "F6_E3M2": None,
    "U8": uint8,
    "I8": int8,
    "F8_E5M2": None,
    "F8_E4M3": None,
    "F8_E8M0": None,
    "F8_E4M3FNUZ": None,
    "F8_E5M2FNUZ": None,
    "I16": int16,
    "U16": None,
    "F16": float16,
    "BF16": bfloat16,
    "I32": int32,
    "U32": None,
    "F32": float32,
    "C64": None,
    "F64": float64,
    "I64": int64,
    "U64": None,
}
_FORMAT_NAME = {dtype: name for name, dtype in _FORMAT_DTYPES.items() if dtype is not None}
_WRITE_ORDER = {name: rank for rank, name in enumerate(_FORMAT_DTYPES)}
_MAX_HEADER = 100_000_000  # the package's limit
_MAX_BYTES = 2**63 - 1  # numpy's arrays measure bytes in int64 (the package: in usize, 2**64 - 1)
_MAX_DIMS = 64  # numpy's: tensors are built through numpy arrays
_FRAMEWORKS = {"pt": "tensor", "torch": "tensor", "np": "numpy", "numpy": "numpy"}


# ---- writing


def _check_no_shared_memory(tensors):
    """The package's refusal of tensors whose memory overlaps (they would load as separate copies)."""
    spans = []
    for name, t in tensors.items():
        if t.numel():
            storage, _ = _prims.storage_span(t)
            start = t.storage_offset()
            end = start + 1 + sum((n - 1) * s for n, s in zip(t.shape, _prims.strides(t)))
            spans.append((storage, start, end, name))
    spans.sort()
    groups, last = [], None  # groups: sets of names whose spans overlap, in one storage
    for storage, start, end, name in spans:
        if last is not None and last[0] == storage and start < last[1]:
            groups[-1].add(name)
            last = (storage, max(last[1], end))
        else:
            groups.append({name})
            last = (storage, end)
    failing = [names for names in groups if len(names) > 1]
    if failing:
        raise RuntimeError(
            f"""
            Some tensors share memory, this will lead to duplicate memory on disk and potential differences when loading them again: {failing}.
            A potential way to correctly save your model is to use `save_model`.
            More information at https://huggingface.co/docs/safetensors/torch_shared_tensors
            """  # noqa: E501  (the package's message, word for word)
        )


def _check_strings(argument, mapping, values_too):
    """The package's TypeError for an argument that is not a dict with str keys (and values, if values_too)."""
    if not isinstance(mapping, dict):
        raise TypeError(f"argument '{argument}': '{type(mapping).__name__}' object is not an instance of 'dict'")
    for item in (*mapping, *(mapping.values() if values_too else ())):
        if not isinstance(item, str):
            raise TypeError(f"argument '{argument}': '{type(item).__name__}' object is not an instance of 'str'")


def _serialize(tensors, metadata):
    """(header bytes, the tensors' raw values as numpy arrays in file order)."""
    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, torch.Tensor] but received {type(tensors)}")
    for name, t in tensors.items():
        if not isinstance(t, _prims.Tensor):
            raise ValueError(f"Key `{name}` is invalid, expected torch.Tensor but received {type(t)}")
    _check_no_shared_memory(tensors)
    _check_strings("tensor_dict", tensors, values_too=False)  # checked in the package's order
    if metadata is not None:
        _check_strings("metadata", metadata, values_too=True)
    order = sorted(tensors, key=lambda name: (-_WRITE_ORDER[_FORMAT_NAME[tensors[name].dtype]], name))
    header = {} if metadata is None else {"__metadata__": metadata}
    arrays, offset = [], 0
    for name in order:
        values = raw_values(tensors[name])
        dtype_name = _FORMAT_NAME[tensors[name].dtype]
        header[name] = {
            "dtype": dtype_name,
            "shape": list(tensors[name].shape),
            "data_offsets": [offset, offset + values.nbytes],
        }
        arrays.append(values)
        offset += values.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    return len(text).to_bytes(8, "little") + text, arrays


def save(tensors, metadata=None):
    """The safetensors file of `tensors` ({name: Tensor}) and `metadata` ({str: str}), as bytes."""
    header, arrays = _serialize(tensors, metadata)
    return b"".join([header, *arrays])  # contiguous arrays are bytes-like: one copy, into the result


def save_file(tensors, filename, metadata=None):
    """Writes the safetensors file of `tensors` and `metadata` to `filename`."""
    header, arrays = _serialize(tensors, metadata)
    with open(filename, "wb") as f:
        f.write(header)
        for values in arrays:
            f.write(values)  # the tensor's own memory (a contiguous array), when it can be: no copy


# ---- reading


class _Header:
    """A checked header over `buffer` (a uint8 numpy array holding the whole file): the tensors'
    entries and the metadata. `context` begins error messages ("Error while deserializing header")."""

    def __init__(self, buffer, context):
        self.context = context
        if len(buffer) < 8:
            self._fail("header too small")
        length = int.from_bytes(buffer[:8].tobytes(), "little")
        if length > _MAX_HEADER:
            self._fail("header too large")
        if 8 + length > len(buffer):
            self._fail("invalid header length")
        try:
            text = buffer[8 : 8 + length].tobytes().decode("utf-8")
        except UnicodeDecodeError as e:
            self._fail(f"invalid UTF-8 in header: {e}")
        try:
            parsed = json.loads(text, object_pairs_hook=self._without_duplicates)
        except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
            self._fail(f"invalid JSON in header: {e}")
        if not isinstance(parsed, dict):
            self._fail("invalid JSON in header: not an object")
        self.metadata = parsed.pop("__metadata__", None)
        if self.metadata is not None and not (
            isinstance(self.metadata, dict) and all(isinstance(v, str) for v in self.metadata.values())
        ):
            self._fail("invalid JSON in header: __metadata__ must map strings to strings")
        self.entries = {name: self._entry(name, info) for name, info in parsed.items()}
        self.data = buffer[8 + length :]
        self._check_offsets()

    def _fail(self, why):
        raise SafetensorError(f"{self.context}: {why}")

    def _without_duplicates(self, pairs):
        names = [name for name, _ in pairs]
        if len(set(names)) != len(names):
            self._fail(f"invalid JSON in header: duplicate key `{next(n for n in names if names.count(n) > 1)}`")
        return dict(pairs)

    def _entry(self, name, info):
        """(dtype name, shape, (begin, end)) of one tensor, its fields' types checked."""
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
            self._fail(f"invalid JSON in header: tensor `{name}` needs dtype, shape and data_offsets")
        dtype_name, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dtype_name not in _FORMAT_DTYPES:
            self._fail(f"invalid JSON in header: unknown dtype {dtype_name!r} of tensor `{name}`")
        if _FORMAT_DTYPES[dtype_name] is None:
            self._fail(f"dtype {dtype_name} of tensor `{name}` is not supported by fastgrad")
        if not _all_sizes(shape) or not _all_sizes(offsets) or len(offsets) != 2:
            self._fail(f"invalid JSON in header: tensor `{name}`: shape and data_offsets must be non-negative ints")
        if len(shape) > _MAX_DIMS:
            self._fail(f"tensor `{name}` has more than {_MAX_DIMS} dimensions")
        return dtype_name, tuple(shape), tuple(offsets)

    def _check_offsets(self):
        """As the package: in offset order, the tensors must cover the data exactly, each its own size."""
        end = 0
        for name, (dtype_name, shape, (begin, stop)) in sorted(self.entries.items(), key=lambda e: e[1][2]):
            if begin != end or stop < begin:
                self._fail(f"invalid offset for tensor `{name}`")
            end = stop
            size = extent = RAW_TYPES[_FORMAT_DTYPES[dtype_name]._name][1].itemsize
            for n in shape:
                size, extent = size * n, extent * max(n, 1)
            if extent > _MAX_BYTES:  # numpy refuses such shapes even when a dimension is 0
                self._fail("overflow computing buffer size from shape and/or element type")
            if size != stop - begin:
                self._fail("invalid shape, data type, or offset for tensor")
        if end != len(self.data):
            self._fail("incomplete metadata, file not fully covered")

    def values(self, name):
        """The tensor's elements as a numpy array over the buffer (no copy)."""
        dtype_name, shape, (begin, stop) = self.entries[name]
        dtype = _FORMAT_DTYPES[dtype_name]
        values = self.data[begin:stop].view(RAW_TYPES[dtype._name][1]).reshape(shape)
        if dtype is bool_ and (values.view(np.uint8) > 1).any():
            self._fail(f"tensor `{name}` of dtype BOOL holds bytes other than 0 and 1")
        return values, dtype


def _all_sizes(values):
    return isinstance(values, list) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in values)


def _map_file(filename):
    """The file's bytes as a uint8 array: a copy-on-write memory map (writes stay in this process)."""
    with open(filename, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:  # too small to map usefully (mmap refuses an empty file); the header check refuses it
            return np.frombuffer(f.read(), dtype=np.uint8)
        return np.memmap(f, dtype=np.uint8, mode="c", shape=(size,))


def _check_device(device):
    if str(device) != "cpu":
        raise RuntimeError(f"safetensors: device {device!r}: only the CPU exists")


class _Slice:
    """safe_open(...).get_slice(name): the tensor's shape and dtype, and parts of it by indexing."""

    def __init__(self, values, dtype, make):
        self._values, self._dtype, self._make = values, dtype, make

    def get_shape(self):
        return list(self._values.shape)

    def get_dtype(self):
        return _FORMAT_NAME[self._dtype]

    def __getitem__(self, index):
        parts = index if isinstance(index, tuple) else (index,)
        if not all(isinstance(p, (int, slice)) or p is Ellipsis for p in parts):
            raise TypeError("safetensors slices take ints, slices and Ellipsis only")
        if any(isinstance(p, slice) and p.step is not None and p.step <= 0 for p in parts):
            raise ValueError("step must be greater than zero")  # the package's message
        if Ellipsis not in parts:
            parts += (Ellipsis,)  # numpy then gives an array (a view) even when every part is an int
        return self._make(self._values[parts], self._dtype)


class safe_open:  # noqa: N801  (the package's name)
    """A safetensors file opened lazily: keys(), metadata(), get_tensor(name), get_slice(name); each
    tensor is made on request, over the file's memory map. framework "pt" (or "torch") gives fastgrad
    tensors, "np" (or "numpy") numpy arrays."""

    def __init__(self, filename, framework, device="cpu"):
        if framework not in _FRAMEWORKS:
            raise SafetensorError(f"framework {framework} is invalid")
        _check_device(device)
        self._make = tensor_from_raw if _FRAMEWORKS[framework] == "tensor" else _numpy_values
        self._header = _Header(_map_file(filename), "Error while deserializing header")

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._header = None  # tensors already made keep the mapping alive

    def _open_header(self):
        if self._header is None:
            raise SafetensorError("File is closed")
        return self._header

    def keys(self):
        return sorted(self._open_header().entries)

    def metadata(self):
        return self._open_header().metadata

    def _values(self, name):
        header = self._open_header()
        if name not in header.entries:
            raise SafetensorError(f"File does not contain tensor {name}")
        return header.values(name)

    def get_tensor(self, name):
        return self._make(*self._values(name))

    def get_slice(self, name):
        return _Slice(*self._values(name), self._make)


def _numpy_values(values, dtype):
    if dtype is bfloat16:
        raise TypeError("numpy has no bfloat16: open the file with framework='pt'")
    return values


def load_file(filename, device="cpu"):
    """{name: Tensor} of a safetensors file, each tensor over the file's memory map where it can be."""
    with safe_open(filename, framework="pt", device=device) as f:
        return {name: f.get_tensor(name) for name in f.keys()}


def load(data):
    """{name: Tensor} of a safetensors file's bytes (each tensor a copy: bytes cannot be shared)."""
    header = _Header(np.frombuffer(bytes(data), dtype=np.uint8), "Error while deserializing")
    return {name: tensor_from_raw(*header.values(name)) for name in sorted(header.entries)}
