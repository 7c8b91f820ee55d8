"""The legacy nn.utils.weight_norm (a forward pre-hook recomputing the weight from <name>_g and
<name>_v), and the weight-norm formulas parametrizations.weight_norm shares."""

import warnings

from ...autograd.function import Function
from ..parameter import Parameter, UninitializedParameter

__all__ = ["weight_norm", "remove_weight_norm"]


def norm_except_dim(v, dim):
    """The 2-norm of v over every dim but `dim`, kept as a size-1 dim (over everything for dim -1)."""
    if dim == -1:
        return v.norm(2)
    if dim == 0:
        return v.contiguous().view(v.size(0), -1).norm(2, 1).view(v.size(0), *[1] * (v.dim() - 1))
    if dim == v.dim() - 1:
        return v.contiguous().view(-1, v.size(-1)).norm(2, 0).view(*[1] * (v.dim() - 1), v.size(-1))
    return norm_except_dim(v.transpose(0, dim), 0).transpose(0, dim)


class WeightNormInterface(Function):
    """g * v / ||v|| with PyTorch's fused backward (its _weight_norm_interface, used for the first
    or last dim): per slice, grad_g = sum(grad_w * v) / norm and grad_v = a * grad_w - b * v, with
    a = g / norm and b = a * grad_g / norm."""

    @staticmethod
    def forward(ctx, v, g, dim):
        norms = norm_except_dim(v, dim)
        ctx.save_for_backward(v, g, norms)
        ctx.dim = dim
        return v * (g / norms)

    @staticmethod
    def backward(ctx, grad_w):
        v, g, norms = ctx.saved_tensors
        other_dims = [d for d in range(v.dim()) if d != ctx.dim]
        grad_g = (grad_w * v).sum(other_dims, keepdim=True) / norms
        a = g / norms
        b = a * grad_g / norms
        return a * grad_w - b * v, grad_g, None


def weight_from_norm(g, v, dim):
    """g * v / ||v||, the norms over all dims but `dim` (PyTorch's torch._weight_norm)."""
    if 0 < v.dim() and dim in (0, v.dim() - 1):
        return WeightNormInterface.apply(v, g, dim)
    return v * (g / norm_except_dim(v, dim))


class WeightNorm:
    """The forward pre-hook: sets module.<name> from <name>_g and <name>_v before each call."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        return weight_from_norm(getattr(module, self.name + "_g"), getattr(module, self.name + "_v"), self.dim)

    @staticmethod
    def apply(module, name, dim):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        if isinstance(weight, UninitializedParameter):
            raise ValueError(
                "The module passed to `WeightNorm` can't have uninitialized parameters. Make sure to run the "
                "dummy forward before applying weight normalization"
            )
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, fn.dim).data))
        module.register_parameter(name + "_v", Parameter(weight.data))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Replaces the parameter <name> by <name>_g (magnitude) and <name>_v (direction)."""
    warnings.warn(
        "`torch.nn.utils.weight_norm` is deprecated in favor of `torch.nn.utils.parametrizations.weight_norm`.",
        FutureWarning,
        stacklevel=2,
    )
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Makes <name> a parameter again, with its current value."""
    for hook_id, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[hook_id]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
