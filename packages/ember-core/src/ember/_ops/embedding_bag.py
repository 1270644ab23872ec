"""``embedding_bag``: sums, means or maxima of bags of embedding rows, one graph node per call.

A call gives the rows' ``indices`` (1-D) and the bags' ``offsets`` into them (CSR-like: bag ``b`` holds positions
``offsets[b]`` up to the next offset; with ``include_last_offset`` the last offset ends the last bag, else the input's
end does). Rows equal to ``padding_idx`` take no part (nor count towards a mean).

Sums and means are a product with the (bags, rows) sparse matrix that holds each position's weight at (its bag, its
row): SciPy's (CuPy's on the GPU) CSR product reads the table's rows in place, and the weight gradient is the
transposed product with the output's gradient. Without SciPy, and for half precision, the looked-up rows are reduced
per bag with one ufunc ``reduceat`` (and their gradients summed per row by ``nn_misc._row_sums``). Maxima reduce the
looked-up rows with ``maximum.reduceat``; each bag's gradient goes to its arg-max rows.
"""
import numpy as np

from .. import _backend
from .._registry import op
from .._tensor import Tensor
from .activation import bound, grads, tname, up
from .arithmetic import no_graph, wanted
from .nn_misc import _row_sums, _sparse_rows

_PLAIN = (np.dtype(np.float32), np.dtype(np.float64))  # the dtypes sparse products take as they are

_FLOATS = (np.float16, np.float32, np.float64)
_MODES = ("sum", "mean", "max")


def _check(weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx):
    """PyTorch's argument checks; returns the padding row (normalised) or None."""
    for name, a in (("indices", indices), ("offsets", offsets)):
        if a.dtype not in (np.int64, np.int32):
            raise RuntimeError(f"Expected tensor for argument #1 '{name}' to have one of the following scalar types: "
                               f"Long, Int; but got torch.{tname(a)}Tensor instead (while checking arguments for "
                               f"embedding_bag)")
    if weight.dtype not in _FLOATS and weight.dtype.kind != "V":  # ("V": bfloat16)
        raise RuntimeError(f"Expected tensor for argument #1 'weight' to have one of the following scalar types: "
                           f"Half, BFloat16, Float, Double; but got torch.{tname(weight)}Tensor instead (while "
                           f"checking arguments for embedding_bag)")
    if weight.ndim != 2:
        raise RuntimeError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if indices.ndim != 1:
        raise RuntimeError(f"input has to be a 1D Tensor, but got Tensor of dimension {indices.ndim}")
    if offsets.ndim != 1:
        raise RuntimeError(f"offsets has to be a 1D Tensor, but got Tensor of dimension {offsets.ndim}")
    if mode not in (0, 1, 2):
        raise RuntimeError("`mode` must be sum, mean, or max.")
    if include_last_offset and offsets.size < 1:
        raise RuntimeError("include_last_offset: number of offset should be at least 1")
    if per_sample_weights is not None:
        if mode != 0:
            raise RuntimeError("embedding_bag: per_sample_weights only supported with mode='sum'")
        if per_sample_weights.dtype != weight.dtype:
            raise RuntimeError(f"Expected tensor for argument #1 'weight' to have the same type as tensor for "
                               f"argument #1 'per_sample_weights'; but type torch.{tname(weight)}Tensor does not "
                               f"equal torch.{tname(per_sample_weights)}Tensor (while checking arguments for "
                               f"embedding_bag)")
        if per_sample_weights.ndim != 1 or per_sample_weights.size != indices.size:
            raise RuntimeError(f"embedding_bag: per_sample_weights has to be a 1D Tensor of as many elements as the "
                               f"input ({indices.size}), but got one of shape {list(per_sample_weights.shape)}")
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise RuntimeError(f"padding_idx must be within the number of embeddings, -{n} through {n - 1}, but got "
                               f"{padding_idx}")
        padding_idx %= n
    if offsets.size:
        o = offsets if type(offsets) is np.ndarray else offsets.get()
        if o[0] != 0:
            raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                               f"from position 0. However, got {int(o[0])}")
        if o[-1] > indices.size:
            raise RuntimeError(f"offsets[-1] can not be greater than input's length {indices.size} but got "
                               f"offsets[-1] of {int(o[-1])}")
        if o.size > 1 and (o[1:] < o[:-1]).any():
            k = int(np.flatnonzero(o[1:] < o[:-1])[0]) + 1
            raise RuntimeError(f"offsets has to be non-decreasing, but offsets[{k}] = {int(o[k])} is smaller than "
                               f"offsets[{k - 1}] = {int(o[k - 1])}")
    if indices.size:
        lo, hi = int(indices.min()), int(indices.max())
        if lo < 0 or hi >= n:
            raise RuntimeError(f"embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be "
                               f"{lo if lo < 0 else hi}")
    return padding_idx


def _bags(xp, indices, offsets, include_last_offset, padding_idx):
    """(bag of each position (-1 past the last bag's end), whether each position counts, starts and ends of the
    bags, their numbers of counted rows)."""
    nb = offsets.size - 1 if include_last_offset else offsets.size
    starts = offsets[:nb].astype(np.int64)
    end = (int(offsets[nb]) if include_last_offset else indices.size) if nb else 0
    ends = xp.concatenate([starts[1:], xp.array([end], np.int64)]) if nb else starts
    bag = xp.full(indices.size, -1, np.int64)
    bag[:end] = xp.repeat(xp.arange(nb), ends - starts)  # (offsets[0] is 0: the bags cover [0, end))
    counted = xp.zeros(indices.size, bool)
    counted[:end] = True if padding_idx is None else indices[:end] != padding_idx
    sizes = (ends - starts) if padding_idx is None else xp.bincount(bag[counted], minlength=nb)[:nb]
    return bag, counted, starts, ends, sizes


def _segments(xp, ufunc, rows, starts, ends, fill):
    """Ufunc ``ufunc`` (its name) reduced over rows[start:end] for each bag: ``fill`` for empty bags. NumPy: one
    ``reduceat`` over the non-empty bags' starts (an empty bag between two others has no rows, so the segments end
    right)."""
    out = xp.full((starts.size,) + rows.shape[1:], fill, rows.dtype)
    full = ends > starts
    if not bool(full.any()):
        return out
    last = int(ends[full][-1])
    if xp is np:
        out[full] = getattr(np, ufunc).reduceat(rows[:last], starts[full], axis=0)
    else:  # (CuPy has no reduceat: its scatter form instead)
        bag = xp.searchsorted(starts, xp.arange(last), side="right") - 1
        getattr(xp, ufunc).at(out, bag, rows[:last])
    return out


def _bag_matrix(xp, indices, counted, starts, ends, n, weights):
    """The (bags, n) CSR matrix holding ``weights[p]`` (per position) at (bag of p, indices[p]) for the counted
    positions, in position order (a bag's entries are consecutive); None on the host without SciPy."""
    if xp is np:
        from .._sparse import _scipy
        sps = _scipy()
        if sps is None:
            return None
    else:
        import cupyx.scipy.sparse as sps
    before = xp.concatenate([xp.zeros(1, np.int64), xp.cumsum(counted)])  # counted positions before each one
    indptr = before[xp.concatenate([starts, ends[-1:]])] if starts.size else xp.zeros(1, np.int64)
    keep = xp.flatnonzero(counted)
    return sps.csr_matrix((weights[keep], indices[keep], indptr), shape=(starts.size, n))


@op("embedding_bag", method=False)
def embedding_bag(xp, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums (``mode`` 0, rows scaled by ``per_sample_weights`` if given), means (1) or maxima (2) of bags of rows of
    ``weight``: returns (the (bags, D) result, each position's bag, the bags' sizes, the arg-max rows of ``max``),
    the last three as PyTorch's CPU kernel returns them (empty or zero where it computes none)."""
    pad = _check(weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx)
    bag, counted, starts, ends, sizes = _bags(xp, indices, offsets, include_last_offset, pad)
    D, N = weight.shape[1], indices.size
    idt = np.promote_types(indices.dtype, offsets.dtype)
    if mode == 2:
        return _maxima(xp, weight, indices, bag, counted, starts, ends, sizes, idt)
    out = None
    if weight.dtype in _PLAIN:
        w = xp.ones(N, weight.dtype) if per_sample_weights is None else per_sample_weights
        matrix = _bag_matrix(xp, indices, counted, starts, ends, weight.shape[0], w)
        if matrix is not None:
            out = xp.asarray(matrix @ weight).reshape(starts.size, D)
    if out is None:
        rows = up(weight[indices])
        if per_sample_weights is not None:
            rows *= up(per_sample_weights)[:, None]
        rows[~counted] = 0
        out = _segments(xp, "add", rows, starts, ends, 0)
    if mode == 1:
        out = out / xp.maximum(sizes, 1)[:, None].astype(out.dtype)
        return out.astype(weight.dtype, copy=False), bag.astype(idt), sizes.astype(idt), sizes.astype(idt)
    # PyTorch's CPU kernel sums single and half precision rows without a position->bag map when no row is skipped
    # and the rows are contiguous
    plain = pad is None and weight.itemsize <= 4 and weight.strides[1] == weight.itemsize and (
        per_sample_weights is None or per_sample_weights.strides[0] == per_sample_weights.itemsize)
    return (out.astype(weight.dtype, copy=False), xp.zeros(0, idt) if plain else bag.astype(idt),
            xp.zeros(offsets.size, idt), xp.zeros(offsets.size, idt))


_BLOCK = 1 << 14  # positions per block of whole bags in ``max`` mode: a block's transposed rows stay in cache


def _maxima(xp, weight, indices, bag, counted, starts, ends, sizes, idt):
    """``max`` mode's results: each bag's column maxima and the row each comes from (the first position holding
    it; NaN: the first NaN); 0 for bags without counted rows. On the host, blocks of whole bags are reduced in
    transposed copies (a reduction along contiguous memory is many times faster than one across rows)."""
    D, nb = weight.shape[1], starts.size
    out, arg = xp.zeros((nb, D), up(weight[:0]).dtype), xp.zeros((nb, D), idt)
    full = xp.flatnonzero(sizes > 0)  # (the others stay 0)
    if full.size and xp is np:
        first, last = starts[full], ends[full]
        group = (first - first[0]) // _BLOCK
        edges = np.flatnonzero(np.diff(group)) + 1
        for j0, j1 in zip(np.r_[0, edges], np.r_[edges, full.size]):
            lo, hi = first[j0], last[j1 - 1]
            local = first[j0:j1] - lo
            rows = np.ascontiguousarray(up(weight[indices[lo:hi]]).T)  # (D, positions)
            keep = counted[lo:hi]
            if not keep.all():
                rows[:, ~keep] = -np.inf
            m = np.maximum.reduceat(rows, local, axis=1)
            spread = m[:, np.repeat(np.arange(j1 - j0), np.diff(np.r_[local, hi - lo]))]
            hit = rows == spread
            if np.isnan(m).any():
                hit |= (rows != rows) & (spread != spread)
            if not keep.all():
                hit &= keep
            at = np.minimum.reduceat(np.where(hit, np.arange(hi - lo), hi - lo), local, axis=1)
            out[full[j0:j1]] = m.T
            arg[full[j0:j1]] = indices[lo + at].T
    elif full.size:  # (CuPy: scatter ufuncs over all positions)
        rows = up(weight[indices])
        rows[~counted] = -np.inf
        out = _segments(xp, "maximum", rows, starts, ends, -np.inf)
        out[sizes == 0] = 0
        spread = out[xp.maximum(bag, 0)]
        hit = ((rows == spread) | ((rows != rows) & (spread != spread))) & counted[:, None]
        pos, col = xp.nonzero(hit)  # in position order: a cell's first hit comes first
        cell = bag[pos] * D + col
        order = xp.argsort(cell, kind="stable")
        ordered = cell[order]
        firsts = order[xp.concatenate([xp.ones(1, bool), ordered[1:] != ordered[:-1]])]
        arg.reshape(-1)[cell[firsts]] = indices[pos[firsts]]
    return out.astype(weight.dtype, copy=False), bag.astype(idt), sizes.astype(idt), arg


@embedding_bag.vjp
def _(ctx, g, *rest):
    a = bound(ctx, embedding_bag)
    weight, indices, offsets, mode = a["weight"], a["indices"], a["offsets"], a["mode"]
    psw, n = a["per_sample_weights"], weight.shape[0]
    want = wanted(ctx)
    pad = None if a["padding_idx"] is None else a["padding_idx"] % n
    xp = _backend.xp_of(indices._data)
    bag, counted, starts, ends, sizes = _bags(xp, indices._data, offsets._data, a["include_last_offset"], pad)
    gw = gp = None
    want_psw = psw is not None and (len(want) <= 6 or want[6])
    if not bool(counted.any()):  # no row takes part: zero gradients
        if want[0]:
            gw = _sparse_rows(indices, g.new_zeros((indices.shape[0], weight.shape[1])), counted, weight.shape,
                              a["scale_grad_by_freq"]) if a["sparse"] else g.new_zeros(weight.shape)
        return grads(ctx, embedding_bag, weight=gw, per_sample_weights=psw * 0 if want_psw else None)
    if mode == 2:  # each bag's gradient goes to its arg-max rows, column by column (not for empty bags)
        if want[0]:
            full = Tensor._wrap(xp.flatnonzero(sizes > 0))
            D = weight.shape[1]
            cells = ctx.out[3].index_select(0, full).long() * D + Tensor._wrap(xp.arange(D))
            gw = g.new_zeros(n * D).index_add(0, cells.reshape(-1), g.index_select(0, full).reshape(-1))
            gw = gw.reshape(n, D)
        return grads(ctx, embedding_bag, weight=gw)
    scale = counted.astype(g._data.dtype)  # per position: padding and rows past the last bag get none
    if mode == 1:
        scale /= xp.maximum(sizes, 1)[xp.maximum(bag, 0)]
    rowgrads = None
    if want[0]:
        if a["scale_grad_by_freq"] and not a["sparse"]:
            scale /= xp.bincount(indices._data, minlength=n)[indices._data]
        matrix = None
        if not a["sparse"] and no_graph(g, psw) and g._data.dtype in _PLAIN:
            w = scale if psw is None else scale * psw._data
            matrix = _bag_matrix(xp, indices._data, counted, starts, ends, n, w.astype(g._data.dtype, copy=False))
        if matrix is not None:  # the transposed product: each row's gradient, summed over the positions naming it
            gw = Tensor._wrap(xp.ascontiguousarray(matrix.T @ g._data))
        else:
            rowgrads = g.index_select(0, Tensor._wrap(xp.maximum(bag, 0)))  # (positions, D)
            s = Tensor._wrap(scale).unsqueeze(1)
            rows = rowgrads * (s if psw is None else s * psw.unsqueeze(1))
            if a["sparse"]:
                gw = _sparse_rows(indices, rows, counted, weight.shape, a["scale_grad_by_freq"])
            elif no_graph(rows) and type(rows._data) is np.ndarray and rows._data.dtype.itemsize >= 4:
                gw = Tensor._wrap(_row_sums(indices._data, rows._data, n))
            else:
                gw = rows.new_zeros(weight.shape).index_add(0, indices.long(), rows)
    if want_psw:
        if rowgrads is None:
            rowgrads = g.index_select(0, Tensor._wrap(xp.maximum(bag, 0)))
        gp = (rowgrads * weight.index_select(0, indices)).sum(1) * Tensor._wrap(counted.astype(g._data.dtype))
    return grads(ctx, embedding_bag, weight=gw, per_sample_weights=gp)
