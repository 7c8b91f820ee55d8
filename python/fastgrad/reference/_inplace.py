"""In-place ops. Arithmetic ones run their out-of-place op (which records the usual node) and
write the result back, so self's new grad_fn is that node; ops that replace the values outright
(fill_, zero_, copy_) record a node that cuts the gradient to the old values. Every write bumps
the storage's version, which is how a stale saved tensor is detected in backward.
"""

from .._types import bool as bool_, int64
from ._autograd import (
    CustomFunction,
    computing_in_place_result,
    Function,
    gradient_edge,
    is_grad_enabled,
    no_grad,
    refresh_view_history,
    set_history,
    should_record,
    view_without_history_error,
)
from ._elementwise import (
    AddBackward0,
    Bitwise,
    BitwiseNot,
    ClampBackward1,
    DivBackward0,
    FloorDivideInPlace,
    FmodBackward0,
    FmodBackward1,
    MulBackward0,
    PowBackward0,
    PowBackward1,
    RemainderBackward0,
    RemainderBackward1,
    SubBackward0,
    clone,
    contiguous,
    result_type,
    where,
    zeros_like,
)
from ._shape import SqueezeBackward0, TBackward0, TransposeBackward0, UnsqueezeBackward0, as_strided, expand
from ._storage import SCALAR_TYPE_NAME, is_inference_mode_enabled
from ._tensor import Tensor, broadcast_shapes, copy_values, full, new_tensor, read, shape_str

_CATEGORY = {bool_: 0, int64: 1}


# ---- PyTorch's memory-overlap checks for ops that write into a tensor they may also read. "Dense"
# tensors (every element in its own slot, no gaps) are compared exactly; others are too hard to
# judge and pass, as in PyTorch.

_SHARED_MEMORY = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
    "single memory location. Please clone() the tensor before performing the operation."
)


def _dense(t):
    expected = 1
    for stride, size in sorted((stride, size) for size, stride in zip(t._shape, t._strides) if size != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _overlap(a, b):
    """'full', 'partial', 'none', or None when the layouts are too irregular to judge."""
    if a is b:
        return "full"
    if not a.numel() or not b.numel():
        return "none"
    if not _dense(a) or not _dense(b):
        return None
    if a._storage.data is not b._storage.data:  # x.data has its own Storage over x's memory
        return "none"
    (a_begin, a_end), (b_begin, b_end) = ((t._offset, t._offset + t.numel()) for t in (a, b))
    if (a_begin, a_end) == (b_begin, b_end):  # other strides (even of size-1 dims) are partial, as PyTorch says
        return "full" if a._strides == b._strides else "partial"
    return "partial" if a_begin < b_end and b_begin < a_end else "none"


def assert_no_internal_overlap(out):
    """Writing into `out` must not write some memory twice (an expanded, stride-0 dim)."""
    if out.numel() and not _dense(out) and any(n > 1 and s == 0 for n, s in zip(out._shape, out._strides)):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a single "
            "memory location. Please clone() the tensor before performing the operation."
        )


def assert_no_partial_overlap(out, source):
    """`source` may not share some but not all of `out`'s memory (elementwise in-place ops, copies)."""
    if isinstance(source, Tensor) and _overlap(out, source) == "partial":
        raise RuntimeError(_SHARED_MEMORY)


def assert_no_overlap(out, source):
    """`source` may not share any of `out`'s memory (index_put_)."""
    if _overlap(out, source) in ("partial", "full"):
        raise RuntimeError(_SHARED_MEMORY)


def check_inplace(self, sources=()):
    """The checks PyTorch makes before any in-place write (leaves, views made under no_grad);
    `sources` are the operands written from."""
    if is_grad_enabled():
        _check_autograd(self, sources)
    if self._storage.inference and not is_inference_mode_enabled():
        raise RuntimeError(
            "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a "
            "normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details."
        )


def _check_autograd(self, sources):
    """The checks autograd makes before an in-place write (leaves, views made under no_grad)."""
    # A view made under no_grad kept no history to write through: as PyTorch, no guessing whether
    # the write should reach its base's gradient.
    if (
        self._view_base is not None
        and not self._view_tracks_history
        and (self.requires_grad or any(isinstance(s, Tensor) and s.requires_grad for s in sources))
    ):
        raise RuntimeError(view_without_history_error(self, "is being"))
    refresh_view_history(self)
    if self._grad_fn is None and self._requires_grad_leaf:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = self._view_base
    if base is not None and base._grad_fn is None and base._requires_grad_leaf:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")


class CopySlices(Function):
    """The base's new value after an in-place write through a view: its old value outside the
    view's region (edge 0), the in-place result inside it (edge 1)."""

    def name(self):
        return "torch::autograd::CopySlices"

    def region(self, whole):
        return as_strided(whole, self.shape, self.strides, self.offset)

    def backward(self, g):
        old = new = None
        if self.needs_input_grad(0):
            outside = full(g._shape, True, bool_)
            region = self.region(outside)
            # As PyTorch's CopySlices, which copies into this region: an expanded view (written in
            # place by fill_, zero_ or index_put_, which allow it) cannot take its base's gradient.
            assert_no_internal_overlap(region)
            region.zero_()
            old = where(outside, g, zeros_like(g))  # not g zeroed in place: recorded under create_graph
        if self.needs_input_grad(1):
            new = clone(self.region(contiguous(g)))
        return old, new


def rebase_history(self, new_value):
    """Makes `new_value` (an edge to the node computing self's new contents) self's history. When
    self is a view, the base's history is rewritten too (CopySlices), and the view's becomes an
    as_strided view of the base's new value."""
    base = self._view_base
    if base is None:
        set_history(self, *new_value)
        return
    if not base.is_contiguous():
        raise RuntimeError(
            "fastgrad: an in-place operation that needs gradients through a view of a non-contiguous "
            "tensor is not supported; call .contiguous() on the base tensor first"
        )
    node = CopySlices().connect((base,), edges=(gradient_edge(base), new_value))
    node.shape, node.strides, node.offset = self._shape, self._strides, self._offset - base._offset
    set_history(base, node, 0)
    set_history(self, as_strided(base, node.shape, node.strides, node.offset)._grad_fn, 0)
    self._view_version = self._storage.version


def in_place_edges(self, source):
    """The edges of a node for an in-place write of `source` into self: to self's old history and to
    the source's. Both are taken before the write: the source may be a view of self, and taking
    its edge after the write would give it a fresh history later on the tape than the node."""
    return gradient_edge(self), gradient_edge(source)


def _snapshot(self):
    """A copy of self's values carrying self's history, for ops whose backward reads the old self."""
    copy = new_tensor(read(self), self._shape, self._dtype)
    copy._grad_fn, copy._output_nr, copy._requires_grad_leaf = self._grad_fn, self._output_nr, self._requires_grad_leaf
    return copy


def _check_castable(dtype, self):
    """An in-place result must fit self's dtype: an integer may land in a float tensor, not the reverse."""
    if _CATEGORY.get(dtype, 2) > _CATEGORY.get(self._dtype, 2):
        raise RuntimeError(
            f"result type {SCALAR_TYPE_NAME[dtype]} can't be cast to the desired output "
            f"type {SCALAR_TYPE_NAME[self._dtype]}"
        )


def _check_broadcast_fits(self, other):
    """In place, the broadcast shape of self and `other` must be self's. As PyTorch's TensorIterator,
    this is checked after the overlaps and before the result's dtype and the kernel's own checks."""
    shape = broadcast_shapes(self._shape, other._shape)
    if shape != self._shape:
        raise RuntimeError(
            f"output with shape {shape_str(self._shape)} doesn't match the broadcast shape {shape_str(shape)}"
        )


def _apply_inplace(node_class, self, operands, reads_self, **params):
    """self = op(self, *operands), op being the out-of-place op recorded by `node_class`. When its
    backward reads self's old values, it runs on a snapshot, so that overwriting self does not
    invalidate what it saved."""
    check_inplace(self, operands)
    assert_no_internal_overlap(self)
    for operand in operands:
        assert_no_partial_overlap(self, operand)
        if isinstance(operand, Tensor):
            _check_broadcast_fits(self, operand)
    recording = should_record((self, *operands))
    with computing_in_place_result():
        result = node_class.run(_snapshot(self) if recording and reads_self else self, *operands, **params)
    _check_castable(result._dtype, self)
    copy_values(self, result)
    self._storage.version += 1
    # An op without a derivative (floor_divide_, bitwise ops of integer tensors that require grad after an
    # eq_) records no node: self keeps its history.
    if recording and result._grad_fn is not None:
        for saved in result._grad_fn._saved:
            saved.move_output(result, self)
        rebase_history(self, (result._grad_fn, result._output_nr))
    return self


# In-place forms of ops composed in the shared layer (_methods). inplace_input makes PyTorch's checks
# before the write and gives a copy of self carrying self's history: the op runs on it, so that its
# node's edge is self's old history and what it saves of self keeps the old values (as PyTorch's
# in-place nodes save a clone of self). write_result_ then gives self the result's values and history.


def inplace_input(self, sources, elementwise=True):
    check_inplace(self, sources)
    assert_no_internal_overlap(self)
    for source in sources:
        assert_no_partial_overlap(self, source)
        if elementwise:
            _check_broadcast_fits(self, source)
    return _snapshot(self)


def write_result_(self, result):
    _check_castable(result._dtype, self)
    copy_values(self, result)
    self._storage.version += 1
    node = result._grad_fn
    if node is not None:
        saved = node._saved_tensors.items if isinstance(node, CustomFunction) else node._saved
        for item in saved:
            if item is not None:
                item.move_output(result, self)
        rebase_history(self, (node, result._output_nr))
    return self


def add_(self, other, alpha=1):
    return _apply_inplace(AddBackward0, self, (other,), False, alpha=alpha)


def sub_(self, other, alpha=1):
    return _apply_inplace(SubBackward0, self, (other,), False, alpha=alpha)


def mul_(self, other):
    return _apply_inplace(MulBackward0, self, (other,), isinstance(other, Tensor))


def div_(self, other):
    return _apply_inplace(DivBackward0, self, (other,), isinstance(other, Tensor))


def pow_(self, exponent):
    node_class = PowBackward1 if isinstance(exponent, Tensor) else PowBackward0
    return _apply_inplace(node_class, self, (exponent,), True)


def floor_divide_(self, other):
    return _apply_inplace(FloorDivideInPlace, self, (other,), False)


def remainder_(self, other):
    is_tensor = isinstance(other, Tensor)
    return _apply_inplace(RemainderBackward1 if is_tensor else RemainderBackward0, self, (other,), is_tensor)


def fmod_(self, other):
    is_tensor = isinstance(other, Tensor)
    return _apply_inplace(FmodBackward1 if is_tensor else FmodBackward0, self, (other,), is_tensor)


def bitwise_(self, other, name):
    """As PyTorch, whether the result fits self is checked before the kernel refuses a float type."""
    if isinstance(other, Tensor):
        _check_broadcast_fits(self, other)
    _check_castable(result_type(self, other), self)
    return _apply_inplace(Bitwise, self, (other,), False, name=name)


def bitwise_not_(self):
    return _apply_inplace(BitwiseNot, self, (), False)


def clamp_(self, min, max):
    return _apply_inplace(ClampBackward1, self, (), True, min=min, max=max)


def unary_(self, node_class):
    """self = op(self) for a unary op recorded by `node_class`; always on a snapshot when recording
    (needed only where the op's backward reads its input, but harmless where it does not)."""
    return _apply_inplace(node_class, self, (), True)


# ---- ops that replace self's values: the old values get no gradient; a tensor source gets the
# gradient of the positions it filled.


class ReplaceBackward(Function):
    """fill_ (FillBackward2 by a number, FillBackward3 by a tensor), zero_ and copy_: self's old
    values get no gradient, the source gets the gradient (summed to its shape)."""

    def __init__(self, name):
        super().__init__()
        self._name = name

    def name(self):
        return self._name

    def backward(self, g):
        return (
            full(g._shape, 0, g._dtype) if self.needs_input_grad(0) else None,
            self.reduce(1, g) if self.needs_input_grad(1) else None,
        )


def _replace_values(name, self, source, checked=False):
    """`checked`: the memory-overlap checks PyTorch's copy_ makes (fill_ and zero_ make none)."""
    check_inplace(self, (source,))
    if checked:
        assert_no_internal_overlap(self)
        assert_no_partial_overlap(self, source)
    edges = in_place_edges(self, source)
    recording = should_record((self, source)) and self._dtype.is_floating_point  # int self: no gradient
    with no_grad():
        expanded = expand(source, self._shape)
        copy_values(self, clone(expanded) if expanded._storage.data is self._storage.data else expanded)
    self._storage.version += 1
    if recording:
        node = ReplaceBackward(name).connect((self, source), edges=edges)
        rebase_history(self, (node, 0))
    return self


def fill_(self, value):
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(
                f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions."
            )
        return _replace_values("FillBackward3", self, value)
    return _replace_values("FillBackward2", self, full((), value, self._dtype))


def zero_(self):
    return _replace_values("ZeroBackward0", self, full((), 0, self._dtype))


def copy_(self, src):
    return _replace_values("torch::autograd::CopyBackwards", self, src, checked=True)


# ---- in-place shape ops (t_, transpose_, squeeze_, unsqueeze_): self takes the geometry of its
# out-of-place view and that view's node as its history, under PyTorch's name for the in-place op.
# The values are unchanged, so, as PyTorch, no CopySlices: a view's base keeps its history, and only
# the shared version moves on (the other views of the base get their history remade).


class TBackward1(TBackward0):
    def forward(self, x):
        if x.dim() > 2:
            raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {x.dim()}D")
        return super().forward(x)


class TransposeBackward1(TransposeBackward0):
    pass


class SqueezeBackward3(SqueezeBackward0):
    """squeeze_()"""


class SqueezeBackward4(SqueezeBackward0):
    """squeeze_(dim)"""


class SqueezeBackward5(SqueezeBackward0):
    """squeeze_(dims)"""


class UnsqueezeBackward1(UnsqueezeBackward0):
    pass


def _restride_(node_class, self, **params):
    check_inplace(self)
    view = node_class.run(self, **params)
    self._shape, self._strides = view._shape, view._strides
    self._storage.version += 1
    if view._grad_fn is not None:
        # Not set_history: as PyTorch, a retain_grad() stays with the old node (self.grad is then
        # the gradient of the values before the op, in their old shape).
        self._grad_fn, self._output_nr = view._grad_fn, 0
    if self._view_base is not None:
        self._view_version = self._storage.version  # its history describes the new geometry
    return self


def t_(self):
    return _restride_(TBackward1, self)


def transpose_(self, dim0, dim1):
    return _restride_(TransposeBackward1, self, dim0=dim0, dim1=dim1)


def squeeze_(self, dims, dim_sequence):
    node = SqueezeBackward3 if dims is None else SqueezeBackward5 if dim_sequence else SqueezeBackward4
    return _restride_(node, self, dims=dims)


def unsqueeze_(self, dim):
    return _restride_(UnsqueezeBackward1, self, dim=dim)
