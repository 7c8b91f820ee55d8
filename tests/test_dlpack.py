"""Tensors across libraries: DLPack both ways (numpy, PyTorch, JAX when installed), the array and buffer protocols
in tensor()/as_tensor()/frombuffer, and Tensor.__array_interface__, against PyTorch and numpy."""

import ctypes
import gc
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import BACKENDS
from oracle_helpers import plain, same_error

DTYPES = ["float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool"]


def reference_lacks(fg, dtype_name):
    """The pure-Python reference exports through numpy, which has no bfloat16 and gets a copy of its
    float16 (kept as float32 values): neither shares memory there."""
    if fg.__name__ == "fastgrad.reference" and dtype_name in ("float16", "bfloat16"):
        pytest.skip(f"the reference does not share {dtype_name} memory")


def strided_view(lib, dtype_name):
    """A 3x3 view with an offset and a column stride of 2 over a 4x6 tensor of `dtype_name`."""
    whole = lib.arange(24).reshape(4, 6) % 7
    return whole.to(getattr(lib, dtype_name))[1:, ::2]


# A capsule's DLManagedTensorVersioned up to its flags (dlpack.h): version, manager_ctx, deleter, flags.
class _VersionedHead(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("ctx", ctypes.c_void_p)]
    _fields_ += [("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = (ctypes.py_object, ctypes.c_char_p)
READ_ONLY, IS_COPIED = 1, 2


def versioned_head(capsule):
    return _VersionedHead.from_address(_get_pointer(capsule, b"dltensor_versioned"))


def capsule_name(capsule):
    return repr(capsule).split('"')[1]


# ---- fastgrad -> numpy, PyTorch, JAX


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_torch_reads_every_dtype_sharing_memory(fg, torch, dtype_name):
    reference_lacks(fg, dtype_name)
    ours = strided_view(fg, dtype_name)
    theirs = torch.from_dlpack(ours)
    assert plain(theirs) == plain(strided_view(torch, dtype_name))
    assert theirs.stride() == ours.stride()
    theirs[2, 1] = 1
    assert ours[2, 1].item() == 1


@pytest.mark.parametrize("dtype_name", [d for d in DTYPES if d != "bfloat16"])
def test_numpy_reads_every_dtype_sharing_memory(fg, dtype_name):
    reference_lacks(fg, dtype_name)
    ours = strided_view(fg, dtype_name)
    array = np.from_dlpack(ours)
    assert array.dtype == np.dtype(dtype_name)
    assert array.tolist() == ours.tolist()
    assert array.strides == tuple(s * array.itemsize for s in ours.stride())
    array[0, 0] = 1
    assert ours[0, 0].item() == 1


def test_consumer_outlives_the_producer(fg, torch):
    producer = fg.arange(6.0).reshape(2, 3)[:, 1:]
    array, theirs = np.from_dlpack(producer), torch.from_dlpack(producer)
    del producer
    gc.collect()
    fg.ones(1000)  # memory freed too early would be reused here
    assert array.tolist() == [[1.0, 2.0], [4.0, 5.0]]
    assert theirs.tolist() == [[1.0, 2.0], [4.0, 5.0]]


@pytest.mark.parametrize("max_version", [None, (0, 8), (1, 0), (1, 3), (2, 0)])
def test_capsule_form_follows_max_version(fg, torch, max_version):
    ours = fg.arange(3.0).__dlpack__(max_version=max_version)
    theirs = torch.arange(3.0).__dlpack__(max_version=max_version)
    assert capsule_name(ours) == capsule_name(theirs)
    if capsule_name(ours) == "dltensor_versioned":
        head = versioned_head(ours)
        assert (head.major, head.flags) == (1, 0)  # writable memory, not a copy


def test_copy_true_exports_a_flagged_copy(fg, torch):
    ours = fg.arange(3.0)
    capsule = ours.__dlpack__(max_version=(1, 0), copy=True)
    flags = versioned_head(capsule).flags
    assert flags & IS_COPIED and not flags & READ_ONLY
    theirs = torch.from_dlpack(capsule)
    theirs[0] = 9
    assert ours[0].item() == 0 and theirs.tolist() == [9.0, 1.0, 2.0]


def test_dlpack_device(fg, torch):
    assert fg.ones(1).__dlpack_device__() == torch.ones(1).__dlpack_device__()
    assert fg.utils.dlpack.DLDeviceType.kDLCPU == torch.utils.dlpack.DLDeviceType.kDLCPU == 1


@pytest.mark.parametrize(
    "program",
    [
        lambda lib: lib.ones(2, requires_grad=True).__dlpack__(),
        lambda lib: lib.ones(2).__dlpack__(stream=3),
        lambda lib: lib.ones(2).__dlpack__(stream="x"),
    ],
    ids=["requires_grad", "stream", "stream_type"],
)
def test_export_refusals(fg, torch, program):
    same_error(fg, torch, program)


def test_export_to_another_device_refuses(fg):
    with pytest.raises(BufferError):
        fg.ones(2).__dlpack__(dl_device=(2, 0))


# ---- numpy, PyTorch, JAX -> fastgrad


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_reads_torch_every_dtype_sharing_memory(fg, torch, dtype_name):
    reference_lacks(fg, dtype_name)
    theirs = strided_view(torch, dtype_name)
    ours = fg.from_dlpack(theirs)
    assert plain(ours) == plain(theirs)
    assert ours.stride() == torch.from_dlpack(theirs).stride()
    theirs[2, 1] = 1
    assert ours[2, 1].item() == 1


@pytest.mark.parametrize("dtype_name", [d for d in DTYPES if d != "bfloat16"])
def test_reads_numpy_every_dtype_sharing_memory(fg, torch, dtype_name):
    reference_lacks(fg, dtype_name)
    array = (np.arange(24).reshape(4, 6) % 7).astype(dtype_name)[1:, ::2]
    ours = fg.from_dlpack(array)
    assert plain(ours) == plain(torch.from_dlpack(array))
    array[0, 0] = 1
    assert ours[0, 0].item() == 1


def test_producer_outlives_its_consumer(fg, torch):
    theirs = torch.arange(12.0).reshape(3, 4)[1:, 1:]
    ours = fg.from_dlpack(theirs)
    del theirs
    gc.collect()
    torch.ones(1000)
    assert ours.tolist() == [[5.0, 6.0, 7.0], [9.0, 10.0, 11.0]]


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_unconsumed_capsule_releases_the_producer(fg, max_version):
    array = np.arange(3.0)
    before = sys.getrefcount(array)
    capsule = fg.from_numpy(array).__dlpack__(max_version=max_version)
    assert sys.getrefcount(array) > before  # the capsule holds the tensor's storage, which holds the array
    del capsule  # its destructor runs the deleter at once (no cycle for the collector to find)
    assert sys.getrefcount(array) == before


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_capsule_is_consumed_once(fg, torch, max_version):
    ours, theirs = fg.arange(3.0).__dlpack__(max_version=max_version), torch.arange(3.0).__dlpack__()
    assert fg.from_dlpack(ours).tolist() == torch.from_dlpack(theirs).tolist()
    assert capsule_name(ours) == "used_" + capsule_name(fg.arange(1.0).__dlpack__(max_version=max_version))
    same_error(fg, torch, lambda lib: lib.from_dlpack(ours if lib is fg else theirs))


def test_capsule_round_trip_with_torch_utils(fg, torch):
    capsule = fg.utils.dlpack.to_dlpack(fg.arange(4))
    assert capsule_name(capsule) == capsule_name(torch.utils.dlpack.to_dlpack(torch.arange(4)))
    assert torch.from_dlpack(capsule).tolist() == [0, 1, 2, 3]
    same_error(fg, torch, lambda lib: lib.from_dlpack(lib.arange(2).__dlpack__(), copy=True))
    same_error(fg, torch, lambda lib: lib.from_dlpack(5))


def test_read_only_memory_is_copied(fg):
    array = np.arange(3.0)
    array.flags.writeable = False
    ours = fg.from_dlpack(array)
    ours[0] = 9
    assert array.tolist() == [0.0, 1.0, 2.0] and ours.tolist() == [9.0, 1.0, 2.0]


def test_from_dlpack_copy(fg, torch):
    theirs = torch.arange(3.0)
    ours = fg.from_dlpack(theirs, copy=True)
    theirs[0] = 9
    assert ours.tolist() == [0.0, 1.0, 2.0]


def test_unsupported_dtype_and_negative_strides_refuse(fg):
    with pytest.raises(RuntimeError):
        fg.from_dlpack(np.zeros(3, np.uint16))
    with pytest.raises(ValueError):
        fg.from_dlpack(np.arange(3.0)[::-1])


JAX_BOTH_WAYS = """
import gc, importlib, sys
import jax.numpy as jnp
for name in sys.argv[1:]:
    fg = importlib.import_module(name)
    dtypes = ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"]
    for dtype in dtypes + ["bfloat16"] * (name == "fastgrad"):  # the reference reads capsules with numpy's
        theirs = jnp.arange(12).reshape(3, 4).astype(dtype)
        ours = fg.from_dlpack(theirs)  # zero-copy: the same memory
        assert repr(ours.dtype).split(".")[-1] == dtype and ours.stride() == (4, 1), (name, dtype)
        assert ours.tolist() == theirs.tolist(), (name, dtype)
        if name == "fastgrad":
            assert ours.data_ptr() == theirs.unsafe_buffer_pointer(), dtype
    ours = fg.arange(6.0).reshape(2, 3)
    for view in (ours, ours.t(), ours[1:]):  # JAX takes compact layouts: transposed ones, offsets
        theirs = jnp.from_dlpack(view)
        assert theirs.tolist() == view.tolist(), name
        if name == "fastgrad" and view.data_ptr() % 64 == 0:  # XLA copies memory it finds misaligned
            assert theirs.unsafe_buffer_pointer() == view.data_ptr()
    try:
        jnp.from_dlpack(fg.ones(2, requires_grad=True))
        raise AssertionError("exported a tensor that requires grad")
    except BufferError as error:
        assert "Can't export tensors that require gradient" in str(error)
    # each side's memory stays alive while the other holds it
    ours = fg.arange(1000.0)
    theirs = jnp.from_dlpack(ours)
    del ours
    gc.collect()
    assert float(theirs.sum()) == 499500.0
    theirs = jnp.arange(1000.0)
    ours = fg.from_dlpack(theirs)
    del theirs
    gc.collect()
    assert ours.sum().item() == 499500.0
"""


def test_jax_both_ways():
    """In a child process: JAX's threads would make the forks of the DataLoader tests unsafe in this one.
    JAX_ENABLE_X64: JAX's 64-bit dtypes."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed")
    env = dict(os.environ, JAX_ENABLE_X64="1", JAX_PLATFORMS="cpu")
    subprocess.run([sys.executable, "-c", JAX_BOTH_WAYS, *BACKENDS], check=True, env=env)


# ---- tensor(), as_tensor(), frombuffer


def test_tensor_copies_and_as_tensor_shares_a_torch_tensor(fg, torch):
    theirs = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    copied, shared = fg.tensor(theirs), fg.as_tensor(theirs)  # no warning: that is for the library's own tensors
    assert plain(copied) == plain(shared) == plain(torch.tensor(theirs.numpy()))
    theirs[0, 0] = 7
    assert copied[0, 0].item() == 0 and shared[0, 0].item() == 7
    assert plain(fg.as_tensor(theirs, dtype=fg.float64)) == plain(torch.as_tensor(theirs, dtype=torch.float64))


def test_tensor_of_its_own_tensor_warns_as_pytorch(fg, torch):
    messages = []
    for lib in (fg, torch):
        with pytest.warns(UserWarning) as caught:
            lib.tensor(lib.ones(1))
        messages.append(str(caught[0].message))
    assert messages[0] == messages[1]


def test_tensor_of_a_torch_tensor_that_requires_grad(fg, torch):
    with pytest.warns(UserWarning):
        expected = torch.tensor(torch.ones(2, requires_grad=True), dtype=torch.float64)
    assert plain(fg.tensor(torch.ones(2, requires_grad=True), dtype=fg.float64)) == plain(expected)


@pytest.mark.parametrize("make", [lambda: bytearray(b"\x01\xff"), lambda: memoryview(np.arange(3.0, dtype=np.float32))])
def test_buffers_are_sequences_of_numbers(fg, torch, make):
    assert plain(fg.tensor(make())) == plain(torch.tensor(make()))
    assert plain(fg.as_tensor(make())) == plain(torch.as_tensor(make()))


def test_bytes_are_refused_as_strings(fg, torch):
    same_error(fg, torch, lambda lib: lib.tensor(b"ab"))
    same_error(fg, torch, lambda lib: lib.as_tensor([b"ab"]))


class ArrayLike:
    """An object numpy reads through __array__ only (PyTorch refuses it; numpy's rules apply)."""

    def __init__(self, array):
        self.array = array

    def __array__(self, dtype=None, copy=None):
        return self.array


def test_numpy_readable_objects(fg):
    array = np.arange(4, dtype=np.int16)
    assert plain(fg.tensor(ArrayLike(array))) == plain(fg.from_numpy(array.copy()))
    shared = fg.as_tensor(ArrayLike(array))
    array[0] = 5
    assert shared[0].item() == 5


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dtype": "int16"},
        {"dtype": "float32", "offset": 4},
        {"dtype": "bfloat16", "count": 2, "offset": 2},
        {"dtype": "bool", "count": 3},
        {"dtype": "float16", "requires_grad": True},
    ],
)
def test_frombuffer(fg, torch, kwargs):
    data = bytes(range(1, 13))
    ours = fg.frombuffer(bytearray(data), **{**kwargs, "dtype": getattr(fg, kwargs["dtype"])})
    theirs = torch.frombuffer(bytearray(data), **{**kwargs, "dtype": getattr(torch, kwargs["dtype"])})
    assert plain(ours) == plain(theirs)


def test_frombuffer_shares_a_writable_buffer_and_copies_a_read_only_one(fg):
    buffer = bytearray(8)
    shared = fg.frombuffer(buffer, dtype=fg.int32)
    shared[1] = 1
    assert buffer == b"\x00" * 4 + (1).to_bytes(4, sys.byteorder)
    with pytest.warns(UserWarning, match="The given buffer is not writable"):
        copied = fg.frombuffer(bytes(8), dtype=fg.int32)
    copied[0] = 1
    assert copied.tolist() == [1, 0]


@pytest.mark.parametrize(
    "program",
    [
        lambda lib: lib.frombuffer(bytearray(5), dtype=lib.int16),
        lambda lib: lib.frombuffer(bytearray(4), dtype=lib.int16, count=3),
        lambda lib: lib.frombuffer(bytearray(4), dtype=lib.int16, offset=4),
        lambda lib: lib.frombuffer(bytearray(4), dtype=lib.int16, offset=-1),
        lambda lib: lib.frombuffer(bytearray(), dtype=lib.int16),
        lambda lib: lib.frombuffer(bytearray(4), dtype=lib.int16, count=0),
        lambda lib: lib.frombuffer(3, dtype=lib.int16),
        lambda lib: lib.frombuffer(bytearray(4), dtype=lib.int16, requires_grad=True),
    ],
)
def test_frombuffer_errors(fg, torch, program):
    same_error(fg, torch, program)


# ---- the array interface and numpy()


def test_array_interface(fg):
    ours = fg.arange(12, dtype=fg.int32).reshape(3, 4)[:, 1:]
    interface = ours.__array_interface__
    assert interface["version"] == 3 and interface["typestr"] == np.dtype(np.int32).str
    assert interface["shape"] == (3, 3) and interface["strides"] == (16, 4)
    array = np.asarray(ours)
    assert array.base is ours and array.flags.writeable
    array[0, 0] = 9
    assert ours[0, 0].item() == 9
    if hasattr(ours, "data_ptr"):
        assert interface["data"] == (ours.data_ptr(), False)


@pytest.mark.parametrize(
    "program",
    [
        lambda lib: np.asarray(lib.ones(2, requires_grad=True)),
        lambda lib: np.asarray(lib.ones(2, dtype=lib.bfloat16)),
        lambda lib: np.array(lib.ones(2), dtype=np.float64, copy=False),
    ],
    ids=["requires_grad", "bfloat16", "copy_false"],
)
@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")  # PyTorch's __array__ takes no copy
def test_numpy_refusals_unchanged(fg, torch, program):
    same_error(fg, torch, program)


def test_no_buffer_protocol_as_pytorch(fg, torch):
    """bytes() iterates a tensor's numbers, as PyTorch's (which has no buffer protocol): __array_interface__
    and DLPack are the zero-copy ways out."""
    assert bytes(fg.tensor([1, 2])) == bytes(torch.tensor([1, 2]))
    same_error(fg, torch, lambda lib: memoryview(lib.ones(2)))


def test_empty_tensors_both_ways(fg, torch):
    assert np.from_dlpack(fg.ones(0, 3)).shape == (0, 3)
    assert fg.from_dlpack(torch.ones(3, 0)[1:]).shape == fg.Size([2, 0])


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_numpy_force_and_copies(fg, torch):
    for lib in (fg, torch):
        values = lib.arange(3.0, requires_grad=True)
        assert values.numpy(force=True).tolist() == [0.0, 1.0, 2.0]
        copied = np.array(values.detach())
        copied[0] = 5
        assert values[0].item() == 0
