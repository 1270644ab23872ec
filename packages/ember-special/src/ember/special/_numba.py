"""Scalar kernels compiled by numba into parallel ufuncs, for the functions where SciPy is slow on
the CPU or where PyTorch's edge semantics differ from SciPy's.

Imported only on first use (``kernel(name)``), so ``import ember`` never imports numba. Every
kernel computes in float64, also for float32 inputs, and rounds once at the end.
"""
import math

import numba
import numpy as np

from ._tables import AIRY_AI, AIRY_AIP, AIRY_HI, AIRY_LO, DIGAMMA_ROOT, DIGAMMA_ROOT_SERIES

_jit = numba.njit(cache=True, fastmath=False)
_PI = math.pi
_INF = math.inf
_NAN = math.nan
# B_2k / (2k) for the digamma series and B_2k for trigamma/zeta, k = 1..10
_B2K = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798, -174611 / 330)
_FACT2K = tuple(float(math.factorial(2 * k)) for k in range(1, 11))
_ROOT_HI, _ROOT_LO = DIGAMMA_ROOT
_ROOT_SERIES = np.array(DIGAMMA_ROOT_SERIES)


@_jit
def _is_neg_int(x):
    return x < 0 and x == math.floor(x)


@_jit
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


@_jit
def zeta(s, q):
    s, q = np.float64(s), np.float64(q)
    if math.isnan(s) or math.isnan(q):
        return _NAN
    if s == 1.0:
        return _INF
    if s < 1.0:
        return _NAN
    if q <= 0.0:
        if q == math.floor(q):
            return _INF
        if s != math.floor(s):
            return _NAN  # q ** -s is not real
    if q == _INF:
        return _NAN  # PyTorch's value (its series gives inf * 0)
    if s == _INF:  # only the first term survives
        return _INF if q < 1.0 else (1.0 if q == 1.0 else 0.0)
    if q > 1e8:  # leading terms of the asymptotic expansion
        return (1.0 / (s - 1.0) + 0.5 / q) * q ** (1.0 - s)
    return _hurwitz(s, q)


@_jit
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


@_jit
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


@_jit
def polygamma(n, x):
    n, x = np.float64(n), np.float64(x)
    if n == 0.0:
        return digamma(x)
    if n == 1.0:
        return trigamma(x)
    sign = 1.0 if int(n) % 2 == 1 else -1.0
    return sign * math.gamma(n + 1.0) * zeta(n + 1.0, x)


@_jit
def spherical_bessel_j0(x):
    x = np.float64(x)
    if math.isinf(x):
        return 0.0
    if abs(x) < 0.5:  # Taylor series of sin(x) / x, exact to rounding where the quotient cancels
        x2 = x * x
        return 1.0 - x2 / 6.0 * (1.0 - x2 / 20.0 * (1.0 - x2 / 42.0 * (1.0 - x2 / 72.0 * (1.0 - x2 / 110.0 * (
            1.0 - x2 / 156.0 * (1.0 - x2 / 210.0))))))
    return math.sin(x) / x


@_jit
def _bessel_ie(order, x):
    """exp(-|x|) I_order(|x|) for order 0 or 1: power series (positive terms) below 30, the
    asymptotic expansion above (its smallest term there is below 1e-25)."""
    ax = abs(x)
    if ax < 30.0:
        q = 0.25 * ax * ax
        term = 1.0 if order == 0 else 0.5 * ax
        total = term
        k = 1.0
        while term > 1e-17 * total:
            term *= q / (k * (k + order))
            total += term
            k += 1.0
        return total * math.exp(-ax)
    mu = 4.0 * order * order
    term, total, k = 1.0, 1.0, 1.0
    while k < 60.0:
        term *= -(mu - (2 * k - 1) ** 2) / (k * 8.0 * ax)
        total += term
        if abs(term) < 1e-17 * abs(total):
            break
        k += 1.0
    return total / math.sqrt(2.0 * _PI * ax)


@_jit
def i0e(x):
    x = np.float64(x)
    return _NAN if math.isnan(x) else (0.0 if math.isinf(x) else _bessel_ie(0, x))


@_jit
def i1e(x):
    x = np.float64(x)
    if math.isnan(x):
        return _NAN
    if math.isinf(x):
        return math.copysign(0.0, x)
    return math.copysign(_bessel_ie(1, x), x)


# ---- orthogonal polynomials: three-term recurrences in double-double arithmetic (about 32 digits),
# so that the result, rounded once, is accurate also near the polynomials' zeros. The degree is
# truncated to an integer, as PyTorch does; a non-finite degree gives 0.
@_jit
def _two_sum(a, b):
    s = a + b
    t = s - a
    return s, (a - (s - t)) + (b - t)


@_jit
def _split(a):
    t = 134217729.0 * a  # 2^27 + 1: Dekker's splitting into two 26-bit halves
    hi = t - (t - a)
    return hi, a - hi


@_jit
def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@_jit
def _dd_mul(ah, al, bh, bl):
    p, e = _two_prod(ah, bh)
    return _two_sum(p, e + (ah * bl + al * bh))


@_jit
def _dd_add(ah, al, bh, bl):
    s, e = _two_sum(ah, bh)
    return _two_sum(s, e + al + bl)


@_jit
def _dd_div(ah, al, b):
    q = ah / b
    p, e = _two_prod(q, b)
    return _two_sum(q, ((ah - p) - e + al) / b)


@_jit
def _plain(kind, x, n):
    """P_n(x) by the recurrence in double: for float32 results, which it gives to within rounding."""
    a = 2.0 * x if kind <= 4 else x
    p = 1.0
    q = (a if kind in (1, 4) else (a - 1.0 if kind == 2 else (a + 1.0 if kind == 3 else (1.0 - x if kind == 6 else x))))
    for k in range(1, n):
        if kind <= 3:
            r = a * q - p
        elif kind == 4:
            r = a * q - 2.0 * k * p
        elif kind == 5:
            r = a * q - k * p
        elif kind == 6:
            r = ((2.0 * k + 1.0 - x) * q - k * p) / (k + 1.0)
        else:
            r = ((2.0 * k + 1.0) * x * q - k * p) / (k + 1.0)
        p, q = q, r
    return q


# kinds: 0..3 Chebyshev T, U, V, W; 4 Hermite H; 5 Hermite He; 6 Laguerre; 7 Legendre
@_jit
def _polynomial(kind, xh, xl, n):
    """P_n(x) for x = xh + xl by the family's recurrence, in double-double."""
    if not math.isfinite(xh):  # IEEE arithmetic on infinities, as PyTorch's recurrences do
        return _plain(kind, xh, n)
    if kind <= 3 or kind == 4:
        ah, al = 2.0 * xh, 2.0 * xl
    else:
        ah, al = xh, xl
    ph, pl = 1.0, 0.0
    if kind == 1 or kind == 4:
        qh, ql = ah, al
    elif kind == 2:
        qh, ql = _dd_add(ah, al, -1.0, 0.0)
    elif kind == 3:
        qh, ql = _dd_add(ah, al, 1.0, 0.0)
    elif kind == 6:
        qh, ql = _dd_add(1.0, 0.0, -xh, -xl)
    else:
        qh, ql = xh, xl
    for k in range(1, n):
        if kind <= 3:  # q' = 2x q - p
            th, tl = _dd_mul(ah, al, qh, ql)
            rh, rl = _dd_add(th, tl, -ph, -pl)
        elif kind == 4 or kind == 5:  # q' = 2x q - 2k p  /  x q - k p
            th, tl = _dd_mul(ah, al, qh, ql)
            uh, ul = _dd_mul(ph, pl, (2.0 if kind == 4 else 1.0) * k, 0.0)
            rh, rl = _dd_add(th, tl, -uh, -ul)
        else:  # Laguerre ((2k + 1 - x) q - k p) / (k + 1); Legendre ((2k + 1) x q - k p) / (k + 1)
            if kind == 6:
                ch, cl = _dd_add(2.0 * k + 1.0, 0.0, -xh, -xl)
            else:
                ch, cl = _dd_mul(xh, xl, 2.0 * k + 1.0, 0.0)
            th, tl = _dd_mul(ch, cl, qh, ql)
            uh, ul = _dd_mul(ph, pl, float(k), 0.0)
            rh, rl = _dd_add(th, tl, -uh, -ul)
            rh, rl = _dd_div(rh, rl, k + 1.0)
        ph, pl, qh, ql = qh, ql, rh, rl
    return qh + ql


@_jit
def _chebyshev(kind, xh, xl, n_):
    """Chebyshev T, U, V, W (kind 0..3) with PyTorch's values at x = ±1."""
    n = int(n_) if math.isfinite(n_) else -1
    if n < 0:
        return 0.0
    if (xl == 0.0 or xl != xl) and abs(xh) == 1.0:
        odd = n % 2 == 1
        if kind == 0:
            return -1.0 if xh < 0 and odd else 1.0
        if kind == 1:
            return -(n + 1.0) if xh < 0 and odd else n + 1.0
        if kind == 2:
            return 1.0 if xh > 0 else (-(2.0 * n + 1.0) if odd else 2.0 * n + 1.0)
        return 2.0 * n + 1.0 if xh > 0 else (-1.0 if odd else 1.0)
    if n == 0:
        return 1.0
    return _polynomial(kind, xh, xl, n) if xl == xl else _plain(kind, xh, n)  # xl NaN: float32 caller


@_jit
def chebyshev_t_f32(x, n):
    return _chebyshev(0, np.float64(x), _NAN, np.float64(n))


@_jit
def chebyshev_t(x, n):
    return _chebyshev(0, np.float64(x), 0.0, np.float64(n))


@_jit
def chebyshev_u_f32(x, n):
    return _chebyshev(1, np.float64(x), _NAN, np.float64(n))


@_jit
def chebyshev_u(x, n):
    return _chebyshev(1, np.float64(x), 0.0, np.float64(n))


@_jit
def chebyshev_v_f32(x, n):
    return _chebyshev(2, np.float64(x), _NAN, np.float64(n))


@_jit
def chebyshev_v(x, n):
    return _chebyshev(2, np.float64(x), 0.0, np.float64(n))


@_jit
def chebyshev_w_f32(x, n):
    return _chebyshev(3, np.float64(x), _NAN, np.float64(n))


@_jit
def chebyshev_w(x, n):
    return _chebyshev(3, np.float64(x), 0.0, np.float64(n))


@_jit
def _shifted(kind, x, n):
    """The family at 2x - 1, that argument kept exactly in double-double."""
    h, low = _two_sum(2.0 * x, -1.0)
    return _chebyshev(kind, h, low, n)


@_jit
def shifted_chebyshev_t_f32(x, n):
    return _chebyshev(0, 2.0 * np.float64(x) - 1.0, _NAN, np.float64(n))


@_jit
def shifted_chebyshev_t(x, n):
    return _shifted(0, np.float64(x), np.float64(n))


@_jit
def shifted_chebyshev_u_f32(x, n):
    return _chebyshev(1, 2.0 * np.float64(x) - 1.0, _NAN, np.float64(n))


@_jit
def shifted_chebyshev_u(x, n):
    return _shifted(1, np.float64(x), np.float64(n))


@_jit
def shifted_chebyshev_v_f32(x, n):
    return _chebyshev(2, 2.0 * np.float64(x) - 1.0, _NAN, np.float64(n))


@_jit
def shifted_chebyshev_v(x, n):
    return _shifted(2, np.float64(x), np.float64(n))


@_jit
def shifted_chebyshev_w_f32(x, n):
    return _chebyshev(3, 2.0 * np.float64(x) - 1.0, _NAN, np.float64(n))


@_jit
def shifted_chebyshev_w(x, n):
    return _shifted(3, np.float64(x), np.float64(n))


@_jit
def _other(kind, x, n_, exact):
    n = int(n_) if math.isfinite(n_) else -1
    if n < 0:
        return 0.0
    if n == 0 or (kind == 6 and x == 0.0):
        return 1.0
    if kind == 7 and abs(x) == 1.0:
        return -1.0 if x < 0 and n % 2 == 1 else 1.0
    return _polynomial(kind, x, 0.0, n) if exact else _plain(kind, x, n)


@_jit
def hermite_h_f32(x, n):
    return _other(4, np.float64(x), np.float64(n), False)


@_jit
def hermite_h(x, n):
    return _other(4, np.float64(x), np.float64(n), True)


@_jit
def hermite_he_f32(x, n):
    return _other(5, np.float64(x), np.float64(n), False)


@_jit
def hermite_he(x, n):
    return _other(5, np.float64(x), np.float64(n), True)


@_jit
def laguerre_l_f32(x, n):
    return _other(6, np.float64(x), np.float64(n), False)


@_jit
def laguerre_l(x, n):
    return _other(6, np.float64(x), np.float64(n), True)


@_jit
def legendre_p_f32(x, n):
    return _other(7, np.float64(x), np.float64(n), False)


@_jit
def legendre_p(x, n):
    return _other(7, np.float64(x), np.float64(n), True)


@_jit
def erf(x):
    x = np.float64(x)
    return math.erf(x)


@_jit
def erfc(x):
    x = np.float64(x)
    return math.erfc(x)


@_jit
def lgamma(x):
    x = np.float64(x)
    return _INF if x == -_INF else math.lgamma(x)  # PyTorch: inf at -inf


_AI, _AIP = np.array(AIRY_AI), np.array(AIRY_AIP)


@_jit
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


_UNARY = ("f8(f8)", "f4(f4)")
_BINARY = ("f8(f8,f8)", "f4(f4,f4)")
_ARITY2 = {"zeta", "polygamma", "chebyshev_t", "chebyshev_u", "chebyshev_v", "chebyshev_w", "shifted_chebyshev_t",
           "shifted_chebyshev_u", "shifted_chebyshev_v", "shifted_chebyshev_w", "hermite_h", "hermite_he",
           "laguerre_l", "legendre_p"}


def make(name):
    """The parallel ufunc of the scalar kernel ``name`` (cached on disk by numba); ``<name>_f32`` are
    float32-only variants that need less than float64's kernel to be exact once rounded."""
    if name.endswith("_f32"):
        return numba.vectorize(["f4(f4,f4)"], target="parallel", cache=True)(globals()[name].py_func)
    sigs = _BINARY if name in _ARITY2 else _UNARY
    return numba.vectorize(sigs, target="parallel", cache=True)(globals()[name].py_func)


def set_threads(n):
    numba.set_num_threads(min(int(n), numba.config.NUMBA_NUM_THREADS))

