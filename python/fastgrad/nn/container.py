"""The containers: Sequential and ModuleList (submodules registered under the names "0", "1", ...),
ModuleDict, ParameterList and ParameterDict."""

import collections
import collections.abc
import itertools
import operator

from .. import _prims
from .module import Module, _addindent, _typename
from .parameter import Parameter

Tensor = _prims.Tensor


def _shift_in(modules, index, module):
    """Puts module under the name str(index), moving the modules from there on one name up."""
    for i in range(len(modules), index, -1):
        modules[str(i)] = modules[str(i - 1)]
    modules[str(index)] = module


class _IndexedModules(Module):
    """What Sequential and ModuleList share: positions, len, iteration, appending, deleting."""

    def _key(self, idx):
        """The name of the submodule at position idx (negative counts from the end)."""
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError(f"index {idx} is out of range")
        return list(self._modules)[idx]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __setitem__(self, idx, module):
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx):
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._key(idx)]
        for key in keys:
            delattr(self, key)
        # renumber, so names stay positions
        self._modules = collections.OrderedDict((str(i), m) for i, m in enumerate(self._modules.values()))

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for module in modules:
            self.append(module)
        return self

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def __dir__(self):
        return [key for key in super().__dir__() if not key.isdigit()]


class Sequential(_IndexedModules):
    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], collections.OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(collections.OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key(idx)]

    def forward(self, input):
        for module in self:
            input = module(input)
        return input

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        size = len(self._modules)
        if not -size <= index <= size:
            raise IndexError(f"Index out of range: {index}")
        _shift_in(self._modules, index + size if index < 0 else index, module)
        return self

    def _check_sequential(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")

    def __add__(self, other):
        self._check_sequential(other)
        return Sequential(*self, *other)

    def __iadd__(self, other):
        self._check_sequential(other)
        return self.extend(other)

    def _check_factor(self, factor):
        if not isinstance(factor, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(factor)}")
        if factor <= 0:
            raise ValueError(f"Non-positive multiplication factor {factor} for {type(self)}")

    def __mul__(self, factor):
        """The same modules `factor` times over (not copies)."""
        self._check_factor(factor)
        return Sequential(*(list(self) * factor))

    __rmul__ = __mul__

    def __imul__(self, factor):
        self._check_factor(factor)
        return self.extend(list(self) * (factor - 1))


class ModuleList(_IndexedModules):
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[self._key(idx)]

    def extend(self, modules):
        if not isinstance(modules, collections.abc.Iterable):
            raise TypeError("ModuleList.extend should be called with an iterable, but got " + type(modules).__name__)
        return super().extend(modules)

    def __iadd__(self, modules):
        return self.extend(modules)

    def insert(self, index, module):
        """Inserts module before position index, shifting the later ones up (PyTorch's loop, so an index
        out of 0..len behaves as in PyTorch too)."""
        _shift_in(self._modules, index, module)

    def __add__(self, other):
        combined = ModuleList()
        for module in itertools.chain(self, other):
            combined.append(module)
        return combined

    def __repr__(self):
        """Runs of equal reprs are written once: "(0-2): 3 x Linear(...)"."""
        reprs = [repr(module) for module in self]
        if not reprs:
            return self._get_name() + "()"
        lines = []
        start = 0
        for end in range(1, len(reprs) + 1):
            if end == len(reprs) or reprs[end] != reprs[start]:
                text = (
                    f"({start}): {reprs[start]}"
                    if end - start == 1
                    else f"({start}-{end - 1}): {end - start} x {reprs[start]}"
                )
                lines.append(_addindent(text, 2))
                start = end
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


def _pairs(kind, items):
    """The (key, value) pairs of a mapping or of an iterable of pairs, checked as PyTorch's update()."""
    if isinstance(items, collections.abc.Mapping) or hasattr(items, "items"):
        return list(items.items())
    pairs = []
    for j, pair in enumerate(items):
        if not isinstance(pair, collections.abc.Iterable):
            raise TypeError(f"{kind} update sequence element #{j} should be Iterable; is" + type(pair).__name__)
        if len(pair) != 2:
            raise ValueError(f"{kind} update sequence element #{j} has length {len(pair)}; 2 is required")
        pairs.append(tuple(pair))
    return pairs


class ModuleDict(Module):
    """Submodules under string keys, in insertion order."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        if not isinstance(modules, collections.abc.Iterable):
            raise TypeError(
                "ModuleDict.update should be called with an iterable of key/value pairs, but got "
                + type(modules).__name__
            )
        for key, module in _pairs("ModuleDict", modules):
            self[key] = module


def _member_line(key, value, tensor_type):
    """A ParameterList/ParameterDict entry as its repr lists it."""
    if not isinstance(value, Tensor):
        return f"  ({key}): Object of type: {type(value).__name__}"
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    size = "x".join(str(n) for n in value.size())
    return f"  ({key}): {kind} containing: [{tensor_type(value)} of size {size}]"


def _as_parameter(value):
    """A tensor stored in a ParameterList/ParameterDict becomes a Parameter; anything else stays as it is."""
    return Parameter(value) if isinstance(value, Tensor) and not isinstance(value, Parameter) else value


class ParameterList(Module):
    """Parameters (or any values) under the names "0", "1", ..."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _name(self, idx):
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError(f"index {idx} is out of range")
        return str(idx % len(self))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(self[i] for i in range(*idx.indices(len(self))))
        return getattr(self, self._name(idx))

    def __setitem__(self, idx, value):
        setattr(self, self._name(idx), _as_parameter(value))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values):
        return self.extend(values)

    def __dir__(self):
        return [key for key in super().__dir__() if not key.isdigit()]

    def append(self, value):
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        if not isinstance(values, collections.abc.Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got " + type(values).__name__)
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        return "\n".join(_member_line(i, value, lambda t: t.dtype) for i, value in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """Parameters (or any values) under string keys, in insertion order."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _check_key(key):
        if not isinstance(key, str):
            raise TypeError(
                "Index given to ParameterDict cannot be used as a key as it is not a string (type is "
                f"'{type(key).__name__}'). Open an issue on github if you need non-string keys."
            )
        return key

    def __getitem__(self, key):
        return getattr(self, self._check_key(key))

    def __setitem__(self, key, value):
        self._keys[key] = None
        setattr(self, self._check_key(key), _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, self._check_key(key))

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        return ParameterDict(collections.OrderedDict(self.items()))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for key in list(self._keys):
            del self[key]

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        key = next(reversed(self._keys))  # the last key, as dict.popitem (KeyError when empty)
        return key, self.pop(key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        return ParameterDict((key, default) for key in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((key, self[key]) for key in self._keys)

    def values(self):
        return (self[key] for key in self._keys)

    def update(self, parameters):
        if not isinstance(parameters, collections.abc.Iterable):
            raise TypeError(
                "ParametersDict.update should be called with an iterable of key/value pairs, but got "
                + type(parameters).__name__
            )
        pairs = _pairs("ParameterDict", parameters)
        if isinstance(parameters, collections.abc.Mapping) and not isinstance(parameters, collections.OrderedDict):
            pairs.sort()  # a plain mapping's entries go in key order, as in PyTorch
        for key, value in pairs:
            self[key] = value

    def extra_repr(self):
        return "\n".join(_member_line(key, value, _typename) for key, value in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other):
        combined = self.copy()
        combined.update(other)
        return combined

    def __ror__(self, other):
        combined = other.copy()
        combined.update(self)
        return combined

    def __ior__(self, other):
        self.update(other)
        return self
