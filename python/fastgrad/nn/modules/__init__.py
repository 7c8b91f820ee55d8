"""torch.nn.modules: the path by which PyTorch programs reach the files of nn's classes and the global
hooks (torch.nn.modules.module.register_module_forward_hook); here, those files' fastgrad twins."""

from .. import activation, container, lazy, module, normalization, pooling, transformer, upsampling

batchnorm = instancenorm = normalization  # PyTorch's files of the batch and instance norms (their base classes)

__all__ = [
    "activation",
    "batchnorm",
    "container",
    "instancenorm",
    "lazy",
    "module",
    "normalization",
    "pooling",
    "transformer",
    "upsampling",
]
