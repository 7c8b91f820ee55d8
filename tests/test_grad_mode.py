"""Grad mode: no_grad, enable_grad, set_grad_enabled, is_grad_enabled; thread-local."""

import threading

import pytest


@pytest.fixture
def x(fg):
    return fg.tensor([1.0, 2.0], requires_grad=True)


def assert_untracked(t):
    assert t.requires_grad is False
    assert t.is_leaf is True
    assert t.grad_fn is None


def test_grad_enabled_by_default(fg, x):
    assert fg.is_grad_enabled() is True
    assert (x * 2).requires_grad is True


def test_no_grad_context_manager(fg, x):
    with fg.no_grad():
        assert fg.is_grad_enabled() is False
        y = x * 2 + 1
        s = y.sum()
    assert fg.is_grad_enabled() is True
    assert_untracked(y)
    assert_untracked(s)
    assert y.tolist() == [3.0, 5.0]
    with pytest.raises(RuntimeError, match="does not require grad"):
        s.backward()


def test_no_grad_restores_mode_after_exception(fg):
    with pytest.raises(ZeroDivisionError):
        with fg.no_grad():
            1 / 0
    assert fg.is_grad_enabled() is True


def test_no_grad_decorator(fg, x):
    @fg.no_grad()
    def double(t):
        return t * 2, fg.is_grad_enabled()

    y, enabled = double(x)
    assert enabled is False
    assert_untracked(y)
    assert fg.is_grad_enabled() is True
    assert double.__name__ == "double"


def test_leaf_created_under_no_grad_still_requires_grad(fg):
    with fg.no_grad():
        w = fg.tensor([1.0], requires_grad=True)
        z = fg.zeros(2, requires_grad=True)
    assert w.requires_grad and w.is_leaf
    assert z.requires_grad and z.is_leaf


def test_enable_grad_inside_no_grad(fg, x):
    with fg.no_grad():
        with fg.enable_grad():
            assert fg.is_grad_enabled() is True
            y = x * 3
        assert fg.is_grad_enabled() is False
    assert y.requires_grad is True and y.is_leaf is False
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_enable_grad_decorator(fg, x):
    @fg.enable_grad()
    def triple(t):
        return t * 3

    with fg.no_grad():
        y = triple(x)
        assert fg.is_grad_enabled() is False
    assert y.requires_grad is True


def test_set_grad_enabled_as_function(fg, x):
    try:
        fg.set_grad_enabled(False)
        assert fg.is_grad_enabled() is False
        assert_untracked(x * 2)
        fg.set_grad_enabled(True)
        assert fg.is_grad_enabled() is True
        assert (x * 2).requires_grad is True
    finally:
        fg.set_grad_enabled(True)


@pytest.mark.parametrize("outer", [True, False])
def test_set_grad_enabled_as_context_manager(fg, x, outer):
    with fg.set_grad_enabled(outer):
        for inner in (True, False):
            with fg.set_grad_enabled(inner):
                assert fg.is_grad_enabled() is inner
                assert (x * 2).requires_grad is inner
            assert fg.is_grad_enabled() is outer
    assert fg.is_grad_enabled() is True


def test_nested_no_grad(fg):
    with fg.no_grad():
        with fg.no_grad():
            assert fg.is_grad_enabled() is False
        assert fg.is_grad_enabled() is False
    assert fg.is_grad_enabled() is True


def run_in_thread(fn):
    result = []
    thread = threading.Thread(target=lambda: result.append(fn()))
    thread.start()
    thread.join()
    assert len(result) == 1, "the thread raised"
    return result[0]


def test_grad_mode_is_thread_local(fg, x):
    with fg.no_grad():
        enabled, tracked = run_in_thread(lambda: (fg.is_grad_enabled(), (x * 2).requires_grad))
        assert fg.is_grad_enabled() is False
    assert enabled is True and tracked is True


def test_disabling_grad_in_a_thread_does_not_affect_caller(fg, x):
    def worker():
        with fg.no_grad():
            return fg.is_grad_enabled()

    assert run_in_thread(worker) is False
    run_in_thread(lambda: fg.set_grad_enabled(False))
    assert fg.is_grad_enabled() is True
    assert (x * 2).requires_grad is True
