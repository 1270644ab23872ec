"""Binary and ternary elementwise math: atan2, hypot, fmod, copysign, logaddexp, float_power, lerp,
addcmul/addcdiv (fused CuPy kernels), fmax/fmin, gcd/lcm, shifts, and aliases of the arithmetic and
comparison ops under their NumPy-style names."""
import math

import numpy as np

from .. import _dtype as D
from .. import _kernels
from .._registry import TORCH_NAME, elementwise
from .._tensor import Tensor
from .arithmetic import div, mul, pow_grads, sub, wanted
from .comparison import ge, gt, le, lt, ne, real_rule, where
from .pointwise import alias, chain, compute_dtype, floating_rule, not_implemented, quiet, zeros_of


def _float_rule(kernel, complex_ok=False):
    """Integers and bool become the default float; complex inputs refused unless ``complex_ok``."""
    def rule(p, dtypes, **kwargs):
        if p.is_complex and not complex_ok:
            raise not_implemented(kernel, p)
        if p.category < 2:
            p = D.get_default_dtype()
        return compute_dtype(p), p
    return rule


def _numeric_rule(kernel):
    """Integers and floats keep the promoted dtype; bool and complex are refused."""
    def rule(p, dtypes, **kwargs):
        if p is D.bool or p.is_complex:
            raise not_implemented(kernel, p)
        return compute_dtype(p), p
    return rule


def _integer_rule(kernel):
    """Integers only (not bool)."""
    def rule(p, dtypes, **kwargs):
        if p.category != 1:
            raise not_implemented(kernel, p)
        return p, p
    return rule


# ---- trigonometric and magnitude ---------------------------------------------------------------
@elementwise("atan2", rule=_float_rule("atan2_cpu"), scalars=False)
@quiet
def atan2(xp, a, b):
    """Angle of the point ``(other, input)``: ``atan(input / other)`` in the right quadrant."""
    return xp.arctan2(a, b)


@atan2.vjp
def _(ctx, g):
    a, b = ctx.args
    d = a * a + b * b
    r = where(d == 0, 0.0, d.reciprocal())  # zero gradient at the origin, as PyTorch
    return g * b * r, -g * a * r


arctan2 = alias("arctan2", atan2)


@elementwise("hypot", rule=floating_rule("hypot_cpu"), scalars=False)
@quiet
def hypot(xp, a, b):
    """``sqrt(input ** 2 + other ** 2)`` without intermediate overflow."""
    return xp.hypot(a, b)


@hypot.vjp
def _(ctx, g):
    a, b = ctx.args
    return g * a / ctx.out, g * b / ctx.out


# ---- remainders and signs ----------------------------------------------------------------------
@elementwise("fmod", rule=_numeric_rule("fmod_cpu"))
@quiet
def fmod(xp, a, b):
    """C-style remainder: the result has the sign of the dividend."""
    b = xp.asarray(b)
    if b.dtype.kind in "iu" and a.size and bool(xp.any(b == 0)):  # empty results divide nothing
        raise RuntimeError("ZeroDivisionError")
    return xp.fmod(a, b)


@fmod.vjp
def _(ctx, g):
    a, b = ctx.args
    return g, (-g * div(a, b, rounding_mode="trunc") if isinstance(b, Tensor) else None)


@elementwise("copysign", rule=_float_rule("copysign_cpu"))
def copysign(xp, a, b):
    """``|input|`` with the sign of ``other`` (signed zeros count)."""
    return xp.copysign(a, b)


@copysign.vjp
def _(ctx, g):
    a, b = ctx.args
    ratio = where(a == 0, 0.0, ctx.out / a)  # +-1: whether the sign flipped
    return g * ratio, (zeros_of(g) if isinstance(b, Tensor) else None)


def _nextafter_bits(xp, a, b):
    """nextafter on the bit patterns, for float16/bfloat16 (not every backend has it for them)."""
    ints = a.view(np.int16)
    step = xp.where((b > a) == (a > 0), 1, -1).astype(np.int16)
    tiny = xp.where(b > 0, 1, -32767).astype(np.int16)  # +-smallest subnormal: bit patterns 0x0001, 0x8001
    r = xp.where(a == 0, tiny, ints + step).view(a.dtype)
    return xp.where((a != a) | (b != b), a + b, xp.where(a == b, b, r))


def _nextafter_rule(p, dtypes, **kwargs):
    if not p.is_floating_point:
        raise not_implemented("nextafter_cpu", p)
    return p, p  # half types stay half: the step is one unit of their own precision


@elementwise("nextafter", rule=_nextafter_rule, scalars=False)
def nextafter(xp, a, b):
    """The next representable value after ``input`` in the direction of ``other``."""
    if a.dtype.itemsize == 2:
        return _nextafter_bits(xp, a, b)
    return xp.nextafter(a, b)


@nextafter.vjp
def _(ctx, g):
    return g, zeros_of(g)  # a one-ulp step: PyTorch passes the gradient to ``input`` unchanged


# ---- exponentials and powers -------------------------------------------------------------------
@elementwise("ldexp", rule=_float_rule("ldexp", complex_ok=True), scalars=False)
@quiet
def ldexp(xp, a, b):
    """``input * 2 ** other``."""
    return a * xp.exp2(b)


@ldexp.vjp
def _(ctx, g):
    a, b = ctx.args
    return chain(g, b.exp2()), chain(g, ctx.out * math.log(2))


def _float_power_rule(p, dtypes, **kwargs):
    p = D.complex128 if any(d.is_complex for d in dtypes) else D.float64
    return p, p


@elementwise("float_power", rule=_float_power_rule, scalar_first=True)
@quiet
def float_power(xp, a, b):
    """``input ** exponent`` computed in double precision (float64, or complex128 for complex operands)."""
    return xp.power(a, b)


@float_power.vjp
def _(ctx, g):
    a, b = ctx.args
    return pow_grads(g, a, b, ctx.out, float_power)


_float_power_inplace = float_power.inplace_fn


def _float_power_(self, exponent):
    """In place: the base must already have the double-precision result dtype."""
    need = D.complex128 if self.is_complex() or (isinstance(exponent, Tensor) and exponent.is_complex()) or \
        isinstance(exponent, complex) else D.float64
    if self.dtype is not need:
        raise RuntimeError(f"the base given to float_power_ has dtype {TORCH_NAME[self.dtype]} but the operation's "
                           f"result requires dtype {TORCH_NAME[need]}")
    return _float_power_inplace(self, exponent)


float_power.inplace_fn = _float_power_


@elementwise("logaddexp", rule=floating_rule("logaddexp_cpu", complex_ok=True), scalars=False)
@quiet
def logaddexp(xp, a, b):
    """``log(exp(input) + exp(other))`` without overflow."""
    if a.dtype.kind != "c":
        return xp.logaddexp(a, b)
    big = a.real >= b.real
    m, n = xp.where(big, a, b), xp.where(big, b, a)
    return m + xp.log1p(xp.exp(n - m))


@logaddexp.vjp
def _(ctx, g):
    a, b = ctx.args
    return chain(g, ((b - a).exp() + 1).reciprocal()), chain(g, ((a - b).exp() + 1).reciprocal())


@elementwise("logaddexp2", rule=floating_rule("logaddexp2_cpu"), scalars=False)
@quiet
def logaddexp2(xp, a, b):
    """``log2(2 ** input + 2 ** other)`` without overflow."""
    return xp.logaddexp2(a, b)


@logaddexp2.vjp
def _(ctx, g):
    a, b = ctx.args
    return g * ((b - a).exp2() + 1).reciprocal(), g * ((a - b).exp2() + 1).reciprocal()


# ---- NaN-ignoring extremes, step -------------------------------------------------------------
@elementwise("fmax", rule=real_rule("fmax"), scalars=False)
def fmax(xp, a, b):
    """Elementwise maximum that ignores NaN (NaN only where both are NaN)."""
    return xp.fmax(a, b)


@fmax.vjp
def _(ctx, g):
    a, b = ctx.args
    first = (a >= b) | b.isnan()
    return g * first, g * ~first


@elementwise("fmin", rule=real_rule("fmin"), scalars=False)
def fmin(xp, a, b):
    """Elementwise minimum that ignores NaN (NaN only where both are NaN)."""
    return xp.fmin(a, b)


@fmin.vjp
def _(ctx, g):
    a, b = ctx.args
    first = (a <= b) | b.isnan()
    return g * first, g * ~first


def _heaviside_rule(p, dtypes, **kwargs):
    if p.is_complex:
        raise RuntimeError("heaviside is not yet implemented for complex tensors.")
    if len(set(dtypes)) > 1:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return compute_dtype(p), p


@elementwise("heaviside", rule=_heaviside_rule, scalars=False, differentiable=False)
def heaviside(xp, a, values):
    """Step function: 0 below zero, 1 above, ``values`` at zero (NaN input gives 0)."""
    return xp.where(a == 0, values, a > 0).astype(a.dtype, copy=False)


# ---- integers ----------------------------------------------------------------------------------
@elementwise("gcd", rule=_integer_rule("gcd_cpu"), scalars=False, differentiable=False)
def gcd(xp, a, b):
    """Greatest common divisor (non-negative; 0 for two zeros)."""
    return xp.gcd(a, b)


@elementwise("lcm", rule=_integer_rule("lcm_cpu"), scalars=False, differentiable=False)
def lcm(xp, a, b):
    """Least common multiple (non-negative; 0 when either is 0)."""
    return xp.lcm(a, b)


def _shift_amount(xp, a, b):
    """Shift counts clipped to the width of ``a``'s type, and where they were out of range."""
    bits = a.dtype.itemsize * 8
    b = xp.asarray(b).astype(a.dtype, copy=False)
    outside = (b < 0) | (b >= bits)
    return xp.where(outside, bits - 1, b).astype(a.dtype, copy=False), outside


@elementwise("bitwise_left_shift", rule=_integer_rule("lshift_cpu"), differentiable=False,
             operators=("__lshift__", "__rlshift__", "__ilshift__"))
def bitwise_left_shift(xp, a, b):
    """``input << other`` with wrap-around; counts outside [0, bits) give 0."""
    n, outside = _shift_amount(xp, a, b)
    return xp.where(outside, a.dtype.type(0), xp.left_shift(a, n))


@elementwise("bitwise_right_shift", rule=_integer_rule("rshift_cpu"), differentiable=False,
             operators=("__rshift__", "__rrshift__", "__irshift__"))
def bitwise_right_shift(xp, a, b):
    """Arithmetic ``input >> other``; counts outside [0, bits) shift by bits - 1 (sign fill), or give 0 for
    unsigned types (bool and uint8: no sign to fill with)."""
    n, outside = _shift_amount(xp, a, b)
    if a.dtype.kind in "bu":
        return xp.where(outside, a.dtype.type(0), xp.right_shift(a, n))
    return xp.right_shift(a, n)


# ---- fused interpolation and multiply-add (one CuPy kernel each, as PyTorch fuses them) ---------
# weights of magnitude below 1/2 interpolate from ``a``, the others from ``b``: exact at both ends
_LERP = _kernels.elementwise_kernel(
    "ember_lerp", "T a, T b, T w", "T z",
    "z = (fabs(w) < (T)0.5) ? a + w * (b - a) : b - (b - a) * ((T)1 - w);")
_ADDCMUL = _kernels.elementwise_kernel("ember_addcmul", "T a, T b, T c, T v", "T z", "z = a + v * b * c;")
_ADDCDIV = _kernels.elementwise_kernel("ember_addcdiv", "T a, T b, T c, T v", "T z", "z = a + v * b / c;")


def _fused(xp, kernel, arrays):
    """The CuPy kernel for float arrays on the GPU, else None (NumPy, or integers on CuPy)."""
    if xp is np or arrays[0].dtype.kind != "f":
        return None
    return kernel(*arrays)  # the registry gave every operand the computation dtype


def _lerp_rule(p, dtypes, **kwargs):
    a, b = dtypes[0], dtypes[1]
    if a is not b:
        raise RuntimeError(f"expected dtype {a.name} for `end` but got dtype {b.name}")
    if not (a.is_floating_point or a.is_complex):
        raise not_implemented("lerp_kernel_scalar", a)
    return compute_dtype(a), a


@elementwise("lerp", rule=_lerp_rule)
@quiet
def lerp(xp, a, b, w):
    """Linear interpolation ``input + weight * (end - input)`` (scalar or tensor weight)."""
    r = _fused(xp, _LERP, (a, b, w))
    if r is not None:
        return r
    d = b - a
    if w.ndim == 0:  # a scalar weight picks its formula once
        return a + w * d if abs(w) < 0.5 else b - d * (1 - w)
    return xp.where(xp.abs(w) < 0.5, a + w * d, b - d * (1 - w))


@lerp.vjp
def _(ctx, g):
    a, b, w = ctx.args
    return chain(g, 1 - w), chain(g, w), (chain(g, b - a) if isinstance(w, Tensor) else None)


def _addc_rule(name, divide):
    def rule(p, dtypes, value=1, **kwargs):
        if divide and all(d.category < 2 for d in dtypes[1:]):
            raise RuntimeError("Integer division with addcdiv is no longer supported, and in a future release "
                               "addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv "
                               "behavior can be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to("
                               "input.dtype) using Python 3 or (input + value * tensor1 / tensor2).to(input.dtype) "
                               "using Python 2.")
        if p is D.bool:
            raise not_implemented(f"{name}_cpu_out", p)
        return compute_dtype(p), p
    return rule


def _value(a, value):
    """``value`` in the computation dtype (integers truncate it, as PyTorch)."""
    return a.dtype.type(int(value) if a.dtype.kind in "iu" else value)


@elementwise("addcmul", rule=_addc_rule("addcmul", False), scalars=False)
def addcmul(xp, a, b, c, *, value=1):
    """``input + value * tensor1 * tensor2``."""
    v = _value(a, value)
    r = _fused(xp, _ADDCMUL, (a, b, c, v))
    return a + v * b * c if r is None else r


@addcmul.vjp
def _(ctx, g):
    a, b, c = ctx.args
    v = ctx.kwargs.get("value", 1)
    wb, wc = wanted(ctx)[1:]  # (a tensor factor is read only for the other's gradient, as in PyTorch)
    return g, chain(g, c * v) if wb else None, chain(g, b * v) if wc else None


@elementwise("addcdiv", rule=_addc_rule("addcdiv", True), scalars=False)
@quiet
def addcdiv(xp, a, b, c, *, value=1):
    """``input + value * tensor1 / tensor2``."""
    v = _value(a, value)
    r = _fused(xp, _ADDCDIV, (a, b, c, v))
    return a + v * b / c if r is None else r


addcmul.scalar_first_kw = addcdiv.scalar_first_kw = "value"  # the deprecated addcmul_(value, t1, t2)


@addcdiv.vjp
def _(ctx, g):
    a, b, c = ctx.args
    v = ctx.kwargs.get("value", 1)
    wb, wc = wanted(ctx)[1:]
    return g, chain(g, v / c) if wb else None, chain(g, -v * b / (c * c)) if wc else None


# ---- other spellings of arithmetic and comparisons ---------------------------------------------
divide, multiply, subtract = alias("divide", div), alias("multiply", mul), alias("subtract", sub)
not_equal, greater, greater_equal = alias("not_equal", ne), alias("greater", gt), alias("greater_equal", ge)
less, less_equal = alias("less", lt), alias("less_equal", le)


def _rsub_rule(p, dtypes, alpha=1, **kwargs):
    if dtypes[0] is D.bool and dtypes[1] is D.bool:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                           "`logical_xor()` operator instead.")
    return sub.rule(p, dtypes[::-1], alpha=alpha)


@elementwise("rsub", rule=_rsub_rule, method=False, inplace=False)
def rsub(xp, a, b, *, alpha=1):
    """``other - alpha * input``."""
    return sub.impl(xp, b, a, alpha=alpha)


@rsub.vjp
def _(ctx, g):
    return -g * ctx.kwargs.get("alpha", 1), g

