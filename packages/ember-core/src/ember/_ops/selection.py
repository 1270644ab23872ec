"""Selection by index and mask: gather/scatter, index_*, masked_*, take/put, nonzero.

Positions along a dim are turned into flat positions of a C-contiguous array (``_flat_positions``), so
that gathering is one ``take`` and accumulating scatters are one ``ufunc.at`` (CuPy: its scatter
kernels; products through an atomic compare-and-swap kernel).
"""
import numpy as np

from .. import _dtype as D
from .. import _kernels
from .._parallel import WORKERS as _WORKERS
from .._parallel import pool
from .._promotion import broadcast_shapes
from .._registry import TORCH_NAME, op
from .._tensor import Tensor, _wrap_dim
from .indexing import convert_index
from .layout import constant_pad_nd

_HALF = (np.dtype(D.float16.np), np.dtype(D.bfloat16.np))
_UFUNC = {"sum": "add", "add": "add", "mean": "add", "prod": "multiply", "multiply": "multiply",
          "amax": "maximum", "amin": "minimum"}


def _name(arr):
    return TORCH_NAME[D.from_np(arr.dtype)]


def _as_1d(a):
    return a.reshape(1) if a.ndim == 0 else a


def _check_index_dtype(index, what, int32=True):
    if index.dtype != np.int64 and not (int32 and index.dtype == np.int32):
        raise RuntimeError(f"{what}(): Expected dtype int64 for index")


def _check_bounds(xp, index, size, dim):
    """PyTorch's error for an index outside [0, size) (negative indices are refused)."""
    if index.size:
        lo, hi = int(index.min()), int(index.max())
        if lo < 0 or hi >= size:
            bad = lo if lo < 0 else hi
            raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {size}")


def _flat_positions(xp, shape, d, index, row=0):
    """Flat positions in a C-contiguous array of ``shape`` of the entries ``index`` picks along dim ``d``
    (the entry at [i, j, ...] of ``index`` names the element at [i, ..., index[i, j, ...], ..., j]);
    ``index`` may be rows ``row:`` of a larger index."""
    strides = np.cumprod((1,) + tuple(shape[:0:-1]))[::-1]
    offset = 0  # the position of each entry's slice: small broadcast aranges, one per other dim
    for k, n in enumerate(index.shape):
        if k != d and (n > 1 or k == 0 and row):
            start = row if k == 0 else 0
            step = xp.arange(start, start + n, dtype=np.int64) * int(strides[k])
            offset = offset + step.reshape((n,) + (1,) * (index.ndim - k - 1))
    if strides[d] == 1:
        return xp.add(index, offset, dtype=np.int64)  # one pass, into a fresh array
    pos = xp.multiply(index, int(strides[d]), dtype=np.int64)
    pos += offset
    return pos


_PARALLEL_MIN = 1 << 18  # below this many picks a thread hand-off costs more than it saves


def _gather_rows(flat, shape, d, idx, a, b, out):
    """Rows ``a:b`` (along dim 0) of a gather from C-contiguous ``flat`` into ``out``; the least and greatest
    index of those rows, for the bounds check. "wrap" skips take's per-element bounds check (indices out of
    bounds still land somewhere in ``flat``, and the caller raises)."""
    rows = idx[a:b]
    flat.take(_flat_positions(np, shape, d, rows, a), None, out[a:b], "wrap")
    return rows.min(), rows.max()


def _gather(xp, x, d, idx):
    """``gather`` of in-shape ``idx``: large NumPy ones split by rows over the pool's threads."""
    flat = xp.ascontiguousarray(x).ravel()
    if xp is not np or idx.size < _PARALLEL_MIN or idx.shape[0] < _WORKERS:
        _check_bounds(xp, idx, x.shape[d], d)
        return flat.take(_flat_positions(xp, x.shape, d, idx))
    out = np.empty(idx.shape, x.dtype)
    cuts = np.linspace(0, idx.shape[0], _WORKERS + 1).astype(int)
    jobs = [pool().submit(_gather_rows, flat, x.shape, d, idx, a, b, out) for a, b in zip(cuts[:-1], cuts[1:])]
    ends = [j.result() for j in jobs]
    _check_bounds(xp, np.array([e for pair in ends for e in pair]), x.shape[d], d)
    return out


def _check_scatter_shapes(input, d, index, src=None):
    if max(index.ndim, 1) != max(input.ndim, 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    if src is not None and max(index.ndim, 1) != max(src.ndim, 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    ish, xsh = _as_1d(index).shape, _as_1d(input).shape
    too_big = any(ish[k] > xsh[k] for k in range(len(ish)) if k != d)
    if src is not None:
        ssh = _as_1d(src).shape
        if too_big or any(i > s for i, s in zip(ish, ssh)):
            raise RuntimeError(f"Expected index {list(ish)} to be no larger than self {list(xsh)} apart from "
                               f"dimension {d} and to be no larger size than src {list(ssh)}")
    elif too_big:
        raise RuntimeError(f"Size does not match at dimension {next(k for k in range(len(ish)) if k != d)} "
                           f"expected index {list(ish)} to be no larger than self {list(xsh)} apart from "
                           f"dimension {d}")


_MUL_SRC = r"""
template <typename T, typename B>
__device__ void mul_at(T* addr, T v) {
    B* p = reinterpret_cast<B*>(addr);
    B old = *p, seen;
    do {
        seen = old;
        T cur = *reinterpret_cast<T*>(&seen) * v;
        old = atomicCAS(p, seen, *reinterpret_cast<B*>(&cur));
    } while (seen != old);
}
extern "C" __global__ void NAME(ET* out, const long long* pos, const ET* v, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) mul_at<ET, EB>(out + pos[i], v[i]);
}
"""
_MUL_KERNELS = {np.dtype(dt): _kernels.raw_kernel(name, f"#define ET {t}\n#define EB {b}\n"
                                                   + _MUL_SRC.replace("NAME", name))
                for dt, name, t, b in ((np.float32, "ember_scatter_mul_f32", "float", "unsigned int"),
                                       (np.float64, "ember_scatter_mul_f64", "double", "unsigned long long"),
                                       (np.int64, "ember_scatter_mul_i64", "long long", "unsigned long long"))}


def _accumulate(xp, reduce, out, pos, vals):
    """``out[pos] op= vals`` with repeated positions combined (``pos``: flat positions into a flat ``out``, or an
    index tuple)."""
    how = _UFUNC[reduce]
    if out.dtype == np.bool_ and how in ("add", "multiply"):
        how = "logical_or" if how == "add" else "logical_and"
    if xp is np:
        if how != "add" or not _add_rows(out, pos, vals):
            getattr(np, how).at(out, pos, vals)
    elif how == "multiply":  # CuPy has no multiply scatter: an atomic compare-and-swap kernel
        kernel = _MUL_KERNELS.get(out.dtype)
        work = out if kernel else out.astype(np.int64)  # narrower integers multiply in int64
        n = pos.size
        args = (work, xp.ascontiguousarray(pos.ravel()), xp.ascontiguousarray(vals.ravel()).astype(work.dtype),
                np.int64(n))
        (kernel or _MUL_KERNELS[np.dtype(np.int64)])(((n + 255) // 256,), (256,), args)
        if kernel is None:
            out[...] = work
    else:
        how = {"logical_or": "bitwise_or", "logical_and": "bitwise_and"}.get(how, how)
        getattr(xp, how).at(out, pos, vals)


def _add_rows(out, pos, vals):
    """``out[pos] += vals`` for ``pos`` = (whole dims, one vector of indices) in rounds: round k adds each index's
    k-th row (in order: np.add.at's sums, bit for bit) by one fancy-indexed add, whose indices are distinct. np.add.at
    loops over such indices ~10 times slower (an MoE layer's index_add, each token's row once per expert it went
    to). False, having done nothing, for other indices, for an index repeated more than 64 times, and for what
    np.add.at must report (out of range, a source of another shape)."""
    if out.ndim < 2 or type(pos) is not tuple or len(pos) > out.ndim:
        return False
    d = next((i for i, p in enumerate(pos) if type(p) is np.ndarray), None)
    if d is None or any(type(p) is not slice or p != slice(None) for i, p in enumerate(pos) if i != d) or \
            pos[d].ndim != 1 or pos[d].dtype.kind not in "iu":
        return False
    idx, n = pos[d], out.shape[d]
    if idx.size == 0 or int(idx.max()) >= n or int(idx.min()) < -n:
        return False
    try:
        vals = np.broadcast_to(vals, out.shape[:d] + idx.shape + out.shape[d + 1:])
    except ValueError:
        return False
    idx = np.where(idx < 0, idx + n, idx)
    order = np.argsort(idx, kind="stable")
    ordered = idx[order]
    first = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    rank = np.arange(idx.size) - np.repeat(first, np.diff(np.append(first, idx.size)))  # k: the k-th of its index
    rounds = int(rank.max()) + 1
    if rounds > 64:
        return False
    rows, src = np.moveaxis(out, d, 0), np.moveaxis(vals, d, 0)
    for k in range(rounds):
        take = order[rank == k]
        rows[idx[take]] += src[take]
    return True


def _compute_dtype(arr):
    return np.float32 if arr.dtype in _HALF else arr.dtype


def _region(a, shape):
    """The leading ``shape`` block of ``a`` (a scatter's src may be larger than its index)."""
    return a[tuple(slice(0, s) for s in shape)] if a.shape != shape else a


# ---- gather / scatter -------------------------------------------------------------------------
@op("gather")
def gather(xp, input, dim, index, *, sparse_grad=False):
    """Pick along ``dim`` the entries named by ``index``: out[i][j] = input[index[i][j]][j] (dim 0)."""
    _check_index_dtype(index, "gather")
    d = _wrap_dim(dim, input.ndim)
    _check_scatter_shapes(input, d, index)
    x, idx = _as_1d(input), _as_1d(index)
    if idx.size == 0:
        return xp.empty(index.shape, input.dtype)
    return _gather(xp, x, d, idx).reshape(index.shape)


@gather.vjp
def _(ctx, g):
    x, dim, index = ctx.args[:3]
    gd = g._data
    if type(gd) is np.ndarray and gd.dtype.kind in "fc" and gd.dtype not in _HALF and not g.requires_grad:
        return Tensor._wrap(_gather_grad(x.shape, _wrap_dim(dim, x.dim()), index._data, gd)), None, None
    return g.new_zeros(x.shape).scatter_add(dim, index, g), None, None


def _gather_grad(shape, d, index, g):
    """Gather's input gradient as an array: ``g`` added at the picked positions of zeros of ``shape``, in one
    scatter into the zeros (scatter_add's copy of them spared); an index picking one entry per slice along ``d``
    (nll_loss's) picks each position once, so a plain assignment does."""
    out = np.zeros(shape, g.dtype)
    index, g = _as_1d(index), _as_1d(g)
    if index.size:
        flat, pos = out.reshape(-1), _flat_positions(np, _as_1d(out).shape, d, index)
        if index.shape[d] == 1:
            flat[pos] = g
        else:
            np.add.at(flat, pos, g)
    return out


def _scatter_common(xp, what, input, dim, index, src, reduce):
    _check_index_dtype(index, what)
    d = _wrap_dim(dim, input.ndim)
    is_tensor = hasattr(src, "ndim") and hasattr(src, "dtype")
    if is_tensor and src.dtype != input.dtype:
        raise RuntimeError(f"{what}(): Expected self.dtype to be equal to src.dtype")
    _check_scatter_shapes(input, d, index, src if is_tensor else None)
    x, idx = _as_1d(input), _as_1d(index)
    cdt = _compute_dtype(x)
    out = xp.array(x, dtype=cdt, order="C")
    if idx.size:
        _check_bounds(xp, idx, x.shape[d], d)
        pos = _flat_positions(xp, x.shape, d, idx)
        vals = _region(_as_1d(src), idx.shape).astype(cdt) if is_tensor else xp.full(idx.shape, src, cdt)
        if reduce is None:
            out.ravel()[pos] = vals
        else:
            _accumulate(xp, reduce, out.ravel(), pos, vals)
    return out.astype(input.dtype, copy=False).reshape(input.shape)


@op("scatter", inplace=True)
def scatter(xp, input, dim, index, src=None, value=None, *, reduce=None):
    """Write ``src`` (a tensor, or the number ``value``) into ``input`` at the positions ``index`` names
    along ``dim``; ``reduce="add"``/``"multiply"`` combines instead of overwriting."""
    if reduce not in (None, "add", "multiply"):
        raise RuntimeError(f"reduce argument must be either add or multiply. Got {reduce}")
    return _scatter_common(xp, "scatter", input, dim, index, value if src is None else src, reduce)


def _src_grad(g, dim, index, src):
    """``g`` gathered at ``index``, zero-padded to ``src``'s shape."""
    r = g.gather(dim, index)
    if tuple(r.shape) != tuple(src.shape):
        r = constant_pad_like(r, src.shape)
    return r


def constant_pad_like(t, shape):
    pad = []
    for have, want in zip(reversed(t.shape), reversed(shape)):
        pad += [0, want - have]
    return constant_pad_nd.fn(t, pad)


@scatter.vjp
def _(ctx, g):
    x, dim, index = ctx.args[:3]
    src = ctx.args[3] if len(ctx.args) > 3 else ctx.kwargs.get("src", ctx.kwargs.get("value"))
    if ctx.kwargs.get("reduce") is not None:
        raise RuntimeError("derivative for scatter with a reduce argument is not implemented")
    gx = g.scatter(dim, index, 0)
    return gx, None, None, _src_grad(g, dim, index, src) if isinstance(src, Tensor) else None


@op("scatter_add", inplace=True)
def scatter_add(xp, input, dim, index, src):
    """Add ``src`` into ``input`` at the positions ``index`` names along ``dim`` (repeats accumulate)."""
    return _scatter_common(xp, "scatter", input, dim, index, src, "add")


@scatter_add.vjp
def _(ctx, g):
    x, dim, index, src = ctx.args[:4]
    return g, None, None, _src_grad(g, dim, index, src)


_REDUCES = {"sum": "sum", "prod": "prod", "mean": "mean", "amax": "amax", "amin": "amin", "max": "amax",
            "min": "amin"}


def _identity(reduce, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    big = np.inf if dtype.kind == "f" else (True if dtype.kind == "b" else np.iinfo(dtype).max)
    return -big if reduce == "amax" and dtype.kind != "b" else (False if reduce == "amax" else big)


@op("scatter_reduce", inplace=True)
def scatter_reduce(xp, input, dim, index, src, reduce, *, include_self=True):
    """Combine ``src`` into ``input`` at ``index`` along ``dim`` by sum, prod, mean, amax or amin;
    ``include_self=False`` leaves ``input``'s own values out where something is scattered."""
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    reduce = _REDUCES[reduce]
    _check_index_dtype(index, "scatter")
    d = _wrap_dim(dim, input.ndim)
    if src.dtype != input.dtype:
        raise RuntimeError("scatter_reduce(): Expected self.dtype to be equal to src.dtype")
    _check_scatter_shapes(input, d, index, src)
    if reduce == "mean" and input.dtype == np.bool_:
        raise NotImplementedError("\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'")
    x, idx = _as_1d(input), _as_1d(index)
    cdt = _compute_dtype(x)
    out = xp.array(x, dtype=cdt, order="C")
    if idx.size:
        _check_bounds(xp, idx, x.shape[d], d)
        pos = _flat_positions(xp, x.shape, d, idx)
        flat = out.ravel()
        if not include_self:
            flat[pos] = _identity(reduce, np.dtype(cdt))
        _accumulate(xp, reduce, flat, pos, _region(_as_1d(src), idx.shape).astype(cdt))
        if reduce == "mean":
            count = xp.bincount(pos.ravel(), minlength=flat.size).reshape(out.shape)
            count = count + 1 if include_self else xp.maximum(count, 1)
            out = out // count if out.dtype.kind in "iu" else out / count.astype(out.dtype)
    return out.astype(input.dtype, copy=False).reshape(input.shape)


def _scatter_reduce_grads(g, x, dim, index, src, reduce, include_self, out):
    """Gradients of scatter_reduce with respect to ``x`` and ``src``, in ember ops."""
    hit = g.new_zeros(x.shape).scatter_add(dim, index, g.new_ones(index.shape)) > 0
    if reduce == "sum":
        return (g if include_self else g.masked_fill(hit, 0)), _src_grad(g, dim, index, src)
    if reduce == "mean":
        n = g.new_zeros(x.shape).scatter_add(dim, index, g.new_ones(index.shape))
        n = n + 1 if include_self else n.clamp(min=1)
        gx = g / n if include_self else (g / n).masked_fill(hit, 0)
        return gx, _src_grad(g / n, dim, index, src)
    if reduce in ("amax", "amin"):
        # as in PyTorch, ties with the input's own value share the gradient even when include_self=False
        x_is = (x == out).to(g.dtype)
        s = _region_t(src, index.shape)
        s_is = (s == out.gather(dim, index)).to(g.dtype)
        gn = g / x_is.scatter_add(dim, index, s_is)
        gx = gn * x_is if include_self else (gn * x_is).masked_fill(hit, 0)
        return gx, constant_pad_like(gn.gather(dim, index) * s_is, src.shape)
    # prod: products that leave one factor out, without dividing by zero
    s = _region_t(src, index.shape)
    zero = s == 0
    base = x if include_self else x.new_ones(x.shape)
    nz = base.masked_fill(base == 0, 1).scatter_reduce(dim, index, s.masked_fill(zero, 1), "prod")
    zeros = (base == 0).to(D.int64).scatter_add(dim, index, zero.to(D.int64))
    others_x = x.new_ones(x.shape).scatter_reduce(dim, index, s, "prod")
    gx = g * others_x if include_self else g.masked_fill(hit, 0)
    full_g = (g * out).gather(dim, index)
    alone = (g * nz).gather(dim, index) * (zeros.gather(dim, index) == 1).to(g.dtype)
    gs = (full_g / s.masked_fill(zero, 1)).masked_fill(zero, 0) + alone * zero.to(g.dtype)
    return gx, constant_pad_like(gs, src.shape)


def _region_t(t, shape):
    return t[tuple(slice(0, s) for s in shape)] if tuple(t.shape) != tuple(shape) else t


@scatter_reduce.vjp
def _(ctx, g):
    x, dim, index, src, reduce = (list(ctx.args) + [ctx.kwargs.get("reduce")])[:5]
    gx, gs = _scatter_reduce_grads(g, x, dim, index, src, reduce, ctx.kwargs.get("include_self", True), ctx.out)
    return gx, None, None, gs, None


# ---- index_* ------------------------------------------------------------------------------------
def _check_index_vector(what, index, error=IndexError):
    if index.ndim > 1:
        raise error(f"{what}(): Index is supposed to be a vector")
    if index.dtype not in (np.int64, np.int32):
        raise RuntimeError(f"{what}(): Expected dtype int32 or int64 for index")
    return _as_1d(index)


@op("index_select")
def index_select(xp, input, dim, index):
    """The entries of ``input`` along ``dim`` at the positions in the 1-D ``index``."""
    idx = _check_index_vector("index_select", index)
    x = _as_1d(input)
    d = _wrap_dim(dim, input.ndim)
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= x.shape[d]):
        raise IndexError("index out of range in self")
    r = np.take(x, idx, d, mode="wrap") if xp is np else xp.take(x, idx, axis=d)  # (see take)
    return r.reshape(()) if input.ndim == 0 else r


@index_select.vjp
def _(ctx, g):
    x, dim, index = ctx.args[:3]
    return g.new_zeros(x.shape).index_add(dim, index, g), None, None


def _index_source(what, input, d, index, source):
    """Checks of index_add/index_copy/index_reduce: a vector index and a source of matching shape."""
    idx = _check_index_vector(what, index, RuntimeError)
    if source.dtype != input.dtype:
        raise RuntimeError(f"{what}(): self ({_name(input)}) and source ({_name(source)}) must have the same "
                           "scalar type")
    x, s = _as_1d(input), _as_1d(source)
    if s.shape[d] != idx.size:
        error = IndexError if what == "index_copy_" else RuntimeError
        raise error(f"{what}(): Number of indices ({idx.size}) should be equal to source.size(dim) ({s.shape[d]}), "
                    f"for dim: {d}")
    if x.shape[:d] + x.shape[d + 1:] != s.shape[:d] + s.shape[d + 1:]:
        raise RuntimeError(f"{what}(): Source/destination tensor must have same slice shapes. Destination slice "
                           f"shape: {list(x.shape)} at dimension {d} and source slice shape: {list(s.shape)} at "
                           f"dimension {d}.")
    if idx.size:
        lo, hi, n = int(idx.min()), int(idx.max()), x.shape[d]
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            if what == "index_reduce_":
                raise IndexError("index out of range in self")
            if what == "index_add_":
                raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {n}")
            raise IndexError(f"{what}(): index {bad} is out of bounds for dimension {d} with size {n}")
    return x, idx, s


@op("index_add", inplace=True, result_layout="row_major")
def index_add(xp, input, dim, index, source, *, alpha=1):
    """Add ``alpha * source`` into ``input`` along ``dim`` at the positions in ``index`` (repeats accumulate)."""
    d = _wrap_dim(dim, input.ndim)
    x, idx, s = _index_source("index_add_", input, d, index, source)
    cdt = _compute_dtype(x)
    out = x.astype(cdt, copy=True)
    vals = s.astype(cdt, copy=False) * alpha if alpha != 1 else s.astype(cdt, copy=False)
    _accumulate(xp, "add", out, (slice(None),) * d + (idx,), vals)
    return out.astype(input.dtype, copy=False).reshape(input.shape)


@index_add.vjp
def _(ctx, g):
    x, dim, index, source = ctx.args[:4]
    alpha = ctx.kwargs.get("alpha", 1)
    gs = g.index_select(dim, index).reshape(source.shape)
    return g, None, None, gs * alpha if alpha != 1 else gs


@op("index_copy", inplace=True)
def index_copy(xp, input, dim, index, source):
    """Copy the slices of ``source`` into ``input`` along ``dim`` at the positions in ``index``."""
    d = _wrap_dim(dim, input.ndim)
    x, idx, s = _index_source("index_copy_", input, d, index, source)
    out = x.copy()
    out[(slice(None),) * d + (idx,)] = s
    return out.reshape(input.shape)


@index_copy.vjp
def _(ctx, g):
    x, dim, index, source = ctx.args[:4]
    return g.index_fill(dim, index, 0), None, None, g.index_select(dim, index).reshape(source.shape)


@op("index_fill", inplace=True)
def index_fill(xp, input, dim, index, value):
    """Set the slices of ``input`` along ``dim`` at the positions in ``index`` to ``value``."""
    if index.dtype != np.int64:  # (PyTorch's index_fill takes no int32 index, unlike index_select)
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    idx = _check_index_vector("index_fill_", index)
    if hasattr(value, "ndim") and value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    d = _wrap_dim(dim, input.ndim)
    x = _as_1d(input)
    if idx.size and (int(idx.min()) < -x.shape[d] or int(idx.max()) >= x.shape[d]):
        raise IndexError(f"index {int(idx.max())} is out of bounds for dimension {d} with size {x.shape[d]}")
    out = x.copy()
    out[(slice(None),) * d + (idx,)] = value[()] if hasattr(value, "ndim") else D.number_as(value, out.dtype)
    return out.reshape(input.shape)


@index_fill.vjp
def _(ctx, g):
    x, dim, index, value = ctx.args[:4]
    gv = g.index_select(dim, index).sum() if isinstance(value, Tensor) else None
    return g.index_fill(dim, index, 0), None, None, gv


def _expanded_index(index, d, shape):
    """A 1-D index along ``d`` spread to a full index of ``shape`` (for scatter-style ops)."""
    lead = (1,) * d + (index.size,) + (1,) * (len(shape) - d - 1)
    return index.astype(np.int64).reshape(lead) if len(shape) else index.astype(np.int64)


@op("index_reduce", inplace=True)
def index_reduce(xp, input, dim, index, source, reduce, *, include_self=True):
    """Combine the slices of ``source`` into ``input`` along ``dim`` at ``index`` by prod, mean, amax or amin."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    d = _wrap_dim(dim, input.ndim)
    x, idx, s = _index_source("index_reduce_", input, d, index, source)
    if idx.size == 0:
        return input.copy()
    if input.dtype == np.bool_ and (reduce == "mean" or not include_self):
        raise NotImplementedError("\"div_floor_cpu\" not implemented for 'Bool'" if include_self else
                                  "\"index_reduce_func_exclude_input_init\" not implemented for 'Bool'")
    full = xp.broadcast_to(_expanded_index(idx, d, s.shape), s.shape)
    return scatter_reduce.impl(xp, x, d, full, s, reduce, include_self=include_self).reshape(input.shape)


@index_reduce.vjp
def _(ctx, g):
    x, dim, index, source, reduce = (list(ctx.args) + [ctx.kwargs.get("reduce")])[:5]
    s = source.reshape(-1) if source.dim() == 0 else source
    d = dim % max(x.dim(), 1)
    shape = [1] * s.dim()
    shape[d] = -1
    full = index.reshape(shape).expand(s.shape)
    xs = x.reshape(-1) if x.dim() == 0 else x
    gx, gs = _scatter_reduce_grads(g.reshape(xs.shape), xs, d, full, s, reduce, ctx.kwargs.get("include_self", True),
                                   ctx.out.reshape(xs.shape))
    return gx.reshape(x.shape), None, None, gs.reshape(source.shape), None


# ---- index_put / take / put ---------------------------------------------------------------------
def _index_tuple(xp, indices):
    """A NumPy/CuPy index for index_put's ``indices`` (None there means a whole dim); masks become
    positions so that accumulation sees plain integer indices."""
    items = []
    for i in indices:
        i = slice(None) if i is None else convert_index(xp, i)
        if hasattr(i, "dtype") and i.dtype == np.bool_:
            items.extend(xp.nonzero(i))
        else:
            items.append(i)
    return tuple(items)


@op("index_put", inplace=True)
def index_put(xp, input, indices, values, accumulate=False):
    """``input[indices] = values`` on a copy; ``accumulate=True`` adds, summing repeated positions."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put(): argument 'indices' must be tuple of Tensors, not {type(indices).__name__}")
    if hasattr(values, "dtype") and values.dtype != input.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got {_name(input)} for the "
                           f"destination and {_name(values)} for the source.")
    if sum(i is not Ellipsis for i in indices) > max(input.ndim, 1):
        raise IndexError(f"too many indices for tensor of dimension {input.ndim} (got {len(indices)})")
    idx = _index_tuple(xp, indices)
    cdt = _compute_dtype(input) if accumulate else input.dtype
    out = input.astype(cdt, copy=True)
    try:
        if accumulate:
            _accumulate(xp, "add", out, idx, values.astype(cdt, copy=False) if hasattr(values, "dtype") else values)
        else:
            out[idx] = values
    except IndexError as e:
        raise IndexError(str(e).replace("axis", "dimension")) from None
    except ValueError as e:
        raise RuntimeError(f"shape mismatch: {e}") from None
    return out.astype(input.dtype, copy=False)


@index_put.vjp
def _(ctx, g):
    x, indices, values = ctx.args[:3]
    accumulate = ctx.args[3] if len(ctx.args) > 3 else ctx.kwargs.get("accumulate", False)
    gx = g if accumulate else g.index_put(tuple(indices), g.new_zeros(()))
    idx = tuple(slice(None) if i is None else i for i in indices)
    gv = g[idx].sum_to_size(values.shape) if isinstance(values, Tensor) else None
    return gx, None, gv, None


def _flat_index(what, index, numel):
    if index.dtype != np.int64:
        raise RuntimeError(f"{what}(): Expected a long tensor for index, but got {_name(index)}")
    if index.size:
        lo, hi = int(index.min()), int(index.max())
        if lo < -numel or hi >= numel:
            raise IndexError(f"out of range: tried to access index {lo if lo < -numel else hi} on a tensor of "
                             f"{numel} elements.")
    return index


@op("take")
def take(xp, input, index):
    """The elements of ``input``, read as 1-D, at the positions in ``index`` (negative ones count from the end)."""
    idx = _flat_index("take", index, input.size)
    if input.size == 0:
        return xp.empty(index.shape, input.dtype)
    flat = xp.ascontiguousarray(input).ravel()
    # the indices are checked: NumPy's "wrap" skips a second per-element check and reads negative ones from the end
    return np.take(flat, idx, mode="wrap") if xp is np else flat[idx]


@take.vjp
def _(ctx, g):
    x, index = ctx.args[:2]
    return g.new_zeros(x.shape).put(index, g, accumulate=True), None


@op("put", inplace=True)
def put(xp, input, index, source, accumulate=False):
    """Write ``source`` into ``input``, read as 1-D, at the positions in ``index``; ``accumulate`` adds."""
    idx = _flat_index("put_", index, input.size)
    if source.size != index.size:
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source.size}, index.numel() = {index.size}")
    if source.dtype != input.dtype:
        raise RuntimeError(f"put_(): self ({_name(input)}) and source ({_name(source)}) must have the same "
                           "scalar type")
    cdt = _compute_dtype(input)
    out = xp.array(input, dtype=cdt, order="C")
    pos, vals = idx.ravel() % max(input.size, 1), source.ravel().astype(cdt)
    if accumulate:
        _accumulate(xp, "add", out.ravel(), pos, vals)
    else:
        out.ravel()[pos] = vals
    return out.astype(input.dtype, copy=False)


@put.vjp
def _(ctx, g):
    x, index, source = ctx.args[:3]
    accumulate = ctx.args[3] if len(ctx.args) > 3 else ctx.kwargs.get("accumulate", False)
    gx = g if accumulate else g.put(index, g.new_zeros(source.shape))
    return gx, None, g.take(index).reshape(source.shape), None


@op("take_along_dim")
def take_along_dim(xp, input, indices, dim=None):
    """Pick along ``dim`` as gather does, broadcasting ``input`` and ``indices`` on the other dims
    (``dim=None``: both read as 1-D)."""
    if indices.dtype != np.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be int64 but got {indices.dtype}")
    if dim is None:
        return gather.impl(xp, input.reshape(-1), 0, indices.reshape(-1))
    d = _wrap_dim(dim, input.ndim)
    if input.ndim != indices.ndim:
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {input.ndim} dimensions for input, and {indices.ndim} dimensions for indices")
    xs, ish = list(input.shape), list(indices.shape)
    xs[d] = ish[d] = 1
    b = list(broadcast_shapes(tuple(xs), tuple(ish)))
    xs_b, is_b = b.copy(), b.copy()
    xs_b[d], is_b[d] = input.shape[d], indices.shape[d]
    idx = xp.broadcast_to(indices, tuple(is_b))
    return gather.impl(xp, xp.broadcast_to(input, tuple(xs_b)), d, idx)


@take_along_dim.vjp
def _(ctx, g):
    x, indices = ctx.args[:2]
    dim = ctx.args[2] if len(ctx.args) > 2 else ctx.kwargs.get("dim")
    if dim is None:
        return g.new_zeros(x.numel()).scatter_add(0, indices.reshape(-1), g).reshape(x.shape), None, None
    d = dim % x.dim()
    xs, ish = list(x.shape), list(indices.shape)
    xs[d] = ish[d] = 1
    shape = list(g.shape)
    shape[d] = x.shape[d]
    idx = indices.expand(*[s if k != d else indices.shape[d] for k, s in enumerate(g.shape)])
    return g.new_zeros(shape).scatter_add(d, idx, g).sum_to_size(x.shape), None, None


# ---- masks --------------------------------------------------------------------------------------
def _check_mask(what, mask):
    if mask.dtype != np.bool_:
        raise RuntimeError(f"{what} only supports boolean masks, but got mask with dtype {_mask_name(mask)}")


def _mask_name(mask):
    return {np.dtype(np.int64): "long int", np.dtype(np.uint8): "unsigned char", np.dtype(np.float32): "float",
            np.dtype(np.int32): "int", np.dtype(np.float64): "double"}.get(np.dtype(mask.dtype), str(mask.dtype))


@op("masked_fill", inplace=True, result_layout="row_major")
def masked_fill(xp, input, mask, value):
    """``value`` where ``mask`` is true, ``input`` elsewhere (``mask`` broadcast against ``input``)."""
    _check_mask("masked_fill_", mask)
    if hasattr(value, "ndim"):
        if value.ndim:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        value = value[()]
    if isinstance(value, complex) and input.dtype.kind != "c":
        raise RuntimeError("value cannot be converted to type without overflow")
    broadcast_shapes(input.shape, mask.shape)
    fill = xp.asarray(D.number_as(value, input.dtype)).astype(_compute_dtype(input))
    return xp.where(mask, fill, input.astype(fill.dtype, copy=False)).astype(input.dtype, copy=False)


@masked_fill.vjp
def _(ctx, g):
    x, mask, value = ctx.args[:3]
    gv = g.masked_fill(~mask, 0).sum() if isinstance(value, Tensor) else None
    return g.masked_fill(mask, 0).sum_to_size(x.shape), None, gv


@op("masked_select")
def masked_select(xp, input, mask):
    """The elements of ``input`` where ``mask`` is true, as 1-D (both broadcast to a common shape)."""
    _check_mask("masked_select:", mask)
    broadcast_shapes(input.shape, mask.shape)
    x, m = xp.broadcast_arrays(input, mask)
    return x[m]


@masked_select.vjp
def _(ctx, g):
    x, mask = ctx.args[:2]
    shape = broadcast_shapes(tuple(x.shape), tuple(mask.shape))
    return g.new_zeros(shape).masked_scatter(mask, g).sum_to_size(x.shape), None


@op("masked_scatter", inplace=True)
def masked_scatter(xp, input, mask, source):
    """``input`` with the positions where ``mask`` is true filled, in order, from ``source``'s elements."""
    _check_mask("masked_scatter_", mask)
    if source.dtype != input.dtype:
        raise RuntimeError(f"masked_scatter_: expected self and source to have same dtypes but got "
                           f"{_name(input)} and {_name(source)}")
    broadcast_shapes(input.shape, mask.shape)
    out, m = xp.broadcast_arrays(input, mask)
    out = out.copy()
    n = int(m.sum())
    if n > source.size:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    out[m] = source.ravel()[:n]
    return out


@masked_scatter.vjp
def _(ctx, g):
    x, mask, source = ctx.args[:3]
    picked = g.masked_select(mask)
    gs = constant_pad_nd.fn(picked, [0, source.numel() - picked.numel()]).reshape(source.shape)
    return g.masked_fill(mask, 0).sum_to_size(x.shape), None, gs


# ---- nonzero ------------------------------------------------------------------------------------
@op("nonzero", differentiable=False, result_layout="row_major")
def nonzero(xp, input, *, as_tuple=False):
    """The positions of the nonzero elements: an (n, ndim) int64 tensor, or one 1-D tensor per dim."""
    if as_tuple:
        return tuple(i.astype(np.int64, copy=False) for i in xp.nonzero(_as_1d(input)))
    return xp.argwhere(input).astype(np.int64, copy=False)


@op("argwhere", differentiable=False)
def argwhere(xp, input):
    """``nonzero(input)``: positions of the nonzero elements as an (n, ndim) tensor."""
    return nonzero.impl(xp, input)


@op("nonzero_static", differentiable=False)
def nonzero_static(xp, input, *, size, fill_value=-1):
    """``nonzero`` truncated or padded with ``fill_value`` to exactly ``size`` rows."""
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer but got {size}")
    found = nonzero.impl(xp, input)[:size]
    pad = xp.full((size - found.shape[0], input.ndim), fill_value, np.int64)
    return xp.concatenate([found, pad])
