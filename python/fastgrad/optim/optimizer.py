"""Optimizer: the base of every optimizer, with PyTorch's parameter groups, per-parameter state,
zero_grad, state_dict / load_state_dict (the same format), step and state-dict hooks, and error
messages.

Written once for both backends (see fastgrad._shared): the update rules use nothing but tensor
methods, so the reference runs the same code over its pure-Python tensors.

The updates follow PyTorch's single-tensor (foreach=False) implementations operation by operation, so
that float32 results round as PyTorch's do. PyTorch's CPU kernels compute add(alpha=), lerp_ and
addcmul_ with fused multiply-adds (one rounding); fastgrad has no such op, and _fma below reproduces it.
SGD, Adagrad and Adam/AdamW run float32 and float64 parameters through fused primitives instead
(_prims.sgd_, adagrad_, adam_: one pass per parameter, bit-identical to PyTorch's chain).
"""

import functools
import itertools
import struct
import warnings
from collections import OrderedDict, defaultdict
from copy import deepcopy
from itertools import chain

from .. import _prims
from .._prims import Tensor
from .._factories import tensor
from .._grad_mode import enable_grad, no_grad
from .._hooks import RemovableHandle
from .._compile import replayed_as_host_call
from fastgrad._types import float32, float64

__all__ = ["Optimizer", "register_optimizer_step_pre_hook", "register_optimizer_step_post_hook"]


class _RequiredParameter:
    """The default of an option every parameter group must give (torch.optim.optimizer.required)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

# Step hooks of every optimizer (of this backend), by handle number, in the order they run.
_global_optimizer_pre_hooks = OrderedDict()
_global_optimizer_post_hooks = OrderedDict()
_hook_ids = itertools.count()


def _add_hook(hooks, hook, prepend=False):
    """Keeps `hook` in the ordered dict `hooks` (first when prepend) and returns its handle."""
    key = next(_hook_ids)
    hooks[key] = hook
    if prepend:
        hooks.move_to_end(key, last=False)
    return RemovableHandle(lambda: hooks.pop(key, None))


def register_optimizer_step_pre_hook(hook):
    """hook(optimizer, args, kwargs) runs before every optimizer's step, before its own pre-hooks."""
    return _add_hook(_global_optimizer_pre_hooks, hook)


def register_optimizer_step_post_hook(hook):
    """hook(optimizer, args, kwargs) runs after every optimizer's step, after its own post-hooks."""
    return _add_hook(_global_optimizer_post_hooks, hook)


def _fused_step(optimizer, *args, **kwargs):
    """How a compiled program may replay optimizer.step() without Python (_compile.replayed_as_host_call):
    the fused update of its class (Optimizer._fused_replay), without a closure; None otherwise."""
    kind = type(optimizer)._fused_replay()
    if kind is None or args or kwargs:
        return None
    return (kind, optimizer, _global_optimizer_pre_hooks, _global_optimizer_post_hooks)


def _fused_zero_grad(optimizer, *args, **kwargs):
    """zero_grad() (set_to_none) as a compiled program may replay it without Python; None otherwise."""
    if args or kwargs:
        return None
    return ("zero_grad", optimizer, _global_optimizer_pre_hooks, _global_optimizer_post_hooks)


def _with_step_hooks(step):
    """step(self, *args, **kwargs) between the global and the optimizer's step hooks. As PyTorch's,
    the hooks see `args` with the optimizer first, and a pre-hook may return new (args, kwargs)."""

    @functools.wraps(step)
    @replayed_as_host_call(fused=_fused_step)
    def hooked_step(*args, **kwargs):
        self = args[0]
        for hook in chain(_global_optimizer_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        f"{step} must return None or a tuple of (new_args, new_kwargs), but got {result}."
                    )
                args, kwargs = result
        out = step(*args, **kwargs)
        for hook in chain(self._optimizer_step_post_hooks.values(), _global_optimizer_post_hooks.values()):
            hook(self, args, kwargs)
        return out

    hooked_step.hooked = True
    return hooked_step


def _typename(obj):
    """torch.typename: 'fastgrad.FloatTensor', 'int', 'collections.OrderedDict'."""
    if isinstance(obj, Tensor):
        return obj.type()
    module, name = type(obj).__module__, type(obj).__qualname__
    return name if module == "builtins" else f"{module}.{name}"


def _scalar_for(number, tensor):
    """A Python number as PyTorch's kernels take a scalar argument: rounded to the tensor's float32."""
    return struct.unpack("f", struct.pack("f", number))[0] if tensor.dtype == float32 else number


def _fma(a, b, c):
    """a * b + c rounded once, as PyTorch's vectorized CPU kernels compute c.add(b, alpha=a), lerp and
    addcmul (fused multiply-add). The product of two float32 numbers is exact in float64, so for
    float32 the only rounding that matters is the final cast; float64 tensors round twice (a last-bit
    difference). `a`: a number or a tensor."""
    if c.dtype != float32:
        return b * a + c
    a = a.double() if isinstance(a, Tensor) else _scalar_for(a, c)
    return (b.double() * a + c.double()).float()


def _addcmul_(target, tensor1, tensor2, value):
    """target.addcmul_(tensor1, tensor2, value=value): (value * tensor1) * tensor2 + target, the last
    step fused as in PyTorch's kernel."""
    return target.copy_(_fma(tensor1 * value, tensor2, target))


def _addcdiv_(target, tensor1, tensor2, value=1):
    """target.addcdiv_(tensor1, tensor2, value=value): target + (value * tensor1) / tensor2."""
    return target.add_(tensor1 * value / tensor2)


def _lerp_(start, end, weight):
    """start.lerp_(end, weight) as PyTorch's kernel computes it: from the nearer end."""
    weight = _scalar_for(weight, start)
    if abs(weight) < 0.5:
        return start.copy_(_fma(weight, end - start, start))
    return start.copy_(_fma(weight - 1, end - start, end))


def _require(condition, message):
    """PyTorch's check of an optimizer option: ValueError(message) unless condition holds."""
    if not condition:
        raise ValueError(message)


def _check_betas(betas):
    for i, beta in enumerate(betas[:2]):
        _require(0.0 <= beta < 1.0, f"Invalid beta parameter at index {i}: {beta}")


def _new_step():
    """A parameter's step count in its state: a tensor of the default dtype, as PyTorch keeps it."""
    return tensor(0.0)


def _gradient(param, group):
    """param's gradient as the update uses it: negated when the group maximizes, plus weight_decay *
    param (L2); with decoupled_weight_decay the decay shrinks param itself instead."""
    grad = -param.grad if group["maximize"] else param.grad
    weight_decay = group.get("weight_decay", 0)
    if weight_decay != 0:
        if group.get("decoupled_weight_decay"):
            param.mul_(1 - group["lr"] * weight_decay)
        else:
            grad = _fma(weight_decay, param, grad)
    return grad


_HOOK_DICTS = (
    "_optimizer_step_pre_hooks",
    "_optimizer_step_post_hooks",
    "_optimizer_state_dict_pre_hooks",
    "_optimizer_state_dict_post_hooks",
    "_optimizer_load_state_dict_pre_hooks",
    "_optimizer_load_state_dict_post_hooks",
)


class Optimizer:
    """Holds parameter groups (dicts: 'params' and the options, defaults filled from `defaults`) and
    per-parameter state (a dict per parameter, keyed by the tensor). Subclasses define _update, or
    their own step; every step runs the step hooks."""

    # The update that C++ repeats when a compiled program replays step() ("adam", "sgd":
    # csrc/python/optim_replay.cpp), set by the class whose methods it mirrors.
    _fused_update = None

    @classmethod
    def _fused_replay(cls):
        """cls's fused update, None if cls changes one of the methods it mirrors."""
        owner = next(c for c in cls.__mro__ if "_fused_update" in c.__dict__)
        mirrored = ("step", "_update_group", "_fused_params", "_update", "_state")
        if any(getattr(cls, name, None) is not getattr(owner, name, None) for name in mirrored):
            return None
        return owner._fused_update

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__ and not getattr(cls.step, "hooked", False):
            cls.step = _with_step_hooks(cls.step)

    def __init__(self, params, defaults):
        for option in ("differentiable", "fused", "capturable"):
            if defaults.get(option):
                raise NotImplementedError(f"{type(self).__name__}({option}=True) is not supported by fastgrad")
        self.defaults = defaults
        for name in _HOOK_DICTS:
            setattr(self, name, OrderedDict())
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be "
                "an iterable of Tensors or dicts, but got " + _typename(params)
            )
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in _HOOK_DICTS:  # a copy or an unpickled optimizer starts without hooks
            self.__dict__.setdefault(name, OrderedDict())

    def __repr__(self):
        text = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but "
                "the ordering of tensors in sets will change between runs. Please use a list instead."
            )
        params = [params] if isinstance(params, Tensor) else list(params)
        # named_parameters() gives (name, tensor) pairs: the names are kept in 'param_names'.
        names = [p[0] for p in params if isinstance(p, tuple)]
        param_group["params"] = [p[1] if isinstance(p, tuple) else p for p in params]
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names

        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(param))
            if not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)

        params = param_group["params"]
        if len(params) != len(set(params)):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; "
                "in future, this will cause an error; "
                "see github.com/pytorch/pytorch/issues/40967 for more information",
                stacklevel=3,
            )
        param_set = set()
        for group in self.param_groups:
            param_set.update(group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError(
                    "all optimizer param groups should be with/without names. "
                    f"cannot add param group {which} to the optimizer"
                )
        if not param_set.isdisjoint(params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    @replayed_as_host_call(fused=_fused_zero_grad)
    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            if set_to_none:
                for p in group["params"]:
                    p.grad = None
                continue
            grads = [p.grad for p in group["params"] if p.grad is not None]
            for g in grads:
                if g.grad_fn is not None:  # a gradient computed with create_graph=True
                    g.detach_()
                else:
                    g.requires_grad_(False)
            _prims.foreach_zero_(grads)

    @_with_step_hooks
    def step(self, closure=None):
        """Update every parameter that has a gradient, without recording a graph. `closure`
        re-evaluates the loss (with grad enabled); its result is returned."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                if params:
                    self._update_group(params, group)
        return loss

    def _update_group(self, params, group):
        """One step for the parameters of `group` that have a gradient. Subclasses batch the common
        cases into one call of a foreach primitive."""
        for param in params:
            self._update(param, group)

    def _fused_params(self, params, group):
        """The float32/float64 parameters, which a fused update primitive takes; the others are
        updated one by one here."""
        fused = []
        for param in params:
            if param.dtype in (float32, float64):
                fused.append(param)
            else:
                self._update(param, group)
        return fused

    def _update(self, param, group):
        """One step for one parameter with its gradient, options from its group."""
        raise NotImplementedError

    def register_step_pre_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None or new (args, kwargs), before each step."""
        return _add_hook(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None, after each step."""
        return _add_hook(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer) -> None, before state_dict() packs the state."""
        return _add_hook(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) -> None or a state dict to return instead."""
        return _add_hook(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) -> None or a state dict to load instead (state_dict is a
        shallow copy of the one given to load_state_dict)."""
        return _add_hook(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer) -> None, after load_state_dict."""
        return _add_hook(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    def state_dict(self):
        """{'state': {index: state}, 'param_groups': [group with 'params' as indices]}: parameters are
        numbered by their place across the groups (one listed twice takes its last place, as in
        PyTorch). The state's tensors are the optimizer's own (not copies)."""
        for hook in self._optimizer_state_dict_pre_hooks.values():
            hook(self)
        index = {}
        param_groups = []
        start = 0
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            index.update({id(p): i for i, p in enumerate(group["params"], start) if id(p) not in index})
            packed["params"] = [index[id(p)] for p in group["params"]]
            start += len(packed["params"])
            param_groups.append(packed)
        state = {(index[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        state_dict = {"state": state, "param_groups": param_groups}
        for hook in self._optimizer_state_dict_post_hooks.values():
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    def load_state_dict(self, state_dict):
        state_dict = state_dict.copy()
        for hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of optimizer's group"
            )
        id_map = dict(
            zip(
                chain.from_iterable(g["params"] for g in saved_groups), chain.from_iterable(g["params"] for g in groups)
            )
        )
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = _cast(id_map[k], v)
            else:  # state not tied to a parameter is kept as it is
                state[k] = v
        for group, saved in zip(groups, saved_groups):
            saved["params"] = group["params"]
            if "param_names" in group and "param_names" not in saved:
                saved["param_names"] = group["param_names"]
        self.__setstate__({"state": state, "param_groups": saved_groups})
        for hook in self._optimizer_load_state_dict_post_hooks.values():
            hook(self)


def _cast(param, value, key=None):
    """Loaded state for `param`: float tensors take the parameter's dtype (as PyTorch, without a copy
    when it already has it), except 'step'; containers are rebuilt."""
    if isinstance(value, Tensor):
        return value.to(dtype=param.dtype) if key != "step" and param.dtype.is_floating_point else value
    if isinstance(value, dict):
        return {k: _cast(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(param, v) for v in value)
    return value
