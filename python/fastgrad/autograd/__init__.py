"""fastgrad.autograd: gradient utilities on top of the core engine (a torch.autograd subset)."""

from . import anomaly_mode, function, functional
from .anomaly_mode import detect_anomaly, set_detect_anomaly
from .function import Function
from .gradcheck import gradcheck, gradgradcheck
from .gradients import backward, grad

__all__ = [
    "Function",
    "anomaly_mode",
    "backward",
    "detect_anomaly",
    "function",
    "functional",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "set_detect_anomaly",
]
