"""Gradient clipping: clip_grad_norm_ (get_total_norm, then clip_grads_with_norm_) and clip_grad_value_.

On the CPU, PyTorch's foreach and per-tensor paths give the same numbers; `foreach` is accepted
and both run the per-tensor loop."""

import types
import warnings

from ... import _prims
from ..._factories import tensor
from ..._grad_mode import no_grad
from ..._methods import FUNCTIONS
from ...linalg import vector_norm

Tensor = _prims.Tensor
stack = FUNCTIONS["stack"]


def _tensor_list(tensors):
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _grads(parameters):
    return [p.grad for p in _tensor_list(parameters) if p.grad is not None]


def _by_dtype(tensors):
    """tensors grouped by dtype, groups in the order their dtype first appears (PyTorch's grouping,
    which decides the order in which the norms are combined)."""
    groups = {}
    for t in tensors:
        groups.setdefault(t.dtype, []).append(t)
    return [t for group in groups.values() for t in group]


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the tensors' norms: the norm of all their elements as one vector."""
    tensors = _tensor_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    with no_grad():
        norms = [vector_norm(t, norm_type) for t in _by_dtype(tensors)]
        total_norm = vector_norm(stack(norms), norm_type)
    if error_if_nonfinite and (total_norm.isnan() | total_norm.isinf()).item():
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot be "
            "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
            "`error_if_nonfinite=False`"
        )
    return total_norm


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scales the gradients by min(max_norm / (total_norm + 1e-6), 1)."""
    grads = _grads(parameters)
    if not grads:
        return
    with no_grad():
        clip_coef_clamped = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
        for grad in grads:
            grad.mul_(clip_coef_clamped)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients so that their total norm is at most max_norm; returns that total norm
    (before clipping)."""
    if not isinstance(parameters, Tensor):
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)  # a generator is read once, for both steps
        if is_generator and not parameters:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=2)
    total_norm = get_total_norm(_grads(parameters), norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient into [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    with no_grad():
        for grad in _grads(parameters):
            grad.clamp_(min=-clip_value, max=clip_value)
