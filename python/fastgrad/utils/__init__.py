"""fastgrad.utils: torch.utils's data loading (fastgrad.utils.data), DLPack (fastgrad.utils.dlpack)
and hooks.RemovableHandle.

Shared by both backends (see fastgrad._shared): fastgrad.reference.utils.data batches the
reference's tensors.
"""

from . import data, dlpack, hooks

__all__ = ["data", "dlpack", "hooks"]
