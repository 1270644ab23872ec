"""Scalar kernels compiled by numba into parallel ufuncs, for the functions where SciPy is slow on
the CPU or where PyTorch's edge semantics differ from SciPy's.

Imported only on first use (``kernel(name)``), so ``import ember`` never imports numba. Every
kernel computes in float64, also for float32 inputs, and rounds once at the end.
"""
import math

import numba
import numpy as np
from llvmlite import ir
from numba.extending import intrinsic

from ._tables import AIRY_AI, AIRY_AIP, AIRY_HI, AIRY_LO, DIGAMMA_ROOT, DIGAMMA_ROOT_SERIES

_jit = numba.njit(cache=True, fastmath=False, error_model="numpy")  # x / 0 is inf, as in a ufunc
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
def lgamma(x):
    x = np.float64(x)
    return _INF if x == -_INF else math.lgamma(x)  # PyTorch: inf at -inf


# ---- float32 erfcx and log_ndtr: branch-free polynomial loops that LLVM vectorises. Computed in float64, good
# to about 1e-10 before the one rounding to float32: erf(x) / x as a polynomial in x^2 for |x| < 0.9, above it
# erfcx(a) = W(1/a) / a with W(s) = erfcx(1/s) / s on two intervals of s. The polynomials interpolate SciPy's float64
# functions at Chebyshev points (computed once, at first use). (erf, erfc and ndtr themselves are ember-core's
# loops, ember._loops.)
def _fit(f, lo, hi, degree):
    from numpy.polynomial import chebyshev
    c = chebyshev.chebinterpolate(lambda u: f(lo + (u + 1) * (hi - lo) / 2), degree)
    return 2 / (hi - lo), -(hi + lo) / (hi - lo), tuple(float(v) for v in chebyshev.cheb2poly(c)[::-1])


def _erf_tables():
    import scipy.special as sc

    def erf_over_x(u):
        x = np.sqrt(u)
        return np.where(u == 0, 2 / math.sqrt(_PI), sc.erf(x) / np.where(x == 0, 1, x))

    def w(s):
        return sc.erfcx(1 / s) / s
    return _fit(erf_over_x, 0.0, 0.81, 8), _fit(w, 1 / 10.6, 0.4, 11), _fit(w, 0.4, 1 / 0.9, 11)


(_SA, _SB, _SP), (_A0, _B0, _P0), (_A1, _B1, _P1) = _erf_tables()


@numba.njit(inline="always")
def _horner(p, u):
    r = 0.0
    for c in p:
        r = r * u + c
    return r


# ---- exp and log of doubles that LLVM vectorises (the C library's are scalar calls, which keep a whole loop
# scalar): 2^k times a polynomial, the power of two and the exponent read through the bits of the double
@intrinsic
def _from_bits(typingctx, bits):
    return numba.types.float64(numba.types.int64), lambda context, builder, sig, args: builder.bitcast(
        args[0], ir.DoubleType())


@intrinsic
def _to_bits(typingctx, x):
    return numba.types.int64(numba.types.float64), lambda context, builder, sig, args: builder.bitcast(
        args[0], ir.IntType(64))


_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # ln 2 = HI + LO, HI with 32 bits
_EXP_TAYLOR = tuple(1 / math.factorial(k) for k in range(12, -1, -1))
_ATANH_ODD = tuple(2 / (2 * k + 1) for k in range(11, -1, -1))  # 2 atanh(s) = sum 2 s^(2k+1) / (2k+1)


@numba.njit(inline="always")
def _exp(x):
    """exp(x) to 2 ulp, 0 below -708.39 (where it would be subnormal) and inf above 709 (a little early)."""
    k = np.floor(x * (1 / _LN2_HI) + 0.5)  # (not math.floor, which gives an int64)
    r = (x - k * _LN2_HI) - k * _LN2_LO  # exact reduction to |r| <= ln2 / 2
    e = _horner(_EXP_TAYLOR, r) * _from_bits(np.int64(min(max(k, -1022.0), 1023.0) + 1023.0) << 52)
    return 0.0 if x < -708.39 else (_INF if x > 709.0 else e)


@numba.njit(inline="always")
def _log(x):
    """log(x) to 2 ulp for normal and infinite x, -inf at 0 and NaN below (subnormal x are not handled)."""
    bits = _to_bits(x)
    m = _from_bits((bits & 0xFFFFFFFFFFFFF) | 0x3FF0000000000000)  # x = m 2^e, m in [1, 2)
    e = np.float64((bits >> 52) - 1023)
    big = m > 1.4142135623730951
    m = 0.5 * m if big else m  # m in [0.707, 1.414]
    e = e + 1.0 if big else e
    f = m - 1.0
    s = f / (2.0 + f)  # log(m) = 2 atanh(s), |s| <= 0.172
    r = e * _LN2_HI + (s * _horner(_ATANH_ODD, s * s) + e * _LN2_LO)
    return r if 0.0 < x < _INF else (-_INF if x == 0.0 else (x if x > 0.0 else _NAN))


# erfcx(a) = exp(a^2) erfc(a) ~ (1 - 1/(2a^2) + 3/(4a^4) - ...) / (a sqrt(pi)): beyond 10.6 (s = 1/a below the
# fits' interval) seven terms are good to 5e-12
_ERFCX_ASYM = tuple((-1) ** k * math.prod(range(1, 2 * k, 2)) / 2 ** k / math.sqrt(_PI) for k in range(6, -1, -1))


@numba.njit(inline="always")
def _erfcx_big(a):
    """erfcx(a) for a >= 0.9 (and inf), in float64 to about 1e-10."""
    s = 1.0 / a
    w = _horner(_P1, _A1 * s + _B1) if s > 0.4 else _horner(_P0, _A0 * s + _B0)
    return (w if s > 1 / 10.6 else _horner(_ERFCX_ASYM, s * s)) * s


@numba.njit(nogil=True, error_model="numpy")
def erfcx_f32(x, out):
    """exp(x^2) erfc(x) of float32 ``x`` into ``out``: 2 exp(x^2) - erfcx(-x) below -0.9 (inf once exp overflows),
    exp(x^2) (1 - erf(x)) within 0.9 of 0."""
    for i in range(out.size):
        v = np.float64(x[i])
        e = _exp(v * v)
        big = _erfcx_big(abs(v))
        mid = e * (1.0 - _horner(_SP, _SA * (v * v) + _SB) * v)
        out[i] = (big if v > 0.0 else 2.0 * e - big) if abs(v) >= 0.9 else mid


@numba.njit(nogil=True, error_model="numpy")
def log_ndtr_f32(x, out):
    """log(ndtr(x)) of float32 ``x`` into ``out``, with v = -x / sqrt(2): -v^2 + log(erfcx(v) / 2) for v >= 0.9 (no
    underflow), log((1 - erf(v)) / 2) within 0.9 of 0, log1p(-erfc(-v) / 2) below (its series where that is small)."""
    for i in range(out.size):
        v = np.float64(x[i]) * (-1 / math.sqrt(2.0))
        big = _erfcx_big(abs(v))
        u = 0.5 * _exp(-(v * v)) * big  # 1 - ndtr(x) for v <= -0.9
        upper = -u * (1.0 + u * (0.5 + u * (1 / 3 + u * (0.25 + u * 0.2)))) if u < 1e-3 else _log(1.0 - u)
        mid = _log(0.5 * (1.0 - _horner(_SP, _SA * (v * v) + _SB) * v))
        out[i] = (-(v * v) + _log(0.5 * big) if v > 0.0 else upper) if abs(v) >= 0.9 else mid


def _sin_pi_table():
    def f(u):  # sin(pi r) / r as a function of u = r^2, r in [0, 1/2]
        r = np.sqrt(u)
        return np.where(u == 0, _PI, np.sin(_PI * r) / np.where(r == 0, 1, r))
    return _fit(f, 0.0, 0.25, 10)


_QA, _QB, _QP = _sin_pi_table()
_CA, _CB, _CP = _fit(lambda u: np.cos(_PI * np.sqrt(u)), 0.0, 0.25, 10)  # cos(pi r) as a function of u = r^2


@numba.njit(nogil=True, error_model="numpy")
def sinc_f32(x, out):
    """sin(pi x) / (pi x) of float32 ``x`` into ``out``, in float64: sin(pi x) = (-1)^n sin(pi (x - n)) with n the
    nearest integer (exact), sin by a polynomial (vectorised; the C library's sin is scalar)."""
    for i in range(out.size):
        w = np.float64(x[i])
        n = np.floor(w + 0.5)  # (math.floor would give an int64, which overflows)
        r = w - n
        sign = 1.0 - 4.0 * (0.5 * n - np.floor(0.5 * n))  # (-1)^n
        s = sign * r * _horner(_QP, _QA * (r * r) + _QB)
        out[i] = 1.0 if w == 0.0 else s / (_PI * w)


# log|gamma(v)| for v >= 8 by Stirling's series: (v - 1/2) log v - v + log(2 pi) / 2 + sum B_2k / (2k (2k - 1) v^(2k-1))
_STIRLING = tuple(_B2K[k] / ((2 * k + 2) * (2 * k + 1)) for k in range(7, -1, -1))
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


@numba.njit(inline="always")
def _lgamma(w):
    """log|gamma(w)| to about 1e-15 absolute (for float32 results): v = w, or 1 - w by reflection for negative w,
    is shifted up to v + 8 >= 8 where needed (dividing by v (v + 1) ... (v + 7)), then Stirling's series."""
    neg = w < 0.0
    v = 1.0 - w if neg else w
    small = v < 8.0
    p = v * (v + 1.0) * (v + 2.0) * (v + 3.0) * (v + 4.0) * (v + 5.0) * (v + 6.0) * (v + 7.0) if small else 1.0
    y = v + 8.0 if small else v
    r = w - np.floor(w + 0.5)  # |sin(pi w)| = |sin(pi r)|, r exact
    c = _PI * p / abs(r * _horner(_QP, _QA * (r * r) + _QB)) if neg else p  # inf at the poles
    iy = 1.0 / y
    st = (y - 0.5) * _log(y) - y + _HALF_LOG_2PI + iy * _horner(_STIRLING, iy * iy)  # log gamma(y)
    # log gamma(w) = st - log(p); for w < 0, log(pi / |sin(pi w)|) - log gamma(1 - w)
    g = _log(c) - st if neg else st - _log(c)
    return _INF if abs(w) == _INF else (0.0 if w == 1.0 or w == 2.0 else g)


@numba.njit(nogil=True, error_model="numpy")
def lgamma_f32(x, out):
    """log|gamma(x)| of float32 ``x`` into ``out`` (vectorised, in float64; +inf at the poles and at -inf)."""
    for i in range(out.size):
        out[i] = _lgamma(np.float64(x[i]))


@numba.njit(nogil=True, error_model="numpy")
def mvlgamma_f32(x, p, out):
    """Multivariate log-gamma of dimension ``p`` of float32 ``x`` into ``out``: the sum of p log-gammas in float64,
    one vectorised pass per term, rounded once."""
    acc = np.full(out.size, p * (p - 1) / 4 * math.log(_PI))
    for j in range(p):
        for i in range(out.size):
            acc[i] += _lgamma(np.float64(x[i]) - 0.5 * j)
    for i in range(out.size):
        out[i] = acc[i]


# ---- digamma and trigamma of float32 arguments, vectorised in float64: reflection below 0 (0.5 for trigamma) with
# sin(pi r) and cos(pi r) by polynomials of the exactly reduced r, a fixed shift by 8 below 8, then the asymptotic
# series; digamma by its Taylor series about its positive root near that root (as the scalar kernel).
_DIGAMMA_ASYM = tuple(_B2K[k] / (2 * k + 2) for k in range(6, -1, -1))  # in 1 / y^2
_TRIGAMMA_ASYM = tuple(_B2K[k] for k in range(6, -1, -1))
_ROOT_NEAR = tuple(DIGAMMA_ROOT_SERIES[12::-1])  # 13 terms: enough for |d| < 0.1


@numba.njit(inline="always")
def _shift8(v):
    """(v + 8 if v < 8 else v, sum of 1 / (v + k) and of 1 / (v + k)^2 over k < 8 if v < 8 else 0)."""
    s1, s2 = 0.0, 0.0
    for k in range(8):
        t = 1.0 / (v + k)
        s1 += t
        s2 += t * t
    small = v < 8.0
    return (v + 8.0 if small else v), (s1 if small else 0.0), (s2 if small else 0.0)


@numba.njit(nogil=True, error_model="numpy")
def digamma_f32(x, out):
    """digamma of float32 ``x`` into ``out`` (-inf at +0, inf at -0, NaN at negative integers and -inf)."""
    for i in range(out.size):
        w = np.float64(x[i])
        neg = w < 0.0
        r = w - np.floor(w + 0.5)
        u = r * r
        refl = -_PI * _horner(_CP, _CA * u + _CB) / (r * _horner(_QP, _QA * u + _QB))  # -pi / tan(pi w)
        v = 1.0 - w if neg else w
        y, s1, _ = _shift8(v)
        iy = 1.0 / y
        psi = _log(y) - 0.5 * iy - iy * iy * _horner(_DIGAMMA_ASYM, iy * iy) - s1
        d = (v - _ROOT_HI) - _ROOT_LO
        psi = d * _horner(_ROOT_NEAR, d) if abs(d) < 0.1 else psi
        psi = psi + refl if neg else psi
        psi = math.copysign(_INF, -w) if w == 0.0 else psi
        out[i] = _NAN if neg and r == 0.0 else psi


@numba.njit(nogil=True, error_model="numpy")
def trigamma_f32(x, out):
    """trigamma of float32 ``x`` into ``out`` (inf at 0 and the negative integers, 0 at inf, NaN at -inf)."""
    for i in range(out.size):
        w = np.float64(x[i])
        refl = w < 0.5
        r = w - np.floor(w + 0.5)
        sin = r * _horner(_QP, _QA * (r * r) + _QB)  # sin(pi r) = ±sin(pi w)
        v = 1.0 - w if refl else w
        y, _, s2 = _shift8(v)
        iy = 1.0 / y
        psi1 = iy + 0.5 * iy * iy + iy * iy * iy * _horner(_TRIGAMMA_ASYM, iy * iy) + s2
        out[i] = _PI * _PI / (sin * sin) - psi1 if refl else psi1


# ---- regularized incomplete gamma functions of float32 arguments, in float64 to 1e-12 (SciPy's take several
# times PyTorch's time): the power series of P below x = max(a, 1), Legendre's continued fraction of Q above, each
# times x^a e^-x / gamma(a). Their term counts grow like sqrt(a): used for a <= IGAMMA_A_MAX.
IGAMMA_A_MAX = 1000.0


@numba.njit(nogil=True, error_model="numpy")
def _igamma(a, x, upper):
    """P(a, x), or Q(a, x) if ``upper``, for a in (0, IGAMMA_A_MAX] and x >= 0 (NaN otherwise, but P = 1 at x = inf
    whatever a, as PyTorch)."""
    if x == _INF:
        return 0.0 if upper else 1.0
    if not (0.0 < a <= IGAMMA_A_MAX and x >= 0.0):
        return _NAN
    if x == 0.0:
        return 1.0 if upper else 0.0
    scale = a * math.log(x) - x - _lgamma(a)
    if scale < -745.0:  # x^a e^-x / gamma(a) underflows: the series or fraction times 0
        p = 0.0 if x < 1.0 or x < a else 1.0
        return 1.0 - p if upper else p
    scale = math.exp(scale)
    if x < 1.0 or x < a:
        term, total, r = 1.0, 1.0, a
        for _ in range(100000):
            r += 1.0
            term *= x / r
            total += term
            if term <= 1e-13 * total:
                break
        p = scale * total / a
        return 1.0 - p if upper else p
    y, z, c = 1.0 - a, x + 2.0 - a, 0.0
    pkm2, qkm2, pkm1, qkm1 = 1.0, x, x + 1.0, z * x
    q = pkm1 / qkm1
    for _ in range(100000):
        c += 1.0
        y += 1.0
        z += 2.0
        yc = y * c
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        change = 1.0
        if qk != 0.0:
            r = pk / qk
            change = abs((q - r) / r)
            q = r
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        if abs(pk) > 4503599627370496.0:  # keep the recurrences' terms in range
            pkm2, pkm1, qkm2, qkm1 = pkm2 * 2.0 ** -52, pkm1 * 2.0 ** -52, qkm2 * 2.0 ** -52, qkm1 * 2.0 ** -52
        if change <= 1e-13:
            break
    q *= scale
    return q if upper else 1.0 - q


@numba.njit(nogil=True, error_model="numpy")
def gammainc_f32(a, x, out):
    """P(a, x) of float32 ``a``, ``x`` into ``out`` (PyTorch's edge values are set by the caller)."""
    for i in range(out.size):
        out[i] = _igamma(np.float64(a[i]), np.float64(x[i]), False)


@numba.njit(nogil=True, error_model="numpy")
def gammaincc_f32(a, x, out):
    """Q(a, x) of float32 ``a``, ``x`` into ``out`` (PyTorch's edge values are set by the caller)."""
    for i in range(out.size):
        out[i] = _igamma(np.float64(a[i]), np.float64(x[i]), True)


def _i1e_tables():
    import scipy.special as sc

    def near(x):  # i1e(x) / x on [0, 8]
        return np.where(x == 0, 0.5, sc.i1e(x) / np.where(x == 0, 1, x))

    def far(s):  # sqrt(x) i1e(x) as a function of s = 1 / x, x >= 8
        return sc.i1e(1 / s) / np.sqrt(s)
    return _fit(near, 0.0, 4.0, 12), _fit(near, 4.0, 8.0, 12), _fit(far, 1e-9, 0.125, 12)


# (at most 13 coefficients each: longer tuples are not unrolled, and the loop then does not vectorise)
(_NA, _NB, _NP), (_MA, _MB, _MP), (_FA, _FB, _FP) = _i1e_tables()


def _i0e_tables():
    import scipy.special as sc

    def far(s):  # sqrt(x) i0e(x) as a function of s = 1 / x, x >= 8
        return sc.i0e(1 / s) / np.sqrt(s)
    return _fit(sc.i0e, 4.0, 8.0, 12), _fit(far, 1e-9, 0.125, 12)


(_ZMA, _ZMB, _ZMP), (_ZFA, _ZFB, _ZFP) = _i0e_tables()
_I0_TAYLOR = tuple(1 / math.factorial(k) ** 2 for k in range(12, -1, -1))  # I0(x) = sum (x^2 / 4)^k / k!^2


@numba.njit(inline="always")
def _i1e(w):
    """exp(-|w|) I1(w) by polynomials in float64, good to 3e-8 (all computed, then selected: vectorisable)."""
    a = abs(w)
    s = 1.0 / a
    near = _horner(_NP, _NA * a + _NB) * w
    mid = _horner(_MP, _MA * a + _MB) * w
    far = math.copysign(_horner(_FP, _FA * s + _FB) / math.sqrt(a), w)
    return near if a <= 4.0 else (mid if a <= 8.0 else far)


@numba.njit(inline="always")
def _i0e(a):
    """exp(-a) I0(a) for a = |x| in float64 to 1e-12: I0's Taylor series up to 4, polynomials above (like ``_i1e``)."""
    near = _horner(_I0_TAYLOR, 0.25 * a * a) * _exp(-a)
    mid = _horner(_ZMP, _ZMA * a + _ZMB)
    far = _horner(_ZFP, _ZFA * (1.0 / a) + _ZFB) / math.sqrt(a)
    return near if a <= 4.0 else (mid if a <= 8.0 else far)


@numba.njit(nogil=True, error_model="numpy")
def i0e_f32(x, out):
    """exp(-|x|) I0(x) of float32 ``x`` into ``out``."""
    for i in range(out.size):
        out[i] = _i0e(abs(np.float64(x[i])))


@numba.njit(nogil=True, error_model="numpy")
def i0_f32(x, out):
    """I0(x) of float32 ``x`` into ``out``: the scaled function times exp(|x|), in float64 (NaN at ±inf, as
    PyTorch)."""
    for i in range(out.size):
        a = abs(np.float64(x[i]))
        out[i] = _i0e(a) * _exp(a)


@numba.njit(nogil=True, error_model="numpy")
def i1e_f32(x, out):
    """exp(-|x|) I1(x) of float32 ``x`` into ``out``."""
    for i in range(out.size):
        out[i] = _i1e(np.float64(x[i]))


@numba.njit(nogil=True, error_model="numpy")
def i1_f32(x, out):
    """I1(x) of float32 ``x`` into ``out``: the scaled function times exp(|x|), in float64 (NaN at ±inf, as
    PyTorch)."""
    for i in range(out.size):
        w = np.float64(x[i])
        out[i] = _i1e(w) * _exp(abs(w))


def _erfinv_tables():
    import scipy.special as sc

    def x_of(w):  # the x with -log(1 - x^2) = w
        return np.sqrt(-np.expm1(-w))

    def near(w):  # erfinv(x) / x as a function of w on [0, 6.25]
        x = x_of(w)
        return np.where(w == 0, math.sqrt(_PI) / 2, sc.erfinv(x) / np.where(x == 0, 1, x))

    def far(t):  # the same of t = sqrt(w), up to float32's largest x below 1
        x = x_of(t * t)
        return sc.erfinv(x) / x
    return _fit(near, 0.0, 3.0, 12), _fit(near, 3.0, 6.25, 12), _fit(far, 2.5, 4.1, 12)


(_EA, _EB, _EP), (_GA, _GB, _GP), (_TA, _TB, _TP) = _erfinv_tables()  # at most 13 coefficients, as for i1e


@numba.njit(nogil=True, error_model="numpy")
def erfinv_f32(x, out):
    """erfinv of float32 ``x`` into ``out``: polynomials in u = -log(1 - x^2) (1 - x^2 exact for float32 x; NaN
    outside [-1, 1]), all computed, then selected (vectorised); good to 1e-9 in float64."""
    for i in range(out.size):
        v = np.float64(x[i])
        u = -_log(1.0 - v * v)
        near = _horner(_EP, _EA * u + _EB)
        mid = _horner(_GP, _GA * u + _GB)
        far = _horner(_TP, _TA * math.sqrt(u) + _TB)
        r = v * (near if u < 3.0 else (mid if u < 6.25 else far))
        out[i] = math.copysign(_INF, v) if abs(v) == 1.0 else r


@numba.njit(nogil=True, error_model="numpy")
def entr_f32(x, out):
    """-x log(x) of float32 ``x`` into ``out`` in float64 (0 at 0, -inf below, NaN at NaN)."""
    for i in range(out.size):
        w = np.float64(x[i])
        out[i] = -w * _log(w) if w > 0.0 else (0.0 if w == 0.0 else (-_INF if w < 0.0 else w))


@numba.njit(nogil=True, error_model="numpy")
def logit_f32(x, out):
    """log(x / (1 - x)) of float32 ``x`` into ``out``: in float64 the quotient's rounding is harmless once the log
    is rounded to float32 (-inf at 0, inf at 1, NaN outside [0, 1])."""
    for i in range(out.size):
        w = np.float64(x[i])
        out[i] = _log(w / (1.0 - w))


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


_ARITY2 = {"zeta", "polygamma", "chebyshev_t", "chebyshev_u", "chebyshev_v", "chebyshev_w", "shifted_chebyshev_t",
           "shifted_chebyshev_u", "shifted_chebyshev_v", "shifted_chebyshev_w", "hermite_h", "hermite_he",
           "laguerre_l", "legendre_p"}


def _loop(scalar, arity):
    """A parallel loop applying ``scalar`` over flat contiguous arrays: numba's parallel ufuncs (vectorize)
    cost tens of ns per element in dispatch here, ten times the work of most kernels."""
    if arity == 1:
        def loop(x, out):
            for i in numba.prange(out.size):
                out[i] = scalar(x[i])
    else:
        def loop(x, y, out):
            for i in numba.prange(out.size):
                out[i] = scalar(x[i], y[i])
    return numba.njit(parallel=True, error_model="numpy")(loop)


def make(name):
    """``f(*arrays)`` applying the scalar kernel ``name`` elementwise (broadcasting, result in the inputs'
    float dtype); ``<name>_f32`` are float32-only variants that need less than float64's kernel to be exact
    once rounded."""
    arity = 2 if name in _ARITY2 or name.endswith("_f32") else 1
    loop = _loop(globals()[name], arity)

    def run(*arrays):
        arrays = np.broadcast_arrays(*arrays)
        dt = np.float32 if name.endswith("_f32") or arrays[-1].dtype == np.float32 else np.float64
        out = np.empty(arrays[0].shape, dt)
        loop(*[np.ascontiguousarray(a, dt).reshape(-1) for a in arrays], out.reshape(-1))
        return out
    return run


def set_threads(n):
    numba.set_num_threads(min(int(n), numba.config.NUMBA_NUM_THREADS))

