"""Sequential and ModuleList: submodules registered under the names "0", "1", ..."""

import collections
import collections.abc
import operator

from .module import Module, _addindent


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
        for i in range(len(self._modules), index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module

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
