"""Tensors as raw bytes, and pickling over them (Tensor.__reduce_ex__; fastgrad.safetensors uses the
raw-bytes helpers too).

A pickled tensor is `_rebuild_tensor(storage, shape, strides, storage_offset, requires_grad)`, its
storage `_rebuild_storage(dtype name, bytes)`: the whole storage's elements, little-endian (bfloat16
as its 16-bit patterns). Views of one storage pickled together refer to one storage object, which
pickle's memo writes once, so after loading they share memory again, and strides are kept. As in
PyTorch, a view carries its whole storage, .grad is not pickled, and a tensor that requires grad
loads as a leaf that requires grad.

The storage's bytes go as a pickle.PickleBuffer with protocol 5: out-of-band when the pickler has a
buffer_callback (the loaded tensor then uses the buffer handed to loads without a copy, if that is
writable), else in-band as a bytearray that the tensor adopts. Protocols 3-4 write bytes, protocol 2
a latin-1 str (its bytes would need the global _codecs.encode); the load then copies them once.
Loading calls only these two functions (and nn.parameter._rebuild_parameter), which check what they
are given: a hostile pickle naming them cannot read outside a storage.
"""

import pickle
import weakref

import numpy as np

from . import _prims
from fastgrad._types import ALL_DTYPES, NUMPY_TYPES, bfloat16, float32

# dtype name -> (dtype, numpy type of its elements as stored): little-endian; bfloat16 as bit patterns
RAW_TYPES = {d._name: (d, np.dtype(NUMPY_TYPES.get(d, np.uint16)).newbyteorder("<")) for d in ALL_DTYPES}
_BFLOAT16_SHIFT = 16  # a bfloat16 is the upper half of the float32 of the same value


def raw_values(t):
    """t's elements as a contiguous numpy array of their stored type (RAW_TYPES), t's own memory when
    t is contiguous (and not bfloat16)."""
    t = t.detach().contiguous()
    if t.dtype is bfloat16:  # exact: every bfloat16 is a float32 whose lower 16 bits are zero
        bits = _prims.to_numpy(_prims.to_dtype(t, float32)).view(np.uint32) >> _BFLOAT16_SHIFT
        return bits.astype(np.uint16)
    return np.ascontiguousarray(_prims.to_numpy(t), dtype=RAW_TYPES[t.dtype._name][1])


def tensor_from_raw(values, dtype):
    """A tensor of `dtype` over `values` (numpy, its stored type): without a copy where the array's
    memory can be shared (writable, aligned, native byte order, non-negative strides), else a copy."""
    if dtype is bfloat16:
        as_float32 = (values.astype(np.uint32) << _BFLOAT16_SHIFT).view(np.float32)
        return _prims.to_dtype(_prims.from_numpy(as_float32, share_memory=True), bfloat16)
    if not values.dtype.isnative:
        values = values.astype(values.dtype.newbyteorder("="))
    flags = values.flags
    shareable = flags.writeable and flags.aligned and all(s >= 0 for s in values.strides)
    return _prims.from_numpy(values, share_memory=shareable)


class _StorageData:
    """What a storage pickles as: one object per storage while a pickle holds it, so that the
    pickler's memo writes the storage once for all the views pickled with it."""

    __slots__ = ("whole", "__weakref__")

    def __init__(self, whole):
        self.whole = whole  # a 1-d tensor over all the storage (keeping it alive, so its identity is unique)

    def __reduce_ex__(self, protocol):
        values = raw_values(self.whole)
        if protocol >= 5:
            payload = pickle.PickleBuffer(values)
        elif protocol >= 3:
            payload = values.tobytes()
        else:
            payload = values.tobytes().decode("latin-1")
        return _rebuild_storage, (self.whole.dtype._name, payload)


# (storage identity, dtype) -> its live _StorageData (by dtype too: were a storage ever viewed as
# another dtype, each would be pickled as its own, correct though not shared)
_storage_data = weakref.WeakValueDictionary()


def _storage_of(t):
    identity, numel = _prims.storage_span(t)
    data = _storage_data.get((identity, t.dtype))
    if data is None:
        whole = _prims.on_storage_of(t, (numel,), (1,), 0)
        data = _storage_data[identity, t.dtype] = _StorageData(whole)
    return data


def reduce_tensor(self, protocol):
    """Tensor.__reduce_ex__."""
    geometry = (tuple(self.shape), tuple(_prims.strides(self)), self.storage_offset())
    return _rebuild_tensor, (_storage_of(self), *geometry, self.requires_grad)


def _refuse(why):
    raise pickle.UnpicklingError(f"not a valid pickled fastgrad tensor: {why}")


def _rebuild_storage(dtype_name, payload):
    if dtype_name not in RAW_TYPES:
        _refuse(f"unknown dtype {dtype_name!r}")
    dtype, stored = RAW_TYPES[dtype_name]
    if isinstance(payload, str):
        payload = payload.encode("latin-1")
    try:  # out-of-band data comes back as whatever buffer type the transport made (Ray: its SubBuffer)
        raw = memoryview(payload).cast("B")
    except TypeError:
        _refuse(f"storage data of type {type(payload).__name__}")
    if raw.nbytes % stored.itemsize:
        _refuse(f"{raw.nbytes} bytes of storage are no whole number of {dtype_name} elements")
    return tensor_from_raw(np.frombuffer(raw, dtype=stored), dtype)


def _is_size(n):
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


def _is_whole_storage(t):
    """t is what _rebuild_storage makes: all of its storage, in order (the bounds below count on it)."""
    if not isinstance(t, _prims.Tensor) or t.dim() != 1 or t.storage_offset() != 0:
        return False
    return tuple(_prims.strides(t)) == (1,) and t.numel() == _prims.storage_span(t)[1]


def _rebuild_tensor(storage, shape, strides, storage_offset, requires_grad):
    if not _is_whole_storage(storage):
        _refuse("the storage is not one")
    if not (isinstance(shape, tuple) and isinstance(strides, tuple) and len(shape) == len(strides)):
        _refuse("shape and strides do not match")
    if not all(_is_size(n) for n in (*shape, *strides, storage_offset)):
        _refuse("a size, stride or offset is not a non-negative int")
    last = storage_offset + sum((n - 1) * s for n, s in zip(shape, strides))
    if 0 not in shape and last >= storage.numel():
        _refuse("the view reaches past its storage")
    t = _prims.on_storage_of(storage, shape, strides, storage_offset)
    return _prims.set_requires_grad(t, True) if requires_grad is True else t
