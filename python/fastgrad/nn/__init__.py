"""fastgrad.nn: torch.nn's Module, Parameter, layers, losses, functional and init.

Shared by both backends (see fastgrad._shared): fastgrad.reference.nn is this package over the
reference's tensors and primitives.
"""

from . import functional, init
from .container import ModuleList, Sequential
from .layers import (
    GELU,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    LayerNorm,
    RMSNorm,
    LeakyReLU,
    Linear,
    LogSoftmax,
    ReLU,
    Sigmoid,
    Softmax,
    Tanh,
)
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss
from .loss import (
    BCELoss,
    CosineEmbeddingLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    KLDivLoss,
    MarginRankingLoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    NLLLoss2d,
    PoissonNLLLoss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)
from .module import Module
from .parameter import Parameter
from .container import ModuleDict, ParameterDict, ParameterList
from .lazy import LazyLinear, LazyModuleMixin
from .parameter import Buffer, UninitializedBuffer, UninitializedParameter
from . import modules, utils

__all__ = [
    "Module",
    "Parameter",
    "Sequential",
    "ModuleList",
    "Identity",
    "Linear",
    "Embedding",
    "LayerNorm",
    "RMSNorm",
    "Dropout",
    "Flatten",
    "ReLU",
    "LeakyReLU",
    "Tanh",
    "Sigmoid",
    "GELU",
    "Softmax",
    "LogSoftmax",
    "MSELoss",
    "L1Loss",
    "SmoothL1Loss",
    "HuberLoss",
    "NLLLoss",
    "CrossEntropyLoss",
    "BCEWithLogitsLoss",
    "functional",
    "init",
    "BCELoss",
    "KLDivLoss",
    "PoissonNLLLoss",
    "GaussianNLLLoss",
    "MarginRankingLoss",
    "HingeEmbeddingLoss",
    "MultiLabelMarginLoss",
    "SoftMarginLoss",
    "MultiLabelSoftMarginLoss",
    "CosineEmbeddingLoss",
    "MultiMarginLoss",
    "TripletMarginLoss",
    "TripletMarginWithDistanceLoss",
    "NLLLoss2d",
    "ModuleDict",
    "ParameterList",
    "ParameterDict",
    "UninitializedParameter",
    "LazyModuleMixin",
    "LazyLinear",
    "utils",
    "modules",
    "Buffer",
    "UninitializedBuffer",
]
