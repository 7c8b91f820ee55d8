"""The Tensor: a strided view (shape, strides, offset) of a Storage, plus autograd metadata.

Views share their base's storage, so writes through any of them are seen by all, and broadcasting
reads a tensor with stride 0 along the stretched dims, exactly as in the C++ core. This module also
holds the element loops every op uses: `read` gathers a tensor's values in row-major order,
`write` stores values into a tensor's elements, `new_tensor` makes a contiguous tensor of values.
"""

import math
import os
import warnings

import numpy as np

from .._types import NUMPY_TYPES, SCALAR_TYPE_NAME, Size, bool as bool_, int64, int32, int16, int8, uint8, float16
from .._types import check_int_value
from ._storage import (
    INT64_MAX,
    INT64_MIN,
    Storage,
    cast,
    cast_scalar,
    check_dtype,
    is_inference_mode_enabled,
    to_array,
)

# The narrower integer types, by the C++ names full()'s overflow error gives them.
_C_INT_NAME = {int32: "int", int16: "int16_t", int8: "int8_t", uint8: "uint8_t"}
_NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't be "
    "populated during autograd.backward(). If you indeed want the .grad field to be populated for a non-leaf Tensor, "
    "use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure you access "
    "the leaf Tensor instead. See github.com/pytorch/pytorch/pull/30531 for more informations."
)


# ---- shapes


def numel_of(shape):
    return math.prod(shape)


def contiguous_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append((step + 2**63) % 2**64 - 2**63)  # int64's wrap-around, as PyTorch's (a zero-element tensor's)
        step *= max(size, 1)
    return tuple(reversed(strides))


def shape_str(shape):
    """'[2, 3]', as PyTorch prints shapes in messages."""
    return "[" + ", ".join(map(str, shape)) + "]"


def broadcast_shapes(a, b):
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    for i, (da, db) in enumerate(zip(a, b)):
        if da != db and da != 1 and db != 1:
            raise RuntimeError(
                f"The size of tensor a ({da}) must match the size of tensor b ({db}) at non-singleton dimension {i}"
            )
    return tuple(db if da == 1 else da for da, db in zip(a, b))


def broadcast_strides(t, shape):
    """Strides that read `t` as if expanded to `shape`: 0 along the dims broadcasting stretches."""
    lead = len(shape) - t.dim()
    return (0,) * lead + tuple(0 if size == 1 else stride for size, stride in zip(t._shape, t._strides))


def wrap_dim(dim, ndim):
    """A possibly negative dim as an index in [0, ndim); a 0-d tensor accepts -1 and 0, as in PyTorch."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def number_or_none(obj):
    """A Python number operand (bool, int or float; numpy scalars through item()), or None: the
    values the core accepts as a Scalar. An int that int64 cannot hold is an OverflowError, as there."""
    if isinstance(obj, bool):
        return obj
    if isinstance(obj, int):
        if not INT64_MIN <= obj <= INT64_MAX:
            raise OverflowError("int too big to convert")
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if (
        not isinstance(obj, (Tensor, np.ndarray))
        and hasattr(obj, "dtype")
        and hasattr(obj, "item")
        and getattr(obj, "ndim", None) == 0
    ):  # numpy scalars (a 0-d array is not a number to PyTorch)
        value = obj.item()
        return float(value) if isinstance(value, bool) else number_or_none(value)  # PyTorch reads np.bool_ as a float
    return None


def is_ndarray(obj):
    """For the operators that treat a numpy array apart (== and `ndarray / x`, in _prims), which has no numpy."""
    return isinstance(obj, np.ndarray)


# ---- element loops


def element_offsets(shape, strides, start):
    """Storage positions of the elements of a strided layout, in row-major order."""
    positions = [start]
    for size, stride in zip(shape, strides):
        if size != 1:
            steps = [i * stride for i in range(size)]
            positions = [p + s for p in positions for s in steps]
    return positions


# Python lists of numbers grow one element at a time: a result larger than the machine's memory would
# run for hours before failing, so the size is checked first (the core's allocator refuses it at once).
_MEMORY_BYTES = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else None


def check_allocation(shape, dtype):
    """Refuses, as the core does, an element count whose bytes overflow int64 or exceed the memory."""
    check_dtype(dtype)
    numel = numel_of(shape)
    if numel > (2**63 - 1) // 8:  # 8: the widest dtype's bytes
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(shape)}")
    if _MEMORY_BYTES is not None and numel * dtype.itemsize > _MEMORY_BYTES:
        raise MemoryError(f"can't allocate memory: you tried to allocate {numel * dtype.itemsize} bytes")


def read(t, shape=None):
    """t's values in row-major order (broadcast to `shape` if given), as Python numbers."""
    check_allocation(t._shape if shape is None else shape, t._dtype)
    data = t._storage.data
    if shape is None or tuple(shape) == t._shape:
        if t.is_contiguous():
            return data[t._offset : t._offset + t.numel()].tolist()
        shape, strides = t._shape, t._strides
    else:
        strides = broadcast_strides(t, shape)
    return [data[i] for i in element_offsets(shape, strides, t._offset)]


def write(t, values, dtype=None):
    """Stores `values` (row-major, of dtype `dtype`, default t's) into t's elements, converted to t's dtype."""
    buffer = to_array(cast(values, dtype or t._dtype, t._dtype), t._dtype)
    data = t._storage.data
    if t.is_contiguous():
        data[t._offset : t._offset + len(buffer)] = buffer
    else:
        for position, value in zip(element_offsets(t._shape, t._strides, t._offset), buffer):
            data[position] = value


def copy_values(dst, src):
    """dst[...] = src, broadcasting src and converting it to dst's dtype; no autograd."""
    write(dst, read(src, dst._shape), src._dtype)


def new_tensor(values, shape, dtype):
    """A contiguous tensor of `shape` holding `values` (row-major, already of dtype's kind)."""
    return Tensor._make(Storage(to_array(values, dtype)), tuple(shape), contiguous_strides(shape), 0, dtype)


def full(shape, value, dtype):
    number = number_or_none(value)  # as the core: a number exactly, anything else through float()
    value = float(value) if number is None else number
    if dtype is int64 and isinstance(value, float) and not -9.2233720368547758e18 <= value < 9.2233720368547758e18:
        raise RuntimeError("value cannot be converted to type int64_t without overflow")
    if dtype in _C_INT_NAME:
        check_int_value(value, dtype, _C_INT_NAME[dtype])
    shape = tuple(shape)
    for size in shape:
        if size < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {size}: {list(shape)}")
    check_allocation(shape, dtype)
    return new_tensor([cast_scalar(value, dtype)] * numel_of(shape), shape, dtype)


def make_view(base, shape, strides, offset):
    """Another geometry over base's storage, with no autograd history."""
    count = 1
    for size in shape:  # as the C++ int64 element count (x.expand(2**62, 3) is refused there)
        count *= size
        if count >= 2**63:
            raise RuntimeError("numel: integer multiplication overflow")
    return Tensor._make(base._storage, tuple(shape), tuple(strides), offset, base._dtype)


# Why a view made in grad mode has no history to remake, for its errors to say (the core's
# ViewOrigin): returned by a custom Function's forward, or one of the parts of an op that returns
# several views (split, unbind), or a view of such a view.
VIEW_PLAIN, VIEW_OF_CUSTOM_FUNCTION, VIEW_OF_MULTI_OUTPUT_NODE = "plain", "custom Function", "multi-output node"


def make_differentiable_view(base, shape, strides, offset, tracks_history):
    """make_view for the view ops: remembers the tensor that owns the memory, so that an in-place
    write through the view can rewrite that tensor's history too. A view made in grad mode also
    remembers the storage version its grad_fn describes: once the storage is written in place
    (through the base or any view of it), its history is remade from the base's, as in PyTorch. A
    view made under no_grad, or from such a view (PyTorch's CreationMeta NO_GRAD_MODE), has no
    history to remake: writing it, or using it after such a write, is an error where gradients are
    involved."""
    view = make_view(base, shape, strides, offset)
    view._view_base = base if base._view_base is None else base._view_base
    view._view_tracks_history = tracks_history and (base._view_base is None or base._view_tracks_history)
    view._view_origin = base._view_origin if tracks_history else VIEW_PLAIN
    view._view_version = base._storage.version
    return view


def alias(t):
    return make_view(t, t._shape, t._strides, t._offset)


def to_numpy(t):
    """A numpy array sharing t's memory (the buffer protocol of array.array / memoryview)."""
    if t._dtype not in NUMPY_TYPES:
        raise TypeError(f"Got unsupported ScalarType {SCALAR_TYPE_NAME[t._dtype]}")
    if t._dtype is float16:  # stored as float32 values (_storage): a copy, not shared as in the core
        return np.array(read(t), dtype=np.float16).reshape(t._shape)
    flat = np.frombuffer(t._storage.data, dtype=NUMPY_TYPES[t._dtype])
    itemsize = flat.itemsize
    return np.lib.stride_tricks.as_strided(
        flat[t._offset :], shape=t._shape, strides=[s * itemsize for s in t._strides]
    )


class Tensor:
    """Data: storage, shape, strides, offset, dtype. Autograd: requires_grad (the user's flag, for
    leaves), grad_fn (None for leaves), grad, and the links the engine needs."""

    @classmethod
    def _make(cls, storage, shape, strides, offset, dtype):
        t = object.__new__(cls)
        t._storage, t._shape, t._strides, t._offset, t._dtype = storage, shape, strides, offset, dtype
        t._requires_grad_leaf = False
        t._grad_fn = None
        t._output_nr = 0  # which output of grad_fn this tensor is
        t._grad = None
        t._retains_grad = False
        t._accumulator = None  # weak reference to this leaf's AccumulateGrad node while one lives
        t._view_base = None
        t._view_tracks_history = False
        t._view_origin = VIEW_PLAIN
        t._view_version = 0
        return t

    __hash__ = object.__hash__
    _hooks = None  # a leaf's gradient hooks (_autograd.LeafHooks), from the first registration on

    # ---- geometry
    @property
    def shape(self):
        return Size(self._shape)

    @property
    def dtype(self):
        return self._dtype

    @property
    def ndim(self):
        return len(self._shape)

    def dim(self):
        return len(self._shape)

    def numel(self):
        return numel_of(self._shape)

    def element_size(self):
        return self._dtype.itemsize

    def storage_offset(self):
        return self._offset

    def is_contiguous(self):
        if not all(self._shape):
            return True  # no element to be out of place, as PyTorch says
        expected = 1
        for size, stride in zip(reversed(self._shape), reversed(self._strides)):
            if size != 1:  # the stride of a size-1 dim never matters
                if stride != expected:
                    return False
                expected *= size
        return True

    @property
    def _version(self):
        if self._storage.inference:
            raise RuntimeError("Inference tensors do not track version counter.")
        return self._storage.version

    @property
    def _base(self):
        """A view's base: the tensor that owns its memory (None for a tensor that is not a view)."""
        return self._view_base

    def _is_view(self):
        return self._view_base is not None

    def is_inference(self):
        return self._storage.inference

    # ---- autograd attributes
    def _history_stale(self):
        """A view whose grad_fn predates an in-place write to its storage, in a graph: the grad_fn
        must be remade (autograd's refresh_view_history) before it is used (or, for a view without
        history, the use refused)."""
        return (
            self._view_base is not None
            and self._view_version != self._storage.version
            and (self._grad_fn is not None or self._view_base.requires_grad)
        )

    @property
    def requires_grad(self):
        # As PyTorch, a view requires grad when its base does, even one made under no_grad (which has
        # no grad_fn and is a leaf without a gradient of its own: no gradient reaches it or its base).
        return (
            self._grad_fn is not None
            or self._requires_grad_leaf
            or (self._view_base is not None and self._view_base.requires_grad)
        )

    @requires_grad.setter
    def requires_grad(self, flag):
        if not isinstance(flag, bool):  # PyTorch takes no 1, None or other truthy objects
            raise RuntimeError("requires_grad must be a bool")
        if not self._is_leaf():
            # PyTorch's wording: the hint to detach() only where the flag would be switched off.
            if flag:
                raise RuntimeError("you can only change requires_grad flags of leaf variables.")
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed variable "
                "in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
            )
        if flag and not self._dtype.is_floating_point:
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        if flag and self._storage.inference and not is_inference_mode_enabled():
            raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
        self._requires_grad_leaf = flag

    @property
    def is_leaf(self):
        _refresh_view_history(self)
        return self._is_leaf()

    def _is_leaf(self):
        """is_leaf without remaking a stale view's history (a view without history whose memory was
        written stays a leaf here, as in PyTorch's C++; its is_leaf property raises)."""
        return self._grad_fn is None and not (self._view_tracks_history and self._history_stale())

    @property
    def grad_fn(self):
        _refresh_view_history(self)
        return self._grad_fn

    @property
    def output_nr(self):
        return self._output_nr

    @property
    def retains_grad(self):
        return self._retains_grad

    @property
    def grad(self):
        if not self._is_leaf() and not self._retains_grad:
            warnings.warn(_NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}"
                )
            if value._dtype is not self._dtype:
                raise RuntimeError("assigned grad has data of a different type")
            if value._shape != self._shape:
                raise RuntimeError("assigned grad has data of a different size")
        self._grad = value

    @property
    def data(self):
        # Its own version counter over the same memory: PyTorch's in-place writes through .data are
        # invisible to autograd, so they do not invalidate tensors saved for backward.
        untracked = alias(self)
        untracked._storage = Storage(self._storage.data, self._storage.inference)
        return untracked

    @data.setter
    def data(self, other):
        # x.data = y: x takes y's memory and geometry and keeps its own autograd identity.
        self._storage, self._shape, self._strides = other._storage, other._shape, other._strides
        self._offset, self._dtype = other._offset, other._dtype

    def detach(self):
        return alias(self)

    def detach_(self):
        self._grad_fn = None
        self._requires_grad_leaf = False
        return self

    def retain_grad(self):
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._is_leaf() or self._retains_grad:
            return
        _refresh_view_history(self)
        self._grad_fn.retain_output(self)
        self._retains_grad = True

    # ---- Python values (printing, tolist, numpy() and the conversions to bool, int and float are
    # fastgrad's _methods, shared by both backends)
    def item(self):
        n = self.numel()
        if n != 1:
            raise RuntimeError(f"a Tensor with {n} elements cannot be converted to Scalar")
        value = self._storage.data[self._offset]
        return bool(value) if self._dtype is bool_ else value

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]


def _refresh_view_history(t):
    from ._autograd import refresh_view_history

    refresh_view_history(t)
