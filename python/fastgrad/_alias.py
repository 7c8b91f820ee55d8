"""`import torch` resolved to fastgrad: what `python -m fastgrad.run` and fastgrad.alias_torch() install.

Every module name `torch` or `torch.X.Y` imports fastgrad's `fastgrad.X.Y` (or fastgrad.reference's),
seen through an alias module named as PyTorch names it. The alias hands out the very objects of
fastgrad (so `torch.Tensor is fastgrad.Tensor`, and isinstance, subclassing of nn.Module and pickling
work), and it turns "fastgrad lacks this" into an error that names the PyTorch API the program asked
for ("torch.nn.Conv3d is not provided by fastgrad"), an AttributeError for a name and a
ModuleNotFoundError for a module, the types PyTorch-aware code already catches.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import types

ROOT = "torch"


def not_provided(torch_name):
    return f"{torch_name} is not provided by fastgrad"


class AliasModule(types.ModuleType):
    """A PyTorch module name over a fastgrad module: attribute reads and writes go to the target."""

    def __init__(self, torch_name, target):
        super().__init__(torch_name, target.__doc__)
        self.__dict__["__target__"] = target
        if hasattr(target, "__all__"):
            self.__dict__["__all__"] = target.__all__

    def __getattr__(self, name):  # only for names the alias itself lacks: all but __name__, __doc__, ...
        target = self.__dict__["__target__"]
        try:
            value = getattr(target, name)
        except AttributeError:
            if name.startswith("__"):  # protocol probes (__path__, __file__, ...) stay plain AttributeErrors
                raise
            raise AttributeError(not_provided(f"{self.__name__}.{name}")) from None
        if isinstance(value, types.ModuleType) and value.__name__ == f"{target.__name__}.{name}":
            return importlib.import_module(f"{self.__name__}.{name}")  # its alias, the one in sys.modules
        return value

    def __setattr__(self, name, value):
        if isinstance(value, AliasModule):  # the import system binding a submodule: not fastgrad's business
            self.__dict__[name] = value
        else:  # torch.backends.cudnn.benchmark = True sets fastgrad's flag
            setattr(self.__dict__["__target__"], name, value)

    def __dir__(self):
        return dir(self.__dict__["__target__"])


class AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `torch` and `torch.*` before the file system does, and loads them as AliasModules."""

    def __init__(self, package):
        self.package = package  # "fastgrad" or "fastgrad.reference"

    def find_spec(self, fullname, path=None, target=None):
        if fullname != ROOT and not fullname.startswith(ROOT + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=True)

    def create_module(self, spec):
        name = self.package + spec.name[len(ROOT) :]
        try:
            target = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name is None or not name.startswith(error.name):  # fastgrad itself failed to import something
                raise
            # fastgrad.reference.cuda is fastgrad.cuda (a backend-independent module): an attribute only
            target = sys.modules[self.package]
            for part in spec.name.split(".")[1:]:
                target = getattr(target, part, None)
            if not isinstance(target, types.ModuleType):
                raise ModuleNotFoundError(not_provided(spec.name), name=spec.name) from None
        return AliasModule(spec.name, target)

    def exec_module(self, module):
        pass


def tensor_attribute_error(self, name):
    raise AttributeError(not_provided(f"torch.Tensor.{name}"))


def alias_torch(reference=False):
    """Makes `import torch` (and `import torch.nn as nn`, `from torch.utils.data import ...`) import
    fastgrad, or fastgrad.reference with reference=True, for the rest of the process. Call it before
    anything imports torch; a second call with the same backend does nothing."""
    package = "fastgrad.reference" if reference else "fastgrad"
    installed = [finder for finder in sys.meta_path if isinstance(finder, AliasFinder)]
    if installed:
        if installed[0].package != package:
            raise RuntimeError(f"torch is already an alias of {installed[0].package}")
        return
    if ROOT in sys.modules:
        raise RuntimeError("alias_torch() must run before torch is imported: torch is already imported")
    sys.meta_path.insert(0, AliasFinder(package))
    # A Tensor attribute the program expects but fastgrad lacks is named as PyTorch's.
    importlib.import_module(package).Tensor.__getattr__ = tensor_attribute_error
