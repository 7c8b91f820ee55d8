"""fastgrad.autograd.backward and fastgrad.autograd.grad, as torch.autograd's.

The arguments are taken apart here, once for both backends; the checks of the outputs and their
gradients and the engine run are the backend's `_prims.run_backward`, which Tensor.backward uses too.
"""

import warnings

from .. import _prims

__all__ = ["backward", "grad"]

Tensor = _prims.Tensor


def _tensors(value):
    """A tensor or a sequence of them, as a tuple (a number fails as PyTorch's: 'int' object is not iterable)."""
    return (value,) if isinstance(value, Tensor) else tuple(value)


def _outputs_and_grads(outputs, grad_outputs):
    outputs = _tensors(outputs)
    for out in outputs:
        if not isinstance(out, Tensor):
            raise AssertionError("Expected output to be a fastgrad.Tensor")
    grads = (None,) * len(outputs) if grad_outputs is None else _tensors(grad_outputs)[: len(outputs)]
    if len(grads) != len(outputs):
        raise RuntimeError(f"got {len(outputs)} tensors and {len(grads)} gradients")
    return list(outputs), list(grads)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates into the .grad of the leaves the gradients of `tensors` (a tensor or a sequence),
    seeded with `grad_tensors` (one per tensor; None means ones, for single-element tensors only).
    With create_graph, the backward pass is recorded, so the gradients can be differentiated again;
    the graph is then kept unless retain_graph=False."""
    if inputs is not None:
        raise NotImplementedError("autograd.backward(inputs=...) is not supported yet; use autograd.grad")
    tensors, grads = _outputs_and_grads(tensors, grad_tensors)
    create_graph = bool(create_graph)
    _prims.run_backward(
        tensors, grads, create_graph if retain_graph is None else bool(retain_graph), None, create_graph
    )


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph=False,
    only_inputs=True,
    allow_unused=None,
    is_grads_batched=False,
    materialize_grads=False,
):
    """The gradients of `outputs` with respect to `inputs` (tensors, leaves or not), as a tuple, or a
    dict for a dict of inputs. No .grad is touched, and only the part of the graph that leads to
    the inputs runs. An input the outputs do not depend on is an error, unless allow_unused (its
    gradient is then None, or zeros with materialize_grads). With create_graph, the gradients are
    computed by recorded ops, so they can be differentiated again."""
    if is_grads_batched:
        raise NotImplementedError("is_grads_batched=True is not supported yet")
    if not only_inputs:
        warnings.warn(
            "only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate "
            "gradient for other parts of the graph, please use torch.autograd.backward.",
            FutureWarning,
            stacklevel=2,
        )
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, but got: allow_unused=False."
        )
    keys = list(inputs) if isinstance(inputs, dict) else None
    inputs = _tensors(inputs.values() if keys is not None else inputs)
    outputs, grads = _outputs_and_grads(outputs, grad_outputs)
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    create_graph = bool(create_graph)
    result = _prims.run_backward(
        outputs, grads, create_graph if retain_graph is None else bool(retain_graph), list(inputs), create_graph
    )
    for i, g in enumerate(result):
        if g is None and not (allow_unused or materialize_grads):
            raise RuntimeError(
                f"The differentiated Tensor at index {i} appears to not have been used in the graph. "
                "Set allow_unused=True if this is the desired behavior."
            )
    if materialize_grads:
        result = [_prims.full(t.shape, 0, t.dtype) if g is None else g for t, g in zip(inputs, result)]
    return dict(zip(keys, result)) if keys is not None else tuple(result)
