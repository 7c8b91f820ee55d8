"""The shape family (narrow, unbind, movedim, flips, rolls, repeats, triangles, diagonals, products of
vectors, grids, splits, stacks, diff): what the op cases of tests/op_cases.py do not cover, against
PyTorch on both backends: views and copies, the several results of one call, the argument forms,
second derivatives through the ops' own nodes, and errors."""

import importlib
import warnings

import numpy as np
import pytest

import fastgrad
import fastgrad.reference

from oracle_helpers import same_error, same_on_both

DATA = np.arange(12.0).reshape(3, 4) * 0.5 - 2.0


def leaf(m, data=DATA):
    return m.tensor(data, requires_grad=True)


def outcome(m, results, inputs):
    """The results' values, dtypes and grad flags, and each input's gradient of their weighted sum."""
    results = list(results)
    total = sum(((r * (i + 1)).sum() for i, r in enumerate(results) if r.requires_grad), m.tensor(0.0))
    if total.requires_grad:
        total.backward()
    return results, [None if x.grad is None else x.grad for x in inputs]


@pytest.mark.parametrize(
    "view",
    [
        lambda m, x: x.narrow(1, 1, 2),
        lambda m, x: x.unbind(1)[2],
        lambda m, x: m.movedim(x, 0, 1),
        lambda m, x: x[0].broadcast_to((2, 4)),
        lambda m, x: x.unflatten(1, (2, 2)),
        lambda m, x: x.tensor_split([1, 3], 1)[1],
        lambda m, x: x.split([1, 3], 1)[1],
        lambda m, x: x.chunk(2, 1)[0],
        lambda m, x: m.meshgrid(x[0], x[:, 0], indexing="ij")[0],
        lambda m, x: x.repeat_interleave(2),
    ],
    ids=[
        "narrow",
        "unbind",
        "movedim",
        "broadcast_to",
        "unflatten",
        "tensor_split",
        "split",
        "chunk",
        "meshgrid",
        "ri",
    ],
)
def test_views_and_copies_as_pytorch(fg, torch, view):
    """A write into the input after the op shows in a view, not in a copy (repeat_interleave's
    result is a view of a copy)."""

    def program(m):
        x = m.tensor(DATA)
        result = view(m, x)
        x.mul_(10)
        return result

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "copy",
    [
        lambda m, x: x.flip(0),
        lambda m, x: x.roll(1, 1),
        lambda m, x: x.rot90(0),
        lambda m, x: x.repeat(1, 1),
        lambda m, x: x.tile((1,)),
        lambda m, x: x.tril(5),
        lambda m, x: x.diag(),
        lambda m, x: m.block_diag(x),
        lambda m, x: m.kron(x, m.ones(1)),
    ],
    ids=["flip", "roll", "rot90", "repeat", "tile", "tril", "diag", "block_diag", "kron"],
)
def test_copies_do_not_follow_the_input(fg, torch, copy):
    def program(m):
        x = m.tensor(DATA)
        result = copy(m, x)
        x.mul_(10)
        return result

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "call",
    [
        lambda m, x, v: x.unbind(),
        lambda m, x, v: m.unbind(x, -1),
        lambda m, x, v: x.tensor_split(3, 1),
        lambda m, x, v: m.tensor_split(x, (1, -1)),
        lambda m, x, v: x.tensor_split(m.tensor(2), 1),
        lambda m, x, v: x.tensor_split(m.tensor([1, 2]), 1),
        lambda m, x, v: x.split(3, 1),
        lambda m, x, v: x.split([3, 1], 1),
        lambda m, x, v: x[:, :0].split(0, 1),
        lambda m, x, v: m.broadcast_tensors(x, v, m.tensor(1.0)),
        lambda m, x, v: m.meshgrid(v, x[:, 0], indexing="xy"),
        lambda m, x, v: m.meshgrid([v, x[:, 0], v[:2]], indexing="ij"),
        lambda m, x, v: m.atleast_1d(x, v.sum()),
        lambda m, x, v: m.atleast_2d([v, v.sum()]),
        lambda m, x, v: m.atleast_3d((x, v, v.sum())),
        lambda m, x, v: [m.repeat_interleave(v, m.tensor(2))],
        lambda m, x, v: [x.repeat_interleave(m.tensor([2, 0, 1]), dim=0, output_size=3)],
        lambda m, x, v: [m.cartesian_prod(v, v[:2], v[:1])],
        lambda m, x, v: [m.block_diag(v, x.long(), v.sum())],
        lambda m, x, v: [m.diff(v.bool())],
        lambda m, x, v: [x.diff(3, 0)],
        lambda m, x, v: [v.diff(2**62)],
        lambda m, x, v: [m.roll(v.sum(), 2)],
        lambda m, x, v: [m.movedim(v.sum(), 0, -1)],
        lambda m, x, v: [m.flip(v.sum(), (0,))],
        lambda m, x, v: [m.diag_embed(x, 0, 0, 2)],
        lambda m, x, v: [x.long().trace()],
        lambda m, x, v: [m.hstack((x, x), out=m.empty(0))] if not x.requires_grad else [],
    ],
)
def test_forms_match_torch(fg, torch, call):
    """Values, dtypes, grad flags and gradients of each result of each form, as PyTorch's."""

    def program(m):
        x, v = leaf(m), leaf(m, DATA[0])
        return outcome(m, call(m, x, v), [x, v])

    same_on_both(fg, torch, program)


def test_results_that_are_the_inputs(fg, torch):
    def program(m):
        x, v = leaf(m), leaf(m, DATA[0])
        return [
            m.atleast_1d(v) is v,
            m.atleast_3d(x.reshape(1, 3, 4)).grad_fn.name(),
            m.broadcast_tensors(x, v)[0] is x,
            m.cartesian_prod(v) is v,
            type(m.atleast_2d([x])).__name__,
            type(m.unbind(x)).__name__,
        ]

    same_on_both(fg, torch, program)


def test_writes_through_a_diagonal(fg, torch):
    """diagonal is a view: a write through it reaches the input, and the gradient flows through
    the write (CopySlices) and the view."""

    def program(m):
        x = leaf(m)
        y = x * 1
        d = y.diagonal(-1)
        d.mul_(3)
        unused = m.tensor(DATA).diagonal(5)
        return outcome(m, [y], [x]), d._version == y._version, tuple(unused.shape), unused.storage_offset()

    same_on_both(fg, torch, program)


def test_broadcast_shapes(fg, torch):
    def program(m):
        shapes = [m.broadcast_shapes((2, 1, 3), (4, 1), 3), m.broadcast_shapes(), m.broadcast_shapes((0, 1), (3,))]
        return [(type(s).__name__, tuple(s)) for s in shapes]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("name", ["tril_", "triu_"])
def test_triangle_in_place(fg, torch, name):
    """On a non-leaf the gradient flows through the kept triangle (PyTorch names the node
    TrilBackward0, fastgrad's in-place write CopyBackwards); a leaf that requires grad refuses."""

    def program(m):
        x = leaf(m)
        y = x * 2
        result = getattr(y, name)(1)
        version = y._version
        return outcome(m, [result], [x]), result is y, version > 0

    same_on_both(fg, torch, program)
    same_error(fg, torch, lambda m: getattr(leaf(m), name)())


def test_triangle_indices(fg, torch):
    def program(m):
        return [m.tril_indices(3, 4, 1), m.triu_indices(4, 3, -1), m.tril_indices(0, 3), m.triu_indices(3, 3, 5)]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "call",
    [
        lambda m, x: x.flip(0, 1),
        lambda m, x: x.roll((1, -1), (0, 1)),
        lambda m, x: x.roll(5),
        lambda m, x: x.rot90(3),
        lambda m, x: x.repeat(2, 1, 2),
        lambda m, x: x.repeat_interleave(m.tensor([2, 0, 1]), 0),
        lambda m, x: x.triu(-1),
        lambda m, x: x.diagonal(1),
        lambda m, x: x.diag(-1),
        lambda m, x: x[0].diag_embed(1),
        lambda m, x: x.trace(),
        lambda m, x: m.block_diag(x, x[0]),
        lambda m, x: m.kron(x, x[0]),
        lambda m, x: x.unbind(1)[1],
        lambda m, x: x.split([1, 3], 1)[1],
    ],
)
def test_second_derivatives_match_torch(fg, torch, call):
    """The gradient of (op(x) ** 2 weighted) has itself a gradient: the ops' nodes have a backward
    written in differentiable ops."""

    def program(m):
        x = leaf(m)
        y = call(m, x)
        weights = m.tensor(np.linspace(-1.0, 2.0, y.numel()).reshape(tuple(y.shape)), dtype=y.dtype)
        (grad,) = m.autograd.grad((y**2 * weights).sum(), x, create_graph=True)
        (grad * grad).sum().backward()
        return grad.detach(), x.grad

    same_on_both(fg, torch, program)


def test_meshgrid_without_indexing_warns(fg):
    with pytest.warns(UserWarning, match="in an upcoming release, it will be required to pass the indexing argument"):
        fg.meshgrid(fg.ones(2), fg.ones(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fg.meshgrid(fg.ones(2), fg.ones(3), indexing="xy")


def test_split_parts_refuse_in_place_writes(fg, torch):
    """Parts of one split, chunk or unbind that require grad are the outputs of one node and may not be
    written in place, nor used after their base was, nor may views of them: PyTorch's messages. Without
    a recorded history they are plain views."""

    def messages(m):
        found = []
        for parts in (
            lambda x: x.split(2, 1),
            lambda x: x.split([1, 3], 1),
            lambda x: x.chunk(2, 1),
            lambda x: x.unbind(),
            lambda x: [p.t() for p in x.split(1)],
        ):
            base = leaf(m) * 1
            with pytest.raises(RuntimeError) as written:
                parts(base)[-1].mul_(2)
            part = parts(base)[0]
            base.add_(1)
            with pytest.raises(RuntimeError) as used:
                part.exp()
            found += [str(written.value), str(used.value)]
        plain = m.ones(2, 3)
        plain.split(2, 1)[0].mul_(3)  # no gradient involved: a plain write
        found.append(plain.sum().item())
        # parts of a tensor without history, made in grad mode, are still a multi-output node's views
        for write in (
            lambda: plain.split(1)[0].mul_(leaf(m).sum()),
            lambda: plain.unbind(1)[0].view(-1).add_(leaf(m).sum()),
        ):
            with pytest.raises(RuntimeError) as written:
                write()
            found.append(str(written.value))
        part = plain.split(1)[1]
        plain.add_(leaf(m).sum())
        with pytest.raises(RuntimeError) as used:
            part * 1
        found.append(str(used.value))
        return found

    assert messages(fg) == messages(torch)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.ones(4).tensor_split(m.tensor([1.0])),
        lambda m: m.ones(4).tensor_split(m.tensor([[1]])),
        lambda m: m.ones(()).tensor_split(2),
        lambda m: m.ones(3).repeat_interleave(m.tensor([1.0, 2.0, 3.0])),
        lambda m: m.ones(3).repeat_interleave(m.tensor([[1, 2, 0]])),
        lambda m: m.ones(3).repeat_interleave(m.tensor([1, -2, 1])),
        lambda m: m.ones(3).repeat_interleave(m.tensor([1, 2, 0]), output_size=5),
        lambda m: m.triu_indices(3, 3, dtype=m.float32),
        lambda m: m.tril_indices(-1, 3),
        lambda m: m.cartesian_prod(m.ones(2, 2)),
        lambda m: m.meshgrid(m.ones(2), m.ones(2).long(), indexing="ij"),
        lambda m: m.meshgrid(indexing="ij"),
        lambda m: m.ones(2, 2).repeat(2, -1),
        lambda m: m.ones(3, 4).rot90(1, (0, 1, 2)),
        lambda m: m.ones(3, 4).rot90(1, (0, 2)),
        lambda m: m.ones(3, 4).rot90(1, (1, -1)),
        lambda m: m.ones(3, 4).diagonal(0, 1, -1),
        lambda m: m.flip(m.ones(2), 0),
        lambda m: m.ones(3).diag_embed(0, 0, -2),
        lambda m: m.ones(3).outer(m.ones(2, 2)),
        lambda m: m.ones(()).diff(),
        lambda m: m.ones(()).flipud(),
        lambda m: m.ones(3, 4).roll((1, 2)),
        lambda m: m.ones(3, 4).narrow(0, 0, -1),
        lambda m: m.ones(3, 4).unfold(1, 5, 1),
        lambda m: m.ones(3, 4).unfold(1, -1, 0),
        lambda m: m.ones(3, 4).unfold(1, 2, 0),
        lambda m: m.ones(3, 4).unfold(2, 1, 1),
        lambda m: m.ones(()).unfold(0, 2, 1),
        lambda m: m.ones(3, 4).select(2, 0),
        lambda m: m.ones(3, 4).select(0, 3),
        lambda m: m.ones(3, 4).select(1, -5),
        lambda m: m.ones(()).select(0, 0),
        lambda m: m.positive(m.ones(2, dtype=m.bool)),
        lambda m: m.ones(3).mT,
        lambda m: m.ones(3).mH,
        lambda m: m.ones(3).H,
        lambda m: m.ones(2, 3, 4).H,
        lambda m: m.ones(3, 4).movedim(2, 0),
        lambda m: m.vstack([]),
        lambda m: m.ones(3, 4).unbind(2),
        lambda m: m.ones(3).tensor_split(2**64),
        lambda m: m.ones(3).roll(2**63),
    ],
)
def test_errors_match_torch(fg, torch, call):
    same_error(fg, torch, call)


@pytest.mark.parametrize("shape", [(2,), (2, 2)])
def test_trace_refuses_bools_before_checking_the_dim(fg, torch, shape):
    same_error(fg, torch, lambda m: m.trace(m.zeros(shape, dtype=m.bool)))


VIEW_OR_NOT = {
    "view": lambda x: x.view(6),
    "t": lambda x: x.t(),
    "index": lambda x: x[1],
    "view of a view": lambda x: x.t()[0],
    "expand": lambda x: x[:1].expand(3, 3),
    "add": lambda x: x + 1,
    "clone": lambda x: x.clone(),
    "detach": lambda x: x.detach(),
    "reshape that copies": lambda x: x.t().reshape(6),
}


@pytest.mark.parametrize("make", VIEW_OR_NOT.values(), ids=VIEW_OR_NOT.keys())
@pytest.mark.parametrize("backend", ["fastgrad", "fastgrad.reference"])
def test_base_and_is_view_as_pytorch(torch, backend, make):
    """_base is the tensor owning a view's memory (the base of a view of a view too), None otherwise;
    a reshape that has to copy returns the copy, not a view of it (UnsafeViewBackward0)."""
    m = importlib.import_module(backend)
    flags = []
    for lib in (torch, m):
        base = lib.arange(6.0, requires_grad=True).reshape(2, 3)  # a view of arange's result
        y = make(base)
        flags.append((y._is_view(), y._base is base._base if y._is_view() else y._base, y.requires_grad))
    assert flags[1] == flags[0]


def matrix_views_and_sizes(m):
    x = m.tensor(np.arange(24.0).reshape(2, 3, 4), requires_grad=True)
    views = [x.mT, x.mH, x[0].H, x[0].T]
    sum(v.sum() * (i + 1) for i, v in enumerate(views)).backward()
    tensors = (x, x[0, 0, :2].long(), m.ones(()))
    sizes = [(t.nelement(), t.ndimension(), t.itemsize, t.nbytes, t.is_cpu) for t in tensors]
    return [(v, v.grad_fn.name()) for v in views], x.grad, sizes


def test_matrix_transposes_and_size_queries(fg, torch):
    same_on_both(fg, torch, matrix_views_and_sizes)


def unfolded(m):
    """Overlapping windows share elements: a write through the view shows in the input and in every
    window holding the element, and the gradient adds over the windows (also in a second derivative)."""
    x = m.tensor(np.arange(10.0).reshape(2, 5), requires_grad=True)
    windows = x.unfold(1, 3, 1)
    weights = m.tensor(np.arange(18.0).reshape(2, 3, 3))
    (grad,) = m.autograd.grad((windows * windows * weights).sum(), x, create_graph=True)
    (second,) = m.autograd.grad(grad.sum(), x)
    data = x.detach().clone()
    view = data.unfold(1, 2, 2)
    view[0, 1, 0] = -1.0
    empty = m.ones(3, 4).unfold(0, 0, 1)
    return windows, windows.stride(), grad, second, data, view, (tuple(empty.shape), empty.stride())


def test_unfold_windows_overlap_and_gradients_add(fg, torch):
    same_on_both(fg, torch, unfolded)


# ---- Tensor.view / Tensor.reshape: plain int sizes take the core's method (fastgrad), any other
# argument the op table's wrapper; either way PyTorch's results, nodes and errors


class _Sizes(tuple):
    def __iter__(self):  # a tuple subclass that iterates its own way is read through iteration
        return iter((3, 4))


@pytest.mark.parametrize("method", ["view", "reshape"])
@pytest.mark.parametrize(
    "sizes",
    [
        lambda m, x: (4, 3),
        lambda m, x: ((2, -1),),
        lambda m, x: ([-1, 6],),
        lambda m, x: (x.shape,),
        lambda m, x: (np.int64(12),),
        lambda m, x: (m.tensor(6), 2),
        lambda m, x: ((),) if x.numel() == 1 else ((3, 4),),
    ],
    ids=["varargs", "tuple", "list", "size", "numpy", "tensor", "nested"],
)
def test_view_and_reshape_sizes_as_pytorch(fg, torch, method, sizes):
    def program(m):
        x = leaf(m)
        result = getattr(x, method)(*sizes(m, x))
        result.backward(m.ones(result.shape))
        return [result, result.grad_fn.name(), x.grad]

    same_on_both(fg, torch, program)


def test_reshape_of_a_transpose_copies_as_pytorch(fg, torch):
    def program(m):
        x = leaf(m)
        result = x.t().reshape(2, 6)
        x.detach().mul_(10)  # not a view: unchanged
        return [result, result.grad_fn.name()]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("method", ["view", "reshape"])
@pytest.mark.parametrize("sizes", [(5,), (-1, -1)], ids=["size", "two-inferred"])
def test_view_and_reshape_errors_as_pytorch(fg, torch, method, sizes):
    same_error(fg, torch, lambda m: getattr(m.tensor(DATA), method)(*sizes))


@pytest.mark.parametrize("method", ["view", "reshape"])
@pytest.mark.parametrize(
    "arguments",
    [
        ((True, 12), {}),
        (((True, 12),), {}),
        ((2**63, 1), {}),
        (((2**63,),), {}),
        ((2.0, 6), {}),
        (("12",), {}),
        (((2, None),), {}),
        ((), {}),
        ((), {"shape": (4, 3)}),
        ((_Sizes((12,)),), {}),
    ],
    ids=["bool", "bool-tuple", "overflow", "overflow-tuple", "float", "str", "none", "nothing", "keyword", "subclass"],
)
def test_view_and_reshape_other_arguments_as_the_wrapper(method, arguments):
    """Arguments other than plain int sizes take the op table's wrapper in fastgrad (the reference's
    only path): the same result or error."""
    args, kwargs = arguments

    def program(m):
        return getattr(m.tensor(DATA), method)(*args, **kwargs)

    try:
        expected = program(fastgrad.reference)
    except Exception:  # noqa: BLE001  the error itself is what is compared
        same_error(fastgrad, fastgrad.reference, program)
    else:
        assert program(fastgrad).tolist() == expected.tolist()


def test_view_of_a_transpose_fails_as_pytorch(fg, torch):
    same_error(fg, torch, lambda m: m.tensor(DATA).t().view(12))
