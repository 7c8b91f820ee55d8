"""Grad mode, backward nodes (Function), saved tensors, and the engine that runs backward.

A Function is the backward of one recorded op. `Op.run(*inputs)` computes the op with `forward`
and, when grad mode is on and some input requires grad, makes the node the output's grad_fn with
one edge per input. Edges point at the inputs' own grad_fns, or at the AccumulateGrad sink of a
leaf. Nodes are numbered when they are recorded; as a node is always recorded after the nodes of
its inputs, running the reachable nodes in decreasing number (the reverse tape) runs each node
once, after every gradient flowing into it has arrived and been summed.

Backward formulas are written with the tensor's own operators and methods. The engine runs them
under no_grad, or, with create_graph, in grad mode: then they record a graph of their own, and the
gradients they return can be differentiated again (a formula that computes with raw loops has a
composed or recorded form for grad mode). A custom Function (fastgrad.autograd.Function, shared)
is recorded as a CustomFunction node whose backward calls back into Python (record_function).
With `inputs`, the engine is autograd.grad: it runs only the nodes leading to them and returns
their gradients.
"""

import contextlib
import itertools
import math
import threading
import warnings
import weakref

from .._anomaly import forward_traceback, warn_failed_node
from .._types import LEGACY_TYPE_NAME, SCALAR_TYPE_NAME
from ._tensor import VIEW_OF_CUSTOM_FUNCTION, VIEW_OF_MULTI_OUTPUT_NODE, Tensor, alias, full

# ---- grad mode: a per-thread flag, as in PyTorch (a new thread starts with grad on)

_mode = threading.local()


def is_grad_enabled():
    return getattr(_mode, "enabled", True)


def _set_grad_enabled(enabled):
    _mode.enabled = enabled


@contextlib.contextmanager
def _grad_mode(enabled):
    """The ops' and the engine's own switch, as the core's GradModeGuard. The public no_grad,
    enable_grad and set_grad_enabled are fastgrad's _grad_mode (shared), over the flag above."""
    previous = is_grad_enabled()
    _set_grad_enabled(enabled)
    try:
        yield
    finally:
        _set_grad_enabled(previous)


def no_grad():
    return _grad_mode(False)


def enable_grad():
    return _grad_mode(True)


# ---- anomaly mode: process-wide, as PyTorch's (fastgrad.autograd.anomaly_mode is the public side)

_anomaly = {"enabled": False, "check_nan": True}


def is_anomaly_enabled():
    return _anomaly["enabled"]


def is_anomaly_check_nan_enabled():
    return _anomaly["check_nan"]


def set_anomaly_enabled(enabled, check_nan=True):
    for position, (name, value) in enumerate((("enabled", enabled), ("check_nan", check_nan)), 1):
        if not isinstance(value, bool):  # PyTorch's switch takes bools only (no 1, no None)
            raise TypeError(
                f"set_anomaly_enabled(): argument '{name}' (position {position}) must be bool, not "
                f"{type(value).__name__}"
            )
    _anomaly.update(enabled=enabled, check_nan=check_nan)


# ---- saved tensors

_FREED = object()
_BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have already "
    "been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). "
    "Specify retain_graph=True if you need to backward through the graph a second time or if you need to access "
    "saved tensors after calling backward."
)


def _producer_name(node_name):
    """A node as PyTorch's messages name it (its Node::forward_op_name): "Exp" for ExpBackward0,
    "Squeeze1" for SqueezeBackward1, "MyFn" for MyFnBackward."""
    op, found, number = node_name.rpartition("Backward")
    if not found or not (number == "" or number.isdigit()):
        return node_name
    return op + ("" if number == "0" else number)


class SavedTensor:
    """A value kept for backward. A tensor is stamped with its storage version, so that a later
    in-place change is an error instead of a silently wrong gradient; an op's own output is kept
    as a history-free alias so that node and output do not keep each other alive (an output is
    saved once it knows its output_nr). Unpacked in grad mode (a create_graph backward), a saved
    output is given back with its history, its node's output, as PyTorch's SavedVariable does."""

    __slots__ = ("value", "version", "is_output", "output_nr")

    def __init__(self, value, is_output=False):
        self.value = alias(value) if is_output else value
        self.version = None if value is None else value._storage.version
        self.is_output = is_output
        self.output_nr = None if value is None else value._output_nr

    def move_output(self, result, self_):
        """An in-place op computed into `result` and wrote it into `self_`: a saved `result` becomes
        `self_` at its new version, as PyTorch's in-place node saves self itself (so that a later
        in-place change of it is detected)."""
        if self.is_output and getattr(self.value, "_storage", None) is result._storage:
            self.value, self.version = alias(self_), self_._storage.version

    def unpack(self, owner_name, owner):
        """The value, checked; `owner_name` is the saving node's name, for the error about a modified
        output, and `owner` the node itself (None once it is gone), which a saved output comes from."""
        value = self.value
        if value is _FREED:
            raise RuntimeError(_BACKWARD_TWICE)
        if self.version is not None and value._storage.version != self.version:
            if self.is_output:
                producer = f", which is output {self.output_nr} of {_producer_name(owner_name)},"
            elif value._grad_fn is not None:
                producer = f", which is output {value._output_nr} of {_producer_name(value._grad_fn.name())},"
            else:
                producer = ""
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace operation: "
                f"[fastgrad.{LEGACY_TYPE_NAME[value._dtype]} [{', '.join(map(str, value._shape))}]]{producer} is at "
                f"version {value._storage.version}; expected version {self.version} instead."
            )
        if self.is_output and owner is not None and value._dtype.is_floating_point and is_grad_enabled():
            value = alias(value)
            value._grad_fn, value._output_nr = owner, self.output_nr
        return value


# ---- nodes

_sequence = itertools.count(1)  # 0 is the position of the sinks
NO_EDGE = (None, 0)


class Function:
    """A backward node. Subclasses are named after the PyTorch node they mirror and define
    `forward(*inputs)` (the op; may `save` what backward needs) and `backward(*grads)` (one gradient
    per input, None for inputs that get none)."""

    scalar_edge = True  # a Python-number operand shows as an empty edge, as PyTorch wraps it in a tensor
    # False for ops that, as PyTorch's, give an integer result (of an integer tensor with a history,
    # see check_differentiable_output) no node instead of raising: it does not require grad.
    records_integer_result = True
    num_outputs = 1
    # A node that no gradient reached is skipped: the built-in formulas would return no gradient (as
    # PyTorch's do for undefined inputs). A custom Function still runs, on zeros, as in PyTorch.
    runs_without_grads = False
    sequence_nr = 0
    next_edges = ()
    inputs = ()
    _saved = ()
    _retained = ()
    _hooks = None  # NodeHooks, from the first registration on

    @classmethod
    def run(cls, *inputs, **params):
        """The op on `inputs` (tensors, or Python numbers for the second operand of arithmetic),
        recorded when grad mode is on and some input requires grad. An op with several results
        (max(dim) gives values and indices) returns the differentiable one first."""
        node = cls()
        result = node.forward(*inputs, **params)
        if should_record(inputs):
            out = result if isinstance(result, Tensor) else result[0]
            if not (cls.records_integer_result or out._dtype.is_floating_point):
                return result
            check_differentiable_output(out)
            node.connect(inputs)
            out._grad_fn, out._output_nr = node, 0
        return result

    def connect(self, inputs, edges=None):
        """Takes this node's place on the tape, with an edge per input (or the given edges), and
        remembers each input's shape and dtype (or the number itself) for the backward formulas."""
        # Checked here, not when saving: forward saves whether or not the node is then recorded.
        if any(saved.value is not None and saved.value._storage.inference for saved in self._saved):
            raise RuntimeError(
                "Inference tensors cannot be saved for backward. Please do not use Tensors created in inference mode "
                "in computation tracked by autograd. To work around this, you can make a clone to get a normal tensor "
                "and use it in autograd, or use `torch.no_grad()` instead of `torch.inference_mode()`."
            )
        if edges is None:
            edges = [
                gradient_edge(x) if isinstance(x, Tensor) else NO_EDGE
                for x in inputs
                if self.scalar_edge or isinstance(x, Tensor)
            ]
        # Numbered after the edges are made: making one may record a node (a stale view's fresh
        # history), which must come earlier on the tape.
        self.sequence_nr = next(_sequence)
        if _anomaly["enabled"]:
            self.metadata["traceback_"] = forward_traceback()
        self.next_edges = tuple(edges)
        self.inputs = [(x._shape, x._dtype) if isinstance(x, Tensor) else x for x in inputs]
        return self

    def forward(self, *inputs):
        raise NotImplementedError

    def backward(self, *grads):
        raise NotImplementedError

    def apply(self, grads):
        """Gradients of the outputs in, gradients of the inputs out (the engine's entry point)."""
        result = self.backward(*grads)
        return result if isinstance(result, tuple) else (result,)

    def name(self):
        return type(self).__name__

    @property
    def next_functions(self):
        return self.next_edges

    @property
    def metadata(self):
        if "_metadata" not in self.__dict__:
            self._metadata = {}
        return self._metadata

    def __repr__(self):  # without the namespace of PyTorch's C++-only nodes ("torch::autograd::")
        return f"<{self.name().rsplit('::', 1)[-1]} object at {hex(id(self))}>"

    # ---- what backward needs
    def save(self, value, *, is_output=False):
        """Keeps a tensor (or None, for an absent optional input) for backward."""
        self._saved = [*self._saved, SavedTensor(value, is_output)]

    def unpack(self, i):
        return self._saved[i].unpack(self.name(), self)

    def release_saved(self):
        for saved in self._saved:
            saved.value = _FREED

    def needs_input_grad(self, i):
        return i < len(self.next_edges) and self.next_edges[i][0] is not None

    def is_scalar(self, i):
        return not isinstance(self.inputs[i], tuple)

    def operand(self, i):
        """Saved input i, or the Python number given for it as a 0-d tensor of input 0's dtype."""
        if self.is_scalar(i):
            return full((), self.inputs[i], self.inputs[0][1])
        return self.unpack(i)

    def reduce(self, i, grad):
        """The gradient for input i: broadcasting undone, in the input's dtype."""
        shape, dtype = self.inputs[i]
        return sum_to(grad, shape).to(dtype)

    # ---- retain_grad()
    def retain_output(self, tensor):
        self._retained = [weakref.ref(tensor)]

    def forget_output(self):
        self._retained = ()

    def _fill_retained_grads(self, grads):
        for ref, grad in zip(self._retained, grads):
            out = ref()
            if out is not None and grad is not None:  # as PyTorch's retains_grad hook: never in place
                out._grad = grad.clone() if out._grad is None else out._grad + grad


class AccumulateGrad(Function):
    """The sink of every edge that reaches a leaf: adds the incoming gradient into `variable.grad`.
    It has nothing downstream, so it may run last (tape position 0) although it is made lazily."""

    def __init__(self, variable):
        self.variable = variable

    def name(self):
        return "torch::autograd::AccumulateGrad"  # as PyTorch, whose C++-only nodes carry their namespace

    def backward(self, grad):
        variable = self.variable
        if not variable.requires_grad:  # it stopped requiring grad after the forward: keeps no gradient
            return ()
        if variable._grad is not None:
            # In grad mode (create_graph) out of place, as in PyTorch: a .grad with history is never
            # written in place.
            variable._grad = variable._grad + grad if is_grad_enabled() else variable._grad.add_(grad)
        elif is_grad_enabled():  # create_graph: a recorded copy (CopyBackwards), as PyTorch's
            variable._grad = full(grad._shape, 0, grad._dtype).copy_(grad)
        else:  # a copy, so that .grad never aliases another tensor (an expanded view, a user's gradient)
            variable._grad = grad.clone()
        return ()


def refresh_view_history(t):
    """If t is a view whose history is stale (Tensor._history_stale), gives it a fresh grad_fn: its
    region of the base's current value (AsStridedBackward0, as PyTorch). Runs before a node that
    takes t as input is recorded, so that the fresh node comes earlier on the tape."""
    if t._history_stale():
        if not t._view_tracks_history:
            raise RuntimeError(view_without_history_error(t, "its base or another view of its base has been"))
        from ._shape import as_strided  # the view ops are built on this module

        base = t._view_base
        with enable_grad():
            fresh = as_strided(base, t._shape, t._strides, t._offset - base._offset)
        set_history(t, fresh._grad_fn, 0)
        t._view_version = t._storage.version


def view_without_history_error(view, what):
    """PyTorch's error for a view without history (made under no_grad, or a view of one: then it names
    the view's grad_fn; or returned by a custom Function; or a part of split/unbind) that `what` ("is
    being" / "its base or another view of its base has been") modified in place."""
    if view._view_origin is VIEW_OF_MULTI_OUTPUT_NODE:
        if view._grad_fn is not None:
            producer = _producer_name(view._grad_fn.name())
            subject = f"Output {view._output_nr} of {producer} is a view and {what} modified inplace."
        else:
            subject = f"A view was created in no_grad mode and {what} modified inplace with grad mode enabled."
        return (
            f"{subject} This view is the output of a function that returns multiple views. Such functions do not "
            "allow the output views to be modified inplace. You should replace the inplace operation by an "
            "out-of-place one."
        )
    if view._view_origin is VIEW_OF_CUSTOM_FUNCTION and view._grad_fn is not None:
        return (
            f"Output {view._output_nr} of {_producer_name(view._grad_fn.name())} is a view and {what} modified "
            "inplace. This view was created inside a custom Function (or because an input was returned as-is) "
            "and the autograd logic to handle view+inplace would override the custom backward associated with "
            "the custom Function, leading to incorrect gradients. This behavior is forbidden. You can fix this by "
            "cloning the output of the custom Function."
        )
    subject = "A view was created in"
    if view._grad_fn is not None:
        subject = (
            f"Output {view._output_nr} of {_producer_name(view._grad_fn.name())} is a view of a view which "
            "was created in"
        )
    return (
        f"{subject} no_grad mode and {what} modified inplace with grad mode enabled. Given that this use case is "
        "ambiguous and error-prone, it is forbidden. You can clarify your code by moving both the view and the "
        "inplace either both inside the no_grad block (if you don't want the inplace to be tracked) or both "
        "outside (if you want the inplace to be tracked)."
    )


def set_history(t, fn, output_nr):
    """Makes output `output_nr` of `fn` the history of `t`, whose values an in-place write (or a
    refresh of a view) replaced. As PyTorch (since 2.0), a retain_grad() moves along to the new
    grad_fn, so t.grad is the gradient of t's current value."""
    if t._retains_grad and t._grad_fn is not None:
        t._grad_fn.forget_output()
    t._grad_fn, t._output_nr = fn, output_nr
    if t._retains_grad:
        fn.retain_output(t)


def gradient_edge(t):
    """The edge along which a gradient for `t` travels: its grad_fn, its leaf sink, or none."""
    refresh_view_history(t)
    if not t.requires_grad:
        return NO_EDGE
    if t._grad_fn is not None:
        return t._grad_fn, t._output_nr
    if not t._requires_grad_leaf:  # a view made under no_grad: it requires grad only through its base
        return NO_EDGE
    sink = t._accumulator and t._accumulator()
    if sink is None:
        sink = AccumulateGrad(t)
        t._accumulator = weakref.ref(sink)
    return sink, 0


def check_differentiable_output(out):
    """PyTorch's check when an op gives its output a node: the output is of a floating dtype. An
    integer tensor has a history only after an in-place comparison into it (eq_) with an operand that
    requires grad; as PyTorch, out-of-place ops on it then raise, while in-place ones write through it
    (computing_in_place_result: PyTorch's rebase_history makes no such check)."""
    if not out._dtype.is_floating_point and not _in_place_result.active:
        raise RuntimeError(f"Autograd not support dtype: {SCALAR_TYPE_NAME[out._dtype]}")


class _InPlaceResult(threading.local):
    active = False


_in_place_result = _InPlaceResult()


@contextlib.contextmanager
def computing_in_place_result():
    """While open, the ops on this thread compute the result of an in-place write (_apply_inplace),
    which check_differentiable_output lets through."""
    outer, _in_place_result.active = _in_place_result.active, True
    try:
        yield
    finally:
        _in_place_result.active = outer


def should_record(inputs):
    """Does any input require grad while grad mode is on? Then ops record a node. Refreshes stale views."""
    if not is_grad_enabled():
        return False
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    for t in tensors:
        refresh_view_history(t)
    return any(t.requires_grad for t in tensors)


def sum_to(grad, shape):
    """The one place where the gradient of a broadcast input is summed back to the input's shape:
    over the leading dims broadcasting added and the size-1 dims it stretched."""
    shape = tuple(shape)
    if grad._shape == shape:
        return grad
    lead = grad.dim() - len(shape)
    dims = [*range(lead), *(lead + i for i, n in enumerate(shape) if n == 1 and grad._shape[lead + i] != 1)]
    return (grad.sum(dims, keepdim=True) if dims else grad).reshape(shape)


# ---- custom Functions (fastgrad.autograd.Function)


class SavedTensors:
    """The tensors a custom Function saved with ctx.save_for_backward. Shared by its node, which
    frees them after backward (unless retain_graph), and its ctx, which reads them
    (ctx.saved_tensors); so the ctx needs no reference to the node, which holds the ctx: no cycle."""

    def __init__(self, owner_name):
        self.items = []  # a SavedTensor per saved value, None for a None
        self.owner_name = owner_name
        self.owner = None  # a weak reference to the node, which holds this (through the ctx)
        self.released = False

    def unpack(self):
        if self.released:
            raise RuntimeError(_BACKWARD_TWICE)
        owner = self.owner()
        return tuple(None if item is None else item.unpack(self.owner_name, owner) for item in self.items)


def _expandable_to(shape, target):
    """Can a tensor of `shape` be broadcast to `target`? (Then a gradient of shape `target` sums back.)"""
    lead = len(target) - len(shape)
    return lead >= 0 and all(n in (1, m) for n, m in zip(shape, target[lead:]))


class CustomFunction(Function):
    """A custom Function's node. `backward` is the shared Python code (BackwardFunction._run_backward
    in fastgrad/autograd/function.py): given a gradient or None per output, it calls the user's
    backward, checks what comes back against the forward's arguments, and returns a gradient or None
    per tensor argument (per edge). Here, as PyTorch's engine does for every node, each gradient is
    summed to its input's shape if it broadcasts to it and converted to its dtype."""

    runs_without_grads = True

    def __init__(self, name, backward, num_outputs, saved):
        self._name, self._backward, self.num_outputs, self._saved_tensors = name, backward, num_outputs, saved

    def name(self):
        return self._name

    def release_saved(self):
        for item in self._saved_tensors.items:
            if item is not None:
                item.value = _FREED
        self._saved_tensors.released = True

    def apply(self, grads):
        result = list(self._backward(tuple(grads)))  # a Python exception propagates as itself
        out = []
        for k, ((fn, _), grad) in enumerate(zip(self.next_edges, result)):
            if grad is None or fn is None:
                out.append(None)
                continue
            shape, dtype = self.inputs[k]
            if grad._shape != shape:
                if not _expandable_to(shape, grad._shape):
                    raise RuntimeError(
                        f"Function {self._name} returned an invalid gradient at index {k} - got "
                        f"{list(grad._shape)} but expected shape compatible with {list(shape)}"
                    )
                grad = sum_to(grad, shape)
            out.append(grad.to(dtype))
        return tuple(out)


def record_function(backward, name, inputs, outputs, to_save):
    """Makes the node of one custom Function call: an edge per tensor argument (`inputs`), and the
    grad_fn of each differentiable output (`outputs`: the forward's results in order, None for
    those that are not differentiable tensors; a position is an output_nr). Saves `to_save`
    (tensors or None), an output without its history. Returns what ctx.saved_tensors reads."""
    saved = SavedTensors(name)
    node = CustomFunction(name, backward, len(outputs), saved).connect(inputs)
    saved.owner = weakref.ref(node)
    for i, out in enumerate(outputs):
        if out is not None:
            out._grad_fn, out._output_nr = node, i
            if out._view_base is not None:
                # A view made in forward: its history is this node, which writes through it would
                # bypass, as PyTorch refuses.
                out._view_tracks_history, out._view_origin = False, VIEW_OF_CUSTOM_FUNCTION
    saved.items = [
        None if value is None else SavedTensor(value, any(value is out for out in outputs)) for value in to_save
    ]
    return saved


def record_node(backward, name, inputs, outputs, to_save):
    """The node of an op composed in Python: record_function's, whose backward(grads, saved) is given
    the node's saved tensors."""
    saved = []
    saved.append(record_function(lambda grads: backward(grads, saved[0]), name, inputs, outputs, to_save))


# ---- gradient hooks (Tensor.register_hook, ...: their checks and handles are fastgrad's _hooks, shared)


class LeafHooks:
    """A leaf's hooks (Tensor._hooks): before its gradient is accumulated into .grad, and after."""

    def __init__(self):
        self.pre, self.post_accumulate = [], []


class NodeHooks:
    """A node's hooks: those of its output tensors (by output_nr; the outputs in the order of their
    first registration, as PyTorch keeps them), and the node's own."""

    def __init__(self):
        self.outputs, self.pre, self.post = {}, [], []


class _Hook:
    """A registered function; None once removed, so that a pass that has yet to reach it skips it."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn


def _add_hook(hooks, fn):
    """Appends fn to the list `hooks`; returns the function that removes it."""
    hook = _Hook(fn)
    hooks.append(hook)

    def remove():
        if hook.fn is not None:
            hook.fn = None
            hooks.remove(hook)

    return remove


def _live(hooks):
    """The functions of `hooks` in registration order, over a copy (a hook may register or remove
    hooks), skipping those removed meanwhile."""
    for hook in list(hooks):
        fn = hook.fn
        if fn is not None:
            yield fn


def _node_hooks(node):
    if node._hooks is None:
        node._hooks = NodeHooks()
    return node._hooks


def _leaf_hooks(t):
    if t._hooks is None:
        t._hooks = LeafHooks()
    return t._hooks


def add_tensor_hook(t, fn):
    """A non-leaf's hooks live on its grad_fn, by output_nr, as PyTorch keeps them: after an in-place
    change of the tensor, they still see the gradient w.r.t. its former value."""
    refresh_view_history(t)
    if t._grad_fn is not None:
        return _add_hook(_node_hooks(t._grad_fn).outputs.setdefault(t._output_nr, []), fn)
    return _add_hook(_leaf_hooks(t).pre, fn)


def add_post_accumulate_grad_hook(leaf, fn):
    return _add_hook(_leaf_hooks(leaf).post_accumulate, fn)


def add_node_prehook(node, fn):
    return _add_hook(_node_hooks(node).pre, fn)


def add_node_hook(node, fn):
    return _add_hook(_node_hooks(node).post, fn)


def _sink_hooks(node):
    """The hooks of an AccumulateGrad's leaf (its tensor hooks are the leaf's); None for other nodes."""
    return node.variable._hooks if isinstance(node, AccumulateGrad) else None


def _has_hooks(node):
    return node._hooks is not None or _sink_hooks(node) is not None


def _run_tensor_hooks(node, grads):
    """The hooks of the tensors whose gradients `grads` (a list, replaced in place) are: the node's
    outputs (those that have hooks now: a hook may register some on another output), or its leaf."""
    leaf = _sink_hooks(node)
    lists = [] if leaf is None else [(0, leaf.pre)]
    if node._hooks is not None:
        lists += node._hooks.outputs.items()
    for output_nr, hooks in lists:
        for hook in _live(hooks):
            result = hook(grads[output_nr])
            if result is not None:
                grads[output_nr] = result


def _apply_hooked(node, grads):
    """node.apply between the node's pre-hooks and post-hooks. A node that no gradient reached (it
    runs for its hooks) or whose pre-hook took every gradient away gives none: built-in formulas
    expect some."""
    hooks = node._hooks
    for hook in _live(hooks.pre if hooks is not None else ()):
        result = hook(tuple(grads))
        if result is not None:
            grads = list(result)
    runs = node.runs_without_grads or any(g is not None for g in grads)
    input_grads = node.apply(grads) if runs else ()
    leaf = _sink_hooks(node)
    for hook in _live(leaf.post_accumulate if leaf is not None else ()):  # with a gradient or not, as PyTorch
        hook(node.variable)
    if hooks is None or not hooks.post:
        return input_grads
    n = len(node.next_edges)
    input_grads = (tuple(input_grads) + (None,) * n)[:n]
    for hook in _live(hooks.post):
        result = hook(input_grads, tuple(grads))
        if result is not None:
            input_grads = result
    return input_grads


# ---- the engine


def _run_node(node, grads, hooked):
    return _apply_hooked(node, grads) if hooked else node.apply(grads)


def _has_nan(t):
    return t._dtype.is_floating_point and any(math.isnan(v) for v in t.detach().reshape(-1).tolist())


def _run_node_checked(node, grads, hooked):
    """_run_node in anomaly mode: a gradient with a NaN is an error naming the node (PyTorch's words),
    and whatever fails in the node is reported with the traceback of its forward call."""
    try:
        input_grads = _run_node(node, grads, hooked)
        if _anomaly["check_nan"]:
            for k, grad in enumerate(input_grads):
                if grad is not None and _has_nan(grad):
                    raise RuntimeError(f"Function '{node.name()}' returned nan values in its {k}th output.")
        return input_grads
    except Exception:
        warn_failed_node(node.name(), node.__dict__.get("_metadata", {}).get("traceback_"))
        raise


def _tape(roots):
    """Every node reachable from `roots`, latest recorded first."""
    seen, stack = set(), [node for node in roots if node is not None]
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(fn for fn, _ in node.next_edges if fn is not None and fn not in seen)
    return _move_sinks_up(sorted(seen, key=lambda node: node.sequence_nr, reverse=True))


def _move_sinks_up(order):
    """The sinks (AccumulateGrad, tape position 0) sort last. PyTorch runs one as soon as its last
    gradient has arrived, and the order shows: a leaf's hooks, and the .grad that a post-accumulate
    hook sees, come right after the last node that feeds the leaf. So each sink moves up to just after
    that node (those it completes in the order of its edges), or to the front if it is a root."""
    last_feeder = {}
    for node in order:
        for fn, _ in node.next_edges:
            if isinstance(fn, AccumulateGrad):
                last_feeder[fn] = node
    tape = [node for node in order if isinstance(node, AccumulateGrad) and node not in last_feeder]
    for node in order:
        if not isinstance(node, AccumulateGrad):
            tape.append(node)
            for fn, _ in node.next_edges:
                if last_feeder.get(fn) is node:
                    tape.append(fn)
                    del last_feeder[fn]
    return tape


def _deliver(inbox, edge, grad):
    node, slot = edge
    grads = inbox.setdefault(node, [None] * node.num_outputs)
    grads[slot] = grad if grads[slot] is None else grads[slot] + grad


def run_backward(tensors, grad_tensors, retain_graph, inputs=None, create_graph=False):
    """Tensor.backward, fastgrad.autograd.backward and grad: torch.autograd.backward's checks of the
    outputs and of the gradient given for each (a tensor, or None: ones for a single-element output),
    in its order, then the engine. With `inputs` (a list of tensors), returns their gradients (None
    where none arrives) and leaves .grad alone. With create_graph, the backward pass is recorded."""
    for i, (root, grad) in enumerate(zip(tensors, grad_tensors)):
        if grad is None:
            if root.requires_grad and root.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
        elif not isinstance(grad, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got {type(grad).__name__}")
        elif grad._shape != root._shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {grad.shape} and output[{i}] has "
                f"a shape of {root.shape}."
            )
    for i, root in enumerate(tensors):
        if gradient_edge(root)[0] is None:  # a view made under no_grad requires grad but has no gradient edge
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
    grad_tensors = [
        full(root._shape, 1, root._dtype) if grad is None else grad.to(root._dtype)
        for root, grad in zip(tensors, grad_tensors)
    ]
    edges = None
    if inputs is not None:
        edges = []
        for t in inputs:
            if not isinstance(t, Tensor):
                raise RuntimeError(f"all inputs have to be Tensors or GradientEdges, but got {type(t).__name__}")
            if not t.requires_grad:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            edges.append(gradient_edge(t))  # none for a view made under no_grad: no gradient arrives, as in PyTorch
    if create_graph and inputs is None:
        _warn_gradient_cycle()
    # One pass at a time, as the core's: a custom Function's backward lets other threads run, and two
    # passes adding into one leaf's .grad must not interleave. The same thread may nest passes.
    with _ENGINE_LOCK:
        return _run(tensors, grad_tensors, retain_graph, edges, create_graph)


_ENGINE_LOCK = threading.RLock()
_warned_gradient_cycle = False


def _warn_gradient_cycle():
    """PyTorch's warning (once per process) for a backward into .grad with create_graph: a leaf's
    gradient then holds a graph that holds the leaf."""
    global _warned_gradient_cycle
    if not _warned_gradient_cycle:
        _warned_gradient_cycle = True
        warnings.warn(
            "Using backward() with create_graph=True will create a reference cycle between the parameter "
            "and its gradient which can cause a memory leak. We recommend using autograd.grad when creating "
            "the graph to avoid this. If you have to use this function, make sure to reset the .grad fields "
            "of your parameters to None after use to break the cycle and avoid the leak.",
            UserWarning,
            stacklevel=3,
        )


def _run(roots, grad_roots, retain_graph, inputs, create_graph):
    """The engine. Gradients reaching leaves accumulate into their .grad. With `inputs` (edges; the
    autograd.grad form), .grad is left alone: only the nodes with an edge into an input's node or
    into a node that runs are run (AccumulateGrad, which leads nowhere, never), and the gradient
    flowing along each input edge is returned. With create_graph, the nodes run in grad mode."""
    with _grad_mode(create_graph):
        root_edges = [gradient_edge(root) for root in roots]
        inbox = {}
        for edge, grad in zip(root_edges, grad_roots):
            _deliver(inbox, edge, grad)
        tape = _tape([node for node, _ in root_edges])
        if inputs is not None:
            captured, wanted, runs = [None] * len(inputs), {}, set()
            for k, (node, _) in enumerate(inputs):
                wanted.setdefault(node, []).append(k)
            for node in reversed(tape):  # a node's successors come first
                if any(fn is not None and (fn in wanted or fn in runs) for fn, _ in node.next_edges):
                    runs.add(node)
        for node in tape:
            grads = inbox.pop(node, None) or [None] * node.num_outputs
            hooked = _has_hooks(node)
            if inputs is not None:
                # As PyTorch: a node that only hands gradients to autograd.grad runs its tensors' hooks
                # before they are taken; one that runs, only when it runs (below), after.
                if hooked and node not in runs and node in wanted:
                    _run_tensor_hooks(node, grads)
                for k in wanted.get(node, ()):
                    captured[k] = grads[inputs[k][1]]
                if node not in runs:
                    continue
            # As PyTorch runs every node, a node with hooks runs them even when no gradient reached it.
            if all(g is None for g in grads) and not node.runs_without_grads and not hooked:
                continue
            if hooked:
                _run_tensor_hooks(node, grads)
            node._fill_retained_grads(grads)
            input_grads = (_run_node_checked if _anomaly["enabled"] else _run_node)(node, grads, hooked)
            if not retain_graph:
                node.release_saved()
            for edge, grad in zip(node.next_edges, input_grads):
                if edge[0] is not None and grad is not None:
                    _deliver(inbox, edge, grad)
    return captured if inputs is not None else None
