"""The module functions and Tensor methods of linear algebra (the op-table rows naming
`_linalg_ops.<f>`): products with beta and alpha (addmv, addr, baddbmm, addbmm; addmm, F.linear's
op, is a backend primitive), contractions (tensordot, inner, einsum), cross, cdist, and PyTorch's
top-level forms of fastgrad.linalg's decompositions (det, inverse, cholesky, svd, qr, ...).

Written once for both backends (a shared module, see _shared): a contraction is one GEMM (the
backend's mm or bmm) after a permute and a reshape, never a Python loop over elements. An op whose
PyTorch node has its own name (AddmvBackward0, ...) is an autograd.Function named so by
fastgrad.linalg's _node, with its backward in differentiable ops (second derivatives work).
"""

import builtins
import collections
import itertools
import math

import numpy as np

from . import _prims
from ._methods import _index, _with_out, _wrap_dim, register
from ._grad_mode import no_grad
from .autograd import Function
from .linalg import _LinalgQr, _Cholesky, _Slogdet, _check_matrices, _check_square, _lift, _mT, _node
from . import linalg
from fastgrad import return_types
from fastgrad._types import SCALAR_TYPE_NAME


def _scaled(x, factor):
    return x if factor == 1 else x * factor


def _names(*tensors):
    return [SCALAR_TYPE_NAME[x.dtype] for x in tensors]


def _check_scalar_type(first, *others):
    """PyTorch's kernels take operands of one dtype, the first one's."""
    for x in others:
        if x.dtype is not first.dtype:
            raise RuntimeError("expected scalar type {} but found {}".format(*_names(first, x)))


# ---- products: PyTorch's beta * input + alpha * (product), each one node


class _ScaledProduct(Function):
    """beta * input + alpha * product(a, b), PyTorch's add-products (addmv, addr, baddbmm, addbmm);
    a subclass gives the product and its gradients for a and b."""

    @classmethod
    def forward(cls, ctx, input, a, b, beta, alpha):
        ctx.save_for_backward(a, b)
        ctx.beta, ctx.alpha = beta, alpha
        product = _scaled(cls.product(a, b), alpha)
        return product if beta == 0 else product + _scaled(input, beta)  # beta=0 ignores input (NaN too)

    @classmethod
    def backward(cls, ctx, grad):
        grad_a, grad_b = cls.product_grads(grad, *ctx.saved_tensors)
        return _scaled(grad, ctx.beta), _scaled(grad_a, ctx.alpha), _scaled(grad_b, ctx.alpha), None, None


def _check_self_dtype(input, mat2):
    """addbmm (as the primitive addmm): the added input in the product's dtype."""
    if input.dtype is not mat2.dtype:
        raise RuntimeError("self and mat2 must have the same dtype, but got {} and {}".format(*_names(input, mat2)))


@_node("AddmvBackward0")
class _Addmv(_ScaledProduct):
    product = staticmethod(lambda mat, vec: _prims.mv(mat, vec))

    @staticmethod
    def product_grads(grad, mat, vec):
        return _prims.unsqueeze(grad, 1) * _prims.unsqueeze(vec, 0), _mT(mat).mv(grad)


def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    if mat.dim() != 2 or vec.dim() != 1 or mat.shape[1] != vec.shape[0] or input.shape not in ((), (1,), mat.shape[:1]):
        sizes = ", ".join(map(str, input.shape))
        raise RuntimeError(
            f"size mismatch, got input ({sizes}), mat ({'x'.join(map(str, mat.shape))}), "
            f"vec ({', '.join(map(str, vec.shape))})"
        )
    if not (input.dtype is mat.dtype is vec.dtype):
        raise RuntimeError(
            "addmv input tensors must have the same dtype, but got {}, {}, and {}".format(*_names(input, mat, vec))
        )
    input = _prims.expand(input, [mat.shape[0]])
    return _with_out(_Addmv.apply(input, mat, vec, beta, alpha), out)


@_node("AddrBackward0")
class _Addr(_ScaledProduct):
    product = staticmethod(lambda vec1, vec2: _prims.unsqueeze(vec1, 1) * _prims.unsqueeze(vec2, 0))

    @staticmethod
    def product_grads(grad, vec1, vec2):
        return grad.mv(vec2), _mT(grad).mv(vec1)


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    for arg, tensor in (("vec1", vec1), ("vec2", vec2)):
        if tensor.dim() != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {arg}, but got {tensor.dim()}-D")
    input = _prims.expand(input, [vec1.shape[0], vec2.shape[0]])
    return _with_out(_Addr.apply(input, vec1, vec2, beta, alpha), out)


def _check_batches(batch1, batch2):
    for arg, tensor in (("batch1", batch1), ("batch2", batch2)):
        if tensor.dim() != 3:
            raise RuntimeError(f"{arg} must be a 3D tensor")
    if batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError(
            f"batch1 and batch2 must have same number of batches, got {batch1.shape[0]} and {batch2.shape[0]}"
        )
    if batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{batch1.shape[0]}, "
            f"{batch1.shape[2]}] but got: [{batch2.shape[0]}, {batch2.shape[1]}]."
        )


@_node("BaddbmmBackward0")
class _Baddbmm(_ScaledProduct):
    product = staticmethod(lambda batch1, batch2: _prims.bmm(batch1, batch2))

    @staticmethod
    def product_grads(grad, batch1, batch2):
        return grad.bmm(_mT(batch2)), _mT(batch1).bmm(grad)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    _check_batches(batch1, batch2)
    if not (input.dtype is batch1.dtype is batch2.dtype):
        kinds = [name.lower() for name in _names(input, batch1, batch2)]
        raise RuntimeError("Input dtypes must be the same, got: input {}, batch1: {}, batch2: {}".format(*kinds))
    input = _prims.expand(input, [batch1.shape[0], batch1.shape[1], batch2.shape[2]])
    return _with_out(_Baddbmm.apply(input, batch1, batch2, beta, alpha), out)


@_node("AddbmmBackward0")
class _Addbmm(_ScaledProduct):
    product = staticmethod(lambda batch1, batch2: _prims.sum(_prims.bmm(batch1, batch2), [0], False, None))

    @staticmethod
    def product_grads(grad, batch1, batch2):
        grads = _prims.expand(_prims.unsqueeze(grad, 0), [batch1.shape[0], *grad.shape])
        return grads.bmm(_mT(batch2)), _mT(batch1).bmm(grads)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    _check_batches(batch1, batch2)
    _check_self_dtype(input, batch2)
    input = _prims.expand(input, [batch1.shape[1], batch2.shape[2]])
    return _with_out(_Addbmm.apply(input, batch1, batch2, beta, alpha), out)


@_node("VdotBackward0")
class _Vdot(Function):
    @staticmethod
    def forward(ctx, input, other):
        ctx.save_for_backward(input, other)
        return _prims.dot(input, other)

    @staticmethod
    def backward(ctx, grad):
        input, other = ctx.saved_tensors
        return grad * other, grad * input


def vdot(input, other, *, out=None):
    if input.dim() != 1 or other.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.dim()}D and {other.dim()}D tensors")
    if input.dtype is not other.dtype:
        raise RuntimeError(
            "dot : expected both vectors to have same dtype, but found {} and {}".format(*_names(input, other))
        )
    return _with_out(_Vdot.apply(input, other), out)


# ---- contractions: tensordot, inner, einsum, multi_dot


def tensordot(a, b, dims=2, out=None):
    """Contracts dims of a with dims of b: one mm of a (free, contracted) by b (contracted, free)."""
    if a.dtype is not b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    if isinstance(dims, (list, tuple)):
        dims_a, dims_b = ([_index(d) for d in (side if isinstance(side, (list, tuple)) else [side])] for side in dims)
    else:
        dims = _index(dims)
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        dims_a, dims_b = list(range(-dims, 0)), list(range(dims))
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    for da, db in zip(dims_a, dims_b):
        size_a, size_b = a.shape[_wrap_dim(da, a.dim())], b.shape[_wrap_dim(db, b.dim())]
        if size_a != size_b and 1 not in (size_a, size_b):
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {size_a} in dim {da} and second has "
                f"size {size_b} in dim {db}"
            )
        # a size-1 dim broadcasts against the other's, as PyTorch's: the other is summed first (a's
        # when both are 1, so that the mm saves that sum, not a, as PyTorch's does)
        if size_b == 1:
            a = _prims.sum(a, [da], True, None)
        elif size_a == 1:
            b = _prims.sum(b, [db], True, None)
    contracted_a = [_wrap_dim(d, a.dim()) for d in dims_a]
    contracted_b = [_wrap_dim(d, b.dim()) for d in dims_b]
    free_a = [d for d in range(a.dim()) if d not in contracted_a]
    free_b = [d for d in range(b.dim()) if d not in contracted_b]
    m, k, n = (math.prod(x.shape[d] for d in dims) for x, dims in ((a, free_a), (a, contracted_a), (b, free_b)))
    left = _prims.reshape(_prims.permute(a, free_a + contracted_a), [m, k])
    right = _prims.reshape(_prims.permute(b, contracted_b + free_b), [k, n])
    shape = [a.shape[d] for d in free_a] + [b.shape[d] for d in free_b]
    return _with_out(_prims.reshape(_prims.mm(left, right), shape), out)


def inner(input, other, *, out=None):
    if input.dim() == 0 or other.dim() == 0:
        return _with_out(input * other, out)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(
            "inner() the last dimension must match on both input tensors but got shapes "
            f"{list(input.shape)} and {list(other.shape)}"
        )
    return _with_out(tensordot(input, other, ([-1], [-1])), out)


def _einsum_labels(term, operand_dims, number):
    """A term's subscripts as labels: letters as themselves, `...` as -1, -2, ... counted from the
    right, so that ellipses of different lengths line up as broadcasting does."""
    if "..." in term:
        before, after = term.split("...", 1)
        if "." in before or "." in after:
            raise RuntimeError("einsum(): found '.' for operand 0 that is not part of any ellipsis")
        count = operand_dims - len(before) - len(after) if operand_dims is not None else number
        return list(before) + list(range(-count, 0)) + list(after)
    if "." in term:
        raise RuntimeError("einsum(): found '.' for operand 0 that is not part of any ellipsis")
    return list(term)


def _einsum_diagonal(x, labels):
    """Repeated labels of one operand (`ii`) become one dim: their diagonal (a view, as PyTorch's),
    which goes last."""
    for label in dict.fromkeys(labels):
        while labels.count(label) > 1:
            first = labels.index(label)
            second = labels.index(label, first + 1)
            x = x.diagonal(0, first, second)
            labels = [other for i, other in enumerate(labels) if i not in (first, second)] + [label]
    return x, labels


def _einsum_reduce(x, labels, keep):
    """Sums the dims whose labels are not in `keep`."""
    gone = [i for i, label in enumerate(labels) if label not in keep]
    if gone:
        x = _prims.sum(x, gone, False, None)
    return x, [label for label in labels if label in keep]


def _einsum_pair(a, labels_a, b, labels_b, keep, sizes):
    """a and b contracted over their shared labels that are not kept: one bmm over
    (batch, a's own, contracted) x (batch, contracted, b's own); with nothing to contract, a
    broadcasting product (as PyTorch: an outer product is a MulBackward0)."""
    batch = [label for label in labels_a if label in labels_b and label in keep]
    contracted = [label for label in labels_a if label in labels_b and label not in keep]
    own_a = [label for label in labels_a if label not in labels_b]
    own_b = [label for label in labels_b if label not in labels_a]
    if not contracted:
        a = _prims.permute(a, [labels_a.index(label) for label in batch + own_a])
        b = _prims.permute(b, [labels_b.index(label) for label in batch + own_b])
        a = _prims.reshape(a, [*a.shape, *[1] * len(own_b)])
        b = _prims.reshape(b, [*b.shape[: len(batch)], *[1] * len(own_a), *b.shape[len(batch) :]])
        return a * b, batch + own_a + own_b

    def arranged(x, labels, order):
        x = _prims.permute(x, [labels.index(label) for label in order])
        return _prims.expand(x, [sizes[label] for label in order])  # size-1 dims broadcast

    a = arranged(a, labels_a, batch + own_a + contracted)
    b = arranged(b, labels_b, batch + contracted + own_b)
    nb, m, k, n = (math.prod(sizes[label] for label in group) for group in (batch, own_a, contracted, own_b))
    product = _prims.bmm(_prims.reshape(a, [nb, m, k]), _prims.reshape(b, [nb, k, n]))
    result = _prims.reshape(product, [sizes[label] for label in batch + own_a + own_b])
    return result, batch + own_a + own_b


def einsum(equation, *operands):
    """Einstein summation: diagonals for repeated subscripts, then the operands contracted left to
    right, each pair with one bmm; labels no later term needs are summed out first."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) > len(operands):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(terms) < len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    _check_scalar_type(*operands)
    all_labels, ellipsis = [], 0
    for number, (term, x) in enumerate(zip(terms, operands)):
        letters = term.replace("...", "")
        if "..." in term:
            if len(letters) > x.dim():
                raise RuntimeError(
                    f"einsum(): the number of subscripts in the equation ({len(letters)}) is more than the number "
                    f"of dimensions ({x.dim()}) for operand {number}"
                )
            ellipsis = builtins.max(ellipsis, x.dim() - len(letters))
        elif len(letters) != x.dim():
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({len(letters)}) does not match the number "
                f"of dimensions ({x.dim()}) for operand {number} and no ellipsis was given"
            )
        for letter in letters:
            if not letter.isalpha():
                raise RuntimeError(
                    f"einsum(): invalid subscript given at index {lhs.index(letter)} in the equation string, "
                    "subscripts must be in [a-zA-Z]"
                )
        all_labels.append(_einsum_labels(term, x.dim(), number))
    if arrow:
        output = _einsum_labels(rhs, None, ellipsis)
        seen = set(itertools.chain(*all_labels))
        for label in output:
            if isinstance(label, str) and label not in seen:
                raise RuntimeError(
                    f"einsum(): output subscript {label} does not appear in the equation for any input operand"
                )
            if output.count(label) > 1:
                raise RuntimeError(f"einsum(): output subscript {label} appears more than once in the output")
    else:  # implicit: the ellipsis, then the letters used once, in alphabetical order
        counts = collections.Counter(itertools.chain(*all_labels))
        once = sorted(label for label, n in counts.items() if isinstance(label, str) and n == 1)
        output = list(range(-ellipsis, 0)) + once

    sizes, tensors, labels = {}, [], []
    for number, (x, term_labels) in enumerate(zip(operands, all_labels)):
        for label, size in zip(term_labels, x.shape):
            if term_labels.count(label) > 1 and size != x.shape[term_labels.index(label)]:
                raise RuntimeError(
                    f"einsum(): subscript {label} is repeated for operand {number} but the sizes don't match, "
                    f"{size} != {x.shape[term_labels.index(label)]}"
                )
            seen = sizes.get(label)
            if seen is None or seen == 1:
                sizes[label] = size
            elif size not in (1, seen):
                raise RuntimeError(
                    f"einsum(): subscript {label} has size {size} for operand {number} which does not broadcast with "
                    f"previously seen size {seen}"
                )
        x, term_labels = _einsum_diagonal(x, term_labels)
        tensors.append(x)
        labels.append(term_labels)

    def needed_after(i):
        return set(output).union(*labels[i + 1 :])

    result, result_labels = _einsum_reduce(tensors[0], labels[0], needed_after(0))
    for i in range(1, len(tensors)):
        keep = needed_after(i)
        other, other_labels = _einsum_reduce(tensors[i], labels[i], keep | set(result_labels))
        result, result_labels = _einsum_pair(result, result_labels, other, other_labels, keep, sizes)
    result, result_labels = _einsum_reduce(result, result_labels, set(output))
    order = [result_labels.index(label) for label in output]
    # an operand neither summed nor multiplied (only its diagonal taken) comes back permuted even in
    # its own order: a view of it, as PyTorch's
    if order != list(range(len(order))) or result is tensors[0]:
        result = _prims.permute(result, order)
    return result


def chain_matmul(*matrices, out=None):
    return _with_out(linalg.multi_dot(matrices) if len(matrices) > 1 else matrices[0], out)


# ---- cross product and pairwise distances


def cross(input, other, dim=None, *, out=None):
    """torch.cross: without dim, the first dim of length 3 (PyTorch's deprecated default)."""
    if dim is None:
        shape = _prims.broadcast_shapes(input.shape, other.shape)
        dim = next((d for d, n in enumerate(shape) if n == 3), -1)
    return linalg.cross(input, other, dim=dim, out=out)


@_node("CdistBackward0")
class _Cdist(Function):
    @staticmethod
    def forward(ctx, x1, x2, p):
        ctx.save_for_backward(x1, x2)
        ctx.p = p
        a, b = _prims.to_numpy(x1), _prims.to_numpy(x2)
        diff = np.abs(a[..., :, None, :] - b[..., None, :, :])
        if p == 0:
            distance = np.count_nonzero(diff, axis=-1)
        elif p == np.inf:
            distance = diff.max(axis=-1, initial=0)
        else:
            distance = (diff**p).sum(-1) ** (1 / p)
        return _lift(distance, x1)

    @staticmethod
    def backward(ctx, grad):
        """PyTorch's _cdist_backward, which has no derivative itself: computed without a graph, and
        in a create_graph backward returned through a node that refuses a second derivative."""
        x1, x2 = ctx.saved_tensors
        p = ctx.p
        with no_grad():
            diff = _prims.unsqueeze(x1, -2) - _prims.unsqueeze(x2, -3)
            distance = _prims.unsqueeze(_Cdist.apply(x1, x2, p), -1)
            upstream = _prims.unsqueeze(grad, -1)
            if p == 0:
                per_element = diff * 0
            elif p == 1:
                per_element = upstream * diff.sign()
            elif p == np.inf:
                per_element = upstream * diff.sign() * (diff.abs() == distance)
            else:
                safe = _prims.where(distance == 0, 1.0, distance)
                scale = diff.abs() ** (p - 1) / safe ** (p - 1)
                per_element = _prims.where(distance == 0, 0.0, upstream * diff.sign() * scale)
            grad_x1, grad_x2 = per_element.sum(-2), -per_element.sum(-3)
        return (*_CdistBackward.apply(grad, x1, x2, grad_x1, grad_x2), None)


@_node("CdistBackwardBackward0")
class _CdistBackward(Function):
    """cdist's gradients, as a node whose own backward is PyTorch's NotImplementedError."""

    @staticmethod
    def forward(ctx, grad, x1, x2, grad_x1, grad_x2):
        return grad_x1, grad_x2

    @staticmethod
    def backward(ctx, grad_x1, grad_x2):
        raise NotImplementedError("the derivative for '_cdist_backward' is not implemented.")


def cdist(x1, x2, p=2.0, compute_mode=None):
    """Distances between the rows of x1 and of x2 (batch dims broadcast), computed directly (PyTorch's
    choice for up to 25 rows; its matrix-product shortcut for more rows rounds differently)."""
    for name, x in (("X1", x1), ("X2", x2)):
        if x.dim() < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.dim()}D")
    for name, x in (("X1", x1), ("X2", x2)):
        if not x.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {SCALAR_TYPE_NAME[x.dtype]}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    _check_scalar_type(x1, x2)
    batch = list(_prims.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]))
    x1 = _prims.expand(x1, batch + list(x1.shape[-2:]))
    x2 = _prims.expand(x2, batch + list(x2.shape[-2:]))
    return _Cdist.apply(x1, x2, builtins.float(p))


# ---- PyTorch's top-level forms of fastgrad.linalg's decompositions


def det(input):
    return linalg.det(input)


def logdet(input):
    """log(det): NaN for a negative determinant (PyTorch's where over slogdet)."""
    _check_square("logdet", input)
    sign, logabsdet = _Slogdet.apply(input)
    return _prims.where(sign < 0, float("nan"), logabsdet)


def slogdet(input):
    _check_square("linalg.slogdet", input)
    return return_types.slogdet(_Slogdet.apply(input))


def inverse(input, *, out=None):
    return _with_out(linalg.inv(input), out)


def cholesky(input, upper=False, *, out=None):
    _check_square("linalg.cholesky", input)
    return _with_out(_Cholesky.apply(input, upper), out)


def svd(input, some=True, compute_uv=True):
    """U, S, V (not Vh); some=False gives the full bases."""
    if input.dim() < 2:
        raise RuntimeError(
            f"linalg.svd: input should have at least 2 dimensions, but has {input.dim()} dimensions instead"
        )
    U, S, Vh = linalg.svd(input, full_matrices=not some)
    return return_types.svd((U, S, _mT(Vh)))


def qr(input, some=True):
    _check_matrices("linalg.qr", input)
    return return_types.qr(_LinalgQr.apply(input, "reduced" if some else "complete"))


def pinverse(input, rcond=1e-15):
    return linalg.pinv(input, rtol=rcond)


register("_linalg_ops", globals())
