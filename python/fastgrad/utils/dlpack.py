"""torch.utils.dlpack: DLPack capsules to and from tensors (see Tensor.__dlpack__ and from_dlpack)."""

from fastgrad._types import DLDeviceType
from .. import _prims
from .._factories import from_dlpack

__all__ = ["DLDeviceType", "from_dlpack", "to_dlpack"]


def to_dlpack(tensor):
    """A legacy "dltensor" capsule over tensor's memory, as torch.utils.dlpack.to_dlpack (which, unlike
    __dlpack__, does not refuse a tensor that requires grad)."""
    return _prims.to_dlpack(tensor, False, False)
