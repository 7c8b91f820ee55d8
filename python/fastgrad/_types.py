"""dtypes, Size and device: the small value types of the public API."""

import builtins


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
