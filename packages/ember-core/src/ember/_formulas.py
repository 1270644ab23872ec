"""The loops of ember-core, written once for two engines: ``ember._numba_kernels`` compiles these functions with
numba (one element at a time), and ``ember._loops`` runs the very same functions with NumPy on cache-sized blocks
of whole arrays: the path of small inputs, and of large ones until ``ember._jit`` has compiled their loop.

How one text runs on both: a loop steps through its elements with ``each(n)`` (numba: ``range(n)``; NumPy: one
step, ``...``, that indexes whole blocks), per-element choices go through ``where`` (numba's build binds a
conditional expression), and the few operations NumPy lacks are primitives, bound here to NumPy's versions and in
``_numba_kernels`` to numba's: ``fma`` (LLVM's fused multiply-add; emulated exactly here), ``product_error``,
``bits``/``from_bits`` (bit casts: ``view`` here), the C library's ``erf64``/``erfc64``/``exp64`` (here called
element by element: NumPy's own exp differs from the C library's in the last bit) and the row reductions.
Nothing here imports numba.

Elementwise loops give the same bits on both engines: both make the same float operations in the same order
(numba compiles without contraction into FMAs: the loops' FMAs are the explicit ``fma`` calls), but for ``fma64``,
which NumPy rounds twice (the float64 exp of the float32 tanh GELU only: its float32 results move only where they lie
within 1e-16 of a rounding boundary). Row loops (softmax, log_softmax, layer norm) may differ in the last bits: their
sums are vectorised by LLVM in numba (reassociated), pairwise in NumPy.

float32 loops compute in float32, branch-free (LLVM vectorises them: 16 lanes with AVX-512), to a few ulp: the
tail ``erfc(b) = exp(-b**2) N(b) / (sqrt(pi) b N(b) + M(b))`` (a rational function of the input itself), with
``b**2`` split into an exact head and its rounding error, an exp whose argument reduction is exact, and results kept
scaled by ``2**64`` until one last operation, so that subnormal results round once. float64 loops use the C
library's erf/erfc with the rounding error of ``-x / sqrt(2)`` corrected to first order. The polynomials come from
``tools/fit_erf.py``.
"""
import math

import numpy as np

F = np.float32
# the loops (the functions of arrays, then scalars, then ``out``; the rest are their pieces)
LOOPS = ("erf_f32", "erfc_f32", "ndtr_f32", "gelu_f32", "gelu_backward_f32", "sigmoid_f32", "silu_f32",
         "silu_backward_f32", "softplus_f32", "softplus_backward_f32", "erf_f64", "erfc_f64", "gelu_f64",
         "gelu_backward_f64", "gelu_tanh_f32", "gelu_tanh_backward_f32", "gelu_tanh_f64", "gelu_tanh_backward_f64",
         "square", "cube", "inverse", "inverse_square", "root", "inverse_root", "square_backward", "cube_backward",
         "inverse_backward", "sqrt_backward", "log_backward", "sigmoid_backward", "tanh_backward", "softmax_rows_f32",
         "log_softmax_rows_f32", "softmax_backward_rows_f32", "log_softmax_backward_rows_f32", "layer_norm_rows_f32",
         "layer_norm_backward_rows_f32")

# ---- NumPy's primitives (``_numba_kernels`` binds numba's) ---------------------------------------------------------
where = np.where
copysign = np.copysign
_ELEMENTS = (Ellipsis,)


def each(n):
    """The steps of a loop over ``n`` elements (or rows): one, over whole blocks."""
    return _ELEMENTS


def fma(a, b, c):
    """``a * b + c`` of float32 values rounded once, as the FMA instruction: the product is exact in float64, and
    rounding the float64 sum to float32 rounds twice, which can differ from one rounding only where that sum lies
    halfway between two float32 values (its low 29 bits a one and zeros, or anywhere below float32's normal range)
    without being exact. Those few are computed again exactly."""
    s = np.multiply(a, b, dtype=np.float64)
    s += c
    r = s.astype(np.float32)
    doubt = np.bitwise_and(s.view(np.int64), _LOW_29) == _HALF_29
    doubt |= np.abs(s) < _TINY
    if doubt.any():
        i = np.flatnonzero(doubt)
        r.reshape(-1)[i] = _fma_odd(*[v if np.ndim(v) == 0 else np.ravel(v)[i] for v in (a, b, c)])
    return r


_LOW_29, _HALF_29, _TINY = np.int64((1 << 29) - 1), np.int64(1 << 28), 2.0 ** -126


def _fma_odd(a, b, c):
    """``fma`` by the float64 sum rounded to odd (its last bit set where inexact), which rounds to float32 as the
    exact sum does."""
    p = np.multiply(a, b, dtype=np.float64)
    c = np.float64(c)
    s = p + c
    t = s - p
    e = (p - (s - t)) + (c - t)  # the sum's rounding error (Knuth's two-sum)
    bits = s.view(np.int64)
    odd = (bits - ((e.view(np.int64) ^ bits) < 0)) | 1  # towards zero first where the error points there
    return np.where(np.abs(e) > 0, odd, bits).view(np.float64).astype(np.float32)


def fma64(a, b, c):
    """``a * b + c`` of float64 values, rounded twice here (an exact emulation would cost dozens of passes)."""
    return a * b + c


def product_error(a, b, p):
    """``a * b - p`` exactly, for ``p`` the rounded product (``fma(a, b, -p)``): float32 in float64, float64 by
    Dekker's splitting (exact unless the operands are beyond 1e300 or the error below the normal range)."""
    if np.result_type(a, b) == np.float32:
        return (np.multiply(a, b, dtype=np.float64) - p).astype(np.float32)
    ah, al = _split(a)
    bh, bl = _split(b)
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _split(a):
    t = 134217729.0 * a  # 2**27 + 1: two halves of 26 bits
    hi = t - (t - a)
    return hi, a - hi


def bits(x):
    return x.view(np.int32)


def from_bits(i):
    return np.asarray(i, np.int32).view(np.float32)


def bits64(x):
    return x.view(np.int64)


def from_bits64(i):
    return np.asarray(i, np.int64).view(np.float64)


def _libm(f):
    def run(x):
        x = np.asarray(x, np.float64)
        return np.fromiter(map(f, x.ravel().tolist()), np.float64, x.size).reshape(x.shape)
    return run


erf64, erfc64, exp64 = _libm(math.erf), _libm(math.erfc), _libm(math.exp)  # (exp64: arguments up to 0)


def row_max(x):
    return x.max(axis=-1, keepdims=True)


def row_sum(x):
    return x.sum(axis=-1, keepdims=True)


def row_count(x, m):
    """How many of a row's values equal ``m``."""
    return np.count_nonzero(x == m, axis=-1, keepdims=True)


def row_dot(x, y):
    return row_sum(x * y)


def row_dot_about(v, x, m):
    return row_sum(v * (x - m))


def row_squares_about(x, m):
    d = x - m
    return row_sum(d * d)


def down(v):
    """A row's contribution to a per-column accumulator: here the sum of the block's rows."""
    return v.sum(axis=0)


# ---- constants -----------------------------------------------------------------------------------------------------
# tools/fit_erf.py (M and the slopes scaled by 2**64 and 2**65: the exp below is scaled by 2**64)
ERF_NEAR = tuple(F(c) for c in (
    -1.128556232288247e-05, 0.00011695350985974073, -0.0008529305923730135, 0.005223414860665798,
    -0.02686608023941517, 0.11283791065216064, -0.37612637877464294, 0.12837916612625122))
EXP = tuple(F(c) for c in (
    0.0013934532180428505, 0.008369861170649529, 0.04166645556688309, 0.1666649878025055, 0.5, 1.0))
ERFCX_N = tuple(F(c) for c in (
    0.03885645419359207, 0.257516086101532, 0.7902656197547913, 1.2935715913772583, 1.0))
ERFCX_M = tuple(F(c) for c in (
    87554586050560.0, 6.323804705830994e+17, 4.2487897317787566e+18, 1.1981128618735567e+19, 1.8446744073709552e+19))
ERFCX_SLOPE = F(3.2696002570115002e+19)  # 2**64 sqrt(pi)
PHI_N = tuple(F(c) for c in (
    0.009709111414849758, 0.09101289510726929, 0.39503705501556396, 0.9145666360855103, 1.0))
PHI_M = tuple(F(c) for c in (
    44495605334016.0, 4.469188349394944e+17, 4.2473870298196214e+18, 1.6939205879889134e+19, 3.6893488147419103e+19))
PHI_SLOPE = F(4.623913027004221e+19)  # 2**65 sqrt(pi / 2)
NEAR = F(0.8)  # erf below: its own polynomial (1 - erfc would lose erf's relative accuracy)
B_MAX = F(10.25)  # erfc(b) < 2**-150 beyond: 0 in float32
A_MAX = F(10.25 * math.sqrt(2))  # the same for the normal CDF at -a, and a * Phi(-a) too
LN2_HI = F(math.log(2))
LN2_LO = F(math.log(2) - float(LN2_HI))
LOG2E = F(1 / math.log(2))
ROUND = F(1.5 * 2 ** 23)  # adding it rounds a float32 below 2**22 to an integer: in its low bits
ROUND_BITS = np.int32(ROUND.view(np.int32))
INV_SQRT_2PI_DOWN = F(2.0 ** -64 / math.sqrt(2 * math.pi))
UP, DOWN = F(2.0 ** 64), F(2.0 ** -64)  # the scale of the exp below, and back
LOGISTIC_MAX = F(110)  # exp(-110) * 110 is below the subnormals: every result beyond is its limit
ATANH2 = tuple(F(2 / (2 * k + 1)) for k in range(7, -1, -1))  # 2 atanh(s) / s = 2 + 2 s^2 / 3 + ... (s <= 1/3)
ONE = F(1)  # (an integer 1 would make float32 arithmetic float64; with float64 operands this is float64's 1)


# ---- float32 pieces ----------------------------------------------------------------------------------------------
def horner(coefficients, u):
    r = coefficients[0]
    for c in coefficients[1:]:
        r = fma(r, u, c)
    return r


def exp_up(hi, lo):
    """``2**64 * exp(-(hi + lo))`` for ``0 <= hi <= 106`` and ``|lo|`` below an ulp of ``hi``: ``hi - k ln2``
    is exact for the k nearest ``hi / ln2`` (one FMA), so the result is good to about an ulp."""
    s = fma(hi, LOG2E, ROUND)
    k = s - ROUND
    r = fma(k, LN2_LO, fma(k, LN2_HI, -hi) - lo)
    scale = from_bits((np.int32(191) - (bits(s) - ROUND_BITS)) << 23)  # 2**(64 - k)
    return fma(r, horner(EXP, r), F(1)) * scale


def erfc_parts(b):
    """(E, N, D) with erfc(b) = E * N / D, for b in [0, B_MAX]: E = 2**64 exp(-b**2) from b**2 split into its
    rounded value and that rounding's error; erfcx(b) = 2**64 N / D."""
    hi = b * b
    n = horner(ERFCX_N, b)
    return exp_up(hi, product_error(b, b, hi)), n, fma(b * ERFCX_SLOPE, n, horner(ERFCX_M, b))


def phi_parts(a):
    """(E, N, D) with Phi(-a) = E * N / D, for a in [0, A_MAX]; E = 2**64 exp(-a**2 / 2)."""
    h = a * F(0.5)
    hi = h * a
    n = horner(PHI_N, a)
    return exp_up(hi, product_error(h, a, hi)), n, fma(a * PHI_SLOPE, n, horner(PHI_M, a))


def below(a, limit):
    """``a`` clamped to ``limit`` (NaN kept: the comparison is false for it)."""
    return where(a > limit, limit, a)


def exp_neg_up(a):
    """2**64 exp(-a) for a >= 0 (0 beyond LOGISTIC_MAX; NaN kept)."""
    return where(a > LOGISTIC_MAX, F(0), exp_up(below(a, LOGISTIC_MAX), F(0)))


def exp_f32(z):
    """exp(z) for z <= 0 to about an ulp (NaN for NaN)."""
    return exp_neg_up(-z) * DOWN


def log1p_up(e):
    """2**64 log(1 + exp(-a)) from E = 2**64 exp(-a): 2 atanh(s), s = u / (2 + u), u = exp(-a) in [0, 1]; E itself
    where u < 2**-24 (log1p(u) = u to float32's precision), so that tiny results round once."""
    u = e * DOWN
    s = u / (F(2) + u)
    return where(u < F(2.0 ** -24), e, s * horner(ATANH2, s * s) * UP)


# ---- float32 loops -------------------------------------------------------------------------------------------------
def erf_f32(x, out):
    for i in each(out.size):
        v = x[i]
        a = abs(v)
        e, n, d = erfc_parts(below(a, B_MAX))
        out[i] = where(a >= NEAR, copysign(F(1) - e * n / d, v), fma(v, horner(ERF_NEAR, v * v), v))


def erfc_f32(x, out):
    for i in each(out.size):
        v = x[i]
        e, n, d = erfc_parts(below(abs(v), B_MAX))
        q = e * n / d
        out[i] = where(v < 0, F(2) - q, q)


def ndtr_f32(x, out):
    """The standard normal CDF Phi(x) = erfc(-x / sqrt(2)) / 2."""
    for i in each(out.size):
        v = x[i]
        e, n, d = phi_parts(below(abs(v), A_MAX))
        q = e * n / d
        out[i] = where(v < 0, q, F(1) - q)


def gelu_f32(x, out):
    """x Phi(x): q = x Phi(-|x|) for x < 0 (rounded once, also into the subnormals), x - q above, with x clamped to
    [-A_MAX, A_MAX] in q (beyond, q rounds to 0: the limits -0.0 and x, also at the infinities)."""
    for i in each(out.size):
        v = x[i]
        c = below(v, A_MAX)
        c = where(c < -A_MAX, -A_MAX, c)
        e, n, d = phi_parts(abs(c))
        q = c * e * n / d
        out[i] = where(v < 0, q, v - q)


def gelu_backward_f32(x, g, out):
    """``g`` times gelu'(x) = Phi(x) + x phi(x), both from one scaled exp (phi(x) = E 2**-64 / sqrt(2 pi)); its
    limits 0 and 1 beyond A_MAX."""
    for i in each(out.size):
        v = x[i]
        e, n, d = phi_parts(below(abs(v), A_MAX))
        r = n / d
        c = v * INV_SQRT_2PI_DOWN
        s = where(v < 0, e * (r + c), fma(e, c - r, F(1)))
        s = where(v < -A_MAX, F(0), s)
        s = where(v > A_MAX, F(1), s)
        out[i] = g[i] * (s + (v - v))  # (NaN at the infinities, as PyTorch's gradient)


# ---- the logistic family in float32: sigmoid(v) from E = 2**64 exp(-|v|), exact but for exp's ulp -----------------
def sigmoid_f32(x, out):
    """1 / (1 + exp(-x)) = 2**64 / D for x >= 0, E / D below (one rounding), D = 2**64 + E."""
    for i in each(out.size):
        v = x[i]
        e = exp_neg_up(abs(v))
        out[i] = where(v >= 0, UP, e) / (UP + e)


def silu_f32(x, out):
    """x sigmoid(x); the limits 0 and x at the infinities."""
    for i in each(out.size):
        v = x[i]
        e = exp_neg_up(abs(v))
        d = UP + e
        r = where(v >= 0, v * (UP / d), v * e / d)  # (x 2**64 would overflow; x E rounds tiny results once)
        out[i] = where(v == -np.inf, F(-0.0), r)


def silu_backward_f32(x, g, out):
    """``g`` times silu'(x) = s (1 + x (1 - s)), s = sigmoid(x): w (1 + x E / D) for x >= 0, E (1 + x w) / D below,
    w = 2**64 / D (NaN at the infinities, as PyTorch's gradient)."""
    for i in each(out.size):
        v = x[i]
        e = exp_neg_up(abs(v))
        d = UP + e
        w = UP / d
        s = where(v >= 0, w * fma(v, e / d, F(1)), e * fma(v, w, F(1)) / d)
        out[i] = g[i] * (s + (v - v))


def softplus_f32(x, beta, threshold, out):
    """log(1 + exp(beta x)) / beta = (max(z, 0) + log1p(exp(-|z|))) / beta, z = beta x; x where z > threshold."""
    for i in each(out.size):
        v = x[i]
        z = v * beta
        lg = log1p_up(exp_neg_up(abs(z)))
        r = where(z > 0, fma(lg, DOWN, z) / beta, lg / beta * DOWN)
        out[i] = where(z > threshold, v, r)


def softplus_backward_f32(x, g, beta, threshold, out):
    """``g`` times sigmoid(beta x) (1 where beta x > threshold)."""
    for i in each(out.size):
        z = x[i] * beta
        e = exp_neg_up(abs(z))
        s = where(z >= 0, UP, e) / (UP + e)
        out[i] = g[i] * where(z > threshold, F(1), s)


# ---- float64 loops: the C library's erf/erfc ----------------------------------------------------------------------
SQRT1_2 = 0.7071067811865476
SQRT1_2_LO = -4.833646656726457e-17  # 1/sqrt(2) - SQRT1_2
INV_SQRT_2PI64 = 1 / math.sqrt(2 * math.pi)


def erf_f64(x, out):
    for i in each(out.size):
        out[i] = erf64(x[i])


def erfc_f64(x, out):
    for i in each(out.size):
        out[i] = erfc64(x[i])


def phi64(v):
    """Phi(v) = erfc(-v / sqrt(2)) / 2, the rounding error d of w = -v / sqrt(2) corrected to first order where it
    matters (erfc(w + d) ~ erfc(w) (1 - 2 w d) for w > 0, where erfc falls fastest)."""
    w = -v * SQRT1_2
    d = product_error(-v, SQRT1_2, w) - v * SQRT1_2_LO
    r = 0.5 * erfc64(w)
    return where((w > 0.0) & (w < 40.0), r - r * 2.0 * w * d, r)  # (erfc(40) is 0 in float64)


def gelu_f64(x, out):
    for i in each(out.size):
        v = x[i]
        out[i] = where(v == -math.inf, 0.0, v * phi64(v))


def gelu_backward_f64(x, g, out):
    for i in each(out.size):
        v = x[i]
        h = 0.5 * v
        hi = h * v
        lo = where(hi < 1e300, product_error(h, v, hi), 0.0)
        density = exp64(-hi) * (1.0 - lo) * INV_SQRT_2PI64  # exp(-(hi + lo)), lo tiny
        out[i] = g[i] * (phi64(v) + v * density)  # (NaN at the infinities, as PyTorch's gradient)


# ---- tanh-approximated GELU: 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x**3) ---------
# computed in float64 (also for float32 inputs: 2u exact enough that exp(-|2u|) keeps its relative accuracy in
# the tails), exp by a vectorisable polynomial for float32 results and by the C library's for float64 ones
K0 = 2 * math.sqrt(2 / math.pi)  # 2u = x (K0 + K1 x**2)
K1 = K0 * 0.044715
DK1 = 3 * K1  # d(2u)/dx = K0 + DK1 x**2
EXP64 = (1 / 5040, 1 / 720, 1 / 120, 1 / 24, 1 / 6, 0.5, 1.0)  # (exp(r) - 1) / r to 3e-11 for |r| <= ln(2) / 2
LN2_HI64, LN2_LO64 = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # ln 2 = HI + LO, HI with 32 bits
LOG2E64 = 1 / math.log(2)
ROUND64 = 1.5 * 2.0 ** 52
ROUND64_BITS = np.int64(np.float64(ROUND64).view(np.int64))


def exp_neg64(z):
    """exp(-z) for z >= 0 to about 1e-10 (0 from z > 708, where it would be subnormal), vectorisable."""
    z = where(z > 709.0, 709.0, z)  # (NaN kept)
    s = fma64(z, -LOG2E64, ROUND64)  # (rounds z / ln2 to an integer in s's low bits)
    k = s - ROUND64
    r = fma64(k, -LN2_LO64, fma64(k, -LN2_HI64, -z))  # -z - k ln2, exact but for LO's part
    q = EXP64[0]
    for c in EXP64[1:]:
        q = fma64(q, r, c)
    p = fma64(r, q, 1.0) * from_bits64((bits64(s) - ROUND64_BITS + np.int64(1023)) << 52)
    return where(z > 708.0, 0.0, p)


def two_u(v):
    """|2u| at x = v."""
    return abs(v * (K1 * (v * v) + K0))


def gelu_tanh(v, e):
    """x sigmoid(2u) from e = exp(-|2u|): x / (1 + e) for x >= 0, x e / (1 + e) below; -0.0 at -inf."""
    r = where(v >= 0.0, v, v * e) / (1.0 + e)
    return where(v == -math.inf, -0.0, r)


def gelu_tanh_grad(v, e):
    """sigmoid(2u) + x sigmoid'(2u) d(2u)/dx, sigmoid' = e / (1 + e)**2 (NaN at the infinities, as PyTorch's)."""
    inv = 1.0 / (1.0 + e)
    s = e * inv * inv
    slope = where(s == 0.0, 0.0, v * (DK1 * (v * v) + K0) * s)  # (0, not inf * 0, for huge finite x)
    return where(v >= 0.0, inv, e * inv) + slope + (v - v)


def gelu_tanh_f32(x, out):
    for i in each(out.size):
        v = np.float64(x[i])
        out[i] = gelu_tanh(v, exp_neg64(two_u(v)))


def gelu_tanh_backward_f32(x, g, out):
    for i in each(out.size):
        v = np.float64(x[i])
        out[i] = g[i] * gelu_tanh_grad(v, exp_neg64(two_u(v)))


def gelu_tanh_f64(x, out):
    for i in each(out.size):
        v = x[i]
        out[i] = gelu_tanh(v, exp64(-two_u(v)))


def gelu_tanh_backward_f64(x, g, out):
    for i in each(out.size):
        v = x[i]
        out[i] = g[i] * gelu_tanh_grad(v, exp64(-two_u(v)))


# ---- small powers in one pass (NumPy makes one pass per product); float32 or float64 alike --------------
def square(x, out):
    for i in each(out.size):
        v = x[i]
        out[i] = v * v


def cube(x, out):
    for i in each(out.size):
        v = x[i]
        out[i] = v * v * v


def inverse(x, out):
    for i in each(out.size):
        out[i] = ONE / x[i]


def inverse_square(x, out):
    for i in each(out.size):
        v = x[i]
        out[i] = ONE / (v * v)


def root(x, out):
    for i in each(out.size):
        out[i] = np.sqrt(x[i])


def inverse_root(x, out):
    for i in each(out.size):
        out[i] = ONE / np.sqrt(x[i])


# ---- gradients of pow and log from the input ``x``, times ``g``, one pass, with the roundings of the ops' VJPs
# (``g * (x * 2)``, ``g * (x ** 2 * 3)``, ``g * (x ** -2 * -1)``, ``g / (sqrt(x) * 2)``, ``g / x``) -------------------
TWO, THREE, MINUS_ONE = F(2), F(3), F(-1)  # (float32: float64's with float64 operands, as ONE)


def square_backward(x, g, out):
    for i in each(out.size):
        out[i] = g[i] * (x[i] * TWO)


def cube_backward(x, g, out):
    for i in each(out.size):
        v = x[i]
        out[i] = g[i] * (v * v * THREE)


def inverse_backward(x, g, out):
    for i in each(out.size):
        v = x[i]
        out[i] = g[i] * (ONE / (v * v) * MINUS_ONE)


def sqrt_backward(x, g, out):
    for i in each(out.size):
        out[i] = g[i] / (np.sqrt(x[i]) * TWO)


def log_backward(x, g, out):
    for i in each(out.size):
        out[i] = g[i] / x[i]


# ---- gradients from outputs, one pass: float32 or float64, with NumPy's roundings (the same values as the op's
# three NumPy passes on CuPy) --------------------------------------------------------------------------------------
def sigmoid_backward(y, g, out):
    """``g * (1 - y) * y``."""
    for i in each(out.size):
        v = y[i]
        out[i] = (ONE - v) * v * g[i]


def tanh_backward(y, g, out):
    """``g * (1 - y * y)``, ``out`` may be ``g``."""
    for i in each(out.size):
        v = y[i]
        out[i] = g[i] * (ONE - v * v)


# ---- rows of float32 matrices (the last dim): softmax, log_softmax, layer norm and their gradients ----------------
def softmax_rows_f32(x, out):
    """exp(x - m) / sum(exp(x - m)) per row, m the row's maximum."""
    n = x.shape[1]
    for i in each(x.shape[0]):
        xi, oi = x[i], out[i]
        m = row_max(xi)
        for j in each(n):
            oi[j] = exp_f32(xi[j] - m)
        s = row_sum(oi)
        for j in each(n):
            oi[j] = oi[j] / s


def log_softmax_rows_f32(x, out):
    """z - log(sum exp(z)), z = x - m, m the row's maximum; the log as log1p(c - 1 + the sum of the terms where
    z != 0), c the number of maxima, whose terms are exactly 1 (summing 1 + tiny first would round the tiny part
    away). A NaN or an infinite maximum makes z NaN, and so the row."""
    n = x.shape[1]
    for i in each(x.shape[0]):
        xi, oi = x[i], out[i]
        m = row_max(xi)
        for j in each(n):  # the terms, in out's row until the end
            z = xi[j] - m
            oi[j] = where(z == 0, F(0), exp_f32(z))
        lse = np.float32(np.log1p(np.float64(row_sum(oi)) + (row_count(xi, m) - 1)))
        for j in each(n):
            oi[j] = (xi[j] - m) - lse


def softmax_backward_rows_f32(y, g, out):
    """y (g - sum(g y)) per row."""
    n = y.shape[1]
    for i in each(y.shape[0]):
        yi, gi, oi = y[i], g[i], out[i]
        s = row_dot(gi, yi)
        for j in each(n):
            oi[j] = yi[j] * (gi[j] - s)


def log_softmax_backward_rows_f32(y, g, out):
    """g - exp(y) sum(g) per row."""
    n = y.shape[1]
    for i in each(y.shape[0]):
        yi, gi, oi = y[i], g[i], out[i]
        s = row_sum(gi)
        for j in each(n):
            oi[j] = gi[j] - exp_f32(yi[j]) * s


def row_stats(xi, n, eps):
    """(mean, 1 / sqrt(var + eps)) of a row of ``n`` values, the variance about the mean (two passes in cache)."""
    m = row_sum(xi) / F(n)
    return m, F(1) / np.float32(np.sqrt(row_squares_about(xi, m) / F(n) + eps))


def layer_norm_rows_f32(x, w, b, eps, out):
    """(x - mean) / sqrt(var + eps) * w + b per row (w, b of the row's length, or empty for none; eps a float64)."""
    n = x.shape[1]
    for i in each(x.shape[0]):
        xi, oi = x[i], out[i]
        m, r = row_stats(xi, n, eps)
        if w.size and b.size:
            for j in each(n):
                oi[j] = (xi[j] - m) * r * w[j] + b[j]
        elif w.size:
            for j in each(n):
                oi[j] = (xi[j] - m) * r * w[j]
        elif b.size:
            for j in each(n):
                oi[j] = (xi[j] - m) * r + b[j]
        else:
            for j in each(n):
                oi[j] = (xi[j] - m) * r


def layer_norm_backward_rows_f32(x, g, w, eps, gx, gw, gb):
    """Per row, with h = (x - mean) rstd and v = g w: gx = rstd (v - mean(v) - h mean(v h)); ``gw`` and ``gb``
    (row-length accumulators, or empty) gather sum(g h) and sum(g) over the rows."""
    n = x.shape[1]
    for i in each(x.shape[0]):
        xi, gi, oi = x[i], g[i], gx[i]
        m, r = row_stats(xi, n, eps)
        if w.size:
            for j in each(n):  # v into gx's row first
                oi[j] = gi[j] * w[j]
        else:
            for j in each(n):
                oi[j] = gi[j]
        sv = row_sum(oi) / F(n)
        svh = row_dot_about(oi, xi, m) * r / F(n)
        if gw.size and gb.size:
            for j in each(n):
                h = (xi[j] - m) * r
                oi[j] = r * (oi[j] - sv - h * svh)
                gw[j] += down(gi[j] * h)
                gb[j] += down(gi[j])
        else:
            for j in each(n):
                oi[j] = r * (oi[j] - sv - (xi[j] - m) * r * svh)
            if gw.size:
                for j in each(n):
                    gw[j] += down(gi[j] * ((xi[j] - m) * r))
            if gb.size:
                for j in each(n):
                    gb[j] += down(gi[j])
