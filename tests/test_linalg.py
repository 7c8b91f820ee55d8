"""Linear algebra (fastgrad.linalg, and the module's addmm, einsum, det, ...): errors, LinAlgError,
named-tuple results, cdist (which has no second derivative) and torch.linalg under the alias, against
PyTorch. Values, gradients, second derivatives and node names of the other ops are their op cases'
(tests/op_cases.py: test_ops.py, test_higher_order.py)."""

import numpy as np
import pytest

from oracle_helpers import same_error, same_on_both
from op_helpers import gradcheck_for

RNG = np.random.default_rng(13)
SQUARE = RNG.standard_normal((2, 3, 3))
WIDE = RNG.standard_normal((3, 4))


def spd(m, a):
    return a @ a.transpose(-2, -1) + m.eye(a.shape[-1], dtype=a.dtype)


ERRORS = [
    lambda m: m.addmm(m.ones(3, 2), m.ones(3, 4), m.ones(5, 2)),
    lambda m: m.addmm(m.ones(3, 2), m.ones(4), m.ones(4, 2)),
    lambda m: m.addmv(m.ones(2), m.ones(3, 4), m.ones(4)),
    lambda m: m.addr(m.ones(3, 4), m.ones(3, 1), m.ones(4)),
    lambda m: m.baddbmm(m.ones(2, 3, 2), m.ones(2, 3, 4), m.ones(2, 5, 2)),
    lambda m: m.addbmm(m.ones(3, 2), m.ones(2, 3, 4), m.ones(3, 4, 2)),
    lambda m: m.vdot(m.ones(3, 1), m.ones(3)),
    lambda m: m.inner(m.ones(3), m.ones(4)),
    lambda m: m.tensordot(m.ones(3, 4), m.ones(5, 2), dims=1),
    lambda m: m.tensordot(m.ones(3, 4), m.ones(4, 2), dims=-1),
    lambda m: m.einsum("ij,jk->ik", m.ones(3, 4), m.ones(5, 2)),
    lambda m: m.einsum("ij,jk", m.ones(3, 4)),
    lambda m: m.einsum("ij->k", m.ones(3, 4)),
    lambda m: m.einsum("ijk", m.ones(3, 4)),
    lambda m: m.einsum("ii", m.ones(3, 4)),
    lambda m: m.cross(m.ones(3, 2), m.ones(3, 2), dim=1),
    lambda m: m.cdist(m.ones(3, 2), m.ones(4, 3)),
    lambda m: m.cdist(m.ones(3), m.ones(4, 3)),
    lambda m: m.cdist(m.ones(3, 2), m.ones(4, 2), p=-1),
    lambda m: m.linalg.inv(m.ones(3, 4)),
    lambda m: m.linalg.inv(m.ones(3)),
    lambda m: m.linalg.det(m.eye(3, dtype=m.int64)),
    lambda m: m.linalg.solve(m.eye(3), m.ones(4)),
    lambda m: m.linalg.cholesky(m.ones(2, 3)),
    lambda m: m.linalg.matrix_norm(m.ones(3)),
    lambda m: m.linalg.matrix_norm(m.ones(3, 3), ord=3),
    lambda m: m.linalg.vector_norm(m.ones(3), ord="fro"),
    lambda m: m.linalg.svd(m.ones(3)),
    lambda m: m.svd(m.ones(3)),
    lambda m: m.linalg.eigvalsh(m.ones(2, 3)),
    lambda m: m.linalg.eigh(m.ones(2, 2, dtype=m.int64)),
    lambda m: m.linalg.pinv(m.ones(3)),
    lambda m: m.linalg.matrix_rank(m.ones(3)),
    lambda m: m.linalg.matrix_norm(m.ones(2, 2, dtype=m.int64), dtype=m.float64),
    lambda m: m.linalg.norm(m.ones(3), "fro"),
    lambda m: m.linalg.cross(m.ones(2, 3), m.ones(3)),
    lambda m: m.linalg.vector_norm(m.arange(3)),
    lambda m: m.logdet(m.ones(2, 3)),
    lambda m: m.cdist(m.ones(2, 2, dtype=m.int64), m.ones(2, 2)),
    lambda m: m.linalg.cross(m.ones(3, dtype=m.float64), m.ones(3)),
    lambda m: m.linalg.solve(m.ones(2, 2), m.ones(2, dtype=m.float64)),
    lambda m: m.addmm(m.ones(2, 2), m.ones(2, 3, dtype=m.float64), m.ones(3, 2)),
    lambda m: m.addmm(m.ones(2, 2, dtype=m.int64), m.ones(2, 3), m.ones(3, 2)),
    lambda m: m.addmm(m.ones(2), m.ones(2, 3), m.ones(4, 5)),
    lambda m: m.addmm(m.ones(5), m.ones(2, 3), m.ones(3, 4)),
    lambda m: m.addmm(m.ones(2, 3, 4), m.ones(2, 3), m.ones(3, 4)),
    lambda m: m.addmm(m.ones(2), m.ones(3, 2), m.ones(2)),
    lambda m: m.addmm(m.ones(2, 2, dtype=m.bool), m.ones(2, 2, dtype=m.bool), m.ones(2, 2, dtype=m.bool)),
    lambda m: m.addmv(m.ones(2), m.ones(2, 3, dtype=m.float64), m.ones(3, dtype=m.float64)),
    lambda m: m.baddbmm(m.ones(1, 2, 2), m.ones(1, 2, 3, dtype=m.float64), m.ones(1, 3, 2, dtype=m.float64)),
    lambda m: m.vdot(m.ones(2), m.ones(2, dtype=m.float64)),
    lambda m: m.tensordot(m.ones(2), m.ones(2, dtype=m.float64), 1),
    lambda m: m.einsum("i,i", m.ones(2), m.ones(2, dtype=m.float64)),
    lambda m: m.cdist(m.ones(2, 2), m.ones(2, 2, dtype=m.float64)),
    lambda m: m.linalg.solve(m.eye(3), m.ones(3), left=False),
    lambda m: m.linalg.solve(m.eye(1).expand(2, 1, 1), m.ones(2, 1), left=False),
    lambda m: m.linalg.multi_dot([m.ones(3)]),
    lambda m: m.linalg.multi_dot([m.ones(3), m.ones(3), m.ones(3)]),
    lambda m: m.linalg.multi_dot([m.ones(2, 3), m.ones(4, 2)]),
    lambda m: m.linalg.qr(m.ones(3, 3), mode="x"),
    lambda m: m.linalg.qr(m.ones(3, 2, requires_grad=True), mode="r").R.sum().backward(),
    lambda m: m.linalg.qr(m.ones(3, 2, requires_grad=True), mode="complete").R.sum().backward(),
]


@pytest.mark.parametrize("program", ERRORS)
def test_errors_as_pytorch(fg, torch, program):
    same_error(fg, torch, program)


def test_addmm_scalars_as_pytorch(fg, torch):
    """beta = 0 ignores the input (NaN too) and alpha = 0 the product (inf too), as PyTorch's BLAS
    addmm; integer tensors take beta and alpha truncated to integers; a 16-bit float adds in float32."""

    def program(m):
        ones = m.ones(2, 3)
        return [
            m.addmm(m.full((2, 2), float("nan")), ones, m.ones(3, 2), beta=0),
            m.addmm(m.ones(2, 2), m.full((2, 3), float("inf")), m.ones(3, 2), alpha=0, beta=2),
            m.addmm(m.ones(2, 2), ones, m.ones(3, 2), alpha=0, beta=0),
            m.addmm(m.ones(2, dtype=m.int64), ones.long(), m.ones(3, 2, dtype=m.int64), beta=0.5, alpha=2.9),
            m.addmm(m.full((2, 1), 3, dtype=m.int64), ones.long() * 2**62, m.ones(3, 2, dtype=m.int64)),  # wraps
            m.addmm(m.ones(1, 2, dtype=m.bfloat16), ones.bfloat16(), m.ones(3, 2, dtype=m.bfloat16), alpha=0.5),
            m.addmm(m.tensor(1.5), m.ones(2, 0), m.ones(0, 2), beta=2),
        ]

    same_on_both(fg, torch, program)
    with pytest.raises(TypeError, match="addmm"):  # PyTorch's TypeError lists its overloads
        fg.addmm(fg.ones(2), fg.ones(2, 2), fg.ones(2, 2), beta="x")


def test_addmm_gradients_as_pytorch(fg, torch):
    """The input's gradient is summed back to its broadcast shape and scaled by beta; the operands'
    are scaled by alpha, the transposed one (a linear layer's W.t()) in its own layout."""
    upstream = RNG.standard_normal((3, 3))

    def program(m):
        input = m.tensor(WIDE[:, :1], requires_grad=True)
        mat1 = m.tensor(WIDE[:, 1:3], requires_grad=True)
        weight = m.tensor(WIDE[:, 2:], requires_grad=True)
        out = m.addmm(input, mat1, weight.t(), beta=0.5, alpha=-2)
        out.backward(m.tensor(upstream))
        return [out.grad_fn.name(), out, input.grad, mat1.grad, weight.grad, weight.grad.is_contiguous()]

    same_on_both(fg, torch, program)


SINGULAR = [  # PyTorch's LinAlgError, a RuntimeError, with its message
    lambda m: m.linalg.inv(m.ones(3, 3)),
    lambda m: m.inverse(m.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [2.0, 4.0]]])),
    lambda m: m.linalg.solve(m.ones(3, 3), m.ones(3)),
    lambda m: m.linalg.cholesky(-m.eye(3)),
    lambda m: m.linalg.cholesky(m.stack([m.eye(2), m.tensor([[1.0, 2.0], [2.0, 1.0]])])),
]


@pytest.mark.parametrize("program", SINGULAR)
def test_singular_matrices_raise_linalg_error(fg, torch, program):
    with pytest.raises(torch.linalg.LinAlgError) as theirs:
        program(torch)
    with pytest.raises(fg.linalg.LinAlgError) as ours:
        program(fg)
    assert isinstance(ours.value, RuntimeError)
    assert str(ours.value) == str(theirs.value)


def test_named_tuple_results(fg, torch):
    def program(m):
        a = m.tensor(SQUARE[0])
        results = [
            (m.linalg.slogdet(a), ["sign", "logabsdet"]),
            (m.slogdet(a), ["sign", "logabsdet"]),
            (m.linalg.eigh(spd(m, a)), ["eigenvalues", "eigenvectors"]),
            (m.linalg.svd(m.tensor(WIDE)), ["U", "S", "Vh"]),
            (m.svd(m.tensor(WIDE), some=False), ["U", "S", "V"]),
        ]
        return [
            (type(r).__name__, len(r), [tuple(getattr(r, f).shape) for f in fields], tuple(r[0].shape))
            for r, fields in results
        ]

    same_on_both(fg, torch, program)


def test_decomposition_values(fg, torch):
    """What does not depend on the signs LAPACK picks for singular vectors and eigenvectors, in float32."""

    def program(m):
        a = m.tensor(SQUARE, dtype=m.float32)
        u, s, vh = m.linalg.svd(a)
        w, v = m.linalg.eigh(spd(m, a))
        return [
            (u * s.unsqueeze(-2)) @ vh,
            (v * w.unsqueeze(-2)) @ v.transpose(-2, -1),
            m.linalg.cholesky(spd(m, a)),
            m.linalg.norm(a, dim=(1, 2)),
            m.linalg.det(a),
        ]

    for ours, theirs in zip(program(fg), program(torch)):
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)


def test_linalg_under_the_alias():
    """`import torch; torch.linalg.det` runs fastgrad's when fastgrad stands in for torch (a
    subprocess: the alias is process-wide)."""
    import subprocess
    import sys

    script = (
        "import fastgrad; fastgrad.alias_torch(); import torch, torch.linalg; "
        "from torch.linalg import det; error = torch.linalg.LinAlgError; "
        "print(torch.linalg.det(torch.eye(2)).item(), det is fastgrad.linalg.det, error.__mro__[1].__name__)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1.0", "True", "RuntimeError"]


def test_det_gradient_of_a_singular_matrix(fg, torch):
    """The cofactors of a singular matrix, from its SVD: PyTorch's gradient when it records the
    graph (its first-order gradient without create_graph is zero there, which finite differences refute)."""

    def program(m):
        x = m.tensor(
            [[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]], [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 2.0]]],
            dtype=m.float64,
            requires_grad=True,
        )
        (grad,) = m.autograd.grad(m.linalg.det(x).sum(), x, create_graph=True)
        return np.round(grad.detach().numpy(), 10).tolist()

    assert program(fg) == program(torch)


CDIST = [  # p, shapes of x1 and x2
    (2.0, (3, 2), (4, 2)),
    (1.0, (2, 3, 2), (4, 2)),
    (3.0, (3, 2), (1, 4, 2)),
    (float("inf"), (3, 2), (4, 2)),
    (0.0, (3, 2), (4, 2)),
]


@pytest.mark.parametrize("p,shape1,shape2", CDIST)
def test_cdist_as_pytorch(fg, torch, p, shape1, shape2):
    """Values, gradients and node names; the gradient's own derivative is PyTorch's NotImplementedError
    (cdist has no double backward), so cdist is not among the op cases."""
    rng = np.random.default_rng(int(p) if p < 10 else 10)
    a, b = rng.standard_normal(shape1), rng.standard_normal(shape2)
    a[0, ..., 0] = b[..., 0, 0]  # a zero difference, where the gradient of |x|^p is taken as 0

    def program(m):
        x1, x2 = m.tensor(a, requires_grad=True), m.tensor(b, requires_grad=True)
        distances = m.cdist(x1, x2, p=p)
        grads = m.autograd.grad((distances * distances.detach()).sum(), (x1, x2), create_graph=True)
        with pytest.raises(NotImplementedError, match="the derivative for '_cdist_backward' is not implemented."):
            m.autograd.grad(grads[0].sum(), x1)
        names = [distances.grad_fn.name(), grads[0].grad_fn.name()]
        return [np.round(t.detach().numpy(), 10).tolist() for t in (distances, *grads)] + names

    assert program(fg) == program(torch)


def test_cdist_gradcheck(fg):
    x1 = fg.tensor(RNG.standard_normal((2, 3, 2)), requires_grad=True)
    x2 = fg.tensor(RNG.standard_normal((4, 2)), requires_grad=True)
    assert gradcheck_for(fg)(lambda a, b: fg.cdist(a, b, p=1.5), (x1, x2))


def test_tensordot_broadcasts_size_one_contracted_dims(fg, torch):
    """PyTorch sums the other operand over a contracted dim where one side has size 1."""

    def program(m):
        a = m.tensor([[0.5], [-1.0], [2.0]], requires_grad=True)
        b = m.tensor([[0.1, -0.2], [0.3, 0.4]], requires_grad=True)
        results = [m.tensordot(a, b, dims=1), m.tensordot(b, a.reshape(1, 3), dims=1)]
        sum(r.sum() for r in results).backward()
        return results, a.grad, b.grad

    same_on_both(fg, torch, program)
