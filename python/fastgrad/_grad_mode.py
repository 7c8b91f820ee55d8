"""Grad-mode switches: no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode.

Written once for both backends, over the backend's flags (_prims.is_grad_enabled and
_prims._set_grad_enabled, _prims.is_inference_mode_enabled and _prims._set_inference_mode:
thread-local, in the C++ core or in the reference); see _methods for how the reference runs this
module too.
"""

import functools

from . import _prims  # the backend: relative, so that the reference's copy of this module gets its own

is_grad_enabled = _prims.is_grad_enabled
is_inference_mode_enabled = _prims.is_inference_mode_enabled


class _GradModeContext:
    """Base for no_grad / enable_grad / set_grad_enabled: a context manager that sets the flag on
    entry and restores the previous value on exit, and a decorator that runs a function inside it."""

    _mode = None

    def _switch(self):
        """Sets the mode; returns what _restore needs to set the previous one back."""
        previous = is_grad_enabled()
        _prims._set_grad_enabled(self._mode)
        return previous

    def _restore(self, previous):
        _prims._set_grad_enabled(previous)

    def __enter__(self):
        self._previous = self._switch()
        return self

    def __exit__(self, *exc):
        self._restore(self._previous)
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            previous = self._switch()
            try:
                return func(*args, **kwargs)
            finally:
                self._restore(previous)

        return wrapper


class no_grad(_GradModeContext):
    """Ops run inside record no graph: results do not require grad."""

    _mode = False

    def __new__(cls, func=None):
        self = super().__new__(cls)
        # `@no_grad` without parentheses decorates directly.
        return self(func) if callable(func) else self

    def __init__(self, func=None):
        pass


class enable_grad(no_grad):
    """Turns recording back on, e.g. inside a no_grad block."""

    _mode = True


class set_grad_enabled(_GradModeContext):
    """set_grad_enabled(False) switches recording off right away; used with `with`, the previous
    mode comes back at the end of the block."""

    def __init__(self, mode):
        self._previous = is_grad_enabled()
        self._mode = bool(mode)
        _prims._set_grad_enabled(self._mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _prims._set_grad_enabled(self._previous)
        return False

    def __call__(self, func):
        # As a decorator it must not change the mode now, only while `func` runs.
        _prims._set_grad_enabled(self._previous)
        return super().__call__(func)


class inference_mode(_GradModeContext):
    """no_grad, and more: the tensors made inside are inference tensors (Tensor.is_inference()),
    which autograd may not save for backward and which are written in place only in inference mode.
    inference_mode(False) switches it off, and grad mode on, as PyTorch's."""

    def __new__(cls, mode=True):
        # `@inference_mode` without parentheses decorates directly.
        return super().__new__(cls) if isinstance(mode, bool) else cls()(mode)

    def __init__(self, mode=True):
        self.mode = mode

    def _switch(self):
        previous = is_grad_enabled(), is_inference_mode_enabled()
        _prims._set_grad_enabled(not self.mode)
        _prims._set_inference_mode(self.mode)
        return previous

    def _restore(self, previous):
        _prims._set_grad_enabled(previous[0])
        _prims._set_inference_mode(previous[1])
