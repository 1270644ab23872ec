"""numba loops of ember-core: the error function family (erf, erfc, the normal CDF) and GELU with its gradient,
exact and tanh-approximated; small powers; the float32 logistic family (sigmoid, SiLU, softplus and their
gradients) and the gradients of sigmoid and tanh from their outputs. NumPy has no erf, and a chain of NumPy calls
makes one pass through memory per step (the old 70-term erf series took 150 ms for 1M elements); a compiled loop
makes one.

Imported on first use only (``ember._loops``): ``import ember`` never loads numba. Each loop writes ``out`` from
flat C-contiguous arrays and releases the GIL, so ``ember._parallel`` splits large inputs over the cores.

float32 loops compute in float32, branch-free (LLVM vectorises them: 16 lanes with AVX-512), to a few ulp: the
tail ``erfc(b) = exp(-b**2) N(b) / (sqrt(pi) b N(b) + M(b))`` (a rational function of the input itself), with
``b**2`` split into an exact head and its rounding error (an FMA), an exp whose argument reduction is exact, and
results kept scaled by ``2**64`` until one last operation, so that subnormal results round once. float64 loops use
the C library's erf/erfc with the rounding error of ``-x / sqrt(2)`` corrected to first order. The polynomials come
from ``tools/fit_erf.py``.
"""
import math

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_F = np.float32
_jit = numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
_inline = numba.njit(inline="always", fastmath={"contract"})

# tools/fit_erf.py (M and the slopes scaled by 2**64 and 2**65: the exp below is scaled by 2**64)
_ERF_NEAR = tuple(_F(c) for c in (
    -1.128556232288247e-05, 0.00011695350985974073, -0.0008529305923730135, 0.005223414860665798,
    -0.02686608023941517, 0.11283791065216064, -0.37612637877464294, 0.12837916612625122))
_EXP = tuple(_F(c) for c in (
    0.0013934532180428505, 0.008369861170649529, 0.04166645556688309, 0.1666649878025055, 0.5, 1.0))
_ERFCX_N = tuple(_F(c) for c in (
    0.03885645419359207, 0.257516086101532, 0.7902656197547913, 1.2935715913772583, 1.0))
_ERFCX_M = tuple(_F(c) for c in (
    87554586050560.0, 6.323804705830994e+17, 4.2487897317787566e+18, 1.1981128618735567e+19, 1.8446744073709552e+19))
_ERFCX_SLOPE = _F(3.2696002570115002e+19)  # 2**64 sqrt(pi)
_PHI_N = tuple(_F(c) for c in (
    0.009709111414849758, 0.09101289510726929, 0.39503705501556396, 0.9145666360855103, 1.0))
_PHI_M = tuple(_F(c) for c in (
    44495605334016.0, 4.469188349394944e+17, 4.2473870298196214e+18, 1.6939205879889134e+19, 3.6893488147419103e+19))
_PHI_SLOPE = _F(4.623913027004221e+19)  # 2**65 sqrt(pi / 2)
_NEAR = _F(0.8)  # erf below: its own polynomial (1 - erfc would lose erf's relative accuracy)
_B_MAX = _F(10.25)  # erfc(b) < 2**-150 beyond: 0 in float32
_A_MAX = _F(10.25 * math.sqrt(2))  # the same for the normal CDF at -a, and a * Phi(-a) too
_LN2_HI = _F(math.log(2))
_LN2_LO = _F(math.log(2) - float(_LN2_HI))
_LOG2E = _F(1 / math.log(2))
_ROUND = _F(1.5 * 2 ** 23)  # adding it rounds a float32 below 2**22 to an integer: in its low bits
_INV_SQRT_2PI_DOWN = _F(2.0 ** -64 / math.sqrt(2 * math.pi))
_UP, _DOWN = _F(2.0 ** 64), _F(2.0 ** -64)  # the scale of the exp below, and back


@intrinsic
def _bits(typingctx, x):
    return types.int32(types.float32), lambda context, builder, sig, args: builder.bitcast(args[0], ir.IntType(32))


@intrinsic
def _from_bits(typingctx, i):
    return types.float32(types.int32), lambda context, builder, sig, args: builder.bitcast(args[0], ir.FloatType())


@intrinsic
def _fma(typingctx, a, b, c):
    """``a * b + c`` with one rounding (LLVM's fma: the instruction where there is one)."""
    return a(a, b, c), lambda context, builder, sig, args: builder.fma(*args)


@_inline
def _horner(coefficients, u):
    r = coefficients[0]
    for c in coefficients[1:]:
        r = _fma(r, u, c)
    return r


@_inline
def _exp_up(hi, lo):
    """``2**64 * exp(-(hi + lo))`` for ``0 <= hi <= 106`` and ``|lo|`` below an ulp of ``hi``: ``hi - k ln2``
    is exact for the k nearest ``hi / ln2`` (one FMA), so the result is good to about an ulp."""
    s = _fma(hi, _LOG2E, _ROUND)
    k = s - _ROUND
    r = _fma(k, _LN2_LO, _fma(k, _LN2_HI, -hi) - lo)
    scale = _from_bits((np.int32(191) - (_bits(s) - _bits(_ROUND))) << 23)  # 2**(64 - k)
    return _fma(r, _horner(_EXP, r), _F(1)) * scale


@_inline
def _erfc_parts(b):
    """(E, N, D) with erfc(b) = E * N / D, for b in [0, B_MAX]: E = 2**64 exp(-b**2) from b**2 split into its
    rounded value and that rounding's error (exact by an FMA); erfcx(b) = 2**64 N / D."""
    hi = b * b
    n = _horner(_ERFCX_N, b)
    return _exp_up(hi, _fma(b, b, -hi)), n, _fma(b * _ERFCX_SLOPE, n, _horner(_ERFCX_M, b))


@_inline
def _phi_parts(a):
    """(E, N, D) with Phi(-a) = E * N / D, for a in [0, A_MAX]; E = 2**64 exp(-a**2 / 2)."""
    h = a * _F(0.5)
    hi = h * a
    n = _horner(_PHI_N, a)
    return _exp_up(hi, _fma(h, a, -hi)), n, _fma(a * _PHI_SLOPE, n, _horner(_PHI_M, a))


@_inline
def _below(a, limit):
    """``a`` clamped to ``limit`` (NaN kept: the comparison is false for it)."""
    return limit if a > limit else a


# ---- float32 loops ------------------------------------------------------------------------------
@_jit
def erf_f32(x, out):
    for i in range(out.size):
        v = x[i]
        a = abs(v)
        e, n, d = _erfc_parts(_below(a, _B_MAX))
        far = math.copysign(_F(1) - e * n / d, v)
        out[i] = far if a >= _NEAR else _fma(v, _horner(_ERF_NEAR, v * v), v)


@_jit
def erfc_f32(x, out):
    for i in range(out.size):
        v = x[i]
        e, n, d = _erfc_parts(_below(abs(v), _B_MAX))
        q = e * n / d
        out[i] = _F(2) - q if v < 0 else q


@_jit
def ndtr_f32(x, out):
    """The standard normal CDF Phi(x) = erfc(-x / sqrt(2)) / 2."""
    for i in range(out.size):
        v = x[i]
        e, n, d = _phi_parts(_below(abs(v), _A_MAX))
        q = e * n / d
        out[i] = q if v < 0 else _F(1) - q


@_jit
def gelu_f32(x, out):
    """x Phi(x): q = x Phi(-|x|) for x < 0 (rounded once, also into the subnormals), x - q above, with x clamped to
    [-A_MAX, A_MAX] in q (beyond, q rounds to 0: the limits -0.0 and x, also at the infinities)."""
    for i in range(out.size):
        v = x[i]
        c = _below(v, _A_MAX)
        c = -_A_MAX if c < -_A_MAX else c
        e, n, d = _phi_parts(abs(c))
        q = c * e * n / d
        out[i] = q if v < 0 else v - q


@_jit
def gelu_backward_f32(x, g, out):
    """``g`` times gelu'(x) = Phi(x) + x phi(x), both from one scaled exp (phi(x) = E 2**-64 / sqrt(2 pi)); its
    limits 0 and 1 beyond A_MAX."""
    for i in range(out.size):
        v = x[i]
        e, n, d = _phi_parts(_below(abs(v), _A_MAX))
        r = n / d
        c = v * _INV_SQRT_2PI_DOWN
        s = e * (r + c) if v < 0 else _fma(e, c - r, _F(1))
        s = _F(0) if v < -_A_MAX else s
        s = _F(1) if v > _A_MAX else s
        out[i] = g[i] * (s + (v - v))  # (NaN at the infinities, as PyTorch's gradient)


# ---- float64 loops: the C library's erf/erfc (scalar calls) ------------------------------------
_SQRT1_2 = 0.7071067811865476
_SQRT1_2_LO = -4.833646656726457e-17  # 1/sqrt(2) - _SQRT1_2
_INV_SQRT_2PI64 = 1 / math.sqrt(2 * math.pi)


@_jit
def erf_f64(x, out):
    for i in range(out.size):
        out[i] = math.erf(x[i])


@_jit
def erfc_f64(x, out):
    for i in range(out.size):
        out[i] = math.erfc(x[i])


@_inline
def _phi64(v):
    """Phi(v) = erfc(-v / sqrt(2)) / 2, the rounding error d of w = -v / sqrt(2) corrected to first order where it
    matters (erfc(w + d) ~ erfc(w) (1 - 2 w d) for w > 0, where erfc falls fastest)."""
    w = -v * _SQRT1_2
    d = _fma(-v, _SQRT1_2, -w) - v * _SQRT1_2_LO
    r = 0.5 * math.erfc(w)
    return r - r * 2.0 * w * d if 0.0 < w < 40.0 else r  # (erfc(40) is 0 in float64)


@_jit
def gelu_f64(x, out):
    for i in range(out.size):
        v = x[i]
        r = v * _phi64(v)
        out[i] = 0.0 if v == -math.inf else r


@_jit
def gelu_backward_f64(x, g, out):
    for i in range(out.size):
        v = x[i]
        h = 0.5 * v
        hi = h * v
        lo = _fma(h, v, -hi) if hi < 1e300 else 0.0
        density = math.exp(-hi) * (1.0 - lo) * _INV_SQRT_2PI64  # exp(-(hi + lo)), lo tiny
        out[i] = g[i] * (_phi64(v) + v * density)  # (NaN at the infinities, as PyTorch's gradient)


# ---- tanh-approximated GELU: 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x**3) ---------
# computed in float64 (also for float32 inputs: 2u exact enough that exp(-|2u|) keeps its relative accuracy in
# the tails), exp by a vectorisable polynomial for float32 results and by the C library's for float64 ones
_K0 = 2 * math.sqrt(2 / math.pi)  # 2u = x (K0 + K1 x**2)
_K1 = _K0 * 0.044715
_DK1 = 3 * _K1  # d(2u)/dx = K0 + DK1 x**2
_EXP64 = (1 / 5040, 1 / 720, 1 / 120, 1 / 24, 1 / 6, 0.5, 1.0)  # (exp(r) - 1) / r to 3e-11 for |r| <= ln(2) / 2
_LN2_HI64, _LN2_LO64 = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # ln 2 = HI + LO, HI with 32 bits
_ROUND64 = 1.5 * 2.0 ** 52


@intrinsic
def _bits64(typingctx, x):
    return types.int64(types.float64), lambda context, builder, sig, args: builder.bitcast(args[0], ir.IntType(64))


@intrinsic
def _from_bits64(typingctx, i):
    return types.float64(types.int64), lambda context, builder, sig, args: builder.bitcast(args[0], ir.DoubleType())


@_inline
def _exp_neg64(z):
    """exp(-z) for z >= 0 to about 1e-10 (0 from z > 708, where it would be subnormal), vectorisable."""
    z = 709.0 if z > 709.0 else z  # (NaN kept)
    s = _fma(z, -1 / math.log(2), _ROUND64)
    k = s - _ROUND64
    r = _fma(k, -_LN2_LO64, _fma(k, -_LN2_HI64, -z))  # -z - k ln2, exact but for LO's part
    p = _fma(r, _horner(_EXP64, r), 1.0) * _from_bits64((_bits64(s) - _bits64(_ROUND64) + np.int64(1023)) << 52)
    return 0.0 if z > 708.0 else p


@_inline
def _gelu_tanh(v, e):
    """x sigmoid(2u) from e = exp(-|2u|): x / (1 + e) for x >= 0, x e / (1 + e) below; -0.0 at -inf."""
    r = (v if v >= 0.0 else v * e) / (1.0 + e)
    return -0.0 if v == -math.inf else r


@_inline
def _gelu_tanh_grad(v, e):
    """sigmoid(2u) + x sigmoid'(2u) d(2u)/dx, sigmoid' = e / (1 + e)**2 (NaN at the infinities, as PyTorch's)."""
    inv = 1.0 / (1.0 + e)
    s = e * inv * inv
    slope = 0.0 if s == 0.0 else v * _fma(_DK1, v * v, _K0) * s  # (0, not inf * 0, for huge finite x)
    return (inv if v >= 0.0 else e * inv) + slope + (v - v)


@_jit
def gelu_tanh_f32(x, out):
    for i in range(out.size):
        v = np.float64(x[i])
        out[i] = _gelu_tanh(v, _exp_neg64(abs(v * _fma(_K1, v * v, _K0))))


@_jit
def gelu_tanh_backward_f32(x, g, out):
    for i in range(out.size):
        v = np.float64(x[i])
        out[i] = g[i] * _gelu_tanh_grad(v, _exp_neg64(abs(v * _fma(_K1, v * v, _K0))))


@_jit
def gelu_tanh_f64(x, out):
    for i in range(out.size):
        v = x[i]
        out[i] = _gelu_tanh(v, math.exp(-abs(v * _fma(_K1, v * v, _K0))))


@_jit
def gelu_tanh_backward_f64(x, g, out):
    for i in range(out.size):
        v = x[i]
        out[i] = g[i] * _gelu_tanh_grad(v, math.exp(-abs(v * _fma(_K1, v * v, _K0))))


# ---- small powers in one pass (NumPy makes one pass per product); float32 or float64 alike --------------
_ONE = _F(1)  # (an integer 1 would make float32 arithmetic float64; with float64 operands this is float64's 1)


@_jit
def cube(x, out):
    for i in range(out.size):
        v = x[i]
        out[i] = v * v * v


@_jit
def inverse(x, out):
    for i in range(out.size):
        out[i] = _ONE / x[i]


@_jit
def inverse_square(x, out):
    for i in range(out.size):
        v = x[i]
        out[i] = _ONE / (v * v)



# ---- the logistic family in float32: sigmoid(v) from E = 2**64 exp(-|v|), exact but for exp's ulp -----------------
_LOGISTIC_MAX = _F(110)  # exp(-110) * 110 is below the subnormals: every result beyond is its limit
_ATANH2 = tuple(_F(2 / (2 * k + 1)) for k in range(7, -1, -1))  # 2 atanh(s) / s = 2 + 2 s^2 / 3 + ... (s <= 1/3)


@_inline
def _exp_neg_up(a):
    """2**64 exp(-a) for a >= 0 (0 beyond LOGISTIC_MAX; NaN kept)."""
    e = _exp_up(_below(a, _LOGISTIC_MAX), _F(0))
    return _F(0) if a > _LOGISTIC_MAX else e


@_jit
def sigmoid_f32(x, out):
    """1 / (1 + exp(-x)) = 2**64 / D for x >= 0, E / D below (one rounding), D = 2**64 + E."""
    for i in range(out.size):
        v = x[i]
        e = _exp_neg_up(abs(v))
        out[i] = (_UP if v >= 0 else e) / (_UP + e)


@_jit
def silu_f32(x, out):
    """x sigmoid(x); the limits 0 and x at the infinities."""
    for i in range(out.size):
        v = x[i]
        e = _exp_neg_up(abs(v))
        d = _UP + e
        r = v * (_UP / d) if v >= 0 else v * e / d  # (x 2**64 would overflow; x E rounds tiny results once)
        out[i] = _F(-0.0) if v == -np.inf else r


@_jit
def silu_backward_f32(x, g, out):
    """``g`` times silu'(x) = s (1 + x (1 - s)), s = sigmoid(x): w (1 + x E / D) for x >= 0, E (1 + x w) / D below,
    w = 2**64 / D (NaN at the infinities, as PyTorch's gradient)."""
    for i in range(out.size):
        v = x[i]
        e = _exp_neg_up(abs(v))
        d = _UP + e
        w = _UP / d
        s = w * _fma(v, e / d, _F(1)) if v >= 0 else e * _fma(v, w, _F(1)) / d
        out[i] = g[i] * (s + (v - v))


@_inline
def _log1p_up(e):
    """2**64 log(1 + exp(-a)) from E = 2**64 exp(-a): 2 atanh(s), s = u / (2 + u), u = exp(-a) in [0, 1]; E itself
    where u < 2**-24 (log1p(u) = u to float32's precision), so that tiny results round once."""
    u = e * _DOWN
    s = u / (_F(2) + u)
    return e if u < _F(2.0 ** -24) else s * _horner(_ATANH2, s * s) * _UP


@_jit
def softplus_f32(x, beta, threshold, out):
    """log(1 + exp(beta x)) / beta = (max(z, 0) + log1p(exp(-|z|))) / beta, z = beta x; x where z > threshold."""
    for i in range(out.size):
        v = x[i]
        z = v * beta
        lg = _log1p_up(_exp_neg_up(abs(z)))
        r = _fma(lg, _DOWN, z) / beta if z > 0 else lg / beta * _DOWN
        out[i] = v if z > threshold else r


@_jit
def softplus_backward_f32(x, g, beta, threshold, out):
    """``g`` times sigmoid(beta x) (1 where beta x > threshold)."""
    for i in range(out.size):
        z = x[i] * beta
        e = _exp_neg_up(abs(z))
        s = (_UP if z >= 0 else e) / (_UP + e)
        out[i] = g[i] * (_F(1) if z > threshold else s)


# ---- gradients from outputs, one pass: float32 or float64, with NumPy's roundings (no FMA: the same values as the
# op's three NumPy passes on CuPy) --------------------------------------------------------------------------------
_exact = numba.njit(cache=True, nogil=True, error_model="numpy")


@_exact
def sigmoid_backward(y, g, out):
    """``g * (1 - y) * y``."""
    for i in range(out.size):
        v = y[i]
        out[i] = (_ONE - v) * v * g[i]


@_exact
def tanh_backward(y, g, out):
    """``g * (1 - y * y)``, ``out`` may be ``g``."""
    for i in range(out.size):
        v = y[i]
        out[i] = g[i] * (_ONE - v * v)


# ---- rows of float32 matrices (the last dim): softmax, log_softmax, layer norm and their gradients ----------------
# A row's sums and maxima are reductions: vectorised only where LLVM may reassociate them (``_sums``; kept out of the
# loops around them, whose exp's rounding tricks must not be reassociated). The order of additions is fixed by the
# compiled code, so results do not depend on threads. The maxima by LLVM's NaN-propagating ``maximum`` (a compare
# and select, as Python's max compiles, is no reduction LLVM vectorises).
_sums = numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc", "nsz", "contract"})


@_sums
def _sum(x):
    s = _F(0)
    for j in range(x.size):
        s += x[j]
    return s


@intrinsic
def _maximum(typingctx, a, b):
    """The larger of ``a`` and ``b``, NaN if either is (LLVM's maximum)."""
    def codegen(context, builder, sig, args):
        t = args[0].type
        return builder.call(builder.module.declare_intrinsic("llvm.maximum", [t], ir.FunctionType(t, [t, t])), args)
    return a(a, b), codegen


@_sums
def _max(x):
    m = x[0]
    for j in range(x.size):
        m = _maximum(m, x[j])
    return m


@_sums
def _count_zeros(x):
    c = 0
    for j in range(x.size):
        c += x[j] == 0
    return c


@_sums
def _dot(x, y):
    s = _F(0)
    for j in range(x.size):
        s += x[j] * y[j]
    return s


@_sums
def _dot_about(v, x, m):
    s = _F(0)
    for j in range(x.size):
        s += v[j] * (x[j] - m)
    return s


@_sums
def _squares_about(x, m):
    s = _F(0)
    for j in range(x.size):
        d = x[j] - m
        s += d * d
    return s


@_inline
def _exp_f32(z):
    """exp(z) for z <= 0 to about an ulp (NaN for NaN)."""
    return _exp_neg_up(-z) * _DOWN


@_jit
def softmax_rows_f32(x, out):
    """exp(x - m) / sum(exp(x - m)) per row, m the row's maximum."""
    for i in range(x.shape[0]):
        xi, oi = x[i], out[i]
        mi = _max(xi)
        for j in range(xi.size):
            oi[j] = _exp_f32(xi[j] - mi)
        s = _sum(oi)
        for j in range(xi.size):
            oi[j] = oi[j] / s


@_jit
def log_softmax_rows_f32(x, out, scratch):
    """z - log(sum exp(z)), z = x - m, m the row's maximum; the log as log1p(c - 1 + the sum of the terms where
    z != 0), c the number of maxima, whose terms are exactly 1 (summing 1 + tiny first would round the tiny part
    away). A NaN or an infinite maximum makes z NaN, and so the row. ``scratch`` holds one row."""
    for i in range(x.shape[0]):
        xi, oi = x[i], out[i]
        mi = _max(xi)
        for j in range(xi.size):
            z = xi[j] - mi
            oi[j] = z
            scratch[j] = _F(0) if z == 0 else _exp_f32(z)
        lse = np.float32(math.log1p(np.float64(_sum(scratch)) + (_count_zeros(oi) - 1)))
        for j in range(xi.size):
            oi[j] = oi[j] - lse


@_jit
def softmax_backward_rows_f32(y, g, out):
    """y (g - sum(g y)) per row."""
    for i in range(y.shape[0]):
        yi, gi, oi = y[i], g[i], out[i]
        s = _dot(gi, yi)
        for j in range(yi.size):
            oi[j] = yi[j] * (gi[j] - s)


@_jit
def log_softmax_backward_rows_f32(y, g, out):
    """g - exp(y) sum(g) per row."""
    for i in range(y.shape[0]):
        yi, gi, oi = y[i], g[i], out[i]
        s = _sum(gi)
        for j in range(yi.size):
            oi[j] = gi[j] - _exp_f32(yi[j]) * s


@_inline
def _row_stats(xi, eps):
    """(mean, 1 / sqrt(var + eps)) of a row, the variance about the mean (two passes in cache)."""
    n = _F(xi.size)
    m = _sum(xi) / n
    return m, _F(1) / np.float32(math.sqrt(_squares_about(xi, m) / n + eps))


@_jit
def layer_norm_rows_f32(x, w, b, eps, out):
    """(x - mean) / sqrt(var + eps) * w + b per row (w, b of the row's length, or empty for none)."""
    n = x.shape[1]
    for i in range(x.shape[0]):
        xi, oi = x[i], out[i]
        m, r = _row_stats(xi, eps)
        if w.size and b.size:
            for j in range(n):
                oi[j] = (xi[j] - m) * r * w[j] + b[j]
        elif w.size:
            for j in range(n):
                oi[j] = (xi[j] - m) * r * w[j]
        elif b.size:
            for j in range(n):
                oi[j] = (xi[j] - m) * r + b[j]
        else:
            for j in range(n):
                oi[j] = (xi[j] - m) * r


@_jit
def layer_norm_backward_rows_f32(x, g, w, eps, gx, gw, gb):
    """Per row, with h = (x - mean) rstd and v = g w: gx = rstd (v - mean(v) - h mean(v h)); ``gw`` and ``gb``
    (row-length accumulators, or empty) gather sum(g h) and sum(g) over the rows."""
    n = x.shape[1]
    for i in range(x.shape[0]):
        xi, gi, oi = x[i], g[i], gx[i]
        m, r = _row_stats(xi, eps)
        if w.size:
            for j in range(n):  # v into gx's row first
                oi[j] = gi[j] * w[j]
        else:
            oi[:] = gi
        sv = _sum(oi) / _F(n)
        svh = _dot_about(oi, xi, m) * r / _F(n)
        if gw.size and gb.size:
            for j in range(n):
                h = (xi[j] - m) * r
                oi[j] = r * (oi[j] - sv - h * svh)
                gw[j] += gi[j] * h
                gb[j] += gi[j]
        else:
            for j in range(n):
                h = (xi[j] - m) * r
                oi[j] = r * (oi[j] - sv - h * svh)
            if gw.size:
                for j in range(n):
                    gw[j] += gi[j] * ((xi[j] - m) * r)
            if gb.size:
                for j in range(n):
                    gb[j] += gi[j]
