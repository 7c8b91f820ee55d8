"""Python's x[key] and x[key] = value, and advanced indexing with index tensors and bool masks.

A key is parsed into views applied in order (ints select, slices slice, None unsqueezes) and
optional advanced indices over the dims of the resulting view.
"""

import builtins
import operator

import numpy as np

from .._types import C_TYPE_NAME, bool as bool_, int32, int64
from ._autograd import Function, check_differentiable_output, no_grad, should_record
from ._elementwise import clone, to_dtype
from ._inplace import (
    assert_no_internal_overlap,
    assert_no_overlap,
    assert_no_partial_overlap,
    check_inplace,
    in_place_edges,
    rebase_history,
)
from ._shape import AliasBackward0, expand, permute, select, slice, unsqueeze
from ._storage import INT64_MAX, INT64_MIN, SCALAR_TYPE_NAME
from ._tensor import (
    Tensor,
    broadcast_shapes,
    contiguous_strides,
    copy_values,
    element_offsets,
    full,
    make_view,
    new_tensor,
    number_or_none,
    numel_of,
    read,
    shape_str,
    wrap_dim,
)

_INDEX_DTYPE_ERROR = "tensors used as indices must be long, int, byte or bool tensors"


# ---- parsing x[key]


def _index_tensor(item):
    """An advanced index (tensor, list, tuple or numpy array) as an int64 or bool tensor."""
    if not isinstance(item, Tensor):
        from ._creation import exact_dtype_of_array
        from ._factories import tensor  # fastgrad's, shared: a submodule of this package once it is imported

        if isinstance(item, np.ndarray):
            exact_dtype_of_array(item)  # only the element types a tensor can hold as they are
        item = tensor(item, dtype=int64 if len(item) == 0 else None)  # x[[]]: numpy would make it float64
    if item._dtype.is_floating_point:
        raise IndexError(_INDEX_DTYPE_ERROR)
    return item


def _is_advanced(item):
    return isinstance(item, (Tensor, list, tuple, np.ndarray))


def _int_index(item):
    """x[i] for an int (or anything with __index__); one that int64 cannot hold is a ValueError, as PyTorch."""
    index = operator.index(item)
    if not INT64_MIN <= index <= INT64_MAX:
        raise ValueError("Overflow when unpacking long long")
    return index


def _slice_bound(value):
    """A slice bound as Python reads it: None, or an int clamped to the int64 range (x[2**70:] is empty)."""
    if value is None:
        return None
    if not hasattr(type(value), "__index__"):
        raise TypeError("slice indices must be integers or None or have an __index__ method")
    return builtins.min(builtins.max(operator.index(value), INT64_MIN), INT64_MAX)


def _dims_consumed(item):
    if item is None or item is Ellipsis or isinstance(item, bool):  # a bool adds a dim
        return 0
    if isinstance(item, Tensor) and item._dtype is bool_:
        return item.dim()  # a 0-d mask adds a dim instead
    return 1


def parse_index(x, key):
    """(steps, advanced): steps are ('select', dim, index), ('slice', dim, start, stop, step) and
    ('unsqueeze', dim) on the view so far; advanced has one entry per dim of the final view (None
    keeps the dim whole), or is empty when the key has no tensor or list indices."""
    items = key if isinstance(key, tuple) else (key,)
    if sum(item is Ellipsis for item in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(_dims_consumed(item) for item in items)
    if consumed > x.dim():
        raise IndexError(f"too many indices for tensor of dimension {x.dim()}")
    steps, advanced = [], []
    dim = x_dim = 0  # the dim of the view so far that the next item applies to, and the dim of x it came from
    for item in items:
        if isinstance(item, Tensor) and item._dtype is bool_ and item.dim() == 0:
            item = item.item()
        if isinstance(item, bool):
            # x[True] / x[False]: a new dim of size 1, then all (or none) of it, as PyTorch.
            steps.append(("unsqueeze", dim))
            advanced.append(new_tensor([0] if item else [], (1 if item else 0,), int64))
            dim += 1
        elif item is None:
            steps.append(("unsqueeze", dim))
            advanced.append(None)
            dim += 1
        elif item is Ellipsis:
            advanced += [None] * (x.dim() - consumed)
            dim += x.dim() - consumed
            x_dim += x.dim() - consumed
        elif isinstance(item, builtins.slice):
            start, stop, step = map(_slice_bound, (item.start, item.stop, item.step))
            steps.append(("slice", dim, start, stop, 1 if step is None else step))
            advanced.append(None)
            dim += 1
            x_dim += 1
        elif not _is_advanced(item) and hasattr(type(item), "__index__"):
            index, size = _int_index(item), x._shape[x_dim]
            if not -size <= index < size:
                raise IndexError(f"index {index} is out of bounds for dimension {x_dim} with size {size}")
            steps.append(("select", dim, index))
            x_dim += 1
        elif _is_advanced(item):
            index = _index_tensor(item)
            advanced.append(index)
            covered = _dims_consumed(index)
            dim += covered
            x_dim += covered
        else:
            raise IndexError(
                "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                f"valid indices (got {type(item).__name__})"
            )
    return steps, advanced if any(i is not None for i in advanced) else []


def _apply_steps(x, steps):
    for kind, dim, *args in steps:
        if kind == "select":
            x = select(x, dim, *args)
        elif kind == "slice":
            x = slice(x, dim, *args)
        else:
            x = unsqueeze(x, dim)
    return x


def getitem(x, key):
    steps, advanced = parse_index(x, key)
    view = _apply_steps(x, steps)
    if advanced:
        return index(view, advanced)
    return view if view is not x else AliasBackward0.run(x)


# ---- advanced indexing


def _masks_to_indices(x, indices):
    """Bool masks become int64 coordinates of their true elements: one index tensor per mask dim."""
    out = []
    for idx in indices:
        if idx is None or idx._dtype is not bool_:
            if idx is not None and idx._dtype not in (int64, int32):
                raise IndexError(_INDEX_DTYPE_ERROR)
            out.append(idx if idx is None or idx._dtype is int64 else to_dtype(idx, int64))
            continue
        first = len(out)
        for d in range(idx.dim()):
            if first + d >= x.dim() or idx._shape[d] != x._shape[first + d]:
                raise IndexError(
                    f"The shape of the mask {shape_str(idx._shape)} at index {d} does not match the "
                    f"shape of the indexed tensor {shape_str(x._shape)} at index {first + d}"
                )
        strides = contiguous_strides(idx._shape)
        hits = [i for i, flag in enumerate(read(idx)) if flag]
        for d in range(idx.dim()):
            coords = [i // strides[d] % idx._shape[d] for i in hits]
            out.append(new_tensor(coords, (len(coords),), int64))
    return out


def _plan(x, raw_indices):
    """Where x[indices] reads from, and how its result is laid out.

    Returns (positions, layout, out_shape): the storage positions of the elements in the
    [index dims..., other dims...] layout, that layout's shape, and the permutation (`to_out`) into
    PyTorch's order: index dims stay in place when the indexed dims are adjacent, else go first.
    """
    indices = _masks_to_indices(x, raw_indices)
    if len(indices) > x.dim():
        raise IndexError(f"too many indices for tensor of dimension {x.dim()}")
    indices += [None] * (x.dim() - len(indices))
    indexed = [d for d, idx in enumerate(indices) if idx is not None]
    index_shape = ()
    for n, d in enumerate(indexed):
        try:
            index_shape = indices[d]._shape if n == 0 else broadcast_shapes(index_shape, indices[d]._shape)
        except RuntimeError:
            shapes = ", ".join(shape_str(idx._shape) for idx in indices if idx is not None)
            raise IndexError(
                f"shape mismatch: indexing tensors could not be broadcast together with shapes {shapes}"
            ) from None
    starts = [x._offset] * numel_of(index_shape)
    rest = [d for d in range(x.dim()) if indices[d] is None]
    reads = numel_of([x._shape[d] for d in rest]) > 0  # as PyTorch, an empty result takes any index
    for d in indexed:
        size = x._shape[d]
        for i, k in enumerate(read(indices[d], index_shape)):
            if not -size <= k < size and reads:
                raise IndexError(
                    "index is out of bounds for dimension with size 0"
                    if size == 0
                    else f"index {k} is out of bounds for dimension {d} with size {size}"
                )
            starts[i] += (k % size if size else 0) * x._strides[d]
    adjacent = not indexed or indexed[-1] - indexed[0] + 1 == len(indexed)
    before = sum(1 for d in rest if adjacent and indexed and d < indexed[0])
    nb, nr = len(index_shape), len(rest)
    to_out = [*range(nb, nb + before), *range(nb), *range(nb + before, nb + nr)]
    layout = tuple(index_shape) + tuple(x._shape[d] for d in rest)
    within = element_offsets([x._shape[d] for d in rest], [x._strides[d] for d in rest], 0)
    return [s + w for s in starts for w in within], layout, to_out


def _inverse(permutation):
    inverse = [0] * len(permutation)
    for i, p in enumerate(permutation):
        inverse[p] = i
    return inverse


class IndexFunction(Function):
    """A node that keeps index tensors (and masks, as they are) for backward. As PyTorch, they are
    version-checked like any saved tensor: changing one in place makes backward fail."""

    def save_indices(self, indices):
        for idx in indices:
            self.save(idx)

    def saved_indices(self):
        return [self.unpack(i) for i in range(len(self._saved))]


class IndexBackward0(IndexFunction):
    def forward(self, x, indices):
        positions, layout, to_out = _plan(x, indices)
        data = x._storage.data
        gathered = new_tensor([data[p] for p in positions], layout, x._dtype)
        with no_grad():
            out = clone(permute(gathered, to_out))
        self.save_indices(indices)
        return out

    def backward(self, g):
        shape, dtype = self.inputs[0]
        return index_put_(full(shape, 0, dtype), self.saved_indices(), g, True)


def index(x, indices):
    return IndexBackward0.run(x, indices=indices)


class EmbeddingBackward0(Function):
    def forward(self, weight, indices, padding_row, scale_grad_by_freq):
        if weight.dim() != 2:
            raise RuntimeError("'weight' must be 2-D")
        if indices._dtype is not int64 and indices._dtype is not int32:
            raise RuntimeError(
                "Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                f"Long, Int; but got {C_TYPE_NAME[indices._dtype]} instead"
            )
        rows = read(indices)
        if rows and not weight._shape[0]:
            raise RuntimeError("index_select(): self indexing axis dim should be positive")
        if rows and (builtins.min(rows) < 0 or builtins.max(rows) >= weight._shape[0]):
            raise IndexError("index out of range in self")
        self.padding_row, self.scale_grad_by_freq = padding_row, scale_grad_by_freq
        self.save(indices)
        with no_grad():
            return index(weight, [indices])

    def backward(self, g):
        from ._elementwise import DivBackward0, compare, where
        from ._shape import reshape
        from ._sort import bincount

        (rows, columns), dtype = self.inputs[0]
        flat = reshape(self.unpack(0), [-1])
        g = reshape(g, [flat.numel(), columns])
        if self.scale_grad_by_freq:
            counts = bincount(flat, None, rows)
            g = DivBackward0.run(g, unsqueeze(to_dtype(index(counts, [flat]), g._dtype), 1))
        if self.padding_row >= 0:
            g = where(unsqueeze(compare(flat, self.padding_row, operator.eq), 1), full((), 0, g._dtype), g)
        return index_put_(full([rows, columns], 0, dtype), [flat], g, True)


def embedding(weight, indices, padding_row, scale_grad_by_freq):
    """weight[indices] as one EmbeddingBackward0 node (csrc/ops/ops.h: embedding)."""
    return EmbeddingBackward0.run(weight, indices, padding_row=padding_row, scale_grad_by_freq=scale_grad_by_freq)


def embedding_layer(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse):
    """nn.Embedding's forward for its usual members (int64 indices, a 2-D weight, padding_idx None or an
    int in range, no max_norm, sparse False, a bool scale_grad_by_freq): the embedding F.embedding
    makes of them; NotImplemented for any other, which F.embedding decides (csrc: embedding_layer)."""
    usual = (
        isinstance(input, Tensor)
        and isinstance(weight, Tensor)
        and weight.dim() == 2
        and input.dtype is int64
        and max_norm is None
        and sparse is False
        and (scale_grad_by_freq is True or scale_grad_by_freq is False)
    )
    if padding_idx is not None:
        usual = usual and padding_idx.__class__ is int and -weight.shape[0] <= padding_idx < weight.shape[0]
    if not usual:
        return NotImplemented
    row = -1 if padding_idx is None else padding_idx % weight.shape[0]
    return embedding(weight, input, row, scale_grad_by_freq)


def _scatter_values(self, indices, values, accumulate):
    """Writes `values` (broadcast to the indexing result) into self[indices]; no autograd."""
    positions, layout, to_out = _plan(self, indices)
    out_shape = [layout[p] for p in to_out]
    with no_grad():
        try:
            v = expand(to_dtype(values, self._dtype), out_shape)
        except RuntimeError:
            raise RuntimeError(
                f"shape mismatch: value tensor of shape {shape_str(values._shape)} cannot be broadcast "
                f"to indexing result of shape {shape_str(out_shape)}"
            ) from None
        source = read(permute(v, _inverse(to_out)))
    data = self._storage.data
    if accumulate:
        combine = operator.or_ if self._dtype is bool_ else operator.add
        for p, value in zip(positions, source):  # one at a time: repeated positions accumulate
            data[p] = combine(data[p], value)
    else:
        for p, value in zip(positions, source):
            data[p] = value


class IndexPutBackward0(IndexFunction):
    def backward(self, g):
        indices = self.saved_indices()
        return (
            (g if self.accumulate else index_put_(clone(g), indices, full((), 0, g._dtype), False))
            if self.needs_input_grad(0)
            else None,
            self.reduce(1, index(g, indices)) if self.needs_input_grad(1) else None,
        )


def _fills_through_mask(indices, value):
    """x[mask] = v with a one-element v: PyTorch runs it as masked_fill_ with v's value, which makes
    no memory-overlap check."""
    defined = [idx for idx in indices if idx is not None]
    return value.numel() == 1 and len(defined) == 1 and defined[0]._dtype is bool_


def _check_index_put_overlap(self, indices, values):
    """Unless it fills through a mask, index_put_ may not read (values or indices) what it writes."""
    if not _fills_through_mask(indices, values):
        for t in (values, *indices):
            if t is not None:
                assert_no_overlap(self, t)


def _check_index_put_dtype(self, indices, values):
    """index_put_ (unlike a copy, or masked_fill_ with a one-element value) does not convert dtypes."""
    if values._dtype is not self._dtype and not _fills_through_mask(indices, values):
        raise RuntimeError(
            f"Index put requires the source and destination dtypes match, got "
            f"{SCALAR_TYPE_NAME[self._dtype]} for the destination and {SCALAR_TYPE_NAME[values._dtype]} "
            "for the source."
        )


def index_put_(self, indices, values, accumulate):
    check_inplace(self, (values,))
    if accumulate:
        assert_no_overlap(self, values)
    else:
        _check_index_put_overlap(self, indices, values)
    _check_index_put_dtype(self, indices, values)
    edges = in_place_edges(self, values)
    recording = should_record((self, values)) and self._dtype.is_floating_point
    _scatter_values(self, indices, values, accumulate)
    self._storage.version += 1
    if recording:
        node = IndexPutBackward0().connect((self, values), edges=edges)
        node.accumulate = accumulate  # then self's elements all stay in the result: its gradient passes whole
        node.save_indices(indices)
        rebase_history(self, (node, 0))
    return self


# ---- x[key] = value: as in PyTorch, an in-place write into the region x[key'] (key' = the key's
# ints, slices, None and Ellipsis: a view of x), a copy or, with index tensors, an index_put_ into it


class IndexCopySlices(IndexFunction):
    """The backward of that write: the overwritten part of the region gets no gradient, the value
    gets its gradient (summed back to its shape). Its history lands on x's base through
    rebase_history, as for any in-place op on a view. PyTorch calls this node CopySlices."""

    def name(self):
        return "torch::autograd::CopySlices"

    def backward(self, g):
        advanced = self.saved_indices()  # over the region
        old = new = None
        if self.needs_input_grad(0):
            old = clone(g)
            if advanced:
                index_put_(old, advanced, full((), 0, g._dtype), False)
            else:
                old.zero_()
        if self.needs_input_grad(1):
            new = self.reduce(1, index(g, advanced) if advanced else g)
        return old, new


def _as_copied_by_setitem(value, shape):
    """The value as PyTorch's x[key] = value hands it to copy_ (whose overlap check compares
    strides): as is if the shapes match, else without its leading size-1 dims and expanded, where
    PyTorch's expand gives a new size-1 dim the stride of the dims after it."""
    if value._shape == tuple(shape):
        return value
    kept = list(zip(value._shape, value._strides))
    while kept and kept[0][0] == 1:
        kept.pop(0)
    n, lead = len(shape), len(shape) - len(kept)
    if lead < 0:
        return value  # expand will fail with its own message
    strides = [0] * n
    for i in range(n - 1, -1, -1):
        if i >= lead:
            size, stride = kept[i - lead]
            strides[i] = stride if size == shape[i] else 0
        elif kept and shape[i] == 1:
            strides[i] = shape[i + 1] * strides[i + 1] if i + 1 < n else 1
    return make_view(value, shape, strides, value._offset)


def setitem(self, key, value):
    steps, advanced = parse_index(self, key)
    if not isinstance(value, Tensor):
        number = number_or_none(value)
        if number is None:
            raise TypeError(f"expected Tensor or number, got {type(value).__name__}")
        value = full((), number, self._dtype)
    # The region first, in grad mode as PyTorch makes it: a bad slice is reported before the leaf
    # checks, which then say "a view of a leaf" for x[0] = v and "a leaf" for x[[0]] = v.
    region = _apply_steps(self, steps)
    check_inplace(region, (value,))
    edges = in_place_edges(region, value)
    recording = should_record((region, value)) and self._dtype.is_floating_point
    with no_grad():
        # PyTorch's checks: a copy (basic indexing) may not write memory twice nor read memory it
        # partly writes; index_put_ (advanced) may not read memory it writes at all.
        if advanced:
            _check_index_put_overlap(region, advanced, value)
            _check_index_put_dtype(region, advanced, value)
        else:
            assert_no_internal_overlap(region)
            if value.dim():
                assert_no_partial_overlap(region, _as_copied_by_setitem(value, region._shape))
        # What may still share memory (x[...] = x, or layouts too irregular to judge) is read first.
        source = clone(value) if value._storage.data is self._storage.data else value
        if advanced:
            _scatter_values(region, advanced, source, False)
        else:
            copy_values(region, expand(source, region._shape))
    region._storage.version += 1
    if recording:
        node = IndexCopySlices().connect((region, value), edges=edges)
        node.save_indices(advanced)
        rebase_history(region, (node, 0))


# ---- along one dim: gather and scatter_. Element i of `index` (as many dims as self) names the
# position index[i] along `dim`; its other coordinates are i's own. The shared layer composes
# index_select, index_add, index_copy, index_fill and take_along_dim over these, with the index
# expanded along the other dims; `name` is the node PyTorch shows for the op so composed.


def _sizes_1d(t):
    """A 0-d tensor takes part as a 1-d one of one element (PyTorch mixes 0-d and 1-d here)."""
    return t._shape or (1,)


def _strides_1d(t):
    return t._strides or (1,)


def _check_along_dim(along, dim, index, src=None):
    """PyTorch's checks before anything is read or written: the index's shape (no larger than
    `along` in a dim other than `dim`, nor than `src` in any) and every index in [0, size)."""
    if index._dtype is not int64:
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    shape, index_shape = _sizes_1d(along), _sizes_1d(index)
    src_shape = _sizes_1d(src) if src is not None else None
    if len(index_shape) != len(shape) or (src is not None and len(src_shape) != len(shape)):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    for d in range(len(shape)):
        too_large = (d != dim and index_shape[d] > shape[d]) or (src is not None and index_shape[d] > src_shape[d])
        if too_large and src is not None:
            raise RuntimeError(
                f"Expected index {shape_str(index._shape)} to be no larger than self {shape_str(along._shape)} "
                f"apart from dimension {dim} and to be no larger size than src {shape_str(src._shape)}"
            )
        if too_large:
            raise RuntimeError(
                f"Size does not match at dimension {d} expected index {shape_str(index._shape)} to be no larger "
                f"than self {shape_str(along._shape)} apart from dimension {dim}"
            )
    size = shape[dim]
    for k in read(index):
        if not 0 <= k < size:
            raise RuntimeError(f"index {k} is out of bounds for dimension {dim} with size {size}")


def _along_dim_offsets(along, dim, index, other):
    """(storage position in `along` that index element i names, position in `other` at i's
    coordinates) for every element of the checked index, in row-major order."""
    strides = list(_strides_1d(along))
    stride, strides[dim] = strides[dim], 0
    bases = element_offsets(_sizes_1d(index), strides, along._offset)
    at = element_offsets(_sizes_1d(index), _strides_1d(other), other._offset)
    return [(b + k * stride, a) for b, k, a in zip(bases, read(index), at)]


class _AlongDimFunction(Function):
    def __init__(self, name="GatherBackward0"):
        self._name = name

    def name(self):
        return self._name


class GatherBackward(_AlongDimFunction):  # GatherBackward0, IndexSelectBackward0
    def forward(self, x, dim, index):
        self.dim = dim
        self.save(index)
        out = full(index._shape, 0, x._dtype)
        data, out_data = x._storage.data, out._storage.data
        for src, dst in _along_dim_offsets(x, dim, index, out):
            out_data[dst] = data[src]
        return out

    def backward(self, g):
        self.unpack(1)  # None, or the tensor PyTorch's node saves: only its version matters
        shape, dtype = self.inputs[0]
        return scatter_(full(shape, 0, dtype), self.dim, self.unpack(0), g, "add", "ScatterAddBackward0")


def check_index_range(index, low, high, message):
    """IndexError(message, "{}" the first entry (row-major) out of [low, high]) as PyTorch's kernels report it."""
    for k in read(index):
        if not low <= k <= high:
            raise IndexError(message.replace("{}", str(builtins.int(k)), 1))


def gather(x, dim, index, name, checked=None):
    """`checked`: the tensor PyTorch's node saves (the op's input), whose in-place change before
    backward is then an error; none for IndexSelectBackward0, which saves only sizes."""
    dim = wrap_dim(dim, x.dim())
    _check_along_dim(x, dim, index)
    node = GatherBackward(name)
    out = node.forward(x, dim, index)
    node.save(checked)
    if should_record((x,)):
        check_differentiable_output(out)
        node.connect((x,))
        out._grad_fn, out._output_nr = node, 0
    return out


class ScatterBackward(_AlongDimFunction):
    """ScatterBackward0/1, ScatterAddBackward0, IndexAddBackward0, IndexCopyBackward0,
    IndexFillBackward0/1, and scatter with reduce= (PyTorch's NotImplemented). A write leaves no
    gradient where it wrote; an accumulation passes self's on whole."""

    def backward(self, g):
        if self.refused:
            raise RuntimeError(f"derivative for {self.refused} is not implemented")
        index = self.unpack(0)
        old = new = None
        if self.needs_input_grad(0):
            zero = expand(full((), 0, g._dtype), index._shape)
            old = g if self.reduce == "add" else scatter_(clone(g), self.dim, index, zero, "", "ScatterBackward1")
        if self.needs_input_grad(1):
            src_shape = self.inputs[1][0]
            if index._shape != src_shape:  # src's gradient has index's shape: PyTorch's engine refuses it
                raise RuntimeError(
                    f"Function {self.name()} returned an invalid gradient at index 1 - got {shape_str(index._shape)} "
                    f"but expected shape compatible with {shape_str(src_shape)}"
                )
            new = gather(g, self.dim, index, "GatherBackward0")
        return old, new


def _amax(a, b):
    return b if b != b else builtins.max(a, b)  # a NaN from either side wins (max keeps a first NaN)


def _amin(a, b):
    return b if b != b else builtins.min(a, b)


_SCATTER_COMBINE = {
    "add": (operator.add, operator.or_),
    "multiply": (operator.mul, operator.and_),
    "amax": (_amax, _amax),
    "amin": (_amin, _amin),
}


def scatter_(self, dim, index, src, reduce, name):
    if reduce and reduce not in _SCATTER_COMBINE:
        raise RuntimeError("reduce argument must be either add or multiply.")
    dim = wrap_dim(dim, self.dim())
    _check_along_dim(self, dim, index, src)
    if src._dtype is not self._dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    check_inplace(self, (src,))
    assert_no_internal_overlap(self)
    assert_no_overlap(self, src)
    assert_no_overlap(self, index)
    edges = in_place_edges(self, src)
    recording = should_record((self, src)) and self._dtype.is_floating_point
    data, values = self._storage.data, src._storage.data
    if reduce:
        combine = _SCATTER_COMBINE[reduce][self._dtype is bool_]
        for to, at in _along_dim_offsets(self, dim, index, src):  # in order: repeated targets accumulate
            data[to] = combine(data[to], values[at])
    else:
        for to, at in _along_dim_offsets(self, dim, index, src):
            data[to] = values[at]
    self._storage.version += 1
    if recording:
        # An "aten::<op>" name is an op PyTorch records with a node that refuses backward.
        refused = name if name.startswith("aten::") else None
        node = ScatterBackward("torch::autograd::NotImplemented" if refused else name)
        node.dim, node.reduce, node.refused = dim, reduce, refused
        node.connect((self, src), edges=edges)
        node.save(index)
        rebase_history(self, (node, 0))
    return self
