"""Writes csrc/kernels/piecewise_tables.h: the piecewise polynomials of the float32 tanh, sigmoid and
gelu kernels (approximate='none': gelu and its gradient).

A function f >= 0 of a = |x| is split into intervals by a's bits: [0, first) and then `per_binade`
equal parts of each binade [2^e, 2^(e+1)) up to `end`. On an interval with midpoint m (m = 0 on the
first), f(m + t) = c0 + t Q(t): c0 = f(m) as two floats (hi + lo), Q of degree `degree` - 1 with float
coefficients. Q is fitted to f's error in float32 ulps of f by Lawson's iteration (weighted least
squares that converges towards the minimax fit) on Chebyshev nodes, each coefficient rounded to float
in turn from the lowest power and the higher ones refitted, so that the rounding is absorbed. The
printed errors are of the approximation alone (exact arithmetic); the kernels' bounds, measured over
all float32 inputs, are stated in elementwise_impl.h.

Run: python .ci/fit_piecewise.py  (mpmath for f's values; a few seconds; clang-format on PATH)
"""

import functools
import pathlib
import re
import subprocess

import mpmath as mp
import numpy as np

mp.mp.prec = 96
TABLE = 32  # entries of a lookup: two AVX-512 registers of 16 floats


def ulp(v):
    return float(np.spacing(np.float32(abs(v)))) if v else 2.0**-149


def hex_float(v):
    """A C++ float literal that is exactly v: 0x1.8p-3f."""
    return re.sub(r"\.?0*p", "p", v.hex()) + "f" if v else "0.0f"


def intervals(first, end, per_binade):
    parts = [(0.0, first, 0.0)]
    low = first
    while low < end:
        width = low / per_binade
        parts += [(low + j * width, low + (j + 1) * width, low + (j + 0.5) * width) for j in range(per_binade)]
        parts = [part for part in parts if part[0] < end]
        low *= 2
    return parts


def fit(f, low, high, mid, degree, nodes=400, iterations=30, unit=ulp, slope_lo=False):
    """Q's float coefficients (with slope_lo, q[0] as two floats: q[0] + its low part, returned last),
    and the largest error of f in units."""
    k = np.arange(nodes)
    ts = (low - mid) + (high - low) * (1 - np.cos(np.pi * (k + 0.5) / nodes)) / 2
    c0 = f(mp.mpf(mid))
    c0_hi = np.float32(float(c0))
    c0_lo = np.float32(float(c0 - mp.mpf(float(c0_hi))))
    values = [f(mp.mpf(mid) + mp.mpf(float(t))) for t in ts]
    target = np.array([float((v - c0) / mp.mpf(float(t))) for v, t in zip(values, ts)])  # what Q approximates
    weight = np.abs(ts) / np.array([unit(float(v)) for v in values])  # f's error in units = weight |Q - target|
    span = max(abs(low - mid), abs(high - mid))
    coefficients, low_part = [], np.float32(0)
    for fixed in range(degree):
        rest = target - sum(c * ts**i for i, c in enumerate(coefficients))
        basis = np.stack([(ts / span) ** i for i in range(fixed, degree)], 1)
        lawson = np.ones_like(ts)
        for _ in range(iterations):
            w = weight * np.sqrt(lawson)
            solution = np.linalg.lstsq(basis * w[:, None], rest * w, rcond=None)[0]
            lawson *= np.abs(weight * (basis @ solution - rest))
            lawson /= lawson.sum()
        coefficients.append(np.float32(solution[0] / span**fixed))
        if fixed == 0 and slope_lo:  # q[0] t is all of f next to a zero: q[0]'s rounding would be f's
            low_part = np.float32(solution[0] - float(coefficients[0]))
            coefficients[0] = float(coefficients[0]) + float(low_part)
    q = sum(float(c) * ts**i for i, c in enumerate(coefficients))
    coefficients[0] = np.float32(coefficients[0])
    return c0_hi, c0_lo, coefficients, float(np.max(weight * np.abs(q - target))), low_part


def padded_floats(values, pad):
    """A C++ array of the floats `values`, the last repeated `pad` more times (a table's TABLE rows)."""
    values = [float(v) for v in values] + [float(values[-1])] * pad
    return "{" + ", ".join(hex_float(v) for v in values) + "}"


def table_origin(first, per_binade):
    """(origin, shift) of a table whose first interval ends at `first` (see PiecewiseTable)."""
    shift = 23 - (per_binade.bit_length() - 1)
    return int(np.float32(first).view(np.int32)) - (1 << shift), shift


def table(name, f, first, end, per_binade, degree):
    parts = intervals(first, end, per_binade)
    assert len(parts) <= TABLE
    rows = [fit(f, *part, degree) for part in parts]
    worst = max(row[3] for row in rows)
    print(f"{name}: {len(parts)} intervals, Q of degree {degree - 1}, approximation error <= {worst:.4f} ulp")
    floats = functools.partial(padded_floats, pad=TABLE - len(parts))
    origin, shift = table_origin(first, per_binade)
    mids = floats([part[2] for part in parts])
    his = floats([row[0] for row in rows])
    los = floats([row[1] for row in rows])
    qs = ",\n    ".join(floats([row[2][i] for row in rows]) for i in range(degree))
    return (
        f"// {name}: [0, {first}) and {per_binade} intervals per binade up to {end}; approximation error "
        f"<= {worst:.4f} ulp.\n"
        f"inline constexpr PiecewiseTable<{degree}> k{name}Table = {{\n"
        f"    {origin:#x}, {shift}, {len(parts) - 1},\n    {mids},\n    {his},\n    {los},\n"
        f"    {{{qs}}}}};\n"
    )


def gelu_table(name, f, first, end, per_binade, degree, relative_end, zero=None):
    """A table of f on table()'s intervals, with f's error in ulps of f below relative_end and in
    units of 2^-24 beyond it (absolute: the kernel uses f there only in 1 - f); q[0] as two floats
    (slope_lo its low part). The two intervals next to `zero` (a zero of f) take it (rounded) as
    their midpoint: f(mid + t) = hi + lo + t Q(t) with hi + lo next to 0, so that near the zero
    nothing cancels and f keeps its relative accuracy; the first interval's midpoint is then first / 2."""
    parts = intervals(first, end, per_binade)
    assert len(parts) <= TABLE
    if zero is not None:
        # the gradient's [0, first) about its middle (the kernel sums a - mid exactly), where its terms
        # are a quarter of those about 0: there t^2 R(t) is a quarter of f at a = 0.5, and its
        # roundings took the kernel to 0.96 ulp (gelu's, about 0, stays exact for tiny a)
        parts[0] = (0.0, first, first / 2)
        near = min(range(1, len(parts)), key=lambda j: abs(parts[j][0] - zero))  # the boundary next to it
        for j in (near - 1, near):
            parts[j] = (parts[j][0], parts[j][1], float(np.float32(float(zero))))
    rows = []
    for low, high, mid in parts:
        unit = ulp if high <= relative_end else (lambda v: 2.0**-24)
        rows.append(fit(f, low, high, mid, degree, unit=unit, slope_lo=True))
    worst = max(row[3] for row in rows)
    print(f"{name}: {len(parts)} intervals, Q of degree {degree - 1}, approximation error <= {worst:.4f} units")
    floats = functools.partial(padded_floats, pad=TABLE - len(parts))
    origin, shift = table_origin(first, per_binade)
    qs = ",\n    ".join(floats([row[2][i] for row in rows]) for i in range(degree))
    return (
        f"// {name}: [0, {first}) and {per_binade} intervals per binade up to {end}; approximation error "
        f"<= {worst:.4f} ulp up to {relative_end}, 2^-24 beyond.\n"
        f"inline constexpr GeluTable<{degree}> k{name}Table = {{\n"
        f"    {origin:#x}, {shift}, {len(parts) - 1},\n"
        f"    {floats([part[2] for part in parts])},\n    {floats([row[0] for row in rows])},\n"
        f"    {floats([row[1] for row in rows])},\n    {{{qs}}},\n    {floats([row[4] for row in rows])}}};\n"
    )


HEADER = """\
// Generated by .ci/fit_piecewise.py (which explains the fit): do not edit. Piecewise polynomials
// of the float32 tanh, sigmoid and gelu kernels (elementwise_impl.h): on the interval of a = |x| with
// index i (simd.h's table_index(a, origin, shift, last)), f(a) = hi[i] + (lo[i] + t Q(t)) with
// t = a - mid[i] and Q(t) = q[0][i] + q[1][i] t + ...
#pragma once
#include <cstddef>
#include <cstdint>

namespace fg::piecewise_tables {

template <size_t Degree>
struct PiecewiseTable {
  int32_t origin;  // the bits of the first interval's end minus 2^shift: its index is 1
  int shift;
  int32_t last;  // the last interval's index; 32-entry rows, padded by repeating it
  alignas(64) float mid[32];
  alignas(64) float hi[32];
  alignas(64) float lo[32];
  alignas(64) float q[Degree][32];
};

// table()'s layout with q[0] to 2^-48 (q[0][i] + slope_lo[i]): the float32 GELU's main path. In the
// gradient's table mid[0] is first / 2 (a - mid[0] is not exact: the kernel sums it as two floats).
template <size_t Degree>
struct GeluTable {
  int32_t origin;
  int shift;
  int32_t last;
  alignas(64) float mid[32];
  alignas(64) float hi[32];
  alignas(64) float lo[32];
  alignas(64) float q[Degree][32];
  alignas(64) float slope_lo[32];
};

"""


# gelu (approximate='none') of x = -a: -a P(X <= -a) = -a exp(-a^2 / 2) M(a) for a standard normal X,
# with M(a) = erfc(a / sqrt(2)) exp(a^2 / 2) / 2 smooth (about 1 / (a sqrt(2 pi)) for large a); its
# gradient exp(-a^2 / 2) (M(a) - a / sqrt(2 pi)) = exp(-a^2 / 2) (a0 - a) H(a), with a0 the zero of
# M(a) - a / sqrt(2 pi) (gelu'(-a0) = 0) and H > 0 smooth: the zero is factored out so that the kernel
# keeps its relative accuracy next to it (a table of M - a / sqrt(2 pi) could not). Up to a = 14.5,
# beyond which both round to 0.
def gelu_tail(a):
    return mp.erfc(a / mp.sqrt(2)) * mp.exp(a * a / 2) / 2


def gelu_gradient_zero():
    return mp.findroot(lambda a: gelu_tail(a) - a / mp.sqrt(2 * mp.pi), 0.75)


def gelu_gradient_tail(a):
    a0 = gelu_gradient_zero()
    if abs(a - a0) < mp.mpf(2) ** -70:  # the limit: -(d/da)(M(a) - a / sqrt(2 pi)) at a0
        return -mp.diff(lambda b: gelu_tail(b) - b / mp.sqrt(2 * mp.pi), a0)
    return (a / mp.sqrt(2 * mp.pi) - gelu_tail(a)) / (a - a0)


def gelu_gradient_zero_constants():
    a0 = gelu_gradient_zero()
    hi = np.float32(float(a0))
    lo = np.float32(float(a0 - mp.mpf(float(hi))))
    return (
        f"// a0 = {mp.nstr(a0, 20)}, the zero of gelu'(-a), as hi + lo (to 2^-48).\n"
        f"inline constexpr float kGeluGradientZeroHi = {hex_float(float(hi))}, "
        f"kGeluGradientZeroLo = {hex_float(float(lo))};\n"
    )


# The float32 GELU's main path (x >= -3; below it the tail tables above): P(X <= -a) and gelu'(-a)
# on [0, 0.5) and 8 intervals per binade up to 7, Q of degree 5 (the gradient's 6: its first
# interval's fit, 0.33 ulp with 5, is 0.0x with 6); to a few hundredths of an ulp up to
# a = 3 and to 2^-24 absolute beyond (x >= 0 only, where the kernel needs 1 - P(X <= -a) and
# 1 - gelu'(-a), >= 1/2); from 7 on both are below 2^-34 (the kernel clamps a there).
GELU_LAYOUT = (0.5, 7, 8)
GELU_RELATIVE_END = 3


def gelu_probability(a):
    return mp.erfc(a / mp.sqrt(2)) / 2


def gelu_slope(a):
    return gelu_probability(a) - a * mp.exp(-a * a / 2) / mp.sqrt(2 * mp.pi)


def gelu_slope_zero():
    return mp.findroot(gelu_slope, 0.75)


if __name__ == "__main__":
    text = HEADER
    # tanh and sigmoid: Q of degree 4 (the degree-5 fits' 0.013-0.017 ulp cost a lookup and a
    # multiply-add more per vector, 8-10% of the kernels' time on AMD Zen 5; the kernels' maxima
    # stay below 1 ulp: elementwise_impl.h)
    text += "// tanh(a)\n" + table("Tanh", mp.tanh, 0.125, 9.5, 4, 5) + "\n"
    text += "// sigmoid(-a) = 1 / (1 + exp(a))\n"
    text += table("Sigmoid", lambda a: 1 / (1 + mp.exp(a)), 0.5, 7.5, 8, 5) + "\n"
    text += "// M(a) = erfc(a / sqrt(2)) exp(a^2 / 2) / 2 (gelu_tail above)\n"
    text += table("GeluTail", gelu_tail, 0.25, 14.5, 4, 7) + "\n"
    text += "// H(a) = (a / sqrt(2 pi) - M(a)) / (a - a0) (gelu_gradient_tail above)\n"
    text += table("GeluGradientTail", gelu_gradient_tail, 0.25, 14.5, 4, 7) + "\n"
    text += gelu_gradient_zero_constants() + "\n"
    text += "// P(X <= -a) for a standard normal X: gelu(x) = x P(X <= x) (gelu_probability below)\n"
    text += gelu_table("GeluProbability", gelu_probability, *GELU_LAYOUT, 6, GELU_RELATIVE_END) + "\n"
    text += "// -gelu'(-a) = P(X <= -a) - a p(a), p the normal density (gelu_slope below)\n"
    text += gelu_table("GeluSlope", gelu_slope, *GELU_LAYOUT, 7, GELU_RELATIVE_END, gelu_slope_zero())
    text += "\n}  // namespace fg::piecewise_tables\n"
    out = pathlib.Path(__file__).resolve().parent.parent / "csrc/kernels/piecewise_tables.h"
    out.write_text(text)
    subprocess.run(["clang-format", "-i", str(out)], check=True)  # the style gate's layout
