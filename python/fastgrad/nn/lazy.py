"""Lazy modules: parameters whose shapes the first input decides (LazyModuleMixin, LazyLinear)."""

from .._grad_mode import no_grad
from .layers import Linear
from .parameter import UninitializedParameter, is_lazy


class LazyModuleMixin:
    """Put before the layer class (class LazyX(LazyModuleMixin, X)): the module keeps
    UninitializedParameters until its first call, which runs initialize_parameters(*args, **kwargs)
    and then turns the module into cls_to_become. A state_dict loaded before that call
    materializes them with the checkpoint's shapes."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        # an uninitialized parameter is saved as itself: it has no data to detach
        for name, member in [*self._parameters.items(), *self._buffers.items()]:
            if member is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = member if keep_vars or is_lazy(member) else member.detach()

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        for name, member in [*self._parameters.items(), *self._buffers.items()]:
            key = prefix + name
            if is_lazy(member) and key in state_dict and not is_lazy(state_dict[key]):
                with no_grad():
                    member.materialize(state_dict[key].shape)

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def has_uninitialized_params(self):
        return any(is_lazy(member) for member in [*self._parameters.values(), *self._buffers.values()])

    def _infer_parameters(self, module, args, kwargs=None):
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        delattr(module, "_initialize_hook")
        delattr(module, "_load_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become


class LazyLinear(LazyModuleMixin, Linear):
    """Linear whose in_features is the last dimension of its first input."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False)  # no data yet: reset_parameters draws nothing while in_features is 0
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()
        if self.in_features == 0:  # the parameters came from a state_dict: their shape tells in_features
            if input.shape[-1] != self.weight.shape[-1]:
                raise AssertionError(
                    f"The in_features inferred from input: {input.shape[-1]} is not equal to in_features from "
                    f"self.weight: {self.weight.shape[-1]}"
                )
            self.in_features = input.shape[-1]
