"""nn.Parameter: a Tensor subclass marking a module's learnable leaf tensors.

The backend's Tensor is built only by the backend (the C++ core, or reference._tensor), so a
Parameter is made the way torch.Tensor._make_subclass makes one: a new tensor sharing `data`'s
storage (detach), given the flag and then re-classed. `__slots__ = ()` keeps the subclass's layout
identical to Tensor's, which is what lets `__class__` be assigned. Operations on a Parameter build
new tensors of the plain Tensor type; in-place ones return the Parameter itself, as in PyTorch.
"""

import pickle

from .. import _prims
from .._factories import _finish, empty

Tensor = _prims.Tensor


class Parameter(Tensor):
    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        tensor = _finish((empty(0) if data is None else data).detach(), requires_grad)
        tensor.__class__ = cls
        return tensor

    def __init__(self, data=None, requires_grad=True):
        pass  # __new__ made the whole object

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.detach().clone(), self.requires_grad)
        return memo[id(self)]

    def __copy__(self):  # a Parameter over the same data, not the plain Tensor of Tensor.__copy__
        return type(self)(self, self.requires_grad)

    def __reduce_ex__(self, protocol):
        # a subclass rebuilds through its own class; Parameter through the function below, so that
        # loading a Parameter calls only fastgrad's rebuild functions (see fastgrad._pickling)
        rebuild = _rebuild_parameter if type(self) is Parameter else type(self)
        return rebuild, (self.detach(), self.requires_grad)


def _rebuild_parameter(data, requires_grad):
    if type(data) is not Tensor or not isinstance(requires_grad, bool):
        raise pickle.UnpicklingError("not a valid pickled fastgrad Parameter")
    return Parameter(data, requires_grad)
