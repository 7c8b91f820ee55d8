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


class _Uninitialized(Tensor):
    """What UninitializedParameter and UninitializedBuffer share: no data, no shape, until
    materialize(shape) gives them data and turns them into cls_to_become. (A Tensor subclass, not a
    mixin: only single-layout class trees allow the `__class__` assignments.)"""

    __slots__ = ()

    def materialize(self, shape, device=None, dtype=None):
        self.data = empty(shape, device=device, dtype=self.data.dtype if dtype is None else dtype)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. "
            "This error usually happens in `load_state_dict` when trying to load "
            "an uninitialized parameter into an initialized one. "
            "Call `forward` to initialize the parameters before accessing their attributes."
        )

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        return type(self), (self.requires_grad,)

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, dtype=self.data.dtype)
        return memo[id(self)]


class UninitializedParameter(_Uninitialized, Parameter):
    """A lazy module's Parameter whose shape is not known yet."""

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return Parameter.__new__(cls, empty(0, device=device, dtype=dtype), requires_grad)

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass  # __new__ made the whole object


class _BufferMeta(type(Tensor)):  # the backend's metaclass (pybind11's for the C++ Tensor)
    def __instancecheck__(cls, instance):
        if cls is Buffer:  # the tensors Buffer() marked
            return isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False)
        return super().__instancecheck__(instance)


class Buffer(Tensor, metaclass=_BufferMeta):
    """A marker, as PyTorch's: Buffer(data, persistent=) returns a plain tensor (data detached) that a
    module attribute assignment registers as a buffer, persistent or not."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = empty(0)
        tensor = data.detach().requires_grad_(data.requires_grad)
        tensor.persistent = persistent
        tensor._is_buffer = True
        return tensor


class UninitializedBuffer(_Uninitialized):
    """A lazy module's buffer whose shape is not known yet (a Buffer: assigning it registers it)."""

    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        tensor = _finish(empty(0, device=device, dtype=dtype), requires_grad)
        tensor.__class__ = cls
        tensor.persistent = persistent
        tensor._is_buffer = True
        return tensor

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass  # __new__ made the whole object


def is_lazy(param):
    """Whether param (a parameter or buffer) is still uninitialized (its shape unknown)."""
    return isinstance(param, _Uninitialized)


def _rebuild_parameter(data, requires_grad):
    if type(data) is not Tensor or not isinstance(requires_grad, bool):
        raise pickle.UnpicklingError("not a valid pickled fastgrad Parameter")
    return Parameter(data, requires_grad)
