"""Gradient hooks, as PyTorch's: Tensor.register_hook and register_post_accumulate_grad_hook, and
grad_fn.register_prehook and register_hook.

Written once for both backends (see _shared). The backend keeps the hooks and its engine calls them
(_prims.add_tensor_hook, add_post_accumulate_grad_hook, add_node_prehook, add_node_hook: each
registers a function and returns one that removes it); here are PyTorch's checks of the arguments
and of what a hook returns, and the handle that removes a hook.
"""

import builtins

from . import _prims  # the backend: relative, so that the reference's copy of this module gets its own
from ._methods import register

Tensor = _prims.Tensor


class RemovableHandle:
    """Removes its hook: remove(), or leaving a `with` block. Removing twice does nothing more."""

    def __init__(self, remove):
        self._remove = remove

    def remove(self):
        self._remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.remove()


def _hook_name(hook):
    return getattr(hook, "__name__", "<unknown>")


def _check_replacement(hook, original, result):
    """PyTorch's checks of a gradient `result` that `hook` returned in place of `original` (None
    keeps it, for a tensor hook; takes it away, in a node hook's tuple)."""
    if result is None:
        return
    if original is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if not isinstance(result, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{builtins.type(result).__name__}'")
    if result.dtype != original.dtype:
        raise RuntimeError(
            f"hook '{_hook_name(hook)}' has changed the type of value (was {original.type()} got {result.type()})"
        )
    if result.shape != original.shape:
        raise RuntimeError(f"hook '{_hook_name(hook)}' has changed the size of value")


def _check_replacements(hook, originals, result):
    """The same for a node hook, which returns a tuple of gradients or None."""
    if result is None:
        return
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{builtins.type(result).__name__}'")
    if len(result) != len(originals):
        raise RuntimeError(
            f"hook '{_hook_name(hook)}' has returned an incorrect number of values (got {len(result)}, "
            f"but expected {len(originals)})"
        )
    for original, replacement in zip(originals, result):
        _check_replacement(hook, original, replacement)


def register_hook(self, hook):
    """hook(grad) runs each time the gradient w.r.t. this tensor is computed; a tensor it returns
    replaces that gradient (for a leaf, before it is accumulated into .grad)."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")

    def checked(grad):
        result = hook(grad)
        _check_replacement(hook, grad, result)
        return result

    return RemovableHandle(_prims.add_tensor_hook(self, checked))


def register_post_accumulate_grad_hook(self, hook):
    """hook(tensor) runs after the gradient of this leaf has been accumulated into its .grad."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")

    def checked(tensor):
        result = hook(tensor)
        if result is not None:
            _check_replacement(hook, tensor, result)  # PyTorch checks it as a gradient first
            raise RuntimeError("Tensor post accumulate grad hooks should return None.")

    return RemovableHandle(_prims.add_post_accumulate_grad_hook(self, checked))


def register_prehook(self, hook):
    """hook(grad_outputs) runs before this node; a tuple it returns replaces the gradients it gets."""

    def checked(grad_outputs):
        result = hook(grad_outputs)
        _check_replacements(hook, grad_outputs, result)
        return result

    return RemovableHandle(_prims.add_node_prehook(self, checked))


def register_node_hook(self, hook):
    """hook(grad_inputs, grad_outputs) runs after this node; a tuple it returns replaces the
    gradients it computed for its inputs (grad_inputs: one per next_functions entry, None where none)."""

    def checked(grad_inputs, grad_outputs):
        result = hook(grad_inputs, grad_outputs)
        _check_replacements(hook, grad_inputs, result)
        return result

    return RemovableHandle(_prims.add_node_hook(self, checked))


register("_hooks", globals())  # Tensor.register_hook, register_post_accumulate_grad_hook
_prims.Node.register_prehook = register_prehook
_prims.Node.register_hook = register_node_hook
