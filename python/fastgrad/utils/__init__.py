"""fastgrad.utils: torch.utils's data loading, as fastgrad.utils.data.

Shared by both backends (see fastgrad._shared): fastgrad.reference.utils.data batches the
reference's tensors.
"""

from . import data

__all__ = ["data"]
