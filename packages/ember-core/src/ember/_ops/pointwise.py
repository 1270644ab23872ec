"""Unary elementwise math: exponentials and logarithms, trigonometry, rounding, signs and
predicates, activations, and the complex-number helpers (real/imag views, polar, conjugation)."""
import functools
import math

import numpy as np

from .. import _backend, _loops, _parallel
from .. import _dtype as D
from .. import _promotion as P
from .._registry import TORCH_NAME, compute_dtype, elementwise, op
from .._tensor import Tensor
from .arithmetic import abs as abs_op
from .arithmetic import into_grad, neg, quiet, refuse_complex_abs_, saves, wanted
from .comparison import NO_COMPLEX_CLAMP, clamp, where

_HALF = (D.float16, D.bfloat16)
_PLAIN = (np.dtype(np.float32), np.dtype(np.float64))


def alias(name, target, **options):
    """Register ``name`` as another spelling of the elementwise op ``target`` (same rule and VJP)."""
    @functools.wraps(target.impl)
    def impl(*args, **kwargs):
        return target.impl(*args, **kwargs)
    impl.__doc__ = f"Alias of ``{target.name}``."
    o = elementwise(name, rule=target.rule, differentiable=target.differentiable, scalars=target.scalars,
                    scalar_first=target.scalar_first, inplace=target.inplace, ufunc=target.ufunc, **options)(impl)
    if target.vjp_fn is not None:
        o.vjp(target.vjp_fn)
    return o


def chain(g, d):
    """``g`` times the derivative ``d`` by PyTorch's convention for complex numbers (``g * conj(d)``)."""
    return g * (d.conj() if isinstance(d, Tensor) and d.is_complex() else d)


def _plain_pair(g, y):
    """Whether a VJP may compute ``g`` with ``y`` on NumPy/CuPy temporaries it owns: no graph is built (neither
    requires grad) and both are float32 or float64 of one dtype (halves must round as ember's ops do)."""
    return (not g._rg and not y._rg and type(g) is Tensor and g._data.dtype is y._data.dtype
            and g._data.dtype in _PLAIN and y._data.ndim > 0)  # (0-d arrays compute to NumPy scalars)


def not_implemented(kernel, p):
    return NotImplementedError(f"\"{kernel}\" not implemented for '{TORCH_NAME[p]}'")


def refuse_complex(what, *operands):
    """PyTorch's error for complex operands of an op that has no complex kernel, where NumPy would compute in
    complex or order complex numbers (by real part, then imaginary) and return values PyTorch never gives.
    ``what``: the kernel's name (NotImplementedError naming it and the dtype) or the exception itself. Operands that
    are not arrays pass."""
    for v in operands:
        if getattr(v, "dtype", None) is not None and v.dtype.kind == "c":
            raise not_implemented(what, D.FROM_NP[v.dtype]) if isinstance(what, str) else what


def floating_rule(kernel, complex_ok=False):
    """Floating inputs only (optionally complex too), with PyTorch's error naming its kernel."""
    def rule(p, dtypes, **kwargs):
        if p.category < 2 or (p.is_complex and not complex_ok):
            raise not_implemented(kernel, p)
        return compute_dtype(p), p
    return rule


def real_float_rule(name):
    """Integers become the default float; complex inputs are refused (deg2rad and friends)."""
    def rule(p, dtypes, **kwargs):
        if p.is_complex:
            raise RuntimeError(f"{name} is not supported for complex tensors.")
        if p.category < 2:
            p = D.get_default_dtype()
        return compute_dtype(p), p
    return rule


# ---- exponentials and logarithms ---------------------------------------------------------------
@elementwise("exp", rule="float", ufunc=np.exp)
@quiet
def exp(xp, a):
    """``e ** input``."""
    return xp.exp(a)


@exp.vjp
@saves(args=False)
def _(ctx, g):
    y = ctx.out
    r = into_grad(ctx, g, y)
    return (chain(g, y) if r is None else r,)


@elementwise("exp2", rule="float", ufunc=np.exp2)
@quiet
def exp2(xp, a):
    """``2 ** input``."""
    return xp.exp2(a)


@exp2.vjp
@saves(args=False)
def _(ctx, g):
    return (chain(g, ctx.out * math.log(2)),)


@elementwise("expm1", rule="float", ufunc=np.expm1)
@quiet
def expm1(xp, a):
    """``exp(input) - 1``, accurate near 0."""
    return xp.expm1(a)


@expm1.vjp
@saves(args=False)
def _(ctx, g):
    return (chain(g, ctx.out + 1),)


@elementwise("log", rule="float", ufunc=np.log)
@quiet
def log(xp, a):
    """Natural logarithm (``-inf`` at 0, NaN below)."""
    return xp.log(a)


@log.vjp
@saves(out=False)
def _(ctx, g):
    x = ctx.args[0]
    xd, gd = x._data, g._data
    if (not (x._rg or g._rg) and type(xd) is np.ndarray and type(gd) is np.ndarray and xd.dtype == gd.dtype
            and xd.dtype in (np.float32, np.float64) and xd.shape == gd.shape and xd.size >= _loops.LOOP_MIN):
        return (Tensor._wrap(_loops.derivative_times("log_backward", xd, gd)),)  # (the same division, by ember's loop)
    return (g / (x.conj() if x.is_complex() else x),)  # (one division: PyTorch's roundings, one pass)


@elementwise("log2", rule="float", ufunc=np.log2)
@quiet
def log2(xp, a):
    """Base-2 logarithm."""
    return xp.log2(a)


@log2.vjp
@saves(out=False)
def _(ctx, g):
    return (chain(g, (ctx.args[0] * math.log(2)).reciprocal()),)


@elementwise("log10", rule="float", ufunc=np.log10)
@quiet
def log10(xp, a):
    """Base-10 logarithm."""
    return xp.log10(a)


@log10.vjp
@saves(out=False)
def _(ctx, g):
    return (chain(g, (ctx.args[0] * math.log(10)).reciprocal()),)


@elementwise("log1p", rule="float", ufunc=np.log1p)
@quiet
def log1p(xp, a):
    """``log(1 + input)``, accurate near 0."""
    return xp.log1p(a)


@log1p.vjp
@saves(out=False)
def _(ctx, g):
    return (chain(g, (ctx.args[0] + 1).reciprocal()),)


# ---- powers and roots --------------------------------------------------------------------------
@elementwise("sqrt", rule="float", ufunc=np.sqrt)
@quiet
def sqrt(xp, a):
    """Square root (NaN below 0 for real inputs)."""
    return xp.sqrt(a)


@sqrt.vjp
@saves(args=False)
def _(ctx, g):
    return (chain(g, (ctx.out * 2).reciprocal()),)


@elementwise("rsqrt", rule="float")
@quiet
def rsqrt(xp, a):
    """``1 / sqrt(input)``."""
    return 1 / xp.sqrt(a)


@rsqrt.vjp
@saves(args=False)
def _(ctx, g):
    y = ctx.out
    return (chain(g, y * y * y * -0.5),)


@elementwise("reciprocal", rule="float")
@quiet
def reciprocal(xp, a):
    """``1 / input``."""
    return 1 / a


@reciprocal.vjp
@saves(args=False)
def _(ctx, g):
    y = ctx.out
    return (chain(g, -(y * y)),)


def _square_rule(p, dtypes, **kwargs):
    p = D.int64 if p is D.bool else p  # PyTorch squares bool as pow(input, 2), an int64 result
    return compute_dtype(p), p


@elementwise("square", rule=_square_rule)
@quiet
def square(xp, a):
    """``input * input``."""
    return xp.multiply(a, a)


@square.vjp
@saves(out=False)
def _(ctx, g):
    return (chain(g, ctx.args[0] * 2),)


# ---- trigonometric and hyperbolic --------------------------------------------------------------
@elementwise("sin", rule="float", ufunc=np.sin)
@quiet
def sin(xp, a):
    """Sine (radians)."""
    return xp.sin(a)


@sin.vjp
@saves(out=False)
def _(ctx, g):
    return (chain(g, ctx.args[0].cos()),)


@elementwise("cos", rule="float", ufunc=np.cos)
@quiet
def cos(xp, a):
    """Cosine (radians)."""
    return xp.cos(a)


@cos.vjp
@saves(out=False)
def _(ctx, g):
    return (chain(g, -ctx.args[0].sin()),)


@elementwise("tan", rule="float", ufunc=np.tan)
@quiet
def tan(xp, a):
    """Tangent (radians)."""
    return xp.tan(a)


@tan.vjp
@saves(args=False)
def _(ctx, g):
    y = ctx.out
    return (chain(g, y * y + 1),)


@elementwise("asin", rule="float", ufunc=np.arcsin)
@quiet
def asin(xp, a):
    """Inverse sine; NaN outside [-1, 1] for real inputs."""
    return xp.arcsin(a)


@asin.vjp
@saves(out=False)
def _(ctx, g):
    x = ctx.args[0]
    return (chain(g, (1 - x * x).rsqrt()),)


@elementwise("acos", rule="float", ufunc=np.arccos)
@quiet
def acos(xp, a):
    """Inverse cosine; NaN outside [-1, 1] for real inputs."""
    return xp.arccos(a)


@acos.vjp
@saves(out=False)
def _(ctx, g):
    x = ctx.args[0]
    return (chain(g, -(1 - x * x).rsqrt()),)


@elementwise("atan", rule="float", ufunc=np.arctan)
@quiet
def atan(xp, a):
    """Inverse tangent."""
    return xp.arctan(a)


@atan.vjp
@saves(out=False)
def _(ctx, g):
    x = ctx.args[0]
    return (chain(g, (x * x + 1).reciprocal()),)


@elementwise("sinh", rule="float", ufunc=np.sinh)
@quiet
def sinh(xp, a):
    """Hyperbolic sine."""
    return xp.sinh(a)


@sinh.vjp
@saves(out=False)
def _(ctx, g):
    return (chain(g, ctx.args[0].cosh()),)


@elementwise("cosh", rule="float", ufunc=np.cosh)
@quiet
def cosh(xp, a):
    """Hyperbolic cosine."""
    return xp.cosh(a)


@cosh.vjp
@saves(out=False)
def _(ctx, g):
    return (chain(g, ctx.args[0].sinh()),)


@elementwise("tanh", rule="float", ufunc=np.tanh)
@quiet
def tanh(xp, a):
    """Hyperbolic tangent."""
    return xp.tanh(a)


@tanh.vjp
@saves(args=False)
def _(ctx, g):
    y = ctx.out
    if _plain_pair(g, y):  # on the arrays
        d = g._data
        if (getattr(ctx, "grad_donated", False) and d.shape == y._data.shape and d.flags.c_contiguous
                and y._data.flags.c_contiguous and type(d) is np.ndarray):  # the engine's own gradient: in place
            _tanh_grad_into(d, y._data)  # (no new array to fill: a third less traffic)
            return (g,)
        return (Tensor._wrap(_tanh_backward.impl(_backend.xp_of(y._data), d, y._data)),)
    if y.is_complex():
        return (chain(g, 1 - y * y),)
    return (_tanh_backward(g, y),)  # one node when differentiated again


@elementwise("_tanh_backward", scalars=False, method=False, function=False, inplace=False)
@quiet
def _tanh_backward(xp, grad, output):
    """tanh's VJP ``grad * (1 - output**2)`` from tanh's output, as one op (a double backward then records one
    node, whose own VJP computes each gradient in few passes)."""
    if not output.ndim:  # (0-d arrays compute to NumPy scalars)
        return grad * (1 - output * output)
    return _derivative_times(xp, _tanh_grad, output, grad)


def _tanh_grad(xp, out, y, g=None):
    """``(1 - y*y) * g`` (or ``1 - y*y``) into ``out``."""
    xp.multiply(y, y, out=out)
    xp.subtract(1, out, out=out)
    if g is not None:
        xp.multiply(out, g, out=out)


def _tanh_grad_into(g, y):
    """``g *= 1 - y*y`` for C-contiguous NumPy arrays: ember's loop, or NumPy's passes for small ones."""
    if g.size >= _loops.LOOP_MIN:
        _loops.derivative_times("tanh_backward", y, g, out=g)
    else:
        t = np.multiply(y, y)
        np.subtract(1, t, out=t)
        np.multiply(g, t, out=g)


def _derivative_times(xp, fn, output, grad):
    """``fn(xp, out, output, grad)``: an op's derivative from its (n-d) output, times ``grad``; one pass through
    memory (over the cores when large) when they have one shape: ember's numba loop on NumPy arrays."""
    if grad.shape == output.shape and not _single(grad):
        if xp is np and grad.dtype == output.dtype and output.size >= _loops.LOOP_MIN:
            return _loops.derivative_times(_LOOP_OF[fn], output, grad)
        return _parallel.expression(fn, output, grad)
    return _times(xp, _parallel.expression(fn, output), grad)


def _single(f):
    """Whether ``f`` is broadcast from a single value (zero strides: the gradient of a sum)."""
    return f.size and not any(f.strides)


def _times(xp, t, f):
    """``t * f``, into the temporary ``t`` when the shape allows; no pass at all for a factor broadcast from
    a single 1 (the gradient of a sum)."""
    if t.shape != np.broadcast_shapes(t.shape, f.shape):
        return t * f
    if _single(f) and f[(0,) * f.ndim] == 1:
        return t
    return _parallel.ufunc(xp.multiply, t, f, out=t)


@_tanh_backward.vjp
def _(ctx, gg):
    grad, out = ctx.args
    need = wanted(ctx)
    d_out = None
    if need[1]:
        if _plain_pair(gg, out) and _plain_pair(grad, out):
            d_out = Tensor._wrap(_folded_product(-2, out._data, gg._data, grad._data))
        else:
            d_out = gg * grad * out * -2
    return (_tanh_backward(gg, out) if need[0] else None), d_out


def _folded_product(c, a, *factors):
    """``c * a * factors...`` in one fresh array; factors broadcast from a single value (a sum's gradient, zero
    strides) join the scalar instead of costing a pass each."""
    rest = []
    for f in factors:
        if _single(f):
            c = c * f[(0,) * f.ndim]
        else:
            rest.append(f)
    xp = _backend.xp_of(a)
    t = _parallel.ufunc(xp.multiply, a, c)
    for f in rest:
        t = _parallel.ufunc(xp.multiply, t, f, out=t) if t.shape == np.broadcast_shapes(t.shape, f.shape) else t * f
    return t


@elementwise("asinh", rule="float", ufunc=np.arcsinh)
@quiet
def asinh(xp, a):
    """Inverse hyperbolic sine."""
    return xp.arcsinh(a)


@asinh.vjp
@saves(out=False)
def _(ctx, g):
    x = ctx.args[0]
    return (chain(g, (x * x + 1).rsqrt()),)


@elementwise("acosh", rule="float", ufunc=np.arccosh)
@quiet
def acosh(xp, a):
    """Inverse hyperbolic cosine; NaN below 1 for real inputs."""
    return xp.arccosh(a)


@acosh.vjp
@saves(out=False)
def _(ctx, g):
    x = ctx.args[0]  # complex inputs: the principal branch, as sqrt(x - 1) * sqrt(x + 1)
    return (chain(g, ((x - 1).rsqrt() * (x + 1).rsqrt()) if x.is_complex() else (x * x - 1).rsqrt()),)


@elementwise("atanh", rule="float", ufunc=np.arctanh)
@quiet
def atanh(xp, a):
    """Inverse hyperbolic tangent; NaN outside [-1, 1] for real inputs."""
    return xp.arctanh(a)


@atanh.vjp
@saves(out=False)
def _(ctx, g):
    x = ctx.args[0]
    return (chain(g, (1 - x * x).reciprocal()),)


arcsin, arccos, arctan = alias("arcsin", asin), alias("arccos", acos), alias("arctan", atan)
arcsinh, arccosh, arctanh = alias("arcsinh", asinh), alias("arccosh", acosh), alias("arctanh", atanh)


@elementwise("deg2rad", rule=real_float_rule("deg2rad"))
def deg2rad(xp, a):
    """Degrees to radians."""
    return a * (math.pi / 180)


@deg2rad.vjp
@saves(args=False, out=False)
def _(ctx, g):
    return (g * (math.pi / 180),)


@elementwise("rad2deg", rule=real_float_rule("rad2deg"))
def rad2deg(xp, a):
    """Radians to degrees."""
    return a * (180 / math.pi)


@rad2deg.vjp
@saves(args=False, out=False)
def _(ctx, g):
    return (g * (180 / math.pi),)


# ---- rounding ----------------------------------------------------------------------------------
def _rounding_rule(name, complex_error=None):
    """Rounding keeps the dtype (integers pass through); bool and complex inputs are refused."""
    def rule(p, dtypes, decimals=0, **kwargs):
        if p is D.bool or (p.category == 1 and decimals):
            raise not_implemented(f"{name}_vml_cpu" if not decimals else f"{name}_cpu", p)
        if p.is_complex:
            raise complex_error(p) if complex_error else not_implemented(f"{name}_vml_cpu", p)
        return compute_dtype(p), p
    return rule


def _no_complex(name):
    return lambda p: NotImplementedError(f"{name} is not supported for complex inputs")


def zeros_of(g):
    """A zero gradient shaped like ``g`` (exact zeros, even where ``g`` is NaN or infinite)."""
    return g.new_zeros(g.shape)


@saves(args=False, out=False)
def _zero_vjp(ctx, g):
    """Piecewise-constant ops: PyTorch gives zero gradients."""
    return (zeros_of(g),)


def _rounding(name, fn, doc):
    """Register a rounding op: ``fn`` on floats, a copy of integer inputs."""
    def impl(xp, a):
        return getattr(xp, fn)(a) if a.dtype.kind == "f" else a.copy()
    impl.__doc__ = doc
    o = elementwise(name, rule=_rounding_rule(name, _no_complex(name)))(impl)
    o.vjp(_zero_vjp)
    return o


ceil = _rounding("ceil", "ceil", "Smallest integer value not below each element.")
floor = _rounding("floor", "floor", "Largest integer value not above each element.")
trunc = _rounding("trunc", "trunc", "Integer part of each element (rounded toward zero).")
fix = alias("fix", trunc)


@elementwise("round", rule=_rounding_rule("round"))
@quiet
def round(xp, a, *, decimals=0):
    """Round half to even, to ``decimals`` decimal places (negative: to tens, hundreds...)."""
    if a.dtype.kind != "f":
        return a.copy()
    if decimals == 0:
        return xp.rint(a)
    scale = a.dtype.type(10.0 ** abs(decimals))
    return xp.rint(a * scale) / scale if decimals > 0 else xp.rint(a / scale) * scale


round.vjp(_zero_vjp)


@elementwise("frac", rule=floating_rule("frac_cpu"))
@quiet
def frac(xp, a):
    """Fractional part: ``input - trunc(input)`` (keeps the sign)."""
    return a - xp.trunc(a)


@frac.vjp
@saves(args=False, out=False)
def _(ctx, g):
    return (g,)


# ---- signs and identity ------------------------------------------------------------------------
@elementwise("sign")
def sign(xp, a):
    """-1, 0 or 1 by the sign of each element (0 for NaN, as PyTorch)."""
    if a.dtype.kind == "c":  # (NumPy's sign of a complex number is sgn's)
        raise NotImplementedError("Unlike NumPy, torch.sign is not intended to support complex numbers. Please use "
                                  "torch.sgn instead.")
    if a.dtype.kind == "b":
        return a.copy()
    s = xp.sign(a)
    return xp.where(xp.isnan(a), 0, s).astype(s.dtype) if a.dtype.kind == "f" else s


sign.vjp(_zero_vjp)


@elementwise("sgn")
@quiet
def sgn(xp, a):
    """``sign`` extended to complex numbers: ``input / |input|`` (0 at 0)."""
    if a.dtype.kind != "c":
        return sign.impl(xp, a)
    mag = xp.abs(a)
    return xp.where(mag == 0, 0, a / xp.where(mag == 0, 1, mag))


@sgn.vjp
def _(ctx, g):
    x = ctx.args[0]
    if not x.is_complex():
        return (zeros_of(g),)
    # only the direction varies: the part of g along the unit circle's tangent, scaled by 1 / |x|
    s, mag = ctx.out, x.abs()
    return (where(mag == 0, x.new_zeros(()), (g - s * s * g.conj()) / (mag * 2)),)


negative = alias("negative", neg)
absolute = alias("absolute", abs_op)
refuse_complex_abs_(absolute)


@op("positive", view=True)
def positive(xp, input):
    """``+input``: the tensor itself (refused for bool)."""
    if input.dtype == np.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


@positive.vjp
@saves(args=False, out=False)
def _(ctx, g):
    return (g,)


@elementwise("signbit", rule="bool", differentiable=False)
def signbit(xp, a):
    """Whether each element's sign bit is set (true for -0.0)."""
    if a.dtype.kind == "c":
        raise NotImplementedError("signbit is not implemented for complex tensors.")
    return xp.signbit(a) if a.dtype.kind != "b" else xp.zeros(a.shape, bool)


# ---- predicates --------------------------------------------------------------------------------
@elementwise("isnan", rule="bool", differentiable=False)
def isnan(xp, a):
    """Whether each element is NaN."""
    return xp.isnan(a) if a.dtype.kind in "fc" else xp.zeros(a.shape, bool)


@elementwise("isinf", rule="bool", differentiable=False)
def isinf(xp, a):
    """Whether each element is infinite (either part, for complex)."""
    return xp.isinf(a) if a.dtype.kind in "fc" else xp.zeros(a.shape, bool)


@elementwise("isfinite", rule="bool", differentiable=False)
def isfinite(xp, a):
    """Whether each element is neither infinite nor NaN."""
    return xp.isfinite(a) if a.dtype.kind in "fc" else xp.ones(a.shape, bool)


def _real_predicate(name):
    def rule(p, dtypes, **kwargs):
        if p.is_complex:
            raise RuntimeError(f"{name} does not support complex inputs.")
        return compute_dtype(p), D.bool
    return rule


@elementwise("isposinf", rule=_real_predicate("isposinf"), differentiable=False)
def isposinf(xp, a):
    """Whether each element is ``+inf``."""
    return a == np.inf if a.dtype.kind == "f" else xp.zeros(a.shape, bool)


@elementwise("isneginf", rule=_real_predicate("isneginf"), differentiable=False)
def isneginf(xp, a):
    """Whether each element is ``-inf``."""
    return a == -np.inf if a.dtype.kind == "f" else xp.zeros(a.shape, bool)


@elementwise("isreal", rule="bool", differentiable=False)
def isreal(xp, a):
    """Whether each element has a zero imaginary part (always, for real dtypes)."""
    return a.imag == 0 if a.dtype.kind == "c" else xp.ones(a.shape, bool)


@op("nan_to_num", inplace=True)
def nan_to_num(xp, input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (default: the dtype's extremes)."""
    if input.dtype.kind == "c":
        return nan_to_num.impl(xp, input.real, nan, posinf, neginf) + 1j * nan_to_num.impl(
            xp, input.imag, nan, posinf, neginf)
    d = D.from_np(input.dtype)
    if not d.is_floating_point:
        return input.copy()
    big = float(D.finfo(d).max)
    hi, lo = big if posinf is None else posinf, -big if neginf is None else neginf
    t = input.dtype.type
    r = xp.where(input != input, t(nan), input)
    return xp.where(r == np.inf, t(hi), xp.where(r == -np.inf, t(lo), r))


@nan_to_num.vjp
@saves(out=False)
def _(ctx, g):
    return (g * ctx.args[0].isfinite(),)


# ---- activations -------------------------------------------------------------------------------
def _relu_rule(p, dtypes, **kwargs):
    if p is D.bool:
        raise RuntimeError("Boolean inputs not supported for relu")
    if p.is_complex:
        raise NotImplementedError(NO_COMPLEX_CLAMP)
    return compute_dtype(p), p


@elementwise("relu", rule=_relu_rule)
def relu(xp, a):
    """``max(input, 0)``, NaN propagating."""
    zero = a.dtype.type(0)
    return _parallel.ufunc(np.maximum, a, zero) if xp is np else xp.maximum(a, zero)  # (over the cores when large)


@relu.vjp
@saves(args=False)
def _(ctx, g):
    y = ctx.out
    if _plain_pair(g, y):  # on the arrays: the gradient's bits times 1 or 0 (exactly g or +0.0, NaN or not) is
        # a select without branches (NumPy's masked selects branch per element: 10x slower on random signs)
        xp, d = _backend.xp_of(y._data), g._data
        ufunc = _parallel.ufunc if xp is np else lambda f, *a, out=None: getattr(xp, f.__name__)(*a, out=out)
        keep = ufunc(np.not_equal, y._data, d.dtype.type(0))  # (y >= 0: the clamped are zeros; NaN outputs pass
        # the gradient, as PyTorch's)
        bits = d.view(f"i{d.itemsize}")
        into = getattr(ctx, "grad_donated", False)  # the engine's own gradient: written in place
        r = ufunc(np.multiply, bits, keep, out=bits if into else None)  # (over the cores when large)
        return (g if into else Tensor._wrap(r.view(d.dtype)),)
    return (where(y <= 0, 0.0, g),)  # a select, as PyTorch's threshold_backward (NaN passes where y is NaN)


def _logistic(xp, out, a):
    """``1 / (1 + exp(-a))`` into ``out``."""
    xp.negative(a, out=out)
    xp.exp(out, out=out)
    out += 1
    xp.reciprocal(out, out=out)


@elementwise("sigmoid", rule="float")
@quiet
def sigmoid(xp, a):
    """Logistic function ``1 / (1 + exp(-input))``."""
    if type(a) is not np.ndarray or a.dtype.kind != "f" or not a.ndim:
        return 1 / (1 + xp.exp(-a))
    if a.dtype == np.float32 and a.size >= _loops.LOOP_MIN:  # one pass of ember's loop
        return _loops.float32_loop("sigmoid_f32", a)
    return _parallel.expression(_logistic, a)


@sigmoid.vjp
@saves(args=False)
def _(ctx, g):
    y = ctx.out
    if _plain_pair(g, y):  # on the arrays
        return (Tensor._wrap(_sigmoid_backward.impl(_backend.xp_of(y._data), g._data, y._data)),)
    if y.is_complex():
        return (chain(g, y * (1 - y)),)
    return (_sigmoid_backward(g, y),)  # one node when differentiated again


@elementwise("_sigmoid_backward", scalars=False, method=False, function=False, inplace=False)
@quiet
def _sigmoid_backward(xp, grad, output):
    """sigmoid's VJP ``grad * output * (1 - output)`` from sigmoid's output, as one op (see _tanh_backward)."""
    if not output.ndim:
        return grad * output * (1 - output)
    return _derivative_times(xp, _sigmoid_grad, output, grad)


def _sigmoid_grad(xp, out, y, g=None):
    """``(1 - y) * y * g`` (or ``(1 - y) * y``) into ``out``."""
    xp.subtract(1, y, out=out)
    xp.multiply(out, y, out=out)
    if g is not None:
        xp.multiply(out, g, out=out)


_LOOP_OF = {_tanh_grad: "tanh_backward", _sigmoid_grad: "sigmoid_backward"}  # the numba loops doing the same


@_sigmoid_backward.vjp
def _(ctx, gg):
    grad, out = ctx.args
    need = wanted(ctx)
    d_out = None
    if need[1]:  # gg * grad * (1 - 2 * out)
        if _plain_pair(gg, out) and _plain_pair(grad, out):
            t = out._data * -2
            t += 1
            d_out = Tensor._wrap(_folded_product(1, t, gg._data, grad._data))
        else:
            d_out = gg * grad * (1 - out * 2)
    return (_sigmoid_backward(gg, out) if need[0] else None), d_out


def _floating_array(xp, a, kernel):
    """``a`` in its computation dtype (float16/bfloat16 in float32); PyTorch's error for other dtypes."""
    d = D.from_np(a.dtype)
    if not d.is_floating_point:
        raise not_implemented(kernel, d)
    return a.astype(np.float32) if d in _HALF else a


@op("hardshrink")
def hardshrink(xp, input, lambd=0.5):
    """0 where ``|input| <= lambd``, else ``input``."""
    a = _floating_array(xp, input, "hardshrink_cpu")
    return xp.where((a >= -lambd) & (a <= lambd), a.dtype.type(0), a).astype(input.dtype, copy=False)


@hardshrink.vjp
@saves(out=False)
def _(ctx, g):
    x, lambd = ctx.args[0], ctx.kwargs.get("lambd", ctx.args[1] if len(ctx.args) > 1 else 0.5)
    return (g * ((x < -lambd) | (x > lambd)),)


def _threshold_value(input, v):
    """A threshold/value scalar converted to ``input``'s dtype (integers truncate, as PyTorch)."""
    return input.dtype.type(int(v) if input.dtype.kind in "iu" else v)


@op("threshold", method=False, inplace=True)
def threshold(xp, input, threshold, value):
    """``value`` where ``input <= threshold``, else ``input``."""
    if input.dtype == np.bool_ or input.dtype.kind == "c":
        raise not_implemented("threshold_cpu", D.from_np(input.dtype))
    a = input.astype(np.float32) if D.from_np(input.dtype) in _HALF else input
    r = xp.where(a <= _threshold_value(a, threshold), _threshold_value(a, value), a)
    return r.astype(input.dtype, copy=False)


@threshold.vjp
@saves(out=False)
def _(ctx, g):
    x, t = ctx.args[0], ctx.args[1]
    return (g * ~(x <= t), None, None)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


@quiet
def _elu(xp, input, alpha, scale, input_scale):
    a = _floating_array(xp, input, "elu_cpu")
    neg_part = alpha * xp.expm1(xp.minimum(a, 0) * input_scale)
    return (scale * xp.where(a > 0, a, neg_part)).astype(input.dtype, copy=False)


def _elu_grad(g, x, alpha, scale, input_scale):
    # the exponential of x masked to x < 0 (equal values for x <= 0): as PyTorch's, the second derivative is
    # zero at 0 and finite where the other branch is taken (x = +inf or NaN)
    inner = where(x < 0, x, 0.0) * input_scale
    return g * where(x <= 0, inner.exp() * (alpha * scale * input_scale), scale)


@op("selu", method=False, inplace=True)
def selu(xp, input):
    """Scaled exponential linear unit with the self-normalising constants."""
    return _elu(xp, input, _SELU_ALPHA, _SELU_SCALE, 1.0)


@selu.vjp
@saves(out=False)
def _(ctx, g):
    return (_elu_grad(g, ctx.args[0], _SELU_ALPHA, _SELU_SCALE, 1.0),)


@op("celu", method=False, inplace=True)
def celu(xp, input, alpha=1.0):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _elu(xp, input, alpha, 1.0, 1.0 / alpha)


@celu.vjp
@saves(out=False)
def _(ctx, g):
    alpha = ctx.kwargs.get("alpha", ctx.args[1] if len(ctx.args) > 1 else 1.0)
    return (_elu_grad(g, ctx.args[0], alpha, 1.0, 1.0 / alpha), None)


def _clamp_side(name, which):
    def impl(xp, input, bound):
        if hasattr(bound, "shape"):
            P.broadcast_shapes(input.shape, bound.shape)  # PyTorch's error for bounds that don't broadcast
        return clamp.impl(xp, input, **{which: bound})
    impl.__doc__ = f"``clamp`` with only its ``{which}`` bound."
    o = op(name, inplace=True)(impl)

    @o.vjp
    def _(ctx, g):
        x, bound = ctx.args
        if which == "min":
            return g * (x >= bound), (g * (x < bound) if isinstance(bound, Tensor) else None)
        return g * (x <= bound), (g * (x > bound) if isinstance(bound, Tensor) else None)
    return o


clamp_min, clamp_max = _clamp_side("clamp_min", "min"), _clamp_side("clamp_max", "max")


# ---- complex numbers ---------------------------------------------------------------------------
@op("conj", view=True)
def conj(xp, input):
    """Complex conjugate; a real tensor is returned as a view of itself."""
    return xp.conj(input) if input.dtype.kind == "c" else input


@conj.vjp
@saves(args=False, out=False)
def _(ctx, g):
    return (g.conj(),)


@op("conj_physical", inplace=True)
def conj_physical(xp, input):
    """Complex conjugate as a new tensor (a copy for real dtypes)."""
    return xp.conj(input) if input.dtype.kind == "c" else input.copy()


conj_physical.vjp(conj.vjp_fn)


def _identity(name, doc):
    """ember keeps no lazy conjugate/negative bits, so resolving them returns the tensor itself."""
    def impl(xp, input):
        return input
    impl.__doc__ = doc
    o = op(name, view=True)(impl)
    o.vjp(lambda ctx, g: (g,))
    return o


resolve_conj = _identity("resolve_conj", "The tensor with its conjugation applied: itself, in ember.")
resolve_neg = _identity("resolve_neg", "The tensor with its negation applied: itself, in ember.")


@op("is_conj", differentiable=False)
def is_conj(xp, input):
    """Whether the tensor carries a lazy conjugation bit: never, in ember (``conj`` materialises)."""
    return False


@op("is_neg", differentiable=False)
def is_neg(xp, input):
    """Whether the tensor carries a lazy negation bit: never, in ember."""
    return False


@op("real", view=True, method=False)
def real(xp, input):
    """The real part, as a view (the tensor itself for real dtypes)."""
    return input.real if input.dtype.kind == "c" else input


@real.vjp
def _(ctx, g):
    return (complex(g, g.new_zeros(())),) if ctx.args[0].is_complex() else (g,)


@op("imag", view=True, method=False)
def imag(xp, input):
    """The imaginary part of a complex tensor, as a view."""
    if input.dtype.kind != "c":
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return input.imag


@imag.vjp
def _(ctx, g):
    return (complex(g.new_zeros(()), g),)


def _set_part(part):
    def setter(self, value):
        getattr(self, part).copy_(value)
    return setter


# PyTorch spells these as attributes (``t.real``, ``t.imag = ...``), not methods
Tensor.real = property(real.fn, _set_part("real"))
Tensor.imag = property(imag.fn, _set_part("imag"))


@op("angle")
@quiet
def angle(xp, input):
    """Argument of each element in radians (pi for negative reals, 0 otherwise; NaN stays NaN)."""
    if input.dtype.kind == "c":
        return xp.angle(input)
    d = D.from_np(input.dtype)
    rd = d if d.is_floating_point else D.get_default_dtype()
    a = input.astype(np.float32) if d in _HALF else input
    r = xp.where(a < 0, math.pi, xp.where(a != a, a, 0))
    return r.astype(rd.np)


@angle.vjp
def _(ctx, g):
    x = ctx.args[0]
    if not x.is_complex():
        return (zeros_of(g),)
    # d angle: the gradient turns a quarter turn against the input's direction, scaled by 1/|x|
    zero = x.new_zeros(())
    return (where(x == 0, zero, g * x / (x.abs() ** 2) * 1j),)


def _check_complex_parts(name, a, b):
    da, db = D.from_np(a.dtype), D.from_np(b.dtype)
    if not (da.is_floating_point and db.is_floating_point) or D.bfloat16 in (da, db):
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got {TORCH_NAME[da]} "
                           f"and {TORCH_NAME[db]}")
    if da is not db:
        raise RuntimeError(f"Expected object of scalar type {TORCH_NAME[da]} but got scalar type {TORCH_NAME[db]} "
                           "for second argument")
    if da is D.bfloat16:
        raise RuntimeError("Expected both inputs to be Half, Float or Double tensors but got BFloat16 and BFloat16")
    if da is D.float16:
        raise TypeError(f"{name}: complex32 tensors are not supported by ember")
    return np.complex64 if da is D.float32 else np.complex128


@op("complex", method=False)
def complex(xp, real, imag):
    """The complex tensor ``real + 1j * imag`` (broadcast; float or double parts of one dtype)."""
    cd = _check_complex_parts("complex", real, imag)
    r = xp.empty(P.broadcast_shapes(real.shape, imag.shape), dtype=cd)
    r.real, r.imag = real, imag
    return r


@complex.vjp
def _(ctx, g):
    return real(g), imag(g)


@op("polar", method=False)
def polar(xp, abs, angle):
    """The complex tensor with modulus ``abs`` and argument ``angle``."""
    cd = _check_complex_parts("polar", abs, angle)
    r = xp.empty(P.broadcast_shapes(abs.shape, angle.shape), dtype=cd)
    r.real, r.imag = abs * xp.cos(angle), abs * xp.sin(angle)
    return r


@polar.vjp
def _(ctx, g):
    gc, out = g.conj(), ctx.out
    return real(gc * out.sgn()), real(gc * out * 1j)


@op("view_as_real", view=True, method=False)
def view_as_real(xp, input):
    """A complex tensor seen as real with a trailing dimension of 2 (real, imaginary)."""
    if input.dtype.kind != "c":
        raise RuntimeError("view_as_real is only supported for complex tensors")
    part = input.real
    return xp.lib.stride_tricks.as_strided(part, input.shape + (2,), input.strides + (part.itemsize,))


@view_as_real.vjp
def _(ctx, g):
    return (view_as_complex(g.clone()),)  # a C-ordered copy: its last dim has stride 1


@op("view_as_complex", view=True, method=False)
def view_as_complex(xp, input):
    """A real tensor with a trailing dimension of 2 seen as complex."""
    d = D.from_np(input.dtype)
    if d not in (D.float32, D.float64):
        if d is D.float16:
            raise TypeError("view_as_complex: complex32 tensors are not supported by ember")
        raise RuntimeError(f"view_as_complex is only supported for half, float and double tensors, but got a tensor "
                           f"of scalar type: {TORCH_NAME[d]}")
    if input.ndim == 0:
        raise RuntimeError("Input tensor must have one or more dimensions")
    if input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    cd = np.complex64 if d is D.float32 else np.complex128
    if input.size == 0:  # NumPy gives empty arrays zero strides
        return xp.empty(input.shape[:-1], dtype=cd)
    if input.strides[-1] != input.itemsize:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % (2 * input.itemsize) for s in input.strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    return input.view(cd)[..., 0]


@view_as_complex.vjp
def _(ctx, g):
    return (view_as_real(g),)


@op("frexp", returns=("mantissa", "exponent"))
def frexp(xp, input):
    """Mantissa in [0.5, 1) by magnitude and int32 exponent with ``input = mantissa * 2 ** exponent``."""
    d = D.from_np(input.dtype)
    if not d.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    m, e = xp.frexp(input.astype(np.float32) if d in _HALF else input)
    return m.astype(input.dtype, copy=False), e.astype(np.int32, copy=False)


@frexp.vjp
def _(ctx, g_mantissa, g_exponent=None):
    return (None if g_mantissa is None else g_mantissa / ctx.out[1].exp2(),)
