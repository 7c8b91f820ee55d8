"""PyTorch's checkpoint format, the zip torch.save writes, for fastgrad.save and fastgrad.load.

    <archive>/data.pkl                 the object, a protocol-2 pickle; each tensor is a call of
                                       torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
                                       requires_grad, hooks) whose storage is a persistent id
                                       ("storage", torch.FloatStorage, key, "cpu", numel)
    <archive>/.format_version          b"1"
    <archive>/.storage_alignment       b"64": every entry's data starts at a multiple of 64
    <archive>/byteorder                b"little" or b"big"
    <archive>/data/<key>               each storage's raw bytes
    <archive>/version                  b"3\\n"
    <archive>/.data/serialization_id   40 digits

Reading with weights_only (the default) goes through fastgrad._pickle_reader, which calls only the
rebuild functions and types allow-listed here (those of torch.load(weights_only=True)), plus what
the user allow-lists with add_safe_globals. Writing uses a pickler whose PyTorch names (the rebuild
functions, dtypes, storage types) are stand-ins written as GLOBAL opcodes: nothing of PyTorch is
imported on either side.
"""

import collections
import contextlib
import functools
import hashlib
import io
import mmap as mmap_module
import os
import pickle
import pickletools
import reprlib
import struct
import zipfile

import numpy as np

from . import _prims
from ._prims import Tensor
from .nn import Parameter
from fastgrad._pickle_reader import UnpicklingError, WeightsOnlyUnpickler, _global_name
from fastgrad._types import ALL_DTYPES, NUMPY_TYPES, Size, bfloat16, device, dtype, float32
from fastgrad._types import bool as bool_, float16, float64, int8, int16, int32, int64, uint8

_API = f"{__name__.rpartition('.')[0]}.serialization"  # fastgrad.serialization or fastgrad.reference.serialization
_STORAGE_NAMES = {
    float64: "DoubleStorage",
    float32: "FloatStorage",
    float16: "HalfStorage",
    int64: "LongStorage",
    int32: "IntStorage",
    int16: "ShortStorage",
    int8: "CharStorage",
    uint8: "ByteStorage",
    bool_: "BoolStorage",
    bfloat16: "BFloat16Storage",
}
# PyTorch dtypes and storage types fastgrad has no dtype for: named in the error, not "unsupported global"
_FOREIGN_DTYPES = ["complex32", "complex64", "complex128", "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"]
_FOREIGN_STORAGES = ["ComplexFloatStorage", "ComplexDoubleStorage", "QInt8Storage", "QInt32Storage", "QUInt8Storage"]
_ALIGNMENT = 64
_PADDING_FIELD = 0x4246  # the zip extra field id PyTorch pads local headers with ("FB")
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # a zip local file header, up to its name

_UNSAFE_MESSAGE = (
    "In PyTorch 2.6, we changed the default value of the `weights_only` argument in `torch.load` "
    "from `False` to `True`. Re-running `torch.load` with `weights_only` set to `False` will likely succeed, "
    "but it can result in arbitrary code execution. Do it only if you got the file from a "
    "trusted source."
)
_DOCS_MESSAGE = (
    "\n\nCheck the documentation of torch.load to learn more about types accepted by default with "
    "weights_only https://pytorch.org/docs/stable/generated/torch.load.html."
)
_CUDA_MESSAGE = (
    "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False. If you are "
    "running on a CPU-only machine, please use torch.load with map_location=torch.device('cpu') to map your "
    "storages to the CPU."
)


def _corrupt(why):
    return RuntimeError(f"load: not a valid PyTorch checkpoint ({why})")


# ---- safe globals: what the user allow-lists for weights-only loads (torch.serialization's API)

_safe_globals = set()


def add_safe_globals(safe_globals):
    """Marks classes and functions (or (object, "module.name") pairs) safe for weights-only loads."""
    _safe_globals.update(safe_globals)


def get_safe_globals():
    return list(_safe_globals)


def clear_safe_globals():
    _safe_globals.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    """add_safe_globals for the duration of a with block (after which, as in PyTorch, these globals
    are no longer allowed, even those added before)."""
    _safe_globals.update(safe_globals)
    try:
        yield
    finally:
        _safe_globals.difference_update(safe_globals)


def _user_globals():
    table = {}
    for entry in _safe_globals:
        if isinstance(entry, tuple):
            if len(entry) != 2:
                raise ValueError(
                    "Expected tuple of length 2 (global, str of callable full path), but got tuple of length: "
                    f"{len(entry)}"
                )
            if type(entry[1]) is not str:
                raise TypeError(
                    f"Expected second item in tuple to be str of callable full path, but got: {type(entry[1])}"
                )
            table[entry[1]] = entry[0]
        else:
            table[f"{entry.__module__}.{entry.__qualname__}"] = entry
    return table


# ---- reading


class _StorageType:
    """What a torch.<X>Storage global stands for in a weights-only load: its dtype (None: one fastgrad lacks)."""

    def __init__(self, name, dtype):
        self.name, self.dtype = name, dtype

    def __repr__(self):
        return f"StorageType(torch.{self.name})"


class _TensorType:
    """torch.Tensor in a weights-only load: the type _rebuild_from_type_v2 names, never called (a
    call would allocate what the file asks)."""

    def __repr__(self):
        return "<class 'torch.Tensor'>"


_TENSOR_TYPE = _TensorType()


class _LoadedStorage:
    """A storage read from the file: a 1-D tensor over all its elements, which the tensors are views of."""

    def __init__(self, tensor):
        self.tensor = tensor


def _checked_offset(storage, offset, size, stride):
    """The storage offset of a tensor of this geometry over the storage, refused (in PyTorch's words)
    when the tensor reaches outside it."""
    if type(offset) is not int or offset < 0:
        raise RuntimeError(f"storage offset {offset!r} is not a non-negative integer")
    if not all(type(n) is int and n >= 0 for n in (*size, *stride)) or len(size) != len(stride):
        raise RuntimeError(f"invalid tensor geometry: size {size!r}, stride {stride!r}")
    numel = storage.tensor.numel()
    if 0 in size:  # no element to read: PyTorch accepts any offset; kept inside the storage here
        return min(offset, numel)
    if offset + 1 + sum((n - 1) * s for n, s in zip(size, stride)) > numel:
        raise RuntimeError("Trying to resize storage that is not resizable")
    return offset


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None):
    """A view of a loaded storage (torch._utils._rebuild_tensor_v2); hooks and metadata are not kept."""
    if type(storage) is not _LoadedStorage or not isinstance(size, tuple) or not isinstance(stride, tuple):
        raise UnpicklingError("malformed pickle: _rebuild_tensor_v2 expects a storage and size and stride tuples")
    offset = _checked_offset(storage, storage_offset, size, stride)
    t = _prims.on_storage_of(storage.tensor, tuple(size), tuple(stride), offset)
    return t.requires_grad_(True) if requires_grad else t


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _rebuild_tensor_v2(storage, storage_offset, size, stride, False, collections.OrderedDict())


def _rebuild_parameter(data, requires_grad, backward_hooks):
    if not isinstance(data, Tensor):
        raise UnpicklingError(f"malformed pickle: a Parameter of a {type(data).__name__}")
    return Parameter(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    if state:
        raise UnpicklingError("a Parameter with attributes of its own is not supported")
    return _rebuild_parameter(data, requires_grad, backward_hooks)


def _encode(text, encoding):
    """_codecs.encode as pickles of bytes call it: text to bytes, nothing else."""
    if type(text) is not str or encoding not in ("latin1", "latin-1", "utf-8", "ascii"):
        raise UnpicklingError(f"malformed pickle: _codecs.encode of {type(text).__name__} with {encoding!r}")
    return text.encode(encoding)


def _bytearray(data=b""):
    if type(data) is not bytes:  # bytearray(n) would allocate what the file asks
        raise UnpicklingError("malformed pickle: bytearray of something else than bytes")
    return bytearray(data)


def _build_attributes(instance, state):
    """BUILD on an OrderedDict or an allow-listed class: the state pickle's default __reduce_ex__ saves."""
    if hasattr(instance, "__setstate__"):
        instance.__setstate__(state)
        return
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state is not None and not isinstance(state, dict):
        raise UnpicklingError(f"malformed pickle: BUILD state of {type(instance).__name__} is a {type(state).__name__}")
    instance.__dict__.update(state or {})
    for name, value in (slots or {}).items():
        setattr(instance, name, value)


def _rebuild_from_type_v2(func, new_type, args, state):
    """A tensor pickled with attributes or as a subclass: func(*args), which must be allow-listed too."""
    if not any(func is f for f in _allowed_globals().values()) or not callable(func) or type(args) is not tuple:
        raise UnpicklingError(f"Trying to call reduce for unrecognized function {func}")
    result = func(*args)
    if not isinstance(result, Tensor) or not (new_type is _TENSOR_TYPE or new_type is type(result) is Parameter):
        raise UnpicklingError(f"a tensor of type {new_type} is not supported")
    for name, value in (state or {}).items():
        if type(name) is not str or name.startswith("__"):  # an attribute, not the object's machinery
            raise UnpicklingError(f"malformed pickle: tensor attribute {reprlib.repr(name)}")
        setattr(result, name, value)
    return result


@functools.lru_cache(maxsize=1)
def _allowed_globals():
    """PyTorch's weights-only allow-list, each name bound to fastgrad's counterpart."""
    table = {
        "collections.OrderedDict": collections.OrderedDict,
        "collections.Counter": collections.Counter,
        "torch.nn.parameter.Parameter": Parameter,
        "torch.Size": Size,
        "torch.Tensor": _TENSOR_TYPE,
        "torch.device": device,
        "_codecs.encode": _encode,
        "builtins.bytearray": _bytearray,
        "builtins.set": set,
        "builtins.complex": complex,
        "torch._utils._rebuild_tensor": _rebuild_tensor,
        "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
        "torch._utils._rebuild_parameter": _rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": _rebuild_parameter_with_state,
        "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        "torch.storage.UntypedStorage": _StorageType("UntypedStorage", uint8),
    }
    for d in ALL_DTYPES:
        table[str(d).replace("fastgrad.", "torch.")] = d
    for d, name in _STORAGE_NAMES.items():
        table[f"torch.{name}"] = _StorageType(name, d)
    for name in _FOREIGN_DTYPES:
        table[f"torch.{name}"] = _StorageType(name, None)
    for name in _FOREIGN_STORAGES:
        table[f"torch.{name}"] = _StorageType(name, None)
    return table


def _wo_message(message):
    """torch.load's wording around an error of its weights-only unpickler."""
    if "was not an allowed global by default" in message:
        return (
            "Weights only load failed. This file can still be loaded, to do so you have two options, "
            "\033[1mdo those steps only if you trust the source of the checkpoint\033[0m. "
            f"\n\t(1) {_UNSAFE_MESSAGE}\n\t(2) Alternatively, to load with `weights_only=True` please check "
            "the recommended steps in the following error message.\n\tWeightsUnpickler error: "
            + message
            + _DOCS_MESSAGE
        )
    updated = f"Weights only load failed. {_UNSAFE_MESSAGE}\n"
    if "is blocked" not in message:
        updated += (
            "Please file an issue with the following so that we can make "
            "`weights_only=True` compatible with your use case: WeightsUnpickler error: "
        )
    return updated + "\n\n" + message + _DOCS_MESSAGE


def _target_location(map_location, location):
    """Where map_location sends a storage saved at `location` (a callable is handled by the caller)."""
    if map_location is None:
        return location
    if isinstance(map_location, dict):
        target = map_location.get(location, location)
        if not isinstance(target, (str, bytes)):
            raise TypeError(f"expected string or bytes-like object, got '{type(target).__name__}'")
        return target
    if isinstance(map_location, (str, device)):
        return str(map_location)
    raise TypeError(f"'{type(map_location).__name__}' object is not callable")  # PyTorch's wording


def restore_location(map_location, location, storage):
    """The storage (a 1-D tensor) placed as map_location says, as torch.load's restore_location: only
    the CPU exists, so a storage stays as it is or the load fails as PyTorch's does without CUDA."""
    if callable(map_location) and not isinstance(map_location, (dict, str, device)):
        moved = map_location(storage, location)
        if moved is not None:
            if not isinstance(moved, Tensor) or moved.dtype is not storage.dtype or moved.shape != storage.shape:
                raise TypeError("map_location: the callable must return the storage it was given, or None")
            return moved
        target = location
    else:
        target = _target_location(map_location, location)
    if isinstance(target, bytes):
        target = target.decode()
    if target.startswith("cuda"):
        raise RuntimeError(_CUDA_MESSAGE)
    if target != "cpu":
        raise RuntimeError(
            f"don't know how to restore data location of torch.storage.UntypedStorage (tagged with {target})"
        )
    return storage


def _storage_from_bytes(buffer, offset, dtype, numel, big_endian, share):
    """A 1-D tensor of the storage's numel elements read from buffer[offset:]; share: over the buffer's
    memory (an mmap) when the bytes are already fastgrad's layout. bfloat16 goes through float32, the
    one way fastgrad builds it: every value is kept, but a NaN becomes fastgrad's NaN."""
    if dtype is bfloat16:  # numpy lacks it: the bits widened to the float32 of the same value
        bits = np.frombuffer(buffer, ">u2" if big_endian else "<u2", numel, offset).astype(np.uint32) << 16
        return _prims.to_dtype(_prims.from_numpy(bits.view(np.float32), share_memory=False), bfloat16)
    stored = np.dtype(NUMPY_TYPES[dtype]).newbyteorder(">" if big_endian else "<")
    values = np.frombuffer(buffer, stored, numel, offset)
    if share and values.dtype.isnative and offset % stored.itemsize == 0:
        return _prims.from_numpy(values, share_memory=True)
    return _prims.from_numpy(values.astype(stored.newbyteorder("="), copy=True), share_memory=True)  # its own copy


class _Archive:
    """The records of a torch.save zip, checked as they are read."""

    def __init__(self, file, mapped):
        try:
            self.zip = zipfile.ZipFile(file)
            names = self.zip.namelist()
        except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
            raise _corrupt(f"unreadable zip: {e}") from None
        if not names or "/" not in names[0]:
            raise _corrupt("no <archive>/data.pkl record")
        self.prefix = names[0].split("/")[0]
        self.mapped = mapped  # the file's mmap (ACCESS_COPY), or None

    def has(self, name):
        return f"{self.prefix}/{name}" in self.zip.NameToInfo

    def info(self, name):
        try:
            info = self.zip.getinfo(f"{self.prefix}/{name}")
        except KeyError:
            raise RuntimeError(f"PytorchStreamReader failed locating file {name}: file not found") from None
        if info.compress_type != zipfile.ZIP_STORED:
            raise _corrupt(f"record {name} is compressed; torch.save stores its records uncompressed")
        return info

    def read(self, name):
        try:
            return self.zip.read(self.info(name))
        except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
            raise _corrupt(f"record {name}: {e}") from None

    def data_offset(self, info):
        """Where the record's bytes start in the mapped file (after its local header)."""
        header = bytes(self.mapped[info.header_offset : info.header_offset + _LOCAL_HEADER.size])
        if len(header) < _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
            raise _corrupt(f"bad local header for {info.filename}")
        fields = _LOCAL_HEADER.unpack(header)
        start = info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1]
        if start + info.file_size > len(self.mapped):
            raise _corrupt(f"record {info.filename} runs past the end of the file")
        return start


class _StorageLoader:
    """persistent_load: each ("storage", type, key, location, numel) id read once, so views share it."""

    def __init__(self, archive, map_location):
        self.archive, self.map_location, self.loaded = archive, map_location, {}
        order = archive.read("byteorder") if archive.has("byteorder") else b"little"
        if order not in (b"little", b"big"):
            raise ValueError("Unknown endianness type: " + order.decode(errors="replace"))
        self.big_endian = order == b"big"

    def __call__(self, pid):
        if type(pid) is tuple and pid and pid[0] not in ("storage", b"storage"):
            raise UnpicklingError(f"Only persistent_load of storage is allowed, but got {type(pid[0])}")
        if type(pid) is not tuple or len(pid) != 5:
            raise UnpicklingError(f"malformed storage id {reprlib.repr(pid)}")
        _, storage_type, key, location, numel = pid
        if isinstance(storage_type, dtype):  # PyTorch names newer dtypes directly
            storage_type = _StorageType(str(storage_type), storage_type)
        if not isinstance(storage_type, _StorageType):
            raise UnpicklingError(f"malformed storage id: {reprlib.repr(storage_type)} is no storage type")
        if storage_type.dtype is None:
            raise RuntimeError(f"load: fastgrad has no dtype for torch.{storage_type.name} storages")
        if type(key) is not str or type(location) is not str or type(numel) is not int or numel < 0:
            raise UnpicklingError(f"malformed storage id {reprlib.repr(pid)}")
        if key not in self.loaded:
            self.loaded[key] = self.load(key, storage_type.dtype, numel, location)
        storage = self.loaded[key]
        if storage.tensor.dtype is not storage_type.dtype:
            raise _corrupt(f"storage {key} used with two dtypes")
        return storage

    def load(self, key, dtype, numel, location):
        name = f"data/{key}"
        info = self.archive.info(name)
        itemsize = 2 if dtype is bfloat16 else np.dtype(NUMPY_TYPES[dtype]).itemsize
        if info.file_size != numel * itemsize:
            raise _corrupt(
                f"record {name} holds {info.file_size} bytes, its storage of {numel} elements needs "
                f"{numel * itemsize}: truncated or damaged"
            )
        if self.archive.mapped is not None:
            buffer, offset, share = self.archive.mapped, self.archive.data_offset(info), True
        else:
            buffer, offset, share = self.archive.read(name), 0, False
        tensor = _storage_from_bytes(buffer, offset, dtype, numel, self.big_endian, share)
        return _LoadedStorage(restore_location(self.map_location, location, tensor))


def _weights_only_tables():
    allowed = dict(_allowed_globals())
    user = _user_globals()
    allowed.update(user)
    builders = {collections.OrderedDict: _build_attributes, collections.Counter: _build_attributes}
    builders.update({cls: _build_attributes for cls in user.values() if isinstance(cls, type)})
    return allowed, builders


class _FullUnpickler(pickle.Unpickler):
    """weights_only=False: real pickle, with PyTorch's names of tensors and dtypes bound to fastgrad's."""

    def __init__(self, file, persistent_load, **options):
        super().__init__(file, **options)
        self._storages = persistent_load

    def persistent_load(self, pid):
        return self._storages(pid)

    def find_class(self, module, name):
        full_path = ".".join(_global_name(module, name))
        if full_path.startswith("torch.") and full_path in _allowed_globals():
            return _allowed_globals()[full_path]
        return super().find_class(module, name)


def load(file, map_location, weights_only, mapped, pickle_load_args):
    """Reads a torch.save zip (file: a seekable binary file); mapped: the file's mmap or None."""
    archive = _Archive(file, mapped)
    if archive.has("constants.pkl"):
        raise RuntimeError("load: a TorchScript archive (torch.jit.save) is not a checkpoint fastgrad can read")
    data = archive.read("data.pkl")
    storages = _StorageLoader(archive, map_location)
    if not weights_only:
        return _FullUnpickler(io.BytesIO(data), storages, **pickle_load_args).load()
    allowed, builders = _weights_only_tables()
    try:
        return WeightsOnlyUnpickler(data, allowed, builders, storages, api=_API).load()
    except UnpicklingError as e:
        raise UnpicklingError(_wo_message(str(e))) from None


def unsafe_globals(file):
    """The GLOBALs of the checkpoint's pickle that a weights-only load refuses, found by reading its
    opcodes (what the pickle builds at run time, STACK_GLOBAL, is not seen), as PyTorch's function."""
    if file.read(2) != b"PK":
        raise ValueError("Expected input to be a checkpoint returned by torch.save")
    file.seek(0)
    archive = _Archive(file, None)
    if archive.has("constants.pkl"):
        raise ValueError("Expected input to be a checkpoint returned by torch.save but got a torchscript checkpoint")
    found = set()
    try:
        for opcode, argument, _ in pickletools.genops(archive.read("data.pkl")):
            if opcode.name == "GLOBAL":
                found.add(".".join(_global_name(*argument.split(" ", 1))))
    except ValueError as e:  # pickletools' word for a damaged pickle
        raise _corrupt(f"data.pkl: {e}") from None
    return sorted(found - set(_allowed_globals()) - set(_user_globals()))


def open_mapped(path):
    """The file's bytes as a copy-on-write mmap: tensors loaded over it may be written, the file is not."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return None
        return mmap_module.mmap(f.fileno(), 0, access=mmap_module.ACCESS_COPY)


# ---- writing


class _TorchName:
    """A PyTorch global in a pickle fastgrad writes (written as GLOBAL module name, never looked up here)."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle's save_reduce wants a callable; this one exists in PyTorch only
        raise TypeError(f"{self.module}.{self.name} is PyTorch's")


@functools.lru_cache(maxsize=None)
def _torch_name(module, name):
    return _TorchName(module, name)


class _StorageRef:
    """A storage as the pickle refers to it: saved once, under its key, however many tensors view it."""

    def __init__(self, key, tensor):
        self.key = key
        self.dtype = tensor.dtype
        self.numel = _prims.storage_span(tensor)[1]
        self.tensor = tensor  # keeps the storage (and so its identity) alive while saving


def _save_global(pickler, obj):
    if isinstance(obj, dtype):
        obj = _torch_name("torch", str(obj).split(".")[-1])
    pickler.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
    pickler.memoize(obj)


class _TorchPickler(pickle._Pickler):
    """Pickles tensors as torch.save does: rebuild calls over storages saved beside the pickle."""

    dispatch = dict(pickle._Pickler.dispatch)
    dispatch[_TorchName] = _save_global
    dispatch[dtype] = _save_global
    dispatch[Size] = lambda self, obj: self.save_reduce(_torch_name("torch", "Size"), (tuple(obj),), obj=obj)
    dispatch[device] = lambda self, obj: self.save_reduce(_torch_name("torch", "device"), (str(obj),), obj=obj)

    def __init__(self, file, protocol):
        super().__init__(file, protocol)
        self.storages = {}  # storage identity -> _StorageRef, in the order of their keys

    def persistent_id(self, obj):
        if type(obj) is not _StorageRef:
            return None
        return ("storage", _torch_name("torch", _STORAGE_NAMES[obj.dtype]), obj.key, "cpu", obj.numel)

    def reducer_override(self, obj):
        if not isinstance(obj, Tensor):
            return NotImplemented
        hooks = collections.OrderedDict()
        if isinstance(obj, Parameter):
            return _torch_name("torch._utils", "_rebuild_parameter"), (obj.detach(), obj.requires_grad, hooks)
        identity = _prims.storage_span(obj)[0]
        if identity not in self.storages:
            self.storages[identity] = _StorageRef(str(len(self.storages)), obj)
        geometry = (obj.storage_offset(), tuple(obj.shape), tuple(_prims.strides(obj)))
        rebuild = _torch_name("torch._utils", "_rebuild_tensor_v2")
        return rebuild, (self.storages[identity], *geometry, obj.requires_grad, hooks)


def _storage_bytes(ref):
    """The storage's elements, little-endian, as PyTorch stores them (bfloat16: its 16 bits)."""
    whole = _prims.on_storage_of(ref.tensor, (ref.numel,), (1,), 0)
    if ref.dtype is bfloat16:
        bits = _prims.to_numpy(_prims.to_dtype(whole, float32)).view(np.uint32) >> 16
        return bits.astype("<u2").tobytes()
    return _prims.to_numpy(whole).astype(np.dtype(NUMPY_TYPES[ref.dtype]).newbyteorder("<"), copy=False).tobytes()


def save(obj, out, archive_name, pickle_protocol, byteorder_record=True):
    """Writes obj to the binary file `out` as torch.save does; archive_name: the zip's top folder."""
    pickled = io.BytesIO()
    pickler = _TorchPickler(pickled, pickle_protocol)
    pickler.dump(obj)
    records = [("data.pkl", pickled.getvalue()), (".format_version", b"1"), (".storage_alignment", b"64")]
    if byteorder_record:
        records.append(("byteorder", b"little"))
    records += [(f"data/{ref.key}", _storage_bytes(ref)) for ref in pickler.storages.values()]
    records.append(("version", b"3\n"))
    digest = hashlib.sha256(b"".join(data for _, data in records)).digest()
    records.append((".data/serialization_id", b"%040d" % (int.from_bytes(digest, "little") % 10**40)))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in records:
            info = zipfile.ZipInfo(f"{archive_name}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            header_end = archive.start_dir + _LOCAL_HEADER.size + len(info.filename.encode())
            padding = -(header_end + 4) % _ALIGNMENT  # data aligned as PyTorch's reader (and mmap) expect
            info.extra = struct.pack("<HH", _PADDING_FIELD, padding) + b"Z" * padding
            archive.writestr(info, data)
    out.write(buffer.getvalue())
