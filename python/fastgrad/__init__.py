"""fastgrad: reverse-mode autograd with PyTorch's tensor API, on a C++ core.

    import fastgrad as torch
    a = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    e = (a + b) * (a * b)
    e.backward()
    a.grad, b.grad  # (tensor(21.), tensor(16.))
"""
from . import _C
from ._types import Size, device, dtype, bool, int64, float32, float64, long, float, double
from ._tensor import Tensor, _FUNCTIONS
from ._grad_mode import no_grad, enable_grad, set_grad_enabled, is_grad_enabled
from ._creation import (tensor, as_tensor, from_numpy, zeros, ones, empty, full, zeros_like, ones_like, empty_like,
                        full_like, arange, linspace, eye, rand, randn, rand_like, randn_like, randint, normal,
                        manual_seed, seed)
from . import _creation
from . import autograd

globals().update(_FUNCTIONS)
# fastgrad.Tensor(data) / fastgrad.Tensor(2, 3): __new__ builds the whole tensor, so __init__ has nothing left to do.
Tensor.__new__ = _creation._legacy_new
Tensor.__init__ = lambda self, *args, **kwargs: None

__version__ = "0.1.0"
