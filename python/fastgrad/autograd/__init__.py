"""fastgrad.autograd: gradient utilities on top of the core engine (a torch.autograd subset)."""
from .gradcheck import gradcheck
