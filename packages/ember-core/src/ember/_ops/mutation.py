"""Ops that overwrite a tensor's elements: fill_, zero_, copy_."""
import numpy as np

from .. import _dtype as D
from .. import _promotion as P
from .._registry import op


def _scalar_value(value):
    if hasattr(value, "ndim"):
        if value.ndim:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                               "dimensions.")
        return value[()]
    return value


@op("fill_", function=False, mutates=True)
def fill_(xp, input, value):
    """Set every element to ``value`` (a number or a zero-dim tensor)."""
    v = _scalar_value(value)  # (a tensor's value is cast as it is, a number checked as PyTorch checks it)
    input[...] = v if hasattr(value, "ndim") else D.number_as(v, input.dtype)


@fill_.vjp
def _(ctx, g):
    return g * 0, g.sum() if hasattr(ctx.args[1], "_data") else None


@op("zero_", function=False, mutates=True)
def zero_(xp, input):
    """Set every element to zero."""
    input[...] = 0


@zero_.vjp
def _(ctx, g):
    return (g * 0,)


@op("copy_", function=False, mutates=True)
def copy_(xp, input, src, non_blocking=False):
    """Copy ``src`` (broadcast to this shape, cast to this dtype, from any device) into this tensor."""
    if type(src) is not type(input):
        src = xp.asarray(src) if xp is not np else src.get()
    P.check_inplace_broadcast(input.shape, P.broadcast_shapes(input.shape, src.shape))
    input[...] = src


@copy_.vjp
def _(ctx, g):
    dst, src = ctx.args[:2]
    return g * 0, g.sum_to_size(src.shape).to(src.dtype) if hasattr(src, "_data") else None
