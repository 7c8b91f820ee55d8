"""torch.utils.hooks: RemovableHandle, what nn.Module's hook registrations return."""

from ..nn.module import RemovableHandle

__all__ = ["RemovableHandle"]
