"""fastgrad.utils: torch.utils's data loading, as fastgrad.utils.data, and DLPack, as fastgrad.utils.dlpack.

Shared by both backends (see fastgrad._shared): fastgrad.reference.utils.data batches the
reference's tensors.
"""

from . import data, dlpack

__all__ = ["data", "dlpack"]
