"""Shape/dtype rules: each op's result shape and dtype, from its arguments' shapes and dtypes, without
running its kernel (the op table names an op's rule; tests/test_meta.py checks every rule on the op
cases against the ops themselves).

A rule takes the op's arguments as the op does; of a tensor it reads only .shape and .dtype, so
anything with those two attributes may stand in for one. It returns Meta(shape, dtype), or a tuple of
them for an op with several results. Rules assume arguments the op accepts: checking them is the op's.
"""

import builtins
import collections
import math
import operator

import numpy as np

from fastgrad._types import bool as bool_, float64, get_default_dtype, int64, promote_types

Meta = collections.namedtuple("Meta", ["shape", "dtype"])


def _is_tensor(value):
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _promote(a, b):
    """promote_types, where None is no dtype yet."""
    return b if a is None else a if b is None else promote_types(a, b)


def _combine(higher, lower):
    """PyTorch's combine_categories: a lower-priority group (0-d tensors, then Python numbers) only
    counts when it is of a higher category, or promotes bool."""
    if higher is not None and higher.is_floating_point:
        return higher
    if higher is bool_ or (lower is not None and lower.is_floating_point):
        return _promote(higher, lower)
    return higher if higher is not None else lower


def result_type(*operands):
    """PyTorch's type promotion over tensors and Python numbers (None operands are left out):
    tensors with dimensions first, then 0-d tensors, then numbers (a float number is of the default dtype)."""
    dims = zeros = numbers = None
    for x in operands:
        if x is None:
            continue
        if _is_tensor(x):
            if len(x.shape):
                dims = _promote(dims, x.dtype)
            else:
                zeros = _promote(zeros, x.dtype)
        else:
            number = bool_ if isinstance(x, builtins.bool) else int64 if isinstance(x, int) else get_default_dtype()
            numbers = _promote(numbers, number)
    return _combine(dims, _combine(zeros, numbers))


def broadcast_shapes(*shapes):
    """The shape the shapes broadcast to, or PyTorch's error for sizes that do not match."""
    result = ()
    for shape in shapes:
        n = builtins.max(len(result), len(shape))
        a, b = (1,) * (n - len(result)) + result, (1,) * (n - len(shape)) + tuple(shape)
        for i, (da, db) in enumerate(zip(a, b)):
            if da != db and 1 not in (da, db):
                raise RuntimeError(
                    f"The size of tensor a ({da}) must match the size of tensor b ({db}) at non-singleton dimension {i}"
                )
        result = tuple(db if da == 1 else da for da, db in zip(a, b))
    return result


def _shape(x):
    return tuple(x.shape) if _is_tensor(x) else ()


def _wrap(dim, ndim):
    return operator.index(dim) % builtins.max(ndim, 1)


def _dim_list(dim, ndim):
    """None, () or [] -> every dim; an int or a sequence -> those dims, wrapped."""
    if dim is None:
        return list(range(ndim))
    dims = list(dim) if isinstance(dim, (tuple, list)) else [dim]
    return [_wrap(d, ndim) for d in dims] if dims else list(range(ndim))


def _reduced(shape, dims, keepdim):
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def _sizes(args):
    """(2, 3), ((2, 3),) and ([2, 3],) all mean [2, 3], as _methods reads sizes."""
    return list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else list(args)


def _floating(dtype):
    return dtype if dtype.is_floating_point else get_default_dtype()


# ---- elementwise


def binary(input, other, **options):
    return Meta(broadcast_shapes(_shape(input), _shape(other)), result_type(input, other))


def div(input, other, *, rounding_mode=None, **options):
    shape, dtype = binary(input, other)
    return Meta(shape, dtype if rounding_mode is not None else _floating(dtype))


def comparison(input, other, **options):
    return Meta(broadcast_shapes(_shape(input), _shape(other)), bool_)


def unary(input, **options):
    return Meta(tuple(input.shape), input.dtype)


def unary_float(input, **options):
    return Meta(tuple(input.shape), _floating(input.dtype))


def unravel_index(indices, shape):
    count = 1 if isinstance(shape, int) else len(shape)
    return tuple(Meta(tuple(indices.shape), int64) for _ in range(count))


def trapezoid(y, x=None, *, dx=None, dim=-1):
    shape = list(y.shape)
    del shape[_wrap(dim, len(shape))]
    return Meta(tuple(shape), result_type(y, 0.5))


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    shape = list(y.shape)
    d = _wrap(dim, len(shape))
    shape[d] = max(shape[d] - 1, 0)
    return Meta(tuple(shape), result_type(y, 0.5))


def isin(elements, test_elements, **options):
    return Meta(tuple(elements.shape) if _is_tensor(elements) else (), bool_)


def unary_bool(input, **options):
    return Meta(tuple(input.shape), bool_)


def square(input, **options):
    """x * x as pow(x, 2): bools become int64."""
    return Meta(tuple(input.shape), int64 if input.dtype == bool_ else input.dtype)


def inplace(self, *args, **options):
    """An in-place op's result is `self`."""
    return Meta(tuple(self.shape), self.dtype)


def clamp(input, min=None, max=None, **options):
    shape = broadcast_shapes(_shape(input), _shape(min), _shape(max))
    return Meta(shape, result_type(input, min, max))


def where(condition, input, other):
    shape = broadcast_shapes(_shape(condition), _shape(input), _shape(other))
    return Meta(shape, result_type(input, other))


def where_method(self, condition, other):
    return where(condition, self, other)


def masked_fill(input, mask, value):
    return Meta(broadcast_shapes(_shape(input), _shape(mask)), input.dtype)


# binary/ternary elementwise ops of issue 13


def lerp(input, end, weight, **options):
    """The operands have the input's dtype (lerp checks it)."""
    return Meta(broadcast_shapes(_shape(input), _shape(end), _shape(weight)), input.dtype)


def binary_float(input, other, **options):
    """atan2, logaddexp, ...: integers become the default dtype."""
    return Meta(broadcast_shapes(_shape(input), _shape(other)), _floating(result_type(input, other)))


def float_power(input, exponent, **options):
    return Meta(broadcast_shapes(_shape(input), _shape(exponent)), float64)


def addcmul(input, tensor1, tensor2, **options):
    return Meta(broadcast_shapes(_shape(input), _shape(tensor1), _shape(tensor2)), result_type(input, tensor1, tensor2))


# ---- reductions


def _reduction(input, dim, keepdim, dtype):
    return Meta(_reduced(tuple(input.shape), _dim_list(dim, len(input.shape)), keepdim), dtype)


def sum(input, dim=None, keepdim=False, *, dtype=None, **options):
    """sum and prod: integers and bools accumulate in int64."""
    if dtype is None:
        dtype = input.dtype if input.dtype.is_floating_point else int64
    return _reduction(input, dim, keepdim, dtype)


def mean(input, dim=None, keepdim=False, *, dtype=None, **options):
    return _reduction(input, dim, keepdim, dtype or input.dtype)


def var(input, dim=None, unbiased=None, keepdim=False, **options):
    if isinstance(dim, builtins.bool):  # var(unbiased)
        dim = None
    return _reduction(input, dim, keepdim, input.dtype)


def reduction(input, dim=(), keepdim=False):
    """amax, amin: the input's dtype."""
    return _reduction(input, dim, keepdim, input.dtype)


def argmax(input, dim=None, keepdim=False):
    return _reduction(input, dim, keepdim, int64)


def all(input, dim=None, keepdim=False):
    return _reduction(input, dim, keepdim, bool_)


def extreme(input, dim=None, keepdim=False, **options):
    """max / min: over everything, along a dim (values, indices), or elementwise with a tensor."""
    if _is_tensor(dim):
        return binary(input, dim)
    if dim is None:
        return Meta((), input.dtype)
    values = _reduction(input, dim, keepdim, input.dtype)
    return values, Meta(values.shape, int64)


def sort(input, dim=-1, descending=False, **options):
    return Meta(tuple(input.shape), input.dtype), Meta(tuple(input.shape), int64)


def msort(input):
    return Meta(tuple(input.shape), input.dtype)


def argsort(input, dim=-1, descending=False, **options):
    return Meta(tuple(input.shape), int64)


def topk(input, k, dim=-1, largest=True, sorted=True):
    shape = list(input.shape)
    if shape:
        shape[_wrap(dim, len(shape))] = operator.index(k)
    return Meta(tuple(shape), input.dtype), Meta(tuple(shape), int64)


def _values_indices(input, dim, keepdim):
    values = _reduction(input, dim, keepdim, input.dtype)
    return values, Meta(values.shape, int64)


def kthvalue(input, k, dim=-1, keepdim=False):
    return _values_indices(input, dim, keepdim)


def mode(input, dim=-1, keepdim=False):
    return _values_indices(input, dim, keepdim)


def median(input, dim=None, keepdim=False):
    return Meta((), input.dtype) if dim is None else _values_indices(input, dim, keepdim)


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    return _reduction(input, dim, keepdim, dtype or input.dtype)


# reductions and set ops of issue 13 (reduce)


def logsumexp(input, dim, keepdim=False, **options):
    return _reduction(input, dim, keepdim, _floating(input.dtype))


def count_nonzero(input, dim=None):
    return _reduction(input, dim, False, int64)


def aminmax(input, *, dim=None, keepdim=False):
    result = _reduction(input, dim, keepdim, input.dtype)
    return result, result


def dist(input, other, p=2):
    return Meta((), result_type(input, other))


def pairwise_distance(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    shape = broadcast_shapes(_shape(x1), _shape(x2))
    return _reduction(Meta(shape, None), -1, keepdim, _floating(result_type(x1, x2)))


def cosine_similarity(x1, x2, dim=1, eps=1e-08):
    return _reduction(Meta(broadcast_shapes(_shape(x1), _shape(x2)), None), dim, False, result_type(x1, x2))


def quantile(input, q, dim=None, keepdim=False, **options):
    """quantile and nanquantile: q's dim (a 1-D q), then the reduction's."""
    values = _reduction(input, dim, keepdim, input.dtype)
    return Meta(_shape(q) + values.shape, input.dtype)


def searchsorted(sorted_sequence, input, **options):
    return Meta(_shape(input), int64)


def bucketize(input, boundaries, **options):
    return Meta(_shape(input), int64)


def histc(input, bins=100, min=0, max=0, **options):
    return Meta((operator.index(bins),), input.dtype)


def histogram(input, bins, **options):
    """(hist, bin_edges): `bins` bins, or one fewer than the bins tensor's edges."""
    edges = bins.shape[0] if _is_tensor(bins) else operator.index(bins) + 1
    return Meta((edges - 1,), input.dtype), Meta((edges,), input.dtype)


def var_mean(input, dim=None, unbiased=None, keepdim=False, **options):
    """std_mean and var_mean: two results shaped as var's."""
    result = var(input, dim, unbiased, keepdim)
    return result, result


def softmax(input, dim, dtype=None):
    return Meta(tuple(input.shape), dtype or input.dtype)


# ---- scans along one dim


def cumsum(input, dim, *, dtype=None, **options):
    """cumsum and cumprod: in `dtype`, by default the input's, int64 for integers and bools."""
    return Meta(tuple(input.shape), dtype or (input.dtype if input.dtype.is_floating_point else int64))


def scan(input, dim, **options):
    return Meta(tuple(input.shape), input.dtype)


def cummax(input, dim):
    """cummax and cummin: values and indices."""
    return scan(input, dim), Meta(tuple(input.shape), int64)


# ---- products


def matmul(input, other, **options):
    """matmul (and mm, bmm, mv, dot, its special cases): 1-D operands gain a dim that the result
    loses again; the batch dims broadcast."""
    a, b = tuple(input.shape), tuple(other.shape)
    rows = a[-2:-1] if len(a) > 1 else ()
    cols = b[-1:] if len(b) > 1 else ()
    batch = broadcast_shapes(a[:-2], b[:-2])
    return Meta(batch + rows + cols, result_type(input, other))


# ---- linear algebra (fastgrad.linalg)


def addmm(input, mat1, mat2, *, beta=1, alpha=1, **options):
    """addmm, addmv, baddbmm: input broadcast to the product's shape."""
    return Meta(matmul(mat1, mat2).shape, result_type(input, mat1, mat2))


def addr(input, vec1, vec2, *, beta=1, alpha=1, **options):
    return Meta((vec1.shape[0], vec2.shape[0]), result_type(input, vec1, vec2))


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, **options):
    return Meta((batch1.shape[1], batch2.shape[2]), result_type(input, batch1, batch2))


def inner(input, other, **options):
    return Meta(tuple(input.shape[:-1]) + tuple(other.shape[:-1]), result_type(input, other))


def tensordot(a, b, dims=2, out=None):
    if isinstance(dims, (list, tuple)):
        dims_a, dims_b = ([side] if isinstance(side, int) else list(side) for side in dims)
    else:
        dims_a, dims_b = list(range(-dims, 0)), list(range(dims))
    free_a = [n for d, n in enumerate(a.shape) if d not in [_wrap(x, len(a.shape)) for x in dims_a]]
    free_b = [n for d, n in enumerate(b.shape) if d not in [_wrap(x, len(b.shape)) for x in dims_b]]
    return Meta(tuple(free_a + free_b), result_type(a, b))


def einsum(equation, *operands):
    """The output subscripts' sizes (explicit after ->, or the letters used once, sorted)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    lhs, _, rhs = equation.replace(" ", "").partition("->")
    sizes, ellipsis = {}, ()
    for term, x in zip(lhs.split(","), operands):
        letters = term.replace("...", "")
        if "..." in term:
            before = term.index("...")
            count = len(x.shape) - len(letters)
            ellipsis = broadcast_shapes(ellipsis, tuple(x.shape[before : before + count]))
            shape = x.shape[:before] + x.shape[before + count :]
        else:
            shape = x.shape
        for letter, n in zip(letters, shape):
            sizes[letter] = n if sizes.get(letter, 1) == 1 else sizes[letter]
    if not _:
        counts = collections.Counter(lhs.replace("...", "").replace(",", ""))
        rhs = "..." + "".join(sorted(letter for letter, n in counts.items() if n == 1))
    before, dots, after = rhs.partition("...")
    shape = tuple(sizes[c] for c in before) + (ellipsis if dots else ()) + tuple(sizes[c] for c in after)
    return Meta(shape, result_type(*operands))


def chain_matmul(*matrices, **options):
    return Meta((matrices[0].shape[0], matrices[-1].shape[-1]), matrices[0].dtype)


def cross(input, other, dim=None, **options):
    return Meta(broadcast_shapes(tuple(input.shape), tuple(other.shape)), result_type(input, other))


def cdist(x1, x2, p=2.0, compute_mode=None):
    batch = broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    return Meta(batch + (x1.shape[-2], x2.shape[-2]), result_type(x1, x2))


def det(input):
    """det, logdet: one number per matrix."""
    return Meta(tuple(input.shape[:-2]), input.dtype)


def slogdet(input):
    return det(input), det(input)


def svd(input, some=True, compute_uv=True, **options):
    *batch, m, n = input.shape
    k = builtins.min(m, n)
    u, v = (k, k) if some else (m, n)
    batch = tuple(batch)
    return Meta(batch + (m, u), input.dtype), Meta(batch + (k,), input.dtype), Meta(batch + (n, v), input.dtype)


def qr(input, some=True, **options):
    *batch, m, n = input.shape
    k = builtins.min(m, n) if some else m
    return Meta(tuple(batch) + (m, k), input.dtype), Meta(tuple(batch) + (k, n), input.dtype)


def pinverse(input, rcond=1e-15):
    return Meta(tuple(input.shape[:-2]) + (input.shape[-1], input.shape[-2]), input.dtype)


# ---- shapes


def view(input, *shape):
    """view / reshape (sizes as varargs or one sequence; one of them may be -1)."""
    sizes = _sizes(shape)
    if -1 in sizes:
        known = 1
        for n in sizes:
            known *= n if n != -1 else 1
        total = 1
        for n in input.shape:
            total *= n
        sizes[sizes.index(-1)] = total // known if known else 0
    return Meta(tuple(sizes), input.dtype)


def view_as(self, other):
    return Meta(tuple(other.shape), self.dtype)


def expand(self, *sizes):
    sizes = _sizes(sizes)
    shape = (1,) * (len(sizes) - len(self.shape)) + tuple(self.shape)
    return Meta(tuple(old if new == -1 else new for old, new in zip(shape, sizes)), self.dtype)


def permute(input, *dims):
    shape = tuple(input.shape)
    return Meta(tuple(shape[_wrap(d, len(shape))] for d in _sizes(dims)), input.dtype)


def transpose(input, dim0, dim1):
    shape = list(input.shape)
    i, j = _wrap(dim0, len(shape)), _wrap(dim1, len(shape))
    if shape:
        shape[i], shape[j] = shape[j], shape[i]
    return Meta(tuple(shape), input.dtype)


def t(input):
    return Meta(tuple(reversed(input.shape)), input.dtype)


def squeeze(input, dim=None):
    shape = tuple(input.shape)
    dims = _dim_list(dim, len(shape))
    return Meta(tuple(n for i, n in enumerate(shape) if not (i in dims and n == 1)), input.dtype)


def unsqueeze(input, dim):
    shape = list(input.shape)
    shape.insert(operator.index(dim) % (len(shape) + 1), 1)
    return Meta(tuple(shape), input.dtype)


def flatten(input, start_dim=0, end_dim=-1):
    shape = tuple(input.shape)
    if not shape:
        return Meta((1,), input.dtype)
    start, end = _wrap(start_dim, len(shape)), _wrap(end_dim, len(shape))
    merged = 1
    for n in shape[start : end + 1]:
        merged *= n
    return Meta(shape[:start] + (merged,) + shape[end + 1 :], input.dtype)


def cat(tensors, dim=0, **options):
    first = tuple(tensors[0].shape)
    d = _wrap(dim, len(first))
    along = builtins.sum(t.shape[d] for t in tensors)
    return Meta(first[:d] + (along,) + first[d + 1 :], result_type(*tensors))


def stack(tensors, dim=0, **options):
    shape = list(tensors[0].shape)
    shape.insert(operator.index(dim) % (len(shape) + 1), len(tensors))
    return Meta(tuple(shape), result_type(*tensors))


def split(tensor, split_size_or_sections, dim=0):
    shape = tuple(tensor.shape)
    d = _wrap(dim, len(shape))
    if isinstance(split_size_or_sections, (tuple, list)):
        sections = list(split_size_or_sections)
    else:
        size, length = split_size_or_sections, shape[d]
        sections = [builtins.min(size, length - start) for start in range(0, length, size)] or [0]
    return tuple(Meta(shape[:d] + (n,) + shape[d + 1 :], tensor.dtype) for n in sections)


def split_with_sizes(input, split_sizes, dim=0):
    return split(input, list(split_sizes), dim)


def _directional_split(dim, input, indices_or_sections):
    return tensor_split(input, indices_or_sections, dim)


def hsplit(input, indices_or_sections):
    return _directional_split(0 if len(input.shape) == 1 else 1, input, indices_or_sections)


def vsplit(input, indices_or_sections):
    return _directional_split(0, input, indices_or_sections)


def dsplit(input, indices_or_sections):
    return _directional_split(2, input, indices_or_sections)


def chunk(input, chunks, dim=0):
    length = input.shape[_wrap(dim, len(input.shape))]
    return split(input, -(-length // chunks) if length else [0] * chunks, dim)


# scatter/gather/index family (issue 13)
def gather(input, dim, index, **options):
    return Meta(tuple(index.shape), input.dtype)


def index_select(input, dim, index, **options):
    shape = list(input.shape)
    if shape:
        shape[_wrap(operator.index(dim), len(shape))] = int(np.prod(index.shape, dtype=np.int64))
    return Meta(tuple(shape), input.dtype)


def like_input(input, *args, **options):
    """scatter, index_add, ...: a new tensor with input's shape and dtype."""
    return Meta(tuple(input.shape), input.dtype)


def _count_nonzero(t):
    """How many elements of tensor t are nonzero: data, which nonzero and masked_select's rules must
    read (a stand-in without values has none)."""
    return int(np.count_nonzero(t.detach().numpy())) if hasattr(t, "detach") else 0


def nonzero(input, *, as_tuple=False, **options):
    count = _count_nonzero(input)
    if as_tuple:
        return tuple(Meta((count,), int64) for _ in builtins.range(builtins.max(len(input.shape), 1)))
    return Meta((count, len(input.shape)), int64)


def masked_select(input, mask, **options):
    shape = broadcast_shapes(_shape(input), _shape(mask))
    return Meta(
        (
            _count_nonzero(mask)
            * int(np.prod(shape, dtype=np.int64))
            // builtins.max(int(np.prod(_shape(mask), dtype=np.int64)), 1),
        ),
        input.dtype,
    )


def take(input, index, **options):
    return Meta(tuple(index.shape), input.dtype)


def take_along_dim(input, indices, dim=None, **options):
    if dim is None:
        return Meta((int(np.prod(indices.shape, dtype=np.int64)),), input.dtype)
    d = _wrap(dim, len(input.shape))
    others = [[1 if i == d else n for i, n in enumerate(t.shape)] for t in (input, indices)]
    shape = list(broadcast_shapes(*others))
    shape[d] = indices.shape[d]
    return Meta(tuple(shape), input.dtype)


def multinomial(input, num_samples, replacement=False, **options):
    return Meta(tuple(input.shape[:-1]) + (operator.index(num_samples),), int64)


def new(self, *size, dtype=None, **options):
    """new_zeros / new_ones / new_empty: self's dtype unless dtype= says otherwise."""
    return Meta(tuple(_sizes(size)), dtype or self.dtype)


def new_full(self, size, fill_value, *, dtype=None, **options):
    return Meta(tuple(_sizes((size,))), dtype or self.dtype)


def new_tensor(self, data, *, dtype=None, **options):
    """The nesting of Python data, as numpy reads it (a tensor's own shape)."""
    return Meta(tuple(data.shape) if _is_tensor(data) else np.shape(data), dtype or self.dtype)


# ---- shape family (issue 13)


def same(input, *args, **options):
    """The input's shape and dtype (flip, roll, tril, ...)."""
    return Meta(tuple(input.shape), input.dtype)


def _tensors(tensors):
    """Tensors given as varargs or as one list."""
    return list(tensors[0]) if len(tensors) == 1 and not _is_tensor(tensors[0]) else list(tensors)


def narrow(input, dim, start, length):
    shape = list(input.shape)
    shape[_wrap(dim, len(shape))] = operator.index(length)
    return Meta(tuple(shape), input.dtype)


def unfold(self, dimension, size, step):
    shape = list(self.shape)
    if shape:
        d = _wrap(dimension, len(shape))
        shape[d] = (shape[d] - size) // step + 1
    return Meta(tuple(shape) + (size,), self.dtype)


def select(input, dim, index):
    shape = list(input.shape)
    del shape[_wrap(dim, len(shape))]
    return Meta(tuple(shape), input.dtype)


def unbind(input, dim=0):
    shape = list(input.shape)
    d = _wrap(dim, len(shape))
    return (Meta(tuple(shape[:d] + shape[d + 1 :]), input.dtype),) * shape[d]


def movedim(input, source, destination):
    n = len(input.shape)
    source, destination = ([_wrap(d, n) for d in _sizes((x,))] for x in (source, destination))
    order = [None] * n
    for s, d in zip(source, destination):
        if n:  # a 0-d input has nothing to move
            order[d] = s
    rest = iter(i for i in range(n) if i not in source)
    return Meta(tuple(input.shape[next(rest) if o is None else o] for o in order), input.dtype)


def broadcast_tensors(*tensors):
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(Meta(shape, t.dtype) for t in tensors)


def _at_least(n, tensors, pad):
    metas = tuple(Meta(pad(tuple(t.shape)) if len(t.shape) < n else tuple(t.shape), t.dtype) for t in _tensors(tensors))
    return metas[0] if len(tensors) == 1 and _is_tensor(tensors[0]) else metas


def atleast_1d(*tensors):
    return _at_least(1, tensors, lambda shape: (1,))


def atleast_2d(*tensors):
    return _at_least(2, tensors, lambda shape: (1,) + shape if shape else (1, 1))


def _pad_3d(shape):
    return {0: (1, 1, 1), 1: (1,) + shape + (1,), 2: shape + (1,)}[len(shape)]


def atleast_3d(*tensors):
    return _at_least(3, tensors, _pad_3d)


def unflatten(input, dim, sizes):
    shape = list(input.shape)
    d = _wrap(dim, len(shape))
    sizes = _sizes((sizes,))
    if -1 in sizes:
        known = 1
        for n in sizes:
            known *= n if n != -1 else 1
        sizes[sizes.index(-1)] = shape[d] // known
    return Meta(tuple(shape[:d] + sizes + shape[d + 1 :]), input.dtype)


def rot90(input, k=1, dims=(0, 1)):
    shape = list(input.shape)
    if operator.index(k) % 2:
        i, j = (_wrap(d, len(shape)) for d in dims)
        shape[i], shape[j] = shape[j], shape[i]
    return Meta(tuple(shape), input.dtype)


def repeat(self, *repeats):
    sizes = _sizes(repeats)
    shape = (1,) * (len(sizes) - len(self.shape)) + tuple(self.shape)
    return Meta(tuple(r * n for r, n in zip(sizes, shape)), self.dtype)


def tile(input, *dims):
    dims = _sizes(dims)
    return repeat(input, [1] * (len(input.shape) - len(dims)) + dims)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """The length of the repeated dim is known from the counts' values: output_size, or a count
    tensor's values read here, as the op reads them."""
    if repeats is None:
        return Meta((int(np.asarray(input.tolist()).sum()),), int64)
    shape = list(input.shape) if dim is not None else [int(np.prod(input.shape))]
    d = _wrap(dim, len(shape)) if dim is not None else 0
    counts = np.asarray(repeats.tolist() if _is_tensor(repeats) else repeats)
    shape[d] = int(counts.sum()) if counts.size > 1 else shape[d] * int(counts.sum())
    return Meta(tuple(shape), input.dtype)


def triangle_indices(row, col, offset=0, **options):
    """tril_indices / triu_indices: 2 x the count numpy gives."""
    return Meta((2, len(np.tril_indices(row, offset, col)[0])), int64)


def _diagonal_length(n, m, offset):
    return builtins.max(builtins.min(n + builtins.min(offset, 0), m - builtins.max(offset, 0)), 0)


def diagonal(input, offset=0, dim1=0, dim2=1):
    shape = tuple(input.shape)
    i, j = _wrap(dim1, len(shape)), _wrap(dim2, len(shape))
    rest = tuple(n for k, n in enumerate(shape) if k not in (i, j))
    return Meta(rest + (_diagonal_length(shape[i], shape[j], offset),), input.dtype)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    shape = list(input.shape[:-1])
    n = input.shape[-1] + abs(offset)
    for d in sorted(operator.index(d) % (len(shape) + 2) for d in (dim1, dim2)):
        shape.insert(d, n)
    return Meta(tuple(shape), input.dtype)


def diag(input, diagonal=0):
    return diag_embed(input, diagonal, 0, 1) if len(input.shape) == 1 else globals()["diagonal"](input, diagonal)


def diagflat(input, offset=0):
    n = math.prod(input.shape) + abs(offset)
    return Meta((n, n), input.dtype)


def trace(input):
    return Meta((), input.dtype if input.dtype.is_floating_point else int64)


def outer(input, vec2):
    return Meta((input.shape[0], vec2.shape[0]), result_type(input, vec2))


def kron(input, other):
    n = builtins.max(len(input.shape), len(other.shape))
    a, b = ((1,) * (n - len(t.shape)) + tuple(t.shape) for t in (input, other))
    return Meta(tuple(x * y for x, y in zip(a, b)), result_type(input, other))


def meshgrid(*tensors, indexing=None):
    tensors = _tensors(tensors)
    shape = [int(np.prod(t.shape)) for t in tensors]
    if indexing == "xy" and len(shape) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    return tuple(Meta(tuple(shape), t.dtype) for t in tensors)


def cartesian_prod(*tensors):
    if len(tensors) == 1:
        return Meta(tuple(tensors[0].shape), tensors[0].dtype)
    rows = int(np.prod([t.shape[0] for t in tensors]))
    return Meta((rows, len(tensors)), result_type(*tensors))


def block_diag(*tensors):
    blocks = [tuple(t.shape) if len(t.shape) == 2 else (1, int(np.prod(t.shape))) for t in tensors]
    rows, cols = builtins.sum(b[0] for b in blocks), builtins.sum(b[1] for b in blocks)
    return Meta((rows if tensors else 1, cols), result_type(*tensors) if tensors else get_default_dtype())


def tensor_split(input, indices_or_sections, dim=0):
    shape = list(input.shape)
    d = _wrap(dim, len(shape))
    split, length = indices_or_sections, shape[d]
    if _is_tensor(split):
        split = split.tolist()
    if isinstance(split, (list, tuple)):
        bounds = [0] + list(split) + [length]
        sizes = [len(range(length)[a:b]) for a, b in zip(bounds, bounds[1:])]
    else:
        size, extra = divmod(length, split)
        sizes = [size + (i < extra) for i in range(split)]
    return tuple(Meta(tuple(shape[:d] + [n] + shape[d + 1 :]), input.dtype) for n in sizes)


def _stacked(tensors, n, pad, dim):
    metas = _at_least(n, (list(tensors),), pad)
    return cat(metas, dim(metas))


def hstack(tensors, **options):
    return _stacked(tensors, 1, lambda shape: (1,), lambda metas: 0 if len(metas[0].shape) == 1 else 1)


def vstack(tensors, **options):
    return _stacked(tensors, 2, lambda shape: (1,) + shape if shape else (1, 1), lambda metas: 0)


def dstack(tensors, **options):
    return _stacked(tensors, 3, _pad_3d, lambda metas: 2)


def column_stack(tensors, **options):
    return _stacked(tensors, 2, lambda shape: (int(np.prod(shape)), 1), lambda metas: 1)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    shape = list(input.shape)
    d = _wrap(dim, len(shape))
    shape[d] += builtins.sum(t.shape[d] for t in (prepend, append) if t is not None)
    shape[d] = builtins.max(shape[d] - n, 0)
    return Meta(tuple(shape), input.dtype)
