"""fastgrad.linalg: PyTorch's torch.linalg (norms, inv, det, solve, cholesky, qr, eigh, svd, pinv,
...). The module functions and Tensor methods of linear algebra (addmv, einsum, det, svd, ...) are
fastgrad._linalg_ops, over this module.

Written once for both backends (a shared module, see _shared). An op whose PyTorch node has its own
name (LinalgDetBackward0, ...) is an autograd.Function whose node is given that name, with a backward
written in differentiable fastgrad ops (PyTorch's formulas, derivatives.yaml / FunctionsManual.cpp),
so second derivatives work. A backward needing a result of its own op (inv(A) in det's) calls the op
again on the saved inputs: a Function keeps its saved outputs without their history, which a second
derivative needs.

The decompositions (inv, det, solve, cholesky, qr, eigh, svd) compute their forward with numpy.linalg:
LAPACK's pivoting and convergence are not to be redone in a hand loop, and numpy is already the
package's one runtime dependency.
"""

import numpy as np

from . import _prims
from ._methods import _dims, _index, _with_out, _wrap_dim
from .autograd import Function
from fastgrad import return_types
from fastgrad._types import SCALAR_TYPE_NAME, LinAlgError

__all__ = [
    "LinAlgError",
    "cholesky",
    "cross",
    "det",
    "eigh",
    "eigvalsh",
    "inv",
    "matrix_norm",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "vector_norm",
]


# ---- helpers


def _node(name):
    """Class decorator: the Function's graph node is called `name`, PyTorch's node name."""

    def named(cls):
        cls._backward_cls.__name__ = cls._backward_cls.__qualname__ = name
        return cls

    return named


def _mT(x):
    return _prims.transpose(x, -2, -1)


def _eye(n, dtype):
    return _prims.eye(n, n, dtype)


def _diagonal(x):
    """The diagonals of a batch of square matrices (differentiable: a masked sum)."""
    return _prims.sum(x * _eye(x.shape[-1], x.dtype), [-1], False, None)


def _diag_embed(v):
    """Square matrices with the last dim of v on their diagonals."""
    return _prims.unsqueeze(v, -1) * _eye(v.shape[-1], v.dtype)


def _tril(x, diagonal=0):
    """The lower triangles (from `diagonal` down) of a batch of matrices, the rest zero."""
    return x * _lift(np.tril(np.ones(x.shape[-2:]), diagonal), x)


def _lift(array, like):
    """A numpy result as a tensor of `like`'s dtype."""
    return _prims.from_numpy(np.array(array, dtype=_prims.to_numpy(like).dtype), share_memory=False)


def multi_dot(tensors, *, out=None):
    """The product of matrices (the first and last may be vectors), in the order of fewest
    multiplications (as PyTorch: its rounding), vectors taken as 1-row and 1-column matrices."""
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    first, last = tensors[0], tensors[-1]
    if first.dim() not in (1, 2):
        raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got {first.dim()}D")
    if last.dim() not in (1, 2):
        raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got {last.dim()}D")
    for i, x in enumerate(tensors[1:-1], 1):
        if x.dim() != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {x.dim()}D")
    shape = list(first.shape[:-1]) + list(last.shape[1:])
    matrices = [_prims.unsqueeze(first, 0) if first.dim() == 1 else first, *tensors[1:-1]]
    matrices.append(_prims.unsqueeze(last, 1) if last.dim() == 1 else last)
    for i in range(n - 1):
        if matrices[i].shape[1] != matrices[i + 1].shape[0]:
            (a, b), (c, d) = matrices[i].shape, matrices[i + 1].shape
            raise RuntimeError(
                f"multi_dot(): tensors {i} and {i + 1} with shapes [{a}, {b}] and [{c}, {d}] cannot be multiplied"
            )
    sizes = [x.shape[0] for x in matrices] + [matrices[-1].shape[1]]
    # cost[i][j]: the fewest multiplications for matrices i..j; split[i][j]: where that product splits
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j], split[i][j] = min(
                (cost[i][k] + cost[k + 1][j] + sizes[i] * sizes[k + 1] * sizes[j + 1], k) for k in range(i, j)
            )

    def product(i, j):
        return matrices[i] if i == j else _prims.mm(product(i, split[i][j]), product(split[i][j] + 1, j))

    return _with_out(_prims.view(product(0, n - 1), shape), out)


# ---- cross product


@_node("LinalgCrossBackward0")
class _Cross(Function):
    @staticmethod
    def forward(ctx, input, other, dim):
        ctx.save_for_backward(input, other)
        ctx.dim = dim
        return _lift(np.cross(_prims.to_numpy(input), _prims.to_numpy(other), axis=dim), input)

    @staticmethod
    def backward(ctx, grad):
        input, other = ctx.saved_tensors
        return _Cross.apply(other, grad, ctx.dim), _Cross.apply(grad, input, ctx.dim), None


def cross(input, other, *, dim=-1, out=None):
    if input.dim() != other.dim():
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if input.dtype is not other.dtype:
        raise RuntimeError(
            f"expected scalar type {SCALAR_TYPE_NAME[input.dtype]} but found {SCALAR_TYPE_NAME[other.dtype]}"
        )
    shape = _prims.broadcast_shapes(input.shape, other.shape)
    dim = _index(dim)
    checked = _wrap_dim(dim, len(shape))
    if input.shape[checked] != 3 or other.shape[checked] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got {input.shape[checked]} and "
            f"{other.shape[checked]}"
        )
    return _with_out(_Cross.apply(_prims.expand(input, list(shape)), _prims.expand(other, list(shape)), checked), out)


# ---- norms


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    if isinstance(ord, str):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' must be Number, not {type(ord).__name__}")
    if dtype is not None:
        x = _prims.to_dtype(x, dtype)
    _check_floating("linalg.vector_norm", x)
    return _with_out(_prims.norm(x, float(ord), _dims(dim), keepdim), out)


_MATRIX_ORDS = ("fro", "nuc", np.inf, -np.inf, 1, -1, 2, -2)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    _check_matrices("linalg.matrix_norm", A)  # before dtype= (PyTorch refuses integers even then)
    if ord not in _MATRIX_ORDS:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if dtype is not None:
        A = _prims.to_dtype(A, dtype)
    rows, cols = (_wrap_dim(_index(d), A.dim()) for d in dim)
    if ord == "fro":
        return _with_out(_prims.norm(A, 2.0, [rows, cols], keepdim), out)
    if ord in ("nuc", 2, -2):  # of the singular values, the matrices' dims moved last
        rest = [d for d in range(A.dim()) if d not in (rows, cols)]
        values = svdvals(_prims.permute(A, rest + [rows, cols]))
        if ord == "nuc":
            result = _prims.sum(values, [-1], keepdim, None)
        else:
            result = _extreme(values, -1, keepdim, ord > 0)
        if keepdim:  # the two dims back in their places
            order = rest + [rows, cols]
            result = _prims.permute(_prims.unsqueeze(result, -1), [order.index(d) for d in range(A.dim())])
        return _with_out(result, out)
    # 1: the largest column sum of |A|; inf: the largest row sum (-1, -inf: the smallest)
    summed, extreme = (rows, cols) if ord in (1, -1) else (cols, rows)
    sums = _prims.sum(A.abs(), [summed], True, None)
    if not keepdim:
        sums = _prims.squeeze(sums, [summed], False)
        extreme -= extreme > summed
    return _with_out(_extreme(sums, extreme, keepdim, ord > 0), out)


def _extreme(x, dim, keepdim, largest):
    """amax (largest) or amin over dim. The largest of no values is a norm's 0, a constant without
    a graph, as in PyTorch (whose smallest of no values is amin's error)."""
    if largest and x.shape[dim] == 0:
        at = dim % x.dim()
        shape = [1 if d == at else n for d, n in enumerate(x.shape) if keepdim or d != at]
        return _prims.full(shape, 0, x.dtype)
    return (_prims.amax if largest else _prims.amin)(x, [dim], keepdim)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """A vector norm over one dim (or all, for ord=None), a matrix norm over two (or for a named ord)."""
    dims = None if dim is None else _dims(dim)
    if isinstance(ord, str):
        return matrix_norm(A, ord, (-2, -1) if dims is None else dims, keepdim, dtype=dtype, out=out)
    if dims is None and ord is not None:
        if A.dim() not in (1, 2):
            raise RuntimeError(
                f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.dim()}D."
            )
        dims = list(range(A.dim()))
    if dims is not None and len(dims) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
    return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype, out=out)


# ---- decompositions: numpy.linalg forward (LAPACK), backward in differentiable ops


def _check_matrices(name, A, square=False, floating=True):
    """PyTorch's checks of a batch of matrices: at least 2 dims, square if asked, floating point."""
    if A.dim() < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(
            f"{name}: A must be batches of square matrices, but they are {A.shape[-2]} by {A.shape[-1]} matrices"
        )
    if floating:
        _check_floating(name, A)


def _check_floating(name, A):
    if not A.dtype.is_floating_point:
        raise RuntimeError(
            f"{name}: Expected a floating point or complex tensor as input. Got {SCALAR_TYPE_NAME[A.dtype]}"
        )


def _check_square(name, A):
    _check_matrices(name, A, square=True)


def _batch_prefix(array, index):
    return f"(Batch element {index}): " if array.ndim > 2 else ""


def _first_zero_pivot(matrix):
    """LAPACK getrf's info for one matrix: the 1-based index of the first zero pivot of its LU
    factorization with partial pivoting (0 when there is none)."""
    lu = matrix.astype(np.float64)
    for k in range(lu.shape[0]):
        pivot = k + int(np.argmax(np.abs(lu[k:, k])))
        if lu[pivot, k] == 0:
            return k + 1
        lu[[k, pivot]] = lu[[pivot, k]]
        lu[k + 1 :, k:] -= np.outer(lu[k + 1 :, k] / lu[k, k], lu[k, k:])
    return 0


def _numpy_inv(name, A):
    """inv of every matrix of A (an ndarray), or PyTorch's LinAlgError naming the first singular one."""
    try:
        return np.linalg.inv(A)
    except np.linalg.LinAlgError:
        for index, matrix in enumerate(A.reshape(-1, *A.shape[-2:])):
            info = _first_zero_pivot(matrix)
            if info:
                raise LinAlgError(
                    f"{name}: {_batch_prefix(A, index)}The diagonal element {info} is zero, the inversion could not "
                    "be completed because the input matrix is singular."
                ) from None
        raise


@_node("LinalgInvExBackward0")
class _Inv(Function):
    @staticmethod
    def forward(ctx, A):
        ctx.save_for_backward(A)
        return _lift(_numpy_inv("linalg.inv", _prims.to_numpy(A)), A)

    @staticmethod
    def backward(ctx, grad):
        (A,) = ctx.saved_tensors
        inverse = _mT(_Inv.apply(A))  # computed again, with history for a second derivative
        return -_prims.matmul(inverse, _prims.matmul(grad, inverse))


def inv(A, *, out=None):
    _check_square("linalg.inv", A)
    return _with_out(_Inv.apply(A), out)


@_node("LinalgDetBackward0")
class _Det(Function):
    @staticmethod
    def forward(ctx, A):
        ctx.save_for_backward(A)
        return _lift(np.linalg.det(_prims.to_numpy(A)), A)

    @staticmethod
    def backward(ctx, grad):
        """The cofactors: det(A) A^-T; of a singular A, from its SVD A = U S Vh, det(U) det(Vh) U
        diag(the product of the other singular values) Vh (PyTorch's linalg_det_backward)."""
        (A,) = ctx.saved_tensors
        determinant = _Det.apply(A)
        if np.all(_prims.to_numpy(determinant.detach()) != 0):
            return _prims.unsqueeze(_prims.unsqueeze(grad * determinant, -1), -1) * _mT(_Inv.apply(A))
        U, S, Vh = _Svd.apply(A)
        orientation = np.linalg.det(_prims.to_numpy(U.detach())) * np.linalg.det(_prims.to_numpy(Vh.detach()))
        others = _prims.unsqueeze(S, -2).expand(*S.shape[:-1], S.shape[-1], S.shape[-1])
        others = _prims.prod(_prims.where(_eye(S.shape[-1], S.dtype) != 0, 1.0, others), -1, False)
        scale = grad * _lift(orientation, A)
        return _prims.unsqueeze(_prims.unsqueeze(scale, -1), -1) * _prims.matmul(U * _prims.unsqueeze(others, -2), Vh)


def det(A, *, out=None):
    _check_square("linalg.det", A)
    return _with_out(_Det.apply(A), out)


@_node("LinalgSlogdetBackward0")
class _Slogdet(Function):
    @staticmethod
    def forward(ctx, A):
        ctx.save_for_backward(A)
        sign, logabsdet = np.linalg.slogdet(_prims.to_numpy(A))
        sign = _lift(sign, A)
        ctx.mark_non_differentiable(sign)
        return sign, _lift(logabsdet, A)

    @staticmethod
    def backward(ctx, grad_sign, grad_logabsdet):
        (A,) = ctx.saved_tensors
        return _prims.unsqueeze(_prims.unsqueeze(grad_logabsdet, -1), -1) * _mT(_Inv.apply(A))


def slogdet(A):
    _check_square("linalg.slogdet", A)
    return return_types.linalg_slogdet(_Slogdet.apply(A))


@_node("LinalgSolveExBackward0")
class _Solve(Function):
    """X with AX = B (XA = B for left=False), for B of matrices or of vectors (`vector`): one node
    either way, as PyTorch's."""

    @staticmethod
    def forward(ctx, A, B, left, vector):
        ctx.save_for_backward(A, B)
        ctx.left, ctx.vector = left, vector
        like, A, B = A, _prims.to_numpy(A), _prims.to_numpy(B)
        if vector:  # a column (solve refuses a vector for left=False)
            B = B[..., None]
        if not left:
            A, B = np.swapaxes(A, -1, -2), np.swapaxes(B, -1, -2)
        try:
            X = np.linalg.solve(A, B)
        except np.linalg.LinAlgError:
            raise LinAlgError("torch.linalg.solve: The solver failed because the input matrix is singular.") from None
        if not left:
            X = np.swapaxes(X, -1, -2)
        return _lift(X[..., 0] if vector else X, like)

    @staticmethod
    def backward(ctx, grad):
        """PyTorch's linalg_solve_backward: gB = A^-T gX (gX A^-T for left=False), gA = -gB X^T
        (-X^T gB)."""
        A, B = ctx.saved_tensors
        left, vector = ctx.left, ctx.vector
        grad_B = _Solve.apply(_mT(A), grad, left, vector)
        X = _Solve.apply(A, B, left, vector)
        grad_B_matrix = _prims.unsqueeze(grad_B, -1) if vector else grad_B
        if vector:
            X = _prims.unsqueeze(X, -1)
        grad_A = -_prims.matmul(grad_B_matrix, _mT(X)) if left else -_prims.matmul(_mT(X), grad_B_matrix)
        return grad_A, grad_B, None, None


def solve(A, B, *, left=True, out=None):
    """X with AX = B (XA = B for left=False); B a vector or a batch of vectors when its shape is A's
    less the last dim."""
    _check_square("linalg.solve", A)
    if A.dtype is not B.dtype:
        raise RuntimeError(
            "linalg.solve: Expected A and B to have the same dtype, but found A of type "
            f"{SCALAR_TYPE_NAME[A.dtype]} and B of type {SCALAR_TYPE_NAME[B.dtype]} instead"
        )
    vector = B.dim() == 1 or (B.dim() == A.dim() - 1 and B.shape == A.shape[:-1])
    matrix = _prims.unsqueeze(B, -1) if vector else B
    n, (rows, cols) = A.shape[-1], matrix.shape[-2:]
    if (rows if left else cols) != n:
        equation = "AX = B" if left else "XA = B"
        raise RuntimeError(
            f"linalg.solve: Incompatible shapes of A and B for the equation {equation} ({n}x{n} and {rows}x{cols})"
        )
    if vector and not left:
        raise RuntimeError(
            "linalg.solve: Vector broadcasting of the left hand side is not supported for left=False. In this case "
            "linalg.solve is equivalent to B / A.squeeze(-1)"
        )
    batch = list(_prims.broadcast_shapes(A.shape[:-2], matrix.shape[:-2]))
    A = _prims.expand(A, batch + [n, n])
    B = _prims.expand(B, batch + list(B.shape[-1:] if vector else B.shape[-2:]))
    return _with_out(_Solve.apply(A, B, left, vector), out)


def _not_positive_definite(A):
    for index, matrix in enumerate(A.reshape(-1, *A.shape[-2:])):
        for order in range(1, matrix.shape[0] + 1):
            try:
                np.linalg.cholesky(matrix[:order, :order])
            except np.linalg.LinAlgError:
                return LinAlgError(
                    f"linalg.cholesky: {_batch_prefix(A, index)}The factorization could not be completed because the "
                    f"input is not positive-definite (the leading minor of order {order} is not positive-definite)."
                )
    return None


def _cholesky_class(name):
    @_node(name)
    class Cholesky(Function):
        @staticmethod
        def forward(ctx, A, upper):
            ctx.save_for_backward(A)
            ctx.upper = upper
            array = _prims.to_numpy(A)
            try:
                L = np.linalg.cholesky(array)
            except np.linalg.LinAlgError:
                raise _not_positive_definite(array) from None
            return _lift(np.swapaxes(L, -1, -2) if upper else L, A)

        @staticmethod
        def backward(ctx, grad):
            """PyTorch's cholesky_backward: gA = sym(L^-H Phi(L^H gL) L^-1), Phi the lower triangle
            with its diagonal halved."""
            (A,) = ctx.saved_tensors
            L = Cholesky.apply(A, False)
            if ctx.upper:
                grad = _mT(grad)
            phi = _tril(_prims.matmul(_mT(L), grad)) - 0.5 * _diag_embed(_diagonal(_prims.matmul(_mT(L), grad)))
            L_inverse = _Inv.apply(L)
            grad_A = _prims.matmul(_mT(L_inverse), _prims.matmul(phi, L_inverse))
            return 0.5 * (grad_A + _mT(grad_A)), None

    return Cholesky


_LinalgCholesky, _Cholesky = _cholesky_class("LinalgCholeskyExBackward0"), _cholesky_class("CholeskyBackward0")


def cholesky(A, *, upper=False, out=None):
    _check_square("linalg.cholesky", A)
    return _with_out(_LinalgCholesky.apply(A, upper), out)


@_node("LinalgEighBackward0")
class _Eigh(Function):
    @staticmethod
    def forward(ctx, A, UPLO):
        ctx.save_for_backward(A)
        ctx.UPLO = UPLO
        values, vectors = np.linalg.eigh(_prims.to_numpy(A), UPLO)
        return _lift(values, A), _lift(vectors, A)

    @staticmethod
    def backward(ctx, grad_values, grad_vectors):
        """PyTorch's linalg_eig_backward for Hermitian A: gA = V (diag(gL) + skew(V^H gV)/2 / E) V^H,
        E_ij = L_j - L_i."""
        (A,) = ctx.saved_tensors
        values, vectors = _Eigh.apply(A, ctx.UPLO)
        VhgV = _prims.matmul(_mT(vectors), grad_vectors)
        VhgV = 0.5 * (VhgV - _mT(VhgV))
        gaps = _prims.unsqueeze(values, -2) - _prims.unsqueeze(values, -1)
        eye = _eye(values.shape[-1], values.dtype)
        inner = VhgV / (gaps + eye) * (1 - eye) + _diag_embed(grad_values)
        return _prims.matmul(vectors, _prims.matmul(inner, _mT(vectors))), None


def _check_eigh(A):
    """PyTorch checks eigh's shapes, then has no kernel for integers."""
    _check_matrices("linalg.eigh", A, square=True, floating=False)
    if not A.dtype.is_floating_point:
        raise NotImplementedError(f"\"linalg_eigh_cpu\" not implemented for '{SCALAR_TYPE_NAME[A.dtype]}'")


def eigh(A, UPLO="L"):
    _check_eigh(A)
    return return_types.linalg_eigh(_Eigh.apply(A, UPLO))


def eigvalsh(A, UPLO="L", *, out=None):
    _check_eigh(A)
    return _with_out(_Eigh.apply(A, UPLO)[0], out)


@_node("LinalgSvdBackward0")
class _Svd(Function):
    """The reduced SVD, U S Vh (full_matrices=True pads U or Vh outside the node)."""

    @staticmethod
    def forward(ctx, A):
        ctx.save_for_backward(A)
        U, S, Vh = np.linalg.svd(_prims.to_numpy(A), full_matrices=False)
        return _lift(U, A), _lift(S, A), _lift(Vh, A)

    @staticmethod
    def backward(ctx, gU, gS, gVh):
        """PyTorch's svd_backward (real case)."""
        (A,) = ctx.saved_tensors
        U, S, Vh = _Svd.apply(A)
        m, n = A.shape[-2], A.shape[-1]
        V, gV = _mT(Vh), _mT(gVh)
        UhgU = _prims.matmul(_mT(U), gU)
        VhgV = _prims.matmul(_mT(V), gV)
        UhgU, VhgV = UhgU - _mT(UhgU), VhgV - _mT(VhgV)
        S2 = S * S
        eye = _eye(S.shape[-1], S.dtype)
        E = _prims.unsqueeze(S2, -2) - _prims.unsqueeze(S2, -1) + eye
        grad = (UhgU * _prims.unsqueeze(S, -2) + _prims.unsqueeze(S, -1) * VhgV) / E * (1 - eye) + _diag_embed(gS)
        if m > n:
            grad = _prims.matmul(U, grad)
            gU_S_inverse = gU / _prims.unsqueeze(S, -2)
            grad = grad + gU_S_inverse - _prims.matmul(U, _prims.matmul(_mT(U), gU_S_inverse))
            return _prims.matmul(grad, Vh)
        if m < n:
            grad = _prims.matmul(grad, Vh)
            gV_S_inverse = gV / _prims.unsqueeze(S, -2)
            grad = grad + _mT(gV_S_inverse) - _prims.matmul(_prims.matmul(_mT(gV_S_inverse), V), Vh)
            return _prims.matmul(U, grad)
        return _prims.matmul(U, _prims.matmul(grad, Vh))


def svd(A, full_matrices=True, *, driver=None):
    _check_matrices("linalg.svd", A)
    U, S, Vh = _Svd.apply(A)
    m, n = A.shape[-2:]
    if full_matrices and m != n:  # the complement of the reduced bases, without a gradient (as PyTorch)
        U_full, _, Vh_full = np.linalg.svd(_prims.to_numpy(A.detach()), full_matrices=True)
        if m > n:
            U = _prims.cat([U, _lift(U_full[..., n:], A)], -1)
        else:
            Vh = _prims.cat([Vh, _lift(Vh_full[..., m:, :], A)], -2)
    return return_types.linalg_svd((U, S, Vh))


def svdvals(A, *, driver=None, out=None):
    _check_matrices("linalg.svd", A)
    return _with_out(_Svd.apply(A)[1], out)


def _qr_class(name):
    @_node(name)
    class Qr(Function):
        @staticmethod
        def forward(ctx, A, mode):
            ctx.save_for_backward(A)
            ctx.mode = mode
            Q, R = np.linalg.qr(_prims.to_numpy(A), "complete" if mode == "complete" else "reduced")
            return (_lift(np.zeros(0), A) if mode == "r" else _lift(Q, A)), _lift(R, A)

        @staticmethod
        def backward(ctx, gQ, gR):
            """PyTorch's linalg_qr_backward."""
            (A,) = ctx.saved_tensors
            m, n = A.shape[-2:]
            if ctx.mode == "r":
                raise RuntimeError(
                    "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
                    "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr."
                )
            if ctx.mode == "complete" and m > n:
                raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
            Q, R = Qr.apply(A, ctx.mode)
            grad = _prims.matmul(gR, _mT(R)) - _prims.matmul(_mT(Q), gQ)
            if m >= n:  # gA = (gQ + Q sym(triu(grad)), its diagonal halved) R^-T
                upper = _mT(_tril(_mT(grad)))
                symmetric = upper + _mT(upper) - _diag_embed(_diagonal(upper))
                return _prims.matmul(gQ + _prims.matmul(Q, symmetric), _mT(_Inv.apply(R))), None
            lower = _tril(_mT(grad) - grad)
            square = _prims.matmul(_prims.matmul(Q, lower), _mT(_Inv.apply(R[..., :m])))
            zeros = _prims.full([*square.shape[:-1], n - m], 0, square.dtype)
            return _prims.cat([square, zeros], -1) + _prims.matmul(Q, gR), None

    return Qr


_LinalgQr = _qr_class("LinalgQrBackward0")


def qr(A, mode="reduced"):
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(
            f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or 'complete'"
        )
    _check_matrices("linalg.qr", A)
    return return_types.linalg_qr(_LinalgQr.apply(A, mode))


def _tolerance(S, shape, atol, rtol):
    """PyTorch's cutoff for small singular values: max(atol, rtol * largest), rtol by default
    eps * max(m, n) when atol is not given either (0 when it is)."""
    if rtol is None:
        rtol = np.finfo(S.dtype).eps * max(shape) if atol is None else 0.0
    largest = S.max(axis=-1, keepdims=True, initial=0)
    return np.maximum(0.0 if atol is None else atol, rtol * largest)


@_node("LinalgPinvBackward0")
class _Pinv(Function):
    @staticmethod
    def forward(ctx, A, atol, rtol):
        ctx.save_for_backward(A)
        ctx.atol, ctx.rtol = atol, rtol
        U, S, Vh = np.linalg.svd(_prims.to_numpy(A), full_matrices=False)
        kept = S > _tolerance(S, A.shape[-2:], atol, rtol)
        inverse_S = np.where(kept, 1 / np.where(kept, S, 1), 0)
        return _lift(np.swapaxes(Vh, -1, -2) @ (inverse_S[..., :, None] * np.swapaxes(U, -1, -2)), A)

    @staticmethod
    def backward(ctx, grad):
        """PyTorch's pinv_backward."""
        (A,) = ctx.saved_tensors
        P = _Pinv.apply(A, ctx.atol, ctx.rtol)
        Ph, gradh = _mT(P), _mT(grad)
        m, n = A.shape[-2:]
        mm = _prims.matmul
        if m <= n:
            K = mm(gradh, P)
            KPh = mm(K, Ph)
            return -_mT(mm(P, K)) + KPh - mm(mm(A, P), KPh) + mm(mm(Ph, P), gradh - mm(K, A)), None, None
        K = mm(P, gradh)
        PhK = mm(Ph, K)
        return -_mT(mm(K, P)) + mm(mm(gradh - mm(A, K), P), Ph) + PhK - mm(mm(PhK, P), A), None, None


def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None):
    if A.dim() < 2 or not A.dtype.is_floating_point:
        raise RuntimeError(
            f"linalg.pinv({SCALAR_TYPE_NAME[A.dtype]}{{{list(A.shape)}}}): expected a tensor with 2 or more dimensions "
            "of float, double, cfloat or cdouble types"
        )
    return _with_out(_Pinv.apply(A, atol, rtol), out)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """The number of singular values above the tolerance (pinv's), as int64."""
    if A.dim() < 2:
        raise RuntimeError("torch.linalg.matrix_rank: The input tensor input must have at least 2 dimensions.")
    if not A.dtype.is_floating_point:
        raise RuntimeError("This function doesn't handle types other than float and double")
    S = np.linalg.svd(_prims.to_numpy(A.detach()), compute_uv=False)
    rank = (S > _tolerance(S, A.shape[-2:], atol, rtol)).sum(-1)
    return _with_out(_prims.from_numpy(np.asarray(rank, dtype=np.int64), share_memory=False), out)
