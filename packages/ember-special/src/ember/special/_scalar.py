"""The scalar kernels of ember.special (one element in, one out, in float64), written once for two engines:
``_numba`` compiles them, with the loops below, into the CPU loops of large inputs, and Python runs the very same
functions, element by element, where the JIT-free path needs them (``evaluate``: the elements SciPy does not cover
with PyTorch's values, such as its edges and the arguments beyond SciPy's range). They implement the functions where
SciPy is slow or differs from PyTorch, or is less exact.

numba-free: importing this module loads no compiler.
"""
import math
import sys
import types

import numpy as np

from ._tables import AIRY_AI, AIRY_AIP, AIRY_HI, AIRY_LO, DIGAMMA_ROOT, DIGAMMA_ROOT_SERIES

_PI = math.pi
_INF = math.inf
_NAN = math.nan
# B_2k / (2k) for the digamma series and B_2k for trigamma/zeta, k = 1..10
_B2K = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798, -174611 / 330)
_FACT2K = tuple(float(math.factorial(2 * k)) for k in range(1, 11))
_ROOT_HI, _ROOT_LO = DIGAMMA_ROOT
_ROOT_SERIES = np.array(DIGAMMA_ROOT_SERIES)


def _is_neg_int(x):
    return x < 0 and x == np.floor(x)  # (math.floor's int64 would overflow)


def _hurwitz(s, q):
    """Hurwitz zeta for s > 1 by Euler-Maclaurin summation (q may be negative for integer s)."""
    total = 0.0
    a = q
    k = 0
    while k < 9 or a <= 9.0:
        term = a ** -s
        total += term
        a += 1.0
        k += 1
        if abs(term) < 1e-17 * abs(total) and k >= 9 and a > 9.0:
            break
    # tail: integral, half term and Bernoulli corrections at a
    total += a ** (1.0 - s) / (s - 1.0) + 0.5 * a ** -s
    fac = s * a ** (-s - 1.0)  # s(s+1)...(s+2k-2) * a^(-s-2k+1)
    for k in range(10):
        corr = _B2K[k] / _FACT2K[k] * fac
        total += corr
        if abs(corr) < 1e-17 * abs(total):
            break
        fac *= (s + 2 * k + 1) * (s + 2 * k + 2) / (a * a)
    return total


def zeta(s, q):
    s, q = np.float64(s), np.float64(q)
    if math.isnan(s) or math.isnan(q):
        return _NAN
    if s == 1.0:
        return _INF
    if s < 1.0:
        return _NAN
    if q <= 0.0:
        if q == np.floor(q):
            return _INF
        if s != np.floor(s):
            return _NAN  # q ** -s is not real
    if q == _INF:
        return _NAN  # PyTorch's value (its series gives inf * 0)
    if s == _INF:  # only the first term survives
        return _INF if q < 1.0 else (1.0 if q == 1.0 else 0.0)
    if q > 1e8:  # leading terms of the asymptotic expansion
        return (1.0 / (s - 1.0) + 0.5 / q) * q ** (1.0 - s)
    return _hurwitz(s, q)


def digamma(x):
    x = np.float64(x)
    if x == 0.0:
        return math.copysign(_INF, -x)
    if math.isnan(x) or x == -_INF or _is_neg_int(x):
        return _NAN
    if x == _INF:
        return _INF
    shift = 0.0
    if x < 0.0:  # reflection: psi(x) = psi(1 - x) - pi / tan(pi x), tan's argument reduced exactly first
        shift = -_PI / math.tan(_PI * (x - math.floor(x + 0.5)))
        x = 1.0 - x
    d = (x - _ROOT_HI) - _ROOT_LO
    if abs(d) < 0.25:  # Taylor series about the root (coefficients from mpmath), no cancellation there
        total = 0.0
        for k in range(_ROOT_SERIES.size - 1, -1, -1):
            total = (total + _ROOT_SERIES[k]) * d
        return total + shift
    while x < 10.0:  # psi(x) = psi(x + 1) - 1 / x
        shift -= 1.0 / x
        x += 1.0
    inv2 = 1.0 / (x * x)
    series, p = 0.0, inv2
    for k in range(7):
        series += _B2K[k] / (2 * k + 2) * p
        p *= inv2
    return math.log(x) - 0.5 / x - series + shift


def trigamma(x):
    x = np.float64(x)
    if math.isnan(x) or x == -_INF:
        return _NAN
    if x == _INF:
        return 0.0
    if x == 0.0 or _is_neg_int(x):
        return _INF
    total, sign = 0.0, 1.0
    if x < 0.5:  # reflection: psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x)
        s = math.sin(_PI * (x - math.floor(x + 0.5)))  # sin(pi x)^2 with the argument reduced exactly
        total = _PI * _PI / (s * s)
        sign = -1.0
        x = 1.0 - x
    acc = 0.0
    while x < 10.0:
        acc += 1.0 / (x * x)
        x += 1.0
    inv2 = 1.0 / (x * x)
    series, p = 0.0, inv2 / x
    for k in range(7):
        series += _B2K[k] * p
        p *= inv2
    acc += 1.0 / x + 0.5 * inv2 + series
    return total + sign * acc


def polygamma(n, x):
    n, x = np.float64(n), np.float64(x)
    if n == 0.0:
        return digamma(x)
    if n == 1.0:
        return trigamma(x)
    sign = 1.0 if int(n) % 2 == 1 else -1.0
    return sign * math.gamma(n + 1.0) * zeta(n + 1.0, x)


def lgamma(x):
    x = np.float64(x)
    return _INF if x == -_INF else math.lgamma(x)  # PyTorch: inf at -inf


_AI, _AIP = np.array(AIRY_AI), np.array(AIRY_AIP)


def airy_ai(x):
    """Ai(x): Taylor series about tabulated centres (from mpmath) in [AIRY_LO, AIRY_HI], where the
    coefficients follow from Ai'' = x Ai; the asymptotic expansions outside, where their error
    (about exp(-2 zeta)) is below double precision."""
    x = np.float64(x)
    if math.isnan(x) or x == _INF:  # PyTorch gives NaN at +inf
        return _NAN
    if x > AIRY_HI + 0.25:
        zeta = 2.0 / 3.0 * x * math.sqrt(x)
        total, u, p = 1.0, 1.0, 1.0
        for k in range(1, 40):
            u *= (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / (216.0 * k * (2 * k - 1))
            p /= -zeta
            total += u * p
            if abs(u * p) < 1e-17:
                break
        return math.exp(-zeta) / (2.0 * math.sqrt(_PI) * math.sqrt(math.sqrt(x))) * total
    if x < AIRY_LO - 0.25:
        z = -x
        zeta = 2.0 / 3.0 * z * math.sqrt(z)
        even, odd, u, p = 1.0, 0.0, 1.0, 1.0
        for k in range(1, 40):
            u *= (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / (216.0 * k * (2 * k - 1))
            p /= zeta
            term = u * p if k % 4 < 2 else -u * p  # (-1)^floor(k/2)
            if k % 2 == 0:
                even += term
            else:
                odd += term
            if u * p < 1e-17:
                break
        theta = zeta - 0.25 * _PI
        return (math.cos(theta) * even + math.sin(theta) * odd) / (math.sqrt(_PI) * math.sqrt(math.sqrt(z)))
    i = int(math.floor((x - AIRY_LO) * 2.0 + 0.5))
    c = AIRY_LO + 0.5 * i
    h = x - c
    prev, a, b = 0.0, _AI[i], _AIP[i]  # a_(k-1), a_k, a_(k+1) of the Taylor coefficients
    total, hk = a + b * h, h
    for k in range(0, 30):
        nxt = (c * a + prev) / ((k + 2.0) * (k + 1.0))
        prev, a, b = a, b, nxt
        hk *= h
        total += nxt * hk
    return total


# ---- the loops numba makes of them
def airy_ai_loop(x, out):
    for i in range(out.size):
        out[i] = airy_ai(x[i])


def digamma_loop(x, out):
    for i in range(out.size):
        out[i] = digamma(x[i])


def lgamma_loop(x, out):
    for i in range(out.size):
        out[i] = lgamma(x[i])


def polygamma_loop(n, x, out):
    for i in range(out.size):
        out[i] = polygamma(n[i], x[i])


def zeta_loop(x, q, out):
    for i in range(out.size):
        out[i] = zeta(x[i], q[i])


_PYTHON = {}


def evaluate(name, *arrays):
    """Kernel ``name`` run by Python on the broadcast float ``arrays``, element by element (float64 results; slow:
    for the few elements the JIT-free paths leave to it). ``math`` is bound to NumPy's functions there, which give
    inf and NaN where Python's raise, as the compiled kernels do."""
    if not _PYTHON:
        import scipy.special

        from ._common import rebound
        ieee = dict(vars(math), gamma=scipy.special.gamma, **{f: getattr(np, f) for f in (
            "copysign", "cos", "exp", "isnan", "log", "sin", "sqrt", "tan")})
        _PYTHON.update(rebound(sys.modules[__name__], math=types.SimpleNamespace(**ieee)))
    with np.errstate(all="ignore"):
        return np.frompyfunc(_PYTHON[name], len(arrays), 1)(*arrays).astype(np.float64)
