"""fastgrad.autograd: gradient utilities on top of the core engine (a torch.autograd subset)."""

from . import anomaly_mode, function, functional
from .._grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled
from .anomaly_mode import detect_anomaly, set_detect_anomaly
from .function import Function
from .gradcheck import gradcheck, gradgradcheck
from .gradients import backward, grad
from .variable import Variable


def variable(*args, **kwargs):
    """PyTorch's placeholder for its removed torch.autograd.variable() (the module of the same name
    stays importable: `from torch.autograd.variable import Variable`)."""
    raise RuntimeError("torch.autograd.variable(...) is deprecated, use torch.tensor(...) instead")


__all__ = [
    "Function",
    "Variable",
    "anomaly_mode",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "function",
    "functional",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "inference_mode",
    "no_grad",
    "set_grad_enabled",
    "set_detect_anomaly",
    "variable",
]
