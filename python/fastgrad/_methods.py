"""Tensor methods and module functions with PyTorch's flexible signatures, over the backend's primitives.

Written once for both backends. As fastgrad._methods it runs over fastgrad._prims (the C++ core);
executed a second time as fastgrad.reference._methods (see _shared) it runs over the pure-Python
primitives of the same names. The arithmetic operators, attributes and autograd entry points are the
backend's own (bound in C++, or by reference._prims); what is here parses flexible arguments (sizes
as varargs or a tuple, `dim=None | int | tuple`, keyword options, `out=`) and calls the
fixed-signature primitives. Which op is a function, a method or both, and which are wrappers generated
over a primitive, is the op table's (fastgrad._optable); the registration at the end reads it.
"""

import builtins
import copy as _copy
import functools
import itertools
import linecache
import math
import operator
import sys
import os
import threading
import types
import warnings

import numpy as np

from . import _pickling, _prims  # the backend: relative, so that the reference's copy of this module gets its own
from ._grad_mode import no_grad
from fastgrad import _formatting, _meta, _optable, return_types  # backend-independent: the same module for both
from fastgrad._types import (
    C_TYPE_NAME,
    LEGACY_TYPE_NAME,
    SCALAR_TYPE_NAME,
    Size,
    check_cpu,
    compute_type,
    device,
    dtype as _dtype,
    float32,
    float64,
    get_default_dtype,
    int64,
    bool as bool_,
)
from fastgrad._types import NUMPY_TYPES, DLDeviceType, bfloat16, float16, iinfo, int8, int16, int32, uint8

Tensor = _prims.Tensor


# ---- argument helpers


def _sizes(args, what="size"):
    """(2, 3), ((2, 3),) and ([2, 3],) all mean the sizes [2, 3]; each an int64, as PyTorch unpacks them."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    for a in args:  # the common case first: plain ints in range, taken as they are
        if a.__class__ is not int or not -(2**63) <= a < 2**63:
            break
    else:
        return list(args)
    sizes = []
    for pos, a in enumerate(args, 1):
        try:
            size = _index(a)
        except TypeError:
            if len(args) == 1:
                raise TypeError(
                    f"argument '{what}' (position 1) must be tuple of ints, not {builtins.type(a).__name__}"
                ) from None
            error = f'"type must be tuple of ints,but got {builtins.type(a).__name__}"'
            raise TypeError(f"argument '{what}' failed to unpack the object at pos {pos} with error {error}") from None
        if not -(2**63) <= size < 2**63:
            raise TypeError(
                f"argument '{what}' failed to unpack the object at pos {pos} with error \"Overflow when "
                f'unpacking long long"'
            )
        sizes.append(size)
    return sizes


def _index(value):
    if value.__class__ is int:  # the common case: no call
        return value
    if isinstance(value, Tensor):
        return int(value.item())
    if isinstance(value, (builtins.bool, np.bool_)):  # operator.index takes True for 1; PyTorch's ints do not
        raise TypeError(f"expected an int, not {_type_name(value)}")
    return operator.index(value)


def _type_name(value):
    """A value's type as PyTorch's argument errors name it: bool, Tensor, numpy.bool."""
    if isinstance(value, Tensor):
        return "Tensor"
    kind = builtins.type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _int_argument(value, op, name, position=None):
    """_index(value), or PyTorch's TypeError naming the argument (with its position when known: a
    Python function cannot tell a positional argument from a keyword one)."""
    try:
        return _index(value)
    except TypeError:
        at = "" if position is None else f" (position {position})"
        raise TypeError(f"{op}(): argument '{name}'{at} must be int, not {_type_name(value)}") from None


def _not_bool(op, name, value):
    """PyTorch's TypeError for a bool parameter given something else (1, 0.5, None, numpy.bool_, a
    tensor): callers test `value is True or value is False` inline, which costs next to nothing."""
    raise TypeError(f"{op}(): argument '{name}' must be bool, not {_type_name(value)}")


def _dims(dim):
    """None -> [] (all dims); int -> [int]; tuple/list -> list."""
    if dim is None:
        return []
    if isinstance(dim, (tuple, list)):
        return [_index(d) for d in dim]
    return [_index(dim)]


def _wrap_dim(dim, ndim):
    n = builtins.max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def _with_out(result, out):
    """Implements `out=`: the result's values land in `out`, which is returned. As in PyTorch, not
    in a recorded graph (the op's name in the error is its Python function's)."""
    if out is None:
        return result
    if _prims.is_grad_enabled() and (result.requires_grad or out.requires_grad):
        raise RuntimeError(
            f"{sys._getframe(1).f_code.co_name}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad."
        )
    if out.shape == result.shape and out.dtype == result.dtype:
        _prims.copy_(out, result.detach())
    else:
        out.data = result.detach()
    return out


# ---- printing and conversion to Python


def __repr__(self):
    try:
        grad_fn = self.grad_fn
        # PyTorch shows C++-only nodes without their namespace ("torch::autograd::CopySlices")
        grad_fn_name = grad_fn.name().rsplit("::", 1)[-1] if grad_fn is not None else None
    except RuntimeError:  # a view made under no_grad whose memory was since written: as PyTorch prints it
        grad_fn_name = "Invalid"
    return _formatting.tensor_repr(
        _numpy_values(self),
        dtype_name=repr(self.dtype),
        show_dtype=self.dtype not in (get_default_dtype(), int64, bool_),
        grad_fn=grad_fn_name,
        requires_grad=self.requires_grad,
    )


def __format__(self, spec):
    if self.dim() == 0:
        return _formatting.format_scalar(self.item(), spec)
    if spec:
        raise TypeError("unsupported format string passed to Tensor.__format__")
    return repr(self)


def __bool__(self):
    if self.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return builtins.bool(self.item())


def _one_element(self):
    if self.numel() != 1:
        raise ValueError("only one element tensors can be converted to Python scalars")
    return self.item()


def __float__(self):
    return builtins.float(_one_element(self))


def __int__(self):
    return builtins.int(_one_element(self))


def __index__(self):
    if self.dtype.is_floating_point or self.numel() != 1:
        raise TypeError("only integer tensors of a single element can be converted to an index")
    return builtins.int(self.item())


def __iter__(self):
    if self.dim() == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(len(self)))


# numpy defers its operators to a tensor operand (np.float64(.5) * x is x.__rmul__, keeping the
# gradient), as for PyTorch's Tensor.
__array_priority__ = 1000


def __array__(self, dtype=None, copy=None):
    """numpy 2's protocol: np.asarray(x) may share x's memory, np.array(x) copies (copy=True), and
    copy=False refuses a dtype conversion (numpy raises the ValueError). A tensor that requires grad
    refuses, as numpy() does."""
    return np.array(numpy(self), dtype=dtype, copy=copy)


def _array_interface(self):
    """numpy's array interface (version 3) over self's memory, which self keeps alive for the array
    numpy makes. Refused as numpy() refuses (requires grad; bfloat16, which numpy lacks). Memory the
    backend cannot show numpy (the reference's float16, kept as float32) is no attribute, so numpy
    falls back on __array__."""
    array = numpy(self)
    if array.flags.owndata:
        raise AttributeError("'Tensor' object has no attribute '__array_interface__'")
    return array.__array_interface__


def __dlpack__(self, *, stream=-1, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule over self's memory (over a copy with copy=True): DLPack 1.x's
    "dltensor_versioned" when the consumer's max_version is 1.0 or later, else the legacy
    "dltensor". On the CPU, stream is -1 or None, as in PyTorch."""
    if self.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    if stream is not None and builtins.type(stream) is not builtins.int:
        raise TypeError("stream must be ``int`` or ``none``")
    if stream is not None and stream != -1:
        raise AssertionError("stream should be None on cpu.")
    if dl_device is not None and dl_device[0] != DLDeviceType.kDLCPU:
        raise BufferError(f"Can't export a CPU tensor to DLPack device {builtins.tuple(dl_device)}")
    versioned = max_version is not None and max_version[0] >= 1
    return _prims.to_dlpack(_prims.clone(self) if copy else self, versioned, builtins.bool(copy))


def __dlpack_device__(self):
    return (DLDeviceType.kDLCPU, 0)


def __array_wrap__(self, array, context=None, return_scalar=False):
    """A numpy function's result back as a tensor (`x + ndarray` falls back on numpy's add, as in PyTorch)."""
    return _prims.from_numpy(array, share_memory=True)


def __rmatmul__(self, other):
    return NotImplemented


def __copy__(self):
    """copy.copy: a new leaf over the same data, as PyTorch's (which rebuilds the tensor on its storage)."""
    copy = self.detach()
    return _prims.set_requires_grad(copy, True) if self.requires_grad else copy


def __deepcopy__(self, memo):
    if not self.is_leaf:
        raise RuntimeError(
            "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at "
            "the moment.  If you were attempting to deepcopy a module, this may be because of a "
            "torch.nn.utils.weight_norm usage, see https://github.com/pytorch/pytorch/pull/103001"
        )
    # The whole storage is copied once per deepcopy (memo), so views copied together share it, as in PyTorch.
    storage, numel = _prims.storage_span(self)
    whole = memo.get(("storage", storage))
    if whole is None:
        whole = memo[("storage", storage)] = _prims.clone(_prims.on_storage_of(self, (numel,), (1,), 0))
    copy = _prims.on_storage_of(whole, self.shape, _prims.strides(self), self.storage_offset())
    if self.requires_grad:
        _prims.set_requires_grad(copy, True)
    memo[id(self)] = copy
    if self.grad is not None:
        copy.grad = _copy.deepcopy(self.grad, memo)
    return copy


def _numpy_values(self):
    """self's values as a numpy array (numpy has no bfloat16: those as float32, which holds them)."""
    return _prims.to_numpy(self if self.dtype is not bfloat16 else _prims.to_dtype(self, float32))


def tolist(self):
    return _numpy_values(self).tolist()


def numpy(self, *, force=False):
    if self.requires_grad and not force:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
    return _prims.to_numpy(self)


def size(self, dim=None):
    if dim is None:
        return self.shape
    return self.shape[_wrap_dim(_index(dim), self.dim())]


def stride(self, dim=None):
    strides = _prims.strides(self)
    return strides if dim is None else strides[_wrap_dim(_index(dim), self.dim())]


def _T(self):
    return _prims.permute(self, list(range(self.dim() - 1, -1, -1)))


def _matrix_transpose(name):
    """Tensor.mT / mH (the same for real tensors): the last two dims swapped; a 0-d tensor itself."""

    def transpose(self):
        if self.dim() == 0:
            warnings.warn(f"Tensor.{name} is deprecated on 0-D tensors.", UserWarning, stacklevel=2)
            return self
        if self.dim() == 1:
            raise RuntimeError(f"tensor.{name} is only supported on matrices or batches of matrices. Got 1-D tensor.")
        return _prims.transpose(self, -2, -1)

    return property(transpose)


def _H(self):
    if self.dim() == 0:
        warnings.warn("Tensor.H is deprecated on 0-D tensors.", UserWarning, stacklevel=2)
        return self
    if self.dim() != 2:
        hint = " For batches of matrices, consider using tensor.mH" if self.dim() > 2 else ""
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.dim()}-D tensor.{hint}")
    return _prims.transpose(self, 0, 1)


# ---- device and dtype conversion


def _device(self):
    return device("cpu")


def cpu(self):
    return self


def cuda(self, device=None, non_blocking=False):
    check_cpu("cuda")


def to(self, *args, dtype=None, device=None, copy=False, non_blocking=False):
    for arg in args:
        if isinstance(arg, _dtype):
            dtype = arg
        elif isinstance(arg, Tensor):
            dtype = arg.dtype
        else:
            check_cpu(arg)
    check_cpu(device)
    result = self if dtype is None else _prims.to_dtype(self, dtype)
    return _prims.clone(result) if copy and result is self else result


def type(self, dtype=None):
    """The legacy type's name, or a conversion to a dtype, a legacy type or a legacy type's name."""
    if dtype is None:
        return f"fastgrad.{LEGACY_TYPE_NAME[self.dtype]}"
    if isinstance(dtype, str):
        by_name = {f"{library}.{name}": t for t, name in LEGACY_TYPE_NAME.items() for library in ("torch", "fastgrad")}
        if dtype not in by_name:
            raise ValueError(f"invalid type: '{dtype}'")
        dtype = by_name[dtype]
    return _prims.to_dtype(self, getattr(dtype, "dtype", dtype))


def type_as(self, other):
    return _prims.to_dtype(self, other.dtype)


def float(self):
    return _prims.to_dtype(self, float32)


def double(self):
    return _prims.to_dtype(self, float64)


def long(self):
    return _prims.to_dtype(self, int64)


def _bool(self):
    return _prims.to_dtype(self, bool_)


def _to_dtype_method(dtype):
    """Tensor.int(), .half(), ...: self converted to `dtype`."""
    return lambda self: _prims.to_dtype(self, dtype)


# ---- autograd helpers


def requires_grad_(self, requires_grad=True):
    if not isinstance(requires_grad, builtins.bool):  # as PyTorch, not taken for its truth value
        raise TypeError(
            "requires_grad_(): argument 'requires_grad' (position 1) must be bool, not "
            f"{builtins.type(requires_grad).__name__}"
        )
    if requires_grad and not self.dtype.is_floating_point:
        raise RuntimeError("only Tensors of floating point dtype can require gradients")
    if requires_grad and not self.is_leaf:  # as PyTorch: it already requires grad, so nothing changes
        return self
    return _prims.set_requires_grad(self, requires_grad)


# ---- elementwise


def _check_alpha(input, other, alpha):
    """PyTorch's checks of add's and sub's alpha, which takes no part in type promotion (torch.add(bool,
    bool, alpha=2) is bool): a float one for an integral result, a bool one for a non-bool result."""
    if not isinstance(alpha, (builtins.bool, builtins.float)):
        return  # an int, or no number: the primitive refuses it as PyTorch does
    try:
        dtype = _prims.result_type(input, other)
    except TypeError:  # neither a tensor nor a number: the primitive (add, sub_, ...) refuses it as PyTorch does
        return
    if isinstance(alpha, builtins.bool):
        if dtype is not bool_:
            raise RuntimeError("Boolean alpha only supported for Boolean results.")
    elif not dtype.is_floating_point:
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")


def _unscaled(alpha):
    return alpha.__class__ is builtins.int and alpha == 1


def add(input, other, *, alpha=1, out=None):
    """input + alpha * other; for floating types rounded once, as PyTorch's fused loop."""
    _check_alpha(input, other, alpha)
    return _with_out(_prims.add(input, other) if _unscaled(alpha) else _prims.add_scaled(input, other, alpha), out)


def sub(input, other, *, alpha=1, out=None):
    _check_alpha(input, other, alpha)
    return _with_out(_prims.sub(input, other) if _unscaled(alpha) else _prims.sub_scaled(input, other, alpha), out)


def div(input, other, *, rounding_mode=None, out=None):
    if rounding_mode is None:
        return _with_out(_prims.div(input, other), out)
    if rounding_mode not in ("floor", "trunc"):
        raise RuntimeError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
        )
    return _with_out(getattr(_prims, f"div_{rounding_mode}")(input, other), out)


def pow(input, exponent, *, out=None):
    if not isinstance(input, Tensor):  # fastgrad.pow(2, x)
        return _with_out(_prims.rpow(exponent, input), out)
    return _with_out(_prims.pow(input, exponent), out)


def _number_first(reflected, name, number, tensor):
    """fastgrad.<name>(number, tensor): `reflected` computes number op tensor."""
    result = reflected(tensor, number) if isinstance(tensor, Tensor) else NotImplemented
    if result is NotImplemented:
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {builtins.type(number).__name__}")
    return result


def floor_divide(input, other, *, out=None):
    if not isinstance(input, Tensor):
        return _with_out(_number_first(_prims.rfloor_divide, "floor_divide", input, other), out)
    return _with_out(_prims.floor_divide(input, other), out)


def remainder(input, other, *, out=None):
    if not isinstance(input, Tensor):
        return _with_out(_number_first(_prims.rremainder, "remainder", input, other), out)
    return _with_out(_prims.remainder(input, other), out)


def _bitwise_form(name):
    """fastgrad.<name>(input, other) for & | ^; commutative, so a number may come first."""
    primitive = getattr(_prims, name)

    def op(input, other, *, out=None):
        if not isinstance(input, Tensor) and isinstance(other, Tensor):
            input, other = other, input
        return _with_out(primitive(input, other), out)

    op.__name__ = name
    return op


bitwise_and, bitwise_or, bitwise_xor = map(_bitwise_form, ["bitwise_and", "bitwise_or", "bitwise_xor"])


def _logical_form(name, bitwise):
    """fastgrad.logical_<op>(input, other): the bitwise op of the operands' truth values (tensors only)."""

    def op(input, other, *, out=None):
        if not isinstance(other, Tensor):
            raise TypeError(
                f"{name}(): argument 'other' (position 2) must be Tensor, not {builtins.type(other).__name__}"
            )
        return _with_out(bitwise(_prims.to_dtype(input, bool_), _prims.to_dtype(other, bool_)), out)

    op.__name__ = name
    return op


logical_and = _logical_form("logical_and", _prims.bitwise_and)
logical_or = _logical_form("logical_or", _prims.bitwise_or)
logical_xor = _logical_form("logical_xor", _prims.bitwise_xor)


def logical_not(input, *, out=None):
    return _with_out(_prims.bitwise_not(_prims.to_dtype(input, bool_)), out)


# ---- elementwise math (issue 13): compositions
def square(input, *, out=None):
    return _with_out(_prims.pow(input, 2), out)  # as PyTorch's: PowBackward0, and int64 for bool


def square_(input):
    return input.pow_(2)


# Predicates of the values (bool results, no gradient); integers and bools are always finite.
def isnan(input):
    return input != input


def isposinf(input, *, out=None):
    return _with_out(input == math.inf, out)


def isneginf(input, *, out=None):
    return _with_out(input == -math.inf, out)


def isinf(input):
    return logical_or(isposinf(input), isneginf(input))


def isfinite(input):
    return logical_not(logical_or(isnan(input), isinf(input)))


def isreal(input):
    return _prims.full(input.shape, True, bool_)  # no complex dtypes: every value is real


def clamp(input, min=None, max=None, *, out=None):
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        for bound in (min, max):
            if bound is not None and not isinstance(bound, Tensor):
                raise TypeError(
                    "clamp(): min and max must both be tensors or both be numbers, "
                    f"got {builtins.type(min).__name__} and {builtins.type(max).__name__}"
                )
        return _with_out(_prims.clamp_tensor(input, min, max), out)
    return _with_out(_prims.clamp(input, min, max), out)


def where(condition, input, other):
    return _prims.where(condition, input, other)


def where_method(self, condition, other):
    return _prims.where(condition, self, other)


def _all(condition):
    """Whether every element of a bool tensor is true (so for an empty one)."""
    return _prims.sum(condition, [], False, None).item() == condition.numel()


def equal(input, other):
    return input.shape == other.shape and _all(input == other)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return _all(_prims.isclose(input, other, rtol, atol, equal_nan))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    if isinstance(other, Tensor) and input.dtype is not other.dtype:  # no type promotion, as PyTorch
        raise RuntimeError(f"{SCALAR_TYPE_NAME[input.dtype]} did not match {SCALAR_TYPE_NAME[other.dtype]}")
    return _prims.isclose(input, other, rtol, atol, equal_nan)


# ---- in place


def add_(self, other, *, alpha=1):
    _check_alpha(self, other, alpha)
    return _prims.add_(self, other) if _unscaled(alpha) else _prims.add_scaled_(self, other, alpha)


def sub_(self, other, *, alpha=1):
    _check_alpha(self, other, alpha)
    return _prims.sub_(self, other) if _unscaled(alpha) else _prims.sub_scaled_(self, other, alpha)


def copy_(self, src, non_blocking=False):
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' must be Tensor, not {builtins.type(src).__name__}")
    return _prims.copy_(self, src)


# ---- reductions


def mean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    if keepdim is not False and keepdim is not True:
        _not_bool("mean", "keepdim", keepdim)
    if dtype is not None:
        input = _prims.to_dtype(input, dtype)
    return _with_out(_prims.mean(input, _dims(dim), keepdim), out)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    if keepdim is not False and keepdim is not True:
        _not_bool("prod", "keepdim", keepdim)
    if dtype is not None:
        input = _prims.to_dtype(input, dtype)
    return _prims.prod(input, dim, keepdim)


def _check_unbiased_keepdim(op, unbiased, keepdim):
    if unbiased is not None and unbiased is not False and unbiased is not True:
        _not_bool(op, "unbiased", unbiased)
    if keepdim is not False and keepdim is not True:
        _not_bool(op, "keepdim", keepdim)


def _correction(dim, unbiased, correction):
    """var/std accept var(dim, unbiased, keepdim), var(unbiased) and var(dim, correction=c)."""
    if isinstance(dim, builtins.bool):
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, correction


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    _check_unbiased_keepdim("var", unbiased, keepdim)
    dim, correction = _correction(dim, unbiased, correction)
    return _prims.var(input, _dims(dim), builtins.float(correction), keepdim)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    _check_unbiased_keepdim("std", unbiased, keepdim)
    dim, correction = _correction(dim, unbiased, correction)
    return _prims.std(input, _dims(dim), builtins.float(correction), keepdim)


def _extreme(name, elementwise):
    """max / min: over all elements, along a dim (values and indices), or elementwise with a tensor."""
    over_all, over_dim = getattr(_prims, f"{name}_all"), getattr(_prims, f"{name}_dim")
    result = getattr(return_types, name)

    def extreme(input, dim=None, keepdim=False, *, out=None):
        if isinstance(dim, Tensor):
            return _with_out(elementwise(input, dim), out)
        if dim is None:
            return over_all(input)
        if keepdim is not False and keepdim is not True:
            _not_bool(name, "keepdim", keepdim)
        return result(over_dim(input, _int_argument(dim, name, "dim"), keepdim))

    extreme.__name__ = extreme.__qualname__ = name
    return extreme


max, min = _extreme("max", _prims.maximum), _extreme("min", _prims.minimum)


# ---- sorting and selection: each row along `dim` ordered with NaN largest, equal values in PyTorch's CPU order


def sort(input, dim=-1, descending=False, *, stable=None):
    """`stable` given (even False) is PyTorch's sort.stable overload, shown as SortBackward1."""
    if descending is not False and descending is not True:
        _not_bool("sort", "descending", descending)
    if stable is not None and stable is not False and stable is not True:
        _not_bool("sort", "stable", stable)
    return return_types.sort(_prims.sort(input, _int_argument(dim, "sort", "dim"), descending, stable))


def msort(input, *, out=None):
    """The values of sort along dim 0 (SortBackward0, as PyTorch's msort)."""
    return _with_out(_prims.sort(input, 0, False, None)[0], out)


def argsort(input, dim=-1, descending=False, *, stable=False):
    if descending is not False and descending is not True:
        _not_bool("argsort", "descending", descending)
    if stable is not False and stable is not True:
        _not_bool("argsort", "stable", stable)
    return _prims.argsort(input, _int_argument(dim, "argsort", "dim"), descending, stable)


def topk(input, k, dim=-1, largest=True, sorted=True):
    """sorted=False: PyTorch's documentation leaves the order unspecified; its CPU order is followed."""
    if largest is not False and largest is not True:
        _not_bool("topk", "largest", largest)
    if sorted is not False and sorted is not True:
        _not_bool("topk", "sorted", sorted)
    k = _int_argument(k, "topk", "k", 2)
    return return_types.topk(_prims.topk(input, k, _int_argument(dim, "topk", "dim"), largest, sorted))


def kthvalue(input, k, dim=-1, keepdim=False):
    if keepdim is not False and keepdim is not True:
        _not_bool("kthvalue", "keepdim", keepdim)
    k = _int_argument(k, "kthvalue", "k", 2)
    return return_types.kthvalue(_prims.kthvalue(input, k, _int_argument(dim, "kthvalue", "dim"), keepdim))


def median(input, dim=None, keepdim=False):
    """The lower median: of all elements (a tensor), or along `dim` (values and indices)."""
    if keepdim is not False and keepdim is not True:
        _not_bool("median", "keepdim", keepdim)
    if dim is None:
        return _prims.median_all(input)
    return return_types.median(_prims.median_dim(input, _int_argument(dim, "median", "dim"), keepdim))


def mode(input, dim=-1, keepdim=False):
    if keepdim is not False and keepdim is not True:
        _not_bool("mode", "keepdim", keepdim)
    return return_types.mode(_prims.mode(input, _int_argument(dim, "mode", "dim"), keepdim))


def cummax(input, dim):
    return return_types.cummax(_prims.cummax(input, _index(dim)))


def cummin(input, dim):
    return return_types.cummin(_prims.cummin(input, _index(dim)))


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """PyTorch's torch.norm: a vector norm, except p='fro' over more than two dims and p='nuc', which
    PyTorch hands to matrix_norm."""
    if keepdim is not False and keepdim is not True:
        _not_bool("norm", "keepdim", keepdim)
    dims = _dims(dim)
    if isinstance(p, str) and not (p == "fro" and len(dims) <= 2):
        dims = dims or list(builtins.range(input.dim()))
        _check_matrix_norm(input, p, dims)
        from . import linalg  # (which imports this module)

        return linalg.matrix_norm(input, p, dims, keepdim, dtype=dtype)  # 'nuc': the singular values' sum
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
            f"{SCALAR_TYPE_NAME[input.dtype]}"
        )
    if dtype is not None:
        if not dtype.is_floating_point:
            raise RuntimeError(
                f"linalg.vector_norm: dtype should be floating point or complex, but got {SCALAR_TYPE_NAME[dtype]}"
            )
        input = _prims.to_dtype(input, dtype)
    return _prims.norm(input, 2.0 if p in ("fro", None) else builtins.float(p), dims, keepdim)


def _check_matrix_norm(input, p, dims):
    """linalg.matrix_norm's checks, in its order."""
    if p not in ("fro", "nuc"):
        raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")
    if input.dim() < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            "linalg.matrix_norm: Expected a floating point or complex tensor as input. Got "
            f"{SCALAR_TYPE_NAME[input.dtype]}"
        )
    if len(dims) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dims))}")
    if _wrap_dim(dims[0], input.dim()) == _wrap_dim(dims[1], input.dim()):
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dims[0]}, {dims[1]})")


# ---- softmax: fused, numerically stable kernels. `dtype` converts the input first (ToCopyBackward0 shows).


def softmax(input, dim, dtype=None):
    if dtype is not None:
        input = _prims.to_dtype(input, dtype)
    return _prims.softmax(input, dim if dim.__class__ is int else _int_argument(dim, "softmax", "dim"))


def log_softmax(input, dim, dtype=None):
    if dtype is not None:
        input = _prims.to_dtype(input, dtype)
    return _prims.log_softmax(input, dim if dim.__class__ is int else _int_argument(dim, "log_softmax", "dim"))


# ---- shapes


def view_as(self, other):
    return _prims.view(self, list(other.shape))


def reshape_as(self, other):
    return _prims.reshape(self, list(other.shape))


def expand_as(self, other):
    return _prims.expand(self, list(other.shape))


def permute(self, *dims):
    if not dims:
        raise TypeError('permute() missing 1 required positional arguments: "dims"')
    return _prims.permute(self, _sizes(dims, "dims"))


def permute_function(input, dims):
    """fastgrad.permute(x, (1, 0)) takes the dims as one argument."""
    return permute(input, dims)


def squeeze(input, dim=None):
    """A sequence of dims, even of one, is PyTorch's squeeze.dims overload (SqueezeBackward2)."""
    return _prims.squeeze(input, None if dim is None else _dims(dim), isinstance(dim, (tuple, list)))


# ---- in-place shape ops of issue 13 (t_, transpose_ and unsqueeze_ are primitives)


def squeeze_(self, dim=None):
    return _prims.squeeze_(self, None if dim is None else _dims(dim), isinstance(dim, (tuple, list)))


def fill_diagonal_(self, fill_value, wrap=False):
    """As PyTorch's: fills the diagonal that steps through all dims at once (which must then be of
    one length beyond 2-d). With wrap, a tall matrix's diagonal goes on in memory after a skipped
    row, so it restarts every width + 1 rows; where those rows cannot be read flat, the only
    restart that stays inside the tensor's own elements is the diagonal below the first block."""
    if not isinstance(wrap, builtins.bool):
        raise TypeError(
            f"fill_diagonal_(): argument 'wrap' (position 2) must be bool, not {builtins.type(wrap).__name__}"
        )
    if self.dim() < 2:
        raise RuntimeError("dimensions must larger than 1")
    height, width = self.shape[0], self.shape[1]
    if self.dim() > 2 and builtins.any(size != height for size in self.shape[1:]):
        raise RuntimeError("all dimensions of input must be of equal length")
    diagonal = self
    while diagonal.dim() > 1:
        diagonal = diagonal.diagonal(0, 0, 1)
    diagonal.fill_(fill_value)
    if wrap and self.dim() == 2 and height > width + 1:
        below = self[width + 1 :]
        (below.view(-1)[:: width + 1] if below.is_contiguous() else below.diagonal()).fill_(fill_value)
    return self


def _tensor_input(input, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {builtins.type(input).__name__}")
    return input


def numel(input):
    return _tensor_input(input, "numel").numel()


def detach(input):
    return _tensor_input(input, "detach").detach()


def detach_(input):
    return _tensor_input(input, "detach_").detach_()


def fill(input, value):
    """torch.fill, out of place: a filled copy, through which the gradient reaches `value` (a 0-dim
    tensor) and not `input`, as PyTorch's. Its node is fill_'s (FillBackward2/3, after CloneBackward0)
    where PyTorch records FillBackward0/1: same values and gradients."""
    return _prims.clone(input).fill_(value)


def is_tensor(obj):
    return isinstance(obj, Tensor)


# ---- composed from the ops above


def is_floating_point(input):
    return _tensor_input(input, "is_floating_point").dtype.is_floating_point


def is_complex(input):
    _tensor_input(input, "is_complex")
    return False  # no complex dtypes


def is_nonzero(input):
    return builtins.bool(_tensor_input(input, "is_nonzero"))


def is_signed(input):
    return input.dtype.is_signed


def split(tensor, split_size_or_sections, dim=0):
    ndim = tensor.dim()  # once, and the shape read as a tuple: a model's attention splits on every call
    if ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    dim = _wrap_dim(_index(dim), ndim)
    length = tuple.__getitem__(tensor.shape, dim)
    if isinstance(split_size_or_sections, (list, tuple)):
        sections = [_index(s) for s in split_size_or_sections]
        if builtins.sum(sections) != length or builtins.any(s < 0 for s in sections):
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {length} (input tensor's size "
                f"at dimension {dim}), but got split_sizes={sections}"
            )
        with_sizes = True
    else:
        size = _index(split_size_or_sections)
        if size < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got split_size={size}")
        if size == 0 and length != 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {length}")
        # whole parts of `size`, then the rest (an empty dim split by 0: one empty part)
        sections = ([size] * (length // size) + ([length % size] if length % size else []) if size else []) or [0]
        with_sizes = False
    return _prims.split_with_sizes(tensor, sections, dim, with_sizes)


def chunk(input, chunks, dim=0):
    chunks = _index(chunks)
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    if input.dim() == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    length = input.shape[_wrap_dim(_index(dim), input.dim())]
    return split(input, -(-length // chunks) if length else [0] * chunks, dim)


def masked_fill(input, mask, value):
    if not isinstance(mask, Tensor):
        raise TypeError(f"masked_fill(): argument 'mask' must be Tensor, not {builtins.type(mask).__name__}")
    if mask.dtype is not bool_:
        c_type = C_TYPE_NAME[mask.dtype]
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {c_type}")
    if value.__class__ is builtins.float and input.dtype is float32:
        # where rounds the scalar to float32 as full would: one crossing for three (per token in sampling).
        # Not float64: where takes a Python float as a float32 value (1e300 becomes inf; PyTorch's does not)
        return _prims.where(mask, value, input)
    fill = value if isinstance(value, Tensor) else _prims.full([], value, input.dtype)
    return _prims.where(mask, _prims.to_dtype(fill, input.dtype), input)


def masked_fill_(self, mask, value):
    # An integer self takes no gradient: filled from its detached values, its history (after an eq_,
    # see _recorded) does not reach masked_fill, which PyTorch's in-place form does not refuse.
    return self.copy_(masked_fill(self if self.dtype.is_floating_point else self.detach(), mask, value))


def _truth_of(input, result):
    """all/any give bools, except for uint8 input: uint8 0 or 1 (PyTorch's legacy byte masks)."""
    return _prims.to_dtype(result, uint8) if input.dtype is uint8 else result


def all(input, dim=None, keepdim=False):
    if keepdim is not False and keepdim is not True:
        _not_bool("all", "keepdim", keepdim)
    nonzero = _prims.to_dtype(_prims.ne(input, 0), int64)
    if dim is None:
        return _truth_of(input, _prims.eq(_prims.sum(nonzero, [], False, None), input.numel()))
    dim = _wrap_dim(_index(dim), input.dim())
    return _truth_of(
        input, _prims.eq(_prims.sum(nonzero, [dim], keepdim, None), input.shape[dim] if input.dim() else 1)
    )


def any(input, dim=None, keepdim=False):
    if keepdim is not False and keepdim is not True:
        _not_bool("any", "keepdim", keepdim)
    nonzero = _prims.to_dtype(_prims.ne(input, 0), int64)
    return _truth_of(input, _prims.gt(_prims.sum(nonzero, _dims(dim), keepdim, None), 0))


# ---- scatter/gather/index family (issue 13): over the backend's along-dim primitives gather and
# scatter_ (C++ kernels in the core), which check shapes and bounds and name the node as PyTorch's op


def _int64_index(index):
    """An index tensor as the int64 one the kernels read (PyTorch takes int32 too, where it says so)."""
    return index if index.dtype is int64 else _prims.to_dtype(index, int64)


def gather(input, dim, index, *, sparse_grad=False, out=None):
    if not isinstance(index, Tensor) or index.dtype not in (int64, int32):
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    if builtins.max(input.dim(), 1) != builtins.max(index.dim(), 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    dim = _wrap_dim(_index(dim), input.dim())
    return _with_out(_prims.gather(input, dim, _int64_index(index), "GatherBackward0", input), out)


def _index_along(index, dim, input):
    """A vector `index` (positions along `dim`) as the along-dim index over `input`'s slices: the
    vector laid along dim and expanded over the other dims (viewed, not copied)."""
    if input.dim() == 0:  # a 0-d tensor is one slice: every position names it
        return index.reshape([] if index.numel() == 1 else [-1])
    shape = [1] * input.dim()
    shape[dim] = -1
    sizes = list(input.shape)
    sizes[dim] = index.numel()
    return index.reshape(shape).expand(sizes)


def index_select(input, dim, index, *, out=None):
    if not isinstance(index, Tensor) or index.dtype not in (int64, int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if index.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    index = _int64_index(index)
    dim = _wrap_dim(_index(dim), input.dim())
    if input.dim() == 0 and index.numel() != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {index.numel()} value(s)")
    if index.numel() and input.dim() and input.shape[dim] == 0:
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    _prims.check_index_range(index, 0, (input.shape[dim] if input.dim() else 1) - 1, "index out of range in self")
    index = _index_along(index.reshape(-1), dim, input)
    return _with_out(_prims.gather(input, dim, index, "IndexSelectBackward0"), out)


def _scatter_source(self, index, src, value, op):
    """scatter's src tensor, or its value as a tensor of self's dtype the shape of index."""
    if isinstance(src, Tensor):
        if value is not None:
            raise TypeError(f"{op}() got multiple values for argument 'value'")
        return src, "ScatterBackward0"
    fill = src if value is None else value
    if fill is None:
        raise TypeError(f"{op}() missing 1 required positional argument: 'src' or 'value'")
    return _prims.full(list(index.shape), fill, self.dtype), "ScatterBackward1"


def _scatter(self, dim, index, src, value, reduce, op):
    """scatter_ into self (`op`: the Python op's name, scatter or scatter_)."""
    if not isinstance(index, Tensor) or index.dtype not in (int64, int32):
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if reduce is not None and reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    if reduce is not None and isinstance(src, Tensor):
        warnings.warn(
            "The reduce argument of torch.scatter with Tensor src is deprecated and will be removed in a future "
            "PyTorch release. Use torch.scatter_reduce instead for more reduction options.",
            UserWarning,
            stacklevel=3,
        )
    src, name = _scatter_source(self, index, src, value, op)
    # with reduce=, PyTorch records a node that refuses backward, naming the op
    index = _int64_index(index)
    return _prims.scatter_(self, _index(dim), index, src, reduce or "", f"aten::{op}" if reduce else name)


def scatter_(self, dim, index, src=None, value=None, *, reduce=None):
    return _scatter(self, dim, index, src, value, reduce, "scatter_")


def scatter(input, dim, index, src=None, value=None, *, reduce=None, out=None):
    return _with_out(_scatter(_prims.clone(input), dim, index, src, value, reduce, "scatter"), out)


def scatter_add_(self, dim, index, src):
    if not isinstance(index, Tensor) or index.dtype not in (int64, int32):
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    return _prims.scatter_(self, _index(dim), _int64_index(index), src, "add", "ScatterAddBackward0")


def scatter_add(input, dim, index, src, *, out=None):
    return _with_out(scatter_add_(_prims.clone(input), dim, index, src), out)


# -- scatter_reduce, put and masked_scatter (issue 13, scatter family): the values come from the
# kernels on detached tensors, the one node (PyTorch's name, what its node saves) from _recorded, with
# a backward in differentiable ops (PyTorch's formulas: FunctionsManual.cpp). The in-place forms copy
# the result back into self.

# the kernel's reduction for each of scatter_reduce's; PyTorch's forward also takes max and min (not
# its backward)
_SCATTER_REDUCE_KERNEL = {
    "sum": "add",
    "mean": "add",
    "prod": "multiply",
    "amax": "amax",
    "amin": "amin",
    "max": "amax",
    "min": "amin",
}


def _scatter_reduce_start(reduce, dtype):
    """What include_self=False puts where src lands before reducing: the reduction's identity."""
    if reduce in ("sum", "mean", "prod"):
        return builtins.int(reduce == "prod")
    smallest = _SCATTER_REDUCE_KERNEL[reduce] == "amin"
    if dtype is bool_:
        return smallest
    if dtype.is_floating_point:
        return math.inf if smallest else -math.inf
    limits = iinfo(dtype)
    return limits.max if smallest else limits.min


def _scatter_reduce_values(input, dim, index, src, reduce, include_self):
    """scatter_reduce's result, without history (index: int64)."""
    result = _prims.clone(input.detach())
    if not include_self:
        start = _prims.full(list(index.shape), _scatter_reduce_start(reduce, input.dtype), input.dtype)
        _prims.scatter_(result, dim, index, start, "", "ScatterBackward0")
    _prims.scatter_(result, dim, index, src.detach(), _SCATTER_REDUCE_KERNEL[reduce], "ScatterAddBackward0")
    if reduce == "mean":
        count = _prims.full(list(input.shape), builtins.int(include_self), input.dtype)
        _prims.scatter_(count, dim, index, _prims.full(list(index.shape), 1, input.dtype), "add", "ScatterAddBackward0")
        count = _prims.where(_prims.eq(count, 0), _prims.full([], 1, input.dtype), count)
        result = _prims.div(result, count) if input.dtype.is_floating_point else _prims.div_floor(result, count)
    return result


def _scatter_reduce_backward(dim, reduce, include_self):
    """ScatterReduceBackward0's gradients for (self, src) from grad, self, src, index and result."""

    def backward(grads, self, src, index, result):
        grad, index = grads[0], _int64_index(index)
        if reduce == "sum":
            grad_self, grad_src = grad, grad.gather(dim, index)
        elif reduce == "mean":
            n = _prims.full(list(self.shape), builtins.int(include_self), self.dtype)
            n = n.scatter_add(dim, index, _prims.full(list(src.shape), 1, self.dtype))
            n = n.masked_fill(n == 0, 1)
            grad_self, grad_src = grad / n, grad.gather(dim, index) / n.gather(dim, index)
        elif reduce == "prod":
            # a zero's gradient is the product of the others: computed with the zero taken as 1
            masked_self = self.masked_fill(self == 0, 1)
            grad_self = (
                grad * masked_self.scatter_reduce(dim, index, src, reduce, include_self=include_self) / masked_self
            )
            src_zero = src == 0
            zeros_at = _prims.full(list(self.shape), 0, self.dtype).scatter_add(dim, index, src_zero.to(self.dtype))
            single_zero = src_zero & (zeros_at.gather(dim, index) == 1)
            masked_src_result = self.scatter_reduce(
                dim, index, src.masked_fill(single_zero, 1), reduce, include_self=include_self
            )
            grad_src = where(
                single_zero,
                (grad * masked_src_result).gather(dim, index),
                (grad * result).gather(dim, index) / src.masked_fill(src_zero, 1),
            )
        elif reduce in ("amax", "amin"):  # shared evenly among the elements equal to the result
            value = result.gather(dim, index)
            self_is_result, src_is_result = self == result, src == value
            count = self_is_result.to(self.dtype).scatter_add(dim, index, src_is_result.to(self.dtype))
            grad_share = grad / count
            grad_self, grad_src = self_is_result * grad_share, src_is_result * grad_share.gather(dim, index)
        else:
            raise RuntimeError(
                f"Expected 'reduce' to be one of 'sum', 'prod', 'mean', 'amax', 'amin' but got {reduce}."
            )
        if not include_self:
            grad_self = grad_self.scatter(dim, index, 0)
        return [grad_self, grad_src]

    return backward


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True, out=None):
    if not isinstance(index, Tensor) or index.dtype not in (int64, int32):
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if reduce not in _SCATTER_REDUCE_KERNEL:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if src.dtype is not input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if reduce == "mean" and input.dtype is bool_:
        raise NotImplementedError("\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'")
    dim = _wrap_dim(_index(dim), input.dim())
    result = _scatter_reduce_values(input, dim, _int64_index(index), src, reduce, include_self)
    backward = _scatter_reduce_backward(dim, reduce, include_self)
    saved = [input, src, index, result]
    return _with_out(_recorded("ScatterReduceBackward0", [input, src], [result], saved, backward)[0], out)


def scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
    return _in_place(scatter_reduce, self, dim, index, src, reduce, include_self=include_self, _elementwise=False)


def put(input, index, source, accumulate=False):
    """input with source's elements written (or added) at positions `index` of its flattened form."""
    if not isinstance(index, Tensor) or index.dtype is not int64:
        kind = SCALAR_TYPE_NAME[index.dtype] if isinstance(index, Tensor) else builtins.type(index).__name__
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {kind}")
    if source.dtype is not input.dtype:
        raise RuntimeError(
            "put_(): self and source expected to have the same dtype, but got self.dtype = "
            f"{SCALAR_TYPE_NAME[input.dtype]} and source.dtype = {SCALAR_TYPE_NAME[source.dtype]}"
        )
    if index.numel() != source.numel():
        raise IndexError(
            "put_(): Expected source and index to have the same number of elements, but got source.numel() = "
            f"{source.numel()}, index.numel() = {index.numel()}"
        )
    n = input.numel()
    if index.numel() and n == 0:
        raise IndexError("put_(): Tried to put elements into an empty tensor")
    _check_flat_index(index, n)
    result = _prims.clone(input.detach()).contiguous()  # written through a flat view: the result is no view
    _prims.index_put_(result.view(-1), [index.reshape(-1)], source.detach().reshape(-1), accumulate)

    def backward(grads, index, source):
        grad = grads[0]
        grad_input = grad if accumulate else grad.put(index, _prims.full(list(source.shape), 0, grad.dtype))
        return [grad_input, grad.take(index).reshape(source.shape)]

    return _recorded("PutBackward0", [input, source], [result], [index, source], backward)[0]


def put_(self, index, source, accumulate=False):
    return _in_place(put, self, index, source, accumulate, _elementwise=False)


def masked_scatter(input, mask, source):
    """input (broadcast with mask) with source's leading elements written, in order, where mask is true."""
    if not isinstance(source, Tensor):
        kind = builtins.type(source).__name__
        raise TypeError(f"masked_scatter(): argument 'source' (position 2) must be Tensor, not {kind}")
    if mask.dtype is not bool_:
        raise RuntimeError(
            f"masked_scatter_ only supports boolean masks, but got mask with dtype {SCALAR_TYPE_NAME[mask.dtype]}"
        )
    if source.dtype is not input.dtype:
        raise RuntimeError(
            "masked_scatter: expected self and source to have same dtypes but got"
            f"{SCALAR_TYPE_NAME[input.dtype]} and {SCALAR_TYPE_NAME[source.dtype]}"
        )
    shape = list(_meta.broadcast_shapes(mask.shape, input.shape))  # in the order of PyTorch's error
    positions = _prims.arange(0, math.prod(shape), 1, int64)[_prims.expand(mask, shape).reshape(-1)]
    if positions.numel() > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    result = _prims.clone(_prims.expand(input.detach(), shape)).contiguous()  # no view (written through one)
    _prims.index_put_(result.view(-1), [positions], source.detach().reshape(-1)[: positions.numel()], False)

    def backward(grads, mask):
        grad = grads[0]
        selected = grad.masked_select(mask)  # source's gradient: its unused tail gets zeros
        unused = _prims.full([source.numel() - selected.numel()], 0, grad.dtype)
        grad_source = _prims.cat([selected, unused], 0).view(source.shape)
        return [_sum_to(grad.masked_fill(mask, 0), input.shape), grad_source]

    return _recorded("MaskedScatterBackward0", [input, source], [result], [mask], backward)[0]


def masked_scatter_(self, mask, source):
    if isinstance(mask, Tensor) and mask.dtype is bool_:
        mask = _prims.expand(mask, list(self.shape))  # as PyTorch: mask takes self's shape, not the other way
    return _in_place(masked_scatter, self, mask, source, _elementwise=False)


def index_add_(self, dim, index, source, *, alpha=1):
    if not isinstance(index, Tensor) or index.dtype not in (int64, int32):
        kind = SCALAR_TYPE_NAME[index.dtype] if isinstance(index, Tensor) else builtins.type(index).__name__
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: {kind}")
    if index.dim() > 1:
        raise IndexError(
            f"index_add_(): Index is supposed to be a vector, but got dim: {index.dim()} with type: "
            f"{SCALAR_TYPE_NAME[index.dtype]} and size: {list(index.shape)}"
        )
    index = _int64_index(index)
    dim = _wrap_dim(_index(dim), self.dim())
    if source.dtype is not self.dtype:
        raise RuntimeError(
            f"index_add_(): self ({SCALAR_TYPE_NAME[self.dtype]}) and source ({SCALAR_TYPE_NAME[source.dtype]}) "
            "must have the same scalar type"
        )
    if source.dim() != self.dim() or builtins.any(
        a != b for d, (a, b) in enumerate(zip(self.shape, source.shape)) if d != dim
    ):
        raise RuntimeError(
            "source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = "
            f"{list(self.shape)} source.shape = {list(source.shape)}"
        )
    if index.numel() != (source.shape[dim] if source.dim() else 1):
        raise RuntimeError(
            f"index_add_(): Number of indices ({index.numel()}) should be equal to source.size(dim): "
            f"({source.shape[dim] if source.dim() else 1}), for dim: {dim}"
        )
    if self.dim() <= 1:  # PyTorch's 1-d path (index_select's check)
        _prims.check_index_range(index, 0, (self.shape[0] if self.dim() else 1) - 1, "index out of range in self")
    if not self.dtype.is_floating_point:
        alpha = builtins.int(alpha)  # as PyTorch converts it for an integer kernel (towards zero)
    _check_alpha(self, source, alpha)
    if alpha != 1:  # source * alpha, then added: PyTorch's index_add rounds twice
        source = _prims.to_dtype(source * alpha, _prims.result_type(self, source))
    return _prims.scatter_(self, dim, _index_along(index.reshape(-1), dim, source), source, "add", "IndexAddBackward0")


def index_add(input, dim, index, source, *, alpha=1, out=None):
    return _with_out(index_add_(_prims.clone(input), dim, index, source, alpha=alpha), out)


def index_copy_(self, dim, index, source):
    if not isinstance(index, Tensor) or index.dtype is not int64:
        kind = SCALAR_TYPE_NAME[index.dtype] if isinstance(index, Tensor) else builtins.type(index).__name__
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got {kind}")
    if index.dim() > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.dim()})")
    dim = _wrap_dim(_index(dim), self.dim())
    if source.dtype is not self.dtype:
        raise RuntimeError(
            "index_copy_(): self and source expected to have the same dtype, but got (self) "
            f"{SCALAR_TYPE_NAME[self.dtype]} and (source) {SCALAR_TYPE_NAME[source.dtype]}"
        )
    slices = [n for d, n in enumerate(self.shape) if d != dim], [n for d, n in enumerate(source.shape) if d != dim]
    for d, (ours, theirs) in enumerate(zip(*slices)):
        if ours != theirs:
            raise RuntimeError(
                "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: "
                f"{ours} at dimension {d} and source slice shape: {theirs} at dimension {d}."
            )
    if source.dim() != self.dim() or index.numel() != (source.shape[dim] if source.dim() else 1):
        raise IndexError(
            f"index_copy_(): Number of indices ({index.numel()}) should be equal to source.size(dim) "
            f"({source.shape[dim] if source.dim() else 1})"
        )
    size = self.shape[dim] if self.dim() else 1
    message = f"index_copy_(): index {{}} is out of bounds for dimension {dim} with size {size}"
    _prims.check_index_range(index, 0, size - 1, message)
    return _prims.scatter_(self, dim, _index_along(index.reshape(-1), dim, source), source, "", "IndexCopyBackward0")


def index_copy(input, dim, index, source, *, out=None):
    return _with_out(index_copy_(_prims.clone(input), dim, index, source), out)


def index_fill_(self, dim, index, value):
    if not isinstance(index, Tensor) or index.dtype is not int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if index.dim() > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    dim = _wrap_dim(_index(dim), self.dim())
    if isinstance(value, Tensor) and value.dim() != 0:
        raise RuntimeError(
            f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with {value.dim()} dimension(s)."
        )
    size = self.shape[dim] if self.dim() else 1
    if self.numel():  # as PyTorch: no check when nothing is filled
        _prims.check_index_range(
            index, -size, size - 1, f"index {{}} is out of bounds for dimension {dim} with size {size}"
        )
    index = _prims.remainder(index.reshape(-1), size) if size else index.reshape(-1)  # negative entries count back
    index = _index_along(index, dim, self)
    if isinstance(value, Tensor):
        fill, name = _prims.expand(_prims.to_dtype(value, self.dtype), list(index.shape)), "IndexFillBackward1"
    else:
        fill, name = _prims.full(list(index.shape), value, self.dtype), "IndexFillBackward0"
    return _prims.scatter_(self, dim, index, fill, "", name)


def index_fill(input, dim, index, value):
    return index_fill_(_prims.clone(input), dim, index, value)


def _wrapped_positions(index, size):
    """Negative positions counted from the end, as take and take_along_dim read them."""
    return _prims.where(index < 0, index + size, index)


def nonzero(input, *, as_tuple=False, out=None):
    """The coordinates of the nonzero elements (a 0-d tensor as one element of a 1-d one), each dim's
    read through the mask from a grid of that dim's positions."""
    shape = list(input.shape) or [1]
    mask = _prims.ne(input, 0).reshape(shape)
    coords = []
    for d, n in enumerate(shape):
        grid = _prims.arange(0, n, 1, int64).reshape([-1 if i == d else 1 for i in builtins.range(len(shape))])
        coords.append(grid.expand(shape)[mask])
    if as_tuple:
        return tuple(coords)
    result = _prims.stack(coords, 1)
    return _with_out(result if input.dim() else result[:, :0].contiguous(), out)


def argwhere(input):
    return nonzero(input)


def masked_select(input, mask, *, out=None):
    if not isinstance(mask, Tensor) or mask.dtype is not bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = list(_meta.broadcast_shapes(mask.shape, input.shape))  # in the order of PyTorch's error
    flat_mask = _prims.expand(mask, shape).reshape(-1)
    positions = _prims.arange(0, flat_mask.numel(), 1, int64)[flat_mask]
    values = _prims.expand(input, shape).reshape(-1)
    return _with_out(_prims.gather(values, 0, positions, "MaskedSelectBackward0", input), out)


def _check_flat_index(index, n):
    """take's and put's check: every entry names one of n elements (negative ones counting back)."""
    _prims.check_index_range(index, -n, n - 1, f"out of range: tried to access index {{}} on a tensor of {n} elements.")


def take(input, index, *, out=None):
    if not isinstance(index, Tensor) or index.dtype is not int64:
        kind = SCALAR_TYPE_NAME[index.dtype] if isinstance(index, Tensor) else builtins.type(index).__name__
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {kind}")
    n = input.numel()
    _check_flat_index(index, n)
    # input's elements along dim 0, repeated along index's other dims: a gather along 0 reads input.flat[index]
    values = input.reshape([n] + [1] * builtins.max(index.dim() - 1, 0)).expand([n] + list(index.shape[1:]))
    return _with_out(_prims.gather(values, 0, _wrapped_positions(index, n), "TakeBackward0", input), out)


def take_along_dim(input, indices, dim=None, *, out=None):
    if dim is None:  # as PyTorch: a gather of the flattened tensors (views, or its error), int32 indices too
        return _with_out(gather(input.view(-1), 0, indices.view(-1)), out)
    if not isinstance(indices, Tensor) or indices.dtype is not int64:
        kind = SCALAR_TYPE_NAME[indices.dtype] if isinstance(indices, Tensor) else builtins.type(indices).__name__
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got {kind}")
    if input.dim() == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    dim = _wrap_dim(_index(dim), input.dim())
    if input.dim() != indices.dim():
        raise RuntimeError(
            "torch.take_along_dim(): input and indices should have the same number of dimensions, but got "
            f"{input.dim()} dimensions for input, and {indices.dim()} dimensions for indices"
        )
    # the other dims broadcast
    others = [1 if d == dim else n for d, n in enumerate(input.shape)]
    shape = list(_meta.broadcast_shapes(others, [1 if d == dim else n for d, n in enumerate(indices.shape)]))
    values = _prims.expand(input, shape[:dim] + [input.shape[dim]] + shape[dim + 1 :]) if shape else input
    indices = _prims.expand(indices, shape[:dim] + [indices.shape[dim]] + shape[dim + 1 :]) if shape else indices
    size = values.shape[dim] if values.dim() else 1
    return _with_out(_prims.gather(values, dim, _wrapped_positions(indices, size), "GatherBackward0", input), out)


def _index_put(self, indices, values, accumulate, op):
    if not isinstance(indices, (tuple, builtins.list)):
        raise TypeError(
            f"{op}(): argument 'indices' (position 1) must be tuple of Tensors, not {builtins.type(indices).__name__}"
        )
    for i, index in enumerate(indices):
        if not isinstance(index, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {builtins.type(index).__name__}")
    if not isinstance(values, Tensor):
        raise TypeError(f"{op}(): argument 'values' (position 2) must be Tensor, not {builtins.type(values).__name__}")
    return _prims.index_put_(self, builtins.list(indices), values, accumulate)


def index_put_(self, indices, values, accumulate=False):
    return _index_put(self, indices, values, accumulate, "index_put_")


def index_put(input, indices, values, accumulate=False):
    return _index_put(_prims.clone(input), indices, values, accumulate, "index_put")


# ---- reductions and set ops of issue 13 (logsumexp, nansum, aminmax, std_mean, quantile, unique, ...)


def _check_differentiable(outputs):
    """The backends' check_differentiable_output for the outputs (or None) of a node recorded here:
    only an in-place result (_in_place) may be of an integer dtype."""
    for out in outputs:
        if out is not None and not out.dtype.is_floating_point and not _in_place_result.active:
            raise RuntimeError(f"Autograd not support dtype: {SCALAR_TYPE_NAME[out.dtype]}")


def _recorded(name, inputs, outputs, saved, backward):
    """Gives `outputs`, computed from detached inputs, the one node `name` (PyTorch's node of the op)
    when grad mode is on and an input requires grad. backward(grads, *saved) returns a gradient per
    input, from a gradient or None (not reached) per output; written with differentiable ops, it
    gives the node its double backward."""
    if not (_prims.is_grad_enabled() and builtins.any(t.requires_grad for t in inputs)):
        return outputs
    _check_differentiable(outputs)
    if _prims._capturing() and _holds_tensors(backward):
        # a compiled function's replay gives the node's backward the replay's saved tensors, not these
        _prims._capture_abandon(f"the node of {name} (its backward holds tensors of this call)")
    _prims.record_node(lambda grads, node_saved: backward(grads, *node_saved.unpack()), name, inputs, outputs, saved)
    return outputs


def _holds_tensors(fn):
    """Whether Python function `fn` reaches a tensor through its closure and default arguments (and the
    functions, lists, tuples and dicts there)."""
    seen, pending = set(), [fn]
    while pending:
        value = pending.pop()
        if isinstance(value, Tensor):
            return True
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, types.FunctionType):
            for cell in value.__closure__ or ():
                try:
                    pending.append(cell.cell_contents)
                except ValueError:  # a name not bound yet
                    pass
            pending += [*(value.__defaults__ or ()), *(value.__kwdefaults__ or {}).values()]
        elif isinstance(value, (list, tuple)):
            pending += value
        elif isinstance(value, dict):
            pending += value.values()
    return False


def _kept(t, input, dims):
    """A reduction's result (or its gradient) reshaped as if reduced with keepdim=True."""
    mask = _reduced_dims(dims, input.dim())
    return _prims.reshape(t, [1 if m else n for n, m in zip(input.shape, mask)])


def _reduced_dims(dims, ndim):
    """Which of ndim dims `dims` (a list, [] for all) reduces."""
    wrapped = {_wrap_dim(d, ndim) for d in dims}
    return [not dims or d in wrapped for d in builtins.range(ndim)]


def _as_floating(input):
    return input.detach() if input.dtype.is_floating_point else _prims.to_dtype(input, get_default_dtype())


def logsumexp(input, dim, keepdim=False, *, out=None):
    """log(sum(exp(x))) shifted by each block's maximum, so large inputs do not overflow; a block
    whose maximum is infinite is not shifted (a row of -inf gives -inf, as PyTorch)."""
    if keepdim is not False and keepdim is not True:
        _not_bool("logsumexp", "keepdim", keepdim)
    dims, x = _dims(dim), _as_floating(input)
    if x.numel():
        shift = _prims.amax(x, dims, True)
        shift = _prims.where(_prims.eq(_prims.abs(shift), builtins.float("inf")), _prims.full([], 0, x.dtype), shift)
        kept = _prims.add(_prims.log(_prims.sum(_prims.exp(_prims.sub(x, shift)), dims, True, None)), shift)
    else:
        kept = _prims.log(_prims.sum(x, dims, True, None))
    result = _prims.sum(kept, dims, keepdim, None) if not keepdim else kept

    def backward(grads, x, result):
        return [_kept(grads[0], x, dims) * (x - _kept(result, x, dims)).exp()]

    return _with_out(_recorded("LogsumexpBackward0", [input], [result], [input, result], backward)[0], out)


def _isnan(x):
    return _prims.ne(x, x)


def nansum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """sum with NaNs counted as zeros, which get no gradient."""
    if keepdim is not False and keepdim is not True:
        _not_bool("nansum", "keepdim", keepdim)
    dims, x = _dims(dim), input.detach()
    result = _prims.sum(_prims.where(_isnan(x), _prims.full([], 0, x.dtype), x), dims, keepdim, dtype)

    def backward(grads, x):
        return [_kept(grads[0], x, dims) * _prims.eq(x, x)]

    return _with_out(_recorded("NansumBackward0", [input], [result], [input], backward)[0], out)


def nanmean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    if keepdim is not False and keepdim is not True:
        _not_bool("nanmean", "keepdim", keepdim)
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"nanmean(): expected input to have floating point or complex dtype but got {SCALAR_TYPE_NAME[input.dtype]}"
        )
    counted = _prims.sum(_prims.eq(input, input), _dims(dim), keepdim, None)
    return _with_out(nansum(input, dim, keepdim, dtype=dtype) / counted, out)


def count_nonzero(input, dim=None):
    return _prims.sum(_prims.ne(input, 0), _dims(dim), False, None)


def _spread_over_ties(grad, x, result, dims):
    """A min's or max's gradient shared evenly among the elements equal to it (PyTorch's amax rule)."""
    ties = _prims.eq(x, _kept(result, x, dims))
    return _kept(grad, x, dims) * ties / _prims.sum(ties, dims, True, None)


def aminmax(input, *, dim=None, keepdim=False):
    if keepdim is not False and keepdim is not True:
        _not_bool("aminmax", "keepdim", keepdim)
    if dim is None:
        if input.numel() == 0:
            raise RuntimeError(
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."
            )
        dims = []
    else:
        if not isinstance(dim, int) and not isinstance(dim, Tensor):
            raise TypeError(f"aminmax(): argument 'dim' must be int, not {builtins.type(dim).__name__}")
        dims = [_wrap_dim(_index(dim), input.dim())]
        if input.dim() and input.shape[dims[0]] == 0:
            raise IndexError(f"aminmax: Expected reduction dim {dims[0]} to have non-zero size.")
    x = input.detach()
    low, high = _prims.amin(x, dims, keepdim), _prims.amax(x, dims, keepdim)

    def backward(grads, x, low, high):
        parts = [_spread_over_ties(g, x, result, dims) for g, result in zip(grads, (low, high)) if g is not None]
        return [builtins.sum(parts[1:], parts[0])]

    low, high = _recorded("AminmaxBackward0", [input], [low, high], [input, low, high], backward)
    return return_types.aminmax((low, high))


def _welford_mean(x, dims, keepdim):
    """The mean of std_mean / var_mean as PyTorch's running (Welford) mean has it: once that mean is
    infinite the next element makes it nan (inf - inf, or finite - inf), so it is nan wherever an
    element before the last one along the reduced dims is not finite; elsewhere it is the plain mean.
    `dims` reduces at least one element."""
    mean = _prims.mean(x, dims, keepdim)
    finite = (mean - mean) == 0  # a finite mean has only finite elements: then nothing to do
    # (a host read: a compiled function takes the general path, which gives the same values)
    if not _prims._capturing() and _prims.sum(finite, [], False, None).item() == finite.numel():
        return mean
    last = x[tuple(slice(-1, None) if m else slice(None) for m in _reduced_dims(dims, x.dim()))]
    nonfinite_count = _prims.sum((x - x) != 0, dims, True, None)  # x - x is nan where x is inf or nan
    earlier_nonfinite = _prims.reshape(nonfinite_count > ((last - last) != 0), builtins.list(mean.shape))
    return _prims.where(earlier_nonfinite, _prims.full([], math.nan, x.dtype), mean)


def _with_mean(name, input, dim, unbiased, keepdim, correction):
    """std_mean / var_mean: both results from one node, as PyTorch's (a plain tuple)."""
    _check_unbiased_keepdim(name, unbiased, keepdim)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{name} only support floating point and complex dtypes")
    dim, correction = _correction(dim, unbiased, correction)
    dims, x = _dims(dim), input.detach()
    spread = getattr(_prims, name.partition("_")[0])(x, dims, builtins.float(correction), keepdim)
    count = math.prod(n for n, m in zip(input.shape, _reduced_dims(dims, input.dim())) if m)
    mean = _welford_mean(x, dims, keepdim) if count else _prims.mean(x, dims, keepdim)

    def backward(grads, x, *saved_std):
        """PyTorch's std_mean / var_mean backward: a term for each result that a gradient reached."""
        grad_spread, grad_mean = (None if g is None else _kept(g, x, dims) for g in grads)
        parts = [] if grad_mean is None else [_prims.expand(grad_mean / count, list(x.shape))]
        if grad_spread is not None:
            if name == "std_mean":  # through var = std**2, with none where std is 0 (PyTorch's std_backward)
                std = _kept(saved_std[0], x, dims)
                grad_spread = _prims.where(std == 0, _prims.full([], 0, x.dtype), grad_spread / (2 * std))
            freedom = count - correction
            parts.append(grad_spread * (2.0 / freedom if freedom else math.inf) * (x - _prims.mean(x, dims, True)))
        return [builtins.sum(parts[1:], parts[0])]

    saved = [input, spread] if name == "std_mean" else [input]  # as PyTorch's nodes: var_mean's keeps no result
    return tuple(_recorded(f"{name.title().replace('_', '')}Backward0", [input], [spread, mean], saved, backward))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _with_mean("std_mean", input, dim, unbiased, keepdim, correction)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _with_mean("var_mean", input, dim, unbiased, keepdim, correction)


def _norm_backward(grad, x, p, norm, dims):
    """PyTorch's norm_backward: the gradient of the p-norm `norm` of x over `dims` (kept shapes), with
    its limits where elements or the norm are 0; None for p = 0."""
    grad, norm = _kept(grad, x, dims), _kept(norm, x, dims)
    zero = _prims.full([], 0, x.dtype)
    if p == 0:
        return None
    if p == 1:
        return _prims.sign(x) * grad
    if p == 2:
        return grad * _prims.where(norm == 0, zero, x / norm)
    if math.isinf(p):  # split among the elements of largest (smallest) magnitude
        ties = _prims.eq(_prims.abs(x), norm)
        return _prims.sign(x) * (grad / _prims.sum(ties, dims, True, None) * ties)
    if p < 1:
        scaled = _prims.sign(x) * _prims.where(x == 0, zero, _prims.abs(x) ** (p - 1))
        return scaled * grad * norm ** (1 - p)
    scaled = _prims.sign(x) * _prims.abs(x) ** (p - 1) if p < 2 else x * _prims.abs(x) ** (p - 2)
    return scaled * _prims.where(norm == 0, zero, grad / norm ** (p - 1))


def _norm_node(name, inputs, p, dims, keepdim):
    """The p-norm of inputs[0] - inputs[1] (or of the one input) over `dims` as one node `name`, which
    saves its inputs and result as PyTorch's (an input changed in place before backward is an error)."""
    p = builtins.float(p)

    def difference(operands):  # with their graphs in backward: the node's own backward reaches both
        return operands[0] if len(operands) == 1 else operands[0] - operands[1]

    result = _prims.norm(difference([x.detach() for x in inputs]), p, dims, keepdim)

    single = len(inputs) == 1  # backward holds no tensor of this call (a compiled replay's node reads its own)

    def backward(grads, *saved):
        grad = _norm_backward(grads[0], difference(saved[:-1]), p, saved[-1], dims)
        return [grad] if single else [grad, None if grad is None else -grad]

    return _recorded(name, inputs, [result], [*inputs, result], backward)[0]


def dist(input, other, p=2):
    if not isinstance(other, Tensor):
        raise TypeError(f"dist(): argument 'other' (position 2) must be Tensor, not {builtins.type(other).__name__}")
    if not (input.dtype.is_floating_point or other.dtype.is_floating_point):
        raise RuntimeError(
            "norm(): input dtype should be either floating point or complex. Got "
            f"{SCALAR_TYPE_NAME[_prims.result_type(input, other)]} instead."
        )
    return _norm_node("DistBackward0", [input, other], p, [], False)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 - x2 + eps along the last dim of the broadcast shape (PyTorch's at::norm)."""
    innermost = builtins.max(x1.dim(), x2.dim()) - 1
    return _norm_node("NormBackward1", [x1 - x2 + eps], p, [innermost], keepdim)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """PyTorch's: each operand divided by its norm clamped to eps (the clamp is not differentiated)."""
    common = _prims.result_type(x1, x2)
    if not common.is_floating_point:
        raise RuntimeError(
            f"expected common dtype to be floating point, yet common dtype is {SCALAR_TYPE_NAME[common]}"
        )
    x1, x2 = (_prims.to_dtype(x, common) if not x.dtype.is_floating_point else x for x in (x1, x2))
    shape = list(_prims.broadcast_shapes(x1.shape, x2.shape))
    x1, x2 = (x if list(x.shape) == shape else _prims.expand(x, shape) for x in (x1, x2))
    norms = [norm(x, 2, dim, True).clone() for x in (x1, x2)]
    with no_grad():
        for n in norms:
            _prims.clamp_(n, eps, None)
    return ((x1 / norms[0]) * (x2 / norms[1])).sum(dim)


# searching, counting and unique: positions and counts (C++ kernels with reference twins), no gradient


def _without_derivative(results, inputs, name, error):
    """`results` with PyTorch's node for an op that has no derivative: going back through it raises error()."""

    def backward(grads):
        raise error()

    return _recorded(name, [t for t in inputs if isinstance(t, Tensor)], results, [], backward)


def _check_position_dtype(out_int32):
    """searchsorted and bucketize give int64 positions, or int32 ones for out_int32=True."""
    if out_int32:
        raise TypeError("out_int32=True needs the int32 dtype, which fastgrad does not have yet")


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None, out=None):
    if not isinstance(sorted_sequence, Tensor) or not isinstance(input, (Tensor, builtins.int, builtins.float)):
        kinds = ", ".join(builtins.type(a).__name__ for a in (sorted_sequence, input))
        raise TypeError(f"searchsorted() received an invalid combination of arguments - got ({kinds})")
    if side not in (None, "left", "right"):
        raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
    if side == "left" and right:
        raise RuntimeError(
            "torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True"
        )
    _check_position_dtype(out_int32)
    if sorted_sequence.dim() == 0:
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension"
        )
    common = _prims.result_type(sorted_sequence, input)
    values = input if isinstance(input, Tensor) else _prims.full([], input, common)
    if sorted_sequence.dim() != 1 and (
        sorted_sequence.dim() != values.dim() or sorted_sequence.shape[:-1] != values.shape[:-1]
    ):
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of "
            f"boundaries tensor and input value tensor must match, but we got boundaries tensor "
            f"{list(sorted_sequence.shape)} and input value tensor {list(values.shape)}"
        )
    if sorter is not None:
        sorted_sequence = _sorted_by(sorted_sequence, sorter)
    if common is bool_:
        raise NotImplementedError("\"searchsorted_out_cpu\" not implemented for 'Bool'")
    sequence, values = (_prims.to_dtype(t.detach(), common) for t in (sorted_sequence, values))
    return _with_out(_prims.searchsorted(sequence, values, right or side == "right"), out)


def _sorted_by(sequence, sorter):
    """searchsorted's sorter: the positions that put each row of `sequence` in order."""
    if sorter.dtype is not int64:
        raise RuntimeError(
            "torch.searchsorted(): sorter must be a tensor of long dtype but got dtype "
            f"{SCALAR_TYPE_NAME[sorter.dtype]}"
        )
    if sorter.shape != sequence.shape:
        raise RuntimeError(
            "torch.searchsorted(): boundary and sorter must have the same size, but got boundary tensor "
            f"{list(sequence.shape)}and got sorter tensor {list(sorter.shape)}"
        )
    n = sequence.shape[-1]
    if sorter.numel() and (_prims.amin(sorter, [], False).item() < 0 or _prims.amax(sorter, [], False).item() >= n):
        raise RuntimeError("torch.searchsorted(): sorter index out of range")
    return gather(sequence.detach(), -1, sorter)


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    if isinstance(boundaries, Tensor) and boundaries.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.dim()})")
    return _with_out(searchsorted(boundaries, input, out_int32=out_int32, right=right), out)


def bincount(input, weights=None, minlength=0):
    minlength = _int_argument(minlength, "bincount", "minlength", 3)
    if input.dtype not in (uint8, int8, int16, int32, int64):
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")
    input = _prims.to_dtype(input, int64)  # the counted values, whatever integer type holds them
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if input.dim() != 1 or (input.numel() and _prims.amin(input, [], False).item() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.dim() != 1 or weights.shape[0] != input.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if weights is None:
        return _prims.bincount(input, None, minlength)
    summed = weights.detach() if weights.dtype is float32 else _prims.to_dtype(weights.detach(), float64)
    result = _prims.bincount(input, summed, minlength)
    no_derivative = lambda: RuntimeError("derivative for aten::bincount is not implemented")  # noqa: E731
    return _without_derivative([result], [weights], "torch::autograd::NotImplemented", no_derivative)[0]


def histc(input, bins=100, min=0, max=0, *, out=None):
    """Counts in `bins` equal bins between min and max; min == max means the input's own range."""
    bins = _int_argument(bins, "histc", "bins", 2)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    left, right = builtins.float(min), builtins.float(max)
    if left == right and input.numel():
        left, right = (t.item() for t in aminmax(input.detach()))
    if left == right:
        left, right = left - 1, right + 1
    if not (math.isfinite(left) and math.isfinite(right)):
        raise RuntimeError(f"torch.histc: range of [{left:g}, {right:g}] is not finite")
    if left >= right:
        raise RuntimeError("torch.histc: max must be larger than min")
    edges = _prims.linspace(left, right, bins + 1, input.dtype)
    return _with_out(_prims.histogram_counts(input.detach(), edges, None), out)


def histogram(input, bins, *, range=None, weight=None, density=False):
    """Counts (or weights) in bins between `bins` edges, or in `bins` equal bins over `range` (by
    default the input's); `density`: divided by their sum and each bin's width."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")
    if isinstance(bins, Tensor):
        if bins.dim() != 1:
            raise RuntimeError(
                "torch.histogramdd: bins tensor should have one dimension, but got "
                f"{bins.dim()} dimensions in the bins tensor for dimension 0"
            )
        if bins.dtype is not input.dtype:
            raise RuntimeError(
                "torch.histogramdd: input tensor and bins tensors should have the same dtype, but got input with "
                f"dtype {C_TYPE_NAME[input.dtype]} and bins for dimension 0 with dtype {C_TYPE_NAME[bins.dtype]}"
            )
        edges = _prims.clone(bins.detach())
    else:
        edges = _equal_bins(input, _int_argument(bins, "histogram", "bins", 2), range)
    if weight is not None and weight.shape != input.shape:
        raise RuntimeError(
            "torch.histogramdd: if weight tensor is provided it should have the same shape as the input tensor "
            f"excluding its innermost dimension, but got input with shape {[input.numel(), 1]} and weight with "
            f"shape {list(weight.shape)}"
        )
    if weight is not None and weight.dtype is not input.dtype:
        raise RuntimeError(
            "torch.histogramdd: if weight tensor is provided, input tensor and weight tensor should have the same "
            f"dtype, but got input({C_TYPE_NAME[input.dtype]}), and weight({C_TYPE_NAME[weight.dtype]})"
        )
    hist = _prims.histogram_counts(input.detach(), edges, None if weight is None else weight.detach())
    if density:
        hist = hist / _prims.sum(hist, [], False, None) / (edges[1:] - edges[:-1])
    no_derivative = lambda: RuntimeError("derivative for aten::histogram is not implemented")  # noqa: E731
    outputs = _without_derivative(
        [hist, edges], [input, bins, weight], "torch::autograd::NotImplemented", no_derivative
    )
    return return_types.histogram(outputs)


def _equal_bins(input, bins, range):
    """The edges of `bins` equal bins over `range`, or over the input's values (0 to 1 when it has none)."""
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if range is not None:
        left, right = (builtins.float(r) for r in range)
    elif input.numel():
        left, right = (t.item() for t in aminmax(input.detach()))
    else:
        left, right = 0.0, 1.0
    if left > right:
        raise RuntimeError(
            f"torch.histogramdd: min should not exceed max, but got min {left:g} max {right:g} for dimension 0"
        )
    if not (math.isfinite(left) and math.isfinite(right)):
        raise RuntimeError(f"torch.histogramdd: dimension 0's range [{left:g}, {right:g}] is not finite")
    if left == right:
        left, right = left - 0.5, right + 0.5
    return _prims.linspace(left, right, bins + 1, input.dtype)


def _unique(name, input, sorted_rows, return_inverse, return_counts, dim):
    """unique and unique_consecutive: the distinct elements (or slices along `dim`) of input, in order
    or run by run, with each one's inverse index and count as asked."""
    x = input.detach()
    if dim is None:
        rows, inverse_shape = _prims.reshape(x, [x.numel(), 1]), list(x.shape)
    else:
        if x.dim() == 0:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        dim = _wrap_dim(_index(dim), x.dim())
        if x.numel() == 0 and builtins.any(n == 0 for d, n in enumerate(x.shape) if d != dim):
            raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
        order = [dim] + [d for d in builtins.range(x.dim()) if d != dim]
        x = _prims.permute(x, order)
        width = math.prod(x.shape[1:])
        rows, inverse_shape = _prims.reshape(x, [x.shape[0], width]), [x.shape[0]]
    first, inverse, counts = _prims.unique_rows(rows, not sorted_rows)
    values = x.reshape([-1])[first] if dim is None else _prims.permute(x[first], _inverse_permutation(order))
    if input.requires_grad and values.dtype.is_floating_point:
        kernel = {"Unique2": "_unique2", "UniqueDim": "unique_dim"}.get(name, "unique_consecutive")
        no_derivative = lambda: NotImplementedError(f"the derivative for '{kernel}' is not implemented.")  # noqa: E731
        (values,) = _without_derivative([values], [input], f"{name}Backward0", no_derivative)
    results = (
        (values,)
        + ((_prims.reshape(inverse, inverse_shape),) if return_inverse else ())
        + ((counts,) if return_counts else ())
    )
    return results if len(results) > 1 else values


def _inverse_permutation(order):
    return [order.index(d) for d in builtins.range(len(order))]


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """Always sorted, as PyTorch's CPU unique (sorted=False leaves the order to the implementation)."""
    return _unique("Unique2" if dim is None else "UniqueDim", input, True, return_inverse, return_counts, dim)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    return _unique("UniqueConsecutive", input, False, return_inverse, return_counts, dim)


# quantiles: PyTorch's quantile_compute, composed (sort, gather, lerp), so the gradient flows as its does


_QUANTILE_INTERPOLATIONS = {"linear": None, "lower": np.floor, "higher": np.ceil, "midpoint": None, "nearest": np.round}


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    if not input.dtype.is_floating_point:
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if isinstance(q, Tensor):
        if q.dim() > 1:
            raise RuntimeError("quantile() q must be a scalar or 1D tensor")
        if q.dtype is not input.dtype:
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        if q.numel() and not (_prims.amin(q, [], False).item() >= 0 and _prims.amax(q, [], False).item() <= 1):
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
        scalar_q, q = q.dim() == 0, _prims.reshape(q.detach(), [-1])
    else:
        if not 0 <= q <= 1:
            raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q}")
        scalar_q, q = True, _prims.full([1], q, input.dtype)
    if interpolation not in _QUANTILE_INTERPOLATIONS:
        raise RuntimeError(
            "quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, but got "
            f"{interpolation}"
        )
    if dim is not None:
        dim = _wrap_dim(_index(dim), input.dim())
    if input.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    # the reduced rows along the last dim, the other dims as the result has them (with keepdim, as 1)
    if dim is None:
        rows = input.reshape([1] * input.dim() + [-1] if keepdim else [-1])
    elif keepdim or input.dim() == 0:
        rows = input.unsqueeze(-1).transpose(dim, -1)
    else:
        rows = input.permute([d for d in builtins.range(input.dim()) if d != dim] + [dim])
    ordered = rows.sort(-1).values
    nan = _isnan(ordered.detach())
    if ignore_nan:  # the ranks among the values that are not NaN; all NaN: rank 0, a NaN quantile
        ranks = q * (_prims.sum(_prims.bitwise_not(nan), [-1], True, None) - 1)
        ranks = _prims.where(ranks < 0, _prims.full([], 0, ranks.dtype), ranks)
    else:  # a row with a NaN: its last rank, a NaN quantile
        last = ordered.shape[-1] - 1
        ranks = _prims.where(any(nan, -1, True), _prims.full([], last, q.dtype), q * last)
    ranks = _prims.expand(ranks, list(ordered.shape[:-1]) + [q.shape[0]])
    rounding = _QUANTILE_INTERPOLATIONS[interpolation]
    if rounding is not None:
        ranks = _rounded(rounding, ranks)
    below = _prims.to_dtype(ranks, int64)
    result = gather(ordered, -1, below)
    if interpolation in ("linear", "midpoint"):
        weight = _prims.full([], 0.5, ranks.dtype) if interpolation == "midpoint" else ranks - below
        result = lerp(result, gather(ordered, -1, _prims.to_dtype(_rounded(np.ceil, ranks), int64)), weight)
    # q's dim first (a 1-D q), then the other dims
    return result.squeeze(-1) if scalar_q else result.unsqueeze(0).transpose(0, -1).squeeze(-1)


def _rounded(rounding, ranks):
    """numpy's floor, ceil or round (half to even, as PyTorch's) of the ranks, in their dtype."""
    return _prims.from_numpy(rounding(_prims.to_numpy(ranks)), share_memory=False)


def _lerp(start, end, weight):
    """PyTorch's lerp (from the nearer end, each a multiply-add rounded once, in the compute type),
    so that the values are its to the last bit. weight: a number or a tensor of start's dtype."""
    dtype = start.dtype
    work = compute_type(dtype)
    start, end = _prims.to_dtype(start, work), _prims.to_dtype(end, work)
    diff = end - start
    if not isinstance(weight, Tensor):  # one end for every element: only its formula runs
        number, weight = weight, _prims.full((), weight, work)
        if abs(NUMPY_TYPES[work].type(number)) < 0.5:  # the number as the work dtype holds it (no host read)
            return _prims.fused_multiply_add(weight, diff, start, dtype)
        return _prims.fused_multiply_add(-diff, 1 - weight, end, dtype)
    weight = _prims.to_dtype(weight, work)
    near_start = _prims.fused_multiply_add(weight, diff, start, dtype)
    near_end = _prims.fused_multiply_add(-diff, 1 - weight, end, dtype)
    return _prims.where(weight.abs() < 0.5, near_start, near_end)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    if keepdim is not False and keepdim is not True:
        _not_bool("quantile", "keepdim", keepdim)
    return _with_out(_quantile(input, q, dim, keepdim, interpolation, False), out)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    if keepdim is not False and keepdim is not True:
        _not_bool("nanquantile", "keepdim", keepdim)
    return _with_out(_quantile(input, q, dim, keepdim, interpolation, True), out)


# ---- the shape family: views, copies and joins composed over the ops above. Where PyTorch's result
# comes out of a node of its own (FlipBackward0, TrilBackward0, ...), the values are computed from
# detached inputs and _recorded gives them that node, with a backward written in differentiable ops
# (so that double backward works).


def _recorded_copy(name, inputs, result, backward):
    """A copy of `result` (computed without history; the copy is not a view of what it was computed
    from) as the one output of a node named `name`, whose gradients for `inputs` are backward(grad)."""
    return _recorded(name, inputs, [_prims.clone(result)], [], lambda grads: backward(grads[0]))[0]


_MAX_PIECES = 2**20  # tensor_split's sections: each is a Python object


def _int64(value):
    """_index(value), an int beyond int64 refused as PyTorch refuses it."""
    value = _index(value)
    if not -(2**63) <= value < 2**63:
        raise ValueError("Overflow when unpacking long long")
    return value


def _dim_slice(dim, index):
    """The key x[key] that indexes dim `dim` by `index`."""
    return (builtins.slice(None),) * dim + (index,)


def narrow(input, dim, start, length):
    if input.dim() == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    dim = _wrap_dim(_index(dim), input.dim())
    start, length, size = _int64(start), _int64(length), input.shape[dim]
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    start = start + size if start < 0 else start
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return _prims.slice_view(input, dim, start, start + length, 1)


def select(input, dim, index):
    if input.dim() == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    dim = _wrap_dim(_index(dim), input.dim())
    index, size = _int64(index), input.shape[dim]
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(input.shape)} at dimension {dim}"
        )
    return _prims.select_view(input, dim, index)


def ravel(input):
    return input.contiguous().view(-1)


def positive(input):
    if input.dtype == bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def unbind(input, dim=0):
    if input.dim() == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    return _prims.unbind(input, _index(dim))


def movedim(input, source, destination):
    n, source, destination = input.dim(), _dims(source), _dims(destination)
    if len(source) != len(destination):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({source} dims) should contain the same "
            f"number of dims as destination ({destination} dims)"
        )
    wrapped = {}
    for what, dims in (("source", source), ("destination", destination)):
        wrapped[what] = [_wrap_dim(d, n) for d in dims]
        if len(set(wrapped[what])) != len(dims):
            raise RuntimeError(f"movedim: repeated dim in `{what}` ({dims})")
    order = [None] * n  # a 0-d input (dims 0 and -1 allowed) has nothing to move
    for s, d in zip(wrapped["source"], wrapped["destination"]):
        if n:
            order[d] = s
    rest = iter(i for i in builtins.range(n) if i not in wrapped["source"])
    return _prims.permute(input, [next(rest) if o is None else o for o in order])


def broadcast_tensors(*tensors):
    shape = tuple(functools.reduce(_prims.broadcast_shapes, (t.shape for t in tensors), ()))
    return tuple(t if tuple(t.shape) == shape else _prims.expand(t, list(shape)) for t in tensors)


def broadcast_shapes(*shapes):
    """The shape that tensors of `shapes` broadcast to (a Size; an int is a 1-D shape)."""
    result = []
    for position, shape in enumerate(shapes):
        shape = _sizes((shape,), "shape")
        for i in builtins.range(-1, -1 - len(shape), -1):
            if shape[i] < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension ({shape[i]}): ({shape[i]})")
        if len(shape) > len(result):
            result = [1] * (len(shape) - len(result)) + result
        for i in builtins.range(-1, -1 - len(shape), -1):
            if shape[i] == 1 or shape[i] == result[i]:
                continue
            if result[i] != 1:
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {shape[i]} at {i}! Mismatching argument at "
                    f"index {position} had {tuple(shape)}; but expected shape should be broadcastable to {result}"
                )
            result[i] = shape[i]
    return Size(result)


def _atleast(tensors, n, grow):
    """atleast_<n>d: one tensor, several, or one list of them; each of fewer dims than n grown."""
    one = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    if len(tensors) == 1 and not one:
        tensors = tensors[0]
    grown = tuple(grow(t) if t.dim() < n else t for t in tensors)
    return grown[0] if one else grown


def atleast_1d(*tensors):
    return _atleast(tensors, 1, lambda t: _prims.reshape(t, [1]))


def atleast_2d(*tensors):
    return _atleast(tensors, 2, lambda t: _prims.unsqueeze(t, 0) if t.dim() else _prims.reshape(t, [1, 1]))


def atleast_3d(*tensors):
    def grow(t):
        if t.dim() == 0:
            return _prims.reshape(t, [1, 1, 1])
        return _prims.unsqueeze(_prims.unsqueeze(t, 0) if t.dim() == 1 else t, -1)

    return _atleast(tensors, 3, grow)


def unflatten(input, dim, sizes):
    dim = _wrap_dim(_index(dim), input.dim())
    sizes = _sizes((sizes,), "sizes")
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    shape, known = list(input.shape), 1
    for n in sizes:
        known *= n if n != -1 else 1
    if (-1 not in sizes and known != shape[dim]) or (-1 in sizes and (known == 0 or shape[dim] % known)):
        raise RuntimeError(
            f"unflatten: Provided sizes {sizes} don't multiply up to the size of dim {dim} ({shape[dim]}) in the "
            "input tensor"
        )
    if -1 in sizes:  # inferred within the dim (reshape could not, for a size-0 tensor)
        sizes[sizes.index(-1)] = shape[dim] // known
    return _prims.reshape(input, shape[:dim] + sizes + shape[dim + 1 :])


def _flipped(x, dims):
    """x (no history) reversed along `dims`: one copy per dim."""
    for d in dims:
        x = x[_dim_slice(d, _prims.arange(x.shape[d] - 1, -1, -1, int64))]
    return x


def flip(input, dims):
    if not isinstance(dims, (tuple, list)):
        raise TypeError(
            f"flip(): argument 'dims' (position 2) must be tuple of ints, not {builtins.type(dims).__name__}"
        )
    dims = [_wrap_dim(_index(d), input.dim()) for d in dims]
    for d in dims:
        if dims.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    if input.dim() == 0:
        dims = []
    return _recorded_copy("FlipBackward0", [input], _flipped(input.detach(), dims), lambda g: [flip(g, dims)])


def flip_method(self, *dims):
    return flip(self, _sizes(dims, "dims"))


def fliplr(input):
    if input.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, [1])


def flipud(input):
    if input.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, [0])


def _rolled_index(n, shift):
    """The positions that element i of a dim of size n, rolled by shift, comes from."""
    return (_prims.arange(0, n, 1, int64) - shift) % builtins.max(n, 1)


def roll(input, shifts, dims=None):
    shifts, dims = [_int64(s) for s in _dims(shifts)], [_wrap_dim(d, input.dim()) for d in _dims(dims)]
    if len(shifts) != len(dims) and (dims or len(shifts) != 1):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    source = input.detach()
    if not dims:  # the flattened tensor rolled, in the input's shape
        index = _prims.reshape(_rolled_index(input.numel(), shifts[0]), list(input.shape))
        result = _prims.reshape(source, [-1])[index]
    else:
        result = source
        for shift, d in zip(shifts, dims):
            result = result[_dim_slice(d, _rolled_index(input.shape[d], shift))]
    return _recorded_copy("RollBackward0", [input], result, lambda g: [roll(g, [-s for s in shifts], dims or None)])


def rot90(input, k=1, dims=[0, 1]):
    dims = _dims(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.dim() < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.dim()}")
    d0, d1 = (_wrap_dim(d, input.dim()) for d in dims)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = {dims[1]}")
    k = _int64(k) % 4
    source = input.detach()
    if k == 1:
        result = _prims.transpose(_flipped(source, [d1]), d0, d1)
    elif k == 3:
        result = _prims.transpose(_flipped(source, [d0]), d0, d1)
    else:
        result = _flipped(source, [d0, d1][:k])
    return _recorded_copy("Rot90Backward0", [input], result, lambda g: [rot90(g, -k, dims)])


def repeat(self, *repeats):
    sizes = _sizes(repeats, "repeats")
    if len(sizes) < self.dim():
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    shape = [1] * (len(sizes) - self.dim()) + list(self.shape)
    result_shape = [r * n for r, n in zip(sizes, shape)]
    for n in result_shape:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {result_shape}")
    # every dim of size n as (1, n) expanded to (r, n): the dims of the repeats are the even ones
    pairs = [m for n in shape for m in (1, n)]
    repeated = [m for r, n in zip(sizes, shape) for m in (r, n)]
    source = _prims.expand(_prims.reshape(self.detach(), pairs), repeated)
    self_shape = list(self.shape)

    def backward(g):
        summed = _prims.sum(_prims.reshape(g, repeated), list(builtins.range(0, len(repeated), 2)), False, None)
        return [_prims.reshape(summed, self_shape)]

    return _recorded_copy("RepeatBackward0", [self], _prims.reshape(source, result_shape), backward)


def tile(input, dims):
    dims = _sizes((dims,), "dims")
    return repeat(input, [1] * (input.dim() - len(dims)) + dims)


def tile_method(self, *dims):
    return tile(self, _sizes(dims, "dims"))


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    if repeats is None:  # repeat_interleave(repeats): each index repeated as often as it says
        repeats, counts = input, input
        input = None
    elif isinstance(repeats, Tensor):
        counts = repeats
    else:
        repeats = _index(repeats)
        if repeats < 0:
            raise RuntimeError("Repeats must be non-negative")
        if dim is None:
            input, dim = _prims.reshape(input, [-1]), 0
        dim = _wrap_dim(_index(dim), input.dim())
        shape = list(input.shape)
        expanded = _prims.expand(_prims.unsqueeze(input, dim + 1), shape[: dim + 1] + [repeats] + shape[dim + 1 :])
        return _prims.view(_prims.clone(expanded), shape[:dim] + [shape[dim] * repeats] + shape[dim + 1 :])
    if counts.dim() > 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    if counts.dtype is not int64:
        raise NotImplementedError(f"\"repeat_interleave_cpu\" not implemented for '{SCALAR_TYPE_NAME[counts.dtype]}'")
    if input is not None:
        if dim is None:
            input, dim = _prims.reshape(input, [-1]), 0
        dim = _wrap_dim(_index(dim), input.dim())
        if counts.numel() == 1:
            counts = _prims.expand(_prims.reshape(counts, [1]), [input.shape[dim]])
        if counts.shape[0] != input.shape[dim]:
            raise RuntimeError(
                "repeats must have the same size as input along dim, but got repeats.size(0) = "
                f"{counts.shape[0]} and input.size(0) = {input.shape[dim]}"
            )
    values = _prims.to_numpy(counts.detach()).reshape(-1)
    if (values < 0).any():
        raise RuntimeError("repeats can not be negative")
    index = _prims.from_numpy(np.repeat(np.arange(len(values), dtype=np.int64), values), share_memory=False)
    if output_size is not None and _index(output_size) != index.numel():
        raise RuntimeError("allocated size does not match required size")
    return index if input is None else index_select(input, dim, index)


def _triangle(name, keeps):
    """tril / triu: the elements of the last two dims whose column minus row `keeps(diagonal)`, the others zero."""

    def triangle(input, diagonal=0):
        if input.dim() < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        diagonal = _index(diagonal)
        rows, cols = input.shape[-2:]
        offsets = _prims.arange(0, cols, 1, int64) - _prims.reshape(_prims.arange(0, rows, 1, int64), [-1, 1])
        kept = _prims.where(keeps(offsets, diagonal), input.detach(), _prims.full([], 0, input.dtype))
        return _recorded_copy(f"{name.capitalize()}Backward0", [input], kept, lambda g: [triangle(g, diagonal)])

    triangle.__name__ = triangle.__qualname__ = name
    return triangle


tril = _triangle("tril", lambda offsets, diagonal: offsets <= diagonal)
triu = _triangle("triu", lambda offsets, diagonal: offsets >= diagonal)


def tril_(self, diagonal=0):
    return _in_place(tril, self, diagonal)


def triu_(self, diagonal=0):
    return _in_place(triu, self, diagonal)


def _triangle_indices(name, numpy_indices):
    def indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
        check_cpu(device)
        row, col, offset = _int64(row), _int64(col), _int64(offset)
        for what, n in (("row", row), ("col", col)):
            if n < 0:
                raise RuntimeError(f"{what} must be non-negative, got{n}")
        dtype = int64 if dtype is None else dtype
        if dtype.is_floating_point or dtype is bool_:
            raise NotImplementedError(f"\"{name}\" not implemented for '{SCALAR_TYPE_NAME[dtype]}'")
        _prims.empty([row, col], bool_)  # numpy's mask of the matrix: the core refuses more memory than there is
        rows, cols = numpy_indices(row, offset, col)
        return _prims.from_numpy(np.stack([rows, cols]).astype(np.int64).reshape(2, -1), share_memory=False)

    indices.__name__ = indices.__qualname__ = name
    return indices


tril_indices = _triangle_indices("tril_indices", np.tril_indices)
triu_indices = _triangle_indices("triu_indices", np.triu_indices)


def _diagonal_embedded(values, shape, offset, dim1, dim2):
    """Zeros of `shape` with `values` (a last dim per diagonal) on the diagonal `offset` of dim1, dim2
    (differentiable in `values`)."""
    out = _prims.full(list(shape), 0, values.dtype)
    _prims.copy_(_prims.diagonal(out, offset, dim1, dim2), values)
    return out


def _distinct_dims(dim1, dim2, ndim):
    wrapped = _wrap_dim(_index(dim1), ndim), _wrap_dim(_index(dim2), ndim)
    if wrapped[0] == wrapped[1]:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return wrapped


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    offset = _index(offset)
    dim1, dim2 = _distinct_dims(dim1, dim2, input.dim() + 1)
    n = input.shape[-1] + builtins.abs(offset)
    shape = list(input.shape[:-1])
    for d in sorted((dim1, dim2)):
        shape.insert(d, n)
    embedded = _diagonal_embedded(input.detach(), shape, offset, dim1, dim2)
    return _recorded_copy("DiagEmbedBackward0", [input], embedded, lambda g: [_prims.diagonal(g, offset, dim1, dim2)])


def diag(input, diagonal=0):
    """1-D: the matrix with input on its diagonal; 2-D: a copy of the diagonal (not a view)."""
    if input.dim() == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.dim() != 2:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.dim()}D")
    offset, shape = _index(diagonal), list(input.shape)
    values = _prims.diagonal(input.detach(), offset, 0, 1)
    return _recorded_copy(
        "DiagonalBackward0_copy", [input], values, lambda g: [_diagonal_embedded(g, shape, offset, 0, 1)]
    )


def trace(input):
    if input.dtype == bool_:  # PyTorch refuses bools before it checks the dim
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    if input.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.dim()}")
    values = _prims.diagonal(input.detach(), 0, 0, 1)
    shape, k = list(input.shape), values.shape[0]
    total = _prims.sum(values, [], False, None)
    return _recorded_copy(
        "TraceBackward0", [input], total, lambda g: [_diagonal_embedded(_prims.expand(g, [k]), shape, 0, 0, 1)]
    )


def outer(input, vec2):
    for what, t in (("self", input), ("vec2", vec2)):
        if t.dim() != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {what}, but got {t.dim()}-D")
    return _prims.reshape(input, [-1, 1]) * vec2


def kron(input, other):
    n = builtins.max(input.dim(), other.dim())
    a, b = ([1] * (n - t.dim()) + list(t.shape) for t in (input, other))
    product = _prims.reshape(input, [m for s in a for m in (s, 1)]) * _prims.reshape(
        other, [m for s in b for m in (1, s)]
    )
    shape = list(product.shape)
    result = _prims.reshape(product.detach(), [s * t for s, t in zip(a, b)])
    return _recorded_copy("UnsafeViewBackward0", [product], result, lambda g: [_prims.reshape(g, shape)])


def meshgrid(*tensors, indexing=None):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if indexing is None:
        warnings.warn(
            "fastgrad.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
            UserWarning,
            stacklevel=2,
        )
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'fastgrad.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for t in tensors:
        if t.dim() > 1:
            raise RuntimeError(f"fastgrad.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t}")
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    axes = list(builtins.range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:  # the first two inputs index columns and rows
        axes[0], axes[1] = 1, 0
    shape = [0] * len(tensors)
    for axis, t in zip(axes, tensors):
        shape[axis] = t.numel()
    return tuple(
        _prims.expand(_prims.reshape(t, [-1 if i == axis else 1 for i in builtins.range(len(shape))]), shape)
        for axis, t in zip(axes, tensors)
    )


def cartesian_prod(*tensors):
    for t in tensors:
        if t.dim() != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    return _prims.stack([_prims.reshape(g, [-1]) for g in meshgrid(*tensors, indexing="ij")], 1)


def block_diag(*tensors):
    for i, t in enumerate(tensors):
        if t.dim() > 2:
            raise RuntimeError(
                "fastgrad.block_diag: Input tensors must have 2 or fewer dimensions. "
                f"Input {i} has {t.dim()} dimensions"
            )
    blocks = [_prims.reshape(t.detach(), [1, -1] if t.dim() < 2 else list(t.shape)) for t in tensors]
    dtype = _meta.result_type(*tensors) if tensors else get_default_dtype()  # 0-d tensors promote as PyTorch's scalars
    corners = [
        (builtins.sum(b.shape[0] for b in blocks[:i]), builtins.sum(b.shape[1] for b in blocks[:i]))
        for i in builtins.range(len(blocks) + 1)
    ]
    out = _prims.full([corners[-1][0] if tensors else 1, corners[-1][1]], 0, dtype)
    for b, (r, c) in zip(blocks, corners):
        out[r : r + b.shape[0], c : c + b.shape[1]] = b

    shapes = [(list(t.shape), b.shape) for t, b in zip(tensors, blocks)]  # the input's and its block's

    def backward(g):
        return [
            _prims.reshape(g[r : r + rows, c : c + columns], shape)
            for (shape, (rows, columns)), (r, c) in zip(shapes, corners)
        ]

    return _recorded_copy("BlockDiagBackward0", list(tensors), out, backward)


def tensor_split(input, indices_or_sections, dim=0):
    if input.dim() == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    dim = _wrap_dim(_index(dim), input.dim())
    split = indices_or_sections
    if isinstance(split, Tensor):
        if split.dtype is not int64:
            raise RuntimeError(
                "tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                f"{SCALAR_TYPE_NAME[split.dtype]}"
            )
        if split.dim() > 1:
            raise RuntimeError(
                "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or one-dimensional "
                f"tensor, but got a tensor with {split.dim()} dims"
            )
        split = split.item() if split.dim() == 0 else split.tolist()
    length = input.shape[dim]
    if isinstance(split, (list, tuple)):
        bounds = [_int64(i) for i in split]
    else:
        sections = _int64(split)
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        if sections > _MAX_PIECES:  # PyTorch would make them all, one tensor at a time
            raise RuntimeError(f"tensor_split: {sections} sections are more than fastgrad makes ({_MAX_PIECES})")
        size, extra = divmod(length, sections)  # the first `extra` sections take one more
        bounds = [i * size + builtins.min(i, extra) for i in builtins.range(1, sections)]
    bounds = [0] + bounds + [length]
    return tuple(input[_dim_slice(dim, builtins.slice(a, b))] for a, b in zip(bounds, bounds[1:]))


def _stacking(name, arrange, dim):
    """hstack / vstack / dstack / column_stack: the tensors, made alike by `arrange`, joined along a dim."""

    def stacking(tensors, *, out=None):
        if not tensors:
            raise RuntimeError(f"{name} expects a non-empty TensorList")
        tensors = [arrange(t) for t in tensors]
        return _with_out(_prims.cat(tensors, dim(tensors)), out)

    stacking.__name__ = stacking.__qualname__ = name
    return stacking


hstack = _stacking("hstack", atleast_1d, lambda tensors: 0 if tensors[0].dim() == 1 else 1)
vstack = _stacking("vstack", atleast_2d, lambda tensors: 0)
row_stack = _stacking("row_stack", atleast_2d, lambda tensors: 0)
dstack = _stacking("dstack", atleast_3d, lambda tensors: 2)
column_stack = _stacking(
    "column_stack", lambda t: _prims.reshape(t, [t.numel(), 1]) if t.dim() <= 1 else t, lambda tensors: 1
)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    if input.dim() == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    n = _int64(n)
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    dim = _wrap_dim(_index(dim), input.dim())
    parts = [t for t in (prepend, input, append) if t is not None]
    for t in parts:
        if t.dim() != input.dim():
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    x = _prims.cat(parts, dim) if len(parts) > 1 else input
    if n == 0:
        return _prims.full(list(x.shape), 0, x.dtype).copy_(x)  # a copy, as PyTorch's (CopyBackwards)
    for _ in builtins.range(builtins.min(n, x.shape[dim])):  # as PyTorch: none for an empty dim (x itself)
        later, earlier = x[_dim_slice(dim, builtins.slice(1, None))], x[_dim_slice(dim, builtins.slice(None, -1))]
        x = later != earlier if x.dtype is bool_ else later - earlier
    return x


# ---- binary/ternary elementwise ops of issue 13 (clamp_min/max, lerp, addcmul, addcdiv, ...): PyTorch
# gives each one node of its own, so the values come from detached inputs and _recorded gives that node.


def _sum_to(grad, shape):
    """The gradient of a broadcast result summed back to an input's shape."""
    lead = grad.dim() - len(shape)
    dims = [d for d in builtins.range(grad.dim()) if d < lead or (shape[d - lead] == 1 and grad.shape[d] != 1)]
    return _prims.reshape(_prims.sum(grad, dims, True, None), list(shape)) if dims else grad


class _InPlaceResult(threading.local):
    """Whether this thread computes the result of an in-place composite (_in_place): as PyTorch's
    in-place nodes, its node may have an integer output (an integer tensor with a history, see
    _recorded)."""

    active = False


_in_place_result = _InPlaceResult()


def _in_place(op, self, *args, _elementwise=True, **kwargs):
    """self.<op>_(*args, **kwargs) as PyTorch's in-place form: op runs on a copy of self's old values
    that carries self's history (so op's own node, with its edge to that history and its saved
    values, is recorded) after PyTorch's checks of the write, and its result becomes self's values
    and history, bumping self's version once. The tensor arguments of an _elementwise op must
    broadcast to self's shape; those of an indexing op (put_, ...) need not."""
    sources = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
    old_values = _prims.inplace_input(self, sources, _elementwise)
    outer, _in_place_result.active = _in_place_result.active, True
    try:
        result = op(old_values, *args, **kwargs)
    finally:
        _in_place_result.active = outer
    return _prims.write_result_(self, result)


def _bounded(node, input, bound, keeps_input, gives_bound, clamped):
    """clamp_min / clamp_max: `clamped(input, bound)` (a number or a tensor) as PyTorch's node
    `node`0 / `node`1; the gradient goes to the input where keeps_input(input, bound), to a tensor
    bound where gives_bound(input, bound) (neither at a NaN)."""
    if not isinstance(bound, Tensor):
        result = clamped(input.detach(), bound)

        def backward(grads, x):
            return [_prims.where(keeps_input(x, bound), grads[0], 0)]

        return _recorded(node + "0", [input], [result], [input], backward)[0]
    result = clamped(input.detach(), bound.detach())

    def backward(grads, x, b):
        return [
            _sum_to(_prims.where(keeps_input(x, b), grads[0], 0), x.shape),
            _sum_to(_prims.where(gives_bound(x, b), grads[0], 0), b.shape),
        ]

    return _recorded(node + "1", [input, bound], [result], [input, bound], backward)[0]


def clamp_min(input, min, *, out=None):
    return _with_out(_bounded("ClampMinBackward", input, min, operator.ge, operator.lt, lambda x, b: clamp(x, b)), out)


def clamp_max(input, max, *, out=None):
    return _with_out(
        _bounded("ClampMaxBackward", input, max, operator.le, operator.gt, lambda x, b: clamp(x, None, b)), out
    )


def clamp_min_(self, min):
    return _in_place(clamp_min, self, min)


def clamp_max_(self, max):
    return _in_place(clamp_max, self, max)


def _check_same_dtype(op, input, **others):
    """lerp takes operands of the input's dtype only, and floating ones (PyTorch's checks, in its order)."""
    for name, other in others.items():
        if isinstance(other, Tensor) and other.dtype != input.dtype:
            raise RuntimeError(
                f"expected dtype {SCALAR_TYPE_NAME[input.dtype].lower()} for `{name}` but got dtype "
                f"{SCALAR_TYPE_NAME[other.dtype].lower()}"
            )
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"{op}\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")


def lerp(input, end, weight, *, out=None):
    _meta.lerp(input, end, weight)  # PyTorch's error for shapes that do not broadcast, the input's size first
    if isinstance(weight, Tensor):
        if weight.dim():
            _check_same_dtype("lerp_kernel_tensor", input, end=end, weight=weight)
        else:  # a 0-d weight is taken in the input's dtype, whatever its own
            _check_same_dtype("lerp_kernel_tensor", input, end=end)
        result = _lerp(input.detach(), end.detach(), _prims.to_dtype(weight.detach(), input.dtype))

        def backward(grads, start, end, weight):
            grad = grads[0]
            return [
                _sum_to(grad * (1 - weight), start.shape),
                _sum_to(grad * weight, end.shape),
                _sum_to(grad * (end - start), weight.shape),
            ]

        inputs = [input, end, weight]
        return _with_out(_recorded("LerpBackward1", inputs, [result], inputs, backward)[0], out)
    _check_same_dtype("lerp_kernel_scalar", input, end=end)
    result = _lerp(input.detach(), end.detach(), weight)

    shapes = input.shape, end.shape

    def backward(grads):  # saves no tensor, as PyTorch's node
        return [_sum_to(grads[0] * (1 - weight), shapes[0]), _sum_to(grads[0] * weight, shapes[1])]

    return _with_out(_recorded("LerpBackward0", [input, end], [result], [], backward)[0], out)


def lerp_(self, end, weight):
    return _in_place(lerp, self, end, weight)


def _ternary(name, combined, partials):
    """addcmul / addcdiv: combined(input, tensor1, tensor2, value) as PyTorch's one node `name`;
    partials(grad, tensor1, tensor2, value) are the gradients of tensor1 and tensor2 (PyTorch's formulas)."""

    def ternary(input, tensor1, tensor2, *, value=1, out=None):
        inputs = [input, tensor1, tensor2]
        result = combined(input.detach(), tensor1.detach(), tensor2.detach(), value)
        input_shape = input.shape

        def backward(grads, tensor1, tensor2):  # the node saves the factors, as PyTorch's
            return [_sum_to(grads[0], input_shape)] + [
                _sum_to(g, t.shape) for g, t in zip(partials(grads[0], tensor1, tensor2, value), (tensor1, tensor2))
            ]

        return _with_out(_recorded(name, inputs, [result], [tensor1, tensor2], backward)[0], out)

    def ternary_(self, tensor1, tensor2, *, value=1):
        return _in_place(ternary, self, tensor1, tensor2, value=value)

    op = name[: -len("Backward0")].lower()
    ternary.__name__ = ternary.__qualname__ = op
    ternary_.__name__ = ternary_.__qualname__ = op + "_"
    return ternary, ternary_


def _product_added(input, tensor1, tensor2, value):
    """input + value * tensor1 * tensor2 as PyTorch's loop computes it: for floating types
    (value * tensor1) * tensor2 + input rounded once."""
    dtype = _meta.addcmul(input, tensor1, tensor2).dtype
    if not dtype.is_floating_point:
        return input + tensor1 * value * tensor2
    return _prims.fused_multiply_add(_prims.to_dtype(tensor1, compute_type(dtype)) * value, tensor2, input, dtype)


addcmul, addcmul_ = _ternary(
    "AddcmulBackward0",
    _product_added,
    lambda g, t1, t2, value: (g * (t2 * value), g * (t1 * value)),
)


def _quotient_added(input, tensor1, tensor2, value):
    """input + value * tensor1 / tensor2 in PyTorch's order and compute type (so its rounding);
    integer operands refused."""
    if not (tensor1.dtype.is_floating_point or tensor2.dtype.is_floating_point):
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform "
            "a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as "
            "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
            "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter "
            "implementation: (input + value * tensor1 / tensor2), for all dtypes."
        )
    dtype = _meta.addcmul(input, tensor1, tensor2).dtype
    x, t1, t2 = (_prims.to_dtype(t, compute_type(dtype)) for t in (input, tensor1, tensor2))
    return _prims.to_dtype(x + t1 * value / t2, dtype)


addcdiv, addcdiv_ = _ternary(
    "AddcdivBackward0",
    _quotient_added,
    # value / t2 as PyTorch's C++ formula divides (Python's number / tensor is a reciprocal times the number)
    lambda g, t1, t2, value: (g * _prims.div(_prims.full((), value, g.dtype), t2), -g * (value * t1 / (t2 * t2))),
)


def _binary_float(name, node, partials, integers=True, saves_result=False):
    """atan2, logaddexp, ...: the core's values of two tensors promoted to a floating dtype
    (_prims.<name>), as PyTorch's one node `node`; partials(a, b[, result]) are the derivatives for a
    and b (differentiable ops), given the result where PyTorch's node saves it (so that its in-place
    change is an error)."""
    values = getattr(_prims, name)

    def binary_float(input, other, *, out=None):
        if not isinstance(other, Tensor):
            raise TypeError(
                f"{name}(): argument 'other' (position 2) must be Tensor, not {builtins.type(other).__name__}"
            )
        _meta.broadcast_shapes(input.shape, other.shape)  # PyTorch's error for shapes that do not broadcast
        common = _prims.result_type(input, other)
        if not (integers or common.is_floating_point):
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{SCALAR_TYPE_NAME[common]}'")
        result = values(input.detach(), other.detach())

        def backward(grads, a, b, *result):
            return [_sum_to(grads[0] * d, t.shape) for d, t in zip(partials(a, b, *result), (a, b))]

        inputs = [input, other]
        saved = inputs + [result] if saves_result else inputs
        return _with_out(_recorded(node, inputs, [result], saved, backward)[0], out)

    binary_float.__name__ = binary_float.__qualname__ = name
    return binary_float


def _atan2_partials(a, b):
    """PyTorch's: zero where both operands are zero (not 0/0)."""
    squares = a * a + b * b
    return [_prims.where(squares == 0, 0, t / squares) for t in (b, -a)]


atan2 = arctan2 = _binary_float("atan2", "Atan2Backward0", _atan2_partials)
logaddexp = _binary_float(
    "logaddexp",
    "LogaddexpBackward0",
    lambda a, b: (1 / (1 + (b - a).exp()), 1 / (1 + (a - b).exp())),
    integers=False,
)
logaddexp2 = _binary_float(
    "logaddexp2",
    "Logaddexp2Backward0",
    lambda a, b: (1 / (1 + 2 ** (b - a)), 1 / (1 + 2 ** (a - b))),
    integers=False,
)
hypot = _binary_float("hypot", "HypotBackward0", lambda a, b, r: (a / r, b / r), integers=False, saves_result=True)


def true_divide(input, other, *, out=None):
    return div(input, other, out=out)


def true_divide_(self, other):
    return self.div_(other)


def multiply_(self, other):
    return self.mul_(other)


_true_divide_in_place = Tensor.div_  # the backend's own (x /= y), before the op table's div_ replaces it


def div_(self, other, *, rounding_mode=None):
    if rounding_mode is None:
        return _true_divide_in_place(self, other)
    return _in_place(div, self, other, rounding_mode=rounding_mode)


def atan2_(self, other):
    return _in_place(atan2, self, other)


arctan2_ = atan2_


def hypot_(self, other):
    return _in_place(hypot, self, other)


def _not_differentiable_in_place(op, self, *args):
    """logical_<op>_: op's truth values written in self's dtype. As PyTorch, which has no derivative
    for them, with no autograd checks (a leaf that requires grad may be written) and no node (self
    keeps its history)."""
    with no_grad():
        return _in_place(op, self, *args)


def logical_and_(self, other):
    return _not_differentiable_in_place(logical_and, self, other)


def logical_or_(self, other):
    return _not_differentiable_in_place(logical_or, self, other)


def logical_xor_(self, other):
    return _not_differentiable_in_place(logical_xor, self, other)


def logical_not_(self):
    return _not_differentiable_in_place(logical_not, self)


def _comparison_in_place(node, compare):
    """eq_, lt_, ...: the comparison's truth values in self's dtype, as PyTorch's node `node`0 (by a
    number) or `node`1 (by a tensor), whose gradients are zeros."""

    def compared(x, other):
        values = _prims.to_dtype(compare(x.detach(), other.detach() if isinstance(other, Tensor) else other), x.dtype)
        inputs = [x, other] if isinstance(other, Tensor) else [x]
        metas = [(builtins.list(t.shape), t.dtype) for t in inputs]

        def backward(grads):
            return [_prims.full(shape, 0, dtype) for shape, dtype in metas]

        return _recorded(f"{node}{len(inputs) - 1}", inputs, [values], [], backward)[0]

    def compare_(self, other):
        return _in_place(compared, self, other)

    return compare_


eq_ = _comparison_in_place("EqBackward", _prims.eq)
ne_ = not_equal_ = _comparison_in_place("NeBackward", _prims.ne)
lt_ = less_ = _comparison_in_place("LtBackward", _prims.lt)
le_ = less_equal_ = _comparison_in_place("LeBackward", _prims.le)
gt_ = greater_ = _comparison_in_place("GtBackward", _prims.gt)
ge_ = greater_equal_ = _comparison_in_place("GeBackward", _prims.ge)


def _number_or_tensor_operands(name, input, other, first_may_be_number=True):
    """The operands of an op taking (Tensor, Tensor), (Number, Tensor) (if first_may_be_number) or
    (Tensor, Number), refusing other combinations with PyTorch's TypeError; shapes that do not broadcast
    get PyTorch's error."""
    tensors = [isinstance(a, Tensor) for a in (input, other)]
    numbers = [isinstance(a, (builtins.int, builtins.float)) for a in (input, other)]
    allowed = builtins.all(map(operator.or_, tensors, numbers)) and (tensors[0] or first_may_be_number and tensors[1])
    if not allowed:
        got = ", ".join(builtins.type(a).__name__ for a in (input, other))
        raise TypeError(f"{name}() received an invalid combination of arguments - got ({got}), but expected one of:")
    if builtins.all(tensors):
        _meta.broadcast_shapes(input.shape, other.shape)


def _operand_as(operand, dtype):
    """A detached tensor of `dtype` holding a tensor's or a number's values."""
    if isinstance(operand, Tensor):
        return _prims.to_dtype(operand.detach(), dtype)
    return _prims.full([], operand, dtype)


def _float_result_type(input, other):
    common = _prims.result_type(input, other) if isinstance(input, Tensor) else _prims.result_type(other, input)
    return common if common.is_floating_point else get_default_dtype()


def _xlogy_values(x, y):
    """x * log(y), 0 where x is 0 unless y is NaN (PyTorch's rule: 0 * log(0) is 0)."""
    return _prims.where(_prims.eq(x, 0) & _prims.eq(y, y), 0, x * _prims.log(y))


def xlogy(input, other, *, out=None):
    _number_or_tensor_operands("xlogy", input, other)
    dtype = _float_result_type(input, other)
    result = _xlogy_values(_operand_as(input, dtype), _operand_as(other, dtype))

    def input_grad(g, x, y, y_not_positive):  # PyTorch's: log(y), 0 where x is 0 and y not positive
        return _prims.where(_prims.eq(x, 0) & y_not_positive, 0, xlogy(g, y))

    if not isinstance(other, Tensor):

        def backward(grads, x):  # a NaN number counts as not positive here, as in PyTorch
            return [input_grad(grads[0], x, other, not other > 0)]

        return _with_out(_recorded("XlogyBackward2", [input], [result], [input], backward)[0], out)
    if not isinstance(input, Tensor):

        def backward(grads, y):
            return [grads[0] * input / y]

        return _with_out(_recorded("XlogyBackward1", [other], [result], [other], backward)[0], out)

    def backward(grads, x, y):
        return [_sum_to(input_grad(grads[0], x, y, y <= 0), x.shape), _sum_to(grads[0] * x / y, y.shape)]

    return _with_out(_recorded("XlogyBackward0", [input, other], [result], [input, other], backward)[0], out)


def xlogy_(self, other):
    return _in_place(xlogy, self, other)


def copysign(input, other, *, out=None):
    _number_or_tensor_operands("copysign", input, other, first_may_be_number=False)
    result = _prims.copysign(input.detach(), other.detach() if isinstance(other, Tensor) else other)

    def input_grad(g, x, result):  # PyTorch's: result / x, 0 where x is 0
        return g * _prims.where(_prims.eq(x, 0), 0, result / x)

    if not isinstance(other, Tensor):

        def backward(grads, x, result):
            return [input_grad(grads[0], x, result)]

        return _with_out(_recorded("CopysignBackward1", [input], [result], [input, result], backward)[0], out)
    other_shape, other_dtype = builtins.list(other.shape), other.dtype

    def backward(grads, x, result):  # the sign's gradient is zero
        return [_sum_to(input_grad(grads[0], x, result), x.shape), _prims.full(other_shape, 0, other_dtype)]

    return _with_out(_recorded("CopysignBackward0", [input, other], [result], [input, result], backward)[0], out)


def copysign_(self, other):
    return _in_place(copysign, self, other)


def heaviside(input, values, *, out=None):
    if not isinstance(values, Tensor):
        raise TypeError(
            f"heaviside(): argument 'values' (position 2) must be Tensor, not {builtins.type(values).__name__}"
        )
    _meta.broadcast_shapes(input.shape, values.shape)
    if input.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    x, v = input.detach(), values.detach()
    step = _prims.where(_prims.eq(x, 0), v, _prims.to_dtype(_prims.gt(x, 0), x.dtype))
    no_derivative = lambda: RuntimeError("derivative for aten::heaviside is not implemented")  # noqa: E731
    return _with_out(
        _without_derivative([step], [input, values], "torch::autograd::NotImplemented", no_derivative)[0], out
    )


def heaviside_(self, values):
    return _in_place(heaviside, self, values)


def logit(input, eps=None, *, out=None):
    x = _as_floating(input)
    bounded = eps is not None and eps >= 0  # a negative eps is none, as in PyTorch
    z = clamp(x, eps, 1 - eps) if bounded else x
    result = _prims.log(z / (1 - z))

    def backward(grads, x):  # PyTorch's: NaN outside [0, 1] without eps, 0 outside [eps, 1 - eps] with it
        outside = (x < eps) | (x > 1 - eps) if bounded else (x < 0) | (x > 1)
        # g * inf at the ends (at -0.0 too); the factor first, so that no 0 * inf reaches a double backward
        inside = grads[0] * _prims.where((x == 0) | (x == 1), math.inf, 1 / (x * (1 - x)))
        return [_prims.where(outside, 0.0 if bounded else math.nan, inside)]

    return _with_out(_recorded("LogitBackward0", [input], [result], [input], backward)[0], out)


def logit_(self, eps=None):
    return _in_place(logit, self, eps)


def _shift(name, kernel, shifted, out_of_range):
    """bitwise_left_shift / bitwise_right_shift of integers, as PyTorch's: shifted(a, b) for shifts
    within the type's width, out_of_range(a) for the others (negative or too large)."""

    def shift(input, other, *, out=None):
        _number_or_tensor_operands(name, input, other)
        common = _prims.result_type(input, other) if isinstance(input, Tensor) else _prims.result_type(other, input)
        if common.is_floating_point or common is bool_:
            raise NotImplementedError(f"\"{kernel}_cpu\" not implemented for '{SCALAR_TYPE_NAME[common]}'")
        a, b = (_prims.to_numpy(_operand_as(t, common)) for t in (input, other))
        bits = a.dtype.itemsize * 8
        within = (b >= 0) & (b < bits)
        values = np.where(within, shifted(a, np.where(within, b, 0)), out_of_range(a))
        return _with_out(_prims.from_numpy(np.asarray(values, a.dtype), share_memory=False), out)

    def shift_(self, other):
        common = _prims.result_type(self, other)
        if common.is_floating_point and not self.dtype.is_floating_point:  # PyTorch checks this before the kernel
            raise RuntimeError(
                f"result type {SCALAR_TYPE_NAME[common]} can't be cast to the desired output type "
                f"{SCALAR_TYPE_NAME[self.dtype]}"
            )
        return _in_place(shift, self, other)

    def operator(self, other):  # x << y; NotImplemented lets Python try other's __rlshift__ or refuse
        return shift(self, other) if isinstance(other, (Tensor, builtins.int, builtins.float)) else NotImplemented

    def reflected(self, other):  # 3 << x
        return shift(other, self) if isinstance(other, (builtins.int, builtins.float)) else NotImplemented

    shift.__name__ = shift.__qualname__ = name
    shift_.__name__ = shift_.__qualname__ = f"{name}_"
    return shift, shift_, operator, reflected


bitwise_left_shift, bitwise_left_shift_, _lshift, _rlshift = _shift(
    "bitwise_left_shift", "lshift", np.left_shift, lambda a: 0
)
bitwise_right_shift, bitwise_right_shift_, _rshift, _rrshift = _shift(
    "bitwise_right_shift",
    "rshift",
    np.right_shift,
    lambda a: np.where(a < 0, -1, 0),  # the sign bits
)


def _as_float64(operand):
    return _prims.to_dtype(operand, float64) if isinstance(operand, Tensor) else operand


def float_power(input, exponent, *, out=None):
    """pow in float64, as PyTorch's (its nodes: the operands' ToCopyBackward0, then pow's)."""
    _number_or_tensor_operands("float_power", input, exponent)
    return pow(_as_float64(input), _as_float64(exponent), out=out)


def float_power_(self, exponent):
    if self.dtype != float64:
        raise RuntimeError(
            f"the base given to float_power_ has dtype {SCALAR_TYPE_NAME[self.dtype]} but the operation's result "
            "requires dtype Double"
        )
    return self.pow_(_as_float64(exponent))


# ---- registration: the op table's rows, then the Tensor attributes and module functions that are not ops


# ---- small math of the torch namespace (session 19): compositions of the ops above


def _tensor_other(name, other):
    if not isinstance(other, Tensor):
        raise TypeError(f"{name}(): argument 'other' (position 2) must be Tensor, not {builtins.type(other).__name__}")
    return other


def _nan_ignoring(name, node, prefers_input):
    """fmax or fmin: input where prefers_input(input, other) or other is NaN, else other (NaN only
    where both are); the gradient goes to the operand taken (PyTorch's rule: ties go to input)."""

    def extreme(input, other, *, out=None):
        x, y = input.detach(), _tensor_other(name, other).detach()
        result = where(prefers_input(x, y) | isnan(y), x, y)

        def backward(grads, x, y):
            takes_input = prefers_input(x, y) | isnan(y)
            return [
                _sum_to(where(takes_input, grads[0], 0), x.shape),
                _sum_to(where(takes_input, 0, grads[0]), y.shape),
            ]

        return _with_out(_recorded(node, [input, other], [result], [input, other], backward)[0], out)

    extreme.__name__ = extreme.__qualname__ = name
    return extreme


fmax = _nan_ignoring("fmax", "FmaxBackward0", operator.ge)
fmin = _nan_ignoring("fmin", "FminBackward0", operator.le)


def sinc(input, *, out=None):
    """sin(pi x) / (pi x), 1 at 0, where its derivative is 0; both are computed of a stand-in 1 at 0
    (no 0/0 on the way)."""
    x = _as_floating(input)
    at_zero = x == 0
    scaled = where(at_zero, 1.0, x) * math.pi
    result = where(at_zero, 1.0, scaled.sin() / scaled)

    def backward(grads, x):  # PyTorch's: (pi x cos(pi x) - sin(pi x)) / (pi x^2)
        at_zero = x == 0
        stand_in = where(at_zero, 1.0, x)
        scaled = stand_in * math.pi
        derivative = (scaled * scaled.cos() - scaled.sin()) / (scaled * stand_in)
        return [where(at_zero, 0.0, grads[0] * derivative)]

    return _with_out(_recorded("SincBackward0", [input], [result], [input], backward)[0], out)


def sinc_(input):
    return _in_place(sinc, input)


def diagflat(input, offset=0):
    return diag(input.flatten(), offset)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each of `elements` is among `test_elements` (either may be a number, not both)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(
            f"isin() received an invalid combination of arguments - got ({builtins.type(elements).__name__}, "
            f"{builtins.type(test_elements).__name__})"
        )
    shape = elements.shape if isinstance(elements, Tensor) else ()
    tests = test_elements.reshape(-1) if isinstance(test_elements, Tensor) else test_elements
    if isinstance(elements, Tensor):
        found = (
            (elements.reshape(-1, 1) == tests).any(1) if isinstance(tests, Tensor) else elements.reshape(-1) == tests
        )
    else:
        found = (tests == elements).any().reshape(1)
    found = found.reshape(shape)
    return found.logical_not() if invert else found


def split_with_sizes(input, split_sizes, dim=0):
    return split(input, list(split_sizes), dim)


def _directional_split(name, dim, least, input, indices_or_sections):
    if input.dim() < least:
        raise RuntimeError(
            f"torch.{name} requires a tensor with at least {least} dimension, but got a tensor with "
            f"{input.dim()} dimensions!"
        )
    if isinstance(indices_or_sections, (list, tuple)):
        return tensor_split(input, indices_or_sections, dim)
    sections = _index(indices_or_sections)
    if sections == 0 or input.shape[dim] % sections:
        raise RuntimeError(
            f"torch.{name} attempted to split along dimension {dim}, but the size of the dimension "
            f"{input.shape[dim]} is not divisible by the split_size {sections}!"
        )
    return tensor_split(input, sections, dim)


def hsplit(input, indices_or_sections):
    return _directional_split("hsplit", 0 if input.dim() == 1 else 1, 1, input, indices_or_sections)


def vsplit(input, indices_or_sections):
    return _directional_split("vsplit", 0, 2, input, indices_or_sections)


def dsplit(input, indices_or_sections):
    return _directional_split("dsplit", 2, 3, input, indices_or_sections)


def rsub(input, other, *, alpha=1):
    """other - alpha * input, rounded once as sub's fused loop."""
    _check_alpha(input, other, alpha)
    return _prims.rsub_scaled(input, other, alpha)


def unravel_index(indices, shape):
    """The coordinates in an array of `shape` of each flat index: (index // stride) % size per dim."""
    if indices.dtype.is_floating_point or indices.dtype is bool_:
        raise TypeError(
            f"expected 'indices' to be integer dtype, but got {indices.dtype}".replace("fastgrad.", "torch.")
        )
    shape = [shape] if isinstance(shape, builtins.int) else builtins.list(shape)
    if builtins.any(size < 0 for size in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {tuple(shape)}")
    strides = builtins.list(itertools.accumulate(reversed(shape[1:] + [1]), operator.mul))[::-1]
    coordinates = indices.unsqueeze(-1).floor_divide(_prims.from_numpy(np.array(strides, np.int64), share_memory=False))
    return (coordinates % _prims.from_numpy(np.array(shape, np.int64), share_memory=False)).unbind(-1)


def _trapezoid_spacing(name, y, x, dim):
    """x's differences along dim, shaped to broadcast against y's pairs of neighbours."""
    if x.dim() == 1:
        if x.shape[0] != y.shape[dim]:
            raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
        return x.diff().reshape([-1] + [1] * (y.dim() - 1 - dim))
    return x.diff(dim=dim)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoid rule along dim, in PyTorch's formulas: with a spacing dx, (sum - ends / 2) * dx;
    with sample points x, sum(dx_i (y_i + y_i+1)) / 2."""
    dim = _wrap_dim(_index(dim), y.dim())
    if x is not None and dx is not None:
        raise TypeError("trapezoid() received an invalid combination of arguments: x and dx together")
    if y.shape[dim] == 0:
        return _prims.full(builtins.list(y.shape[:dim] + y.shape[dim + 1 :]), 0, y.dtype)  # no samples: no history
    if x is None:
        return (y.sum(dim) - (y.select(dim, 0) + y.select(dim, -1)) * 0.5) * (1 if dx is None else dx)
    spacing = _trapezoid_spacing("trapezoid", y, x, dim)
    return (spacing * (y.narrow(dim, 1, y.shape[dim] - 1) + y.narrow(dim, 0, y.shape[dim] - 1))).sum(dim) / 2.0


def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    dim = _wrap_dim(_index(dim), y.dim())
    length = y.shape[dim]
    pairs = y.narrow(dim, 0, builtins.max(length - 1, 0)) + y.narrow(
        dim, builtins.min(1, length), builtins.max(length - 1, 0)
    )
    if x is None:
        return ((1 if dx is None else dx) / 2.0 * pairs).cumsum(dim)
    return (_trapezoid_spacing("cumulative_trapezoid", y, x, dim) * pairs / 2.0).cumsum(dim)


def is_same_size(input, other):
    return _tensor_input(input, "is_same_size").shape == _tensor_other("is_same_size", other).shape


def is_inference(input):
    return _tensor_input(input, "is_inference").is_inference()


def _compiled(source, name):
    """The function `name` defined by generated source, over this module's globals (as
    collections.namedtuple makes its class): plain Python, nothing interpreted per call. Its file name
    is in the package (anomaly mode's tracebacks leave out the package's frames), its source in
    linecache (tracebacks show the line)."""
    filename = os.path.join(os.path.dirname(__file__), f"<op table: {name}>")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {}
    exec(compile(source, filename, "exec"), globals(), namespace)
    return namespace[name]


TENSOR_ATTRIBUTES = {
    "__repr__": __repr__,
    "__str__": __repr__,
    "__format__": __format__,
    "__bool__": __bool__,
    "__float__": __float__,
    "__int__": __int__,
    "__index__": __index__,
    "__iter__": __iter__,
    "__array__": __array__,
    "__array_priority__": __array_priority__,
    "__array_wrap__": __array_wrap__,
    "__array_interface__": property(_array_interface),
    "__dlpack__": __dlpack__,
    "__dlpack_device__": __dlpack_device__,
    "__rmatmul__": __rmatmul__,
    "__reduce_ex__": _pickling.reduce_tensor,
    "__deepcopy__": __deepcopy__,
    "__copy__": __copy__,
    "tolist": tolist,
    "numpy": numpy,
    "size": size,
    "stride": stride,
    "T": property(_T),
    "mT": _matrix_transpose("mT"),
    "mH": _matrix_transpose("mH"),
    "H": property(_H),
    "nelement": lambda self: self.numel(),
    "ndimension": lambda self: self.dim(),
    "is_cpu": True,
    "itemsize": property(lambda self: self.element_size()),
    "nbytes": property(lambda self: self.numel() * self.element_size()),
    "device": property(_device),
    "is_cuda": False,
    "cpu": cpu,
    "cuda": cuda,
    "to": to,
    "type": type,
    "float": float,
    "double": double,
    "long": long,
    "bool": _bool,
    "type_as": type_as,
    "int": _to_dtype_method(int32),
    "short": _to_dtype_method(int16),
    "char": _to_dtype_method(int8),
    "byte": _to_dtype_method(uint8),
    "half": _to_dtype_method(float16),
    "bfloat16": _to_dtype_method(bfloat16),
    "requires_grad_": requires_grad_,
    "__lshift__": _lshift,
    "__rlshift__": _rlshift,
    "__ilshift__": bitwise_left_shift_,
    "__rshift__": _rshift,
    "__rrshift__": _rrshift,
    "__irshift__": bitwise_right_shift_,
}
# PyTorch's inter-op pool runs TorchScript's parallel forks, which fastgrad does not have: the count
# is only recorded, so that scripts setting it run unchanged, with PyTorch's checks (an int, positive,
# set at most once). Its default is PyTorch's: the CPUs, whatever OMP_NUM_THREADS says.
_interop_threads = None


def get_num_interop_threads():
    return _interop_threads or os.cpu_count() or 1


def set_num_interop_threads(n):
    global _interop_threads
    if not isinstance(n, int) or isinstance(n, bool):
        raise RuntimeError(f"set_num_interop_threads expects an int, but got {builtins.type(n).__name__}")
    if not -(2**63) <= n < 2**63:
        raise ValueError("Overflow when unpacking long long")
    if not -(2**31) <= n < 2**31:
        raise ValueError("Overflow when unpacking long")
    if n <= 0:
        raise RuntimeError("set_num_interop_threads expects a positive integer")
    if _interop_threads is not None:
        raise RuntimeError(
            "Error: cannot set number of interop threads after parallel work has started or "
            "set_num_interop_threads called"
        )
    _interop_threads = n


FUNCTIONS = {  # exported by the package
    "config": _prims.config,  # the backend's build and runtime configuration (SIMD ISA, threads)
    "set_num_threads": _prims.set_num_threads,
    "get_num_threads": _prims.get_num_threads,
    "set_num_interop_threads": set_num_interop_threads,
    "get_num_interop_threads": get_num_interop_threads,
}


def _taking_numpy_names(op, aliases):
    """op, also taking numpy's names for its parameters (`aliases`: pairs such as ("axis", "dim"))."""

    alias_names = frozenset(alias for alias, _ in aliases)

    @functools.wraps(op)
    def taking(*args, **kwargs):
        if not kwargs or alias_names.isdisjoint(kwargs):  # torch's names: no renaming (softmax, cat, topk per token)
            return op(*args, **kwargs)
        for alias, name in aliases:
            if alias in kwargs:
                if name in kwargs:  # both names: PyTorch's parser takes the alias for an unknown keyword
                    raise TypeError(f"{op.__name__}() got an unexpected keyword argument '{alias}'")
                kwargs[name] = kwargs.pop(alias)
        return op(*args, **kwargs)

    return taking


def register(module_name, namespace):
    """The one way the shared layer gives Tensor a method and the package a function: attaches the
    op table's rows implemented in `module_name` (`namespace`: its globals), each variant the row
    names. _methods registers its own rows and the _prims wrappers; _factories, _sampling and _hooks
    register theirs as they load."""
    for row in _optable.OPS:
        kind, _, target = row.impl.partition(".")
        if kind != module_name:
            continue
        op = _compiled(_optable.wrapper_source(row, target), row.name) if kind == "_prims" else namespace[target]
        aliases = _optable.numpy_names(row)
        if aliases:
            op = _taking_numpy_names(op, tuple(aliases.items()))
        if "function" in row.variants:
            FUNCTIONS[row.name] = op
        if "method" in row.variants:
            setattr(Tensor, row.name, op)
        if "inplace" in row.variants:
            setattr(Tensor, f"{row.name}_", _compiled(_optable.inplace_source(row), f"{row.name}_"))
        if "inplace_function" in row.variants:
            FUNCTIONS[f"{row.name}_"] = _compiled(_optable.inplace_function_source(row), f"{row.name}_")


for _name, _value in TENSOR_ATTRIBUTES.items():
    setattr(Tensor, _name, _value)
register("_prims", None)
register("_methods", globals())
# Tensor.view and Tensor.reshape given plain int sizes: the core's methods (the 8 views of a tiny
# GPT's forward); any other arguments still go through the wrappers above.
_prims._register_sizes_methods(Tensor.view, Tensor.reshape)
