"""flatten_grads_: every parameter's gradient as a view of one flat buffer, for data parallelism.

Data-parallel training averages the replicas' gradients after each backward. With the gradients in
one contiguous buffer, that is one all-reduce of one tensor (mpi4py's `Allreduce` on
`buffer.numpy()`, which shares its memory, or a copy through shared memory) instead of one per
parameter: the idea of PyTorch DDP's `gradient_as_bucket_view=True` and apex's flattened gradients.
`parameters_to_vector` would copy instead.

Backward adds into an existing `.grad` in place (as PyTorch's AccumulateGrad, with grad mode off), so
the buffer fills as backward runs. What replaces a `.grad` detaches it from the buffer:
`zero_grad(set_to_none=True)` (the default of `Optimizer.zero_grad` and `Module.zero_grad`; use
`set_to_none=False`, which zeroes the buffer in place), assigning `.grad`, or
`backward(create_graph=True)`, whose gradients are added out of place. Calling `flatten_grads_`
again with the same buffer re-attaches the views.
"""

from ... import _prims
from ..._factories import zeros
from ..._grad_mode import no_grad
from ..module import _typename

Tensor = _prims.Tensor


def _parameters_requiring_grad(parameters):
    """The distinct parameters that require grad, in order (shared ones once, as DDP counts them)."""
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    distinct = {}
    for param in params:
        if not isinstance(param, Tensor):
            raise TypeError(f"expected torch.Tensor, but got: {_typename(param)}")
        if param.requires_grad:
            distinct.setdefault(id(param), param)
    return list(distinct.values())


def _check_buffer(buffer, dtype, numel):
    if not isinstance(buffer, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {_typename(buffer)}")
    fits = buffer.dim() == 1 and buffer.is_contiguous() and buffer.numel() == numel and buffer.dtype == dtype
    if not fits or buffer.requires_grad:
        raise ValueError(
            f"flatten_grads_: buffer must be a contiguous 1-D tensor of {numel} elements of dtype {dtype} that "
            f"does not require grad, but got shape {tuple(buffer.shape)}, dtype {buffer.dtype}, "
            f"requires_grad={buffer.requires_grad}"
        )


def flatten_grads_(parameters, buffer=None):
    """Makes each parameter's `.grad` a view of its slice of one flat, contiguous buffer, in order,
    and returns the buffer. Gradients the parameters already have are copied in; the rest start at
    zero. Parameters that do not require grad are left out. `buffer`, if given, is used instead of a
    new one (memory of your own, such as shared memory). All parameters must have one dtype: call it
    once per dtype otherwise."""
    params = _parameters_requiring_grad(parameters)
    if not params:
        raise ValueError("flatten_grads_ got no parameters that require grad")
    dtype = params[0].dtype
    for param in params:
        if param.dtype != dtype:
            raise TypeError(
                f"flatten_grads_ expects parameters of one dtype, but got {dtype} and {param.dtype}: "
                "call it once per dtype"
            )
    numel = sum(param.numel() for param in params)
    if buffer is None:
        buffer = zeros(numel, dtype=dtype)
    else:
        _check_buffer(buffer, dtype, numel)
    with no_grad():
        views, start = [], 0
        for param in params:
            views.append(buffer[start : start + param.numel()].view(param.shape))
            start += param.numel()
        # Every old gradient is read before any slice is written: one may be a view of this buffer.
        old_grads = [None if param.grad is None else param.grad.detach().clone() for param in params]
        for param, view, old_grad in zip(params, views, old_grads):
            if old_grad is None:
                view.zero_()
            else:
                view.copy_(old_grad)
            param.grad = view
    return buffer
