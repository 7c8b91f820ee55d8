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
import linecache
import math
import operator
import sys
import os

import numpy as np

from . import _prims  # the backend: relative, so that the reference's copy of this module gets its own
from fastgrad import _formatting, _optable, return_types  # backend-independent: absolute, the same module for both
from fastgrad._types import SCALAR_TYPE_NAME, check_cpu, device, dtype as _dtype, float32, float64, int64, bool as bool_

Tensor = _prims.Tensor


# ---- argument helpers


def _sizes(args, what="size"):
    """(2, 3), ((2, 3),) and ([2, 3],) all mean the sizes [2, 3]; each an int64, as PyTorch unpacks them."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
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
    if isinstance(value, Tensor):
        return int(value.item())
    return operator.index(value)


def _int_argument(value, op, name, position):
    """_index(value), or PyTorch's TypeError naming the argument."""
    try:
        return _index(value)
    except TypeError:
        kind = builtins.type(value).__name__
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be int, not {kind}") from None


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
        _prims.to_numpy(self),
        dtype_name=repr(self.dtype),
        show_dtype=self.dtype is float64,
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


def __array_wrap__(self, array, context=None, return_scalar=False):
    """A numpy function's result back as a tensor (`x + ndarray` falls back on numpy's add, as in PyTorch)."""
    return _prims.from_numpy(array, share_memory=True)


def __rmatmul__(self, other):
    return NotImplemented


def __reduce_ex__(self, protocol):
    return (_rebuild, (self.detach().numpy().copy(), self.requires_grad))


def _rebuild(values, requires_grad):
    t = _prims.from_numpy(values, share_memory=False)
    return _prims.set_requires_grad(t, requires_grad) if requires_grad else t


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


def tolist(self):
    return _prims.to_numpy(self).tolist()


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
    if dtype is None:
        names = {bool_: "BoolTensor", int64: "LongTensor", float32: "FloatTensor", float64: "DoubleTensor"}
        return f"fastgrad.{names[self.dtype]}"
    return _prims.to_dtype(self, dtype)


def float(self):
    return _prims.to_dtype(self, float32)


def double(self):
    return _prims.to_dtype(self, float64)


def long(self):
    return _prims.to_dtype(self, int64)


def _bool(self):
    return _prims.to_dtype(self, bool_)


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


def _times_alpha(input, other, alpha):
    """other * alpha for add/sub, in the dtype of input + other: alpha takes no part in type
    promotion (torch.add(bool, bool, alpha=2) is bool), and may not be a float for integers."""
    if alpha == 1:
        return other
    try:
        dtype = _prims.result_type(input, other)
    except TypeError:  # neither a tensor nor a number: the primitive (add, sub_, ...) refuses it as PyTorch does
        return other
    if not dtype.is_floating_point and isinstance(alpha, builtins.float):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    scaled = other * alpha
    return _prims.to_dtype(scaled, dtype) if isinstance(scaled, Tensor) else scaled


def add(input, other, *, alpha=1, out=None):
    return _with_out(_prims.add(input, _times_alpha(input, other, alpha)), out)


def sub(input, other, *, alpha=1, out=None):
    return _with_out(_prims.sub(input, _times_alpha(input, other, alpha)), out)


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


def square_(self):
    return self.pow_(2)


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
    return _prims.add_(self, _times_alpha(self, other, alpha))


def sub_(self, other, *, alpha=1):
    return _prims.sub_(self, _times_alpha(self, other, alpha))


def copy_(self, src, non_blocking=False):
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' must be Tensor, not {builtins.type(src).__name__}")
    return _prims.copy_(self, src)


# ---- reductions


def mean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    if dtype is not None:
        input = _prims.to_dtype(input, dtype)
    return _with_out(_prims.mean(input, _dims(dim), keepdim), out)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = _prims.to_dtype(input, dtype)
    return _prims.prod(input, dim, keepdim)


def _correction(dim, unbiased, correction):
    """var/std accept var(dim, unbiased, keepdim), var(unbiased) and var(dim, correction=c)."""
    if isinstance(dim, builtins.bool):
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, correction


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dim, correction = _correction(dim, unbiased, correction)
    return _prims.var(input, _dims(dim), builtins.float(correction), keepdim)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
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
        return result(over_dim(input, _index(dim), keepdim))

    extreme.__name__ = extreme.__qualname__ = name
    return extreme


max, min = _extreme("max", _prims.maximum), _extreme("min", _prims.minimum)


# ---- sorting and selection: each row along `dim` ordered with NaN largest, ties in index order


def sort(input, dim=-1, descending=False, *, stable=None):
    """`stable` given (even False) is PyTorch's sort.stable overload, shown as SortBackward1; the
    order is stable either way."""
    return return_types.sort(_prims.sort(input, _index(dim), descending, stable))


def argsort(input, dim=-1, descending=False, *, stable=False):
    return _prims.argsort(input, _index(dim), descending)


def topk(input, k, dim=-1, largest=True, sorted=True):
    """Always in order: PyTorch leaves the order of sorted=False unspecified."""
    k = _int_argument(k, "topk", "k", 2)
    return return_types.topk(_prims.topk(input, k, _index(dim), largest))


def kthvalue(input, k, dim=-1, keepdim=False):
    k = _int_argument(k, "kthvalue", "k", 2)
    return return_types.kthvalue(_prims.kthvalue(input, k, _index(dim), keepdim))


def median(input, dim=None, keepdim=False):
    """The lower median: of all elements (a tensor), or along `dim` (values and indices)."""
    if dim is None:
        return _prims.median_all(input)
    return return_types.median(_prims.median_dim(input, _index(dim), keepdim))


def mode(input, dim=-1, keepdim=False):
    return return_types.mode(_prims.mode(input, _index(dim), keepdim))


def cummax(input, dim):
    return return_types.cummax(_prims.cummax(input, _index(dim)))


def cummin(input, dim):
    return return_types.cummin(_prims.cummin(input, _index(dim)))


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        input = _prims.to_dtype(input, dtype)
    dims = _dims(dim)
    if p == "fro" and len(dims) > 2:  # PyTorch hands this to matrix_norm, which refuses it
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dims))}")
    if p in ("fro", None):
        p = 2
    if p == "nuc" or isinstance(p, str):
        raise ValueError(f"norm: p={p!r} is not supported")
    return _prims.norm(input, builtins.float(p), dims, keepdim)


# ---- softmax: fused, numerically stable kernels. `dtype` converts the input first (ToCopyBackward0 shows).


def softmax(input, dim, dtype=None):
    if dtype is not None:
        input = _prims.to_dtype(input, dtype)
    return _prims.softmax(input, dim)


def log_softmax(input, dim, dtype=None):
    if dtype is not None:
        input = _prims.to_dtype(input, dtype)
    return _prims.log_softmax(input, dim)


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
    return _prims.squeeze(input, None if dim is None else _dims(dim))


def numel(input):
    return input.numel()


def is_tensor(obj):
    return isinstance(obj, Tensor)


# ---- composed from the ops above (their graphs record the parts, e.g. SliceBackward0 for split)


def is_floating_point(input):
    return input.dtype.is_floating_point


def split(tensor, split_size_or_sections, dim=0):
    if tensor.dim() == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    dim = _wrap_dim(_index(dim), tensor.dim())
    length = tensor.shape[dim]
    if isinstance(split_size_or_sections, (list, tuple)):
        sections = [_index(s) for s in split_size_or_sections]
        if builtins.sum(sections) != length or builtins.any(s < 0 for s in sections):
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {length} (input tensor's size "
                f"at dimension {dim}), but got split_sizes={sections}"
            )
    else:
        size = _index(split_size_or_sections)
        if size < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got split_size={size}")
        if size == 0 and length != 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {length}")
        sections = [builtins.min(size, length - start) for start in builtins.range(0, length, size)] or [0]
    starts = [builtins.sum(sections[:i]) for i in builtins.range(len(sections))]
    before = (builtins.slice(None),) * dim
    return tuple(tensor[before + (builtins.slice(a, a + n),)] for a, n in zip(starts, sections))


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
        c_type = {int64: "long int", float32: "float", float64: "double"}[mask.dtype]  # as PyTorch names it here
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {c_type}")
    fill = value if isinstance(value, Tensor) else _prims.full([], value, input.dtype)
    return _prims.where(mask, _prims.to_dtype(fill, input.dtype), input)


def masked_fill_(self, mask, value):
    return self.copy_(masked_fill(self, mask, value))


def all(input, dim=None, keepdim=False):
    nonzero = _prims.to_dtype(_prims.ne(input, 0), int64)
    if dim is None:
        return _prims.eq(_prims.sum(nonzero, [], False, None), input.numel())
    dim = _wrap_dim(_index(dim), input.dim())
    return _prims.eq(_prims.sum(nonzero, [dim], keepdim, None), input.shape[dim] if input.dim() else 1)


def any(input, dim=None, keepdim=False):
    nonzero = _prims.to_dtype(_prims.ne(input, 0), int64)
    return _prims.gt(_prims.sum(nonzero, _dims(dim), keepdim, None), 0)


def _check_gather_index(index, dim, size):
    """gather takes indices in [0, size) only: indexing would wrap a negative one."""
    if index.numel() == 0:
        return
    low, high = _prims.amin(index, [], False).item(), _prims.amax(index, [], False).item()
    if low < 0 or high >= size:
        raise RuntimeError(f"index {low if low < 0 else high} is out of bounds for dimension {dim} with size {size}")


def gather(input, dim, index):
    """out[i][j] = input[index[i][j]][j] (dim 0): advanced indexing where every other dim is indexed
    by its own coordinates."""
    if not isinstance(index, Tensor) or index.dtype is not int64:
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    if input.dim() == 0 or index.dim() == 0:  # 0-d and 1-d mix as if both were 1-d
        if builtins.max(input.dim(), index.dim()) > 1:
            raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
        _wrap_dim(_index(dim), 1)
        _check_gather_index(index, 0, input.numel())
        return input.reshape(-1)[index.reshape(-1)].reshape(list(index.shape))
    if index.dim() != input.dim():
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    dim = _wrap_dim(_index(dim), input.dim())
    for d in builtins.range(input.dim()):
        if d != dim and index.shape[d] > input.shape[d]:
            raise RuntimeError(
                f"Size does not match at dimension {d} expected index {list(index.shape)} to be "
                f"no larger than self {list(input.shape)} apart from dimension {dim}"
            )
    _check_gather_index(index, dim, input.shape[dim])
    key = [
        _prims.arange(0, n, 1, int64).reshape([-1 if i == d else 1 for i in builtins.range(index.dim())])
        for d, n in enumerate(index.shape)
    ]
    key[dim] = index
    return input[tuple(key)]


# ---- registration: the op table's rows, then the Tensor attributes and module functions that are not ops


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
    "__rmatmul__": __rmatmul__,
    "__reduce_ex__": __reduce_ex__,
    "__deepcopy__": __deepcopy__,
    "__copy__": __copy__,
    "tolist": tolist,
    "numpy": numpy,
    "size": size,
    "stride": stride,
    "T": property(_T),
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
    "requires_grad_": requires_grad_,
}
FUNCTIONS = {  # exported by the package
    "config": _prims.config,  # the backend's build and runtime configuration (SIMD ISA, threads)
    "set_num_threads": _prims.set_num_threads,
    "get_num_threads": _prims.get_num_threads,
}


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
        if "function" in row.variants:
            FUNCTIONS[row.name] = op
        if "method" in row.variants:
            setattr(Tensor, row.name, op)
        if "inplace" in row.variants:
            setattr(Tensor, f"{row.name}_", _compiled(_optable.inplace_source(row), f"{row.name}_"))


for _name, _value in TENSOR_ATTRIBUTES.items():
    setattr(Tensor, _name, _value)
register("_prims", None)
register("_methods", globals())
