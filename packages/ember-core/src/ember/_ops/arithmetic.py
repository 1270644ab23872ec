"""Arithmetic: add, sub, mul, div and friends, pow, neg, abs, and the bitwise/logical operators."""
import cmath
import math

import numpy as np

from .. import _dtype as D
from .. import _loops, _parallel
from .._quiet import quiet
from .._registry import TORCH_NAME, compute_dtype, elementwise, integral_only
from .._tensor import Tensor
from .comparison import where


def saves(args=True, out=True):
    """Declare what a VJP reads, so autograd keeps only that alive until backward (and checks only that for
    in-place changes): ``args`` False (no tensor argument) or ``args -> args`` with None for the tensors
    not read; ``out`` False (not ``ctx.out``). Put it below ``@op.vjp``."""
    def mark(vjp):
        vjp.saves_args, vjp.saves_out = args, out
        return vjp
    return mark


def _alpha_rule(name):
    """Promotion of add/sub: like "promote", plus PyTorch's checks of ``alpha`` and of bool operands."""
    def rule(p, dtypes, alpha=1, **kwargs):
        if name == "sub" and D.bool in dtypes:
            raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                               "trying to invert a mask, use the `~` or `logical_not()` operator instead.")
        if p.category < 2 and isinstance(alpha, float):
            raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
        if p is D.bool and alpha not in (0, 1) and not isinstance(alpha, bool) or (
                isinstance(alpha, bool) and p is not D.bool):
            raise RuntimeError("Boolean alpha only supported for Boolean results.")
        return compute_dtype(p), p
    rule.__name__ = f"{name}_rule"
    return rule


@elementwise("add", rule=_alpha_rule("add"), scalar_first=True, operators=("__add__", "__radd__", "__iadd__"),
             ufunc=np.add)
@quiet
def add(xp, a, b, *, alpha=1):
    """``input + alpha * other``."""
    return xp.add(a, b if alpha == 1 else b * D.number_as(alpha, b.dtype))


def wanted(ctx):
    """Which positional arguments of the call a VJP differentiates need a gradient (a Python number or a tensor
    that does not require grad needs none: don't compute it), from the engine's ``needs_input_grad``; all of them
    for a context without it, as the op table builds."""
    return getattr(ctx, "needs_input_grad", None) or (True,) * len(ctx.args)


def no_graph(*tensors):
    """Whether nothing can record a graph from ``tensors`` (none requires grad, as in a backward without
    create_graph, which hands VJPs detached arguments): a VJP may then compute on their arrays directly."""
    for t in tensors:  # (a loop, not any() over a generator: this runs in most VJPs)
        if t is not None and t.requires_grad:
            return False
    return True


def _scaled_into(f):
    """In-place add/sub with ``alpha``: ``a f alpha * b`` written into the target, as the implementation computes
    it (float products and the ufunc over the cores when large)."""
    def into(out, a, b, *, alpha=1):
        if alpha != 1:
            b = _parallel.ufunc(np.multiply, b, b.dtype.type(alpha)) if b.dtype.kind == "f" else \
                b * D.number_as(alpha, b.dtype)  # (integers: PyTorch's range check, wrapping around)
        _parallel.ufunc(f, a, b, out=out)
    return into


@add.vjp
@saves(args=False, out=False)
def _(ctx, g):
    wa, wb = wanted(ctx)
    alpha = ctx.kwargs.get("alpha", 1)
    return g if wa else None, (g if alpha == 1 else g * alpha) if wb else None


@elementwise("sub", rule=_alpha_rule("sub"), scalar_first=True, operators=("__sub__", "__rsub__", "__isub__"),
             ufunc=np.subtract)
@quiet
def sub(xp, a, b, *, alpha=1):
    """``input - alpha * other``."""
    return xp.subtract(a, b if alpha == 1 else b * D.number_as(alpha, b.dtype))


add.into, sub.into = _scaled_into(np.add), _scaled_into(np.subtract)
add.scalar_first_kw = sub.scalar_first_kw = "alpha"  # the deprecated add_(alpha, other) (see _registry)


@sub.vjp
@saves(args=False, out=False)
def _(ctx, g):
    wa, wb = wanted(ctx)
    alpha = ctx.kwargs.get("alpha", 1)
    return g if wa else None, (-g if alpha == 1 else -g * alpha) if wb else None


@elementwise("mul", scalar_first=True, operators=("__mul__", "__rmul__", "__imul__"), ufunc=np.multiply)
@quiet
def mul(xp, a, b):
    """Elementwise product."""
    return xp.multiply(a, b)


def _mul_saved(args):
    """mul's gradient of one operand reads the other: keep an operand only if the other requires grad."""
    a, b = args
    return (a if isinstance(b, Tensor) and b._rg else None, b if isinstance(a, Tensor) and a._rg else None)


@mul.vjp
@saves(args=_mul_saved, out=False)
def _(ctx, g):
    a, b = ctx.args
    wa, wb = wanted(ctx)
    if wa != wb:
        ga = into_grad(ctx, g, b if wa else a)
        if ga is not None:
            return (ga, None) if wa else (None, ga)
    ga = g * _conj(b) if wa else None
    if wb and ga is not None and (a is b or (not ga._rg and type(b) is Tensor and b._data is a._data)):
        return ga, ga  # x * x: both gradients are the same (without a graph, equal arrays suffice)
    return ga, g * _conj(a) if wb else None


_INTO = (np.dtype(np.float32), np.dtype(np.float64))


def into_grad(ctx, g, other):
    """``g * other`` written into ``g``'s array when the engine donates it to the VJP (``ctx.grad_donated``: no
    graph is built and nothing else holds it) and the product keeps its shape and float32/float64 dtype: no
    new array per backward step. None otherwise. Only for a VJP reading ``g`` once."""
    d = g._data
    if not getattr(ctx, "grad_donated", False) or d.dtype not in _INTO:
        return None
    if type(other) is Tensor:
        o = other._data
        if other._rg or o.dtype is not d.dtype or o.ndim > d.ndim or np.broadcast_shapes(o.shape, d.shape) != d.shape:
            return None
        other = o
    elif type(other) not in (float, int):
        return None
    _parallel.ufunc(np.multiply, d, other, out=d)
    return g


def _conj(x):
    return x.conj() if isinstance(x, Tensor) and x._data.dtype.kind == "c" else x


def _div_rule(p, dtypes, rounding_mode=None, **kwargs):
    if rounding_mode is None:
        if p.category < 2:
            p = D.get_default_dtype()
    elif rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"'{rounding_mode}'")
    return compute_dtype(p), p


def _check_int_zero_division(xp, a, b):
    """PyTorch raises for integer division by zero (unless the result is empty)."""
    if b.dtype.kind in "iub" and b.size and xp.asarray(a).size and bool(xp.any(b == 0)):
        raise RuntimeError("ZeroDivisionError")


@elementwise("div", rule=_div_rule, scalar_first=True, operators=("__truediv__", "__rtruediv__", "__itruediv__"),
             ufunc=np.true_divide)
@quiet
def div(xp, a, b, *, rounding_mode=None):
    """Elementwise division; ``rounding_mode`` None (true division), "trunc" or "floor"."""
    if rounding_mode is None:
        return xp.true_divide(a, b)
    b = xp.asarray(b)
    if b.dtype.kind in "iub":
        _check_int_zero_division(xp, a, b)
        if rounding_mode == "floor":
            return xp.floor_divide(a, b)
        q = xp.floor_divide(a, b)  # integers: truncate toward zero from floor
        return q + ((q < 0) & (q * b != a))
    q = xp.true_divide(a, b)
    return xp.trunc(q) if rounding_mode == "trunc" else xp.floor(q)


@div.vjp
@saves(out=False)
def _(ctx, g):
    a, b = ctx.args
    if ctx.kwargs.get("rounding_mode") is not None:
        return g * 0, g * 0
    return g / _conj(b), -g * _conj(a) / _conj(b * b)


@elementwise("true_divide", rule="float", scalar_first=True, ufunc=np.true_divide)
@quiet
def true_divide(xp, a, b):
    """``div`` without rounding: integers divide to the default float dtype."""
    return xp.true_divide(a, b)


@true_divide.vjp
@saves(out=False)
def _(ctx, g):
    a, b = ctx.args
    return g / b, -g * a / (b * b)


def _real_rule(kernel):
    """Integers and real floats; PyTorch has no bool or complex kernel for floor division and remainder."""
    def rule(p, dtypes, **kwargs):
        if p is D.bool or p.is_complex:
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{TORCH_NAME[p]}'")
        return compute_dtype(p), p
    return rule


@elementwise("floor_divide", rule=_real_rule("div_floor_cpu"), differentiable=False, scalar_first=True,
             operators=("__floordiv__", "__rfloordiv__", "__ifloordiv__"))
@quiet
def floor_divide(xp, a, b):
    """Division rounded toward negative infinity."""
    b = xp.asarray(b)
    _check_int_zero_division(xp, a, b)
    return xp.floor_divide(a, b)


@elementwise("remainder", rule=_real_rule("remainder_cpu"), scalar_first=True,
             operators=("__mod__", "__rmod__", "__imod__"))
@quiet
def remainder(xp, a, b):
    """Python-style modulus: the result has the sign of the divisor."""
    b = xp.asarray(b)
    _check_int_zero_division(xp, a, b)
    return xp.remainder(a, b)


@remainder.vjp
@saves(out=False)
def _(ctx, g):
    a, b = ctx.args
    return g, -g * floor_divide(a, b)


@elementwise("pow", scalar_first=True, operators=("__pow__", "__rpow__", "__ipow__"))
def pow(xp, a, b):
    """``input ** exponent`` elementwise."""
    if isinstance(b, np.generic) and getattr(a, "dtype", None) is not None and a.dtype.kind == "f" and a.ndim:
        small = _SMALL_POWERS.get(float(b))
        if small is not None:  # (first, and outside NumPy's errstate, whose setting costs more than a loop's call)
            return small(xp, a)
    return _pow(xp, a, b)


@quiet
def _pow(xp, a, b):
    if getattr(a, "dtype", None) == np.bool_ and (hasattr(b, "shape") and not isinstance(b, np.generic)
                                                  or isinstance(a, np.generic)):
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")  # (bool ** Python bool is allowed)
    if isinstance(b, np.generic) and b.dtype.kind in "iu" and b < 0 and xp.asarray(a).dtype.kind in "iu":
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if b.dtype.kind == "i" and xp.asarray(a).dtype.kind in "iu" and (b < 0).any():
        # integer division semantics, as PyTorch: 1 and -1 keep their magnitude, any other base gives 0
        r = xp.power(a, xp.maximum(b, 0))
        return xp.where(b >= 0, r, xp.where(a == 1, 1, 0) + xp.where(a == -1, 1 - 2 * (b & 1), 0)).astype(r.dtype)
    return xp.power(a, b)


def _times(xp, a, b):
    return _parallel.ufunc(np.multiply, a, b) if xp is np else a * b


def _loop(name, fallback):
    """One pass of ember's numba loop ``name`` on large NumPy arrays (``fallback(xp, a)``, the same roundings, on
    small ones and CuPy ones)."""
    fallback = quiet(fallback)

    def power(xp, a):
        if xp is np and a.dtype.itemsize >= 4 and a.size >= _loops.LOOP_MIN:
            return _loops.power(a, name)
        return fallback(xp, a)
    return power


# Real floating bases to the exponents of common code as products and roots (PyTorch special-cases these too, so
# the roundings are its own), one pass each: x ** 3 by np.power cost 1 ms on 1M float32, x * x * x 0.08 ms.
_SMALL_POWERS = {2.0: _loop("square", lambda xp, a: _times(xp, a, a)), 3.0: _loop("cube", lambda xp, a: a * a * a),
                 0.5: _loop("root", lambda xp, a: xp.sqrt(a)), -1.0: _loop("inverse", lambda xp, a: 1 / a),
                 -2.0: _loop("inverse_square", lambda xp, a: 1 / (a * a)), 1.0: lambda xp, a: a.copy(),
                 -0.5: _loop("inverse_root", lambda xp, a: 1 / xp.sqrt(a))}


@pow.vjp
def _(ctx, g):
    a, b = ctx.args
    return pow_grads(g, a, b, ctx.out, pow)


def _scalar_log(a, complex_result):
    """``log`` of a Python number base: complex when the exponent is, -inf at zero, NaN below it."""
    if complex_result or isinstance(a, complex):
        return cmath.log(a) if a != 0 else complex(-math.inf, 0)
    return math.log(a) if a > 0 else (-math.inf if a == 0 else math.nan)


def pow_grads(g, a, b, out, power):
    """Gradients of ``out = power(a, b)`` in PyTorch's form (so NaN/inf reach higher orders alike): a zero
    exponent gives the base none, and a zero base gives an exponent with non-negative real part none."""
    ga = gb = None
    if isinstance(a, Tensor):
        if not isinstance(b, Tensor) and (ga := _pow_grad_loop(g, a, b)) is not None:
            pass
        elif isinstance(b, Tensor):
            ga = where(b == 0, 0.0, g * _conj(b * power(a, b - 1)))
        elif b == 2 and not a.is_complex():  # (fewer passes for the commonest exponents)
            ga = g * (a * 2)
        elif b == 0.5 and not a.is_complex():
            ga = g / (a.sqrt() * 2)
        else:
            ga = g * _conj(power(a, b - 1) * b) if b != 0 else a.new_zeros(a.shape)
    if isinstance(b, Tensor):
        nonneg = (b.real >= 0) & (b.imag == 0) if b.is_complex() else b >= 0
        if isinstance(a, Tensor):
            gb = g * where((a == 0) & nonneg, 0.0, _conj(out * a.log()))
        else:
            d = _conj(out * _scalar_log(a, b.is_complex()))
            gb = g * (where(nonneg, 0.0, d) if a == 0 else d)
    return ga, gb


# exponent -> ember's loop computing ``g`` times pow's derivative in one pass, with the roundings of pow_grads' ops
_POW_GRAD_LOOPS = {2: "square_backward", 3: "cube_backward", -1: "inverse_backward", 0.5: "sqrt_backward"}


def _pow_grad_loop(g, a, b):
    """``pow_grads``' gradient of a large real float32/float64 NumPy base ``a`` to a Python number ``b`` of
    _POW_GRAD_LOOPS by one loop, or None (no loop for ``b``, other arrays, or a graph is being recorded)."""
    name = _POW_GRAD_LOOPS.get(b) if type(b) in (int, float) else None
    x, d = a._data, g._data
    if (name is None or a._rg or g._rg or type(x) is not np.ndarray or type(d) is not np.ndarray
            or x.dtype != d.dtype or x.dtype not in (np.float32, np.float64) or x.shape != d.shape
            or x.size < _loops.LOOP_MIN):
        return None
    return Tensor._wrap(_loops.derivative_times(name, x, d))


def _neg_rule(p, dtypes, **kwargs):
    if p is D.bool:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                           "invert a mask, use the `~` or `logical_not()` operator instead.")
    return compute_dtype(p), p


@elementwise("neg", rule=_neg_rule, operators=("__neg__",), ufunc=np.negative)
def neg(xp, a):
    """``-input``."""
    return xp.negative(a)


@neg.vjp
@saves(args=False, out=False)
def _(ctx, g):
    return (-g,)


def _abs_rule(p, dtypes, **kwargs):
    if p is D.bool:
        raise NotImplementedError("\"abs_cpu\" not implemented for 'Bool'")
    return compute_dtype(p), p.to_real()


@elementwise("abs", rule=_abs_rule, operators=("__abs__",))
def abs(xp, a):
    """Absolute value (modulus for complex inputs, which returns the real dtype)."""
    return xp.abs(a)


@abs.vjp
@saves(out=False)
def _(ctx, g):
    (a,) = ctx.args
    return (g * a.sgn(),) if a.is_complex() else (g * a.sign(),)


def refuse_complex_abs_(o):
    """``o.abs_()`` of a complex tensor: PyTorch's refusal (the real moduli would be stored as complex numbers)."""
    inplace = o.inplace_fn

    def abs_(self, *args, **kwargs):
        if isinstance(self, Tensor) and self.is_complex():
            raise RuntimeError("In-place abs is not supported for complex tensors.")
        return inplace(self, *args, **kwargs)
    o.inplace_fn = abs_


refuse_complex_abs_(abs)


@elementwise("bitwise_and", rule=integral_only("bitwise_and"), differentiable=False,
             operators=("__and__", "__rand__", "__iand__"))
def bitwise_and(xp, a, b):
    """Bitwise AND (logical AND for bool)."""
    return xp.bitwise_and(a, b)


@elementwise("bitwise_or", rule=integral_only("bitwise_or"), differentiable=False,
             operators=("__or__", "__ror__", "__ior__"))
def bitwise_or(xp, a, b):
    """Bitwise OR (logical OR for bool)."""
    return xp.bitwise_or(a, b)


@elementwise("bitwise_xor", rule=integral_only("bitwise_xor"), differentiable=False,
             operators=("__xor__", "__rxor__", "__ixor__"))
def bitwise_xor(xp, a, b):
    """Bitwise XOR (logical XOR for bool)."""
    return xp.bitwise_xor(a, b)


@elementwise("bitwise_not", rule=integral_only("bitwise_not"), differentiable=False,
             operators=("__invert__",))
def bitwise_not(xp, a):
    """Bitwise NOT (logical NOT for bool)."""
    return xp.invert(a)


@elementwise("logical_and", rule="bool", differentiable=False, scalars=False)
def logical_and(xp, a, b):
    """Elementwise AND of the operands' truth values; bool result."""
    return xp.logical_and(a, b)


@elementwise("logical_or", rule="bool", differentiable=False, scalars=False)
def logical_or(xp, a, b):
    """Elementwise OR of the operands' truth values; bool result."""
    return xp.logical_or(a, b)


@elementwise("logical_xor", rule="bool", differentiable=False, scalars=False)
def logical_xor(xp, a, b):
    """Elementwise XOR of the operands' truth values; bool result."""
    return xp.logical_xor(a, b)


@elementwise("logical_not", rule="bool", differentiable=False)
def logical_not(xp, a):
    """Elementwise NOT of the truth value; bool result."""
    return xp.logical_not(a)

