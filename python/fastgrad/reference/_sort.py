"""Sorting and selection along one dim: sort, argsort, topk. Each row along `dim` is ordered by
value with NaN largest and ties in index order (Python's sort is stable), as the C++ core orders it.
"""

import math

from .._types import bool as bool_, int64
from ._autograd import Function
from ._creation import arange
from ._index import index_put_
from ._reduce import blocks, reduction_mask
from ._shape import reshape, unsqueeze
from ._tensor import full, new_tensor, wrap_dim


def _key(value, descending):
    """The sort key of a value: NaN largest, so first when descending."""
    key = (1, 0) if value != value else (0, value)
    return (-key[0], -key[1]) if descending else key


def _order(row, descending):
    """The positions of `row` in order, ties in index order (sorted() is stable)."""
    return sorted(range(len(row)), key=lambda i: _key(row[i], descending))


def ordered(x, dim, count, descending, only_nth=False, out_shape=None):
    """(values, indices): the first `count` of each row of x along `dim` in order (or, `only_nth`,
    the count-th alone), in contiguous tensors of `out_shape` (x's shape with `dim` of length count,
    or without `dim` for one per row). A 0-d x is one row of one element."""
    shape = x._shape or (1,)
    outer, inner = math.prod(shape[:dim]), math.prod(shape[dim + 1 :])
    per_row = 1 if only_nth else count
    values, indices = [None] * (outer * per_row * inner), [0] * (outer * per_row * inner)
    for r, row in enumerate(blocks(x, reduction_mask([dim], x.dim()))):
        order = _order(row, descending)[count - 1 if only_nth else 0 : count]
        o, i = divmod(r, inner)
        for j, at in enumerate(order):
            values[(o * per_row + j) * inner + i], indices[(o * per_row + j) * inner + i] = row[at], at
    return new_tensor(values, out_shape, x._dtype), new_tensor(indices, out_shape, int64)


def _length(x, dim):
    return x._shape[dim] if x._shape else 1


def _with_length(x, dim, n):
    return tuple(n if d == dim else size for d, size in enumerate(x._shape))


class SelectAlongDim(Function):
    """sort, topk: the gradient goes to the positions the indices (output 1) name, as PyTorch's
    value_selecting_reduction_backward."""

    def forward(self, x, result, dim, keepdim=True):
        self.dim, self.keepdim = dim, keepdim or not x._shape
        self.save(result[1], is_output=True)
        return result

    def backward(self, g):
        in_shape = self.inputs[0][0]
        indices = self.unpack(0)
        if not in_shape:
            return reshape(g, ())  # a 0-d input is its own only element
        if not self.keepdim:
            g, indices = unsqueeze(g, self.dim), unsqueeze(indices, self.dim)
        key = [
            indices
            if d == self.dim
            else reshape(arange(0, g._shape[d], 1, int64), [g._shape[d] if e == d else 1 for e in range(len(in_shape))])
            for d in range(len(in_shape))
        ]
        return index_put_(full(in_shape, 0, g._dtype), key, g, True)


class SortBackward0(SelectAlongDim):
    """sort without `stable`"""


class SortBackward1(SelectAlongDim):
    """sort(stable=...)"""


class TopkBackward0(SelectAlongDim):
    """topk"""


def sort(x, dim, descending, stable):
    dim = wrap_dim(dim, x.dim())
    node = SortBackward0 if stable is None else SortBackward1
    return node.run(x, result=ordered(x, dim, _length(x, dim), descending, out_shape=x._shape), dim=dim)


def argsort(x, dim, descending):
    dim = wrap_dim(dim, x.dim())
    return ordered(x, dim, _length(x, dim), descending, out_shape=x._shape)[1]


def topk(x, k, dim, largest):
    dim = wrap_dim(dim, x.dim())
    if not 0 <= k <= _length(x, dim):
        raise RuntimeError("selected index k out of range")
    if x._dtype is bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    if not x._shape:
        k = 1  # a 0-d input gives itself, for k 0 or 1 (as PyTorch)
    return TopkBackward0.run(x, result=ordered(x, dim, k, largest, out_shape=_with_length(x, dim, k)), dim=dim)
