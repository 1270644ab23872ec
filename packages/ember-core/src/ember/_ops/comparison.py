"""Comparisons, where, clamp, maximum/minimum and whole-tensor equality tests."""
import math

import numpy as np

from .. import _dtype as D
from .. import _kernels
from .. import _promotion as P
from .._registry import TORCH_NAME, compute_dtype, elementwise, op
from .._tensor import Tensor

NO_COMPLEX_CLAMP = "clamp is not supported for complex types"  # (clamp and the ops made of it)


def _ordered_rule(name):
    """Order comparisons: bool result; complex operands have no order."""
    def rule(p, dtypes, **kwargs):
        if p.is_complex:
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{TORCH_NAME[p]}'")
        return compute_dtype(p), D.bool
    return rule


@elementwise("eq", rule="bool", differentiable=False)
def eq(xp, a, b):
    """``input == other`` elementwise."""
    return xp.equal(a, b)


@elementwise("ne", rule="bool", differentiable=False)
def ne(xp, a, b):
    """``input != other`` elementwise."""
    return xp.not_equal(a, b)


@elementwise("lt", rule=_ordered_rule("lt"), differentiable=False, operators=("__lt__",))
def lt(xp, a, b):
    """``input < other`` elementwise."""
    return xp.less(a, b)


@elementwise("le", rule=_ordered_rule("le"), differentiable=False, operators=("__le__",))
def le(xp, a, b):
    """``input <= other`` elementwise."""
    return xp.less_equal(a, b)


@elementwise("gt", rule=_ordered_rule("gt"), differentiable=False, operators=("__gt__",))
def gt(xp, a, b):
    """``input > other`` elementwise."""
    return xp.greater(a, b)


@elementwise("ge", rule=_ordered_rule("ge"), differentiable=False, operators=("__ge__",))
def ge(xp, a, b):
    """``input >= other`` elementwise."""
    return xp.greater_equal(a, b)


def _comparable(other):
    return isinstance(other, (Tensor, bool, int, float, complex, np.generic))


def _eq_operator(self, other):
    return eq.fn(self, other) if _comparable(other) else NotImplemented


def _ne_operator(self, other):
    return ne.fn(self, other) if _comparable(other) else NotImplemented


Tensor.__eq__ = _eq_operator
Tensor.__ne__ = _ne_operator


def real_rule(name):
    """Rule of ops that order their operands: complex refused with PyTorch's message."""
    def rule(p, dtypes, **kwargs):
        if p.is_complex:
            raise RuntimeError(f"{name} not implemented for complex tensors.")
        return compute_dtype(p), p
    return rule


@elementwise("maximum", rule=real_rule("maximum"), scalars=False)
def maximum(xp, a, b):
    """Elementwise maximum, propagating NaN."""
    return xp.maximum(a, b)


@maximum.vjp
def _(ctx, g):
    return _min_max_grads(ctx, g, lt.fn, gt.fn)


def _min_max_grads(ctx, g, loses_a, loses_b):
    """Ties split the gradient; NaN operands (no order) pass it to both sides."""
    a, b = ctx.args
    half = where.fn(a == b, g / 2, g)
    return where.fn(loses_a(a, b), 0.0, half), where.fn(loses_b(a, b), 0.0, half)


@elementwise("minimum", rule=real_rule("minimum"), scalars=False)
def minimum(xp, a, b):
    """Elementwise minimum, propagating NaN."""
    return xp.minimum(a, b)


@minimum.vjp
def _(ctx, g):
    return _min_max_grads(ctx, g, gt.fn, lt.fn)


# ---- where --------------------------------------------------------------------------------------
_WHERE = _kernels.elementwise_kernel(
    "ember_where", "bool c, T x, T y", "T z", "z = c ? x : y",
    types={"T": ["bool", "signed char", "unsigned char", "short", "int", "long long", "float", "double"]})


def _as_array(xp, v, dtype):
    return v.astype(dtype, copy=False) if hasattr(v, "ndim") else xp.asarray(D.number_as(v, dtype), dtype=dtype)


# Elements from which a host ``where`` selects with bit masks: NumPy's np.where branches per element, and a
# condition of no pattern (ReLU's, in a backward pass) costs it a misprediction every other element (256x512 float32,
# random condition: 467 us; masks: 59, bfloat16 27)
SELECT_MIN = 1 << 12
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _select(condition, x, y, unsigned, shape):
    """``np.where(condition, x, y)`` bit for bit, without branches: ``(x & m) | (y & ~m)`` on the unsigned views,
    ``m`` all ones where ``condition`` holds (``shape``: the operands' broadcast shape)."""
    m = np.broadcast_to(condition, shape).view(np.uint8).astype(unsigned)
    np.negative(m, out=m)
    r = np.bitwise_and(x.view(unsigned), m)
    np.invert(m, out=m)
    np.bitwise_and(y.view(unsigned), m, out=m)
    return np.bitwise_or(r, m, out=r).view(x.dtype)


@op("where", method=True)
def where(xp, condition, input=None, other=None):
    """``input`` where ``condition`` holds, else ``other``; ``where(condition)`` is ``nonzero(as_tuple=True)``."""
    if input is None and other is None:
        return tuple(xp.nonzero(condition))
    if condition.dtype != np.bool_:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{TORCH_NAME[D.from_np(condition.dtype)]}")
    rdt = D.storage(P.array_result_type(input, other))
    x, y = _as_array(xp, input, rdt), _as_array(xp, other, rdt)
    shape = P.broadcast_shapes(condition.shape, x.shape, y.shape)
    if xp is not np:
        return _WHERE(condition, x, y)
    unsigned = _UNSIGNED.get(x.dtype.itemsize)
    if unsigned is not None and math.prod(shape) >= SELECT_MIN and condition.flags.c_contiguous and \
            x.flags.c_contiguous and y.flags.c_contiguous:
        return _select(condition, x, y, unsigned, shape)
    return np.where(condition, x, y)


@where.vjp
def _(ctx, g):
    cond = ctx.args[0]
    zero = g.new_zeros(()) if hasattr(g, "new_zeros") else 0.0
    return None, where(cond, g, zero), where(cond, zero, g)


# ---- clamp --------------------------------------------------------------------------------------
# max(x, lo) then min(., hi), propagating NaN from any operand (x != x is the portable isnan)
_CLAMP = _kernels.elementwise_kernel(
    "ember_clamp", "T x, T lo, T hi", "T z",
    "T m = (x != x) ? x : ((lo != lo || lo > x) ? lo : x);\n"
    "z = (m != m) ? m : ((hi != hi || hi < m) ? hi : m);",
    types={"T": ["signed char", "unsigned char", "short", "int", "long long", "float", "double"]})


@op("clamp", method=True, inplace=True)
def clamp(xp, input, min=None, max=None):
    """``input`` limited to [min, max]; either bound may be a tensor, NaN propagates."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    rd = P.array_result_type(input, min, max)
    if rd.is_complex:
        raise NotImplementedError(NO_COMPLEX_CLAMP)
    if rd is D.bool:
        raise NotImplementedError("\"clamp_cpu\" not implemented for 'Bool'")
    cd = compute_dtype(rd)
    x = input.astype(D.storage(cd), copy=False)
    lo = None if min is None else _as_array(xp, min, D.storage(cd))
    hi = None if max is None else _as_array(xp, max, D.storage(cd))
    P.broadcast_shapes(x.shape, *(b.shape for b in (lo, hi) if b is not None))
    if xp is not np and lo is not None and hi is not None:
        r = _CLAMP(x, lo, hi)
    else:
        r = x
        if lo is not None:
            r = xp.maximum(r, lo)
        if hi is not None:
            r = xp.minimum(r, hi)
    return r.astype(D.storage(rd), copy=False)


@clamp.vjp
def _(ctx, g):
    # result = min(max(x, lo), hi): the gradient goes to whichever operand was picked
    x = ctx.args[0]
    lo = ctx.kwargs.get("min", ctx.args[1] if len(ctx.args) > 1 else None)
    hi = ctx.kwargs.get("max", ctx.args[2] if len(ctx.args) > 2 else None)
    keep = x == x
    below = above = None
    if lo is not None:
        below = x < lo
        keep = keep & (x >= lo)  # (comparisons with NaN bounds are false: no gradient, as in PyTorch)
    if hi is not None:
        picked = maximum.fn(x, lo) if isinstance(lo, Tensor) else x.clamp(min=lo) if lo is not None else x
        above = picked > hi
        keep = keep & (picked <= hi)
        below = below & ~above if below is not None else None
    g_lo = g * below if isinstance(lo, Tensor) else None
    g_hi = g * above if isinstance(hi, Tensor) else None
    return g * keep, g_lo, g_hi


@op("clip", method=True, inplace=True)
def clip(xp, input, min=None, max=None):
    """Alias of clamp."""
    return clamp.impl(xp, input, min, max)


clip.vjp_fn = clamp.vjp_fn


# ---- whole-tensor tests -------------------------------------------------------------------------
@op("equal", differentiable=False)
def equal(xp, input, other):
    """True when both tensors have the same shape and elements."""
    return input.shape == other.shape and bool(xp.all(input == other))


def _check_close_args(name, input, other, rtol, atol):
    if not hasattr(other, "ndim"):
        raise TypeError(f"{name}(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")
    if input.dtype != other.dtype:
        raise RuntimeError(f"{TORCH_NAME[D.from_np(input.dtype)]} did not match {TORCH_NAME[D.from_np(other.dtype)]}")
    P.broadcast_shapes(input.shape, other.shape)
    for tol, value in (("rtol", rtol), ("atol", atol)):
        if value < 0:
            raise RuntimeError(f"{tol} must be greater than or equal to zero, but got {value}")


@op("allclose", differentiable=False)
def allclose(xp, input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when every element satisfies ``|input - other| <= atol + rtol * |other|``."""
    _check_close_args("allclose", input, other, rtol, atol)
    return bool(xp.allclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan))


@op("isclose", differentiable=False)
def isclose(xp, input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|input - other| <= atol + rtol * |other|``."""
    _check_close_args("isclose", input, other, rtol, atol)
    return xp.isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)
