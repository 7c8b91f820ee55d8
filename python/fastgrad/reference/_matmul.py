"""Matrix products. dot, mv, mm, bmm and addmm are the recorded primitives, each with its own
backward; matmul applies PyTorch's rank rules on top of them."""

import itertools
import operator
from array import array

from .._types import SCALAR_TYPE_NAME, bool as bool_, compute_type, int64, float32
from ._autograd import Function, no_grad
from ._inplace import add_, squeeze_
from ._storage import TYPECODE, cast_scalar
from ._shape import expand, reshape, squeeze, t, transpose, unsqueeze, view, UnsafeViewBackward0
from ._tensor import broadcast_shapes, element_offsets, new_tensor, numel_of, read

_C_TYPE_NAME = {bool_: "bool", int64: "long int", float32: "float"}


def _c_type_name(dtype):
    return _C_TYPE_NAME.get(dtype, "double")


def _require_same_dtype(a, b):
    if a._dtype is not b._dtype:
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {_c_type_name(a._dtype)} != {_c_type_name(b._dtype)}"
        )


def _require_not_bool(a, kernel, work=1):
    """PyTorch has no bool matrix products; `kernel` is the name its error gives. Except dot, its
    products return early (with zeros) when there is nothing to multiply: `work` = n * m * k."""
    if a._dtype is bool_ and work != 0:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def _rows(x, strides, batch, rows, cols):
    """x read as `batch` matrices of rows x cols with (batch, row, col) strides: a list of rows per matrix."""
    values = [x._storage.data[i] for i in element_offsets((batch, rows, cols), strides, x._offset)]
    return [[values[r * cols : (r + 1) * cols] for r in range(p * rows, (p + 1) * rows)] for p in range(batch)]


def _product(a, a_strides, b, b_strides, batch, n, k, m, out_shape, epilogue=None):
    """out[p] = a[p] @ b[p] with a read as (batch, n, k) and b as (batch, k, m) through the given
    strides, in the core's i-k-j order: row i of the result accumulates a[i, q] * b[q, :] over q,
    each product and partial sum taken in the operands' own type (so float32 rounds every step).
    `epilogue(values, in_type)`: what addmm does to the complete products (row-major) before they
    are stored."""
    in_type = (lambda values: array(TYPECODE[a._dtype], values)) if a._dtype.is_floating_point else list
    out = []
    for a_rows, b_rows in zip(_rows(a, a_strides, batch, n, k), _rows(b, b_strides, batch, k, m)):
        for row in a_rows:
            total = in_type([0] * m)
            for a_iq, b_row in zip(row, b_rows):
                total = in_type(map(operator.add, total, in_type(map(operator.mul, itertools.repeat(a_iq), b_row))))
            out.extend(total)
    return new_tensor(epilogue(out, in_type) if epilogue else out, out_shape, a._dtype)


def _dims_str(x):
    return f"{x._shape[0]}x{x._shape[1]}"


class Product(Function):
    """Every product's backward reads both operands."""

    def forward(self, a, b):
        self.check(a, b)
        self.save(a)
        self.save(b)
        return self.compute(a, b)


class DotBackward0(Product):
    def check(self, a, b):
        if a.dim() != 1 or b.dim() != 1:
            raise RuntimeError(f"1D tensors expected, but got {a.dim()}D and {b.dim()}D tensors")
        n, m = a._shape[0], b._shape[0]
        if n != m:
            raise RuntimeError(
                f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to have the same "
                f"number of elements, but got {n} and {m} elements respectively"
            )
        if a._dtype is not b._dtype:
            raise RuntimeError(
                f"dot : expected both vectors to have same dtype, but found {_c_type_name(a._dtype)} "
                f"and {_c_type_name(b._dtype)}"
            )
        _require_not_bool(a, "dot")

    def compute(self, a, b):
        return _product(a, (0, 0, a._strides[0]), b, (0, b._strides[0], 0), 1, 1, a._shape[0], 1, ())

    def backward(self, g):
        return (
            g * self.unpack(1) if self.needs_input_grad(0) else None,
            g * self.unpack(0) if self.needs_input_grad(1) else None,
        )


class MvBackward0(Product):
    def check(self, a, b):
        if a.dim() != 2 or b.dim() != 1:
            raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a.dim()}, {b.dim()}")
        if a._shape[1] != b._shape[0]:
            raise RuntimeError(f"size mismatch, got input ({a._shape[0]}), mat ({_dims_str(a)}), vec ({b._shape[0]})")
        _require_same_dtype(a, b)
        _require_not_bool(a, "addmv_impl_cpu", a.numel())

    def compute(self, a, b):
        return _product(a, (0, *a._strides), b, (0, b._strides[0], 0), 1, *a._shape, 1, a._shape[:1])

    def backward(self, g):
        return (
            mm(unsqueeze(g, 1), unsqueeze(self.unpack(1), 0)) if self.needs_input_grad(0) else None,
            mv(t(self.unpack(0)), g) if self.needs_input_grad(1) else None,
        )


class MmBackward0(Product):
    def check(self, a, b):
        if a.dim() != 2:
            raise RuntimeError("self must be a matrix")
        if b.dim() != 2:
            raise RuntimeError("mat2 must be a matrix")
        if a._shape[1] != b._shape[0]:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_dims_str(a)} and {_dims_str(b)})")
        _require_same_dtype(a, b)
        _require_not_bool(a, "addmm_impl_cpu_", a.numel() * b._shape[1])

    def compute(self, a, b):
        return _product(a, (0, *a._strides), b, (0, *b._strides), 1, *a._shape, b._shape[1], (a._shape[0], b._shape[1]))

    def backward(self, g):
        return (
            mm(g, t(self.unpack(1))) if self.needs_input_grad(0) else None,
            mm(t(self.unpack(0)), g) if self.needs_input_grad(1) else None,
        )


class AddmmBackward0(Function):
    """beta * input + alpha * (mat1 @ mat2), input broadcast to the product's shape, as one node
    (F.linear's op). The core adds in the product's epilogue; here the same steps after the products:
    alpha * c + beta * x, each rounded to the compute type (so beta = alpha = 1 is exactly c + x);
    beta = 0 ignores the input (NaN too) and alpha = 0 the product, as PyTorch's addmm."""

    def forward(self, input, mat1, mat2, beta, alpha):
        for name, mat in (("mat1", mat1), ("mat2", mat2)):
            if mat.dim() != 2:
                raise RuntimeError(f"{name} must be a matrix, got {mat.dim()}-D tensor")
        if mat1._shape[1] != mat2._shape[0]:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_dims_str(mat1)} and {_dims_str(mat2)})")
        for first, second, name in ((mat1, mat2, "mat1"), (input, mat2, "self")):
            if first._dtype is not second._dtype:
                kinds = SCALAR_TYPE_NAME[first._dtype], SCALAR_TYPE_NAME[second._dtype]
                raise RuntimeError(f"{name} and mat2 must have the same dtype, but got {kinds[0]} and {kinds[1]}")
        (n, k), m = mat1._shape, mat2._shape[1]
        with no_grad():
            addend = read(expand(input, (n, m)))
        _require_not_bool(mat1, "addmm_impl_cpu_", n * k * m)
        self.save(mat1)
        self.save(mat2)
        self.beta, self.alpha = beta, alpha
        compute = compute_type(mat1._dtype)
        beta, alpha = cast_scalar(beta, compute), cast_scalar(alpha, compute)

        def scaled_add(values, in_type):
            product = in_type(alpha * c for c in values)
            if beta == 0:
                return product
            scaled_input = in_type(beta * x for x in addend)
            return scaled_input if alpha == 0 else in_type(map(operator.add, product, scaled_input))

        return _product(mat1, (0, *mat1._strides), mat2, (0, *mat2._strides), 1, n, k, m, (n, m), scaled_add)

    def backward(self, g):
        def scaled(x, factor):
            return x if factor == 1 else x * factor

        mat1, mat2 = self.unpack(0), self.unpack(1)
        return (
            self.reduce(0, scaled(g, self.beta)) if self.needs_input_grad(0) else None,
            scaled(mm(g, t(mat2)), self.alpha) if self.needs_input_grad(1) else None,
            scaled(mm(t(mat1), g), self.alpha) if self.needs_input_grad(2) else None,
        )


class BmmBackward0(Product):
    def check(self, a, b):
        if a.dim() != 3:
            raise RuntimeError("batch1 must be a 3D tensor")
        if b.dim() != 3:
            raise RuntimeError("batch2 must be a 3D tensor")
        if a._shape[0] != b._shape[0] or a._shape[2] != b._shape[1]:
            raise RuntimeError(
                f"Expected size for first two dimensions of batch2 tensor to be: [{a._shape[0]}, "
                f"{a._shape[2]}] but got: [{b._shape[0]}, {b._shape[1]}]."
            )
        _require_same_dtype(a, b)
        _require_not_bool(a, "bmm", a.numel() * b._shape[2])

    def compute(self, a, b):
        return _product(a, a._strides, b, b._strides, *a._shape, b._shape[2], (*a._shape[:2], b._shape[2]))

    def backward(self, g):
        return (
            bmm(g, transpose(self.unpack(1), 1, 2)) if self.needs_input_grad(0) else None,
            bmm(transpose(self.unpack(0), 1, 2), g) if self.needs_input_grad(1) else None,
        )


def dot(a, b):
    return DotBackward0.run(a, b)


def mv(a, b):
    return MvBackward0.run(a, b)


def mm(a, b):
    return MmBackward0.run(a, b)


def bmm(a, b):
    return BmmBackward0.run(a, b)


def addmm(input, mat1, mat2, beta, alpha):
    return AddmmBackward0.run(input, mat1, mat2, beta=beta, alpha=alpha)


def linear(input, weight, bias):
    """F.linear as the core's linear routes it (ATen's): with a bias that is a vector once squeezed,
    one addmm for a 2-D input, another rank (contiguous, with a contiguous bias) viewed as rows
    around it; without a bias (None) input @ weight^T; otherwise that product, then the bias added
    in place."""
    if input.dim() == 0 or weight.dim() == 0:
        raise RuntimeError(
            f"both arguments to linear need to be at least 1D, but they are {input.dim()}D and {weight.dim()}D"
        )
    if bias is None:
        return matmul(input, t(weight))
    if input.dim() == 2:
        return addmm(bias, input, t(weight), 1, 1)
    vector_bias = bias.dim() == 1 or sum(size != 1 for size in bias.shape) == 1  # bias.squeeze().dim() == 1
    if not (vector_bias and input.is_contiguous() and bias.is_contiguous()):
        return add_(matmul(input, t(weight)), bias)
    *leading, width = input.shape
    out = addmm(bias, view(input, [numel_of(leading), width]), t(weight), 1, 1)  # not -1: a dim may be 0
    return view(out, [*leading, out.shape[1]])


def _unsafe_view(x, shape):
    return UnsafeViewBackward0.run(x, shape=shape)


def matmul(a, b):
    """PyTorch's matmul: vectors are promoted to matrices and the extra dim removed afterwards; batch
    dims broadcast, and the product runs as one bmm over the flattened batch."""
    if a.dim() == 0 or b.dim() == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {a.dim()}D and {b.dim()}D")
    ranks = (a.dim(), b.dim())
    if ranks == (1, 1):
        return dot(a, b)
    if ranks == (2, 1):
        return mv(a, b)
    if ranks == (1, 2):
        return squeeze_(mm(unsqueeze(a, 0), b), [0], False)  # in place, as PyTorch (SqueezeBackward4)
    if ranks == (2, 2):
        return mm(a, b)
    if a.dim() >= 3 and b.dim() <= 2:  # (..., n, k) @ (k, m): one mm over the folded leading dims
        folded = reshape(a, (numel_of(a._shape[:-1]), a._shape[-1]))  # not -1: k may be 0
        if b.dim() == 1:
            return _unsafe_view(squeeze(mm(folded, unsqueeze(b, 1)), [1], False), a._shape[:-1])
        return _unsafe_view(mm(folded, b), a._shape[:-1] + b._shape[1:])
    a3 = unsqueeze(a, 0) if a.dim() == 1 else a
    b3 = unsqueeze(b, 1) if b.dim() == 1 else b
    (n, k), (k2, m) = a3._shape[-2:], b3._shape[-2:]
    if k != k2:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: "
            f"[{numel_of(a3._shape[:-2])}, {k}] but got: [{numel_of(b3._shape[:-2])}, {k2}]."
        )
    batch = broadcast_shapes(a3._shape[:-2], b3._shape[:-2])

    def batched(x, rows, cols):
        return reshape(expand(x, batch + (rows, cols)), (numel_of(batch), rows, cols))

    out = bmm(batched(a3, n, k), batched(b3, k, m))
    return _unsafe_view(out, batch + ((n,) if a.dim() > 1 else ()) + ((m,) if b.dim() > 1 else ()))
