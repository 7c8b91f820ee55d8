"""Shared fixtures.

`fg` is the library under test. Tests are written once against the PyTorch API and run on every
backend listed in FASTGRAD_TEST_BACKENDS (comma separated module names, default: the C++ fastgrad
and the pure-Python fastgrad.reference).
Setting FASTGRAD_TEST_BACKENDS=torch runs the suite against PyTorch itself, which is how the
expectations in the tests are checked.

`torch` is the oracle: real PyTorch, or a clean skip when it is not installed.
"""
import importlib
import os

import pytest

BACKENDS = [name for name in os.environ.get("FASTGRAD_TEST_BACKENDS", "fastgrad,fastgrad.reference").split(",") if name]


@pytest.fixture(params=BACKENDS)
def fg(request):
    return importlib.import_module(request.param)


@pytest.fixture(scope="session")
def torch():
    return pytest.importorskip("torch")
