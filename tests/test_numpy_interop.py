"""numpy values next to tensors: numpy scalars and arrays as operands, np.array / np.asarray of a
tensor, as_tensor and from_numpy sharing memory, and numpy values inside tensor() data."""
import operator
import warnings

import numpy as np
import pytest

from oracle_helpers import assert_same, plain

OPERATORS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow, operator.matmul,
             operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge]
NUMPY_OPERANDS = {
    "float64": np.float64(0.5), "float32": np.float32(0.5), "int64": np.int64(2), "int32": np.int32(2),
    "bool_": np.bool_(True), "array_float64": np.array([0.5, 2.0]), "array_int64": np.array([1, 2]),
    "array_0d": np.array(2.0),
}


def _outcome(lib, op, operand, numpy_on_left, tensor):
    """What `operand op tensor` (or `tensor op operand`) gives: the result (type, values, dtype, flags)
    and the gradient it sends to the tensor, or the exception's type."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # PyTorch's __array__ has no `copy`
            result = op(operand, tensor) if numpy_on_left else op(tensor, operand)
    except Exception as e:
        return type(e).__name__
    if not isinstance(result, lib.Tensor):
        return type(result).__name__, np.asarray(result).tolist()
    grad = None
    if result.requires_grad:
        result.sum().backward()
        grad = tensor.grad.tolist()
    return plain(result), grad


@pytest.mark.parametrize("numpy_on_left", [True, False], ids=["numpy_left", "numpy_right"])
@pytest.mark.parametrize("operand", NUMPY_OPERANDS.values(), ids=NUMPY_OPERANDS.keys())
@pytest.mark.parametrize("op", OPERATORS, ids=[op.__name__ for op in OPERATORS])
def test_numpy_operand_gives_pytorchs_result(fg, torch, op, operand, numpy_on_left):
    if numpy_on_left and op is operator.truediv and isinstance(operand, np.ndarray):
        pytest.skip("PyTorch divides as tensor.reciprocal() * ndarray: not matched (see the report)")
    if op is operator.eq and isinstance(operand, np.ndarray):
        pytest.skip("PyTorch's == reads an ndarray as a tensor: not matched (see the report)")
    for make in (lambda lib: lib.tensor([1.5, 3.0], requires_grad=True), lambda lib: lib.tensor([1.5, 3.0]),
                 lambda lib: lib.tensor([3, 4])):
        assert_same(_outcome(fg, op, operand, numpy_on_left, make(fg)),
                    _outcome(torch, op, operand, numpy_on_left, make(torch)))


def test_numpy_scalar_on_the_left_keeps_the_gradient(fg, torch):
    def grad(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        ((x ** 2).sum() + np.float64(0.5) * x.sum()).backward()
        return x.grad.tolist()

    assert grad(fg) == grad(torch)


def test_array_of_a_tensor_that_requires_grad_is_refused(fg, torch):
    for lib in (fg, torch):
        with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
            np.asarray(lib.tensor([1.0], requires_grad=True))


def test_np_array_copies_and_np_asarray_shares(fg):
    t = fg.tensor([1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy 2 warns of an __array__ without `copy`
        copied, shared, converted = np.array(t), np.asarray(t), np.asarray(t, dtype=np.float64)
    copied[0] = 7.0
    assert t.tolist() == [1.0, 2.0]
    shared[0] = 9.0
    assert t.tolist() == [9.0, 2.0]
    assert converted.dtype == np.float64 and converted.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError):
        np.array(t, dtype=np.float64, copy=False)  # a dtype conversion cannot avoid the copy
