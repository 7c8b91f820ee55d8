"""torch.autograd.Variable, PyTorch's wrapper from before tensors carried autograd state; kept so that
old programs (and tutorials written for them) run unchanged. As in PyTorch, Variable(t) is a new leaf
sharing t's data, and every tensor is an instance of Variable."""

import warnings

from .. import _prims
from .._factories import empty

Tensor = _prims.Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if data is None:
            data = empty(0)
        elif not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if volatile:
            if requires_grad:
                raise ValueError("Variable can't be volatile and require_grad at the same time!")
            message = "volatile was removed and now has no effect. Use `with torch.no_grad():` instead."
            warnings.warn(message, stacklevel=2)
        if requires_grad and not data.dtype.is_floating_point:
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        return data.detach().requires_grad_(bool(requires_grad))
