"""fastgrad.optim: torch.optim's Optimizer, SGD, Adam, AdamW and lr_scheduler (StepLR, CosineAnnealingLR).

Shared by both backends (see fastgrad._shared): fastgrad.reference.optim is this package over the
reference's tensors.
"""

from . import lr_scheduler
from . import swa_utils
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler", "swa_utils"]
