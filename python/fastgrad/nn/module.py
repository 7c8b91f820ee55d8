"""nn.Module: torch.nn.Module's registration of parameters, buffers and submodules, traversal,
train/eval, dtype conversion, state_dict save/load (with their hooks and overridable steps), repr,
and the forward and full backward hooks (module-level and global)."""

import collections
import collections.abc
import functools
import itertools
import os
import sys
import warnings
import weakref

from .. import _prims
from .._factories import empty_like
from .._grad_mode import no_grad
from .. import _hooks
from .._compile import module_changed, replayed_as_host_call
from ..autograd.function import Function
from .parameter import Buffer, Parameter, is_lazy
from fastgrad._types import float32

Tensor = _prims.Tensor


class _IncompatibleKeys(collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()


def _typename(obj):
    """torch.typename: 'torch.FloatTensor' for a tensor, the qualified class name otherwise."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    qualname = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def _addindent(text, spaces):
    """Indents every line but the first (a child's repr inside its parent's)."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _check_member_name(kind, name, module, registry):
    """register_parameter / register_buffer / add_module's checks on the attribute name."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain "."' + (f", got: {name}" if kind == "module" else ""))
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if hasattr(module, name) and name not in registry:
        raise KeyError(f"attribute '{name}' already exists")


_EXTRA_STATE_KEY_SUFFIX = "_extra_state"
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_hook_ids = itertools.count()  # one sequence for every hook dict, as torch.utils.hooks.RemovableHandle.next_id


class RemovableHandle(_hooks.RemovableHandle):
    """torch.utils.hooks.RemovableHandle: removes the hook `id` from hooks_dict and from extra_dict
    (a dict or a list of dicts: those flagging hooks as with_kwargs, always_call). It refers to them
    weakly and is copied and pickled with them, so that the handles of a copied module remove hooks
    from the copy's dicts."""

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.id = next(_hook_ids)
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        extra_dicts = [extra_dict] if isinstance(extra_dict, dict) else extra_dict or []
        self.extra_dict_ref = tuple(weakref.ref(flags) for flags in extra_dicts)

    def remove(self):
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            members = ref()
            if members is not None:
                members.pop(self.id, None)

    def __getstate__(self):
        return self.hooks_dict_ref(), self.id, tuple(ref() for ref in self.extra_dict_ref)

    def __setstate__(self, state):
        hooks, self.id, flag_dicts = state
        # a dict gone before pickling gives a dead reference
        self.hooks_dict_ref = weakref.ref(collections.OrderedDict() if hooks is None else hooks)
        self.extra_dict_ref = tuple(weakref.ref(flags) for flags in flag_dicts if flags is not None)


def _add_hook(hooks, hook, prepend=False, flags=()):
    """Stores hook in the ordered dict `hooks` under a new id (first when prepend); returns its handle.
    flags: (dict, on) pairs, the dicts marking hooks of a kind (with_kwargs, always_call) by their id."""
    handle = RemovableHandle(hooks, extra_dict=[flag_dict for flag_dict, _ in flags])
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    for flag_dict, on in flags:
        if on:
            flag_dict[handle.id] = True
    return handle


# The global hooks (torch.nn.modules.module.register_module_*): they run on every module, before its own.
_global_forward_pre_hooks = collections.OrderedDict()
_global_forward_hooks = collections.OrderedDict()
_global_forward_hooks_with_kwargs = collections.OrderedDict()
_global_forward_hooks_always_called = collections.OrderedDict()
_global_backward_pre_hooks = collections.OrderedDict()
_global_backward_hooks = collections.OrderedDict()


def register_module_forward_pre_hook(hook):
    """hook(module, args) before every module's forward, as Module.register_forward_pre_hook."""
    return _add_hook(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """hook(module, args, output) after every module's forward, as Module.register_forward_hook."""
    flags = ((_global_forward_hooks_with_kwargs, with_kwargs), (_global_forward_hooks_always_called, always_call))
    return _add_hook(_global_forward_hooks, hook, flags=flags)


def register_module_full_backward_pre_hook(hook):
    """hook(module, grad_output) for every module, as Module.register_full_backward_pre_hook."""
    return _add_hook(_global_backward_pre_hooks, hook)


def register_module_full_backward_hook(hook):
    """hook(module, grad_input, grad_output) for every module, as Module.register_full_backward_hook."""
    return _add_hook(_global_backward_hooks, hook)


def _stacklevel_outside_package():
    """For its caller's warnings.warn: the stacklevel of the first frame outside fastgrad (the
    user's backward() call, however many frames the backend's engine adds)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level


class BackwardHookFunction(Function):
    """The identity, giving a module's tensor inputs (or outputs) one node whose hooks see their
    gradients (PyTorch's node name: BackwardHookFunctionBackward)."""

    @staticmethod
    def forward(ctx, *tensors):
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        ctx.set_materialize_grads(False)
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return grads


class _BackwardHook:
    """One call's full backward hooks: the node on the outputs records grad_output (after the pre-hooks
    replaced it); the node on the inputs then calls the hooks with grad_input and grad_output. Tuples
    hold None where an argument is not a tensor."""

    def __init__(self, module, hooks, pre_hooks):
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = 0
        self.input_indices = self.output_indices = None

    @staticmethod
    def _wrap_tensors(values, node_hook):
        """values with their tensors passed through one BackwardHookFunction node carrying node_hook,
        and the tensors' positions (None, values unchanged, when no gradient will flow)."""
        indices = [i for i, value in enumerate(values) if isinstance(value, Tensor)]
        tensors = [values[i] for i in indices]
        if not (_prims.is_grad_enabled() and any(t.requires_grad for t in tensors)):
            return values, None
        wrapped = BackwardHookFunction.apply(*tensors)
        next(t.grad_fn for t in wrapped if t.grad_fn is not None).register_hook(node_hook)
        values = list(values)
        for i, tensor in zip(indices, wrapped):
            values[i] = tensor
        return tuple(values), indices

    @staticmethod
    def _spread(indices, grads, size):
        """The tensors' gradients at their arguments' positions, None elsewhere."""
        spread = [None] * size
        for i, grad in zip(indices, grads):
            spread[i] = grad
        return tuple(spread)

    def setup_input_hook(self, args):
        self.n_inputs = len(args)
        args, self.input_indices = self._wrap_tensors(args, self._input_node_hook)
        return args

    def setup_output_hook(self, result):
        outputs = result if isinstance(result, tuple) else (result,)
        self.n_outputs = len(outputs)
        outputs, self.output_indices = self._wrap_tensors(outputs, self._output_node_hook)
        return outputs if isinstance(result, tuple) else outputs[0]

    def _output_node_hook(self, grad_inputs, grad_outputs):
        self.grad_outputs = self._spread(self.output_indices, grad_inputs, self.n_outputs)
        for hook in self.pre_hooks:
            replaced = hook(self.module, self.grad_outputs)
            if replaced is None:
                continue
            if len(replaced) != len(self.grad_outputs):
                raise RuntimeError(
                    "Backward pre hook returned an invalid number of grad_output, "
                    f"got {len(replaced)}, but expected {len(self.grad_outputs)}"
                )
            self.grad_outputs = replaced
        grads = tuple(self.grad_outputs[i] for i in self.output_indices)
        if self.input_indices is None:  # no gradient reaches the inputs: the hooks run now
            warnings.warn(
                "Full backward hook is firing when gradients are computed with respect to module outputs since "
                "no inputs require gradients. See https://docs.pytorch.org/docs/main/generated/torch.nn.Module."
                "html#torch.nn.Module.register_full_backward_hook for more details.",
                stacklevel=_stacklevel_outside_package(),
            )
            no_grads = (None,) * self.n_inputs
            for hook in self.hooks:
                result = hook(self.module, no_grads, self.grad_outputs)
                if result is not None and not (isinstance(result, tuple) and all(g is None for g in result)):
                    raise RuntimeError(
                        "Backward hook for Modules where no input requires gradient should always return None "
                        "or None for all gradients."
                    )
            self.grad_outputs = None
        return grads

    def _input_node_hook(self, grad_inputs, grad_outputs):
        if self.grad_outputs is None:  # the gradient reached the inputs without passing the outputs
            return None
        grads = self._spread(self.input_indices, grad_inputs, self.n_inputs)
        for hook in self.hooks:
            result = hook(self.module, grads, self.grad_outputs)
            if result is None:
                continue
            if len(result) != len(grads):
                raise RuntimeError(
                    f"Backward hook returned an invalid number of grad_input, got {len(result)}, "
                    f"but expected {len(grads)}"
                )
            grads = result
        self.grad_outputs = None
        return tuple(grads[i] for i in self.input_indices)


# The hook dicts every Module has (__setstate__ adds those a module pickled without them lacks).
_HOOK_DICTS = (
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_backward_pre_hooks",
    "_backward_hooks",
    "_state_dict_pre_hooks",
    "_state_dict_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)


class Module:
    _version = 1

    def __init__(self):
        # object.__setattr__: Module.__setattr__ reads these dicts
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", {})
        for name in _HOOK_DICTS:
            object.__setattr__(self, name, collections.OrderedDict())

    def __setstate__(self, state):
        self.__dict__.update(state)
        # a module pickled before some of these existed
        for name in _HOOK_DICTS:
            self.__dict__.setdefault(name, collections.OrderedDict())
        self.__dict__.setdefault("_non_persistent_buffers_set", set())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    _compiled_call_impl = None  # set by compile(): calls replay its captured programs

    def __call__(self, *args, **kwargs):
        if self._compiled_call_impl is not None:
            return self._compiled_call_impl(*args, **kwargs)
        if not (
            self._forward_pre_hooks
            or self._forward_hooks
            or self._backward_pre_hooks
            or self._backward_hooks
            or _global_forward_pre_hooks
            or _global_forward_hooks
            or _global_backward_pre_hooks
            or _global_backward_hooks
        ):
            return self.forward(*args, **kwargs)  # the common case, without a call of _call_impl
        return self._call_impl(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        """forward between the hooks (with none, forward alone): what __call__ runs, and the body a
        compiled module captures."""
        always_called_run = set()
        result = None
        try:
            args, kwargs = self._run_forward_pre_hooks(args, kwargs)
            backward_hooks = [*_global_backward_hooks.values(), *self._backward_hooks.values()]
            backward_pre_hooks = [*_global_backward_pre_hooks.values(), *self._backward_pre_hooks.values()]
            backward_hook = None
            if backward_hooks or backward_pre_hooks:
                backward_hook = _BackwardHook(self, backward_hooks, backward_pre_hooks)
                args = backward_hook.setup_input_hook(args)
            result = self.forward(*args, **kwargs)
            for hook_id, hook in self._forward_hooks_in_order():
                if self._is_always_called(hook_id):
                    always_called_run.add(hook_id)
                result = self._run_forward_hook(hook_id, hook, args, kwargs, result)
            if backward_hook is not None:
                if not isinstance(result, (Tensor, tuple)):
                    warnings.warn(
                        "For backward hooks to be called, module output should be a Tensor or a tuple of Tensors "
                        f"but received {type(result)}",
                        stacklevel=2,
                    )
                result = backward_hook.setup_output_hook(result)
            return result
        except Exception:
            # the always_call forward hooks run even when forward (or an earlier hook) failed
            for hook_id, hook in self._forward_hooks_in_order():
                if self._is_always_called(hook_id) and hook_id not in always_called_run:
                    try:
                        result = self._run_forward_hook(hook_id, hook, args, kwargs, result)
                    except Exception as e:
                        kind = "global module" if hook_id in _global_forward_hooks else "module"
                        warnings.warn(
                            f"{kind} forward hook with ``always_call=True`` raised an exception that was silenced "
                            f"as another error was raised in forward: {str(e)}",
                            stacklevel=2,
                        )
            raise

    def _run_forward_pre_hooks(self, args, kwargs):
        """The arguments forward gets: as the pre-hooks (global ones first) replace them."""
        for hook_id, hook in (*_global_forward_pre_hooks.items(), *self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                new_args_kwargs = hook(self, args, kwargs)
                if new_args_kwargs is not None:
                    if not (isinstance(new_args_kwargs, tuple) and len(new_args_kwargs) == 2):
                        raise RuntimeError(
                            "forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                            f"but got {new_args_kwargs}."
                        )
                    args, kwargs = new_args_kwargs
            else:
                new_args = hook(self, args)
                if new_args is not None:
                    args = new_args if isinstance(new_args, tuple) else (new_args,)
        return args, kwargs

    def _forward_hooks_in_order(self):
        return [*_global_forward_hooks.items(), *self._forward_hooks.items()]

    def _is_always_called(self, hook_id):
        return hook_id in self._forward_hooks_always_called or hook_id in _global_forward_hooks_always_called

    def _run_forward_hook(self, hook_id, hook, args, kwargs, result):
        if hook_id in self._forward_hooks_with_kwargs or hook_id in _global_forward_hooks_with_kwargs:
            hook_result = hook(self, args, kwargs, result)
        else:
            hook_result = hook(self, args, result)
        return result if hook_result is None else hook_result

    # ---- hooks

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) -> None or new args (hook(module, args, kwargs) -> None or (args, kwargs)
        with_kwargs), before forward."""
        return _add_hook(self._forward_pre_hooks, hook, prepend, ((self._forward_pre_hooks_with_kwargs, with_kwargs),))

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """hook(module, args, output) -> None or a new output (hook(module, args, kwargs, output)
        with_kwargs), after forward; always_call: also when forward raised."""
        flags = ((self._forward_hooks_with_kwargs, with_kwargs), (self._forward_hooks_always_called, always_call))
        return _add_hook(self._forward_hooks, hook, prepend, flags)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) -> None or new grad_output, when the gradients of the outputs are known."""
        return _add_hook(self._backward_pre_hooks, hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) -> None or new grad_input, when the gradients of the
        inputs are known."""
        return _add_hook(self._backward_hooks, hook, prepend)

    def register_state_dict_pre_hook(self, hook):
        """hook(module, prefix, keep_vars) before state_dict() saves this module."""
        return _add_hook(self._state_dict_pre_hooks, hook)

    def register_state_dict_post_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata) -> None, after this module's entries are saved
        (it may edit state_dict in place)."""
        hook._from_public_api = True
        return _add_hook(self._state_dict_hooks, hook)

    def _register_state_dict_hook(self, hook):
        """The older form of register_state_dict_post_hook: a dict the hook returns replaces state_dict."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError(
                "Cannot register the same function as the state dict post hook that was "
                "previously registered via register_state_dict_post_hook"
            )
        return _add_hook(self._state_dict_hooks, hook)

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        return _add_hook(self._load_state_dict_pre_hooks, functools.partial(hook, self) if with_module else hook)

    def register_load_state_dict_pre_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs) before this module's entries are loaded (it may edit them in place)."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) -> None after load_state_dict loaded this module and its children."""
        return _add_hook(self._load_state_dict_post_hooks, hook)

    # ---- registration

    def register_parameter(self, name, param):
        module_changed()
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_member_name("parameter", name, self, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter '{name}' (torch.nn.Parameter or None required)"
            )
        if param is not None and param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                f"created explicitly. To express '{name}' as a function of another Tensor, compute "
                "the value in the forward() method."
            )
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        module_changed()
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_member_name("buffer", name, self, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer '{name}' (torch Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        module_changed()
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        _check_member_name("module", name, self, self._modules)
        self._modules[name] = module

    register_module = add_module

    def __getattr__(self, name):
        # Only reached when normal lookup fails: parameters, buffers and submodules live in their dicts.
        # Written out, not a loop over the three names: a layer reads its parameters here on every call.
        members = self.__dict__
        try:
            parameters = members["_parameters"]
            if name in parameters:
                return parameters[name]
            buffers = members["_buffers"]
            if name in buffers:
                return buffers[name]
            modules = members["_modules"]
            if name in modules:
                return modules[name]
        except KeyError:  # before Module.__init__ made the dicts
            pass
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        module_changed()  # fastgrad.compile's guards read modules again

        def remove_from(*registries):
            for registry in registries:
                if isinstance(registry, set):
                    registry.discard(name)
                else:
                    registry.pop(name, None)

        params = self.__dict__.get("_parameters")
        modules = self.__dict__.get("_modules")
        buffers = self.__dict__.get("_buffers")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(self.__dict__, buffers, modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as parameter '{name}' (torch.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(self.__dict__, params, buffers, self._non_persistent_buffers_set)
            modules[name] = value
        elif modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as child module '{name}' (torch.nn.Module or None expected)"
                )
            modules[name] = value
        elif isinstance(value, Buffer) or buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as buffer '{name}' "
                    "(torch.nn.Buffer, torch.Tensor or None expected)"
                )
            persistent = value.persistent if isinstance(value, Buffer) else name not in self._non_persistent_buffers_set
            self.register_buffer(name, value, persistent)
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name):
        module_changed()
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = (
            dir(type(self)) + list(self.__dict__) + list(self._parameters) + list(self._modules) + list(self._buffers)
        )
        return sorted(key for key in keys if not key[0].isdigit())

    # ---- traversal

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self, remove_duplicate=True):
        for _, module in self.named_modules(remove_duplicate=remove_duplicate):
            yield module

    def named_children(self):
        memo = set()
        for name, module in self._modules.items():
            if module is not None and module not in memo:
                memo.add(module)
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, registry, prefix, recurse, remove_duplicate):
        """(dotted name, tensor) for the parameters or buffers of this module (and its descendants),
        a tensor shared by several modules once (its first name)."""
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, member in getattr(module, registry).items():
                if member is None or member in memo:
                    continue
                if remove_duplicate:
                    memo.add(member)
                yield module_prefix + ("." if module_prefix else "") + name, member

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def get_submodule(self, target):
        """The submodule at the dotted path target ("" is this module)."""
        module = self
        for item in target.split(".") if target else []:
            if not hasattr(module, item):
                raise AttributeError(module._get_name() + " has no attribute `" + item + "`")
            module = getattr(module, item)
            if not isinstance(module, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return module

    def _get_member(self, target):
        """The module holding the last name of target, and that name (checked to exist)."""
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(module._get_name() + " has no attribute `" + name + "`")
        return module, name

    def set_submodule(self, target, module, strict=False):
        """Puts module at the dotted path target (strict: where a submodule already is)."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(parent._get_name() + " has no attribute `" + name + "`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError("`" + name + "` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target):
        module, name = self._get_member(target)
        param = getattr(module, name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        module, name = self._get_member(target)
        if name not in module._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return getattr(module, name)

    def apply(self, fn):
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- modes and gradients

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def compile(self, *args, **kwargs):
        """Compile this module's calls in place (torch.nn.Module.compile): fastgrad.compile's
        arguments; the module itself is unchanged, and so are its state_dict keys."""
        from .._compile import compile_module_call

        self._compiled_call_impl = compile_module_call(self, *args, **kwargs)

    @replayed_as_host_call
    def zero_grad(self, set_to_none=True):
        for param in self.parameters():
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                if param.grad.grad_fn is not None:
                    param.grad.detach_()
                else:
                    param.grad.requires_grad_(False)
                param.grad.zero_()

    # ---- dtype conversion

    def _apply(self, fn, recurse=True):
        """Converts every parameter (in place: `.data`, so references to it stay valid), its grad and
        every buffer (the children's too, if recurse)."""
        if recurse:
            for module in self.children():
                module._apply(fn)
        with no_grad():
            for param in self._parameters.values():
                if param is not None:
                    param.data = fn(param)
                    if param.grad is not None:
                        param.grad.data = fn(param.grad)
            for name, buffer in self._buffers.items():
                if buffer is not None:
                    self._buffers[name] = fn(buffer)
        module_changed()
        return self

    def to(self, *args, **kwargs):
        dtype = _prims.empty([0], float32).to(*args, **kwargs).dtype  # the tensor rules on the arguments
        if not dtype.is_floating_point:
            raise TypeError(
                f"nn.Module.to only accepts floating point or complex dtypes, but got desired dtype={dtype}"
            )
        return self._apply(lambda t: t.to(*args, **kwargs) if t.dtype.is_floating_point else t)

    def _cast_floating(self, convert):
        return self._apply(lambda t: convert(t) if t.dtype.is_floating_point else t)

    def float(self):
        return self._cast_floating(Tensor.float)

    def double(self):
        return self._cast_floating(Tensor.double)

    def half(self):
        return self._cast_floating(Tensor.half)

    def bfloat16(self):
        return self._cast_floating(Tensor.bfloat16)

    def type(self, dst_type):
        return self._apply(lambda t: t.type(dst_type))

    def cpu(self):
        return self

    def to_empty(self, *, device, recurse=True):
        """Parameters and buffers replaced by uninitialized tensors of their shapes and dtypes."""
        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def cuda(self, device=None):
        return self._apply(lambda t: t.cuda(device))

    # ---- state dict

    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        if destination is None:
            destination = collections.OrderedDict()
            destination._metadata = collections.OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            hook_result = hook(self, destination, prefix, local_metadata)
            if getattr(hook, "_from_public_api", False):
                if hook_result is not None:
                    raise RuntimeError("state_dict post-hook must return None")
            elif hook_result is not None:
                destination = hook_result
        return destination

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """Saves this module's own parameters, persistent buffers and extra state (not its children's)."""
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buffer in self._buffers.items():
            if buffer is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buffer if keep_vars else buffer.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def get_extra_state(self):
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called. Please file an issue at "
            "https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml to report this bug."
        )

    def set_extra_state(self, state):
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called. Please file an issue at "
            "https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml to report this bug."
        )

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        """Copies this module's own entries of `state_dict` (keys under `prefix`), recording what is
        missing, unexpected or does not fit (the first two only when strict)."""
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent_buffers = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in [*self._parameters.items(), *persistent_buffers.items()] if v is not None}
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            input_param = state_dict[key]
            if not isinstance(input_param, Tensor):
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like '
                    f"object from checkpoint but received {type(input_param)}"
                )
                continue
            lazy = is_lazy(param)  # an uninitialized parameter takes its shape from the checkpoint
            if not lazy and param.dim() == 0 and input_param.shape == (1,):
                input_param = input_param[0]
            if not lazy and input_param.shape != param.shape:
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {input_param.shape} from "
                    f"checkpoint, the shape in current model is {param.shape}."
                )
                continue
            try:
                with no_grad():
                    if not assign:
                        param.copy_(input_param)
                    elif isinstance(param, Parameter):
                        if isinstance(input_param, Parameter):
                            input_param.requires_grad_(param.requires_grad)
                        else:
                            input_param = Parameter(input_param, requires_grad=param.requires_grad)
                        setattr(self, name, input_param)
                    else:
                        setattr(self, name, input_param)
            except Exception as ex:
                error_msgs.append(
                    f'While copying the parameter named "{key}", whose dimensions in the model are '
                    f"{param.size()} and whose dimensions in the checkpoint are {input_param.size()}, "
                    f"an exception occurred : {ex.args}."
                )
        extra_state_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_state_key in state_dict:
                self.set_extra_state(state_dict[extra_state_key])
            elif strict:
                missing_keys.append(extra_state_key)
        elif strict and extra_state_key in state_dict:
            unexpected_keys.append(extra_state_key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_state_key:
                    input_name = key[len(prefix) :].split(".", 1)
                    if input_name[0] not in (self._modules if len(input_name) > 1 else local_state):
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        if not isinstance(state_dict, collections.abc.Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys, unexpected_keys, error_msgs = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = collections.OrderedDict(state_dict)  # the hooks may edit it; the caller's stays as it was

        def load(module, local_state_dict, prefix=""):
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(
                local_state_dict, prefix, local_metadata, True, missing_keys, unexpected_keys, error_msgs
            )
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    load(child, {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}, child_prefix)
            incompatible_keys = _IncompatibleKeys(missing_keys, unexpected_keys)
            for hook in module._load_state_dict_post_hooks.values():
                if hook(module, incompatible_keys) is not None:
                    raise AssertionError(
                        "Hooks registered with ``register_load_state_dict_post_hook`` are not expected to return new "
                        "values, if incompatible_keys need to be modified, it should be done inplace."
                    )

        load(self, state_dict)
        if strict:
            if unexpected_keys:
                error_msgs.insert(
                    0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected_keys))
                )
            if missing_keys:
                error_msgs.insert(
                    0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing_keys))
                )
        if error_msgs:
            raise RuntimeError(
                "Error(s) in loading state_dict for {}:\n\t{}".format(type(self).__name__, "\n\t".join(error_msgs))
            )
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # ---- repr

    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        return ""

    def __repr__(self):
        extra_lines = self.extra_repr().split("\n") if self.extra_repr() else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2) for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


# member(module, "weight") is module.weight, the same object or error; layers read their own
# parameters with it on every call. A parameter is not in the instance's __dict__, so Python's
# lookup fails before Module.__getattr__ finds it, and Python 3.11 raises and formats an
# AttributeError for that failure: about half a microsecond per read. The core's function replays
# the lookup for Module.__getattr__ (registered here) without that error.
_prims._register_module_getattr(Module.__getattr__)
member = _prims.module_attribute

# Module.__call__'s reads (the compiled replay, the four hook dicts, forward) made by the core in C,
# in the Python __call__'s order: Python 3.11 cannot specialize attribute reads of a class with
# __getattr__, so in bytecode they and the *args/**kwargs repacking cost about half a microsecond a
# module call. The reference keeps the Python __call__.
Module.__call__ = _prims._module_call(
    Module,
    ["_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks"],
    [_global_forward_pre_hooks, _global_forward_hooks, _global_backward_pre_hooks, _global_backward_hooks],
)
