"""fastgrad.reference: the pure-Python twin of fastgrad, for reading, for checking and as the slow baseline.

    import fastgrad.reference as torch
    a = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    e = (a + b) * (a * b)
    e.backward()
    a.grad, b.grad  # (tensor(21.), tensor(16.))

Same public API, semantics, error messages and grad_fn names as fastgrad; every computation is
plain Python (array, math, itertools), numpy only at the edges (numpy arrays in, .numpy() out,
printing, random numbers). float32 values live in array('f'), so every stored result is rounded to
float32 as the core rounds it.

    _storage      element storage (array.array, or a numpy buffer for from_numpy), dtype conversions
    _tensor       Tensor: storage + shape/strides/offset + autograd fields; views; element loops
    _autograd     grad mode, Function (a backward node), saved tensors, sum_to, the engine
    _elementwise  + - * / ** and unary ops, type promotion, where, comparisons, dtype copies
    _reduce       sum, mean, prod, var, std, max/min/amax/amin/argmax/argmin, norm
    _shape        views (view, reshape, expand, permute, transpose, t, squeeze, unsqueeze, slice,
                  select, as_strided), cat, stack
    _matmul       dot, mv, mm, bmm, matmul
    _inplace      the in-place machinery (leaf checks, snapshots, CopySlices) and add_ ... copy_
    _index        x[key], x[key] = value, advanced indexing
    _methods      PyTorch-style signatures: Tensor methods, operators, module functions
    _creation     tensor(), from_numpy(), factories, random numbers
"""
from .._types import Size, device, dtype, bool, int64, float32, float64, long, float, double
from ._tensor import Tensor
from ._autograd import no_grad, enable_grad, set_grad_enabled, is_grad_enabled
from ._methods import FUNCTIONS as _FUNCTIONS
from ._creation import (tensor, as_tensor, from_numpy, zeros, ones, empty, full, zeros_like, ones_like, empty_like,
                        full_like, arange, linspace, eye, rand, randn, rand_like, randn_like, randint, normal,
                        manual_seed, seed, _legacy_new)

globals().update(_FUNCTIONS)
# reference.Tensor(data) / reference.Tensor(2, 3): the legacy constructor, as in fastgrad.
Tensor.__new__ = _legacy_new

# The layers above tensors (autograd.gradcheck, ...) are fastgrad's own modules, executed again
# with their relative imports bound to this package.
from .._shared import load_shared_into  # noqa: E402

load_shared_into(__name__)
