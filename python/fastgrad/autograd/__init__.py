"""fastgrad.autograd: gradient utilities on top of the core engine (a torch.autograd subset)."""
from . import function
from .function import Function
from .gradcheck import gradcheck
from .gradients import backward, grad

__all__ = ["Function", "backward", "function", "grad", "gradcheck"]
