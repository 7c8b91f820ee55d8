"""fastgrad.utils: torch.utils's data loading, as fastgrad.utils.data, and hooks.RemovableHandle.

Shared by both backends (see fastgrad._shared): fastgrad.reference.utils.data batches the
reference's tensors.
"""

from . import data, hooks

__all__ = ["data", "hooks"]
