"""Unary elementwise math: exponentials and logarithms, signs, complex conjugation."""
import numpy as np

from .._registry import elementwise, op


@elementwise("exp", rule="float")
def exp(xp, a):
    """``e ** input``."""
    return xp.exp(a)


@exp.vjp
def _(ctx, g):
    return (g * ctx.out.conj(),)


@elementwise("log", rule="float")
def log(xp, a):
    """Natural logarithm (``-inf`` at 0, NaN below)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.log(a)


@log.vjp
def _(ctx, g):
    return (g / ctx.args[0].conj(),)


@elementwise("sign", differentiable=False)
def sign(xp, a):
    """-1, 0 or 1 by the sign of each element (0 for NaN, as PyTorch)."""
    if a.dtype.kind == "b":
        return a
    s = xp.sign(a)
    return xp.where(xp.isnan(a), 0, s).astype(s.dtype) if a.dtype.kind == "f" else s


@elementwise("sgn", differentiable=False)
def sgn(xp, a):
    """``sign`` extended to complex numbers: ``input / |input|`` (0 at 0)."""
    if a.dtype.kind != "c":
        return sign.impl(xp, a)
    mag = xp.abs(a)
    return xp.where(mag == 0, 0, a / xp.where(mag == 0, 1, mag))


@op("conj", view=True)
def conj(xp, input):
    """Complex conjugate; a real tensor is returned as a view of itself."""
    return xp.conj(input) if input.dtype.kind == "c" else input


@conj.vjp
def _(ctx, g):
    return (g.conj(),)
