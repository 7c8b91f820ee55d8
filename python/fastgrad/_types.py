"""dtypes, Size and device: the small value types of the public API."""

import builtins
import enum

import numpy as np


class dtype:
    """An element type. The instances below are the only ones; compare them with `is` or `==`."""

    def __init__(self, name, code, itemsize, is_floating_point):
        self._name = name
        self._code = code  # the C++ core's DType value
        self.itemsize = itemsize
        self.is_floating_point = is_floating_point
        self.is_complex = False
        self.is_signed = name not in ("bool", "uint8")

    def __repr__(self):
        return f"fastgrad.{self._name}"

    def __reduce__(self):
        return self._name


bool = dtype("bool", 0, 1, False)
int64 = dtype("int64", 1, 8, False)
float32 = dtype("float32", 2, 4, True)
float64 = dtype("float64", 3, 8, True)
int32 = dtype("int32", 4, 4, False)
int16 = dtype("int16", 5, 2, False)
int8 = dtype("int8", 6, 1, False)
uint8 = dtype("uint8", 7, 1, False)
float16 = dtype("float16", 8, 2, True)
bfloat16 = dtype("bfloat16", 9, 2, True)
# The names PyTorch's C++ errors use for dtypes ("... not implemented for 'Long'").
SCALAR_TYPE_NAME = {
    bool: "Bool",
    int64: "Long",
    float32: "Float",
    float64: "Double",
    int32: "Int",
    int16: "Short",
    int8: "Char",
    uint8: "Byte",
    float16: "Half",
    bfloat16: "BFloat16",
}
# The C++ type names other PyTorch errors use ("... mask with dtype long int").
C_TYPE_NAME = {
    bool: "bool",
    int64: "long int",
    float32: "float",
    float64: "double",
    int32: "int",
    int16: "short int",
    int8: "signed char",
    uint8: "unsigned char",
    float16: "c10::Half",
    bfloat16: "c10::BFloat16",
}
# The legacy tensor types (fastgrad.FloatTensor, ...; Tensor.type() names them).
LEGACY_TYPE_NAME = {dtype: f"{name}Tensor" for dtype, name in SCALAR_TYPE_NAME.items()}
long = int64
float = float32
double = float64
int = int32
short = int16
half = float16
ALL_DTYPES = [bool, int64, float32, float64, int32, int16, int8, uint8, float16, bfloat16]  # in _code order


def compute_type(d):
    """The dtype the core computes a dtype in (csrc/core/dtype.h): int64 for the narrower integers,
    float32 for the 16-bit floats, else the dtype itself."""
    if d.is_floating_point:
        return float64 if d is float64 else float32
    return d if d is bool else int64


# numpy's element type for each dtype (numpy has no bfloat16), and back.
NUMPY_TYPES = {d: np.dtype(d._name) for d in ALL_DTYPES if d is not bfloat16}
DTYPE_OF_NUMPY = {numpy_type: d for d, numpy_type in NUMPY_TYPES.items()}


def check_int_value(value, dtype, type_name):
    """PyTorch's checked_convert of a number given for a narrower integer dtype (tensor(), full()):
    outside the type's range, or NaN, is an error; uint8 takes -255..255 (a negative one wraps)."""
    bits = 8 * dtype.itemsize
    low, high = (-(2**bits - 1), 2**bits - 1) if dtype is uint8 else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if not low <= value <= high:
        raise RuntimeError(f"value cannot be converted to type {type_name} without overflow")


_tuple_item = tuple.__getitem__


class Size(tuple):
    """A tensor's shape: a tuple of ints that prints as `fastgrad.Size([2, 3])`."""

    __slots__ = ()  # nothing but the ints, as torch.Size (no attributes can be set on one)

    def __repr__(self):
        return f"fastgrad.Size({list(self)})"

    __str__ = __repr__

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, key):  # plain calls, not super(): shapes are indexed on every layer call
        item = _tuple_item(self, key)
        return Size(item) if key.__class__ is slice else item

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))


# The device types PyTorch's device() parses, in the order its error lists them.
DEVICE_TYPES = (
    "cpu cuda ipu xpu mkldnn opengl opencl ideep hip ve fpga maia xla lazy vulkan mps meta hpu mtia privateuseone"
).split()
# Tensors on devices other than the CPU fail as in a CPU-only PyTorch build (type and words).
NOT_COMPILED = {"cuda": "CUDA", "xpu": "XPU"}


class device:
    """A device as PyTorch parses and compares it: device('cuda:1') and device('cuda', 1) exist, so
    that device-agnostic code runs; only the CPU holds tensors (check_cpu)."""

    def __init__(self, type="cpu", index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        elif not isinstance(type, str):
            raise TypeError(f"device(): argument 'type' (position 1) must be str, not {builtins.type(type).__name__}")
        name, colon, number = type.partition(":")
        if name not in DEVICE_TYPES:
            raise RuntimeError(
                f"Expected one of {', '.join(DEVICE_TYPES)} device type at start of device string: {type}"
            )
        if colon:
            if not number.isdigit() or (len(number) > 1 and number[0] == "0"):
                raise RuntimeError(f"Invalid device string: '{type}'")
            if index is not None:
                raise RuntimeError(
                    f"type (string) must not include an index because index was passed explicitly: {type}"
                )
            index = builtins.int(number)
        elif index is not None:
            if not isinstance(index, builtins.int) or isinstance(index, builtins.bool):
                raise TypeError(
                    f"device(): argument 'index' (position 2) must be int, not {builtins.type(index).__name__}"
                )
            if index < 0:
                raise RuntimeError("Device index must not be negative")
        self.type = name
        self.index = index

    def __repr__(self):
        return (
            f"device(type='{self.type}')" if self.index is None else f"device(type='{self.type}', index={self.index})"
        )

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):  # as PyTorch's: never equal to a string
        return isinstance(other, device) and (other.type, other.index) == (self.type, self.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __reduce__(self):
        return device, (self.type, self.index)


class DLDeviceType(enum.IntEnum):
    """DLPack's device types (dlpack.h), as torch.utils.dlpack.DLDeviceType; fastgrad's tensors are kDLCPU."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


def check_cpu(where):
    """Tensors live on the CPU: a device argument (str or device, None for the default) naming any
    other device fails as it does in a CPU-only PyTorch build. Factories check it before any memory
    is taken or number drawn."""
    if where is None:
        return
    kind = device(where).type
    if kind in NOT_COMPILED:
        raise AssertionError(f"Torch not compiled with {NOT_COMPILED[kind]} enabled")
    if kind != "cpu":
        raise RuntimeError(f"PyTorch is not linked with support for {kind} devices")


# ---- facts about dtypes: finfo, iinfo, promotion and casting rules, the default dtype


def _kind(d):
    """0 bool, 1 integer, 2 floating: promotion and casting never go down a kind."""
    return 2 if d.is_floating_point else 0 if d is bool else 1


def _require_dtype(value, function, argument, position):
    if not isinstance(value, dtype):
        raise TypeError(
            f"{function}(): argument '{argument}' (position {position}) must be torch.dtype, not "
            f"{builtins.type(value).__name__}"
        )


_default_dtype = float32  # torch.set_default_dtype's: one for the process (both backends), as PyTorch's


def get_default_dtype():
    """The dtype of float tensors made without one: Python floats, float factories, and the
    results of float functions of integer tensors."""
    return _default_dtype


def set_default_dtype(d):
    global _default_dtype
    if not (isinstance(d, dtype) and d.is_floating_point):
        prefix = "" if isinstance(d, dtype) else "invalid dtype object: "
        raise TypeError(f"{prefix}only floating-point types are supported as the default type")
    from fastgrad import _C  # the core reads it too (Python floats in its ops), for both backends' processes

    _C.set_default_dtype(d)
    _default_dtype = d


def promote_types(type1, type2):
    """PyTorch's rule (as the core's promote in csrc/core/dtype.h): the higher kind wins; within a
    kind the wider type, except that uint8 with int8 is int16 and float16 with bfloat16 is float32."""
    _require_dtype(type1, "promote_types", "type1", 1)
    _require_dtype(type2, "promote_types", "type2", 2)
    if type1 is type2:
        return type1
    if _kind(type1) != _kind(type2):
        return builtins.max(type1, type2, key=_kind)
    if uint8 in (type1, type2):
        other = type2 if type1 is uint8 else type1
        return int16 if other is int8 else other
    if type1.itemsize == type2.itemsize:
        return float32  # float16 and bfloat16
    return builtins.max(type1, type2, key=lambda d: d.itemsize)


def result_type(tensor, other):
    """The dtype an arithmetic op of `tensor` and `other` (tensors or Python numbers) computes in,
    by PyTorch's promotion rules (fastgrad._meta.result_type, which imports this module)."""
    from fastgrad._meta import result_type as promoted

    def acceptable(x):
        return hasattr(x, "dtype") and hasattr(x, "shape") or isinstance(x, (builtins.int, builtins.float))

    if not (acceptable(tensor) and acceptable(other)):
        got = ", ".join(builtins.type(x).__name__ for x in (tensor, other))
        marked = ", ".join(f"!{builtins.type(x).__name__}!" for x in (tensor, other))
        overloads = ("Tensor tensor, Tensor other", "Number scalar, Tensor tensor", "Tensor tensor, Number other")
        raise TypeError(
            f"result_type() received an invalid combination of arguments - got ({got}), but expected one of:\n"
            + "".join(
                f" * ({o})\n      didn't match because some of the arguments have invalid types: ({marked})\n"
                for o in overloads + ("Number scalar1, Number scalar2",)
            )
        )
    return promoted(tensor, other)


def can_cast(from_, to):
    """PyTorch's rule: a cast may narrow within a kind, but never go down a kind (float to integer,
    integer to bool)."""
    _require_dtype(from_, "can_cast", "from_", 1)
    _require_dtype(to, "can_cast", "to", 2)
    return _kind(from_) <= _kind(to)


class finfo:
    """Machine limits of a floating dtype, as PyTorch's torch.finfo."""

    def __init__(self, type=None):
        type = get_default_dtype() if type is None else type
        if not isinstance(type, dtype) or not type.is_floating_point:
            raise TypeError(
                "torch.finfo() requires a floating point input type. Use torch.iinfo to handle 'torch.finfo'"
            )
        self.bits, self.dtype = 8 * type.itemsize, type._name
        if type is bfloat16:  # numpy has no bfloat16: float32's exponent with 8 significand bits
            self.eps, self.max, self.tiny, self.resolution = 2.0**-7, (2 - 2.0**-7) * 2.0**127, 2.0**-126, 0.01
        else:
            info = np.finfo(type._name)
            self.eps, self.max = builtins.float(info.eps), builtins.float(info.max)
            self.tiny, self.resolution = builtins.float(info.tiny), 10.0**-info.precision  # exactly 1e-06, ...
        self.min = -self.max
        self.smallest_normal = self.tiny

    def __eq__(self, other):
        return isinstance(other, finfo) and other.dtype == self.dtype

    def __hash__(self):
        return hash(self.dtype)

    def __repr__(self):
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
            f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})"
        )


class iinfo:
    """Limits of an integer dtype, as PyTorch's torch.iinfo."""

    def __init__(self, type):
        if type is bool:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if not isinstance(type, dtype) or type.is_floating_point:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle 'torch.iinfo'")
        self.bits, self.dtype = 8 * type.itemsize, type._name
        if type.is_signed:
            self.min, self.max = -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1
        else:
            self.min, self.max = 0, 2**self.bits - 1

    def __eq__(self, other):
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __hash__(self):
        return hash(self.dtype)

    def __repr__(self):
        return f"iinfo(min={builtins.float(self.min):g}, max={builtins.float(self.max):g}, dtype={self.dtype})"


class LinAlgError(RuntimeError):
    """fastgrad.linalg.LinAlgError, as PyTorch's torch.linalg.LinAlgError: a matrix that a
    factorization cannot take (singular, not positive-definite). Here, so both backends raise one class."""
