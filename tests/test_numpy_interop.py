"""numpy values next to tensors: numpy scalars and arrays as operands, np.array / np.asarray of a
tensor, as_tensor and from_numpy sharing memory, and numpy values inside tensor() data."""

import operator
import warnings

import numpy as np
import pytest

from oracle_helpers import assert_same, plain

OPERATORS = [
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.pow,
    operator.matmul,
    operator.lt,
    operator.le,
    operator.eq,
    operator.ne,
    operator.gt,
    operator.ge,
    operator.floordiv,
    operator.mod,
    operator.and_,
    operator.or_,
    operator.xor,
]
NUMPY_OPERANDS = {
    "float64": np.float64(0.5),
    "float32": np.float32(0.5),
    "int64": np.int64(2),
    "int32": np.int32(2),
    "bool_": np.bool_(True),
    "array_float64": np.array([0.5, 2.0]),
    "array_int64": np.array([1, 2]),
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
        try:
            result.sum().backward()
            grad = tensor.grad.tolist()
        except RuntimeError as e:  # floor_divide has no derivative
            grad = str(e)
    return plain(result), grad


@pytest.mark.parametrize("numpy_on_left", [True, False], ids=["numpy_left", "numpy_right"])
@pytest.mark.parametrize("operand", NUMPY_OPERANDS.values(), ids=NUMPY_OPERANDS.keys())
@pytest.mark.parametrize("op", OPERATORS, ids=[op.__name__ for op in OPERATORS])
def test_numpy_operand_gives_pytorchs_result(fg, torch, op, operand, numpy_on_left):
    for make in (
        lambda lib: lib.tensor([1.5, 3.0], requires_grad=True),
        lambda lib: lib.tensor([1.5, 3.0]),
        lambda lib: lib.tensor([3, 4]),
    ):
        assert_same(
            _outcome(fg, op, operand, numpy_on_left, make(fg)), _outcome(torch, op, operand, numpy_on_left, make(torch))
        )


def test_numpy_scalar_on_the_left_keeps_the_gradient(fg, torch):
    def grad(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        ((x**2).sum() + np.float64(0.5) * x.sum()).backward()
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


def test_as_tensor_of_a_tensor_is_that_tensor_or_a_differentiable_conversion(fg, torch):
    def program(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        same, same_dtype = lib.as_tensor(x), lib.as_tensor(x, dtype=lib.float32)
        converted = lib.as_tensor(x, dtype=lib.float64)
        (converted * 3).sum().backward()
        return same is x, same_dtype is x, converted, converted.grad_fn.name(), x.grad

    assert_same(plain(program(fg)), plain(program(torch)))


def test_as_tensor_of_an_ndarray_shares_its_memory_when_the_dtype_allows(fg, torch):
    def program(lib):
        shared, array = {}, np.array([1.0, 2.0])
        shared["float64"] = lib.as_tensor(array)
        converted = lib.as_tensor(array, dtype=lib.float32)
        ints = np.array([1, 2])
        shared["int64"] = lib.as_tensor(ints)
        array[0], ints[0] = 5.0, 5
        return shared["float64"], shared["int64"], converted

    assert_same(plain(program(fg)), plain(program(torch)))


def _read_only_arrays(tmp_path):
    np.save(tmp_path / "values.npy", np.arange(4.0))
    return {
        "frombuffer": np.frombuffer(np.arange(4.0).tobytes(), dtype=np.float64),
        "memory_map": np.load(tmp_path / "values.npy", mmap_mode="r"),
        "broadcast_to": np.broadcast_to(np.array([1.0, 2.0]), (3, 2)),
    }


def test_from_numpy_takes_a_read_only_array_with_pytorchs_warning(fg, torch, tmp_path):
    ours, theirs = _read_only_arrays(tmp_path), _read_only_arrays(tmp_path)
    for name, array in ours.items():
        with pytest.warns(UserWarning, match="The given NumPy array is not writable"):
            t = fg.from_numpy(array)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch warns once per process
            expected = torch.from_numpy(theirs[name])
        assert (t.tolist(), t.stride()) == (expected.tolist(), expected.stride()), name
        # PyTorch shares the read-only memory (a write then crashes on the memory map); fastgrad
        # takes a copy, so that writing through the tensor is safe and leaves the array as it was.
        before = array.tolist()
        t[(0,) * t.dim()] = 9.0
        assert array.tolist() == before, name


TENSOR_DATA = {
    "numpy_float64_and_float": lambda lib: [np.float64(1.0), 2.0],
    "numpy_float32_and_float": lambda lib: [np.float32(1.0), 2.0],
    "numpy_int32_and_int": lambda lib: [np.int32(1), 2],
    "numpy_int64_and_float": lambda lib: [np.int64(1), 2.0],
    "numpy_bool_and_bool": lambda lib: [np.bool_(True), False],
    "arrays_float64": lambda lib: [np.array([1.0, 2.0]), np.array([3.0, 4.0])],
    "arrays_float32_and_float64": lambda lib: [np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0])],
    "array_int64_and_floats": lambda lib: [np.array([1, 2]), [3.0, 4]],
    "empty_arrays_float64": lambda lib: [np.array([]), np.array([])],
    "zero_d_float64_tensor_and_int": lambda lib: [lib.tensor(2.0, dtype=lib.float64), 1],
    "numpy_float64_and_zero_d_tensor": lambda lib: [np.float64(1.0), lib.tensor(2.0)],
}


@pytest.mark.parametrize("data", TENSOR_DATA.values(), ids=TENSOR_DATA.keys())
def test_tensor_infers_the_dtype_of_numpy_values_as_pytorch(fg, torch, data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # arrays in a list warn (see below; PyTorch once per process)
        assert_same(plain(fg.tensor(data(fg))), plain(torch.tensor(data(torch))))


def test_tensor_of_a_list_of_arrays_warns_it_is_slow(fg):
    with pytest.warns(UserWarning, match="Creating a tensor from a list of numpy.ndarrays is extremely slow"):
        fg.tensor([[1, 2], np.array([3, 4])])


def test_tensor_refuses_a_0d_array_inside_a_list(fg, torch):
    for lib in (fg, torch):
        with pytest.raises(TypeError, match="len\\(\\) of unsized object"):
            lib.tensor([np.array(1.0), 2.0])
