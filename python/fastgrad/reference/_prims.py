"""The primitives that fastgrad's Python layer (_methods, _factories, _grad_mode, shared; see
.._shared) runs over: the names and semantics of fastgrad._prims (the C++ core's functions, bound in
csrc/python/tensor_bind.cpp, and the few done over numpy), computed by the per-op modules.

As the bindings do, this module gives Tensor its operators and the methods the core binds on the
type (mul_, div_, contiguous, backward, x[key]), and checks arguments where pybind11's conversion
would refuse them.
"""

import builtins
import functools
import math
import operator

from .._types import bool as bool_, float32, float64
from . import _conv, _elementwise as ew, _index, _inplace, _math, _matmul, _nn, _norm, _pool, _reduce, _rounding
from . import _activation, _rnn, _scan, _shape, _upsample
from . import _optim, _sort
from ._autograd import (  # noqa: F401
    _set_grad_enabled,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    is_grad_enabled,
    record_function,
    record_node,
    run_backward,
    set_anomaly_enabled,
)
from ._autograd import (  # noqa: F401
    Function as Node,
    add_node_hook,
    add_node_prehook,
    add_post_accumulate_grad_hook,
    add_tensor_hook,
)
from ._index import check_index_range, embedding, embedding_layer, gather, index_put_, scatter_  # noqa: F401
from ._random import _CPUGenerator  # noqa: F401
from ._creation import arange, empty, eye, from_dlpack, from_numpy, from_values, linspace, to_dlpack  # noqa: F401
from ._storage import SCALAR_TYPE_NAME, _set_inference_mode, cast, cast_scalar, is_inference_mode_enabled  # noqa: F401
from ._tensor import (  # noqa: F401
    Tensor,
    broadcast_shapes,
    full,
    is_ndarray,
    new_tensor,
    number_or_none,
    read,
    shape_str,
    to_numpy,
    write,
)

# ---- nn.Module's member reads: the core's module_attribute only makes getattr faster on Python 3.11

module_attribute = getattr


def _register_module_getattr(function):
    pass


def _module_call(module_type, instance_hooks, global_hooks):
    return module_type.__call__  # the Python __call__ (the core's is the same checks in C)


def _register_layer_primitive(forward, primitive, members):
    pass  # the Python __call__ runs forward


def _register_sizes_methods(view, reshape):
    pass  # Tensor.view and Tensor.reshape stay the op table's wrappers


# ---- fastgrad.compile: the reference captures nothing (compile returns what it is given)


def _capturing():
    return False


def _run_fused_update(description):
    return False  # an optimizer's step and zero_grad run their Python methods


# ---- argument conversion


def _invalid_arguments(name, args, expected):
    """The TypeError of the core's bindings for arguments that fit no signature (arg_errors.cpp)."""
    got = ", ".join(builtins.type(a).__name__ for a in args)
    return TypeError(f"{name}() received an invalid combination of arguments - got ({got}), but expected ({expected})")


def _tensor_args(name, op):
    """op, refusing arguments that are not tensors (as a binding taking `const Tensor&`)."""

    def checked(*args):
        if not builtins.all(isinstance(arg, Tensor) for arg in args):
            raise _invalid_arguments(name, args, ", ".join(["Tensor"] * len(args)))
        return op(*args)

    return checked


def addmm(input, mat1, mat2, beta, alpha):
    """beta * input + alpha * (mat1 @ mat2): three tensors and two numbers, as the core's binding takes them."""
    args = (input, mat1, mat2, beta, alpha)
    if not builtins.all(isinstance(x, Tensor) for x in args[:3]):
        raise _invalid_arguments("addmm", args, "Tensor, Tensor, Tensor, object, object")
    for name, value in (("beta", beta), ("alpha", alpha)):
        if number_or_none(value) is None:
            raise TypeError(f"addmm(): argument '{name}' must be Number, not {builtins.type(value).__name__}")
    return _matmul.addmm(input, mat1, mat2, number_or_none(beta), number_or_none(alpha))


def linear(input, weight, bias):
    """F.linear: two tensors and a tensor or None, as the core's binding takes them."""
    if not (isinstance(input, Tensor) and isinstance(weight, Tensor) and (bias is None or isinstance(bias, Tensor))):
        raise _invalid_arguments("linear", (input, weight, bias), "Tensor, Tensor, Tensor | None")
    return _matmul.linear(input, weight, bias)


def _dim_reduction(name, op):
    """op(x, dim, keepdim) for a dim that is None or an int, as the core's binding takes it."""

    def checked(x, dim, keepdim):
        if not isinstance(x, Tensor) or not (dim is None or hasattr(builtins.type(dim), "__index__")):
            raise _invalid_arguments(name, (x, dim, keepdim), "Tensor, int | None, bool")
        return op(x, None if dim is None else operator.index(dim), keepdim)

    return checked


def _tensor_or_number(value, message):
    """A tensor, or a Python number (numpy scalars through item()): what the bindings accept as a
    Tensor or a Scalar; anything else is a TypeError saying `message`."""
    if isinstance(value, Tensor):
        return value
    number = number_or_none(value)
    if number is None:
        raise TypeError(message)
    return number


def _tensor_list(tensors):
    tensors = list(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {builtins.type(t).__name__}")
    return tensors


def _operator(op, reflected=False):
    """op(tensor, tensor-or-number) as a Python operator: numbers are passed on as they are, other
    operands give NotImplemented so that Python can try the other side."""

    def apply(a, b):
        if isinstance(b, Tensor) and not reflected:
            return op(a, b)
        number = number_or_none(b)
        return NotImplemented if number is None else op(a, number)

    return apply


def _named(name, op, arg="other"):
    """op(tensor, tensor-or-number) as a named function or method (add, x.mul_, ...): with no operator
    protocol to fall back on, any other operand is a TypeError, worded as PyTorch's."""
    as_operator = _operator(op)

    def apply(a, b):
        if not isinstance(a, Tensor):
            raise _invalid_arguments(name, (a, b), "Tensor, object")
        result = as_operator(a, b)
        if result is NotImplemented:
            raise TypeError(f"{name}(): argument '{arg}' must be Tensor, not {builtins.type(b).__name__}")
        return result

    return apply


def _compare(op):
    return lambda a, b: ew.compare(a, b, op)


_equal_numbers = _operator(_compare(operator.eq))


def _equal_operator(a, b):
    """PyTorch's == (and no other comparison) reads an ndarray of a tensor dtype as a tensor."""
    if is_ndarray(b):
        try:
            b = from_numpy(b, share_memory=False)
        except TypeError:
            return NotImplemented
    return _equal_numbers(a, b)


# ---- the Tensor type's own bindings: operators, x[key], backward

# The named forms (fastgrad.add(x, y), x.mul_(y), fastgrad.lt(x, y)); the operators return NotImplemented instead.
add, sub, mul, div, add_, sub_, mul_, div_ = (
    _named(name, op)
    for name, op in [
        ("add", ew.AddBackward0.run),
        ("sub", ew.SubBackward0.run),
        ("mul", ew.MulBackward0.run),
        ("div", ew.DivBackward0.run),
        ("add_", _inplace.add_),
        ("sub_", _inplace.sub_),
        ("mul_", _inplace.mul_),
        ("div_", _inplace.div_),
    ]
)


def _scaled(name, op):
    """op(tensor, tensor-or-number, alpha=number) for add and sub with alpha, as _named."""

    def apply(a, b, alpha):
        if number_or_none(alpha) is None:
            raise TypeError(f"{name}(): argument 'alpha' must be Number, not {builtins.type(alpha).__name__}")
        return _named(name, functools.partial(op, alpha=alpha))(a, b)

    return apply


add_scaled, sub_scaled, rsub_scaled, add_scaled_, sub_scaled_ = (
    _scaled(name, op)
    for name, op in [
        ("add", ew.AddBackward0.run),
        ("sub", ew.SubBackward0.run),
        ("rsub", ew.rsub),
        ("add_", _inplace.add_),
        ("sub_", _inplace.sub_),
    ]
)
pow = _named("pow", ew.pow, "exponent")
floor_divide, remainder, fmod, floor_divide_, remainder_, fmod_ = (
    _named(name, op)
    for name, op in [
        ("floor_divide", ew.FloorDivide.run),
        ("remainder", ew.remainder),
        ("fmod", ew.fmod),
        ("floor_divide_", _inplace.floor_divide_),
        ("remainder_", _inplace.remainder_),
        ("fmod_", _inplace.fmod_),
    ]
)
rfloor_divide, rremainder = _operator(ew.RFloorDivide.run, True), _operator(ew.RRemainder.run, True)
div_floor, div_trunc = (
    _named("div", functools.partial(ew.DivBackward2.run, rounding_mode=mode)) for mode in ("floor", "trunc")
)
pow_ = _named("pow_", _inplace.pow_, "exponent")
_COMPARISONS = (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne)
lt, le, gt, ge, eq, ne = (_named(op.__name__, _compare(op)) for op in _COMPARISONS)


_rdiv_numbers = _operator(ew.rdiv, True)


def _rtruediv(a, b):
    """`b / a`. PyTorch computes it as a.reciprocal() * b: for an ndarray b, a product that numpy then
    takes (Tensor.__array_wrap__ gives its result back as a tensor)."""
    if is_ndarray(b):
        return ew.rdiv(a, 1.0) * b
    return _rdiv_numbers(a, b)


def _invert(x):
    if x._dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return ew.BitwiseNot.run(x)


def backward(self, gradient=None, retain_graph=None, create_graph=False):
    create_graph = builtins.bool(create_graph)
    run_backward(
        [self], [gradient], create_graph if retain_graph is None else builtins.bool(retain_graph), None, create_graph
    )


for _name, _value in {
    "__add__": _operator(ew.AddBackward0.run),
    "__radd__": _operator(ew.AddBackward0.run, True),
    "__sub__": _operator(ew.SubBackward0.run),
    "__rsub__": _operator(ew.RsubBackward1.run, True),
    "__mul__": _operator(ew.MulBackward0.run),
    "__rmul__": _operator(ew.MulBackward0.run, True),
    "__truediv__": _operator(ew.DivBackward0.run),
    "__rtruediv__": _rtruediv,
    "__pow__": _operator(ew.pow),
    "__rpow__": _operator(ew.PowBackward2.run, True),
    "__iadd__": _operator(_inplace.add_),
    "__isub__": _operator(_inplace.sub_),
    "__imul__": _operator(_inplace.mul_),
    "__itruediv__": _operator(_inplace.div_),
    "__ipow__": _operator(_inplace.pow_),
    "mul_": mul_,
    "div_": div_,
    "pow_": pow_,
    **{f"__{op.__name__}__": _operator(_compare(op)) for op in _COMPARISONS},
    "__eq__": _equal_operator,
    "__floordiv__": _operator(ew.FloorDivide.run),
    "__rfloordiv__": rfloor_divide,
    "__ifloordiv__": _operator(_inplace.floor_divide_),
    "__mod__": _operator(ew.remainder),
    "__rmod__": rremainder,
    "__imod__": _operator(_inplace.remainder_),
    "__invert__": _invert,
    "__neg__": lambda x: ew.NegBackward0.run(x),
    "__abs__": lambda x: ew.AbsBackward0.run(x),
    "__matmul__": lambda a, b: _matmul.matmul(a, b) if isinstance(b, Tensor) else NotImplemented,
    "__getitem__": _index.getitem,
    "__setitem__": _index.setitem,
    "contiguous": ew.contiguous,
    "t": _shape.t,
    "backward": backward,
}.items():
    setattr(Tensor, _name, _value)

for _op, _name in {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor"}.items():
    _out_of_place = functools.partial(ew.Bitwise.run, name=_name)
    _in_place = functools.partial(_inplace.bitwise_, name=_name)
    globals()[_name], globals()[f"{_name}_"] = _named(_name, _out_of_place), _named(f"{_name}_", _in_place)
    # & | ^ are commutative: the reflected operator is the same op
    for _dunder, _fn in [(f"__{_op}__", _out_of_place), (f"__r{_op}__", _out_of_place), (f"__i{_op}__", _in_place)]:
        setattr(Tensor, _dunder, _operator(_fn))


# ---- module functions


def rpow(x, base):
    """base ** x for a Python number base, taken as a float."""
    return ew.PowBackward2.run(x, builtins.float(base))


def result_type(a, b):
    """The dtype of a op b."""
    return ew.result_type(a, _tensor_or_number(b, "result_type(): expected a Tensor or a number"))


# neg ... dot: tensors only
for _name, _op in {
    "neg": ew.NegBackward0.run,
    "abs": ew.AbsBackward0.run,
    "exp": ew.ExpBackward0.run,
    "log": ew.LogBackward0.run,
    "log1p": ew.Log1PBackward0.run,
    "expm1": ew.Expm1Backward0.run,
    "sqrt": ew.SqrtBackward0.run,
    "sin": ew.SinBackward0.run,
    "cos": ew.CosBackward0.run,
    "tanh": ew.TanhBackward0.run,
    "sigmoid": ew.SigmoidBackward0.run,
    "relu": ew.ReluBackward0.run,
    "sign": ew.sign,
    "bitwise_not": ew.BitwiseNot.run,
    "maximum": ew.MaximumBackward0.run,
    "minimum": ew.MinimumBackward0.run,
    "matmul": _matmul.matmul,
    "mm": _matmul.mm,
    "bmm": _matmul.bmm,
    "mv": _matmul.mv,
    "dot": _matmul.dot,
}.items():
    globals()[_name] = _tensor_args(_name, _op)

# the in-place forms of the unary ops above
for _name, _node in {
    "neg": ew.NegBackward0,
    "abs": ew.AbsBackward0,
    "sign": ew.SignBackward0,
    "exp": ew.ExpBackward0,
    "log": ew.LogBackward0,
    "log1p": ew.Log1PBackward0,
    "expm1": ew.Expm1Backward0,
    "sqrt": ew.SqrtBackward0,
    "sin": ew.SinBackward0,
    "cos": ew.CosBackward0,
    "tanh": ew.TanhBackward0,
    "sigmoid": ew.SigmoidBackward0,
    "relu": ew.ReluBackward0,
}.items():
    globals()[f"{_name}_"] = _tensor_args(f"{_name}_", functools.partial(_inplace.unary_, node_class=_node))

signbit = _tensor_args("signbit", _math.signbit)

# log10 ... rad2deg (reference/_math.py), each with its in-place form
for _name, _node in _math.FLOAT_FUNCTIONS.items():
    globals()[_name] = _tensor_args(_name, _node.run)
    globals()[f"{_name}_"] = _tensor_args(
        f"{_name}_", functools.partial(_inplace.unary_, node_class=_math.IN_PLACE.get(_name, _node))
    )

# atan2, hypot, logaddexp, logaddexp2, copysign: values only, as the core's
for _name, _values in _math.FLOAT_BINARY.items():
    globals()[_name] = _named(_name, _values)

# floor ... nan_to_num (reference/_rounding.py), each with its in-place form
for _name, _node in _rounding.UNARY.items():
    globals()[_name] = _tensor_args(_name, _node.run)
    globals()[f"{_name}_"] = _tensor_args(f"{_name}_", functools.partial(_inplace.unary_, node_class=_node))
round, round_ = _rounding.round_to, _rounding.round_to_  # noqa: A001 (the op's name)
nan_to_num, nan_to_num_ = _rounding.nan_to_num, _rounding.nan_to_num_

clone, contiguous, to_dtype = ew.clone, ew.contiguous, ew.to_dtype
clamp_, zero_, copy_, bitwise_not_ = _inplace.clamp_, _inplace.zero_, _inplace.copy_, _inplace.bitwise_not_
inplace_input, write_result_ = _inplace.inplace_input, _inplace.write_result_
mean, var, std, norm = _reduce.mean, _reduce.var, _reduce.std, _reduce.norm
amax, amin, max_all, min_all, max_dim, min_dim = (
    _reduce.amax,
    _reduce.amin,
    _reduce.max_all,
    _reduce.min_all,
    _reduce.max_dim,
    _reduce.min_dim,
)
view, reshape, expand, permute, transpose, t = (
    _shape.view,
    _shape.reshape,
    _shape.expand,
    _shape.permute,
    _shape.transpose,
    _shape.t,
)
squeeze, unsqueeze, flatten = _shape.squeeze, _shape.unsqueeze, _shape.flatten
t_, transpose_, squeeze_, unsqueeze_ = _inplace.t_, _inplace.transpose_, _inplace.squeeze_, _inplace.unsqueeze_
sort, argsort, topk, kthvalue, mode = _sort.sort, _sort.argsort, _sort.topk, _sort.kthvalue, _sort.mode
median_all, median_dim = _sort.median_all, _sort.median_dim
searchsorted, bincount, histogram_counts, unique_rows = (
    _sort.searchsorted,
    _sort.bincount,
    _sort.histogram_counts,
    _sort.unique_rows,
)


def clamp(x, min, max):
    return ew.ClampBackward1.run(x, min=min, max=max)


def clamp_tensor(x, min, max):
    return ew.ClampBackward0.run(x, min, max)


def _where_operand(value):
    """A number operand of where() becomes a 0-d tensor of its kind's default dtype; 0-d tensors
    then promote the way PyTorch's wrapped numbers do here (where(c, int64_tensor, 0.5) is float32)."""
    value = _tensor_or_number(value, f"expected Tensor or number, got {builtins.type(value).__name__}")
    return value if isinstance(value, Tensor) else full((), value, ew.scalar_dtype(value))


def fused_multiply_add(x, y, z, dtype):
    if not dtype.is_floating_point:
        raise TypeError(f"fused_multiply_add(): expected a floating dtype, got {SCALAR_TYPE_NAME[dtype]}")
    return ew.fused_multiply_add_values(x, y, z, dtype)


def where(condition, input, other):
    if not isinstance(condition, Tensor):
        raise _invalid_arguments("where", (condition, input, other), "Tensor, object, object")
    return ew.where(condition, _where_operand(input), _where_operand(other))


def fill_(x, value):
    return _inplace.fill_(x, _tensor_or_number(value, "fill_() expects a number or a 0-dim tensor"))


def foreach_zero_(tensors):
    for t in _tensor_list(tensors):
        _inplace.zero_(t)


prod = _dim_reduction("prod", _reduce.prod)
argmax = _dim_reduction("argmax", lambda x, dim, keepdim: _reduce.arg_extreme(x, dim, keepdim, True, "argmax"))
argmin = _dim_reduction("argmin", lambda x, dim, keepdim: _reduce.arg_extreme(x, dim, keepdim, False, "argmin"))


def sum(x, dims, keepdim, dtype):
    if not isinstance(x, Tensor):
        raise _invalid_arguments("sum", (x, dims, keepdim, dtype), "Tensor, tuple of ints, bool, object")
    return _reduce.sum(x, dims, keepdim, dtype)


def cat(tensors, dim):
    return _shape.cat(_tensor_list(tensors), dim)


def stack(tensors, dim):
    return _shape.stack(_tensor_list(tensors), dim)


def _int_like(value):
    """What the core's bindings take for an int64_t: ints, bools and objects with __index__."""
    return hasattr(builtins.type(value), "__index__")


def slice_view(x, dim, start, stop, step):
    """x[..., start:stop:step] along one dim: five ints, as the core's binding takes them."""
    args = (x, dim, start, stop, step)
    if not (isinstance(x, Tensor) and builtins.all(_int_like(v) for v in args[1:])):
        raise _invalid_arguments("slice_view", args, "Tensor, int, int, int, int")
    return _shape.slice(x, *(operator.index(v) for v in args[1:]))


def select_view(x, dim, index):
    """x[..., index] along one dim: three ints, as the core's binding takes them."""
    args = (x, dim, index)
    if not (isinstance(x, Tensor) and builtins.all(_int_like(v) for v in args[1:])):
        raise _invalid_arguments("select_view", args, "Tensor, int, int")
    return _shape.select(x, operator.index(dim), operator.index(index))


def fill_drawn_(out, fill, args):
    """fill(out's elements as a flat array, *args): a contiguous `out` filled with fresh draws."""
    if not out.is_contiguous():
        raise ValueError("fill_drawn_: a contiguous tensor to fill")
    fill(to_numpy(out).reshape(-1), *args)


def split_with_sizes(x, sizes, dim, with_sizes):
    """x's parts of the given extents along dim: views, the outputs of one node."""
    args = (x, sizes, dim, with_sizes)
    if not (
        isinstance(x, Tensor)
        and isinstance(sizes, (list, tuple))
        and builtins.all(_int_like(n) for n in sizes)
        and _int_like(dim)
        and isinstance(with_sizes, bool)
    ):
        raise _invalid_arguments("split_with_sizes", args, "Tensor, list[int], int, bool")
    return _shape.split_with_sizes(x, [operator.index(n) for n in sizes], operator.index(dim), with_sizes)


def unbind(x, dim):
    """x's parts of one element along dim, without it: views, the outputs of one node."""
    if not isinstance(x, Tensor) or not _int_like(dim):
        raise _invalid_arguments("unbind", (x, dim), "Tensor, int")
    return _shape.unbind(x, operator.index(dim))


def _along_dim(name, op):
    def checked(x, dim):
        if not isinstance(x, Tensor) or not _int_like(dim):
            raise _invalid_arguments(name, (x, dim), "Tensor, int")
        return op(x, operator.index(dim))

    return checked


softmax, log_softmax = _along_dim("softmax", _nn.softmax), _along_dim("log_softmax", _nn.log_softmax)


def attention_scores(query, key, scale, bias, causal):
    """query key^T * scale, then bias (or None) added in place, or the causal mask (csrc/ops/ops.h:
    attention_scores; the core writes the mask's -inf into the product, here it is the 0 / -inf bias
    it stands for, added)."""
    args = (query, key, scale, bias, causal)
    if not (isinstance(query, Tensor) and isinstance(key, Tensor) and (bias is None or isinstance(bias, Tensor))):
        raise _invalid_arguments("attention_scores", args, "Tensor, Tensor, float, Tensor | None, bool")
    if query.dim() < 2 or key.dim() < 2:
        raise RuntimeError(
            f"attention_scores: expected query and key of at least 2 dims, but got {query.dim()} and {key.dim()}"
        )
    if causal and bias is not None:
        raise RuntimeError("attention_scores: a bias and the causal mask")
    root = math.sqrt(builtins.abs(scale))  # query and key each scaled by the root, the sign going to query
    scores = _matmul.matmul(query * (-root if scale < 0 else root), _shape.transpose(key, -2, -1) * root)
    if causal:
        rows, cols = scores._shape[-2:]
        above = [-math.inf if j > i else 0.0 for i in range(rows) for j in range(cols)]
        bias = new_tensor(above, (rows, cols), scores._dtype)
    if bias is not None:
        _inplace.add_(scores, bias)
    return scores


def flash_attention(query, key, value, scale, causal):
    """scaled_dot_product_attention fused, for the inputs the core's flash_attention takes; None for
    others (csrc/ops/ops.h: flash_attention_case). A scale of None is 1 / sqrt(width)."""
    args = (query, key, value, scale, causal)
    if not (builtins.all(isinstance(t, Tensor) for t in args[:3]) and isinstance(scale, (int, float, type(None)))):
        raise _invalid_arguments("flash_attention", args, "Tensor, Tensor, Tensor, Optional[float], bool")
    if not _nn.flash_attention_case(query, key, value):
        return None
    if scale is None:  # the case's width is not 0
        scale = 1 / math.sqrt(query.shape[-1])
    attention = _nn.ScaledDotProductFlashAttentionForCpuBackward0
    return attention.run(query, key, value, scale=float(scale), causal=bool(causal))


# ---- scans along one dim
def _scan_with_dtype(name, op):
    def checked(x, dim, dtype):
        if not isinstance(x, Tensor) or not _int_like(dim):
            raise _invalid_arguments(name, (x, dim, dtype), "Tensor, int, object")
        return op(x, operator.index(dim), dtype)

    return checked


cumsum, cumprod = _scan_with_dtype("cumsum", _scan.cumsum), _scan_with_dtype("cumprod", _scan.cumprod)
cumsum_, cumprod_ = _scan_with_dtype("cumsum_", _scan.cumsum_), _scan_with_dtype("cumprod_", _scan.cumprod_)
logcumsumexp = _along_dim("logcumsumexp", _scan.logcumsumexp)
cummax, cummin = _along_dim("cummax", _scan.cummax), _along_dim("cummin", _scan.cummin)


def nll_loss(input, target, weight, reduction, ignore_index):
    args = (input, target, weight, reduction, ignore_index)
    if not (
        isinstance(input, Tensor)
        and isinstance(target, Tensor)
        and (weight is None or isinstance(weight, Tensor))
        and isinstance(reduction, str)
        and _int_like(ignore_index)
    ):
        raise _invalid_arguments("nll_loss", args, "Tensor, Tensor, Tensor | None, str, int")
    return _nn.nll_loss(input, target, weight, reduction, operator.index(ignore_index))


def gelu(x, approximate):
    if not isinstance(x, Tensor) or not isinstance(approximate, str):
        raise _invalid_arguments("gelu", (x, approximate), "Tensor, str")
    return _nn.gelu(x, approximate)


def _activation_op(name, op, param_names):
    """op(x, *params): a tensor and numbers (doubles), as the core's binding takes them."""

    def checked(x, *params):
        if not isinstance(x, Tensor) or len(params) != len(param_names) or not all(map(_float_like, params)):
            raise _invalid_arguments(name, (x, *params), ", ".join(["Tensor"] + ["float"] * len(param_names)))
        return op(x, *map(float, params))

    checked.__name__ = name
    return checked


leaky_relu = _activation_op("leaky_relu", _activation.leaky_relu, ["slope"])
leaky_relu_ = _activation_op("leaky_relu_", _activation.leaky_relu_, ["slope"])
hardtanh = _activation_op("hardtanh", _activation.hardtanh, ["min", "max"])
hardtanh_ = _activation_op("hardtanh_", _activation.hardtanh_, ["min", "max"])


def convolution(input, weight, bias, *sizes):
    args = (input, weight, bias, *sizes)
    if not (
        isinstance(input, Tensor)
        and isinstance(weight, Tensor)
        and (bias is None or isinstance(bias, Tensor))
        and len(sizes) == 7
        and all(_int_like(v) for v in sizes)
    ):
        raise _invalid_arguments(
            "convolution", args, "Tensor, Tensor, Tensor | None, int, int, int, int, int, int, int"
        )
    stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups = map(operator.index, sizes)
    return _conv.convolution(
        input, weight, bias, (stride_h, stride_w), (pad_h, pad_w), (dilation_h, dilation_w), groups
    )


def conv_transpose(input, weight, bias, *sizes):
    args = (input, weight, bias, *sizes)
    if not (
        isinstance(input, Tensor)
        and isinstance(weight, Tensor)
        and (bias is None or isinstance(bias, Tensor))
        and len(sizes) == 9
        and all(_int_like(v) for v in sizes)
    ):
        raise _invalid_arguments(
            "conv_transpose", args, "Tensor, Tensor, Tensor | None, int, int, int, int, int, int, int, int, int"
        )
    sh, sw, ph, pw, oph, opw, dh, dw, groups = map(operator.index, sizes)
    return _conv.conv_transpose(input, weight, bias, (sh, sw), (ph, pw), (oph, opw), (dh, dw), groups)


def im2col(input, *sizes):
    if not (isinstance(input, Tensor) and len(sizes) == 8 and all(_int_like(v) for v in sizes)):
        raise _invalid_arguments("im2col", (input, *sizes), "Tensor, int, int, int, int, int, int, int, int")
    kh, kw, dh, dw, ph, pw, sh, sw = map(operator.index, sizes)
    return _conv.im2col(input, (kh, kw), (dh, dw), (ph, pw), (sh, sw))


def col2im(input, *sizes):
    if not (isinstance(input, Tensor) and len(sizes) == 10 and all(_int_like(v) for v in sizes)):
        raise _invalid_arguments("col2im", (input, *sizes), "Tensor, int, int, int, int, int, int, int, int, int, int")
    oh, ow, kh, kw, dh, dw, ph, pw, sh, sw = map(operator.index, sizes)
    return _conv.col2im(input, (oh, ow), (kh, kw), (dh, dw), (ph, pw), (sh, sw))


def _pool_primitive(name, signature, kinds):
    """The primitive _pool.<name>, its arguments checked as the core's binding checks them: `kinds`
    names each one's type ("tensor", "int" or "bool")."""
    checks = {
        "tensor": lambda v: isinstance(v, Tensor),
        "int": _int_like,
        "bool": lambda v: isinstance(v, builtins.bool),
    }
    function = getattr(_pool, name)

    def primitive(*args):
        if len(args) != len(kinds) or not all(checks[kind](v) for kind, v in zip(kinds, args)):
            raise _invalid_arguments(name, args, signature)
        return function(
            *(
                v if kind == "tensor" else builtins.bool(v) if kind == "bool" else operator.index(v)
                for kind, v in zip(kinds, args)
            )
        )

    primitive.__name__ = name
    return primitive


max_pool2d = _pool_primitive(
    "max_pool2d", "Tensor, int, int, int, int, int, int, int, int, bool", ["tensor"] + ["int"] * 8 + ["bool"]
)
avg_pool2d = _pool_primitive(
    "avg_pool2d",
    "Tensor, int, int, int, int, int, int, bool, bool, int",
    ["tensor"] + ["int"] * 6 + ["bool"] * 2 + ["int"],
)
adaptive_avg_pool2d = _pool_primitive("adaptive_avg_pool2d", "Tensor, int, int", ["tensor", "int", "int"])
adaptive_max_pool2d = _pool_primitive("adaptive_max_pool2d", "Tensor, int, int", ["tensor", "int", "int"])
max_unpool2d = _pool_primitive("max_unpool2d", "Tensor, Tensor, int, int", ["tensor", "tensor", "int", "int"])


def upsample(x, mode, output_size, scales, align_corners, antialias):
    args = (x, mode, output_size, scales, align_corners, antialias)
    if not (
        isinstance(x, Tensor)
        and isinstance(mode, str)
        and isinstance(output_size, (list, tuple))
        and all(_int_like(v) for v in output_size)
        and isinstance(scales, (list, tuple))
        and all(_float_like(v) for v in scales)
        and isinstance(align_corners, bool)
        and isinstance(antialias, bool)
    ):
        raise _invalid_arguments("upsample", args, "Tensor, str, tuple of ints, tuple of floats, bool, bool")
    sizes, factors = [operator.index(v) for v in output_size], [float(v) for v in scales]
    return _upsample.upsample(x, mode, sizes, factors, align_corners, antialias)


def _optional_tensors(*values):
    return all(v is None or isinstance(v, Tensor) for v in values)


def _float_like(value):
    """What the core's bindings take for a double: numbers with __float__ or __index__."""
    return hasattr(builtins.type(value), "__float__") or _int_like(value)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    args = (input, weight, bias, running_mean, running_var, training, momentum, eps)
    if not (
        isinstance(input, Tensor)
        and _optional_tensors(weight, bias, running_mean, running_var)
        and isinstance(training, bool)
        and _float_like(momentum)
        and _float_like(eps)
    ):
        raise _invalid_arguments(
            "batch_norm",
            args,
            "Tensor, Tensor | None, Tensor | None, Tensor | None, Tensor | None, bool, float, float",
        )
    return _norm.batch_norm(input, weight, bias, running_mean, running_var, training, float(momentum), float(eps))


def group_norm(input, weight, bias, groups, eps):
    args = (input, weight, bias, groups, eps)
    if not (isinstance(input, Tensor) and _optional_tensors(weight, bias) and _int_like(groups) and _float_like(eps)):
        raise _invalid_arguments("group_norm", args, "Tensor, Tensor | None, Tensor | None, int, float")
    return _norm.group_norm(input, weight, bias, operator.index(groups), float(eps))


def layer_norm(input, normalized_shape, weight, bias, eps):
    """F.layer_norm after PyTorch's shape checks, as the core's binding makes them: a floating input's
    weight and bias in another dtype converted to its dtype."""
    args = (input, normalized_shape, weight, bias, eps)
    if not (
        isinstance(input, Tensor)
        and isinstance(normalized_shape, (tuple, list))
        and builtins.all(_int_like(size) for size in normalized_shape)
        and _optional_tensors(weight, bias)
        and _float_like(eps)
    ):
        raise _invalid_arguments("layer_norm", args, "Tensor, List[int], Tensor | None, Tensor | None, float")
    shape = [operator.index(size) for size in normalized_shape]
    dims = list(input.shape)
    if len(dims) < len(shape) or dims[len(dims) - len(shape) :] != shape:
        raise RuntimeError(
            f"Given normalized_shape={shape_str(shape)}, expected input with shape [*, {shape_str(shape)[1:]}, "
            f"but got input of size{shape_str(dims)}"
        )
    for name, tensor in (("weight", weight), ("bias", bias)):
        if tensor is not None and list(tensor.shape) != shape:
            raise RuntimeError(
                f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                f"{shape_str(tensor.shape)} and normalized_shape = {shape_str(shape)}"
            )
    if input.dtype.is_floating_point:
        weight, bias = (None if t is None else to_dtype(t, input.dtype) for t in (weight, bias))
    return _norm.layer_norm(input, weight, bias, len(shape), float(eps))


def recurrent_layer(mode, projected, h0, c0, w_hh, b_hh, reverse):
    args = (mode, projected, h0, c0, w_hh, b_hh, reverse)
    if not (
        isinstance(mode, str)
        and isinstance(projected, Tensor)
        and isinstance(h0, Tensor)
        and _optional_tensors(c0, b_hh)
        and isinstance(w_hh, Tensor)
        and isinstance(reverse, bool)
    ):
        raise _invalid_arguments(
            "recurrent_layer", args, "str, Tensor, Tensor, Tensor | None, Tensor, Tensor | None, bool"
        )
    return _rnn.recurrent_layer(mode, projected, h0, c0, w_hh, b_hh, reverse)


def set_requires_grad(t, flag):
    t.requires_grad = flag
    return t


def strides(t):
    return t._strides


def storage_span(t):
    """(identity, size in elements) of t's storage: deepcopy copies whole storages."""
    return id(t._storage), len(t._storage.data)


def on_storage_of(t, shape, strides, offset):
    """A tensor with no history on t's storage, with absolute geometry (offset in elements)."""
    return Tensor._make(t._storage, tuple(shape), tuple(strides), offset, t._dtype)


def isclose(input, other, rtol, atol, equal_nan):
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
    close = [
        (d <= t and math.isfinite(y)) or x == y or (equal_nan and x != x and y != y)
        for x, y, d, t in zip(xs, ys, diffs, tolerances)
    ]
    return new_tensor(close, shape, bool_)


def config():
    """fastgrad._C.config()'s keys for the pure-Python backend: no SIMD, nothing compiled (no cache-blocked
    GEMM); the recorded thread count."""
    return {
        "isa": "python",
        "isas_available": ["python"],
        "num_threads": _num_threads,
        "compiler": None,
        "build_type": None,
        "cxx_flags": None,
        "caches": None,
        "gemm_blocks": None,
    }


# The pure-Python backend computes on the calling thread: set_num_threads validates and records
# its argument (as fastgrad._C does, with PyTorch's errors) so that the same code runs on both.
_num_threads = 1


def get_num_threads():
    return _num_threads


def set_num_threads(n):
    global _num_threads
    if not isinstance(n, int) or isinstance(n, bool):
        raise RuntimeError(f"set_num_threads expects an int, but got {type(n).__name__}")
    if not -(2**63) <= n < 2**63:
        raise ValueError("Overflow when unpacking long long")
    if not -(2**31) <= n < 2**31:
        raise ValueError("Overflow when unpacking long")
    if n <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    _num_threads = n


# shape family (issue 13): the diagonal view; Tensor.unfold's windows
diagonal = _shape.diagonal
unfold = _shape.unfold


def _check_update(name, lists, lengths):
    """The core's checks before an optimizer's update writes anything (ops/foreach.cpp): lists
    (params, grads, state lists; an empty state list: an option that is off) and the lengths of the
    per-parameter scalar lists. Returns each parameter's operands: param, grad, its states."""
    lists = [_tensor_list(t) for t in lists]
    params = lists[0]
    lengths = [len(t) for i, t in enumerate(lists) if i == 1 or (i > 1 and t)] + list(lengths)
    for length in lengths:
        if length != len(params):
            raise RuntimeError(f"{name}(): expected lists of the same length, got {len(params)} and {length}")
    operands = [list(ts) for ts in zip(*(t for i, t in enumerate(lists) if i < 2 or t))]
    for param, *others in operands:
        for t in [param, *others]:
            if is_grad_enabled() and t.requires_grad:
                raise RuntimeError(f"{name}() does not record gradients: call it under no_grad()")
            if t._dtype != param._dtype or t._shape != param._shape or param._dtype not in (float32, float64):
                raise RuntimeError(
                    f"{name}(): expected float32 or float64 tensors of one dtype and shape, got "
                    f"{SCALAR_TYPE_NAME[param._dtype]}{shape_str(param._shape)} and "
                    f"{SCALAR_TYPE_NAME[t._dtype]}{shape_str(t._shape)}"
                )
        for t in [param, *others[1:]]:  # written: all but the gradient
            _inplace.check_inplace(t)
            _inplace.assert_no_internal_overlap(t)
            for other in [param, *others]:
                if other is not t:
                    _inplace.assert_no_partial_overlap(t, other)
    return operands


def _write_update(operands, new_values):
    """Stores the new values of each parameter's written operands (all but the gradient)."""
    for (param, _, *state), values in zip(operands, new_values):
        for t, v in zip([param, *state], values):
            write(t, v)
            t._storage.version += 1


def adam_(
    params,
    grads,
    exp_avgs,
    exp_avg_sqs,
    max_exp_avg_sqs,
    step_sizes,
    bias_correction2_sqrts,
    lerp_weight,
    beta2,
    one_minus_beta2,
    eps,
    weight_decay,
    decay,
    maximize,
):
    """torch.optim.Adam / AdamW's single-tensor step for each parameter in one pass, rounded as
    PyTorch's op chain (the core's adam_ in ops/ops.h describes the arguments). No autograd."""
    if not (_tensor_list(exp_avgs) and _tensor_list(exp_avg_sqs)) and _tensor_list(params):
        raise RuntimeError(f"adam_(): expected lists of the same length, got {len(_tensor_list(params))} and 0")
    lists = (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs)
    operands = _check_update("adam_", lists, [len(step_sizes), len(bias_correction2_sqrts)])
    options = (lerp_weight, beta2, one_minus_beta2, eps, weight_decay, decay, maximize)
    new_values = []
    for (param, grad, *state), step_size, bias_correction2_sqrt in zip(operands, step_sizes, bias_correction2_sqrts):
        values = [read(t) for t in (param, grad, *state)] + [None] * (5 - 2 - len(state))
        new = _optim.adam(*values, param._dtype, step_size, bias_correction2_sqrt, options)
        new_values.append(new[: 1 + len(state)])
    _write_update(operands, new_values)


def sgd_(
    params, grads, momentum_buffers, first_steps, lr, momentum, one_minus_dampening, weight_decay, nesterov, maximize
):
    """torch.optim.SGD's single-tensor step for each parameter in one pass (see the core's sgd_)."""
    with_momentum = bool(_tensor_list(momentum_buffers))
    operands = _check_update("sgd_", (params, grads, momentum_buffers), [len(first_steps)] if with_momentum else [])
    options = (lr, momentum, one_minus_dampening, weight_decay, nesterov, maximize)
    new_values = []
    for i, (param, grad, *state) in enumerate(operands):
        buffer = read(state[0]) if with_momentum else None
        new = _optim.sgd(read(param), read(grad), buffer, param._dtype, with_momentum and first_steps[i], options)
        new_values.append(new[: 1 + len(state)])
    _write_update(operands, new_values)


def adagrad_(params, grads, sums, learning_rates, eps, weight_decay, maximize):
    """torch.optim.Adagrad's single-tensor step for each parameter in one pass (see the core's adagrad_)."""
    if not _tensor_list(sums) and _tensor_list(params):
        raise RuntimeError(f"adagrad_(): expected lists of the same length, got {len(_tensor_list(params))} and 0")
    operands = _check_update("adagrad_", (params, grads, sums), [len(learning_rates)])
    new_values = [
        _optim.adagrad(read(param), read(grad), read(state_sum), param._dtype, lr, (eps, weight_decay, maximize))
        for (param, grad, state_sum), lr in zip(operands, learning_rates)
    ]
    _write_update(operands, new_values)


def multinomial_one(engine, probabilities):
    """multinomial(probabilities, 1) of a non-empty float32 or float64 row or matrix of rows, as the
    core's (csrc/ops/random.cpp): PyTorch's checks of the values, then of each row's largest; then
    the first largest key p / Exponential(1) of each row (argmax: NaN first), the noise drawn in
    row-major order."""
    values, n = read(probabilities), probabilities.shape[-1]
    if not all(0 <= p < math.inf for p in values):  # NaN fails both
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if not all(max(values[i : i + n]) > 0 for i in range(0, len(values), n)):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    noise = empty(list(probabilities.shape), probabilities.dtype)
    engine.exponential_(to_numpy(noise).reshape(-1), 1.0)
    return argmax(div(probabilities, noise), -1, True)
