"""Name parity: fastgrad and fastgrad.reference both provide the whole public API of fastgrad._api."""

import importlib

import pytest

from fastgrad import _api

BACKENDS = ["fastgrad", "fastgrad.reference"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_has_every_public_name(backend):
    module = importlib.import_module(backend)
    missing = [name for name in _api.MODULE if not hasattr(module, name)]
    assert missing == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_has_every_public_attribute(backend):
    tensor_type = importlib.import_module(backend).Tensor
    missing = [name for name in _api.TENSOR if not hasattr(tensor_type, name)]
    assert missing == []


def test_api_list_covers_fastgrad():
    import fastgrad

    # The backends themselves; the command-line demo, script runner and benchmarks (submodules: an
    # attribute once imported), and the `import torch` alias the first two install for the whole process
    # (fastgrad.alias_torch(reference=True) aliases the reference).
    listed = set(_api.MODULE) | {"reference", "demo", "run", "bench", "alias_torch"}
    unlisted = sorted(n for n in dir(fastgrad) if not n.startswith("_") and n not in listed)
    assert unlisted == []
    public = {n for n in dir(fastgrad.Tensor) if not n.startswith("_")}
    assert sorted(public - set(_api.TENSOR) - set(_api.ONLY_FASTGRAD)) == []


def test_only_fastgrad_names_are_really_absent_from_reference():
    reference = importlib.import_module("fastgrad.reference")
    for name in _api.ONLY_FASTGRAD:
        assert not hasattr(reference.Tensor, name)
