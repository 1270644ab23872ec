"""Scalar kernels compiled by numba into parallel ufuncs, for the functions where SciPy is slow on
the CPU or where PyTorch's edge semantics differ from SciPy's.

Imported only on first use (``kernel(name)``), so ``import ember`` never imports numba. Every
kernel computes in float64, also for float32 inputs, and rounds once at the end.
"""
import math

import numba
import numpy as np

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


# ---- float32 erf, erfc, ndtr: branch-free polynomial loops that LLVM vectorises (the C library's scalar
# erf costs ten times PyTorch's SIMD kernel). Computed in float64, good to about 1e-10 before the one
# rounding to float32: erf(x) / x as a polynomial in x^2 for |x| < 0.9, above it erfc(a) = exp(-a^2) W(1/a) / a
# with W(s) = erfcx(1/s) / s on two intervals of s; exp(-a^2) comes from NumPy's SIMD exp. The polynomials
# interpolate SciPy's float64 functions at Chebyshev points (computed once, at first use).
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


def _erf_loop(kind):
    """Loop ``kind`` (0 erf, 1 erfc, 2 ndtr) over v (the float64 argument, -x/sqrt(2) for ndtr) and
    e = exp(-v^2), writing float32."""
    def loop(v, e, out):
        for i in range(out.size):
            x = v[i]
            a = abs(x)
            s = 1.0 / a
            w = _horner(_P1, _A1 * s + _B1) if s > 0.4 else _horner(_P0, _A0 * s + _B0)
            q = e[i] * w * s  # erfc(|x|) for |x| >= 0.9
            p = _horner(_SP, _SA * (x * x) + _SB) * x  # erf(x) for |x| < 0.9
            if kind == 0:
                r = p if a < 0.9 else math.copysign(1.0 - q, x)
            else:
                r = 1.0 - p if a < 0.9 else (q if x > 0.0 else 2.0 - q)
                if kind == 2:
                    r *= 0.5
            out[i] = r
    return numba.njit(nogil=True, error_model="numpy")(loop)  # no ZeroDivisionError branch: vectorisable


_ERF_LOOPS = {}


def erf_family_f32(kind, x, out):
    """erf (kind 0), erfc (1) or ndtr (2) of the flat float32 array ``x`` into ``out`` (one thread's block)."""
    loop = _ERF_LOOPS.get(kind)
    if loop is None:
        loop = _ERF_LOOPS[kind] = _erf_loop(kind)
    v = x.astype(np.float64)
    if kind == 2:
        v *= -1 / math.sqrt(2.0)
    e = np.multiply(v, v)
    np.negative(e, out=e)
    np.exp(e, out=e)
    loop(v, e, out)


def _sin_pi_table():
    def f(u):  # sin(pi r) / r as a function of u = r^2, r in [0, 1/2]
        r = np.sqrt(u)
        return np.where(u == 0, _PI, np.sin(_PI * r) / np.where(r == 0, 1, r))
    return _fit(f, 0.0, 0.25, 10)


_QA, _QB, _QP = _sin_pi_table()


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


def _i1e_tables():
    import scipy.special as sc

    def near(x):  # i1e(x) / x on [0, 8]
        return np.where(x == 0, 0.5, sc.i1e(x) / np.where(x == 0, 1, x))

    def far(s):  # sqrt(x) i1e(x) as a function of s = 1 / x, x >= 8
        return sc.i1e(1 / s) / np.sqrt(s)
    return _fit(near, 0.0, 4.0, 12), _fit(near, 4.0, 8.0, 12), _fit(far, 1e-9, 0.125, 12)


# (at most 13 coefficients each: longer tuples are not unrolled, and the loop then does not vectorise)
(_NA, _NB, _NP), (_MA, _MB, _MP), (_FA, _FB, _FP) = _i1e_tables()


@numba.njit(nogil=True, error_model="numpy")
def i1e_f32(x, out):
    """exp(-|x|) I1(x) of float32 ``x`` into ``out``: polynomials (vectorised) in float64, good to 3e-8."""
    for i in range(out.size):
        w = np.float64(x[i])
        a = abs(w)
        s = 1.0 / a
        near = _horner(_NP, _NA * a + _NB) * w  # all computed, then selected: a branch-free loop vectorises
        mid = _horner(_MP, _MA * a + _MB) * w
        far = math.copysign(_horner(_FP, _FA * s + _FB) / math.sqrt(a), w)
        out[i] = near if a <= 4.0 else (mid if a <= 8.0 else far)


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
def _erfinv_loop(v, w, out):
    for i in range(out.size):
        x = v[i]
        u = w[i]
        near = _horner(_EP, _EA * u + _EB)  # all computed, then selected: a branch-free loop vectorises
        mid = _horner(_GP, _GA * u + _GB)
        far = _horner(_TP, _TA * math.sqrt(u) + _TB)
        r = x * (near if u < 3.0 else (mid if u < 6.25 else far))
        out[i] = math.copysign(_INF, x) if abs(x) == 1.0 else r


def erfinv_f32(x, out):
    """erfinv of float32 ``x`` into ``out``: polynomials in w = -log(1 - x^2) (exact for float32 x; NaN outside
    [-1, 1]), the log by NumPy's SIMD loop, the rest vectorised; good to 1e-9 in float64."""
    v = x.astype(np.float64)
    w = np.multiply(v, v)
    np.subtract(1.0, w, out=w)
    np.log(w, out=w)
    np.negative(w, out=w)
    _erfinv_loop(v, w, out)


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

