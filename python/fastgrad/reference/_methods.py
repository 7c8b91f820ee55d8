"""Tensor methods and module-level functions, with the signatures of fastgrad's (python/fastgrad/_tensor.py):
sizes as varargs or a tuple, `dim=None | int | tuple`, keyword options, `out=`. Each parses its
arguments and calls the op; most methods are also module functions (fastgrad.sum(x, 0) == x.sum(0)).
"""
import builtins
import collections
import math
import operator

from .._types import device as _device, dtype as _dtype, float32, float64, int64, bool as bool_
from . import _elementwise as ew, _index, _inplace, _matmul, _reduce, _shape
from ._autograd import run_backward
from ._storage import cast
from ._tensor import Tensor, broadcast_shapes, full, new_tensor, number_or_none, read, wrap_dim

_max_result = collections.namedtuple("max", ["values", "indices"])
_min_result = collections.namedtuple("min", ["values", "indices"])

METHODS = {}    # attached to Tensor
FUNCTIONS = {}  # exported by the package


def method(func=None, *, function=True):
    def register(f):
        METHODS[f.__name__] = f
        if function:
            FUNCTIONS[f.__name__] = f
        return f

    return register(func) if func is not None else register


# ---- argument helpers

def index_value(value):
    return int(value.item()) if isinstance(value, Tensor) else value.__index__()


def sizes(args, what="size"):
    """(2, 3), ((2, 3),) and ([2, 3],) all mean the sizes [2, 3]."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    try:
        return [index_value(a) for a in args]
    except TypeError:
        names = ", ".join(type(a).__name__ for a in args)
        raise TypeError(f"{what} must be a tuple of ints, but got ({names})") from None


def _dims(dim):
    """None -> [] (all dims); int -> [int]; tuple/list -> list."""
    if dim is None:
        return []
    if isinstance(dim, (tuple, list)):
        return [index_value(d) for d in dim]
    return [index_value(dim)]


def _optional_int(dim):
    try:
        return None if dim is None else operator.index(dim)
    except TypeError:  # the core's argument conversion says RuntimeError
        raise RuntimeError(f"dim must be None or an int, not {builtins.type(dim).__name__}") from None


def _with_out(result, out):
    """Implements `out=`: the result's values land in `out`, which is returned."""
    if out is None:
        return result
    if out._shape == result._shape and out._dtype is result._dtype:
        _inplace.copy_(out, result.detach())
    else:
        out.data = result.detach()
    return out


def _require_tensors(name, *args):
    for arg in args:
        if not isinstance(arg, Tensor):
            raise TypeError(f"{name}(): incompatible function arguments: expected Tensor, got {type(arg).__name__}")


def _operator(op, reflected=False):
    """op(tensor, tensor-or-number) as a Python operator: numbers are passed on as they are, other
    operands give NotImplemented so that Python can try the other side."""
    def apply(a, b):
        if isinstance(b, Tensor) and not reflected:
            return op(a, b)
        number = number_or_none(b)
        return NotImplemented if number is None else op(a, number)

    return apply


def _compare(op):
    return lambda a, b: ew.compare(a, b, op)


_add, _sub, _mul, _div = (_operator(node.run) for node in (ew.AddBackward0, ew.SubBackward0, ew.MulBackward0,
                                                               ew.DivBackward0))
_pow = _operator(ew.pow)
_add_, _sub_, _mul_, _div_ = (_operator(op) for op in (_inplace.add_, _inplace.sub_, _inplace.mul_, _inplace.div_))


# ---- operators
OPERATORS = {
    "__add__": _add, "__radd__": _operator(ew.AddBackward0.run, True),
    "__sub__": _sub, "__rsub__": _operator(ew.RsubBackward1.run, True),
    "__mul__": _mul, "__rmul__": _operator(ew.MulBackward0.run, True),
    "__truediv__": _div, "__rtruediv__": _operator(ew.rdiv, True),
    "__pow__": _pow, "__rpow__": _operator(ew.PowBackward2.run, True),
    "__iadd__": _add_, "__isub__": _sub_, "__imul__": _mul_, "__itruediv__": _div_, "mul_": _mul_, "div_": _div_,
    "__lt__": _operator(_compare(operator.lt)), "__le__": _operator(_compare(operator.le)),
    "__gt__": _operator(_compare(operator.gt)), "__ge__": _operator(_compare(operator.ge)),
    "__eq__": _operator(_compare(operator.eq)), "__ne__": _operator(_compare(operator.ne)),
    "__neg__": lambda x: ew.NegBackward0.run(x), "__abs__": lambda x: ew.AbsBackward0.run(x),
    "__matmul__": lambda a, b: _matmul.matmul(a, b) if isinstance(b, Tensor) else NotImplemented,
    "__rmatmul__": lambda a, b: NotImplemented,
    "__getitem__": _index.getitem, "__setitem__": _index.setitem,
}


# ---- conversion, device, autograd entry points

def _T(self):
    return _shape.permute(self, list(range(self.dim() - 1, -1, -1)))


def size(self, dim=None):
    return self.shape if dim is None else self._shape[wrap_dim(index_value(dim), self.dim())]


def stride(self, dim=None):
    return self._strides if dim is None else self._strides[wrap_dim(index_value(dim), self.dim())]


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
            _device(arg)  # validates: only the CPU exists
    if device is not None:
        _device(device)
    result = self if dtype is None else ew.to_dtype(self, dtype)
    return ew.clone(result) if copy and result is self else result


def _type(self, dtype=None):
    if dtype is None:
        names = {bool_: "BoolTensor", int64: "LongTensor", float32: "FloatTensor", float64: "DoubleTensor"}
        return f"fastgrad.{names[self.dtype]}"
    return ew.to_dtype(self, dtype)


def requires_grad_(self, requires_grad=True):
    if requires_grad and not self.dtype.is_floating_point:
        raise RuntimeError("only Tensors of floating point dtype can require gradients")
    self.requires_grad = requires_grad
    return self


def backward(self, gradient=None, retain_graph=None, create_graph=False):
    if create_graph:
        raise ValueError("create_graph=True (higher-order gradients) is not supported yet")
    if not self.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if gradient is None:
        if self.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        gradient = full(self._shape, 1, self._dtype)
    else:
        if not isinstance(gradient, Tensor):
            raise RuntimeError(f"backward(): gradient must be a Tensor, not {builtins.type(gradient).__name__}")
        if gradient._shape != self._shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {gradient.shape} and output[0] has "
                               f"a shape of {self.shape}.")
        gradient = ew.to_dtype(gradient, self._dtype)
    run_backward([self], [gradient], create_graph if retain_graph is None else builtins.bool(retain_graph))


def __deepcopy__(self, memo):
    copy = ew.clone(self.detach())
    copy._requires_grad_leaf = self.is_leaf and self.requires_grad
    memo[id(self)] = copy
    return copy


@method
def clone(input):
    return ew.clone(input)


def contiguous(self):
    return ew.contiguous(self)


# ---- elementwise

@method
def add(input, other, *, alpha=1, out=None):
    return _with_out(_add(input, other if alpha == 1 else other * alpha), out)


@method
def sub(input, other, *, alpha=1, out=None):
    return _with_out(_sub(input, other if alpha == 1 else other * alpha), out)


@method
def mul(input, other, *, out=None):
    return _with_out(_mul(input, other), out)


@method
def div(input, other, *, rounding_mode=None, out=None):
    if rounding_mode is not None:
        raise NotImplementedError("div(rounding_mode=...) is not supported")
    return _with_out(_div(input, other), out)


@method
def pow(input, exponent, *, out=None):
    if not isinstance(input, Tensor):  # fastgrad.pow(2, x): the base is taken as a float
        return _with_out(ew.PowBackward2.run(exponent, builtins.float(input)), out)
    return _with_out(_pow(input, exponent), out)


def _with_out_form(name, primitive):
    """fastgrad.<name>(input, *tensors, out=None) and Tensor.<name>(*tensors)."""
    def op(input, *args, out=None):
        _require_tensors(name, input, *args)
        return _with_out(primitive(input, *args), out)

    op.__name__ = name
    return method(op)


for _name, _node in [("neg", ew.NegBackward0), ("abs", ew.AbsBackward0), ("exp", ew.ExpBackward0),
                     ("log", ew.LogBackward0), ("sqrt", ew.SqrtBackward0), ("sin", ew.SinBackward0),
                     ("cos", ew.CosBackward0), ("tanh", ew.TanhBackward0), ("sigmoid", ew.SigmoidBackward0),
                     ("relu", ew.ReluBackward0), ("maximum", ew.MaximumBackward0), ("minimum", ew.MinimumBackward0)]:
    _with_out_form(_name, _node.run)
for _name, _function in [("sign", ew.sign), ("matmul", _matmul.matmul), ("mm", _matmul.mm), ("bmm", _matmul.bmm),
                         ("mv", _matmul.mv), ("dot", _matmul.dot)]:
    _with_out_form(_name, _function)
FUNCTIONS["negative"] = FUNCTIONS["neg"]


@method
def clamp(input, min=None, max=None, *, out=None):
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        for bound in (min, max):
            if bound is not None and not isinstance(bound, Tensor):
                raise TypeError("clamp(): min and max must both be tensors or both be numbers, "
                                f"got {builtins.type(min).__name__} and {builtins.type(max).__name__}")
        return _with_out(ew.ClampBackward0.run(input, min, max), out)
    return _with_out(ew.ClampBackward1.run(input, min=min, max=max), out)


FUNCTIONS["clip"] = METHODS["clip"] = clamp


def _where_operand(value):
    """A number operand of where() becomes a 0-d tensor of its kind's default dtype; 0-d tensors
    then promote the way PyTorch's wrapped numbers do here (where(c, int64_tensor, 0.5) is float32)."""
    if isinstance(value, Tensor):
        return value
    number = number_or_none(value)
    if number is None:
        raise TypeError(f"expected Tensor or number, got {builtins.type(value).__name__}")
    return full((), number, ew.scalar_dtype(number))


def where(condition, input, other):
    _require_tensors("where", condition)
    return ew.where(condition, _where_operand(input), _where_operand(other))


FUNCTIONS["where"] = where
METHODS["where"] = lambda self, condition, other: where(condition, self, other)


def _comparison(name, dunder):
    def op(input, other, *, out=None):
        return _with_out(OPERATORS[dunder](input, other), out)

    op.__name__ = name
    return method(op)


for _name in ["lt", "le", "gt", "ge", "eq", "ne"]:
    _comparison(_name, f"__{_name}__")


@method
def equal(input, other):
    return input._shape == other._shape and builtins.all(read(ew.compare(input, other, operator.eq)))


def _close(input, other, rtol, atol, equal_nan):
    """numpy.isclose, element by element: |x - y| <= atol + rtol * |y| for finite y, or x == y, or
    both NaN with equal_nan. Like numpy, it works in float32 when the operands are float32."""
    shape = broadcast_shapes(input._shape, other._shape)
    y_type = float32 if other._dtype is float32 else float64
    diff_type = float32 if y_type is float32 and input._dtype in (float32, bool_) else float64

    def rounded(values, dtype):
        return cast(values, float64, dtype)

    xs = cast(read(input, shape), input._dtype, float64)
    ys = cast(read(other, shape), other._dtype, y_type)
    diffs = rounded([builtins.abs(x - y) for x, y in zip(xs, ys)], diff_type)
    rtol, atol = rounded([rtol, atol], y_type)
    tolerances = rounded([atol + t for t in rounded([rtol * builtins.abs(y) for y in ys], y_type)], y_type)
    close = [(d <= t and math.isfinite(y)) or x == y or (equal_nan and x != x and y != y)
             for x, y, d, t in zip(xs, ys, diffs, tolerances)]
    return close, shape


@method
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return builtins.all(_close(input, other, rtol, atol, equal_nan)[0])


@method
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return new_tensor(*_close(input, other, rtol, atol, equal_nan), bool_)


# ---- in place

def add_(self, other, *, alpha=1):
    return _add_(self, other if alpha == 1 else other * alpha)


def sub_(self, other, *, alpha=1):
    return _sub_(self, other if alpha == 1 else other * alpha)


def clamp_(self, min=None, max=None):
    return _inplace.clamp_(self, min, max)


def fill_(self, value):
    if not isinstance(value, Tensor):
        value = number_or_none(value)
        if value is None:
            raise TypeError("fill_() expects a number or a 0-dim tensor")
    return _inplace.fill_(self, value)


def zero_(self):
    return _inplace.zero_(self)


def copy_(self, src, non_blocking=False):
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' must be Tensor, not {builtins.type(src).__name__}")
    return _inplace.copy_(self, src)


# ---- reductions

@method
def sum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    return _with_out(_reduce.sum(input, _dims(dim), keepdim, dtype), out)


@method
def mean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    if dtype is not None:
        input = ew.to_dtype(input, dtype)
    return _with_out(_reduce.mean(input, _dims(dim), keepdim), out)


@method
def prod(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = ew.to_dtype(input, dtype)
    return _reduce.prod(input, _optional_int(dim), keepdim)


def _correction(dim, unbiased, correction):
    """var/std accept var(dim, unbiased, keepdim), var(unbiased) and var(dim, correction=c)."""
    if isinstance(dim, builtins.bool):
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, builtins.float(correction)


@method
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dim, correction = _correction(dim, unbiased, correction)
    return _reduce.var(input, _dims(dim), correction, keepdim)


@method
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dim, correction = _correction(dim, unbiased, correction)
    return _reduce.std(input, _dims(dim), correction, keepdim)


def _extreme(name, all_elements, along_dim, elementwise, result):
    """max / min: of all elements, along a dim (values and indices), or elementwise with a tensor."""
    def op(input, dim=None, keepdim=False, *, out=None):
        if isinstance(dim, Tensor):
            return _with_out(elementwise.run(input, dim), out)
        if dim is None:
            return all_elements(input)
        return result(*along_dim(input, index_value(dim), keepdim))

    op.__name__ = name
    return method(op)


_extreme("max", _reduce.max_all, _reduce.max_dim, ew.MaximumBackward0, _max_result)
_extreme("min", _reduce.min_all, _reduce.min_dim, ew.MinimumBackward0, _min_result)


@method
def amax(input, dim=(), keepdim=False):
    return _reduce.amax(input, _dims(dim), keepdim)


@method
def amin(input, dim=(), keepdim=False):
    return _reduce.amin(input, _dims(dim), keepdim)


@method
def argmax(input, dim=None, keepdim=False):
    return _reduce.arg_extreme(input, _optional_int(dim), keepdim, True, "argmax")


@method
def argmin(input, dim=None, keepdim=False):
    return _reduce.arg_extreme(input, _optional_int(dim), keepdim, False, "argmin")


@method
def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        input = ew.to_dtype(input, dtype)
    dims = _dims(dim)
    if p == "fro" and len(dims) > 2:  # PyTorch hands this to matrix_norm, which refuses it
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dims))}")
    if p in ("fro", None):
        p = 2
    if p == "nuc" or isinstance(p, str):
        raise ValueError(f"norm: p={p!r} is not supported")
    return _reduce.norm(input, builtins.float(p), dims, keepdim)


# ---- shapes

def reshape(self, *shape):
    return _shape.reshape(self, sizes(shape, "shape"))


def view(self, *shape):
    return _shape.view(self, sizes(shape, "shape"))


def view_as(self, other):
    return _shape.view(self, other._shape)


def reshape_as(self, other):
    return _shape.reshape(self, other._shape)


def expand(self, *sizes_):
    return _shape.expand(self, sizes(sizes_))


def expand_as(self, other):
    return _shape.expand(self, other._shape)


def permute(self, *dims):
    if not dims:
        raise TypeError('permute() missing 1 required positional arguments: "dims"')
    return _shape.permute(self, sizes(dims, "dims"))


@method
def transpose(input, dim0, dim1):
    return _shape.transpose(input, index_value(dim0), index_value(dim1))


FUNCTIONS["swapaxes"] = METHODS["swapaxes"] = transpose


@method
def t(input):
    return _shape.t(input)


@method
def squeeze(input, dim=None):
    return _shape.squeeze(input, None if dim is None else _dims(dim))


@method
def unsqueeze(input, dim):
    return _shape.unsqueeze(input, index_value(dim))


@method
def flatten(input, start_dim=0, end_dim=-1):
    return _shape.flatten(input, index_value(start_dim), index_value(end_dim))


def _tensor_list(tensors):
    tensors = list(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {builtins.type(t).__name__}")
    return tensors


def cat(tensors, dim=0, *, out=None):
    return _with_out(_shape.cat(_tensor_list(tensors), index_value(dim)), out)


def stack(tensors, dim=0, *, out=None):
    return _with_out(_shape.stack(_tensor_list(tensors), index_value(dim)), out)


def numel(input):
    return input.numel()


def is_tensor(obj):
    return isinstance(obj, Tensor)


METHODS.update(OPERATORS)
METHODS.update({
    "__deepcopy__": __deepcopy__, "size": size, "stride": stride, "T": property(_T), "cpu": cpu, "cuda": cuda,
    "to": to, "type": _type, "float": lambda self: ew.to_dtype(self, float32),
    "double": lambda self: ew.to_dtype(self, float64), "long": lambda self: ew.to_dtype(self, int64),
    "bool": lambda self: ew.to_dtype(self, bool_), "requires_grad_": requires_grad_, "backward": backward,
    "contiguous": contiguous, "add_": add_, "sub_": sub_, "clamp_": clamp_, "clip_": clamp_, "fill_": fill_,
    "zero_": zero_, "copy_": copy_, "reshape": reshape, "view": view, "view_as": view_as, "reshape_as": reshape_as,
    "expand": expand, "expand_as": expand_as, "permute": permute,
})
for _name, _value in METHODS.items():
    setattr(Tensor, _name, _value)
FUNCTIONS.update(cat=cat, stack=stack, concat=cat, concatenate=cat, numel=numel, is_tensor=is_tensor,
                 reshape=lambda input, shape: reshape(input, shape), permute=lambda input, dims: permute(input, dims))
