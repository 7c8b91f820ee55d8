"""Random tensors: rand, randn, randint, randperm, normal, multinomial, bernoulli, poisson, and the
in-place fills (uniform_, normal_, bernoulli_, exponential_, geometric_, log_normal_, cauchy_, random_).

Written once for both backends. Every draw comes from a Generator (the `generator=` argument, or the
backend's default one; see random.py) through its engine's fills, which are PyTorch's CPU
distribution kernels: after the same seed and the same calls, the same numbers as PyTorch, bit for
bit. float16/bfloat16 values are drawn as float32 and rounded, as ATen's kernels compute them in
float (with its few differences for them: normal's blocks, uniform's bound, random_'s range).
The results are not differentiable (PyTorch's bernoulli and poisson record a node whose gradient is
zero; here the result has no history: README, Differences).
"""

import builtins
import math
import numbers
import warnings
from fractions import Fraction

import numpy as np

from . import _prims
from ._factories import _finish, _from_array
from ._methods import Tensor, _index, _sizes, _with_out, register
from .random import engine
from fastgrad._types import NUMPY_TYPES, SCALAR_TYPE_NAME, check_cpu, float32, float64, get_default_dtype, int64
from fastgrad._types import C_TYPE_NAME, bfloat16, bool as bool_, finfo, float16

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


# The significand bits of each floating dtype (std::numeric_limits<T>::digits).
_DIGITS = {float16: 11, bfloat16: 8, float32: 24, float64: 53}
_SIXTEEN_BIT = (float16, bfloat16)


def _values(t):
    """t's values as numpy (bfloat16, which numpy lacks, widened exactly to float32)."""
    t = t.detach()
    return _prims.to_numpy(_prims.to_dtype(t, float32) if t.dtype is bfloat16 else t)


def _drawn(shape, dtype, fill, *args):
    """A new tensor of `shape` and `dtype` filled by the engine method `fill` (row-major order). The
    engine fills float32, float64, bool and the integer types; float16/bfloat16 are drawn as float32."""
    draw_type = float32 if dtype.is_floating_point and dtype not in (float32, float64) else dtype
    if draw_type is dtype and dtype is not bool_:
        # the engine fills the new tensor's own memory: no array to copy over, which took most of a
        # per-token multinomial's time; one op, which fastgrad.compile replays
        drawn = _prims.empty(shape, dtype)
        _prims.fill_drawn_(drawn, fill, args)
        return drawn
    values = np.empty(math.prod(shape), NUMPY_TYPES[draw_type])  # math's: numpy's prod of a list costs µs
    fill(values, *args)
    return _from_array(values.reshape(shape), dtype)


def _uniform_fill(generator, dtype):
    """The engine's uniform_ fill; for float16/bfloat16 a float32 fill whose values that round to
    the dtype's `to` become `from` (ATen's kernel keeps [from, to) half-open after its rounding)."""
    fill = engine(generator).uniform_
    if dtype not in _SIXTEEN_BIT:
        return fill

    def fill_rounded(values, low, high):
        fill(values, low, high)
        rounded = _values(_from_array(values, dtype))
        values[rounded == _values(_from_array(np.array([high], values.dtype), dtype))] = low

    return fill_rounded


def _normal_fill(generator, dtype):
    """The engine's normal_ fill; for float16/bfloat16 ATen's fill of them: the float32 blocks of 16
    values, but a last partial block is a whole block of new draws laid over the last 16 values (the
    float32 fill first draws every value, then redraws those 16)."""
    fill = engine(generator).normal_
    if dtype not in _SIXTEEN_BIT:
        return fill

    def fill_blocks(values, mean, std, contiguous):
        n = values.size
        if n < 16 or not contiguous or n % 16 == 0:
            return fill(values, mean, std, contiguous)
        blocks = np.empty(n - n % 16 + 16, values.dtype)
        fill(blocks, mean, std, True)
        values[: n - 16] = blocks[: n - 16]
        values[n - 16 :] = blocks[-16:]

    return fill_blocks


def _floating_type(dtype):
    dtype = dtype or get_default_dtype()
    if not dtype.is_floating_point:
        raise RuntimeError(f"\"check_uniform_bounds\" not implemented for '{SCALAR_TYPE_NAME[dtype]}'")
    return dtype


# ---- factories


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    dtype = _floating_type(dtype)
    return _finish(_drawn(_shape(size, device), dtype, _uniform_fill(generator, dtype), 0.0, 1.0), requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    dtype = _floating_type(dtype)
    values = _drawn(_shape(size, device), dtype, _normal_fill(generator, dtype), 0.0, 1.0, True)
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
    if dtype.is_floating_point:
        low, high = _floating_bounds(low, high, dtype)
    return _drawn(shape, dtype, engine(generator).random_from_to_, high - low, low)


def _rounded(integer, digits):
    """An integer rounded to `digits` significant bits, ties to even (its conversion to a float)."""
    excess = abs(integer).bit_length() - digits
    return integer if excess <= 0 else round(Fraction(integer, 1 << excess)) << excess


def _floating_bounds(low, high, dtype):
    """ATen's update_from/update_to and check_from_to_in_range for a floating dtype: where it rounds
    from + 1 below `from` (or to - 1 up to `to`), the bound moves inward by the dtype's spacing there,
    so that no draw rounds out of range; bounds past the dtype's range raise, past +-2**digits warn."""
    digits = _DIGITS[dtype]
    if _rounded(low + 1, digits) < low:
        low = _rounded(low + 1, digits) + (1 << (abs(low + 1).bit_length() - digits))
    if _rounded(high - 1, digits) >= high:
        high = _rounded(high - 1, digits) - (1 << (abs(high - 1).bit_length() - digits))
    if low >= high:
        raise RuntimeError(
            "random_ expects 'from' casted to dtype to be less than 'to' casted to dtype, but got "
            f"from={low} >= to={high}"
        )
    largest, name = finfo(dtype).max, C_TYPE_NAME[dtype]
    for value, what in ((low, "from"), (high - 1, "to - 1")):
        if not -largest <= value <= largest:
            raise RuntimeError(f"{what} is out of bounds for {name}")
    for value, what in ((low, "from"), (high - 1, "to - 1")):
        if not -(2**digits) <= value <= 2**digits:
            warnings.warn(
                f"{what} is out of bounds [-(2^{digits}), 2^{digits}]. Due to precision limitations {name} can "
                "support discrete uniform distribution only within this range. This warning will become an error "
                "in version 1.7 release, please fix the code in advance",
                stacklevel=4,
            )
    return low, high


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
        dtype = _floating_type(dtype)
        return _finish(
            _drawn(_shape((size,), None), dtype, _normal_fill(generator, dtype), mean, std, True), requires_grad
        )
    if isinstance(std, Tensor):
        if np.any(_values(std) < 0):
            raise RuntimeError("normal expects all elements of std >= 0.0")
        dtype = _floating_type(dtype or tensors[0].dtype)
        noise = _drawn(_meta_broadcast(mean, std), dtype, _normal_fill(generator, dtype), 0.0, 1.0, True)
        mean = mean.detach() if isinstance(mean, Tensor) else mean
        return _finish(noise.mul_(std.detach()).add_(mean), requires_grad)
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    dtype = _floating_type(dtype or mean.dtype)
    noise = _drawn(list(mean.shape), dtype, _normal_fill(generator, dtype), 0.0, std, True)
    return _finish(noise.add_(mean.detach()), requires_grad)


def _meta_broadcast(*tensors):
    return list(_prims.broadcast_shapes(*[list(t.shape) if isinstance(t, Tensor) else [] for t in tensors]))


# ---- draws shaped by a tensor of parameters


_ONE_DRAW_TYPES = (float32, float64)


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Category indices drawn from each row of (unnormalised) probabilities, as PyTorch's CPU kernel:
    without replacement (or one sample) the num_samples largest of p / Exponential(1) in the input's
    dtype (argmax, or topk with its order of equal keys: distinct draws, zero-probability categories
    last); with replacement a binary search of one double uniform per sample in the row's normalised
    cumulative sums. A sampling loop calls this per token: its one sample of each float32 or float64
    row is checked, drawn and picked by one primitive (multinomial_one), without numpy."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"multinomial only supports floating-point dtypes for input, got: {SCALAR_TYPE_NAME[input.dtype]}"
        )
    num_samples = _index(num_samples)
    if input.dim() not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    shape = list(input.shape)
    if not replacement and num_samples > shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if shape[-1] > 2**24:
        raise RuntimeError("number of categories cannot exceed 2^24")
    probabilities = input.detach() if input.requires_grad else input
    if num_samples == 1 and input.dtype in _ONE_DRAW_TYPES and 0 not in shape:
        # the checks, the noise, the keys and their argmax below in one call (per token in a sampling loop)
        return _with_out(_prims.multinomial_one(engine(generator), probabilities), out)
    _check_probabilities(probabilities, shape)
    if replacement and num_samples > 1:  # the 16-bit floats sum in float32, as ATen's kernel for them
        rows = _as_rows(_values(probabilities), shape)
        drawn = np.empty((rows.shape[0], num_samples), np.int64)
        row_type = np.float64 if input.dtype is float64 else np.float32
        engine(generator).multinomial_with_replacement_(drawn, np.array(rows, row_type))
        result = _prims.from_numpy(drawn.reshape(shape[:-1] + [num_samples]), share_memory=False)
    else:
        noise = _drawn(shape, input.dtype, engine(generator).exponential_, 1.0)
        keys = _prims.div(probabilities, noise)
        if num_samples == 1:  # argmax: the first of equal keys
            result = _prims.argmax(keys, -1, True)
        else:  # topk: the num_samples largest keys, largest first, equal ones in the order ATen's leaves them
            rows = _as_rows(_values(keys), shape)
            drawn = np.empty((rows.shape[0], num_samples), np.int64)
            key_type = np.float64 if input.dtype is float64 else np.float32  # ATen's topk compares 16-bit keys as float
            engine(generator).multinomial_top_(drawn, np.array(rows, key_type))
            result = _prims.from_numpy(drawn.reshape(shape[:-1] + [num_samples]), share_memory=False)
    return _with_out(result, out)


def _as_rows(values, shape):
    """multinomial's 1-D or 2-D values as a 2-D numpy array of rows (not reshape(-1, n): there may be no rows)."""
    return values.reshape(shape[0] if len(shape) == 2 else 1, shape[-1])


def _check_probabilities(input, shape):
    """multinomial's checks of its rows: every value finite and >= 0 (NaN fails both comparisons),
    then every row's sum > 0, which is its largest value > 0. Reductions of the core (a per-token
    sampling loop calls this: no numpy)."""
    if 0 in shape:  # no values to check; rows of no categories fail ATen's aminmax of them
        if shape[-1] == 0 and math.prod(shape[:-1]):
            raise RuntimeError(
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."
            )
        return
    largest = _prims.max_all(input).item()
    if not (_prims.min_all(input).item() >= 0 and largest < math.inf):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if len(shape) == 2 and shape[0] > 1:  # the smallest of the rows' largest values
        largest = _prims.min_all(_prims.amax(input, [1], False)).item()
    if not largest > 0:
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")


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
    return _fill_with(self, _uniform_fill(generator, self.dtype), a, b)


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{SCALAR_TYPE_NAME[self.dtype]}'")
    return _fill_with(self, _normal_fill(generator, self.dtype), mean, std, self.is_contiguous())


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
        if self.dtype in _SIXTEEN_BIT:  # ATen's range for them: 0..2**digits (the float32 fill's is 0..2**24)
            return _fill_with(self, engine(generator).random_from_to_, 2 ** _DIGITS[self.dtype] + 1, 0)
        return _fill_with(self, engine(generator).random_)
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
    return self.copy_(_integers(low, high, list(self.shape), self.dtype, generator))


register("_sampling", globals())
