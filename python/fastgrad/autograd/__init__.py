"""fastgrad.autograd: gradient utilities on top of the core engine (a torch.autograd subset)."""
from . import function, functional
from .function import Function
from .gradcheck import gradcheck, gradgradcheck
from .gradients import backward, grad

__all__ = ["Function", "backward", "function", "functional", "grad", "gradcheck", "gradgradcheck"]
