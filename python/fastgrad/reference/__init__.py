"""fastgrad.reference: the pure-Python twin of fastgrad, for reading, for checking and as the slow baseline.

    import fastgrad.reference as torch
    a = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    e = (a + b) * (a * b)
    e.backward()
    a.grad, b.grad  # (tensor(21.), tensor(16.))

Same public API, semantics, error messages and grad_fn names as fastgrad; every computation is
plain Python (array, math, itertools), numpy only at the edges (numpy arrays and Python data in,
.numpy() out, printing, the arrays random draws are written into). float32 values live in
array('f'), so every stored result is rounded to float32 as the core rounds it.

The modules here replace the C++ core:

    _storage      element storage (array.array, or a numpy buffer for from_numpy), dtype conversions
    _tensor       Tensor: storage + shape/strides/offset + autograd fields; views; element loops
    _autograd     the grad-mode flag, Function (a backward node), saved tensors, sum_to, the engine
    _elementwise  + - * / ** and unary ops, type promotion, where, comparisons, dtype copies
    _reduce       sum, mean, prod, var, std, max/min/amax/amin/argmax/argmin, norm
    _shape        views (view, reshape, expand, permute, transpose, t, squeeze, unsqueeze, slice,
                  select, as_strided), cat, stack
    _matmul       dot, mv, mm, bmm, matmul
    _inplace      the in-place machinery (leaf checks, snapshots, CopySlices) and add_ ... copy_
    _index        x[key], x[key] = value, advanced indexing
    _nn           softmax, log_softmax, nll_loss, gelu: the fused ops of nn.functional
    _conv         convolution (conv1d and conv2d of nn.functional)
    _pool         max, average and adaptive pooling, max_unpool2d (the pools of nn.functional)
    _norm         batch_norm, group_norm, layer_norm: the fused normalizations of nn.functional
    _rnn          recurrent_layer: one direction of a recurrent layer (nn.RNN/LSTM/GRU and the cells)
    _creation     from_numpy, full, arange, linspace, eye: the creation primitives
    _random       PyTorch's CPU generator (mt19937) and its distribution kernels' draws
    _prims        the primitives under fastgrad._prims's names (the core's bindings): operators and
                  the methods bound on Tensor, argument checks, isclose

The layers above the primitives are fastgrad's own modules, executed again with their relative
imports bound to this package (see fastgrad._shared): _methods (PyTorch-style signatures: Tensor
methods and module functions), _factories (tensor(), zeros(), rand(), ...), _grad_mode (no_grad,
enable_grad, set_grad_enabled), autograd (gradcheck, Function, grad), nn, optim, utils.data and serialization
(save, load). So fastgrad.reference.nn.Linear is the same class code as fastgrad.nn.Linear.
viz (graph drawing) reads any backend's graph through the public API: fastgrad.reference.viz is
fastgrad.viz's functions.
"""

from .._types import Size, device, dtype, bool, int64, float32, float64, long, float, double
from .._types import int32, int16, int8, uint8, float16, bfloat16, int, short, half
from .._types import finfo, iinfo, promote_types, result_type, can_cast, get_default_dtype, set_default_dtype
from math import e, inf, nan, pi  # torch.e, torch.inf, torch.nan, torch.pi
from ._tensor import Tensor
from .._shared import load_shared_into

load_shared_into(__name__)
from ._grad_mode import no_grad, enable_grad, set_grad_enabled, is_grad_enabled  # noqa: E402
from ._grad_mode import inference_mode, is_inference_mode_enabled  # noqa: E402
from ._prims import is_anomaly_enabled, is_anomaly_check_nan_enabled, set_anomaly_enabled  # noqa: E402
from ._methods import FUNCTIONS as _FUNCTIONS  # noqa: E402
from ._factories import *  # noqa: E402, F403  the factories both backends export: _factories.__all__
from ._sampling import *  # noqa: E402, F403  rand, randn, multinomial, ...: _sampling.__all__
from ._nn_functions import *  # noqa: E402, F403  torch.conv2d, torch.dropout, ...: _nn_functions.__all__
from .random import Generator, default_generator, manual_seed, seed, initial_seed, get_rng_state, set_rng_state  # noqa: E402
from .serialization import save, load  # noqa: E402
from ._compile import compile  # noqa: E402  (runs eagerly: the reference captures nothing)
from .. import accelerator, amp, backends, cuda, return_types  # noqa: E402  backend-independent: the same modules
from ..amp import autocast  # noqa: E402
from .._determinism import *  # noqa: E402, F403
from .._formatting import set_printoptions  # noqa: E402
from . import viz  # noqa: E402

globals().update(_FUNCTIONS)
from .__config__ import show_config  # noqa: E402  this backend's build: pure Python
from .. import version  # noqa: E402  backend-independent: the package's version
from .._version import __version__  # noqa: E402
