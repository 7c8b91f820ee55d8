"""Sorting and selection along one dim: sort, argsort, topk, kthvalue, median, mode. Each row along `dim` is ordered by
value with NaN largest. Equal values come in PyTorch's CPU order, as the C++ core's: index order for the stable sort
and median (whose nth_element breaks ties by position), and otherwise the order that the exact steps of PyTorch's
algorithms give (libstdc++'s std::sort, partial_sort and nth_element, in _stl; kthvalue's own quickselect).
"""

import bisect
import math
from array import array

from . import _stl
from .._types import bool as bool_, float32, int64
from ._autograd import Function, no_grad
from ._creation import arange
from ._elementwise import logical_and, logical_or, where, zeros_like
from ._index import index_put_
from ._reduce import blocks, reduced_shape, reduction_mask
from ._shape import reshape, unsqueeze
from ._tensor import full, new_tensor, wrap_dim


def _key(value, descending):
    """The sort key of a value: NaN largest, so first when descending."""
    key = (1, 0) if value != value else (0, value)
    return (-key[0], -key[1]) if descending else key


def _stable_order(row, descending):
    """The positions of `row` in order, ties in index order (sorted() is stable)."""
    return sorted(range(len(row)), key=lambda i: _key(row[i], descending))


def _before(row, descending):
    """PyTorch's CPU comparators of two positions by value alone, NaN largest (KeyValueCompAsc/Desc, and
    topk's): equal values are left in the order the algorithm's own steps put them."""
    if descending:
        return lambda i, j: (row[i] != row[i] and row[j] == row[j]) or row[i] > row[j]
    return lambda i, j: (row[i] == row[i] and row[j] != row[j]) or row[i] < row[j]


# PyTorch sorts a 1-D integer tensor of at least this many elements in ascending order with a radix sort
# (can_use_radix_sort: stable); other unstable sorts with std::sort.
RADIX_SORT_FROM = 32768


def _sort_positions(x, descending, stable):
    integral = not x._dtype.is_floating_point and x._dtype is not bool_
    radix = x.dim() == 1 and not descending and integral and x.numel() >= RADIX_SORT_FROM

    def positions(row):
        if stable or radix:
            return _stable_order(row, descending)
        order = list(range(len(row)))
        _stl.sort(order, 0, len(order), _before(row, descending))
        return order

    return positions


def _topk_positions(k, largest, sorted):
    """PyTorch's topk_impl_loop: partial_sort when k * 64 <= n, else nth_element at k - 1 and (sorted)
    a sort of the k - 1 before it."""

    def positions(row):
        n, order, before = len(row), list(range(len(row))), _before(row, largest)
        if k * 64 <= n:
            _stl.partial_sort(order, 0, k, n, before)
        else:
            _stl.nth_element(order, 0, k - 1, n, before)
            if sorted:
                _stl.sort(order, 0, k - 1, before)
        return order[:k]

    return positions


def _kth_position(row, k):
    """PyTorch's kthvalue: its quick_select_template (median-of-three quickselect, NaN largest) over the
    row's positions, which puts the k-th smallest at k - 1."""
    arr = list(range(len(row)))
    gt = _before(row, True)  # gt_or_nan
    low, high = 0, len(arr) - 1
    while high > low:
        if high == low + 1:
            if gt(arr[low], arr[high]):
                arr[low], arr[high] = arr[high], arr[low]
            break
        mid = low + (high - low) // 2
        arr[mid], arr[low + 1] = arr[low + 1], arr[mid]
        for a, b in ((low + 1, high), (low, high), (low + 1, low)):
            if gt(arr[a], arr[b]):
                arr[a], arr[b] = arr[b], arr[a]
        i, j, pivot = low + 1, high, arr[low]
        while True:
            i += 1
            while gt(pivot, arr[i]):
                i += 1
            j -= 1
            while gt(arr[j], pivot):
                j -= 1
            if j < i:
                break
            arr[i], arr[j] = arr[j], arr[i]
        arr[low], arr[j] = arr[j], arr[low]
        if j <= k - 1:
            low = i
        if j >= k - 1:
            high = j - 1
    return arr[k - 1]


def _by_row(x, dim, per_row, out_shape, positions):
    """(values, indices): for each row of x along `dim`, the `per_row` positions that
    positions(row) picks, in contiguous tensors of `out_shape` (x's shape with `dim` of length
    per_row, or without `dim` for one per row). A 0-d x is one row of one element."""
    shape = x._shape or (1,)
    outer, inner = math.prod(shape[:dim]), math.prod(shape[dim + 1 :])
    values, indices = [None] * (outer * per_row * inner), [0] * (outer * per_row * inner)
    for r, row in enumerate(blocks(x, reduction_mask([dim], x.dim()))):
        o, i = divmod(r, inner)
        for j, at in enumerate(positions(row)):
            values[(o * per_row + j) * inner + i], indices[(o * per_row + j) * inner + i] = row[at], at
    return new_tensor(values, out_shape, x._dtype), new_tensor(indices, out_shape, int64)


def _median_position(row):
    """The lower median, or the first NaN (as PyTorch's median: NaN wins; its nth_element breaks ties
    by position, so the order is the stable one)."""
    nan = next((i for i, v in enumerate(row) if v != v), None)
    return nan if nan is not None else _stable_order(row, False)[(len(row) - 1) // 2]


def _mode_position(row):
    """The last position of the most frequent value (the smallest of equally frequent ones): the end
    of its run in PyTorch's CPU mode's std::sort of the row by `<` alone."""
    order = list(range(len(row)))
    _stl.sort(order, 0, len(order), lambda i, j: row[i] < row[j])
    best, best_count, run = None, 0, 0
    for j, at in enumerate(order):
        run += 1
        if j + 1 < len(order) and row[order[j + 1]] == row[at]:
            continue  # the run goes on (NaN ends it)
        if run > best_count:
            best, best_count = at, run
        run = 0
    return best


def _length(x, dim):
    return x._shape[dim] if x._shape else 1


def _with_length(x, dim, n):
    return tuple(n if d == dim else size for d, size in enumerate(x._shape))


def _reduced(x, dim, keepdim):
    return reduced_shape(x._shape, reduction_mask([dim], x.dim()), keepdim)


def _require_nonempty_dim(x, dim, op):
    if x._shape and x._shape[dim] == 0:
        raise IndexError(f"{op}(): Expected reduction dim {dim} to have non-zero size.")


def _require_not_bool(x, kernel):
    if x._dtype is bool_:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


class SelectAlongDim(Function):
    """sort, topk, kthvalue, median(dim), mode: the gradient goes to the positions the indices
    (output 1) name, as PyTorch's value_selecting_reduction_backward."""

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


class KthvalueBackward0(SelectAlongDim):
    """kthvalue"""


class MedianBackward1(SelectAlongDim):
    """median(dim)"""


class ModeBackward0(SelectAlongDim):
    """mode"""


class MedianBackward0(Function):
    """median() of all elements: the gradient split evenly among the elements equal to the result
    (the NaNs, for a NaN result), as PyTorch's evenly_distribute_backward."""

    def forward(self, x):
        _require_not_bool(x, "median_cpu")
        if x.numel() == 0:  # PyTorch's NaN, converted to the dtype
            out = full((), -(2**63) if x._dtype is int64 else math.nan, x._dtype)
        else:
            with no_grad():
                out = _by_row(reshape(x, (-1,)), 0, 1, (), lambda row: [_median_position(row)])[0]
        self.save(x)
        self.save(out, is_output=True)
        return out

    def backward(self, g):
        x, out = self.unpack(0), self.unpack(1)
        hit = logical_or(x == out, logical_and(x != x, out != out))
        share = g.expand(x._shape) / hit.to(g._dtype).sum()
        return where(hit, share, zeros_like(share))


def sort(x, dim, descending, stable):
    """`stable` None or False: PyTorch's unstable sort (std::sort's order of equal values)."""
    dim = wrap_dim(dim, x.dim())
    node = SortBackward0 if stable is None else SortBackward1
    n = _length(x, dim)
    return node.run(x, result=_by_row(x, dim, n, x._shape, _sort_positions(x, descending, stable)), dim=dim)


def argsort(x, dim, descending, stable):
    dim = wrap_dim(dim, x.dim())
    return _by_row(x, dim, _length(x, dim), x._shape, _sort_positions(x, descending, stable))[1]


def topk(x, k, dim, largest, sorted):
    dim = wrap_dim(dim, x.dim())
    if not 0 <= k <= _length(x, dim):
        raise RuntimeError("selected index k out of range")
    if x._dtype is bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    if not x._shape:
        k = 1  # a 0-d input gives itself, for k 0 or 1 (as PyTorch)
    result = _by_row(x, dim, k, _with_length(x, dim, k), _topk_positions(k, largest, sorted))
    return TopkBackward0.run(x, result=result, dim=dim)


def kthvalue(x, k, dim, keepdim):
    dim = wrap_dim(dim, x.dim())
    _require_nonempty_dim(x, dim, "kthvalue")
    if not 1 <= k <= _length(x, dim):
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    _require_not_bool(x, "kthvalue_cpu")
    result = _by_row(x, dim, 1, _reduced(x, dim, keepdim), lambda row: [_kth_position(row, k)])
    return KthvalueBackward0.run(x, result=result, dim=dim, keepdim=keepdim)


def median_dim(x, dim, keepdim):
    dim = wrap_dim(dim, x.dim())
    _require_nonempty_dim(x, dim, "median")
    _require_not_bool(x, "median_out")
    result = _by_row(x, dim, 1, _reduced(x, dim, keepdim), lambda row: [_median_position(row)])
    return MedianBackward1.run(x, result=result, dim=dim, keepdim=keepdim)


def median_all(x):
    return MedianBackward0.run(x)


def mode(x, dim, keepdim):
    dim = wrap_dim(dim, x.dim())
    _require_nonempty_dim(x, dim, "mode")
    result = _by_row(x, dim, 1, _reduced(x, dim, keepdim), lambda row: [_mode_position(row)])
    return ModeBackward0.run(x, result=result, dim=dim, keepdim=keepdim)


# ---- searching, counting and unique (issue 13), as the core's: no graph; arguments checked by the shared layer


def _values(x):
    """x's elements in row-major order."""
    return blocks(x, [True] * x.dim())[0]


def _rounding(dtype):
    """Rounds a Python float to `dtype` (float32 arithmetic is float64's rounded after each step)."""
    return (lambda v: array("f", [v])[0]) if dtype is float32 else (lambda v: v)


def searchsorted(sorted_sequence, values, right):
    """For each value, its position in its row of `sorted_sequence` (1-D, or one row per row of values)."""
    seq, found = _values(sorted_sequence), []
    n, per_row = sorted_sequence._shape[-1], values._shape[-1] if values._shape else 1
    for i, v in enumerate(_values(values)):
        start = 0 if sorted_sequence.dim() == 1 else i // per_row * n
        lo, hi = 0, n
        while lo < hi:  # PyTorch's comparisons, so that NaN values and boundaries land where its do
            mid = (lo + hi) // 2
            if not (seq[start + mid] > v if right else seq[start + mid] >= v):
                lo = mid + 1
            else:
                hi = mid
        found.append(lo)
    return new_tensor(found, values._shape, int64)


def bincount(x, weights, minlength):
    at = _values(x)
    totals = [0.0 if weights is not None else 0] * max([minlength] + [i + 1 for i in at])
    rounded = _rounding(weights._dtype if weights is not None else int64)
    for i, w in zip(at, _values(weights) if weights is not None else [1] * len(at)):
        totals[i] = rounded(totals[i] + w)  # summed in the weights' dtype, as the core
    return new_tensor(totals, (len(totals),), int64 if weights is None else weights._dtype)


def histogram_counts(x, edges, weights):
    """How many elements of x (or their weights) fall in each bin between the increasing `edges`: a bin
    holds its left edge, the last one its right edge too."""
    edge, bins = _values(edges), edges.numel() - 1
    rounded, counts = _rounding(x._dtype), [0.0] * bins
    for v, w in zip(_values(x), _values(weights) if weights is not None else [1.0] * x.numel()):
        if edge[0] <= v <= edge[-1]:  # not outside, nor NaN
            at = min(bisect.bisect_right(edge, v) - 1, bins - 1)
            counts[at] = rounded(counts[at] + w)  # summed in x's dtype, as the core
    return new_tensor(counts, (bins,), x._dtype)


def unique_rows(rows, consecutive):
    """The distinct rows of a 2-D tensor, in order (or each run of equal rows, `consecutive`): the
    index of each one's first row, each row's distinct row, and how many rows each one has."""
    n, width = rows._shape
    data = _values(rows)
    row = [data[i * width : (i + 1) * width] for i in range(n)]
    order = list(range(n)) if consecutive else sorted(range(n), key=lambda i: [_key(v, False) for v in row[i]])
    first, inverse, counts = [], [0] * n, []
    for i in order:
        if not first or row[i] != row[first[-1]]:  # NaN is never equal: a new value
            first.append(i)
            counts.append(0)
        counts[-1] += 1
        inverse[i] = len(first) - 1
    return (
        new_tensor(first, (len(first),), int64),
        new_tensor(inverse, (n,), int64),
        new_tensor(counts, (len(counts),), int64),
    )
