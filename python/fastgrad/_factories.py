"""Creating tensors: from Python data and numpy arrays, filled, and ranges (random ones: _sampling);
and the legacy constructor Tensor(data) / Tensor(2, 3).

Written once for both backends, over the backend's primitives (_prims.full, arange, from_numpy, ...;
see _methods for how the reference runs this module too).
"""

import builtins
import functools
import numbers
import warnings

import numpy as np

from . import _prims  # the backend: relative, so that the reference's copy of this module gets its own
from ._methods import Tensor, _sizes, register
from fastgrad._types import DTYPE_OF_NUMPY, NUMPY_TYPES, LEGACY_TYPE_NAME, Size, check_cpu, check_int_value
from fastgrad._types import C_TYPE_NAME, bfloat16, float32, get_default_dtype, int64, bool as bool_, promote_types

# The factories each backend exports at its top level (both __init__.py import them with *).
__all__ = [
    "tensor",
    "as_tensor",
    "from_numpy",
    "from_dlpack",
    "frombuffer",
    "zeros",
    "ones",
    "empty",
    "full",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
    "arange",
    "linspace",
    "eye",
]


def _finish(t, requires_grad):
    if requires_grad:
        if not t.dtype.is_floating_point:
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        _prims.set_requires_grad(t, True)
    return t


# ---- from data


def _dtype_of_array(array):
    """The dtype that holds a numpy array's values: its own where a tensor has it, else other
    integers widen to int64 and other floats become float32."""
    kind = array.dtype.kind
    if array.dtype in DTYPE_OF_NUMPY:
        return DTYPE_OF_NUMPY[array.dtype]
    if kind in "iu":
        return int64
    if kind == "f":
        return float32
    raise TypeError(
        f"can't convert np.ndarray of type numpy.{array.dtype}. "
        "The only supported types are: float64, float32, float16, complex64, complex128, int64, int32, int16, "
        "int8, uint64, uint32, uint16, uint8, and bool."
    )


def _from_array(array, dtype):
    """A copy of a numpy array's values as a new tensor of `dtype` (numpy converts them). An array
    in the other byte order is refused, as by from_numpy (numpy would swap it; PyTorch refuses it)."""
    if not array.dtype.isnative:
        raise ValueError(
            "given numpy array has byte order different from the native byte order. Conversion between "
            "byte orders is currently not supported."
        )
    own = _dtype_of_array(array)  # converted to `dtype` by the backend's casts, as PyTorch converts it
    t = _prims.from_numpy(np.asarray(_normalised_bools(array), dtype=NUMPY_TYPES[own]), share_memory=False)
    return t if own is dtype else _prims.to_dtype(t, dtype)


def _normalised_bools(array, in_place=False):
    """A numpy bool array whose bytes are all 0 or 1. One made by .view(bool) or np.frombuffer can
    hold other bytes, which PyTorch reads as True everywhere; the kernels of both backends read the
    raw byte, so such bytes become 1: in a copy, or in_place in the array itself (from_numpy shares
    its memory, and writing 1 over a byte that numpy reads as True keeps every value either side sees)."""
    if array.dtype != np.bool_:
        return array
    as_bytes = array.view(np.uint8)
    if not (as_bytes > 1).any():
        return array
    if in_place:
        np.minimum(as_bytes, 1, out=as_bytes)
        return array
    return as_bytes != 0


_PLAIN_NUMBERS = {builtins.bool: bool_, int: int64, float: None}  # None: the default dtype


def _scan(data, depth, shape, dtypes, values):
    """Checks nested sequences are rectangular and numeric, as PyTorch does, collecting their shape,
    the dtypes of the numbers seen and the numbers in order. An ndarray is a sequence of numpy
    scalars of its dtype; numpy scalars and one-element tensors keep their dtypes."""
    if isinstance(data, Tensor):
        if data.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        dtypes.add(data.dtype)
        values.append(data.item())
        return
    if isinstance(data, (list, tuple, np.ndarray)):
        if len(shape) == depth:
            if values:  # a number was already seen at this depth: a sequence cannot be here too
                raise TypeError(f"must be real number, not {type(data).__name__}")
            shape.append(len(data))  # a 0-d array has no len(): PyTorch's TypeError too
        elif shape[depth] != len(data):
            raise ValueError(f"expected sequence of length {shape[depth]} at dim {depth} (got {len(data)})")
        kinds = set(map(type, data)) if isinstance(data, (list, tuple)) else ()
        if kinds and kinds <= _PLAIN_NUMBERS.keys():  # a row of Python numbers (the usual data): at once
            if len(shape) > depth + 1:  # a sibling was a sequence there
                raise TypeError("not a sequence")
            dtypes.update(_PLAIN_NUMBERS[kind] or get_default_dtype() for kind in kinds)
            values.extend(data)
            return
        if isinstance(data, np.ndarray):  # its dtype counts even with no elements
            warnings.warn(
                "Creating a tensor from a list of numpy.ndarrays is extremely slow. Please consider "
                "converting the list to a single numpy.ndarray with numpy.array() before converting to a "
                "tensor.",
                UserWarning,
                stacklevel=depth + 3,
            )  # the caller of tensor()
            dtypes.add(_dtype_of_array(data))
        for item in data:
            _scan(item, depth + 1, shape, dtypes, values)
        return
    if len(shape) > depth:  # a number where an earlier element had a sequence: PyTorch's error
        raise TypeError("not a sequence")
    if isinstance(data, np.generic):
        dtypes.add(_dtype_of_array(np.asarray(data)))
    elif isinstance(data, builtins.bool):
        dtypes.add(bool_)
    elif isinstance(data, numbers.Integral):
        dtypes.add(int64)
    elif isinstance(data, numbers.Real):
        dtypes.add(get_default_dtype())
    elif isinstance(data, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    else:
        raise RuntimeError(f"Could not infer dtype of {type(data).__name__}")
    values.append(data)


def _is_dlpack_producer(data):
    """Another library's array that DLPack shares (a PyTorch tensor, a JAX array, ...); fastgrad's
    tensors and numpy's arrays and scalars have paths of their own."""
    return hasattr(data, "__dlpack__") and not isinstance(data, (Tensor, np.ndarray, np.generic, type))


def _is_numpy_readable(data):
    """An object numpy reads as an array through its array protocols (e.g. a PIL image)."""
    return not isinstance(data, (Tensor, np.ndarray, np.generic, type)) and (
        hasattr(data, "__array_interface__") or hasattr(data, "__array__")
    )


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    check_cpu(device)
    if isinstance(data, (bytearray, memoryview)):  # sequences of numbers, as PyTorch reads them (not bytes)
        data = data.tolist() if isinstance(data, memoryview) else list(data)
    elif _is_numpy_readable(data) and not _is_dlpack_producer(data):
        data = np.asarray(data)
    if _is_dlpack_producer(data):  # another library's array, copied (one that requires grad detached first)
        t = _prims.clone(from_dlpack(data.detach() if getattr(data, "requires_grad", False) else data))
        t = t if dtype is None else _prims.to_dtype(t, dtype)
    elif isinstance(data, Tensor):
        warnings.warn(
            "To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
            "sourceTensor.detach().clone().requires_grad_(True), rather than torch.tensor(sourceTensor).",
            UserWarning,
            stacklevel=2,
        )
        t = _prims.clone(data.detach())
        t = t if dtype is None else _prims.to_dtype(t, dtype)
    elif isinstance(data, (np.ndarray, np.generic)):  # a numpy scalar keeps its dtype, as a 0-d array does
        t = _from_array(np.asarray(data), dtype or _dtype_of_array(np.asarray(data)))
    else:
        shape, dtypes, values = [], set(), []
        _scan(data, 0, shape, dtypes, values)
        # PyTorch promotes them all
        inferred = functools.reduce(promote_types, dtypes) if dtypes else get_default_dtype()
        if dtype is not None and dtype not in (int64, bool_) and not dtype.is_floating_point:
            for v in values:
                check_int_value(v, dtype, dtype._name)
        if inferred is int64 and dtype in (None, int64):  # the reference's int64 array would wrap a larger one
            if not -(2**63) <= builtins.min(values) <= builtins.max(values) < 2**63:
                raise ValueError("Overflow when unpacking long long")
        t = _prims.from_values(values, shape, dtype or inferred, inferred)
    return _finish(t, requires_grad)


def as_tensor(data, *, dtype=None, device=None):
    """data as a tensor, sharing memory where it can: a tensor is returned itself (or converted,
    differentiably, to `dtype`), another library's array is shared through DLPack, an ndarray (or
    what numpy reads as one) whose dtype a tensor holds is shared as by from_numpy; anything else is
    copied, as by tensor()."""
    check_cpu(device)
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    if _is_dlpack_producer(data):
        t = from_dlpack(data)
        return t if dtype in (None, t.dtype) else _prims.to_dtype(t, dtype)
    if _is_numpy_readable(data):
        data = np.asarray(data)
    if isinstance(data, np.ndarray) and data.dtype in DTYPE_OF_NUMPY:
        t = from_numpy(data)
        return t if dtype in (None, t.dtype) else _prims.to_dtype(t, dtype)
    return tensor(data, dtype=dtype)


def from_numpy(array):
    """A tensor over the numpy array's own memory: writes on either side are seen by the other. A
    read-only array is copied instead (see _writable_copy)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    if not array.flags.writeable:
        warnings.warn(
            "The given NumPy array is not writable, and PyTorch does not support non-writable tensors. This "
            "means writing to this tensor will result in undefined behavior. You may want to copy the array "
            "to protect its data or make it writable before converting it to a tensor. This type of warning "
            "will be suppressed for the rest of this program.",
            UserWarning,
            stacklevel=2,
        )
        array = _writable_copy(array)
    _normalised_bools(array, in_place=True)
    return _prims.from_numpy(array, share_memory=True)


def from_dlpack(ext_tensor, *, device=None, copy=None):
    """A tensor over the memory of another library's array (anything with __dlpack__: numpy, PyTorch,
    JAX, ...) or of a DLPack capsule, without a copy unless copy=True. Read-only memory is copied, as
    by from_numpy."""
    check_cpu(device)
    if not hasattr(ext_tensor, "__dlpack__"):
        if device is not None or copy is not None:
            raise AssertionError("device and copy kwargs not supported when ext_tensor is already a DLPack capsule.")
        return _prims.from_dlpack(ext_tensor)
    try:
        capsule = ext_tensor.__dlpack__(max_version=(1, 0), **({} if copy is None else {"copy": copy}))
    except TypeError:  # a producer older than DLPack 1.0 takes neither: copied here instead
        t = _prims.from_dlpack(ext_tensor.__dlpack__())
        return _prims.clone(t) if copy else t
    return _prims.from_dlpack(capsule)


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-d tensor over the memory of an object with the buffer protocol (bytearray, memoryview,
    array.array, mmap, ...), from byte `offset`, `count` elements (-1: all). A read-only buffer is
    copied (with PyTorch's warning), as from_numpy copies a read-only array; so is bfloat16, which
    numpy cannot view."""
    try:
        view = memoryview(buffer)
    except TypeError:
        raise ValueError("object does not implement Python buffer protocol.") from None
    view = view.cast("B")  # a view that is not C-contiguous refuses: its bytes are no one run
    length, item = view.nbytes, dtype.itemsize
    if length == 0 or count == 0:
        raise ValueError(f"both buffer length ({length}) and count ({count}) must not be 0")
    if not 0 <= offset < length:
        raise ValueError(
            f"offset ({offset} bytes) must be non-negative and no greater than buffer length ({length} bytes) minus 1"
        )
    if count < 0 and (length - offset) % item:
        raise ValueError(
            f"buffer length ({length - offset} bytes) after offset ({offset} bytes) must be a multiple of element "
            f"size ({item})"
        )
    count = (length - offset) // item if count < 0 else count
    if offset + count * item > length:
        raise ValueError(
            f"requested buffer length ({count} * {item} bytes) after offset ({offset} bytes) must not be greater "
            f"than actual buffer length ({length} bytes)"
        )
    array = np.frombuffer(view, dtype=np.uint8, count=count * item, offset=offset)
    if view.readonly:
        warnings.warn(
            "The given buffer is not writable, and PyTorch does not support non-writable tensors. This means you "
            "can write to the underlying (supposedly non-writable) buffer using the tensor. You may want to copy "
            "the buffer to protect its data or make it writable before converting it to a tensor. This type of "
            "warning will be suppressed for the rest of this program.",
            UserWarning,
            stacklevel=2,
        )
        array = array.copy()
    if dtype is bfloat16:  # its bits are a float32's upper half: widened exactly, then narrowed back
        wide = (array.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        t = _prims.to_dtype(_prims.from_numpy(wide, share_memory=False), bfloat16)
    else:
        t = from_numpy(array.view(NUMPY_TYPES[dtype]))
    return _finish(t, requires_grad)


def _writable_copy(array):
    """A writable copy of a read-only array, laid out as the array (a broadcast array keeps its 0
    strides): the memory from its first element to its last, copied and viewed with its strides.
    PyTorch shares the read-only memory instead, so that a write through the tensor writes into a
    bytes object or crashes on a read-only memory map; a copy keeps the values and the process.
    Strides the backend refuses (negative, not whole elements) are left for it to refuse."""
    item = array.itemsize
    if array.size == 0:
        return array.copy()
    if builtins.any(s < 0 or s % item for s in array.strides):
        return array
    extent = 1 + builtins.sum((n - 1) * s // item for n, s in zip(array.shape, array.strides))
    memory = np.lib.stride_tricks.as_strided(array, shape=(extent,), strides=(item,)).copy()
    return np.lib.stride_tricks.as_strided(memory, shape=array.shape, strides=array.strides)


def _legacy_new(cls, *args, device=None):
    """`Tensor([1, 2])` makes data of the default dtype; `Tensor(2, 3)` an uninitialized 2x3; `Tensor()` no data."""
    if not args:
        return _prims.empty((0,), get_default_dtype())
    if len(args) == 1 and not isinstance(args[0], numbers.Integral):
        return tensor(args[0], dtype=get_default_dtype())
    return _prims.empty(_sizes(args), get_default_dtype())


# Tensor(data) / Tensor(2, 3): __new__ builds the whole tensor, so __init__ has nothing left to do.
Tensor.__new__ = _legacy_new
Tensor.__init__ = lambda self, *args, **kwargs: None


# ---- filled


def _filled(size, value, dtype, requires_grad, device, out=None):
    check_cpu(device)
    dtype = dtype or (
        get_default_dtype()
        if isinstance(value, builtins.float) or value is None
        else int64
        if isinstance(value, numbers.Integral) and not isinstance(value, builtins.bool)
        else bool_
        if isinstance(value, builtins.bool)
        else get_default_dtype()
    )
    if value is None and dtype is bool_:
        value = False  # a byte other than 0 and 1 is no bool: the kernels' reads of one are undefined
    t = _prims.empty(_sizes(size), dtype) if value is None else _prims.full(_sizes(size), value, dtype)
    t = _finish(t, requires_grad)
    if out is not None:
        out.data = t
        return out
    return t


def zeros(*size, dtype=None, device=None, requires_grad=False, out=None):
    return _filled(size, 0, dtype or get_default_dtype(), requires_grad, device, out)


def ones(*size, dtype=None, device=None, requires_grad=False, out=None):
    return _filled(size, 1, dtype or get_default_dtype(), requires_grad, device, out)


def empty(*size, dtype=None, device=None, requires_grad=False, out=None):
    """Uninitialized, as PyTorch's: the memory is allocated and not written (a zero-fill of 2 GB took 0.85 s)."""
    return _filled(size, None, dtype or get_default_dtype(), requires_grad, device, out)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False, out=None):
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _filled((size,), fill_value, dtype, requires_grad, device, out)


def zeros_like(input, *, dtype=None, device=None, requires_grad=False):
    return _filled((list(input.shape),), 0, dtype or input.dtype, requires_grad, device)


def ones_like(input, *, dtype=None, device=None, requires_grad=False):
    return _filled((list(input.shape),), 1, dtype or input.dtype, requires_grad, device)


def empty_like(input, *, dtype=None, device=None, requires_grad=False):
    return _filled((list(input.shape),), None, dtype or input.dtype, requires_grad, device)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    return _filled((list(input.shape),), fill_value, dtype or input.dtype, requires_grad, device)


# ---- ranges


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False, out=None):
    if start.__class__ is int and end is None and dtype is None and device is None and out is None:
        # arange(n), a model's positions on every call: what the general path below makes of it
        return _finish(_prims.arange(0.0, builtins.float(start), 1.0, int64), requires_grad)
    check_cpu(device)
    if end is None:
        start, end = 0, start
    values = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if dtype is None:
        dtype = get_default_dtype() if any(isinstance(v, builtins.float) for v in values) else int64
    t = _finish(_prims.arange(*map(builtins.float, values), dtype), requires_grad)
    if out is not None:
        out.data = t
        return out
    return t


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    check_cpu(device)
    t = _prims.linspace(builtins.float(start), builtins.float(end), int(steps), dtype or get_default_dtype())
    return _finish(t, requires_grad)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    check_cpu(device)
    return _finish(_prims.eye(n, n if m is None else m, dtype or get_default_dtype()), requires_grad)


# ---- Tensor methods that make values: new_* (self's dtype by default)


def _new(fill):
    def new(self, *size, dtype=None, device=None, requires_grad=False):
        return fill(*size, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)

    return new


new_zeros, new_ones, new_empty = _new(zeros), _new(ones), _new(empty)


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return full(size, fill_value, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)


def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    return tensor(data, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)


# ---- PyTorch's legacy tensor types: FloatTensor(2, 3) is an uninitialized 2x3 float32 tensor,
# FloatTensor([1, 2]) one made from data, and isinstance(x, FloatTensor) asks for a float32 tensor.


def _legacy_options(dtype):
    return (
        f"TensorOptions(dtype={C_TYPE_NAME[dtype]}, device=cpu, layout=Strided, requires_grad=false "
        "(default), pinned_memory=false (default), memory_format=(nullopt))"
    )


class _LegacyTensorType(type):
    def __instancecheck__(cls, value):
        return isinstance(value, Tensor) and value.dtype is cls.dtype

    def __call__(cls, *args, **kwargs):
        check_cpu(kwargs.pop("device", None))
        data = args[0] if len(args) == 1 else None
        if kwargs or len(args) > 1 and not isinstance(args[0], numbers.Integral):
            got = [builtins.type(a).__name__ for a in args] + [
                f"{k}={builtins.type(v).__name__}" for k, v in kwargs.items()
            ]
            raise TypeError(
                f"new() received an invalid combination of arguments - got ({', '.join(got)}), but expected one of:"
            )
        if isinstance(data, Tensor):
            if data.dtype is not cls.dtype:
                raise TypeError(f"expected {_legacy_options(cls.dtype)} (got {_legacy_options(data.dtype)})")
            return data
        if isinstance(data, Size) or builtins.all(isinstance(a, numbers.Integral) for a in args[:1]):
            # sizes: none (an empty tensor), ints or a Size; a bool is data, which must be a sequence
            if isinstance(data, builtins.bool):
                raise TypeError("new(): data must be a sequence (got bool)")
            try:
                sizes = _sizes(args) if args else [0]
            except TypeError as error:
                raise TypeError(f"new(): {error}") from None
            return empty(*sizes, dtype=cls.dtype)
        if isinstance(data, str):
            raise TypeError("new(): invalid data type 'str'")
        if not isinstance(data, (list, tuple, np.ndarray)):
            raise TypeError(f"new(): data must be a sequence (got {builtins.type(data).__name__})")
        return tensor(data, dtype=cls.dtype)


for _dtype, _name in LEGACY_TYPE_NAME.items():
    globals()[_name] = _LegacyTensorType(_name, (), {"dtype": _dtype, "__module__": "fastgrad"})
    __all__.append(_name)


register("_factories", globals())
