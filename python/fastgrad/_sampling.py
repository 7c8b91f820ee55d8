"""Random tensors: rand, randn, randint, randperm, normal, multinomial, bernoulli, poisson, and the
in-place fills (uniform_, normal_, bernoulli_, exponential_, geometric_, log_normal_, cauchy_, random_).

Written once for both backends. Every draw comes from a Generator (the `generator=` argument, or the
backend's default one; see random.py), through numpy's vectorized samplers: drawing numbers is not
tensor math, and one sampler per distribution keeps the two backends' numbers identical for a seed.
The results are not differentiable (PyTorch's bernoulli and poisson record a node whose gradient is
zero; here the result has no history: README, Differences).
"""

import builtins
import numbers

import numpy as np

from . import _prims
from ._factories import _finish, _from_array
from ._methods import Tensor, _index, _sizes, _with_out, register
from .random import stream
from fastgrad._types import SCALAR_TYPE_NAME, check_cpu, float32, float64, get_default_dtype, int64, bool as bool_

__all__ = [
    "rand",
    "randn",
    "rand_like",
    "randn_like",
    "randint",
    "randint_like",
    "randperm",
    "normal",
    "multinomial",
    "bernoulli",
    "poisson",
]


def _shape(size, device):
    """The sizes asked for, checked by the backend's empty() (negative sizes, overflow, memory) so that
    numpy's generator never sees them and the errors are worded as for every other factory."""
    check_cpu(device)
    return list(_prims.empty(_sizes(size), bool_).shape)


def _floating(values, dtype, requires_grad):
    dtype = dtype or get_default_dtype()
    if not dtype.is_floating_point:
        raise RuntimeError(f"\"check_uniform_bounds\" not implemented for '{SCALAR_TYPE_NAME[dtype]}'")
    return _finish(_from_array(values, dtype), requires_grad)


def _values(t):
    return _prims.to_numpy(t.detach())


# ---- factories


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    return _floating(stream(generator).random(_shape(size, device)), dtype, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    return _floating(stream(generator).standard_normal(_shape(size, device)), dtype, requires_grad)


def rand_like(input, *, dtype=None, device=None, requires_grad=False):
    return rand(list(input.shape), dtype=dtype or input.dtype, device=device, requires_grad=requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad=False):
    return randn(list(input.shape), dtype=dtype or input.dtype, device=device, requires_grad=requires_grad)


def _integers(low, high, shape, generator):
    if not -(2**63) <= low < 2**63 or not -(2**63) <= high < 2**63:
        raise ValueError("Overflow when unpacking long long")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    return stream(generator).integers(low, high, size=shape)


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    values = _integers(low, high, _shape((size,), device), generator)
    return _finish(_from_array(values, dtype or int64), requires_grad)


def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False):
    if high is None:  # randint_like(input, high)
        low, high = 0, low
    values = _integers(_index(low), _index(high), _shape((list(input.shape),), device), None)
    return _finish(_from_array(values, dtype or input.dtype), requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False, pin_memory=False):
    n = _shape((_index(n),), device)[0]
    return _finish(_from_array(stream(generator).permutation(n), dtype or int64), requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    check_cpu(device)
    means = _values(mean) if isinstance(mean, Tensor) else mean
    stds = _values(std) if isinstance(std, Tensor) else std
    if size is None and not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        raise TypeError("normal() with float mean and std needs a size")
    if np.any(np.asarray(stds) < 0):
        raise RuntimeError(f"normal expects std >= 0.0, but found std {np.min(stds)}")
    shape = None if size is None else _shape((size,), None)
    values = stream(generator).normal(means, stds, size=shape)
    like = mean if isinstance(mean, Tensor) else std if isinstance(std, Tensor) else None
    return _floating(values, dtype or (like.dtype if like is not None else None), requires_grad)


# ---- draws shaped by a tensor of parameters


def _probabilities(input, name):
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"{name} only supports floating-point dtypes for input, got: {SCALAR_TYPE_NAME[input.dtype]}"
        )
    return _values(input).astype(np.float64)


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Category indices drawn from each row of (unnormalised) probabilities. Without replacement a
    row's draws are distinct: the num_samples largest of p / Exponential(1) (PyTorch's method, so
    zero-probability categories come last, once the others are used up)."""
    probabilities = _probabilities(input, "multinomial")
    num_samples = _index(num_samples)
    if input.dim() not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    rows = probabilities.reshape(-1, input.shape[-1])
    categories = rows.shape[1]
    if not replacement and num_samples > categories:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if categories > 2**24:
        raise RuntimeError("number of categories cannot exceed 2^24")
    if not np.all(np.isfinite(rows) & (rows >= 0)):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if np.any(rows.sum(axis=1) <= 0):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    rng = stream(generator)
    if replacement:
        cumulative = np.cumsum(rows, axis=1)
        targets = rng.random((rows.shape[0], num_samples)) * cumulative[:, -1:]
        # the first category whose cumulative sum exceeds the draw: never one of probability 0
        drawn = np.stack([np.searchsorted(c, t, side="right") for c, t in zip(cumulative, targets)])
        drawn = np.minimum(drawn, categories - 1).reshape(-1, num_samples)
    else:
        keys = rows / rng.exponential(size=rows.shape)
        drawn = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    result = _from_array(drawn.reshape(list(input.shape[:-1]) + [num_samples]), int64)
    return _with_out(result, out)


def bernoulli(input, p=None, *, generator=None, out=None):
    """Ones with probability `input` (elementwise), or `p` for every element when it is given."""
    if p is None:
        if not input.dtype.is_floating_point:
            raise NotImplementedError(
                f"\"bernoulli_tensor_cpu_p_\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'"
            )
        probabilities = _values(input)
        if not np.all((probabilities >= 0) & (probabilities <= 1)):
            raise RuntimeError(
                "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be "
                "improved?  If so, please report an enhancement request to PyTorch.)"
            )
        values = stream(generator).random(probabilities.shape) < probabilities
        return _with_out(_from_array(values, input.dtype), out)
    result = _prims.empty(list(input.shape), input.dtype)
    return _with_out(bernoulli_(result, p, generator=generator), out)


def poisson(input, generator=None):
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")
    rates = _values(input)
    if np.any(rates < 0):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return _from_array(stream(generator).poisson(rates).astype(np.float64), input.dtype)


# ---- in-place fills: self's values replaced by draws (copy_ does the in-place and autograd checks)


def _fill(self, values):
    return self.copy_(_from_array(np.asarray(values), self.dtype))


def _continuous(self, name):
    if not self.dtype.is_floating_point:
        raise RuntimeError(
            f"{name} distribution is a continuous probability distribution. dtype must be a floating point but "
            f"you specified {SCALAR_TYPE_NAME[self.dtype]}"
        )


def uniform_(self, a=0.0, b=1.0, *, generator=None):
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a} > to={b}")
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f"\"check_uniform_bounds\" not implemented for '{SCALAR_TYPE_NAME[self.dtype]}'")
    return _fill(self, stream(generator).uniform(a, b, size=list(self.shape)))


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{SCALAR_TYPE_NAME[self.dtype]}'")
    return _fill(self, stream(generator).normal(mean, std, size=list(self.shape)))


def bernoulli_(self, p=0.5, *, generator=None):
    if isinstance(p, Tensor):
        probabilities = np.broadcast_to(_values(p), list(self.shape))
    else:
        if not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
        probabilities = p
    return _fill(self, stream(generator).random(list(self.shape)) < probabilities)


def exponential_(self, lambd=1.0, *, generator=None):
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    _continuous(self, "Exponential")
    return _fill(self, stream(generator).exponential(1 / lambd, size=list(self.shape)))


def geometric_(self, p, *, generator=None):
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    return _fill(self, stream(generator).geometric(p, size=list(self.shape)))


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    _continuous(self, "Log Normal")
    return _fill(self, stream(generator).lognormal(mean, std, size=list(self.shape)))


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    _continuous(self, "Cauchy")
    return _fill(self, median + sigma * stream(generator).standard_cauchy(size=list(self.shape)))


# random_()'s default range: the integers the dtype holds exactly (its mantissa for floats).
_RANDOM_TOP = {bool_: 2, int64: 2**63 - 1, float32: 2**24 + 1, float64: 2**53 + 1}


def random_(self, *bounds, to=None, generator=None):
    """random_(), random_(to), random_(from, to): integers drawn uniformly from [from, to)."""
    bounds = bounds if to is None else (*bounds, to)
    if len(bounds) > 2 or not builtins.all(isinstance(b, numbers.Integral) for b in bounds):
        raise TypeError("random_() takes random_(), random_(to) or random_(from, to), with int bounds")
    low, high = (0, _RANDOM_TOP[self.dtype]) if not bounds else (0, bounds[0]) if len(bounds) == 1 else bounds
    return _fill(self, _integers(low, high, list(self.shape), generator))


register("_sampling", globals())
