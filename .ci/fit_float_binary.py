"""Prints the polynomial coefficients of the float32 atan2 and logaddexp kernels
(csrc/kernels/float_binary_impl.h) and of their twin (python/fastgrad/reference/_math.py).

Both evaluate in double by Estrin's scheme, one rounding per step (no fused multiply-add):
  atan(r) = r + r z P(z), z = r^2, |r| <= tan(pi/8);
  exp(r)  = 1 + (r + r^2 Q(r)),   |r| <= ln(2) / 2.
P and Q are fitted to the relative error of atan and exp by Lawson's iteration (weighted least
squares converging towards the minimax fit) on Chebyshev nodes, in mpmath's 120-bit arithmetic; the
coefficients are rounded to double. The printed error is that of the double evaluation, measured
against mpmath at 20001 points of each interval (its own roundings included).

Run: python .ci/fit_float_binary.py [atan_terms exp_terms]  (mpmath; a minute)
"""

import sys

import mpmath as mp

mp.mp.prec = 120


def lawson(target, weight, low, high, terms, nodes=160, iterations=40):
    """Coefficients c[0..terms) (lowest power first) of the polynomial p minimizing
    max |weight(t) (p(t) - target(t))| over [low, high]."""
    ts = [low + (high - low) * (1 - mp.cos(mp.pi * (k + mp.mpf(0.5)) / nodes)) / 2 for k in range(nodes)]
    values = [target(t) for t in ts]
    weights = [weight(t) for t in ts]
    lawson_weights = [mp.mpf(1)] * nodes
    for _ in range(iterations):
        scale = [w * mp.sqrt(lw) for w, lw in zip(weights, lawson_weights)]
        a = mp.matrix([[s * t**i for i in range(terms)] for s, t in zip(scale, ts)])
        b = mp.matrix([s * v for s, v in zip(scale, values)])
        c = mp.qr_solve(a, b)[0]
        errors = [abs(w * (sum(c[i] * t**i for i in range(terms)) - v)) for w, t, v in zip(weights, ts, values)]
        lawson_weights = [lw * e for lw, e in zip(lawson_weights, errors)]
        total = sum(lawson_weights)
        lawson_weights = [lw / total for lw in lawson_weights]
    return [float(c[i]) for i in range(terms)]


def estrin(r, coefficients):
    """coefficients lowest power first, in double as the kernels' polynomial<false>: pairs a + b r,
    then pairs of those with r^2, r^4, ..."""
    terms = list(coefficients)
    while len(terms) > 1:
        terms = [terms[2 * i + 1] * r + terms[2 * i] for i in range(len(terms) // 2)] + [terms[-1]] * (len(terms) % 2)
        r = r * r
    return terms[0]


def atan_double(r, p):
    z = r * r
    return r + r * z * estrin(z, p)


def exp_double(r, q):
    return 1.0 + (r + r * r * estrin(r, q))


def worst(f, exact, low, high, points=20001):
    err = 0.0
    for k in range(points):
        t = float(low + (high - low) * k / (points - 1))
        if t == 0:
            continue
        err = max(err, float(abs((mp.mpf(f(t)) - exact(t)) / exact(t))))
    return err


def main():
    atan_terms, exp_terms = (int(v) for v in sys.argv[1:3]) if len(sys.argv) > 2 else (10, 9)
    tan_pi_8 = mp.tan(mp.pi / 8) * (1 + mp.mpf(2) ** -40)  # a little beyond: r is a rounded quotient
    z_high = tan_pi_8**2

    def atan_target(z):  # (atan(r) - r) / (r z) as a function of z = r^2
        r = mp.sqrt(z)
        return (mp.atan(r) - r) / (r * z) if z else mp.mpf(-1) / 3

    # atan's relative error is about z |P - target| (atan(r) ~ r)
    p = lawson(atan_target, lambda z: z * mp.sqrt(z) / mp.atan(mp.sqrt(z)) if z else 0, 0, z_high, atan_terms)
    ln2_half = mp.log(2) / 2 * (1 + mp.mpf(2) ** -20)

    def exp_target(r):  # (exp(r) - 1 - r) / r^2
        return (mp.exp(r) - 1 - r) / (r * r) if r else mp.mpf(1) / 2

    q = lawson(exp_target, lambda r: r * r / mp.exp(r), -ln2_half, ln2_half, exp_terms)
    print(f"atan: {atan_terms} terms, highest first:")
    print("  " + ", ".join(repr(c) for c in reversed(p)))
    print(f"  relative error <= {worst(lambda r: atan_double(r, p), mp.atan, 0, tan_pi_8):.3e}")
    print(f"exp: {exp_terms} terms, highest first:")
    print("  " + ", ".join(repr(c) for c in reversed(q)))
    print(f"  relative error <= {worst(lambda r: exp_double(r, q), mp.exp, -ln2_half, ln2_half):.3e}")


if __name__ == "__main__":
    main()
