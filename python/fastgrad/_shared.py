"""The Python layers above the tensor (autograd helpers; nn and optim to come) are written once and
run on both backends. `fastgrad.reference.<sub>` is the same source as `fastgrad.<sub>`, executed a
second time as a submodule of `fastgrad.reference`, so that its relative imports (`from .. import
tensor`) bind to the reference implementation instead of the C++ one."""
import importlib.util
import pathlib
import sys

SHARED_SUBPACKAGES = ["autograd"]
_HERE = pathlib.Path(__file__).resolve().parent


def load_shared_into(package_name):
    package = sys.modules[package_name]
    for sub in SHARED_SUBPACKAGES:
        init = _HERE / sub / "__init__.py"
        name = f"{package_name}.{sub}"
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(init.parent)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        setattr(package, sub, module)
