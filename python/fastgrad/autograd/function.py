"""fastgrad.autograd.Function: custom differentiable operations, as torch.autograd.Function.

    class MyExp(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            y, = ctx.saved_tensors
            return grad * y

    y = MyExp.apply(x)  # y.grad_fn.name() == "MyExpBackward"

Written once for both backends over one primitive, `_prims.record_function`, which makes the graph
node (in C++ for fastgrad, in Python for fastgrad.reference). The engine runs that node in tape
order like any other, calling the ctx's `_run_backward`, which calls the user's backward and checks
its result as PyTorch does.

As in PyTorch, the ctx of a call is an instance of a class made for each Function and named like its
node (MyExpBackward). The node holds the ctx; the ctx refers neither to the node nor to the outputs
(a saved output is kept without its history), so the graph is freed by reference counting alone.
Tensors kept as plain ctx attributes (ctx.y = y) rather than saved would close a cycle through an
output, as PyTorch warns: save them with ctx.save_for_backward.
"""

import functools
import inspect

from .. import _prims
from .._grad_mode import no_grad
from .._methods import _holds_tensors

__all__ = ["Function", "FunctionCtx", "BackwardFunction", "DelayedError", "once_differentiable"]

Tensor = _prims.Tensor


class FunctionCtx:
    """What forward leaves for backward: saved tensors, marks, and any attribute (ctx.k = 3)."""

    materialize_grads = True
    needs_input_grad = ()
    _saved = None  # the backend's saved tensors, once the call is recorded

    def save_for_backward(self, *tensors):
        """Keeps tensors (or None) for backward, checked against in-place changes when read back."""
        self.to_save = tensors

    def mark_non_differentiable(self, *args):
        """Outputs that get no grad_fn; backward still receives a (zero) gradient for each."""
        self.non_differentiable = args

    def set_materialize_grads(self, value):
        """False: backward receives None, instead of zeros, for outputs that no gradient reached."""
        self.materialize_grads = value

    def mark_dirty(self, *args):
        raise NotImplementedError(
            "ctx.mark_dirty (a custom Function that modifies its inputs in place) is not supported yet"
        )

    @property
    def saved_tensors(self):
        return () if self._saved is None else self._saved.unpack()


class BackwardFunction(FunctionCtx):
    """Base of the per-Function ctx classes (MyExpBackward): runs the Function's backward for the engine."""

    _forward_cls = None

    def _run_backward(self, grads):
        """A gradient or None per output in; a gradient or None per tensor argument out, after
        PyTorch's checks of what the user's backward returned (the backend's node then fits each
        gradient to its input's shape and dtype)."""
        if self.materialize_grads:
            grads = [
                _prims.full(meta[0], 0, meta[1]) if grad is None and meta is not None else grad
                for grad, meta in zip(grads, self._output_meta)
            ]
        cls = self._forward_cls
        if cls.backward is not Function.backward and cls.vjp is not Function.vjp:
            raise RuntimeError(
                "Implementing both 'backward' and 'vjp' for a custom Function is not allowed. You should "
                "only implement one of them."
            )
        user_backward = cls.vjp if cls.vjp is not Function.vjp else cls.backward
        result = user_backward(self, *grads)
        result = result if isinstance(result, tuple) else (result,)
        name, expected = type(self).__name__, len(self._tensor_args)
        if len(result) > expected and all(grad is None for grad in result[expected:]):
            result = result[:expected]  # extra Nones are allowed
        if len(result) != expected:
            raise RuntimeError(
                f"function {name} returned an incorrect number of gradients (expected {expected}, got {len(result)})"
            )
        per_edge = []
        for position, (grad, is_tensor) in enumerate(zip(result, self._tensor_args)):
            if not is_tensor:
                if grad is not None:
                    raise RuntimeError(
                        f"function {name} returned a gradient different than None at position "
                        f"{position + 1}, but the corresponding forward input was not a Variable"
                    )
                continue
            if grad is not None and not isinstance(grad, Tensor):
                raise RuntimeError(f"expected Variable or None (got {type(grad).__name__})")
            per_edge.append(grad)
        return per_edge


class Function:
    """Base class of custom differentiable operations: subclasses define the static methods
    `forward(ctx, *args, **kwargs)` (or `forward(*args, **kwargs)` plus `setup_context(ctx, inputs,
    output)`) and `backward(ctx, *grad_outputs)`, and are called as `MyFn.apply(*args)`."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # The node's name: cls.__name__ + "Backward", or the library's own Functions' _node_name
        # (PyTorch's node name of the op a Function implements, such as "GridSampler2DBackward0").
        name = cls.__dict__.get("_node_name", cls.__name__ + "Backward")
        cls._backward_cls = type(name, (BackwardFunction,), {"_forward_cls": cls})

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use new-style autograd "
            "function with static forward method. (Example: https://pytorch.org/docs/stable/autograd.html#torch."
            "autograd.Function)"
        )

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    vjp = backward

    @classmethod
    def apply(cls, *args, **kwargs):
        """Runs forward with grad mode off. When grad mode is on and some tensor argument requires
        grad, the tensor outputs get a node (cls.__name__ + "Backward") whose backward is cls.backward."""
        separate_setup = cls.setup_context is not Function.setup_context
        if separate_setup:  # as PyTorch: setup_context sees the arguments with their defaults filled in
            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, bound.kwargs
        ctx = cls._backward_cls()
        ctx.needs_input_grad = tuple(isinstance(arg, Tensor) and arg.requires_grad for arg in args)
        with no_grad():
            if separate_setup:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        if not (_prims.is_grad_enabled() and any(ctx.needs_input_grad)):
            return output
        return _record(ctx, args, output)


def _record(ctx, args, output):
    """Gives the outputs of one Function call their node; returns them as forward did (a tensor
    returned as an input is returned as a new alias, so that the input keeps its own history)."""
    to_save = ctx.__dict__.pop("to_save", ())  # popped: the ctx must not hold the outputs
    non_differentiable = ctx.__dict__.pop("non_differentiable", ())
    for i, value in enumerate(to_save):
        if not (value is None or isinstance(value, Tensor)):
            raise TypeError(
                f"save_for_backward can only save variables, but argument {i} is of type {type(value).__name__}"
            )
    outputs = list(output) if isinstance(output, tuple) else [output]
    differentiable = []
    for i, out in enumerate(outputs):
        if not isinstance(out, Tensor):
            differentiable.append(None)
            continue
        keep = out.dtype.is_floating_point and not any(out is marked for marked in non_differentiable)
        if any(out is arg for arg in args):
            outputs[i] = out = out.detach()
        differentiable.append(out if keep else None)
    ctx._tensor_args = tuple(isinstance(arg, Tensor) for arg in args)
    ctx._output_meta = tuple((out.shape, out.dtype) if isinstance(out, Tensor) else None for out in outputs)
    inputs = [arg for arg in args if isinstance(arg, Tensor)]
    if _prims._capturing() and not _holds_tensors(list(ctx.__dict__.values())):
        _record_replayable(ctx, inputs, differentiable, list(to_save))
    else:  # a ctx attribute holding a tensor of this call: a compiled function falls back here
        name = type(ctx).__name__
        ctx._saved = _prims.record_function(ctx._run_backward, name, inputs, differentiable, list(to_save))
    return tuple(outputs) if isinstance(output, tuple) else outputs[0]


def _record_replayable(ctx, inputs, outputs, to_save):
    """The node of a call while a compiled function captures: a step that its replays run again for
    their own outputs (_prims.record_node), each backward with a ctx of its own that has this call's
    attributes (numbers, flags: no tensor) and the node's saved tensors."""
    attributes = dict(ctx.__dict__)

    def backward(grads, saved):
        node_ctx = type(ctx).__new__(type(ctx))
        node_ctx.__dict__.update(attributes)
        node_ctx._saved = saved
        return node_ctx._run_backward(grads)

    _prims.record_node(backward, type(ctx).__name__, inputs, outputs, to_save)


class DelayedError(Function):
    """The node once_differentiable gives its gradients in a create_graph backward: going back
    through it is an error."""

    @staticmethod
    def forward(ctx, *tensors):
        return tensors if len(tensors) > 1 else tensors[0]

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("trying to differentiate twice a function that was marked with @once_differentiable")


def once_differentiable(fn):
    """Marks a backward that is not itself differentiable: it runs with grad mode off, and in a
    create_graph backward (when an incoming gradient requires grad) its gradients come out of a
    DelayedError node, as in PyTorch, so that differentiating them again is an error."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            outputs = fn(ctx, *args)
        if not (_prims.is_grad_enabled() and any(isinstance(arg, Tensor) and arg.requires_grad for arg in args)):
            return outputs
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        return DelayedError.apply(*[None if out is None else out.detach().requires_grad_() for out in outputs])

    return wrapper
