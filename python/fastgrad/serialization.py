"""fastgrad.save / fastgrad.load: PyTorch's checkpoint format, and fastgrad's own data-only format.

save(obj, f) writes, by default (format="torch"), the zip torch.save writes: torch.load(f,
weights_only=True) reads it into the same tensors (dtypes, strides, storage sharing between views,
Parameters, OrderedDict state_dicts with their _metadata). format="fastgrad" writes fastgrad's own
format (below), which holds no pickle at all. load(f) tells the formats apart by their first bytes
and reads both; PyTorch's legacy (pre-1.6, non-zip) format is refused.

load reads a PyTorch checkpoint, by default (weights_only=True), without executing pickle: its
opcodes are interpreted by fastgrad._pickle_reader, which only builds containers, tensors and the
types PyTorch's weights-only loader allows (see _torch_checkpoint), plus what add_safe_globals /
safe_globals allow-list. Real pickle (which runs whatever the file asks) is used only with an
explicit weights_only=False, as in PyTorch >= 2.6. map_location takes PyTorch's forms (str,
device, dict, callable); only the CPU exists, so a storage bound elsewhere fails as in PyTorch on a
machine without CUDA. mmap=True maps the file copy-on-write and builds storages over it when their
bytes are already in fastgrad's layout.

fastgrad's own format:

    offset 0   8 bytes   magic b"FASTGRAD"
           8   4 bytes   format version, uint32 little-endian (1)
          12   4 bytes   CRC-32 of everything after byte 24
          16   8 bytes   length H of the header, uint64 little-endian
          24   H bytes   header: UTF-8 JSON, the object tree (below)
        24+H   rest      data: each tensor's elements, contiguous, little-endian, back to back

Object tree nodes (JSON):
    null, true, false, numbers, strings    themselves (floats keep every bit: NaN/Infinity allowed)
    {"list": [node, ...]}, {"tuple": [...]}
    {"dict": [[key node, value node], ...]}  keys keep their type (an optimizer's state is keyed by int)
    {"OrderedDict": [[key node, value node], ...]}  a collections.OrderedDict (a state_dict)
    {"numpy": {"dtype": "float32", "value": 1.5}}  a numpy scalar, its value as a Python number
    {"tensor": {"dtype": "float32", "shape": [2, 3], "offset": 0, "requires_grad": false}}
    offset is in bytes into the data; a tensor's size follows from its dtype and shape.

load() verifies the magic, version, checksum, that every tensor lies inside the data and that the
data is exactly covered, so a truncated or corrupted file is refused before any tensor is
allocated, and no allocation is larger than the file. Storage sharing between tensors (views) is
not kept: each tensor is saved as its own values.
"""

import collections
import io
import json
import os
import pickle
import struct
import warnings
import zlib

import numpy as np

from . import _torch_checkpoint
from ._prims import Tensor
from ._factories import from_numpy
from ._torch_checkpoint import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals  # noqa: F401
from fastgrad._types import bool as bool_, device, float32, float64, int64
from fastgrad._types import bfloat16, float16, int8, int16, int32, uint8

MAGIC = b"FASTGRAD"
VERSION = 1
_PREAMBLE = struct.Struct("<8sIIQ")  # magic, version, crc32, header length
_MAX_DEPTH = 200
# dtype name -> (fastgrad dtype, numpy dtype as stored); bfloat16, which numpy lacks, as the float32
# values it holds (exactly)
_DTYPES = {
    "float32": (float32, "<f4"),
    "float64": (float64, "<f8"),
    "int64": (int64, "<i8"),
    "bool": (bool_, "|b1"),
    "int32": (int32, "<i4"),
    "int16": (int16, "<i2"),
    "int8": (int8, "|i1"),
    "uint8": (uint8, "|u1"),
    "float16": (float16, "<f2"),
    "bfloat16": (bfloat16, "<f4"),
}
_MAX_DIMS = 64  # numpy's limit: tensors are built through numpy arrays
# numpy scalar types save() keeps (torch.save pickles them), by dtype name
_NUMPY_SCALARS = {
    np.dtype(t).name: t
    for t in (
        np.bool_,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.float16,
        np.float32,
        np.float64,
    )
}


def save(
    obj,
    f,
    pickle_module=pickle,
    pickle_protocol=2,
    _use_new_zipfile_serialization=True,
    _disable_byteorder_record=False,
    *,
    format="torch",
):
    """Writes obj to f, a path or a binary file object: format="torch" (the default) as torch.save
    does, anything pickle can save (pickle_module is accepted for PyTorch's signature: fastgrad's
    own pickler writes the file); format="fastgrad": tensors, dicts, lists, tuples, str, int, float,
    bool, None and numpy scalars, nested, in fastgrad's data-only format."""
    if format == "fastgrad":
        _write(f, _encode_file(obj))
    elif format == "torch":
        if not _use_new_zipfile_serialization:
            raise ValueError("save: PyTorch's legacy (non-zip) format is not supported")
        archive_name = "archive"
        if isinstance(f, (str, os.PathLike)):
            archive_name = os.path.splitext(os.path.basename(os.fspath(f)))[0] or archive_name
        out = io.BytesIO()
        _torch_checkpoint.save(obj, out, archive_name, pickle_protocol, not _disable_byteorder_record)
        _write(f, out.getvalue())
    else:
        raise ValueError(f"save: format must be 'torch' or 'fastgrad', not {format!r}")


def _write(f, blob):
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as out:
            out.write(blob)
    else:
        f.write(blob)


def _encode_file(obj):
    chunks, size = [], [0]

    def encode(o, depth):
        if depth > _MAX_DEPTH:
            raise ValueError(f"save: nesting deeper than {_MAX_DEPTH} levels")
        if isinstance(o, np.generic) and o.dtype.name in _NUMPY_SCALARS:  # before float: np.float64 is one
            return {"numpy": {"dtype": o.dtype.name, "value": o.item()}}
        if o is None or isinstance(o, (bool, int, float, str)):
            return o
        if isinstance(o, Tensor):
            name = str(o.dtype).split(".")[-1]
            stored = o.detach() if o.dtype is not bfloat16 else o.detach().float()
            values = np.ascontiguousarray(stored.numpy(), dtype=_DTYPES[name][1])
            chunks.append(values.tobytes())
            node = {"dtype": name, "shape": list(o.shape), "offset": size[0], "requires_grad": o.requires_grad}
            size[0] += values.nbytes
            return {"tensor": node}
        if isinstance(o, (list, tuple)):
            return {type(o).__name__: [encode(v, depth + 1) for v in o]}
        if isinstance(o, dict):
            kind = "OrderedDict" if isinstance(o, collections.OrderedDict) else "dict"
            return {kind: [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in o.items()]}
        raise TypeError(f"save: cannot save an object of type {type(o).__name__}")

    header = json.dumps(encode(obj, 0), allow_nan=True).encode()
    body = header + b"".join(chunks)
    return _PREAMBLE.pack(MAGIC, VERSION, zlib.crc32(body), len(header)) + body


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Reads what save() or torch.save wrote (see the module's docstring)."""
    if weights_only is None:
        weights_only = pickle_module is None
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    if pickle_load_args and weights_only:
        warnings.warn("pickle_load_args only works if `weights_only=False`.", stacklevel=2)
    pickle_load_args.setdefault("encoding", "utf-8")
    is_path = isinstance(f, (str, os.PathLike))
    if mmap and not is_path:
        raise ValueError("f must be a file path in order to use the mmap argument")
    if is_path:
        source = open(f, "rb")
    else:  # read from the current position on, into memory: zipfile needs to seek
        source = io.BytesIO(bytes(f) if isinstance(f, (bytes, bytearray)) else f.read())
    with source as file:
        head = file.read(len(MAGIC))
        file.seek(0)
        if head[:2] == b"PK":
            mapped = _torch_checkpoint.open_mapped(f) if mmap else None
            return _torch_checkpoint.load(file, map_location, weights_only, mapped, pickle_load_args)
        if mmap:
            name = f"{f}, " if isinstance(f, str) else ""
            raise RuntimeError(
                "mmap can only be used with files saved with "
                f"`torch.save({name}_use_new_zipfile_serialization=True), "
                "please torch.save your checkpoint with this option in order to use mmap."
            )
        if head[:1] == b"\x80":  # a bare pickle: torch.save(..., _use_new_zipfile_serialization=False)
            raise RuntimeError(
                "load: PyTorch's legacy checkpoint format (before 1.6, not a zip) is not supported; re-save "
                "the object with torch.save in a PyTorch >= 1.6 (its default zip format)"
            )
        _check_map_location(map_location)
        return _decode_file(file.read())


def get_unsafe_globals_in_checkpoint(f):
    """The classes and functions (as "module.name") a PyTorch checkpoint needs that weights-only
    loads do not allow: what add_safe_globals would have to allow-list."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as file:
            return _torch_checkpoint.unsafe_globals(file)
    return _torch_checkpoint.unsafe_globals(io.BytesIO(f.read()))


def _check_map_location(map_location):
    """Every tensor in a fastgrad file was saved on the CPU: map_location must keep them there."""
    if callable(map_location) and not isinstance(map_location, (str, dict, device)):
        return  # PyTorch calls a callable with each storage and 'cpu'; with one device it can only keep it there
    _torch_checkpoint.restore_location(map_location, "cpu", None)


def _corrupt(why):
    return RuntimeError(f"load: not a valid fastgrad file ({why})")


def _decode_file(blob):
    if len(blob) < _PREAMBLE.size or not blob.startswith(MAGIC):
        raise _corrupt(
            "missing the FASTGRAD magic, and not a PyTorch zip checkpoint either: truncated, or written by "
            "something else"
        )
    _, version, crc, header_len = _PREAMBLE.unpack_from(blob)
    if version != VERSION:
        raise RuntimeError(f"load: file format version {version}, this fastgrad reads version {VERSION}")
    body = memoryview(blob)[_PREAMBLE.size :]
    if header_len > len(body):
        raise _corrupt(f"header of {header_len} bytes in a file of {len(blob)} bytes: truncated")
    if zlib.crc32(body) != crc:
        raise _corrupt("checksum mismatch: truncated or corrupted")
    try:
        tree = json.loads(bytes(body[:header_len]).decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _corrupt(f"unreadable header: {e}") from None
    data = body[header_len:]
    used = []  # (offset, nbytes) of every tensor, to check that they tile the data exactly
    obj = _decode(tree, data, used, 0)
    position = 0
    for offset, nbytes in sorted(used):
        if offset != position:
            raise _corrupt("tensor data overlaps or leaves gaps")
        position += nbytes
    if position != len(data):
        raise _corrupt("data section longer than its tensors")
    return obj


def _decode(node, data, used, depth):
    if depth > _MAX_DEPTH:
        raise _corrupt("nesting too deep")
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if not isinstance(node, dict) or len(node) != 1:
        raise _corrupt(f"unexpected header entry {str(node)[:60]}")
    ((kind, content),) = node.items()
    if kind in ("list", "tuple") and isinstance(content, list):
        values = [_decode(v, data, used, depth + 1) for v in content]
        return values if kind == "list" else tuple(values)
    if kind in ("dict", "OrderedDict") and isinstance(content, list):
        out = {} if kind == "dict" else collections.OrderedDict()
        for pair in content:
            if not isinstance(pair, list) or len(pair) != 2:
                raise _corrupt("malformed dict entry")
            key = _decode(pair[0], data, used, depth + 1)
            try:
                out[key] = _decode(pair[1], data, used, depth + 1)
            except TypeError:  # an unhashable key
                raise _corrupt("malformed dict key") from None
        return out
    if kind == "tensor" and isinstance(content, dict):
        return _decode_tensor(content, data, used)
    if kind == "numpy" and isinstance(content, dict):
        return _decode_numpy_scalar(content)
    raise _corrupt(f"unknown entry {kind!r}")


def _decode_tensor(info, data, used):
    if set(info) != {"dtype", "shape", "offset", "requires_grad"}:
        raise _corrupt("malformed tensor entry")
    dtype, shape, offset, requires_grad = info["dtype"], info["shape"], info["offset"], info["requires_grad"]
    if dtype not in _DTYPES or not isinstance(shape, list) or not isinstance(requires_grad, bool):
        raise _corrupt("malformed tensor entry")
    if not all(type(s) is int and s >= 0 for s in shape) or type(offset) is not int or offset < 0:
        raise _corrupt("malformed tensor shape or offset")
    if len(shape) > _MAX_DIMS:
        raise _corrupt(f"tensor of {len(shape)} dimensions, more than {_MAX_DIMS}")
    fg_dtype, stored = _DTYPES[dtype]
    nbytes = extent = np.dtype(stored).itemsize
    for s in shape:  # in Python ints, so a hostile shape cannot overflow
        nbytes *= s
        extent *= max(s, 1)
    if offset + nbytes > len(data):
        raise _corrupt(f"tensor of shape {shape} needs {nbytes} bytes past the end of the data")
    if extent >= 2**63:  # numpy refuses such a shape even when it has no elements
        raise _corrupt(f"tensor of shape {shape} too large to index")
    if requires_grad and not fg_dtype.is_floating_point:
        raise _corrupt("an integer tensor cannot require grad")
    used.append((offset, nbytes))
    values = np.frombuffer(data[offset : offset + nbytes], dtype=stored).reshape(shape)
    t = from_numpy(values.astype(values.dtype.newbyteorder("="), copy=True)).to(fg_dtype)
    return t.requires_grad_(True) if requires_grad else t


def _decode_numpy_scalar(info):
    if set(info) != {"dtype", "value"} or info["dtype"] not in _NUMPY_SCALARS:
        raise _corrupt("malformed numpy scalar entry")
    scalar_type, value = _NUMPY_SCALARS[info["dtype"]], info["value"]
    if type(value) is not type(scalar_type(0).item()):  # bool, int or float, as save() wrote it
        raise _corrupt("malformed numpy scalar entry")
    try:
        return scalar_type(value)
    except OverflowError:
        raise _corrupt(f"numpy scalar {value} out of range for {info['dtype']}") from None
