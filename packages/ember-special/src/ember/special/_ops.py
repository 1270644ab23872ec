"""The op blocks of ember.special: one block per function, with its NumPy/CuPy implementation and
its VJP (written in ember ops, so that second-order gradients work) where PyTorch has one.

Engines: SciPy (``scipy.special``) and cupyx where they agree with PyTorch, numba loops (``_numba``) where SciPy is
slow or differs, and ember's CuPy kernels (``_cuda``) where cupyx has no function or a wrong one. A numba loop serves
large inputs once ``ember._jit`` has compiled it in the background; until then, and for small inputs, its op takes a
JIT-free path of the same accuracy (SciPy's float64 functions rounded once, or the same code run by NumPy).
"""
import math

import numpy as np

import ember
from ember import _loops
from ember._registry import TORCH_NAME
from ember._tensor import Tensor

from ._common import IGAMMA_A_MAX, blocks, cuda_kernel, grad_of, lib, loop, public, special_op, tensor_only_inplace

_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2 * math.pi)
_LOG_PI = math.log(math.pi)


def _sp(xp, name, *arrays):
    """SciPy's (or cupyx's) ``name``; on the CPU float32 goes through SciPy's float64 loops (casting in
    buffered chunks), whose results rounded once are more accurate than its float32 loops, and large
    inputs are split across threads."""
    f = getattr(lib(xp), name)
    if xp is not np:
        return f(*arrays)
    if arrays[-1].dtype == np.float32:
        return blocks(lambda *a: f(*a[:-1], out=a[-1], dtype=np.float64, casting="same_kind"), *arrays)
    return blocks(lambda *a: f(*a[:-1], out=a[-1]), *arrays)


def _edges(r, kernel, *arrays):
    """SciPy's float64 results ``r`` on the float64 ``arrays``, with the elements where an argument or the result is
    not finite (PyTorch's edge values, arguments beyond SciPy's range) from ember's scalar kernel ``kernel``, which
    the numba loop runs, here run by Python (``_scalar``)."""
    arrays = np.broadcast_arrays(*arrays)
    edge = ~np.isfinite(r)
    for a in arrays:
        edge |= ~np.isfinite(a)
    if edge.any():
        from . import _scalar
        r = np.array(r, np.float64)
        r[edge] = _scalar.evaluate(kernel, *[a[edge] for a in arrays])
    return r


def _fast(xp, name, *arrays, **options):
    """numba loop ``name`` over NumPy ``arrays`` once it is compiled (``_common.loop``: large inputs, after a
    background compilation); None before that and for CuPy arrays, where the caller takes its other path."""
    return loop(name, *arrays, **options) if xp is np else None


# ---- Airy and Bessel functions (no gradients in PyTorch) --------------------------------------
@special_op("airy_ai", half=False, differentiable=False)
def airy_ai(xp, x):
    """Airy function Ai(input)."""
    if xp is not np:
        return cuda_kernel("airy_ai", x)
    r = loop("airy_ai_loop", x)
    if r is None:  # SciPy's Ai
        w = x.astype(np.float64)
        r = _edges(lib(xp).airy(w)[0], "airy_ai", w).astype(x.dtype)
    return r


def _bessel(name, engine, doc, f32=None, **options):
    def impl(xp, x):
        r = _fast(xp, f32, x) if f32 and x.dtype == np.float32 else None
        return _sp(xp, engine, x) if r is None else r
    impl.__doc__ = doc
    impl.__name__ = name
    return special_op(name, differentiable=False, **options)(impl)


bessel_j0 = _bessel("bessel_j0", "j0", "Bessel function of the first kind of order 0.", half=False)
bessel_j1 = _bessel("bessel_j1", "j1", "Bessel function of the first kind of order 1.", half=False)
bessel_y0 = _bessel("bessel_y0", "y0", "Bessel function of the second kind of order 0.", half=False)
bessel_y1 = _bessel("bessel_y1", "y1", "Bessel function of the second kind of order 1.", half=False)
modified_bessel_i0 = _bessel("modified_bessel_i0", "i0", "Modified Bessel function of the first kind of order 0.",
                             "i0_f32", half=False)
modified_bessel_i1 = _bessel("modified_bessel_i1", "i1", "Modified Bessel function of the first kind of order 1.",
                             "i1_f32", half=False)
modified_bessel_k0 = _bessel("modified_bessel_k0", "k0", "Modified Bessel function of the second kind of order 0.",
                             half=False)
modified_bessel_k1 = _bessel("modified_bessel_k1", "k1", "Modified Bessel function of the second kind of order 1.",
                             half=False)
scaled_modified_bessel_k0 = _bessel("scaled_modified_bessel_k0", "k0e", "``exp(input) * K0(input)``.", half=False)
scaled_modified_bessel_k1 = _bessel("scaled_modified_bessel_k1", "k1e", "``exp(input) * K1(input)``.", half=False)


@special_op("spherical_bessel_j0", half=False, differentiable=False)
def spherical_bessel_j0(xp, x):
    """Spherical Bessel function of the first kind of order 0, ``sin(x) / x``."""
    if xp is not np:
        return cuda_kernel("spherical_bessel_j0", x)
    x2 = x * x  # NumPy's vectorised sin; the Taylor series where sin(x) / x would cancel
    small = 1 - x2 / 6 * (1 - x2 / 20 * (1 - x2 / 42 * (1 - x2 / 72 * (1 - x2 / 110 * (1 - x2 / 156 * (
        1 - x2 / 210))))))
    r = xp.where(xp.abs(x) < 0.5, small, xp.sin(x) / x)
    return xp.where(xp.isinf(x), x.dtype.type(0), r)


@special_op("i0", public=True)
def i0(xp, x):
    """Modified Bessel function of the first kind of order 0."""
    r = _fast(xp, "i0_f32", x) if x.dtype == np.float32 else None
    return _sp(xp, "i0", x) if r is None else r


@i0.vjp
def _(ctx, g):
    return (g * i1(ctx.args[0]),)


@special_op("i1")
def i1(xp, x):
    """Modified Bessel function of the first kind of order 1."""
    r = _fast(xp, "i1_f32", x) if x.dtype == np.float32 else None
    return _sp(xp, "i1", x) if r is None else r


@i1.vjp
def _(ctx, g):
    x = ctx.args[0]
    big, safe = _not_tiny(x)
    return (g * ember.where(big, i0(safe) - ctx.out / safe, 0.5),)


def _not_tiny(x):
    """(|x| > eps, x with the tiny ones replaced by 1): the limit 1/2 of the I1 gradients at 0 (also taken
    at NaN, as PyTorch) without 0/0 in their own gradients."""
    big = x.abs() > ember.finfo(x.dtype).eps
    return big, ember.where(big, x, 1.0)


# cupyx computes i0e/i1e as exp(-|x|) * I(x), NaN once I(x) overflows: ember's own kernels on CUDA
@special_op("i0e")
def i0e(xp, x):
    """Exponentially scaled modified Bessel function ``exp(-|input|) * I0(input)``."""
    if xp is not np:
        return cuda_kernel("i0e", x)
    r = _fast(xp, "i0e_f32", x) if x.dtype == np.float32 else None
    return _sp(xp, "i0e", x) if r is None else r


@i0e.vjp
def _(ctx, g):
    x = ctx.args[0]
    return (g * (i1e(x) - x.sgn() * ctx.out),)


@special_op("i1e")
def i1e(xp, x):
    """Exponentially scaled modified Bessel function ``exp(-|input|) * I1(input)``."""
    if xp is not np:
        return cuda_kernel("i1e", x)
    r = _fast(xp, "i1e_f32", x) if x.dtype == np.float32 else None
    return _sp(xp, "i1e", x) if r is None else r


@i1e.vjp
def _(ctx, g):
    x = ctx.args[0]
    big, safe = _not_tiny(x)
    return (g * ember.where(big, i0e(safe) - ctx.out * (x.sgn() + safe.reciprocal()), 0.5),)


# ---- orthogonal polynomials (no gradients in PyTorch) -----------------------------------------
def _polynomial(name, doc):
    family = name.replace("_polynomial", "")

    def impl(xp, x, n):
        if xp is not np:
            return cuda_kernel(family, x, n)
        n = n.astype(x.dtype, copy=False)
        exact = x.dtype == np.float64  # float32: the recurrence in double is exact once rounded; float64: double-double
        r = loop(family + ("_loop" if exact else "_f32_loop"), x, n)
        if r is None:  # the same functions with NumPy (bit for bit)
            from . import _poly
            x64, n64 = np.broadcast_arrays(x.astype(np.float64), n.astype(np.float64))
            r = _poly.evaluate(family, x64, n64, exact).astype(x.dtype)
        return r
    impl.__doc__ = doc
    impl.__name__ = name
    return special_op(name, half=False, differentiable=False, scalar_first=True)(impl)


chebyshev_polynomial_t = _polynomial("chebyshev_polynomial_t", "Chebyshev polynomial of the first kind T_n.")
chebyshev_polynomial_u = _polynomial("chebyshev_polynomial_u", "Chebyshev polynomial of the second kind U_n.")
chebyshev_polynomial_v = _polynomial("chebyshev_polynomial_v", "Chebyshev polynomial of the third kind V_n.")
chebyshev_polynomial_w = _polynomial("chebyshev_polynomial_w", "Chebyshev polynomial of the fourth kind W_n.")
shifted_chebyshev_polynomial_t = _polynomial("shifted_chebyshev_polynomial_t", "T_n(2 * input - 1).")
shifted_chebyshev_polynomial_u = _polynomial("shifted_chebyshev_polynomial_u", "U_n(2 * input - 1).")
shifted_chebyshev_polynomial_v = _polynomial("shifted_chebyshev_polynomial_v", "V_n(2 * input - 1).")
shifted_chebyshev_polynomial_w = _polynomial("shifted_chebyshev_polynomial_w", "W_n(2 * input - 1).")
hermite_polynomial_h = _polynomial("hermite_polynomial_h", "Physicists' Hermite polynomial H_n.")
hermite_polynomial_he = _polynomial("hermite_polynomial_he", "Probabilists' Hermite polynomial He_n.")
laguerre_polynomial_l = _polynomial("laguerre_polynomial_l", "Laguerre polynomial L_n.")
legendre_polynomial_p = _polynomial("legendre_polynomial_p", "Legendre polynomial P_n.")


# ---- gamma family -----------------------------------------------------------------------------
def _digamma_edges(xp, x, r):
    """PyTorch's values at the poles: -inf at +0, +inf at -0, NaN at negative integers."""
    r = xp.where(x == 0, xp.copysign(np.inf, -x), r)
    return xp.where((x < 0) & (x == xp.floor(x)), np.nan, r)


@special_op("digamma", public=True)
def digamma(xp, x):
    """Logarithmic derivative of the gamma function."""
    r = _fast(xp, "digamma_f32" if x.dtype == np.float32 else "digamma_loop", x)
    return _digamma_edges(xp, x, _sp(xp, "digamma", x)) if r is None else r


@digamma.vjp
def _(ctx, g):
    return (g * polygamma(1, ctx.args[0]),)


@special_op("polygamma", public=True, inplace=False, method=False)
def polygamma_op(xp, x, *, n):
    """``n``-th derivative of the digamma function."""
    if x.dtype == np.float32 and n < 2:
        r = _fast(xp, ("digamma_f32", "trigamma_f32")[n], x)
    else:
        r = _fast(xp, "polygamma_loop", np.asarray(n, x.dtype), x)
    if r is not None:
        return r
    if n == 0:
        return digamma.impl(xp, x)
    if xp is not np:
        return _sp(xp, "polygamma", n, x).astype(x.dtype)
    # (-1)^(n+1) n! zeta(n + 1, x), as SciPy's polygamma (a Python function: no out=), in float64
    w = x.astype(np.float64)
    r = (-1) ** (n + 1) * lib(xp).gamma(n + 1.0) * _zeta64(n + 1.0, w)
    return _edges(r, "polygamma", np.float64(n), w).astype(x.dtype)


@polygamma_op.vjp
def _(ctx, g):
    return (g * polygamma(ctx.kwargs["n"] + 1, ctx.args[0]),)


def _order(n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return int(n)


_polygamma = polygamma_op.fn  # the registry's function, called as _polygamma(input, n=n)


def polygamma(n, input, *, out=None):
    """``n``-th derivative of the digamma function."""
    return _polygamma(input, n=_order(n), out=out)


public(polygamma_op, polygamma, method=lambda self, n: _polygamma(self, n=_order(n)),
       inplace=lambda self, n: polygamma_op.inplace_fn(self, n=_order(n)))


@special_op("lgamma", public=True)
def lgamma(xp, x):
    """Natural logarithm of the absolute value of the gamma function (inf at -inf, as PyTorch)."""
    r = _fast(xp, "lgamma_loop" if x.dtype == np.float64 else "lgamma_f32", x)
    if r is not None:
        return r
    if xp is np and x.dtype == np.float64:  # the C library's lgamma, as PyTorch's and the loop's (SciPy's: less exact)
        return _c_lgamma(x)
    return xp.where(x == -np.inf, x.dtype.type(np.inf), _sp(xp, "gammaln", x))


_C_LGAMMA = []


def _c_lgamma(x):
    """The C library's lgamma of a float64 array, one call per element (ctypes): the JIT-free path of the loop
    (numba calls the same function). SciPy's where no C library is found."""
    if not _C_LGAMMA:
        import ctypes
        try:
            f = ctypes.CDLL(None).lgamma
        except (OSError, TypeError, AttributeError):  # (Windows has no process-wide symbol lookup)
            f = None
        else:
            f.restype, f.argtypes = ctypes.c_double, [ctypes.c_double]
        _C_LGAMMA.append(np.frompyfunc(f, 1, 1) if f else None)
    f = _C_LGAMMA[0]
    if f is None:
        return np.where(x == -np.inf, np.inf, _sp(np, "gammaln", x))
    return np.asarray(f(x), np.float64)


@lgamma.vjp
def _(ctx, g):
    return (g * digamma(ctx.args[0]),)


@special_op("mvlgamma", public=True, inplace=False, method=False)
def mvlgamma_op(xp, x, *, p):
    """Multivariate log-gamma function of dimension ``p``."""
    r = _fast(xp, "mvlgamma_f32", x, scalars=(p,)) if x.dtype == np.float32 else None
    if r is not None:
        return r
    w = x.astype(np.float64) if xp is np else x  # (float32 in float64, rounded once)
    j = xp.arange(p, dtype=w.dtype) / 2
    r = _sp(xp, "gammaln", w[..., None] - j).sum(-1) + p * (p - 1) / 4 * _LOG_PI
    return xp.where(w == -np.inf, np.inf, r).astype(x.dtype)  # (SciPy's gammaln is -inf there, PyTorch's inf)


@mvlgamma_op.vjp
def _(ctx, g):
    x, p = ctx.args[0], ctx.kwargs["p"]
    return (g * sum(digamma(x - j / 2) for j in range(p)),)


def _dimension(p):
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
        raise TypeError(f"mvlgamma(): argument 'p' (position 2) must be int, not {type(p).__name__}")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    return int(p)


_mvlgamma = mvlgamma_op.fn


def mvlgamma(input, p, *, out=None):
    """Multivariate log-gamma function of dimension ``p``."""
    if isinstance(input, Tensor) and input.dtype == ember.bool:
        raise RuntimeError("The input tensor may not be a boolean tensor.")
    return _mvlgamma(input, p=_dimension(p), out=out)


public(mvlgamma_op, mvlgamma, method=lambda self, p: mvlgamma(self, p),
       inplace=lambda self, p: mvlgamma_op.inplace_fn(self, p=_dimension(p)))


def _incomplete_gamma(xp, a, x, engine):
    """The regularized incomplete gamma (float32 by ember's numba kernels where a is not too large, else SciPy's)
    with PyTorch's edges, by precedence: NaN for a negative argument; for a = 0, the limit at x > 0 and NaN
    otherwise; P = 0 at x = 0 (whatever a); P = 1 at x = inf for a finite or NaN; P = 0 for a = inf unless x is
    infinite too (even for x NaN)."""
    lower = engine == "gammainc"
    zero, one = (0.0, 1.0) if lower else (1.0, 0.0)  # P's values and the matching Q's
    r = None
    if a.dtype == np.float32 and not (a > IGAMMA_A_MAX).any():
        r = _fast(xp, engine + "_f32", a, x)
    if r is None:
        r = _sp(xp, engine, a, x)
    r = xp.where(xp.isinf(a) & ~xp.isinf(x), zero, r)
    r = xp.where((x == np.inf) & ~xp.isinf(a), one, r)  # (SciPy's is NaN for a NaN)
    r = xp.where(x == 0, zero, r)
    r = xp.where(a == 0, xp.where(x > 0, one, np.nan), r)
    return xp.where((x < 0) | (a < 0), np.nan, r).astype(a.dtype)


@special_op("igamma", public=True, ints=False, scalars=False)
def igamma(xp, a, x):
    """Regularized lower incomplete gamma function P(input, other)."""
    return _incomplete_gamma(xp, a, x, "gammainc")


def _igamma_grad(name, sign):
    def vjp(ctx, g):
        a, x = ctx.args[:2]
        if grad_of(ctx, 0):
            raise NotImplementedError(f"the derivative for '{name}: input' is not implemented.")
        return None, sign * g * ((a - 1) * x.log() - x - lgamma(a)).exp()
    return vjp


igamma.vjp(_igamma_grad("igamma", 1))
tensor_only_inplace(igamma)


@special_op("igammac", public=True, ints=False, scalars=False)
def igammac(xp, a, x):
    """Regularized upper incomplete gamma function Q(input, other)."""
    return _incomplete_gamma(xp, a, x, "gammaincc")


igammac.vjp(_igamma_grad("igammac", -1))
tensor_only_inplace(igammac)


@special_op("zeta", scalar_first=True)
def zeta(xp, x, q):
    """Hurwitz zeta function ``sum((k + other) ** -input for k >= 0)``."""
    r = _fast(xp, "zeta_loop", x, q)
    if r is not None:
        return r
    if xp is not np:
        return _sp(xp, "zeta", x, q)
    dtype, x, q = q.dtype, x.astype(np.float64), q.astype(np.float64)
    return _edges(_zeta64(x, q), "zeta", x, q).astype(dtype)


def _zeta64(x, q):
    """SciPy's Hurwitz zeta of float64 arguments (a Python function: no dtype=)."""
    return _sp(np, "zeta", x, q)


@zeta.vjp
def _(ctx, g):
    x, q = ctx.args[:2]
    if grad_of(ctx, 0):
        raise NotImplementedError("the derivative for 'zeta' is not implemented.")
    return None, g * -x * zeta(x + 1, q)



# ---- error function family --------------------------------------------------------------------
@special_op("erf", public=True)
def erf(xp, x):
    """Error function (ember-core's loops: float32 ones of its own, the C library's erf for float64)."""
    return _loops.erf(xp, x)


@erf.vjp
def _(ctx, g):
    x = ctx.args[0]
    return (g * (2 / _SQRT_PI) * (-(x * x)).exp(),)


@special_op("erfc", public=True)
def erfc(xp, x):
    """Complementary error function ``1 - erf(input)`` (ember-core's loops, as ``erf``)."""
    return _loops.erfc(xp, x)


@erfc.vjp
def _(ctx, g):
    x = ctx.args[0]
    return (g * (-2 / _SQRT_PI) * (-(x * x)).exp(),)


@special_op("erfcx", half=False)
def erfcx(xp, x):
    """Scaled complementary error function ``exp(input ** 2) * erfc(input)``."""
    r = _fast(xp, "erfcx_f32", x) if x.dtype == np.float32 else None
    return _sp(xp, "erfcx", x) if r is None else r


@erfcx.vjp
def _(ctx, g):
    return (g * (2 * ctx.args[0] * ctx.out - 2 / _SQRT_PI),)


@special_op("erfinv", public=True)
def erfinv(xp, x):
    """Inverse error function (±inf at ±1, NaN outside [-1, 1])."""
    r = _fast(xp, "erfinv_f32", x) if x.dtype == np.float32 else None
    return _sp(xp, "erfinv", x) if r is None else r


@erfinv.vjp
def _(ctx, g):
    return (g * (_SQRT_PI / 2) * (ctx.out * ctx.out).exp(),)


@special_op("ndtr")
def ndtr(xp, x):
    """Standard normal cumulative distribution function."""
    return _loops.ndtr(xp, x) if xp is np and x.dtype == np.float32 else _sp(xp, "ndtr", x)


@ndtr.vjp
def _(ctx, g):
    x = ctx.args[0]
    return (g * (-0.5 * x * x).exp() / _SQRT_2PI,)


@special_op("log_ndtr", half=False)
def log_ndtr(xp, x):
    """Logarithm of the standard normal cumulative distribution function."""
    r = _fast(xp, "log_ndtr_f32", x) if x.dtype == np.float32 else None
    return _sp(xp, "log_ndtr", x) if r is None else r


@log_ndtr.vjp
def _(ctx, g):
    x = ctx.args[0]
    return (g / _SQRT_2PI * (-(ctx.out + 0.5 * x * x)).exp(),)


@special_op("ndtri", half=False)
def ndtri(xp, x):
    """Inverse of ``ndtr`` (±inf at 1 and 0, NaN outside [0, 1])."""
    return _sp(xp, "ndtri", x)


@ndtri.vjp
def _(ctx, g):
    return (g * _SQRT_2PI * (0.5 * ctx.out * ctx.out).exp(),)


# ---- logarithms, entropy, logit, sinc ---------------------------------------------------------
@special_op("entr")
def entr(xp, x):
    """Elementwise entropy ``-input * log(input)`` (0 at 0, -inf below)."""
    r = _fast(xp, "entr_f32", x) if x.dtype == np.float32 else None
    return _sp(xp, "entr", x) if r is None else r


@entr.vjp
def _(ctx, g):
    return (g * -(1 + ctx.args[0].log()),)


def _xlog(xp, x, logy, y):
    """``x * logy`` with 0 where x is 0 (unless y is NaN), as PyTorch's xlogy/xlog1py."""
    return xp.where((x == 0) & ~xp.isnan(y), x.dtype.type(0), x * logy)


@special_op("xlogy", public=True, scalar_first=True)
def xlogy(xp, x, y):
    """``input * log(other)``, 0 where ``input`` is 0 and ``other`` is not NaN."""
    return _xlog(xp, x, xp.log(y), y)


def _xlog_vjp(op, pole):
    """VJP of ``op`` = ``x * log(y - pole)``: no gradient for x where x is 0 and y is at or below the pole."""
    def vjp(ctx, g):
        x, y = ctx.args[:2]
        gx = gy = None
        if isinstance(x, Tensor):
            gx = op(g, y)
            if isinstance(y, Tensor):
                gx = gx.masked_fill((x == 0) & (y <= pole), 0)
            elif y <= pole:
                gx = gx.masked_fill(x == 0, 0)
        if isinstance(y, Tensor):
            gy = g * x / ((y - pole) if pole else y)
        return gx, gy
    return vjp


xlogy.vjp(_xlog_vjp(xlogy, 0))


@special_op("xlog1py", scalar_first=True)
def xlog1py(xp, x, y):
    """``input * log1p(other)``, 0 where ``input`` is 0 and ``other`` is not NaN."""
    return _xlog(xp, x, xp.log1p(y), y)


xlog1py.vjp(_xlog_vjp(xlog1py, -1))



@special_op("logit", public=True, method=False, inplace=False)
def logit_op(xp, x, *, eps=None):
    """Log-odds ``log(input / (1 - input))``, ``input`` first clamped to [eps, 1 - eps] if given."""
    if eps is not None and eps >= 0:  # a negative eps means none, as in PyTorch
        x = xp.clip(x, x.dtype.type(eps), x.dtype.type(1 - eps))
    r = _fast(xp, "logit_f32", x) if x.dtype == np.float32 else None
    if r is not None:
        return r
    w = x.astype(np.float64) if xp is np else x  # (float32 in float64, rounded once)
    # near 1/2 (where the result is near 0) log1p of an exactly computed (2x - 1) / (1 - x) avoids cancelling
    mid = xp.abs(w - 0.5) < 0.25
    return xp.where(mid, xp.log1p((2 * w - 1) / (1 - w)), xp.log(w) - xp.log1p(-w)).astype(x.dtype, copy=False)


@logit_op.vjp
def _(ctx, g):
    x, eps = ctx.args[0], ctx.kwargs.get("eps")
    d = (x * (1 - x)).reciprocal()
    if eps is None or eps < 0:  # a negative eps means none, as in PyTorch
        return (g * ember.where((x < 0) | (x > 1), math.nan, d),)
    return (g * ember.where((x < eps) | (x > 1 - eps), 0.0, d),)


_logit = logit_op.fn


def logit(input, eps=None, *, out=None):
    """Log-odds ``log(input / (1 - input))``, ``input`` first clamped to [eps, 1 - eps] if given."""
    if eps is not None and eps >= 0 and isinstance(input, Tensor) and input.dtype in (ember.float16, ember.bfloat16):
        # PyTorch clamps half inputs in their own dtype, i.e. with the bounds rounded to it (1 - 1e-6 -> 1)
        return _logit(input.clamp(eps, 1 - eps), out=out)
    return _logit(input, eps=None if eps is None else float(eps), out=out)


def logit_(input, eps=None):
    """In-place ``logit``: ``input`` becomes its log-odds (``torch.logit_``, ``Tensor.logit_``)."""
    if input.dtype in (ember.float16, ember.bfloat16):
        return input.copy_(logit(input, eps))
    return logit_op.inplace_fn(input, eps=None if eps is None else float(eps))


logit_.__module__ = "ember"
public(logit_op, logit, method=lambda self, eps=None: logit(self, eps), inplace=logit_)


@special_op("sinc", public=True)
def sinc(xp, x):
    """Normalized sinc ``sin(pi * input) / (pi * input)`` (1 at 0)."""
    r = _fast(xp, "sinc_f32", x) if x.dtype == np.float32 else None
    if r is not None:
        return r
    w = x.astype(np.float64)  # float32 in float64, rounded once
    n = xp.rint(w)
    s = xp.sin(math.pi * (w - n)) * (1 - 2 * xp.fmod(xp.abs(n), 2))  # sin(pi x), argument reduced exactly
    return xp.where(w == 0, 1.0, s / xp.where(w == 0, 1.0, math.pi * w)).astype(x.dtype)


@sinc.vjp
def _(ctx, g):
    x = ctx.args[0]
    px = math.pi * x
    d = (px * px.cos() - px.sin()) / (px * x)
    return (g * ember.where(x == 0, 0.0, d),)


def special_round(input, *, decimals=0, out=None):
    """ember-core's ``round``, refusing integer and bool inputs as torch.special.round does."""
    if isinstance(input, Tensor) and not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"round_vml_cpu\" not implemented for '{TORCH_NAME[input.dtype]}'")
    return ember.round(input, decimals=decimals, out=out)
