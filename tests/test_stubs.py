"""The type stubs (fastgrad/_C.pyi, fastgrad/__init__.pyi, py.typed) against the runtime, so that they
cannot fall behind silently: every name a stub declares exists, and every public name exists in a stub.
.ci/make_stubs.py regenerates them.

FASTGRAD_TYPECHECK=1 also runs mypy (when installed) over the examples that import fastgrad and the
demo with the stubs: a few seconds of CPU, too long for the default run.
"""

import ast
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import fastgrad
from fastgrad import _C

PACKAGE = pathlib.Path(fastgrad.__file__).parent
REPO = pathlib.Path(__file__).resolve().parent.parent


def run_child(command, directory):
    """`command` in a child interpreter that imports the fastgrad this process imports, from an empty directory."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)))
    return subprocess.run(command, capture_output=True, text=True, cwd=directory, env=env)


def stub_tree(name):
    return ast.parse((PACKAGE / name).read_text())


def declared(body):
    """Names a stub body binds: defs, classes, annotated names and imports (their `as` names)."""
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def stub_class(tree, name):
    return next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name)


def test_the_package_is_marked_typed():
    assert (PACKAGE / "py.typed").is_file()


def test_c_stub_declares_the_module_exactly():
    stub = declared(stub_tree("_C.pyi").body)
    runtime = {n for n in vars(_C) if not n.startswith("__")}
    # The stub's own imports (typing, builtins, the dtype types) are not bindings.
    assert sorted(runtime - stub) == []
    assert sorted(n for n in stub - runtime if not n.startswith("_") and n not in {"Any", "Iterator", "Optional"}) == []


def test_tensor_stub_declares_every_public_member():
    stub = declared(stub_class(stub_tree("_C.pyi"), "Tensor").body)
    runtime = {n for n in dir(fastgrad.Tensor) if not n.startswith("_")}
    assert sorted(runtime - stub) == []
    assert sorted(n for n in stub if not hasattr(fastgrad.Tensor, n)) == []


def test_package_stub_declares_every_public_name(tmp_path):
    stub = declared(stub_tree("__init__.pyi").body)
    # The names of a fresh import: other tests import submodules (fastgrad.reference, ...) into it.
    fresh = run_child([sys.executable, "-c", "import fastgrad; print(' '.join(dir(fastgrad)))"], tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    runtime = {n for n in fresh.stdout.split() if not n.startswith("_")}
    assert sorted(runtime - stub) == []
    assert sorted(n for n in stub if not n.startswith("_") and n not in runtime and n != "Any") == []
    assert "__version__" in stub


def test_stubs_parse_as_the_oldest_supported_python():
    for name in ("_C.pyi", "__init__.pyi"):
        ast.parse((PACKAGE / name).read_text(), feature_version=(3, 9))


@pytest.mark.skipif(os.environ.get("FASTGRAD_TYPECHECK") != "1", reason="set FASTGRAD_TYPECHECK=1 to run mypy")
def test_examples_and_demo_type_check(tmp_path):
    pytest.importorskip("mypy")
    # The demo checked as a copy: where fastgrad is installed, checking the file in place would make
    # mypy take site-packages for a source root (and refuse it: "This file shadows library module").
    shutil.copy(PACKAGE / "demo.py", tmp_path / "fastgrad_demo.py")
    # The examples that import fastgrad: the others import torch (python -m fastgrad.run swaps in fastgrad):
    # mypy would check them against PyTorch's annotations, not these stubs. Ray's package is skipped
    # (its names are Any, installed or not) for the same reason: reading PyTorch's and Ray's packages
    # made mypy take 9.1 s of CPU instead of 1.5 s.
    examples = [path for path in sorted((REPO / "examples").glob("*.py")) if "import fastgrad" in path.read_text()]
    assert len(examples) >= 3, "the seed programs import fastgrad"
    targets = [*map(str, examples), str(tmp_path / "fastgrad_demo.py")]
    # silent: the package's own code is the library's business, the programs using it are checked.
    # Only the demo's optional matplotlib may be missing (a missing fastgrad would pass vacuously). The
    # seed programs read a leaf's .grad without a None check: PyTorch's stubs, as ours, type it Optional.
    config = tmp_path / "mypy.ini"
    seeds = ",".join(path.stem for path in sorted((REPO / "examples").glob("seed*.py")))
    config.write_text(
        "[mypy]\nfollow_imports = silent\n[mypy-matplotlib.*]\nignore_missing_imports = True\n"
        "[mypy-ray.*]\nfollow_imports = skip\nignore_missing_imports = True\n"
        f"[mypy-{seeds}]\ndisable_error_code = union-attr\n"
    )
    command = [sys.executable, "-m", "mypy", "--no-incremental", "--config-file", str(config)]
    command += ["--cache-dir", str(tmp_path / "cache"), *targets]
    result = run_child(command, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
