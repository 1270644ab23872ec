"""numba loops of ember.special, for the functions where SciPy is slow on the CPU or where PyTorch's edge semantics
differ from SciPy's: each ``*_loop``/``*_f32`` function writes ``out`` from flat C-contiguous arrays and releases the
GIL (``_common.blocks`` splits large inputs over threads). Every loop computes in float64, also for float32 inputs,
and rounds once at the end.

Imported by ``ember._jit``'s background thread only, when an input of ``_common.LOOP_MIN`` elements or more asks for
a loop (each op has a JIT-free path meanwhile): no call waits for numba. numba caches the compiled loops on disk
(``cache=True``), next to this module or else in the user's cache folder, so a later process only loads them.
"""
import math

import numba
import numpy as np
from llvmlite import ir
from numba.extending import intrinsic

from . import _poly, _scalar
from ._common import IGAMMA_A_MAX, rebound
from ._scalar import _B2K, _INF, _NAN, _PI, _ROOT_HI, _ROOT_LO
from ._tables import DIGAMMA_ROOT_SERIES

_loop = numba.njit(nogil=True, cache=True, error_model="numpy")  # x / 0 is inf, as in a ufunc


def _compiled(source, **primitives):
    """numba's versions of the functions of ``source`` (a numba-free module: ``_scalar``, ``_poly``) bound to each
    other and to ``primitives``, but for its loops (``*_loop``, and ``loop``, a factory), left for ``_loop``: numba
    caches a loop by its source file and code, so the loops are written in ``source`` too."""
    return rebound(source, lambda name, f: f if name.endswith("loop") else numba.njit(error_model="numpy")(f),
                   **primitives)


_SCALAR = _compiled(_scalar)
globals().update({name: _loop(_SCALAR[name]) for name in _SCALAR if name.endswith("_loop")})


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


@_loop
def erfcx_f32(x, out):
    """exp(x^2) erfc(x) of float32 ``x`` into ``out``: 2 exp(x^2) - erfcx(-x) below -0.9 (inf once exp overflows),
    exp(x^2) (1 - erf(x)) within 0.9 of 0."""
    for i in range(out.size):
        v = np.float64(x[i])
        e = _exp(v * v)
        big = _erfcx_big(abs(v))
        mid = e * (1.0 - _horner(_SP, _SA * (v * v) + _SB) * v)
        out[i] = (big if v > 0.0 else 2.0 * e - big) if abs(v) >= 0.9 else mid


@_loop
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


@_loop
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


@_loop
def lgamma_f32(x, out):
    """log|gamma(x)| of float32 ``x`` into ``out`` (vectorised, in float64; +inf at the poles and at -inf)."""
    for i in range(out.size):
        out[i] = _lgamma(np.float64(x[i]))


@_loop
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


@_loop
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


@_loop
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


@_loop
def gammainc_f32(a, x, out):
    """P(a, x) of float32 ``a``, ``x`` into ``out`` (PyTorch's edge values are set by the caller)."""
    for i in range(out.size):
        out[i] = _igamma(np.float64(a[i]), np.float64(x[i]), False)


@_loop
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


@_loop
def i0e_f32(x, out):
    """exp(-|x|) I0(x) of float32 ``x`` into ``out``."""
    for i in range(out.size):
        out[i] = _i0e(abs(np.float64(x[i])))


@_loop
def i0_f32(x, out):
    """I0(x) of float32 ``x`` into ``out``: the scaled function times exp(|x|), in float64 (NaN at ±inf, as
    PyTorch)."""
    for i in range(out.size):
        a = abs(np.float64(x[i]))
        out[i] = _i0e(a) * _exp(a)


@_loop
def i1e_f32(x, out):
    """exp(-|x|) I1(x) of float32 ``x`` into ``out``."""
    for i in range(out.size):
        out[i] = _i1e(np.float64(x[i]))


@_loop
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


@_loop
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


@_loop
def entr_f32(x, out):
    """-x log(x) of float32 ``x`` into ``out`` in float64 (0 at 0, -inf below, NaN at NaN)."""
    for i in range(out.size):
        w = np.float64(x[i])
        out[i] = -w * _log(w) if w > 0.0 else (0.0 if w == 0.0 else (-_INF if w < 0.0 else w))


@_loop
def logit_f32(x, out):
    """log(x / (1 - x)) of float32 ``x`` into ``out``: in float64 the quotient's rounding is harmless once the log
    is rounded to float32 (-inf at 0, inf at 1, NaN outside [0, 1])."""
    for i in range(out.size):
        w = np.float64(x[i])
        out[i] = _log(w / (1.0 - w))


def _polynomial_loops():
    """``<family>_loop`` (float64: double-double) and ``<family>_f32_loop`` of every polynomial family. A loop's
    closure holds only its family's constants, so numba's cache finds it again."""
    poly = _compiled(_poly, where=numba.njit(inline="always")(lambda c, a, b: a if c else b), isfinite=math.isfinite)
    loops = {}
    for family, kind in _poly.KINDS.items():
        for shifted in (False, True) if kind <= 3 else (False,):
            name = "shifted_" + family if shifted else family
            loops[name + "_loop"] = _loop(poly["loop"](kind, shifted, True))
            loops[name + "_f32_loop"] = _loop(poly["loop"](kind, shifted, False))
    return loops


globals().update(_polynomial_loops())
