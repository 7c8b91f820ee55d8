"""fastgrad-specific: tensor buffers come from a size-class cache (csrc/core/storage.cpp), so the
buffer a dropped tensor gave back is the next one handed out for a size of the same class."""

import os

import pytest

from conftest import BACKENDS

if "fastgrad" not in BACKENDS:
    pytest.skip("the C++ core's allocator", allow_module_level=True)
fastgrad = pytest.importorskip("fastgrad")

# An AddressSanitizer build (run with libasan preloaded) never reuses buffers, so that reads of
# freed tensor memory are reported.
pytestmark = pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", ""), reason="no buffer cache under ASan")


@pytest.mark.parametrize("first, second", [(1000, 1000), (1000, 1001), (16_000_000, 16_000_000)])
def test_a_freed_buffer_is_reused(first, second):
    t = fastgrad.empty(first)
    address = t.data_ptr()
    del t
    assert fastgrad.empty(second).data_ptr() == address


def test_values_survive_reuse():
    # a reused buffer is uninitialized memory for empty(), but every op writes its whole output
    a = fastgrad.ones(1000)
    del a
    b = fastgrad.zeros(1000) + 2
    assert b.tolist() == [2.0] * 1000
