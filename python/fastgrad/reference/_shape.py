"""Shape ops. All but cat and stack are views: they share the input's storage and only change
shape, strides and offset; their backward maps the gradient back to the input's geometry."""

from .._types import promote_types
from ._autograd import Function, check_differentiable_output, is_grad_enabled, no_grad, should_record, sum_to
from ._elementwise import clone, contiguous, to_dtype
from ._tensor import (
    VIEW_OF_MULTI_OUTPUT_NODE,
    contiguous_strides,
    copy_values,
    element_offsets,
    full,
    make_differentiable_view,
    numel_of,
    read,
    shape_str,
    wrap_dim,
)


def _view_of(x, shape, strides, offset=None):
    return make_differentiable_view(x, shape, strides, x._offset if offset is None else offset, is_grad_enabled())


class SliceBackwardBackward0(Function):
    """The gradient of a view that selects part of its input (slice; select below): zeros except
    where the view looked. An op of its own, so that a create_graph backward records it: its
    gradient is the same view of the incoming gradient."""

    def forward(self, grad, shape, args):
        self.args = args  # the view's arguments after the tensor
        full_grad = full(shape, 0, grad._dtype)
        with no_grad():
            copy_values(self.view(full_grad), grad)
        return full_grad

    def view(self, t):
        return slice(t, *self.args)

    def backward(self, g):
        return self.view(g)


class SelectBackwardBackward0(SliceBackwardBackward0):
    def view(self, t):
        return select(t, *self.args)


# ---- view / reshape / flatten


def _infer_shape(requested, numel):
    """Resolves a single -1 and checks the element count."""
    shape, known, infer_at = list(requested), 1, None
    for d, size in enumerate(shape):
        if size == -1:
            if infer_at is not None:
                raise RuntimeError("only one dimension can be inferred")
            infer_at = d
        elif size < 0:
            raise RuntimeError(f"invalid shape dimension {size} at index {d} of shape {list(requested)}")
        else:
            known *= size
    ok = known != 0 and numel % known == 0 if infer_at is not None else known == numel
    if not ok:
        raise RuntimeError(f"shape '{shape_str(requested)}' is invalid for input of size {numel}")
    if infer_at is not None:
        shape[infer_at] = numel // known
    return tuple(shape)


def _view_strides(x, shape):
    """Strides that read x's memory with `shape`, or None: each run of input dims that is
    contiguous in memory may be regrouped freely (PyTorch's computeStride)."""
    if x.is_contiguous() or x.numel() == 0:
        return contiguous_strides(shape)
    old_shape, old_strides = x._shape, x._strides
    strides = [0] * len(shape)
    view_d = len(shape) - 1
    chunk_base, tensor_numel, view_numel = old_strides[-1], 1, 1
    for d in range(x.dim() - 1, -1, -1):
        tensor_numel *= old_shape[d]
        if d > 0 and (old_shape[d - 1] == 1 or old_strides[d - 1] == tensor_numel * chunk_base):
            continue  # the chunk of memory-contiguous dims goes on
        while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
            strides[view_d] = view_numel * chunk_base
            view_numel *= shape[view_d]
            view_d -= 1
        if view_numel != tensor_numel:
            return None
        if d > 0:
            chunk_base, tensor_numel, view_numel = old_strides[d - 1], 1, 1
    return tuple(strides) if view_d == -1 else None


class ViewBackward0(Function):
    def forward(self, x, shape):
        shape = _infer_shape(shape, x.numel())
        strides = _view_strides(x, shape)
        if strides is None:
            raise RuntimeError(
                "view size is not compatible with input tensor's size and stride (at least one "
                "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
            )
        return _view_of(x, shape, strides)

    def backward(self, g):
        return reshape(g, self.inputs[0][0])


def view(x, shape):
    return ViewBackward0.run(x, shape=shape)


def reshape(x, shape):
    shape = _infer_shape(shape, x.numel())
    if _view_strides(x, shape) is not None:
        return view(x, shape)
    return UnsafeViewBackward0.run(clone(x), shape=shape)  # as PyTorch: the copy is nobody else's, so not a view


class UnsafeViewBackward0(ViewBackward0):
    """A reshape of a fresh copy (matmul's result, reshape's copy), under the name PyTorch gives it.
    As PyTorch's _unsafe_view, it shares x's memory but is not a view for autograd (x is an
    intermediate nobody else sees), so an in-place write to the result rewrites its own history."""

    def forward(self, x, shape):
        with no_grad():
            out = reshape(x, shape)
        out._view_base, out._view_tracks_history = None, False
        return out


def flatten(x, start_dim, end_dim):
    start, end = wrap_dim(start_dim, x.dim()), wrap_dim(end_dim, x.dim())
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if x.dim() == 0:
        return reshape(x, (1,))
    if start == end:
        return x
    return reshape(x, x._shape[:start] + (numel_of(x._shape[start : end + 1]),) + x._shape[end + 1 :])


# ---- expand


class ExpandBackward0(Function):
    def forward(self, x, shape, strides):
        return _view_of(x, shape, strides)

    def backward(self, g):
        return sum_to(g, self.inputs[0][0])


def expand(x, requested):
    requested = tuple(requested)
    if len(requested) < x.dim():
        raise RuntimeError(
            f"expand(torch.FloatTensor{{{shape_str(x._shape)}}}, size={shape_str(requested)}): the "
            f"number of sizes provided ({len(requested)}) must be greater or equal to the number of "
            f"dimensions in the tensor ({x.dim()})"
        )
    lead = len(requested) - x.dim()
    shape, strides = list(requested), [0] * len(requested)
    for d, want in enumerate(requested):
        if d < lead:
            if want < 0:
                raise RuntimeError(
                    f"The expanded size of the tensor ({want}) isn't allowed in a leading, non-existing dimension {d}"
                )
            continue
        have = x._shape[d - lead]
        want = have if want == -1 else want
        if want < 0:
            raise RuntimeError(f"The expanded size of the tensor ({want}) isn't allowed")
        if have != want and have != 1:
            raise RuntimeError(
                f"The expanded size of the tensor ({want}) must match the existing size ({have}) at "
                f"non-singleton dimension {d}.  Target sizes: {shape_str(requested)}.  Tensor sizes: "
                f"{shape_str(x._shape)}"
            )
        shape[d] = want
        strides[d] = x._strides[d - lead] if have == want else 0
    # Even to x's own shape: a new view, as PyTorch (x.expand_as(x) is not x).
    return ExpandBackward0.run(x, shape=tuple(shape), strides=tuple(strides))


# ---- permute / transpose / t


class PermuteBackward0(Function):
    def forward(self, x, dims):
        if len(dims) != x.dim():
            raise RuntimeError(
                "permute(sparse_coo): number of dimensions in the tensor input does not match the length of the "
                f"desired ordering of dimensions i.e. input.dim() = {x.dim()} is not equal to len(dims) = {len(dims)}"
            )
        self.dims = []
        for dim in dims:
            d = wrap_dim(dim, x.dim())
            if d in self.dims:
                raise RuntimeError("permute(): duplicate dims are not allowed.")
            self.dims.append(d)
        return _view_of(x, [x._shape[d] for d in self.dims], [x._strides[d] for d in self.dims])

    def backward(self, g):
        inverse = [0] * len(self.dims)
        for i, d in enumerate(self.dims):
            inverse[d] = i
        return permute(g, inverse)


def permute(x, dims):
    return PermuteBackward0.run(x, dims=dims)


def _swapped(x, d0, d1):
    shape, strides = list(x._shape), list(x._strides)
    shape[d0], shape[d1] = shape[d1], shape[d0]
    strides[d0], strides[d1] = strides[d1], strides[d0]
    return _view_of(x, shape, strides)


class TransposeBackward0(Function):
    def forward(self, x, dim0, dim1):
        self.dim0, self.dim1 = wrap_dim(dim0, x.dim()), wrap_dim(dim1, x.dim())
        return _swapped(x, self.dim0, self.dim1) if x.dim() else _view_of(x, x._shape, x._strides)

    def backward(self, g):
        return transpose(g, self.dim0, self.dim1)


def transpose(x, dim0, dim1):
    return TransposeBackward0.run(x, dim0=dim0, dim1=dim1)


class TBackward0(Function):
    def forward(self, x):
        if x.dim() > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.dim()}D")
        return _swapped(x, 0, 1) if x.dim() == 2 else _view_of(x, x._shape, x._strides)

    def backward(self, g):
        return t(g)


def t(x):
    return TBackward0.run(x)


# ---- squeeze / unsqueeze


class SqueezeBackward0(Function):
    """squeeze() of every size-1 dim"""

    def forward(self, x, dims):
        named = set()
        for dim in dims or ():
            d = wrap_dim(dim, x.dim())
            if d in named:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
            named.add(d)
        kept = [d for d in range(x.dim()) if not ((dims is None or d in named) and x._shape[d] == 1)]
        return _view_of(x, [x._shape[d] for d in kept], [x._strides[d] for d in kept])

    def backward(self, g):
        return reshape(g, self.inputs[0][0])


class SqueezeBackward1(SqueezeBackward0):
    """squeeze(dim)"""


class SqueezeBackward2(SqueezeBackward0):
    """squeeze(dims)"""


def squeeze(x, dims, dim_sequence):
    """dims given as one int or (dim_sequence) as a sequence: PyTorch's squeeze.dim or squeeze.dims."""
    node = SqueezeBackward0 if dims is None else SqueezeBackward2 if dim_sequence else SqueezeBackward1
    return node.run(x, dims=dims)


class UnsqueezeBackward0(Function):
    def forward(self, x, dim):
        d = wrap_dim(dim, x.dim() + 1)
        stride = x._shape[d] * x._strides[d] if d < x.dim() else 1
        return _view_of(x, x._shape[:d] + (1,) + x._shape[d:], x._strides[:d] + (stride,) + x._strides[d:])

    def backward(self, g):
        return reshape(g, self.inputs[0][0])


def unsqueeze(x, dim):
    return UnsqueezeBackward0.run(x, dim=dim)


# ---- slice / select (the views behind basic indexing), as_strided, alias


class SliceBackward0(Function):
    def forward(self, x, dim, start, stop, step):
        if x.dim() == 0:
            raise IndexError("slice() cannot be applied to a 0-dim tensor.")
        d = wrap_dim(dim, x.dim())
        if step <= 0:
            raise ValueError("step must be greater than zero")
        size = x._shape[d]
        lo = 0 if start is None else min(max(start + size if start < 0 else start, 0), size)
        hi = size if stop is None else min(max(stop + size if stop < 0 else stop, 0), size)
        self.dim, self.start, self.stop, self.step = d, lo, hi, step
        shape, strides = list(x._shape), list(x._strides)
        shape[d] = (hi - lo - 1) // step + 1 if hi > lo else 0
        strides[d] *= step
        return _view_of(x, shape, strides, x._offset + lo * x._strides[d])

    def backward(self, g):
        return SliceBackwardBackward0.run(g, shape=self.inputs[0][0], args=(self.dim, self.start, self.stop, self.step))


def slice(x, dim, start, stop, step):
    return SliceBackward0.run(x, dim=dim, start=start, stop=stop, step=step)


class SelectBackward0(Function):
    def forward(self, x, dim, index):
        if x.dim() == 0:
            raise IndexError(
                "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in "
                "C++ to convert a 0-dim tensor to a number"
            )
        d = wrap_dim(dim, x.dim())
        size = x._shape[d]
        if not -size <= index < size:
            raise IndexError(f"index {index} is out of bounds for dimension {d} with size {size}")
        self.dim, self.index = d, index % size
        return _view_of(
            x,
            x._shape[:d] + x._shape[d + 1 :],
            x._strides[:d] + x._strides[d + 1 :],
            x._offset + self.index * x._strides[d],
        )

    def backward(self, g):
        return SelectBackwardBackward0.run(g, shape=self.inputs[0][0], args=(self.dim, self.index))


def select(x, dim, index):
    return SelectBackward0.run(x, dim=dim, index=index)


class DiagonalBackwardBackward0(SliceBackwardBackward0):
    def view(self, t):
        return diagonal(t, *self.args)


class DiagonalBackward0(Function):
    """The diagonal `offset` of dims dim1 and dim2, as the last dim of a view."""

    def forward(self, x, offset, dim1, dim2):
        d1, d2 = wrap_dim(dim1, x.dim()), wrap_dim(dim2, x.dim())
        if d1 == d2:
            raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
        self.offset, self.dim1, self.dim2 = offset, d1, d2
        rows, cols = x._shape[d1], x._shape[d2]
        length = max(min(rows + min(offset, 0), cols - max(offset, 0)), 0)
        start = offset * x._strides[d2] if offset >= 0 else -offset * x._strides[d1]
        kept = [d for d in range(x.dim()) if d not in (d1, d2)]
        return _view_of(
            x,
            [x._shape[d] for d in kept] + [length],
            [x._strides[d] for d in kept] + [x._strides[d1] + x._strides[d2]],
            x._offset + (start if length else 0),
        )

    def backward(self, g):
        return DiagonalBackwardBackward0.run(g, shape=self.inputs[0][0], args=(self.offset, self.dim1, self.dim2))


def diagonal(x, offset, dim1, dim2):
    return DiagonalBackward0.run(x, offset=offset, dim1=dim1, dim2=dim2)


class UnfoldBackwardBackward0(Function):
    """unfold's gradient: windows overlap when step < size, so each window offset j adds one
    strided slice of the input's gradient."""

    def forward(self, grad, shape, args):
        self.args = args  # dim, size, step
        dim, size, step = args
        full_grad = full(shape, 0, grad._dtype)
        with no_grad():
            target = _view_of(full_grad, [1], [1]) if not shape else full_grad  # a 0-d input unfolds as one element
            windows = 1 if not shape else grad._shape[dim]
            for j in range(size if windows else 0):
                at_offset = slice(target, dim, j, j + (windows - 1) * step + 1, step)
                copy_values(at_offset, at_offset + select(grad, -1, j))
        return full_grad

    def backward(self, g):
        return unfold(g, *self.args)


class UnfoldBackward0(Function):
    """The windows of `size` elements `step` apart along one dim, as a new last dim of a view."""

    def forward(self, x, dim, size, step):
        d = wrap_dim(dim, x.dim())
        length = x._shape[d] if x.dim() else 1
        if size > length:
            raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is {size}")
        if size < 0:
            raise RuntimeError(f"size is {size} but must be >= 0")
        if step <= 0:
            raise RuntimeError(f"step is {step} but must be > 0")
        self.dim, self.size, self.step = d, size, step
        shape, strides = list(x._shape), list(x._strides)
        if x.dim():
            shape[d], strides[d] = (length - size) // step + 1, strides[d] * step
        return _view_of(x, shape + [size], strides + [x._strides[d] if x.dim() else 1])

    def backward(self, g):
        return UnfoldBackwardBackward0.run(g, shape=self.inputs[0][0], args=(self.dim, self.size, self.step))


def unfold(x, dimension, size, step):
    return UnfoldBackward0.run(x, dim=dimension, size=size, step=step)


class AsStridedBackward0(Function):
    """The regenerated history of a view after an in-place write through it."""

    def forward(self, x, shape, strides, offset):
        # The geometry is relative to x's own layout, which is only meaningful when x is dense.
        if not x.is_contiguous():
            raise RuntimeError("as_strided expects a contiguous tensor")
        self.shape, self.strides, self.offset = shape, strides, offset
        return _view_of(x, shape, strides, x._offset + offset)

    def backward(self, g):
        return AsStridedBackwardBackward0.run(g, shape=self.inputs[0][0], view=(self.shape, self.strides, self.offset))


class AsStridedBackwardBackward0(Function):
    """as_strided's gradient as an op (recorded under create_graph): the view's gradient added into
    zeros, not written, as the view may look at an element more than once (an expanded dim)."""

    def forward(self, grad, shape, view):
        self.view = view
        full_grad = full(shape, 0, grad._dtype)
        data = full_grad._storage.data
        for p, v in zip(element_offsets(*view), read(grad)):
            data[p] += v
        return full_grad

    def backward(self, g):
        return as_strided(contiguous(g), *self.view)


def as_strided(x, shape, strides, offset):
    return AsStridedBackward0.run(x, shape=shape, strides=strides, offset=offset)


class AliasBackward0(Function):
    """x[...] and x[()]: a view of the whole tensor."""

    def forward(self, x):
        return _view_of(x, x._shape, x._strides)

    def backward(self, g):
        return g


# ---- cat / stack: new tensors; the gradient is cut back into one piece per input


def _skipped(t):
    return t._shape == (0,)  # PyTorch still accepts (and skips) 1-D empty tensors next to any rank


class CatBackward0(Function):
    def forward(self, *tensors, dim):
        if not tensors:
            raise ValueError("torch.cat(): expected a non-empty list of Tensors")
        ref = next((t for t in tensors if not _skipped(t)), tensors[0])
        if ref.dim() == 0:
            raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
        self.dim = d = wrap_dim(dim, ref.dim())
        dtype, total = tensors[0]._dtype, 0
        for i, t in enumerate(tensors):
            dtype = promote_types(dtype, t._dtype)
            if _skipped(t):
                continue
            if t.dim() != ref.dim():
                raise RuntimeError(f"Tensors must have same number of dimensions: got {ref.dim()} and {t.dim()}")
            for k in range(t.dim()):
                if k != d and t._shape[k] != ref._shape[k]:
                    raise RuntimeError(
                        f"Sizes of tensors must match except in dimension {d}. Expected size "
                        f"{ref._shape[k]} but got size {t._shape[k]} for tensor number {i} in the list."
                    )
            total += t._shape[d]
        shape = ref._shape[:d] + (total,) + ref._shape[d + 1 :]
        out = full(shape, 0, dtype)
        at = 0
        with no_grad():
            for t in tensors:
                if not _skipped(t):
                    copy_values(slice(out, d, at, at + t._shape[d], 1), t)
                    at += t._shape[d]
        return out

    def backward(self, g):
        grads, at = [], 0
        for shape, dtype in self.inputs:
            if shape == (0,):
                grads.append(full(shape, 0, dtype))
                continue
            grads.append(to_dtype(slice(g, self.dim, at, at + shape[self.dim], 1), dtype))
            at += shape[self.dim]
        return tuple(grads)


def cat(tensors, dim):
    return CatBackward0.run(*tensors, dim=dim)


class StackBackward0(Function):
    def forward(self, *tensors, dim):
        if not tensors:
            raise RuntimeError("stack expects a non-empty TensorList")
        self.dim = wrap_dim(dim, tensors[0].dim() + 1)  # before the sizes, as PyTorch checks
        for i, t in enumerate(tensors[1:], 1):
            if t._shape != tensors[0]._shape:
                raise RuntimeError(
                    f"stack expects each tensor to be equal size, but got {shape_str(tensors[0]._shape)}"
                    f" at entry 0 and {shape_str(t._shape)} at entry {i}"
                )
        with no_grad():
            return cat([unsqueeze(t, self.dim) for t in tensors], self.dim)

    def backward(self, g):
        return tuple(to_dtype(select(g, self.dim, i), dtype) for i, (_, dtype) in enumerate(self.inputs))


def stack(tensors, dim):
    return StackBackward0.run(*tensors, dim=dim)


class PartsBackward(Function):
    """split's and unbind's parts: views of x along dim, the outputs of one node (SplitBackward0,
    SplitWithSizesBackward0, UnbindBackward0) whose gradient joins the parts' gradients back, zeros
    for a part that got none. As in PyTorch, parts with that history may not be written in place:
    one node cannot stand for a write into one of its outputs."""

    def __init__(self, name, dim, sizes, unbound):
        self._name, self.dim, self.sizes, self.unbound = name, dim, sizes, unbound
        self.num_outputs = len(sizes)

    def name(self):
        return self._name

    def backward(self, *grads):
        (shape, dtype), parts = self.inputs[0], []
        for g, size in zip(grads, self.sizes):
            if g is None:
                part_shape = list(shape)
                if self.unbound:
                    del part_shape[self.dim]
                else:
                    part_shape[self.dim] = size
                g = full(part_shape, 0, dtype)
            parts.append(g)
        return (stack if self.unbound else cat)(parts, self.dim)


def _parts(name, x, parts, dim, sizes, unbound):
    """Parts made in grad mode are the outputs of a multi-output node even when nothing is recorded
    (PyTorch's CreationMeta MULTI_OUTPUT_NODE): an in-place write that involves gradients is refused."""
    if is_grad_enabled():
        for part in parts:
            part._view_tracks_history, part._view_origin = False, VIEW_OF_MULTI_OUTPUT_NODE
    if should_record((x,)):
        for part in parts:
            check_differentiable_output(part)
        node = PartsBackward(name, dim, sizes, unbound).connect((x,))
        for i, part in enumerate(parts):
            part._grad_fn, part._output_nr = node, i
    return tuple(parts)


def split_with_sizes(x, sizes, dim, with_sizes):
    if x.dim() == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, x.dim())
    if any(n < 0 for n in sizes) or sum(sizes) != x._shape[d]:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {x._shape[d]} (input tensor's size at "
            f"dimension {d}), but got split_sizes={list(sizes)}"
        )
    parts, start = [], 0
    for n in sizes:
        shape = list(x._shape)
        shape[d] = n
        parts.append(_view_of(x, shape, list(x._strides), x._offset + start * x._strides[d]))
        start += n
    name = "SplitWithSizesBackward0" if with_sizes else "SplitBackward0"
    return _parts(name, x, parts, d, list(sizes), False)


def unbind(x, dim):
    if x.dim() == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = wrap_dim(dim, x.dim())
    shape, strides = list(x._shape), list(x._strides)
    del shape[d], strides[d]
    parts = [_view_of(x, shape, strides, x._offset + i * x._strides[d]) for i in range(x._shape[d])]
    return _parts("UnbindBackward0", x, parts, d, [1] * len(parts), True)
