"""_CPUGenerator: the pure-Python twin of the core's generator (csrc/core/generator.h) and its
distribution fills (csrc/ops/random.cpp): PyTorch's CPU generator, a 32-bit Mersenne Twister seeded
as ATen seeds it, and the draws of ATen's CPU distribution kernels, value for value.

float32 arithmetic is done in double and rounded (exact for one +, -, * or sqrt of float32 values);
the fused multiply-adds ATen's x86 kernels execute are done exactly (_fma, _fmaf).
"""

import ctypes
import ctypes.util
import math
import struct
from fractions import Fraction

from . import _stl

_WORDS = 624
_SHIFT = 397
_STATE_BYTES = 5056
# ATen's CPUGeneratorImplState: seed, left, seeded, next, 624 words as uint64, normal_x, normal_y,
# normal_rho, normal_is_valid (+4 padding), next_float_normal_sample, its valid flag (+3 padding).
_LAYOUT = struct.Struct(f"<QiiQ{_WORDS}QdddiifB3x")
assert _LAYOUT.size == _STATE_BYTES
_FLOAT = struct.Struct("<f")
_TWO_PI = 2.0 * math.pi
# Cephes' logf polynomial (avx_mathfun.h), after its leading coefficient 7.0376836292e-2.
_LOG_POLYNOMIAL = (-1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                   2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)  # fmt: skip


def _load_c_lgamma():
    """The C library's lgamma, which the core's std::lgamma calls: CPython's math.lgamma is its own
    code, and differs from glibc's in the last bit for about half the integers."""
    library = ctypes.util.find_library("m") or ctypes.util.find_library("c")
    if library is None:  # no C library found by name (Windows): CPython's, which may differ
        return math.lgamma
    lgamma = ctypes.CDLL(library).lgamma
    lgamma.restype, lgamma.argtypes = ctypes.c_double, [ctypes.c_double]
    return lgamma


_c_lgamma = _load_c_lgamma()


def _f32(x):
    """x rounded to float32."""
    return _FLOAT.unpack(_FLOAT.pack(x))[0]


def _fma(a, b, c):
    """a * b + c with one rounding (to double)."""
    return float(Fraction(a) * Fraction(b) + Fraction(c))


def _fmaf(a, b, c):
    """a * b + c of float32 values with one rounding to float32: the product is exact in double; the
    sum's rounding error decides the one case double rounding gets wrong (a sum on a float32 midpoint)."""
    p = a * b
    s = p + c
    err = (p - (s - (s - p))) + (c - (s - p))
    r = _f32(s)
    if err != 0 and r != s and abs(r - s) == abs(_f32(2 * s - r) - s):  # s is the midpoint between two floats
        other = _f32(2 * s - r)
        r = max(r, other) if err > 0 else min(r, other)
    return r


def _cephes_log(x):
    """avx_mathfun.h's log256_ps for one float32 lane in (0, 1]."""
    bits = struct.unpack("<I", _FLOAT.pack(x))[0]
    exponent = _f32(float((bits >> 23) - 0x7F) + 1.0)
    m = struct.unpack("<f", struct.pack("<I", (bits & ~0x7F800000) | 0x3F000000))[0]
    if m < _f32(0.707106781186547524):
        exponent = _f32(exponent - 1.0)
        m = _f32(_f32(m - 1.0) + m)
    else:
        m = _f32(m - 1.0)
    z = _f32(m * m)
    y = _f32(7.0376836292e-2)
    for c in _LOG_POLYNOMIAL:
        y = _fmaf(y, m, _f32(c))
    y = _fmaf(_f32(y * m), z, _f32(exponent * _f32(-2.12194440e-4)))
    y = _fmaf(-z, 0.5, y)
    return _fmaf(exponent, 0.693359375, _f32(m + y))


def _cephes_sincos(x):
    """avx_mathfun.h's sincos256_ps for one float32 lane x >= 0: (sin x, cos x)."""
    octant = (int(_f32(x * _f32(1.27323954473516))) + 1) & ~1
    y = float(octant)
    negate_sin, negate_cos, sin_poly = octant & 4 != 0, ~(octant - 2) & 4 != 0, octant & 2 == 0
    for part in (-0.78515625, -2.4187564849853515625e-4, -3.77489497744594108e-8):
        x = _fmaf(y, _f32(part), x)
    z = _f32(x * x)
    c = _fmaf(_fmaf(_f32(2.443315711809948e-005), z, _f32(-1.388731625493765e-003)), z, _f32(4.166664568298827e-002))
    c = _f32(_fmaf(_f32(c * z), z, -_f32(z * 0.5)) + 1.0)
    s = _fmaf(_fmaf(_f32(-1.9515295891e-4), z, _f32(8.3321608736e-3)), z, _f32(-1.6666654611e-1))
    s = _fmaf(_f32(s * z), x, x)
    s, c = (s, c) if sin_poly else (c, s)
    return (-s if negate_sin else s), (-c if negate_cos else c)


def _is_real(out):
    return out.dtype.kind == "f"


class _CPUGenerator:
    """PyTorch's CPU generator (mt19937), with the fills of its CPU distribution kernels."""

    def __init__(self, seed):
        self.manual_seed(seed)

    def manual_seed(self, seed):
        self._seed = seed
        words = [seed & 0xFFFFFFFF]
        for j in range(1, _WORDS):
            words.append((1812433253 * (words[-1] ^ (words[-1] >> 30)) + j) & 0xFFFFFFFF)
        self._words, self._left, self._next = words, 1, 0
        self.next_double_normal = self.next_float_normal = None

    def initial_seed(self):
        return self._seed

    def _twist(self):
        w = self._words
        for i in range(_WORDS):
            y = (w[i] & 0x80000000) | (w[(i + 1) % _WORDS] & 0x7FFFFFFF)
            w[i] = w[(i + _SHIFT) % _WORDS] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
        self._left, self._next = _WORDS, 0

    def random(self):
        self._left -= 1
        if self._left == 0:
            self._twist()
        y = self._words[self._next]
        self._next += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        return y ^ (y >> 18)

    def random64(self):
        return (self.random() << 32) | self.random()

    def get_state(self):
        double_normal, float_normal = self.next_double_normal, self.next_float_normal
        return _LAYOUT.pack(
            self._seed, self._left, 1, self._next, *self._words,
            0.0, double_normal or 0.0, 0.0, double_normal is not None, 0,
            float_normal or 0.0, float_normal is not None,
        )  # fmt: skip

    def set_state(self, state):
        if len(state) != _STATE_BYTES:
            raise RuntimeError(
                f"Expected a CPUGeneratorImplState of size {_STATE_BYTES} but found the input RNG state size to be "
                f"{len(state)}"
            )
        fields = _LAYOUT.unpack(state)
        seed, left, seeded, next_ = fields[:4]
        next_ &= 0xFFFFFFFF
        if not seeded or not 0 < left <= _WORDS or next_ > _WORDS:
            raise RuntimeError("Invalid mt19937 state")
        double_normal, double_valid, float_normal, float_valid = fields[-6], fields[-4], fields[-2], fields[-1]
        self._seed, self._left, self._next = seed, left, next_
        self._words = [w & 0xFFFFFFFF for w in fields[4 : 4 + _WORDS]]
        self.next_double_normal = double_normal if double_valid else None
        self.next_float_normal = float_normal if float_valid else None

    # ---- draws (csrc/ops/random.cpp)

    def _uniform(self, single, low=0.0, high=1.0):
        """at::uniform_real_distribution: 24 bits of a word (float32) or 53 of random64() (float64)."""
        if single:
            x = (self.random() & 0xFFFFFF) / 2**24
            return x if (low, high) == (0.0, 1.0) else _fmaf(x, _f32(high - low), low)
        x = (self.random64() & (2**53 - 1)) / 2**53
        return x if (low, high) == (0.0, 1.0) else _fma(x, high - low, low)

    def _scalar_normal(self, mean, std):
        value = self.next_double_normal
        if value is None:
            u1, u2 = self._uniform(False), self._uniform(False)
            radius, theta = math.sqrt(-2.0 * math.log1p(-u2)), _TWO_PI * u1
            self.next_double_normal = radius * math.sin(theta)
            value = radius * math.cos(theta)
        else:
            self.next_double_normal = None
        return value if (mean, std) == (0.0, 1.0) else _fma(value, std, mean)

    def uniform_(self, out, low, high):
        single = out.dtype.itemsize == 4
        low, high = (_f32(low), _f32(high)) if single else (low, high)
        for i in range(out.size):
            value = self._uniform(single, low, high)
            out[i] = low if value == high else value  # the range stays half-open, as ATen's

    def normal_(self, out, mean, std, contiguous):
        n, single = out.size, out.dtype.itemsize == 4
        if n < 16 or not contiguous:
            for i in range(n):
                out[i] = self._scalar_normal(mean, std)
            return
        fill = self._normal_fill_16_float if single else self._normal_fill_16_double
        mean, std = (_f32(mean), _f32(std)) if single else (mean, std)
        values = [self._uniform(single) for _ in range(n)]
        for start in range(0, n - 15, 16):
            fill(values, start, mean, std)
        if n % 16:  # ATen then redraws the last 16 values (over the last full block's end) and fills them
            values[n - 16 :] = [self._uniform(single) for _ in range(16)]
            fill(values, n - 16, mean, std)
        out[:] = values

    @staticmethod
    def _normal_fill_16_double(data, at, mean, std):
        for j in range(at, at + 8):
            radius, theta = math.sqrt(-2 * math.log(1 - data[j])), _TWO_PI * data[j + 8]
            data[j] = _fma(radius * math.cos(theta), std, mean)
            data[j + 8] = _fma(radius * math.sin(theta), std, mean)

    @staticmethod
    def _normal_fill_16_float(data, at, mean, std):
        two_pi = _f32(_TWO_PI)
        for j in range(at, at + 8):
            radius = _f32(math.sqrt(_f32(-2.0 * _cephes_log(_f32(1.0 - data[j])))))
            s, c = _cephes_sincos(_f32(two_pi * data[j + 8]))
            data[j] = _fmaf(_f32(radius * c), std, mean)
            data[j + 8] = _fmaf(_f32(radius * s), std, mean)

    def exponential_(self, out, lambd):
        for i in range(out.size):
            out[i] = -1.0 / lambd * math.log1p(-self._uniform(False))

    def geometric_(self, out, p):
        log_q = math.log(1.0 - p)
        for i in range(out.size):
            out[i] = math.ceil(math.log(self._uniform(False)) / log_q)

    def log_normal_(self, out, mean, std):
        for i in range(out.size):
            out[i] = math.exp(self._scalar_normal(mean, std))

    def cauchy_(self, out, median, sigma):
        for i in range(out.size):
            out[i] = median + sigma * math.tan(math.pi * (self._uniform(False) - 0.5))

    def poisson_(self, out, rates):
        for i in range(out.size):
            out[i] = self._poisson_count(float(rates[i]))

    def _poisson_count(self, rate):
        """ATen's sample_poisson, with the C library's lgamma (the core's std::lgamma)."""
        if rate >= 10:
            sqrt_rate, log_rate = math.sqrt(rate), math.log(rate)
            b = 0.931 + 2.53 * sqrt_rate
            a = -0.059 + 0.02483 * b
            inverse_alpha = 1.1239 + 1.1328 / (b - 3.4)
            vr = 0.9277 - 3.6224 / (b - 2)
            while True:
                u = self._uniform(False) - 0.5
                v = self._uniform(False)
                us = 0.5 - abs(u)
                k = math.floor((2 * a / us + b) * u + rate + 0.43)
                if us >= 0.07 and v <= vr:
                    return k
                if k < 0 or (us < 0.013 and v > us):
                    continue
                if math.log(v) + math.log(inverse_alpha) - math.log(a / (us * us) + b) <= (
                    -rate + k * log_rate - _c_lgamma(k + 1.0)
                ):
                    return k
        if rate == 0:
            return 0
        count, product, limit = 0, self._uniform(False), math.exp(-rate)
        while product > limit:
            count += 1
            product *= self._uniform(False)
        return count

    def multinomial_with_replacement_(self, out, probabilities):
        """ATen's multinomial_with_replacement (csrc/ops/random.cpp): per row, cumulative sums in the
        row's type over their total, the last set to 1; each sample the first category whose sum is
        >= a double uniform (a binary search)."""
        rounded = _f32 if probabilities.dtype.itemsize == 4 else float
        for r, row in enumerate(probabilities.tolist()):
            total, cumulative = 0.0, []
            for p in row:
                total = rounded(total + p)
                cumulative.append(total)
            cumulative = [rounded(c / total) for c in cumulative[:-1]] + [1.0]
            for s in range(out.shape[1]):
                u, left, right = self._uniform(False), 0, len(cumulative)
                while left < right:
                    middle = left + (right - left) // 2
                    left, right = (middle + 1, right) if cumulative[middle] < u else (left, middle)
                out[r, s] = left

    @staticmethod
    def multinomial_top_(out, keys):
        """The positions of the out.shape[1] largest keys of each row as ATen's topk leaves them
        (csrc/ops/random.cpp's top_keys): libstdc++'s partial_sort, or nth_element and a sort of all
        but the last, of (key, position) pairs, NaN first."""
        count = out.shape[1]
        for r, row in enumerate(keys.tolist()):
            entries, n = [(key, j) for j, key in enumerate(row)], len(row)
            if count * 64 <= n:
                _stl.partial_sort(entries, 0, count, n, _key_before)
            else:
                _stl.nth_element(entries, 0, count - 1, n, _key_before)
                _stl.sort(entries, 0, count - 1, _key_before)
            out[r] = [j for _, j in entries[:count]]

    def random_from_to_(self, out, span, low):
        wide = _is_real(out) or out.dtype.itemsize == 8 and out.dtype.kind == "i"
        draw = self.random64 if wide and span >= 2**32 else self.random
        for i in range(out.size):
            out[i] = _to_int64(draw() % span + low)

    def random_full_range_(self, out):
        for i in range(out.size):
            out[i] = _to_int64(self.random64())

    def random_(self, out):
        kind, size = out.dtype.kind, out.dtype.itemsize
        if kind == "b":
            top, draw = 2, self.random
        elif kind == "f":
            top, draw = 2 ** (24 if size == 4 else 53) + 1, self.random64 if size == 8 else self.random
        else:
            top, draw = 2 ** (8 * size - (kind == "i")), self.random64 if size == 8 else self.random
        for i in range(out.size):
            out[i] = draw() % top

    def bernoulli_(self, out, p):
        for i in range(out.size):
            out[i] = self._uniform(False) < p

    def bernoulli_tensor_(self, out, p):
        single = p.dtype.itemsize == 4
        for i in range(out.size):
            out[i] = self._uniform(single) < p[i]

    def randperm_(self, out):
        n = out.size
        values = list(range(n))
        if n < 0xFFFFFFFF // 20:
            for i in range(n - 1):
                z = i + self.random() % (n - i)
                values[i], values[z] = values[z], values[i]
        else:  # the inside-out shuffle ATen uses for huge n
            for i in range(n):
                z = self.random64() % (i + 1)
                values[i], values[z] = values[z], i
        out[:] = values


def _key_before(a, b):
    """ATen's topk order of (key, position) pairs: larger keys first, NaN before all."""
    return (math.isnan(a[0]) and not math.isnan(b[0])) or a[0] > b[0]


def _to_int64(word):
    """A 64-bit word read as a signed int64 (ATen's static_cast<int64_t>)."""
    word &= 2**64 - 1
    return word - 2**64 if word >= 2**63 else word
