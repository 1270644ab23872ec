"""Sorting and searching: sort, argsort, topk, kthvalue, unique, searchsorted, bucketize, isin."""
import numpy as np

from .. import _dtype as D
from .. import _promotion as P
from .._registry import TORCH_NAME, op
from .pointwise import refuse_complex
from .reduction import arg, dtype_of, nonempty, one_dim, scatter_grad, select_grad, up


def order(xp, x, d, descending=False):
    """Stable sorting permutation along ``d``: ties keep their order; NaN last ascending, first descending."""
    if x.dtype.kind == "c":
        raise RuntimeError("sort(): input tensor must be of real type, got complex")
    k = up(x)
    if not descending:
        return xp.argsort(k, axis=d, kind="stable")
    # a stable ascending sort of the reversed slice, read backwards: descending with ties in input order
    return k.shape[d] - 1 - xp.flip(xp.argsort(xp.flip(k, d), axis=d, kind="stable"), d)


def _sorted(xp, x, dim, descending):
    d = one_dim(dim, x.ndim)
    if x.ndim == 0:
        return x.copy(), xp.zeros((), np.int64)
    i = order(xp, x, d, descending)
    return xp.take_along_axis(x, i, axis=d), i


@op("sort", returns=("values", "indices"))
def sort(xp, input, dim=-1, descending=False, *, stable=False):
    """(values, indices) sorted along ``dim``; always stable; NaN sorts as the largest value."""
    return _sorted(xp, input, dim, descending)


@sort.vjp
def _(ctx, g, *_):
    return (scatter_grad(ctx.args[0], arg(ctx, 1, "dim", -1), ctx.out[1], g),)


@op("argsort", differentiable=False)
def argsort(xp, input, dim=-1, descending=False, *, stable=False):
    """Indices that sort ``input`` along ``dim`` (stable)."""
    return _sorted(xp, input, dim, descending)[1]


@op("msort")
def msort(xp, input):
    """``input`` sorted along its first dim."""
    return _sorted(xp, input, 0, False)[0]


@msort.vjp
def _(ctx, g):
    x = ctx.args[0]
    return (scatter_grad(x, 0, x.argsort(0), g),)


@op("topk", returns=("values", "indices"), result_layout="row_major")
def topk(xp, input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (or smallest) elements along ``dim`` and their indices, in sorted order."""
    d = one_dim(dim, input.ndim)
    n = input.shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if input.ndim == 0:
        return input.copy(), xp.zeros((), np.int64)
    i = order(xp, input, d, largest)[(slice(None),) * d + (slice(0, k),)]
    return xp.take_along_axis(input, i, axis=d), i


@topk.vjp
def _(ctx, g, *_):
    return (scatter_grad(ctx.args[0], arg(ctx, 2, "dim", -1), ctx.out[1], g),)


@op("kthvalue", returns=("values", "indices"), result_layout="row_major")
def kthvalue(xp, input, k, dim=-1, keepdim=False):
    """(k-th smallest value, its index) along ``dim``; k counts from 1."""
    d = one_dim(dim, input.ndim)
    nonempty("kthvalue", input, (d,) if input.ndim else ())
    n = input.shape[d] if input.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if input.ndim == 0:
        return input.copy(), xp.zeros((), np.int64)
    i = order(xp, input, d)[(slice(None),) * d + (slice(k - 1, k),)]
    v = xp.take_along_axis(input, i, axis=d)
    return (v, i) if keepdim else (v.squeeze(d), i.squeeze(d))


@kthvalue.vjp
def _(ctx, g, *_):
    x = ctx.args[0]
    return (select_grad(x, arg(ctx, 2, "dim", -1), ctx.out[1], g, arg(ctx, 3, "keepdim", False)),)


# ---- unique ---------------------------------------------------------------------------------------
def _extras(out, inverse, counts, return_inverse, return_counts):
    if not (return_inverse or return_counts):
        return out
    return (out,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())


@op("unique", differentiable=False)
def unique(xp, input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements (or slices along ``dim``) in ascending order, optionally with the inverse
    mapping and the counts; NaNs are all distinct."""
    refuse_complex("unique" if dim is None else "unique_dim", input)
    x = up(input)
    if dim is None:
        u, inv, cnt = xp.unique(x.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False)
        inv = inv.reshape(input.shape)
    else:
        d = one_dim(dim, input.ndim)
        if input.ndim == 0:
            raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
        u, inv, cnt = xp.unique(x, return_inverse=True, return_counts=True, axis=d, equal_nan=False)
        inv = inv.reshape(-1)
    return _extras(u.astype(input.dtype), inv.astype(np.int64), cnt.astype(np.int64), return_inverse, return_counts)


@op("unique_consecutive", differentiable=False)
def unique_consecutive(xp, input, return_inverse=False, return_counts=False, dim=None):
    """``input`` with each run of equal consecutive elements (or slices along ``dim``) kept once."""
    refuse_complex("unique", input)
    if dim is None:
        x, d = input.reshape(-1), 0
    else:
        d = one_dim(dim, input.ndim)
        x = input if input.ndim else input.reshape(1)
    n = x.shape[d]
    lead = (slice(None),) * d
    changed = x[lead + (slice(1, None),)] != x[lead + (slice(0, -1),)]
    if x.ndim > 1:
        changed = changed.any(axis=tuple(a for a in range(x.ndim) if a != d))
    starts = xp.concatenate([xp.ones(min(n, 1), bool), changed])
    inv = xp.cumsum(starts) - 1
    first = xp.nonzero(starts)[0]
    counts = xp.diff(xp.concatenate([first, xp.asarray([n])]))
    out = x[lead + (first,)]
    return _extras(out, inv.reshape(input.shape if dim is None else -1), counts.astype(np.int64),
                   return_inverse, return_counts)


# ---- searching ------------------------------------------------------------------------------------
def _search(xp, seq, values, right):
    """Insertion points of ``values`` in rows of ``seq`` sorted along the last dim (leading dims matching)."""
    if seq.ndim == 1:
        return xp.searchsorted(seq, values, side="right" if right else "left")
    # merge each row's values with its sequence (values first among equals for the left side, last for the
    # right); a value's merged position minus its rank among the values counts the sequence elements before it
    m = values.shape[-1]
    both = xp.concatenate([seq, values] if right else [values, seq], axis=-1)
    pos = xp.argsort(xp.argsort(both, axis=-1, kind="stable"), axis=-1, kind="stable")
    pos = pos[..., seq.shape[-1]:] if right else pos[..., :m]
    rank = xp.argsort(xp.argsort(values, axis=-1, kind="stable"), axis=-1, kind="stable")
    return pos - rank


def _common(xp, a, b):
    """Both operands (arrays or Python numbers) as arrays of their promoted dtype (halves as float32)."""
    d = D.storage(P.array_result_type(a, b))
    return [up(v.astype(d, copy=False) if hasattr(v, "ndim") else xp.asarray(v, dtype=d)) for v in (a, b)]


@op("searchsorted", differentiable=False, method=False)
def searchsorted(xp, sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Indices at which ``input`` would be inserted into ``sorted_sequence`` (sorted along its last dim)
    to keep it sorted; ``right``/``side="right"`` puts them after equal elements."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    seq = sorted_sequence
    scalar = not hasattr(input, "ndim")
    if seq.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 "
                           "dimension")
    if not scalar and seq.ndim > 1 and seq.shape[:-1] != input.shape[:-1]:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           "dimensions of boundaries tensor and input value tensor must match, but we got "
                           f"boundaries tensor {list(seq.shape)} and input value tensor {list(input.shape)}")
    if scalar and seq.ndim > 1:
        raise RuntimeError("torch.searchsorted(): input value can be a scalar only when boundaries tensor "
                           f"dimension is 1, but we got boundaries tensor dim({seq.ndim}) and input value's "
                           "dim(0) numel(1)")
    refuse_complex("searchsorted_out_cpu", seq, input)
    if sorter is not None:
        seq = xp.take_along_axis(seq, sorter, axis=-1)
    seq, values = _common(xp, seq, input)
    r = _search(xp, seq, values, right)
    return xp.asarray(r).astype(np.int32 if out_int32 else np.int64)


@op("bucketize", differentiable=False, method=False)
def bucketize(xp, input, boundaries, *, out_int32=False, right=False):
    """Index of the bucket of each element: boundaries[i-1] < x <= boundaries[i] (``<`` and ``<=`` swap
    when ``right``)."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted.impl(xp, boundaries, input, out_int32=out_int32, right=right)


@op("isin", differentiable=False, method=False)
def isin(xp, elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of ``elements`` occurs in ``test_elements`` (negated with ``invert``)."""
    for v in (elements, test_elements):
        if hasattr(v, "dtype") and v.dtype.kind == "c":
            raise RuntimeError(f"Unsupported input type encountered for isin(): {TORCH_NAME[dtype_of(v)]}")
    a, b = _common(xp, elements, test_elements)
    return xp.isin(a, b, invert=invert)
