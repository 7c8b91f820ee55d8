"""dtypes, Size and device: the small value types of the public API."""

import builtins

import numpy as np


class dtype:
    """An element type. The four instances below are the only ones; compare them with `is` or `==`."""

    def __init__(self, name, code, itemsize, is_floating_point):
        self._name = name
        self._code = code  # the C++ core's DType value
        self.itemsize = itemsize
        self.is_floating_point = is_floating_point
        self.is_complex = False
        self.is_signed = name != "bool"

    def __repr__(self):
        return f"fastgrad.{self._name}"

    def __reduce__(self):
        return self._name


bool = dtype("bool", 0, 1, False)
int64 = dtype("int64", 1, 8, False)
float32 = dtype("float32", 2, 4, True)
float64 = dtype("float64", 3, 8, True)
# The names PyTorch's C++ errors use for dtypes ("... not implemented for 'Long'").
SCALAR_TYPE_NAME = {bool: "Bool", int64: "Long", float32: "Float", float64: "Double"}
# The legacy tensor types (fastgrad.FloatTensor, ...; Tensor.type() names them).
LEGACY_TYPE_NAME = {dtype: f"{name}Tensor" for dtype, name in SCALAR_TYPE_NAME.items()}
long = int64
float = float32
double = float64
ALL_DTYPES = [bool, int64, float32, float64]


class Size(tuple):
    """A tensor's shape: a tuple of ints that prints as `fastgrad.Size([2, 3])`."""

    def __repr__(self):
        return f"fastgrad.Size({list(self)})"

    __str__ = __repr__

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, key):
        item = super().__getitem__(key)
        return Size(item) if isinstance(key, slice) else item

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
            index = int(number)
        elif index is not None:
            if not isinstance(index, int) or isinstance(index, builtins.bool):
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

# bool < int64 < float32 < float64: PyTorch's promotion between two dtypes is the later of them.
_PROMOTION_ORDER = [bool, int64, float32, float64]
_KIND = {bool: 0, int64: 1, float32: 2, float64: 2}  # bool, integer, floating


def _require_dtype(value, function, argument, position):
    if not isinstance(value, dtype):
        raise TypeError(
            f"{function}(): argument '{argument}' (position {position}) must be torch.dtype, not "
            f"{builtins.type(value).__name__}"
        )


def get_default_dtype():
    """The dtype of float tensors made without one (fastgrad: always float32)."""
    return float32


def promote_types(type1, type2):
    _require_dtype(type1, "promote_types", "type1", 1)
    _require_dtype(type2, "promote_types", "type2", 2)
    return builtins.max(type1, type2, key=_PROMOTION_ORDER.index)


def can_cast(from_, to):
    """PyTorch's rule: a cast may narrow within a kind, but never go down a kind (float to integer,
    integer to bool)."""
    _require_dtype(from_, "can_cast", "from_", 1)
    _require_dtype(to, "can_cast", "to", 2)
    return _KIND[from_] <= _KIND[to]


class finfo:
    """Machine limits of a floating dtype, as PyTorch's torch.finfo."""

    def __init__(self, type=None):
        type = get_default_dtype() if type is None else type
        if not isinstance(type, dtype) or not type.is_floating_point:
            raise TypeError(
                "torch.finfo() requires a floating point input type. Use torch.iinfo to handle 'torch.finfo'"
            )
        info = np.finfo(np.float32 if type is float32 else np.float64)
        self.bits, self.dtype = info.bits, type._name
        self.eps, self.max, self.min = builtins.float(info.eps), builtins.float(info.max), builtins.float(info.min)
        self.tiny = self.smallest_normal = builtins.float(info.tiny)
        self.resolution = builtins.float(info.resolution)

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
        self.min, self.max = -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1

    def __eq__(self, other):
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __hash__(self):
        return hash(self.dtype)

    def __repr__(self):
        return f"iinfo(min={builtins.float(self.min):g}, max={builtins.float(self.max):g}, dtype={self.dtype})"


class LinAlgError(RuntimeError):
    """fastgrad.linalg.LinAlgError, as PyTorch's torch.linalg.LinAlgError: a matrix that a
    factorization cannot take (singular, not positive-definite). Here, so both backends raise one class."""
