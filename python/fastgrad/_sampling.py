"""Random tensors: rand, randn, randint, randperm, normal, multinomial, bernoulli, poisson, and the
in-place fills (uniform_, normal_, bernoulli_, exponential_, geometric_, log_normal_, cauchy_, random_).

Written once for both backends. Every draw comes from a Generator (the `generator=` argument, or the
backend's default one; see random.py) through its engine's fills, which are PyTorch's CPU
distribution kernels: after the same seed and the same calls, the same numbers as PyTorch (the
float32/float64 values bit for bit; float16/bfloat16 are drawn as float32 and rounded).
The results are not differentiable (PyTorch's bernoulli and poisson record a node whose gradient is
zero; here the result has no history: README, Differences).
"""

import builtins
import numbers

import numpy as np

from . import _prims
from ._factories import _finish, _from_array
from ._methods import Tensor, _index, _sizes, _with_out, register
from .random import engine
from fastgrad._types import NUMPY_TYPES, SCALAR_TYPE_NAME, check_cpu, float32, float64, get_default_dtype, int64
from fastgrad._types import bool as bool_

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
    the generator never sees them and the errors are worded as for every other factory."""
    check_cpu(device)
    return list(_prims.empty(_sizes(size), bool_).shape)


def _values(t):
    return _prims.to_numpy(t.detach())


def _drawn(shape, dtype, fill, *args):
    """A new tensor of `shape` and `dtype` filled by the engine method `fill` (row-major order). The
    engine fills float32, float64, bool and the integer types; float16/bfloat16 are drawn as float32."""
    draw_type = float32 if dtype.is_floating_point and dtype not in (float32, float64) else dtype
    values = np.empty(int(np.prod(shape, dtype=np.int64)), NUMPY_TYPES[draw_type])
    fill(values, *args)
    return _from_array(values.reshape(shape), dtype)


def _floating_type(dtype):
    dtype = dtype or get_default_dtype()
    if not dtype.is_floating_point:
        raise RuntimeError(f"\"check_uniform_bounds\" not implemented for '{SCALAR_TYPE_NAME[dtype]}'")
    return dtype


# ---- factories


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    dtype = _floating_type(dtype)
    return _finish(_drawn(_shape(size, device), dtype, engine(generator).uniform_, 0.0, 1.0), requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    dtype = _floating_type(dtype)
    values = _drawn(_shape(size, device), dtype, engine(generator).normal_, 0.0, 1.0, True)
    return _finish(values, requires_grad)


def rand_like(input, *, dtype=None, device=None, requires_grad=False):
    return rand(list(input.shape), dtype=dtype or input.dtype, device=device, requires_grad=requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad=False):
    return randn(list(input.shape), dtype=dtype or input.dtype, device=device, requires_grad=requires_grad)


def _integers(low, high, shape, dtype, generator):
    """random_(low, high) of a new tensor: PyTorch's randint."""
    if not -(2**63) <= low < 2**63 or not -(2**63) <= high < 2**63:
        raise ValueError("Overflow when unpacking long long")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    return _drawn(shape, dtype, engine(generator).random_from_to_, high - low, low)


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    return _finish(_integers(low, high, _shape((size,), device), dtype or int64, generator), requires_grad)


def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False):
    if high is None:  # randint_like(input, high)
        low, high = 0, low
    values = _integers(_index(low), _index(high), _shape((list(input.shape),), device), dtype or input.dtype, None)
    return _finish(values, requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False, pin_memory=False):
    n = _shape((_index(n),), device)[0]
    values = _drawn([n], int64, engine(generator).randperm_)  # PyTorch shuffles the same way in every dtype
    return _finish(values if dtype in (None, int64) else _prims.to_dtype(values, dtype), requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """PyTorch's forms: numbers and a size (normal_(mean, std)); a tensor mean (normal_(0, std), then
    + mean); a tensor std (normal_(0, 1), then * std + mean), shaped as they broadcast."""
    check_cpu(device)
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if not tensors:
        if size is None:
            raise TypeError("normal() with float mean and std needs a size")
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        values = _drawn(_shape((size,), None), _floating_type(dtype), engine(generator).normal_, mean, std, True)
        return _finish(values, requires_grad)
    if isinstance(std, Tensor):
        if np.any(_values(std) < 0):
            raise RuntimeError("normal expects all elements of std >= 0.0")
        shape = _meta_broadcast(mean, std)
        noise = _drawn(shape, _floating_type(dtype or tensors[0].dtype), engine(generator).normal_, 0.0, 1.0, True)
        mean = mean.detach() if isinstance(mean, Tensor) else mean
        return _finish(noise.mul_(std.detach()).add_(mean), requires_grad)
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    noise = _drawn(list(mean.shape), _floating_type(dtype or mean.dtype), engine(generator).normal_, 0.0, std, True)
    return _finish(noise.add_(mean.detach()), requires_grad)


def _meta_broadcast(*tensors):
    return list(_prims.broadcast_shapes(*[list(t.shape) if isinstance(t, Tensor) else [] for t in tensors]))


# ---- draws shaped by a tensor of parameters


def _probabilities(input, name):
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"{name} only supports floating-point dtypes for input, got: {SCALAR_TYPE_NAME[input.dtype]}"
        )
    return _values(input).astype(np.float64)


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Category indices drawn from each row of (unnormalised) probabilities, as PyTorch's CPU kernel:
    without replacement (or one sample) the num_samples largest of p / Exponential(1) (argmax or
    topk: distinct draws, zero-probability categories last); with replacement a binary search of
    one double uniform per sample in the row's normalised cumulative sums."""
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
    rng = engine(generator)
    if replacement and num_samples > 1:
        drawn = np.stack([_inverse_cdf_draws(row, num_samples, rng) for row in _values(input).reshape(rows.shape)])
    else:
        weights = _values(input).reshape(rows.shape)
        keys = np.empty(weights.size, weights.dtype if weights.dtype in (np.float32, np.float64) else np.float32)
        rng.exponential_(keys, 1.0)
        keys = weights / keys.reshape(weights.shape).astype(weights.dtype)
        if num_samples == 1:  # argmax: the first of equal keys
            drawn = np.argmax(keys, axis=1)[:, None]
        else:  # topk: the num_samples largest keys, largest first
            top = np.argpartition(-keys, num_samples - 1, axis=1)[:, :num_samples]
            order = np.argsort(-np.take_along_axis(keys, top, axis=1), axis=1, kind="stable")
            drawn = np.take_along_axis(top, order, axis=1)
    result = _from_array(drawn.reshape(list(input.shape[:-1]) + [num_samples]), int64)
    return _with_out(result, out)


def _inverse_cdf_draws(row, num_samples, rng):
    """ATen's multinomial_with_replacement for one row: cumulative sums in the row's type, divided
    by the total, the last set to 1; each sample the first category whose sum is >= a double uniform."""
    cumulative = np.cumsum(row, dtype=row.dtype)
    cumulative /= cumulative[-1]
    cumulative[-1] = 1
    uniforms = np.empty(num_samples, np.float64)
    rng.uniform_(uniforms, 0.0, 1.0)
    return np.searchsorted(cumulative.astype(np.float64), uniforms, side="left")


def bernoulli(input, p=None, *, generator=None, out=None):
    """Ones with probability `input` (elementwise), or `p` for every element when it is given."""
    if p is None:
        if not input.dtype.is_floating_point:
            raise NotImplementedError(
                f"\"bernoulli_tensor_cpu_p_\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'"
            )
        result = bernoulli_(_prims.empty(list(input.shape), input.dtype), input, generator=generator)
        return _with_out(result, out)
    result = _prims.empty(list(input.shape), input.dtype)
    return _with_out(bernoulli_(result, p, generator=generator), out)


def poisson(input, generator=None):
    """ATen's sample_poisson per rate: a product of uniforms below 10, Hoermann's transformed
    rejection from 10 on."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for '{SCALAR_TYPE_NAME[input.dtype]}'")
    rates = _values(input)
    if np.any(rates < 0):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    draw_type = float64 if input.dtype is float64 else float32
    rates = np.ascontiguousarray(rates, NUMPY_TYPES[draw_type]).reshape(-1)
    return _drawn(list(input.shape), input.dtype, engine(generator).poisson_, rates)


# ---- in-place fills: self's values replaced by draws (copy_ does the in-place and autograd checks)


def _fill_with(self, fill, *args):
    """self's values replaced by `fill`'s draws, in memory order as PyTorch's kernels walk it: a
    transposed or permuted self gets its draws in the order of its strides, largest first."""
    if self.is_contiguous():
        return self.copy_(_drawn(list(self.shape), self.dtype, fill, *args))
    order = sorted(range(self.dim()), key=lambda d: -self.stride(d))
    drawn = _drawn([self.shape[d] for d in order], self.dtype, fill, *args)
    return self.copy_(drawn.permute(sorted(range(self.dim()), key=order.__getitem__)))


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
    return _fill_with(self, engine(generator).uniform_, a, b)


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{SCALAR_TYPE_NAME[self.dtype]}'")
    return _fill_with(self, engine(generator).normal_, mean, std, self.is_contiguous())


def bernoulli_(self, p=0.5, *, generator=None):
    if not isinstance(p, Tensor):
        if not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
        return _fill_with(self, engine(generator).bernoulli_, p)
    probabilities = _values(p)
    if not np.all((probabilities >= 0) & (probabilities <= 1)):
        raise RuntimeError(
            "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be "
            "improved?  If so, please report an enhancement request to PyTorch.)"
        )
    # a float64 p draws double uniforms, any other floating p float ones (ATen's bernoulli_tensor_cpu_p_)
    p_type = np.float64 if p.dtype is float64 else np.float32
    expanded = np.array(np.broadcast_to(probabilities, list(self.shape)), dtype=p_type).reshape(-1)
    return _fill_with(self, engine(generator).bernoulli_tensor_, expanded)


def exponential_(self, lambd=1.0, *, generator=None):
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    _continuous(self, "Exponential")
    return _fill_with(self, engine(generator).exponential_, lambd)


def geometric_(self, p, *, generator=None):
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    return _fill_with(self, engine(generator).geometric_, p)


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    _continuous(self, "Log Normal")
    return _fill_with(self, engine(generator).log_normal_, mean, std)


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    _continuous(self, "Cauchy")
    return _fill_with(self, engine(generator).cauchy_, median, sigma)


def random_(self, *bounds, to=None, generator=None):
    """random_(), random_(to), random_(from, to): integers drawn uniformly from [from, to)."""
    bounds = bounds if to is None else (*bounds, to)
    if len(bounds) > 2 or not builtins.all(isinstance(b, numbers.Integral) for b in bounds):
        raise TypeError("random_() takes random_(), random_(to) or random_(from, to), with int bounds")
    if not bounds:
        return _fill_with(self, engine(generator).random_)
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
    return self.copy_(_integers(low, high, list(self.shape), self.dtype, generator))


register("_sampling", globals())
