"""dtypes, Size and device: the small value types of the public API."""


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


class device:
    """Only the CPU exists. `device('cpu')`, `device('cpu', 0)` and 'cpu:0' are accepted so that
    device-agnostic code runs; anything else is an error that says so."""

    def __init__(self, type="cpu", index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        name, _, number = str(type).partition(":")
        if name != "cpu":
            raise RuntimeError(f"fastgrad runs on the CPU only; device '{type}' is not available")
        self.type = "cpu"
        self.index = int(number) if number else index

    def __repr__(self):
        return "device(type='cpu')" if self.index is None else f"device(type='cpu', index={self.index})"

    def __str__(self):
        return "cpu" if self.index is None else f"cpu:{self.index}"

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and other.type == self.type

    def __hash__(self):
        return hash(self.type)
