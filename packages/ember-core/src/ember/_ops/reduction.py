"""Reductions: sum and mean (the rest arrive with the op-coverage issue)."""
import numpy as np

from .. import _dtype as D
from .. import _kernels
from .._registry import TORCH_NAME, op


def reduce_dims(dim, ndim):
    """``dim`` (None, int, or a sequence) as a sorted tuple of non-negative axes; None means all."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims:
        return None
    n = max(ndim, 1)
    seen = set()
    for d in dims:
        if not -n <= d < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
        if d % n in seen:
            raise RuntimeError(f"dim {d % n} appears multiple times in the list of dims")
        seen.add(d % n)
    return tuple(sorted(d for d in seen if d < ndim)) if ndim else ()


_SUM = _kernels.reduction_kernel("ember_sum", "T x", "T y", "x", "a + b", "y = a", "0")


@op("sum")
def sum(xp, input, dim=None, keepdim=False, *, dtype=None):
    """Sum over ``dim`` (all dims by default); integers and bool sum to int64, halves accumulate in float32."""
    axes = reduce_dims(dim, input.ndim)
    src = D.from_np(input.dtype) if dtype is None else dtype
    rd = D.int64 if src.category < 2 else src
    acc = D.float32 if rd in (D.float16, D.bfloat16) else rd
    x = input.astype(D.storage(acc), copy=False)
    if xp is not np and acc in (D.float32, D.float64) and axes is None and not keepdim:
        r = _SUM(x)
    else:
        r = xp.sum(x, axis=axes, keepdims=keepdim)
    return xp.asarray(r).astype(D.storage(rd), copy=False)


@sum.vjp
def _(ctx, g):
    x = ctx.args[0]
    dim = ctx.kwargs.get("dim", ctx.args[1] if len(ctx.args) > 1 else None)
    keepdim = ctx.kwargs.get("keepdim", ctx.args[2] if len(ctx.args) > 2 else False)
    axes = reduce_dims(dim, x.dim())
    if not keepdim and axes:
        for a in axes:
            g = g.unsqueeze(a)
    return (g.expand(x.shape),)


@op("mean")
def mean(xp, input, dim=None, keepdim=False, *, dtype=None):
    """Arithmetic mean over ``dim``; only floating and complex inputs (or an explicit float ``dtype``)."""
    src = D.from_np(input.dtype) if dtype is None else dtype
    if src.category < 2:
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating point or "
                           f"complex dtype. Got: {TORCH_NAME[src]}")
    axes = reduce_dims(dim, input.ndim)
    acc = D.float32 if src in (D.float16, D.bfloat16) else src
    with np.errstate(invalid="ignore", divide="ignore"):
        r = xp.mean(input.astype(D.storage(acc), copy=False), axis=axes, keepdims=keepdim)
    return xp.asarray(r).astype(D.storage(src), copy=False)


@mean.vjp
def _(ctx, g):
    (gs,) = sum.vjp_fn(ctx, g)
    return (gs * (ctx.out.numel() / max(ctx.args[0].numel(), 1)),)
