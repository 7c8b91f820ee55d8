"""The Python layers above the tensor primitives are written once and run on both backends: the
PyTorch-style signatures (_methods), creation functions (_factories), grad mode (_grad_mode) and the
autograd helpers (autograd). Each imports its backend relatively (`from . import _prims`), and
backend-independent modules (_types, _formatting) absolutely.

fastgrad imports them as usual, over fastgrad._prims (the C++ core). `fastgrad.reference.<name>` is
the same source executed a second time as a submodule of fastgrad.reference, so that its relative
imports bind to the reference: fastgrad.reference._prims, the same primitives in pure Python.
"""

import importlib.util
import pathlib
import sys

# In import order: _factories uses _methods, _sampling uses both and random.
SHARED = [
    "_grad_mode",
    "_pickling",
    "_methods",
    "_hooks",
    "_compile",
    "_factories",
    "random",
    "_sampling",
    "autograd",
    "linalg",
    "_linalg_ops",
    "nn",
    "_nn_functions",
    "_torch_checkpoint",
    "serialization",
    "safetensors",
    "optim",
    "compiler",
    "utils",
    "__config__",
]
_HERE = pathlib.Path(__file__).resolve().parent


def load_shared_into(package_name):
    package = sys.modules[package_name]
    for sub in SHARED:
        path = _HERE / sub
        name = f"{package_name}.{sub}"
        if path.is_dir():  # a subpackage
            spec = importlib.util.spec_from_file_location(
                name, path / "__init__.py", submodule_search_locations=[str(path)]
            )
        else:
            spec = importlib.util.spec_from_file_location(name, path.with_suffix(".py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        setattr(package, sub, module)
