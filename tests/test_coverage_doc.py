"""docs/coverage.md is what docs/coverage.py makes of the code today, and docs/pytorch_api.txt (the
PyTorch side it counts against) is what PyTorch 2.13 exports, so neither can go stale."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "docs" / "coverage.py"


def load_script():
    spec = importlib.util.spec_from_file_location("docs_coverage", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_coverage_doc_is_current():
    coverage = load_script()
    assert coverage.COVERAGE_FILE.read_text(encoding="utf-8") == coverage.render(), (
        "docs/coverage.md is stale: run python docs/coverage.py"
    )


def test_pytorch_names_are_current(torch):
    if not torch.__version__.startswith("2.13."):
        pytest.skip(f"docs/pytorch_api.txt lists PyTorch 2.13's names; this is {torch.__version__}")
    coverage = load_script()
    surface, _ = coverage.read_surface()
    assert list(surface) == coverage.NAMESPACES
    for namespace in coverage.NAMESPACES:
        assert surface[namespace] == coverage.torch_names(namespace), namespace


def test_exclusions_keep_what_programs_call():
    """The excluded families are patterns: they must not catch the names small-model programs use."""
    coverage = load_script()
    kept = ["half", "uint8", "autocast", "index_copy", "masked_scatter", "cuda", "is_cuda", "float16", "copy_"]
    assert [name for name in kept if coverage.excluded_because(name)] == []
    assert coverage.excluded_because("cudnn_convolution") == "accelerator and vendor-library entry points"
    assert coverage.excluded_because("sym_int") == "TorchScript and symbolic shapes"
