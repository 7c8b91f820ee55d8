"""Tensor methods with Python-style signatures, attached to the C++ Tensor type.

The arithmetic operators, attributes and autograd entry points are bound in C++
(csrc/python/tensor_bind.cpp); what is here parses flexible arguments (sizes as varargs or a
tuple, `dim=None | int | tuple`, keyword options) and calls the fixed-signature primitives in `_C`.
Each method is also exported as a module-level function (fastgrad.sum(x, 0) == x.sum(0)).
"""
import builtins
import collections
import math

import numpy as np

from . import _C, _formatting
from ._types import Size, device, dtype as _dtype, float32, float64, int64, bool as bool_, ALL_DTYPES

Tensor = _C.Tensor
_C._register_types(ALL_DTYPES, Size)

_max_result = collections.namedtuple("max", ["values", "indices"])
_min_result = collections.namedtuple("min", ["values", "indices"])

# Methods collected here are attached to Tensor; those in _FUNCTIONS also become module functions.
_METHODS = {}
_FUNCTIONS = {}


def method(func=None, *, function=True):
    def register(f):
        _METHODS[f.__name__] = f
        if function:
            _FUNCTIONS[f.__name__] = f
        return f

    return register(func) if func is not None else register


# ---- argument helpers

def _sizes(args, what="size"):
    """(2, 3), ((2, 3),) and ([2, 3],) all mean the sizes [2, 3]."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    try:
        return [_index(a) for a in args]
    except TypeError:
        names = ", ".join(type(a).__name__ for a in args)
        raise TypeError(f"{what} must be a tuple of ints, but got ({names})") from None


def _index(value):
    if isinstance(value, Tensor):
        return int(value.item())
    return value.__index__()


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
    """Implements `out=`: the result's values land in `out`, which is returned."""
    if out is None:
        return result
    if out.shape == result.shape and out.dtype == result.dtype:
        _C.copy_(out, result.detach())
    else:
        out.data = result.detach()
    return out


# ---- printing and conversion to Python

def __repr__(self):
    grad_fn = self.grad_fn
    return _formatting.tensor_repr(
        _C.to_numpy(self),
        dtype_name=repr(self.dtype),
        show_dtype=self.dtype is float64,
        grad_fn=grad_fn.name() if grad_fn is not None else None,
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
        raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous")
    return builtins.bool(self.item())


def _one_element(self):
    if self.numel() != 1:
        raise RuntimeError("only one element tensors can be converted to Python scalars")
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


def __array__(self, dtype=None, copy=None):
    values = _C.to_numpy(self)
    return values if dtype is None else values.astype(dtype)


def __rmatmul__(self, other):
    return NotImplemented


def __reduce_ex__(self, protocol):
    return (_rebuild, (self.detach().numpy().copy(), self.requires_grad))


def _rebuild(values, requires_grad):
    t = _C.from_numpy(values, share_memory=False)
    return _C.set_requires_grad(t, requires_grad) if requires_grad else t


def __deepcopy__(self, memo):
    copy = _C.clone(self.detach())
    if self.is_leaf and self.requires_grad:
        _C.set_requires_grad(copy, True)
    memo[id(self)] = copy
    return copy


def tolist(self):
    return _C.to_numpy(self).tolist()


def numpy(self, *, force=False):
    if self.requires_grad and not force:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
    return _C.to_numpy(self)


def size(self, dim=None):
    if dim is None:
        return self.shape
    return self.shape[_wrap_dim(_index(dim), self.dim())]


def stride(self, dim=None):
    strides = self._strides()
    return strides if dim is None else strides[_wrap_dim(_index(dim), self.dim())]


def _T(self):
    return _C.permute(self, list(range(self.dim() - 1, -1, -1)))


# ---- device and dtype conversion

def _device(self):
    return device("cpu")


def cpu(self):
    return self


def cuda(self, *args, **kwargs):
    raise RuntimeError("fastgrad runs on the CPU only (no CUDA support)")


def to(self, *args, dtype=None, device=None, copy=False, non_blocking=False):
    for arg in args:
        if isinstance(arg, _dtype):
            dtype = arg
        elif isinstance(arg, Tensor):
            dtype = arg.dtype
        else:
            globals()["device"](arg)  # validates: only the CPU exists
    if device is not None:
        globals()["device"](device)
    result = self if dtype is None else _C.to_dtype(self, dtype)
    return _C.clone(result) if copy and result is self else result


def type(self, dtype=None):
    if dtype is None:
        names = {bool_: "BoolTensor", int64: "LongTensor", float32: "FloatTensor", float64: "DoubleTensor"}
        return f"fastgrad.{names[self.dtype]}"
    return _C.to_dtype(self, dtype)


def float(self):
    return _C.to_dtype(self, float32)


def double(self):
    return _C.to_dtype(self, float64)


def long(self):
    return _C.to_dtype(self, int64)


def _bool(self):
    return _C.to_dtype(self, bool_)


# ---- autograd helpers

def requires_grad_(self, requires_grad=True):
    if requires_grad and not self.dtype.is_floating_point:
        raise RuntimeError("only Tensors of floating point dtype can require gradients")
    return _C.set_requires_grad(self, requires_grad)


@method
def clone(input):
    return _C.clone(input)


# ---- elementwise

@method
def add(input, other, *, alpha=1, out=None):
    return _with_out(_C.add(input, other if alpha == 1 else other * alpha), out)


@method
def sub(input, other, *, alpha=1, out=None):
    return _with_out(_C.sub(input, other if alpha == 1 else other * alpha), out)


@method
def mul(input, other, *, out=None):
    return _with_out(_C.mul(input, other), out)


@method
def div(input, other, *, rounding_mode=None, out=None):
    if rounding_mode is not None:
        raise NotImplementedError("div(rounding_mode=...) is not supported")
    return _with_out(_C.div(input, other), out)


@method
def pow(input, exponent, *, out=None):
    if not isinstance(input, Tensor):  # fastgrad.pow(2, x)
        return _with_out(_C.rpow(exponent, input), out)
    return _with_out(_C.pow(input, exponent), out)


def _with_out_form(name):
    """fastgrad.<name>(input, *args, out=None) and Tensor.<name>(*args) for the primitive _C.<name>."""
    primitive = getattr(_C, name)

    def op(input, *args, out=None):
        return _with_out(primitive(input, *args), out)

    op.__name__ = name
    return method(op)


for _name in ["neg", "abs", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "sign"]:
    _with_out_form(_name)
negative = _FUNCTIONS["negative"] = _FUNCTIONS["neg"]


@method
def clamp(input, min=None, max=None, *, out=None):
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        for bound in (min, max):
            if bound is not None and not isinstance(bound, Tensor):
                raise TypeError("clamp(): min and max must both be tensors or both be numbers, "
                                f"got {builtins.type(min).__name__} and {builtins.type(max).__name__}")
        return _with_out(_C.clamp_tensor(input, min, max), out)
    return _with_out(_C.clamp(input, min, max), out)


clip = _FUNCTIONS["clip"] = _METHODS["clip"] = clamp


def where(condition, input, other):
    return _C.where(condition, input, other)


_FUNCTIONS["where"] = where


@method(function=False)
def _where_method(self, condition, other):
    return _C.where(condition, self, other)


def _comparison(name, dunder):
    def op(input, other, *, out=None):
        return _with_out(getattr(Tensor, dunder)(input, other), out)

    op.__name__ = name
    return method(op)


for _name, _dunder in [("lt", "__lt__"), ("le", "__le__"), ("gt", "__gt__"), ("ge", "__ge__"), ("eq", "__eq__"),
                       ("ne", "__ne__")]:
    _comparison(_name, _dunder)


@method
def equal(input, other):
    return input.shape == other.shape and builtins.bool(_C.to_numpy((input == other)).all())


@method
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return builtins.bool(np.allclose(_C.to_numpy(input.detach()), _C.to_numpy(other.detach()), rtol=rtol, atol=atol,
                                     equal_nan=equal_nan))


@method
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    close = np.isclose(_C.to_numpy(input.detach()), _C.to_numpy(other.detach()), rtol=rtol, atol=atol,
                       equal_nan=equal_nan)
    return _C.from_numpy(np.asarray(close), share_memory=False)


# ---- in place

def _inplace_with_alpha(primitive):
    def op(self, other, *, alpha=1):
        return primitive(self, other if alpha == 1 else other * alpha)

    return op


_METHODS["add_"] = _inplace_with_alpha(_C.add_)
_METHODS["sub_"] = _inplace_with_alpha(_C.sub_)


def clamp_(self, min=None, max=None):
    return _C.clamp_(self, min, max)


def fill_(self, value):
    return _C.fill_(self, value)


def zero_(self):
    return _C.zero_(self)


def copy_(self, src, non_blocking=False):
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' must be Tensor, not {builtins.type(src).__name__}")
    return _C.copy_(self, src)


# ---- reductions

@method
def sum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    return _with_out(_C.sum(input, _dims(dim), keepdim, dtype), out)


@method
def mean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    if dtype is not None:
        input = _C.to_dtype(input, dtype)
    return _with_out(_C.mean(input, _dims(dim), keepdim), out)


@method
def prod(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = _C.to_dtype(input, dtype)
    return _C.prod(input, dim, keepdim)


def _correction(dim, unbiased, correction):
    """var/std accept var(dim, unbiased, keepdim), var(unbiased) and var(dim, correction=c)."""
    if isinstance(dim, builtins.bool):
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, correction


@method
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dim, correction = _correction(dim, unbiased, correction)
    return _C.var(input, _dims(dim), builtins.float(correction), keepdim)


@method
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dim, correction = _correction(dim, unbiased, correction)
    return _C.std(input, _dims(dim), builtins.float(correction), keepdim)


@method
def max(input, dim=None, keepdim=False, *, out=None):
    if isinstance(dim, Tensor):
        return _with_out(_C.maximum(input, dim), out)
    if dim is None:
        return _C.max_all(input)
    return _max_result(*_C.max_dim(input, _index(dim), keepdim))


@method
def min(input, dim=None, keepdim=False, *, out=None):
    if isinstance(dim, Tensor):
        return _with_out(_C.minimum(input, dim), out)
    if dim is None:
        return _C.min_all(input)
    return _min_result(*_C.min_dim(input, _index(dim), keepdim))


@method
def amax(input, dim=(), keepdim=False):
    return _C.amax(input, _dims(dim), keepdim)


@method
def amin(input, dim=(), keepdim=False):
    return _C.amin(input, _dims(dim), keepdim)


@method
def argmax(input, dim=None, keepdim=False):
    return _C.argmax(input, dim, keepdim)


@method
def argmin(input, dim=None, keepdim=False):
    return _C.argmin(input, dim, keepdim)


@method
def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        input = _C.to_dtype(input, dtype)
    dims = _dims(dim)
    if p == "fro" and len(dims) > 2:  # PyTorch hands this to matrix_norm, which refuses it
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dims))}")
    if p in ("fro", None):
        p = 2
    if p == "nuc" or isinstance(p, str):
        raise ValueError(f"norm: p={p!r} is not supported")
    return _C.norm(input, builtins.float(p), dims, keepdim)


# ---- products

for _name in ["matmul", "mm", "bmm", "mv", "dot", "maximum", "minimum"]:
    _with_out_form(_name)


# ---- shapes

def reshape(self, *shape):
    return _C.reshape(self, _sizes(shape, "shape"))


def view(self, *shape):
    return _C.view(self, _sizes(shape, "shape"))


def view_as(self, other):
    return _C.view(self, list(other.shape))


def reshape_as(self, other):
    return _C.reshape(self, list(other.shape))


def expand(self, *sizes):
    return _C.expand(self, _sizes(sizes))


def expand_as(self, other):
    return _C.expand(self, list(other.shape))


def permute(self, *dims):
    if not dims:
        raise TypeError('permute() missing 1 required positional arguments: "dims"')
    return _C.permute(self, _sizes(dims, "dims"))


@method
def transpose(input, dim0, dim1):
    return _C.transpose(input, _index(dim0), _index(dim1))


swapaxes = _FUNCTIONS["swapaxes"] = _METHODS["swapaxes"] = transpose


@method
def t(input):
    return _C.t(input)


@method
def squeeze(input, dim=None):
    return _C.squeeze(input, None if dim is None else _dims(dim))


@method
def unsqueeze(input, dim):
    return _C.unsqueeze(input, _index(dim))


@method
def flatten(input, start_dim=0, end_dim=-1):
    return _C.flatten(input, _index(start_dim), _index(end_dim))


for _name in ["reshape", "permute"]:
    # fastgrad.reshape(x, (2, 3)) / fastgrad.permute(x, (1, 0)) take the sizes as one argument.
    _FUNCTIONS[_name] = (lambda f: lambda input, shape: f(input, shape))(globals()[_name])


def cat(tensors, dim=0, *, out=None):
    return _with_out(_C.cat(tensors, _index(dim)), out)


def stack(tensors, dim=0, *, out=None):
    return _with_out(_C.stack(tensors, _index(dim)), out)


def numel(input):
    return input.numel()


def is_tensor(obj):
    return isinstance(obj, Tensor)


# ---- attach
for _name, _value in {
    "__repr__": __repr__, "__str__": __repr__, "__format__": __format__, "__bool__": __bool__,
    "__float__": __float__, "__int__": __int__, "__index__": __index__, "__iter__": __iter__,
    "__array__": __array__, "__reduce_ex__": __reduce_ex__, "__deepcopy__": __deepcopy__,
    "tolist": tolist, "numpy": numpy, "size": size, "stride": stride, "T": property(_T),
    "device": property(_device), "is_cuda": False, "cpu": cpu, "cuda": cuda, "to": to, "type": type,
    "float": float, "double": double, "long": long, "bool": _bool,
    "requires_grad_": requires_grad_,
    "clamp_": clamp_, "clip_": clamp_, "fill_": fill_, "zero_": zero_, "copy_": copy_,
    "reshape": reshape, "view": view, "view_as": view_as, "reshape_as": reshape_as, "expand": expand,
    "expand_as": expand_as, "permute": permute, "where": _where_method,
}.items():
    setattr(Tensor, _name, _value)
for _name, _value in _METHODS.items():
    if not _name.startswith("_"):
        setattr(Tensor, _name, _value)
_FUNCTIONS.update(cat=cat, stack=stack, numel=numel, is_tensor=is_tensor, concat=cat, concatenate=cat)
