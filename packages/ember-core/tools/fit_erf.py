"""Print the float32 coefficients of ember's erf/erfc/normal-CDF/GELU loops (ember/_formulas.py).

    python packages/ember-core/tools/fit_erf.py     # needs mpmath (the reference) and NumPy

- ``ERF_NEAR``: ``erf(v) / v - 1`` as a polynomial in ``u = v**2`` for ``|v| <= NEAR`` (erf is then ``v + v * R(u)``,
  one rounding after a correction of relative size 0.13), a Chebyshev interpolant;
- ``ERFCX_N / ERFCX_M``: ``erfcx(b) = exp(b**2) erfc(b) = N(b) / (sqrt(pi) b N(b) + M(b))`` on [0, B_MAX], N and M
  of degree 4 (N(0) = 1). For large b the denominator is mostly ``sqrt(pi) b N``, so the rounding
  errors of N cancel between numerator and denominator and those of M are damped; for small b both are
  dominated by their constant terms. Its variable is the input itself (no rounded intermediate such as
  ``1 / (1 + p b)``, whose error the function would amplify). ``PHI_N / PHI_M`` is the same for
  ``erfcx(a / sqrt(2)) = N / (sqrt(pi / 2) a N + M)`` in ``a`` (the normal CDF's tail, for GELU). Fitted for
  relative error (linearised least squares, reweighted towards minimax), then M refitted to N's float32 rounding.
  M and the slope are scaled by 2**64 (2**65 for PHI: the CDF is half the erfc), the scale of the loops' exp.
- ``EXP``: ``(exp(r) - 1) / r`` on the reduced range of exp, ``|r| <= ln(2) / 2`` (exp(r) = 1 + r * Q(r)).
"""
import mpmath as mp
import numpy as np
from numpy.polynomial import Chebyshev, Polynomial
from numpy.polynomial import polynomial as P

mp.mp.dps = 40
NEAR, B_MAX = 0.8, 10.25


def chebyshev_fit(f, lo, hi, degree):
    """float32 monomial coefficients, highest first, of the Chebyshev interpolant of ``f`` on [lo, hi]."""
    nodes = np.cos(np.pi * (np.arange(degree + 1) + 0.5) / (degree + 1))
    xs = lo + (nodes + 1) * (hi - lo) / 2
    ys = np.array([float(f(mp.mpf(float(x)))) for x in xs])
    return Chebyshev.fit(xs, ys, degree, domain=[lo, hi]).convert(kind=Polynomial).coef.astype(np.float32)[::-1]


def rational_fit(f, slope, hi, m=4, n=4, rounds=60):
    """float32 (N, M) coefficients, lowest first, of N / (slope x N + M) ~ f on [0, hi] in relative error."""
    x = np.unique(np.concatenate([np.linspace(0, hi, 6000), hi * (1 - np.cos(np.linspace(0, np.pi / 2, 3000)))]))
    y = np.array([float(f(mp.mpf(float(v)))) for v in x])
    g = 1 / y - slope * x  # = M / N
    vm, vn = np.vander(x, m + 1, increasing=True), np.vander(x, n + 1, increasing=True)
    weights, den, best = np.ones_like(x), 1 / y, (np.inf, None, None)
    for k in range(rounds):  # M - g N = 0 (N(0) = 1), scaled by the last denominator; Lawson's weights after a few
        w = np.sqrt(weights) * np.abs(y) / np.abs(den)
        sol = np.linalg.lstsq(np.hstack([vm, -g[:, None] * vn[:, 1:]]) * w[:, None], g * w, rcond=None)[0]
        mc, nc = sol[:m + 1], np.concatenate([[1.0], sol[m + 1:]])
        num = P.polyval(x, nc)
        den = slope * x * num + P.polyval(x, mc)
        err = num / den / y - 1
        if np.abs(err).max() < best[0]:
            best = (np.abs(err).max(), nc, den)
        if k > 5:
            weights = weights * np.abs(err)
            weights /= weights.sum()
    nc = best[1].astype(np.float32).astype(np.float64)
    num = P.polyval(x, nc)
    slope = float(np.float32(slope))  # (the loops' slope is a float32 too)
    w = 1 / np.abs(best[2])  # M again, for the rounded N: (M - (N / y - slope x N)) / den = 0
    mc = np.linalg.lstsq(vm * w[:, None], (num / y - slope * x * num) * w, rcond=None)[0].astype(np.float32)
    err = num / (slope * x * num + P.polyval(x, mc.astype(np.float64))) / y - 1
    return nc.astype(np.float32), mc, np.abs(err).max()


def main():
    def erfcx(b):
        return mp.exp(b * b) * mp.erfc(b)
    fits = {"ERF_NEAR": chebyshev_fit(lambda u: mp.erf(mp.sqrt(u)) / mp.sqrt(u) - 1 if u else 2 / mp.sqrt(mp.pi) - 1,
                                      0.0, NEAR ** 2, 7),
            "EXP": chebyshev_fit(lambda r: mp.expm1(r) / r if r else mp.mpf(1), -0.35, 0.35, 5)}
    print(f"# NEAR = {NEAR}; B_MAX = {B_MAX}")
    for name, f, slope, hi, scale in (("ERFCX", erfcx, mp.sqrt(mp.pi), B_MAX, 2.0 ** 64),
                                      ("PHI", lambda a: erfcx(a / mp.sqrt(2)), mp.sqrt(mp.pi / 2), B_MAX * 2 ** 0.5,
                                       2.0 ** 65)):
        num, m, err = rational_fit(f, float(np.float32(float(slope) * scale)) / scale, hi)
        print(f"# {name}: max relative error {err:.2g} with these coefficients (float64 evaluation); slope "
              f"{float(slope) * scale!r}")
        fits[f"{name}_N"], fits[f"{name}_M"] = num[::-1], (m * np.float32(scale))[::-1]
    for name, coef in fits.items():
        print(f"_{name} = ({', '.join(repr(float(c)) for c in coef)})")


if __name__ == "__main__":
    main()
