"""torch.nn.modules: the path by which PyTorch programs reach the files of nn's classes and the global
hooks (torch.nn.modules.module.register_module_forward_hook); here, those files' fastgrad twins."""

from .. import container, lazy, module

__all__ = ["container", "lazy", "module"]
