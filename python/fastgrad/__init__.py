"""fastgrad: reverse-mode autograd with PyTorch's tensor API, on a C++ core.

    import fastgrad as torch
    a = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    e = (a + b) * (a * b)
    e.backward()
    a.grad, b.grad  # (tensor(21.), tensor(16.))

The Python modules above the core (_methods, _factories, _grad_mode, autograd) run over _prims,
the core's primitives; fastgrad.reference runs the same modules over its own (see _shared).
"""

from ._types import Size, device, dtype, bool, int64, float32, float64, long, float, double
from ._types import int32, int16, int8, uint8, float16, bfloat16, int, short, half
from ._types import finfo, iinfo, promote_types, result_type, can_cast, get_default_dtype, set_default_dtype
from math import e, inf, nan, pi  # torch.e, torch.inf, torch.nan, torch.pi
from ._prims import Tensor
from ._grad_mode import (
    no_grad,
    enable_grad,
    set_grad_enabled,
    is_grad_enabled,
    inference_mode,
    is_inference_mode_enabled,
)
from ._prims import is_anomaly_enabled, is_anomaly_check_nan_enabled, set_anomaly_enabled
from ._methods import FUNCTIONS as _FUNCTIONS
from . import _hooks  # noqa: F401  Tensor.register_hook, grad_fn.register_hook, ...
from ._factories import *  # noqa: F403  the factories both backends export: _factories.__all__
from ._sampling import *  # noqa: F403  rand, randn, multinomial, ...: _sampling.__all__
from .random import Generator, default_generator, manual_seed, seed, initial_seed, get_rng_state, set_rng_state
from . import autograd, linalg, nn, optim, safetensors, utils, viz
from ._nn_functions import *  # noqa: F403  torch.conv2d, torch.dropout, ...: _nn_functions.__all__
from . import compiler
from ._compile import compile
from . import _linalg_ops  # noqa: F401  addmm, einsum, det, svd, ...: module functions and Tensor methods
from . import accelerator, amp, backends, cuda, return_types  # CPU-only answers to device queries and switches
from .amp import autocast
from ._determinism import *  # noqa: F403  use_deterministic_algorithms, ...
from ._formatting import set_printoptions
from .serialization import save, load
from ._alias import alias_torch

from . import __config__, version
from .__config__ import show_config
from ._version import __version__

globals().update(_FUNCTIONS)
