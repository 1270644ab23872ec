"""Statistics: var/std, median, quantile, mode, cov/corrcoef, bincount and histograms."""
import numpy as np

from .. import _dtype as D
from .. import _kernels
from .. import _promotion as P
from .._registry import TORCH_NAME, op
from .._tensor import Tensor
from .comparison import where
from .reduction import (
    arg,
    array_module,
    dtype_of,
    floating,
    inexact,
    nonempty,
    one_dim,
    reduce_dims,
    reduced_shape,
    scan,
    select_grad,
    unreduce,
    up,
)
from .sorting import order

# second pass of var: sum of squared deviations from the broadcast mean, no (x - m) temporary
_SQDEV = _kernels.reduction_kernel("ember_sqdev", "T x, T m", "T y", "(x - m) * (x - m)", "a + b", "y = a", "0")


# ---- var / std -------------------------------------------------------------------------------------
def _var_args(input, dim, unbiased, correction):
    """(axes, correction) of a var/std call: ``var(x, unbiased)`` and ``var(x, dim, unbiased)`` spellings too."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError("var(): pass either unbiased or correction, not both")
    c = correction if correction is not None else (1 if unbiased is None or unbiased else 0)
    return reduce_dims(dim, input.ndim), c


def _moments(xp, input, dim, unbiased, keepdim, correction):
    """(variance, mean) over ``dim`` with ``correction`` subtracted from the count (two-pass)."""
    if not inexact(input):
        raise RuntimeError("std and var only support floating point and complex dtypes")
    axes, c = _var_args(input, dim, unbiased, correction)
    x = up(input)
    n = int(np.prod([x.shape[a] for a in axes])) if axes is not None else x.size
    with np.errstate(divide="ignore", invalid="ignore"):
        m = xp.mean(x, axis=axes, keepdims=True)
        if xp is not np and x.dtype.kind == "f":
            ss = _SQDEV(x, m, axis=axes, keepdims=True)
        else:
            d = xp.abs(x - m) if x.dtype.kind == "c" else x - m
            ss = xp.sum(d * d, axis=axes, keepdims=True)
        v = ss / max(n - c, 0)
    if not keepdim:
        v, m = v.reshape(reduced_shape(x.shape, axes)), m.reshape(reduced_shape(x.shape, axes))
    rd = D.storage(dtype_of(input).to_real())
    return v.astype(rd, copy=False), m.astype(input.dtype, copy=False)


@op("var", result_layout="row_major")
def var(xp, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over ``dim`` dividing by N - correction (correction 1 by default, 0 when not ``unbiased``)."""
    return _moments(xp, input, dim, unbiased, keepdim, correction)[0]


def _var_ctx(ctx):
    x = ctx.args[0]
    axes, c = _var_args(x, arg(ctx, 1, "dim"), arg(ctx, 2, "unbiased"), ctx.kwargs.get("correction"))
    keepdim = arg(ctx, 3, "keepdim", False)
    n = x.numel() // max(x.mean(dim=axes, keepdim=True).numel(), 1) if axes is not None else x.numel()
    return x, axes, c, keepdim, n


def _var_grad(ctx, g):
    x, axes, c, keepdim, n = _var_ctx(ctx)
    centered = x - (x.mean(dim=axes, keepdim=True) if axes is not None else x.mean())
    with np.errstate(divide="ignore"):
        scale = float(np.divide(2.0, n - c))  # inf without degrees of freedom, as PyTorch
    return unreduce(g, x.shape, axes, keepdim) * centered * scale


def _mean_grad(ctx, g):
    x, axes, _, keepdim, n = _var_ctx(ctx)
    return unreduce(g, x.shape, axes, keepdim).expand(x.shape) / n


@var.vjp
def _(ctx, g):
    return (_var_grad(ctx, g),)


@op("std", result_layout="row_major")
def std(xp, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation: the square root of ``var``."""
    return xp.sqrt(_moments(xp, input, dim, unbiased, keepdim, correction)[0])


@std.vjp
def _(ctx, g):
    x, axes, _, keepdim, _ = _var_ctx(ctx)
    return (_var_grad(ctx, unreduce(g / (2 * ctx.out), x.shape, axes, keepdim)),)


@op("var_mean", method=False, result_layout="row_major")
def var_mean(xp, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(variance, mean) over ``dim`` in one pass over the data."""
    return _moments(xp, input, dim, unbiased, keepdim, correction)


@var_mean.vjp
def _(ctx, g_var, g_mean):
    return (_var_grad(ctx, g_var) + _mean_grad(ctx, g_mean),)


@op("std_mean", method=False, result_layout="row_major")
def std_mean(xp, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(standard deviation, mean) over ``dim``."""
    v, m = _moments(xp, input, dim, unbiased, keepdim, correction)
    return xp.sqrt(v), m


@std_mean.vjp
def _(ctx, g_std, g_mean):
    x, axes, _, keepdim, _ = _var_ctx(ctx)
    return (_var_grad(ctx, unreduce(g_std / (2 * ctx.out[0]), x.shape, axes, keepdim)) + _mean_grad(ctx, g_mean),)


# ---- median, mode ----------------------------------------------------------------------------------
def _median_index(xp, x, d, ignore_nan):
    """Index (keeping dim ``d``) of the lower median along ``d``: NaN counts as largest; with NaN present the
    first NaN is the median unless ``ignore_nan``, which takes the median of the other elements."""
    idx = order(xp, x, d)
    n = x.shape[d]
    nans = xp.isnan(up(x)).sum(axis=d, keepdims=True) if inexact(x) else xp.zeros((1,) * x.ndim, np.int64)
    if ignore_nan:
        k = xp.maximum((n - nans - 1) // 2, 0)
    else:
        k = xp.where(nans > 0, n - nans, (n - 1) // 2)
    return xp.take_along_axis(idx, k, axis=d)


def _median(xp, name, input, dim, keepdim, ignore_nan):
    if dim is None:
        if input.size == 0:
            return xp.full((), np.nan if inexact(input) else np.iinfo(np.int64).min, input.dtype)
        flat = input.reshape(-1)
        return flat[_median_index(xp, flat, 0, ignore_nan)].reshape(())
    d = one_dim(dim, input.ndim)
    if input.ndim == 0:
        return input.copy(), xp.zeros((), np.int64)
    nonempty(name, input, (d,))
    i = _median_index(xp, input, d, ignore_nan)
    v = xp.take_along_axis(input, i, axis=d)
    return (v, i) if keepdim else (v.squeeze(d), i.squeeze(d))


def _median_vjp(ctx, g, *_):
    x, dim = ctx.args[0], arg(ctx, 1, "dim")
    if dim is None:  # ties share the gradient, as for max()
        hit = (x == ctx.out) | (x.isnan() & ctx.out.isnan())
        return (g / hit.sum() * hit,)
    return (select_grad(x, dim, ctx.out[1], g, arg(ctx, 2, "keepdim", False)),)


@op("median", returns=("values", "indices"), result_layout="row_major")
def median(xp, input, dim=None, keepdim=False):
    """Lower median of all elements, or (values, indices) along ``dim``; NaN if a NaN is present."""
    if input.dtype.kind == "c":
        raise RuntimeError("median(): does not support complex input")
    return _median(xp, "median", input, dim, keepdim, False)


median.vjp(_median_vjp)


@op("nanmedian", returns=("values", "indices"), result_layout="row_major")
def nanmedian(xp, input, dim=None, keepdim=False):
    """``median`` ignoring NaN (NaN only where every element is NaN)."""
    if input.dtype.kind == "c":
        raise RuntimeError("nanmedian(): does not support complex input")
    return _median(xp, "nanmedian", input, dim, keepdim, True)


nanmedian.vjp(_median_vjp)


@op("mode", returns=("values", "indices"))
def mode(xp, input, dim=-1, keepdim=False):
    """(most frequent value, index of its last occurrence) along ``dim``; the smallest such value on ties."""
    d = one_dim(dim, input.ndim)
    if input.ndim == 0:
        return input.copy(), xp.zeros((), np.int64)
    nonempty("mode", input, (d,))
    idx = order(xp, input, d)
    s = xp.take_along_axis(input, idx, axis=d)
    lead = (slice(None),) * d
    first = xp.ones(s.shape[:d] + (1,) + s.shape[d + 1:], bool)
    starts = xp.concatenate([first, s[lead + (slice(1, None),)] != s[lead + (slice(0, -1),)]], axis=d)
    pos = xp.arange(s.shape[d]).reshape((-1,) + (1,) * (s.ndim - 1 - d))
    run_start = scan(xp, np.maximum, xp.where(starts, pos, 0), d)
    # the running count peaks first at the end of the smallest most frequent value's run, whose last
    # element (the stable sort keeps input order) is that value's last occurrence
    p = xp.argmax(pos - run_start, axis=d, keepdims=True)
    i = xp.take_along_axis(idx, p, axis=d)
    v = xp.take_along_axis(input, i, axis=d)
    return (v, i) if keepdim else (v.squeeze(d), i.squeeze(d))


@mode.vjp
def _(ctx, g, *_):
    return (select_grad(ctx.args[0], arg(ctx, 1, "dim", -1), ctx.out[1], g, arg(ctx, 2, "keepdim", False)),)


# ---- quantile ----------------------------------------------------------------------------------------
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_plan(xp, name, input, q, dim, interpolation, ignore_nan):
    """(input as reduced, low indices, high indices, high weights, axis, whether q is a scalar, slope) giving
    each quantile as ``x[lo] * (1 - w) + x[hi] * w``; indices have the quantiles first, then the reduced shape
    (dim kept). slope: None (w does not depend on q) or (dw/dq, mask where the rank is fixed instead: a NaN
    present, or none but NaN for nanquantile), for linear interpolation."""
    if input.dtype not in (np.float32, np.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if input.size == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                           f"Found {interpolation}")
    scalar_q = not hasattr(q, "ndim")
    if not scalar_q:
        if q.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q.dtype != input.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
    qs = xp.asarray(q, dtype=input.dtype).reshape(-1)
    if bool(((qs < 0) | (qs > 1)).any()):
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    x = input.reshape(-1) if dim is None else input.reshape(1) if input.ndim == 0 else input
    d = 0 if dim is None or input.ndim == 0 else one_dim(dim, input.ndim)
    idx = order(xp, x, d)
    n = x.shape[d]
    nans = xp.isnan(x).sum(axis=d, keepdims=True)
    valid = n - nans if ignore_nan else xp.full_like(nans, n)
    qb = qs.reshape((-1,) + (1,) * x.ndim)
    rank = qb * xp.maximum(valid - 1, 0)
    if not ignore_nan:  # a NaN makes the result NaN: take the last order statistic, a NaN
        rank = xp.where(nans > 0, n - 1, rank)
    fixed = xp.broadcast_to(nans > 0, rank.shape) if not ignore_nan else qb * (valid - 1) < 0
    slope = ((valid - 1).astype(x.dtype), fixed) if interpolation == "linear" else None
    lo, hi = xp.floor(rank), xp.ceil(rank)
    if interpolation == "lower":
        hi = lo
    elif interpolation == "higher":
        lo = hi
    elif interpolation == "nearest":
        lo = hi = xp.round(rank)  # halves to even
    w = {"linear": rank - lo, "midpoint": xp.where(hi > lo, 0.5, 0.0)}.get(interpolation, xp.zeros_like(rank))
    expand = idx[None]
    lo_i = xp.take_along_axis(expand, lo.astype(np.int64), axis=d + 1)
    hi_i = xp.take_along_axis(expand, hi.astype(np.int64), axis=d + 1)
    return x, lo_i, hi_i, w.astype(x.dtype), d, scalar_q, slope


def _quantile(xp, name, input, q, dim, keepdim, interpolation, ignore_nan):
    x, lo, hi, w, d, scalar_q, _ = _quantile_plan(xp, name, input, q, dim, interpolation, ignore_nan)
    xe = x[None]
    a, b = xp.take_along_axis(xe, lo, axis=d + 1), xp.take_along_axis(xe, hi, axis=d + 1)
    r = xp.where(w == 0, a, a + w * (b - a))  # no NaN from inf - inf at weight zero
    return _quantile_shape(xp, r, input, dim, d, keepdim, scalar_q)


def _quantile_shape(xp, r, input, dim, d, keepdim, scalar_q):
    """Results of shape (quantiles, reduced dims kept) in PyTorch's layout."""
    if not keepdim:
        r = r.squeeze(d + 1)
    elif dim is None:
        r = r.reshape(r.shape[:1] + (1,) * input.ndim)
    elif input.ndim == 0:
        r = r.reshape(r.shape[:1])
    return r[0] if scalar_q else r


def _quantile_vjp(name, ignore_nan):
    def vjp(ctx, g):
        # the weights as a function of q (same values): gradients of q, and of x's gradient in q, flow
        x, q, dim = ctx.args[0], arg(ctx, 1, "q"), arg(ctx, 2, "dim")
        qa, interpolation = q._data if isinstance(q, Tensor) else q, ctx.kwargs.get("interpolation", "linear")
        xa, lo, hi, w, d, _, slope = _quantile_plan(array_module(x), name, x._data, qa, dim, interpolation,
                                                    ignore_nan)
        lo, hi, w = (Tensor._wrap(a) for a in (lo, hi, w))
        g = g.reshape(lo.shape)
        xs = x.reshape(xa.shape).unsqueeze(0).expand(lo.shape[:1] + xa.shape)
        gq = None
        if isinstance(q, Tensor) and interpolation != "midpoint":  # midpoint weights never depend on q
            gq = q.new_zeros(q.shape)  # rounded ranks: zero, as PyTorch's
            if slope is not None:
                slope, fixed = (Tensor._wrap(a) for a in slope)
                gw = where(fixed, 0.0, g * (xs.gather(d + 1, hi) - xs.gather(d + 1, lo))) * slope
                gq = gw.reshape(lo.shape[0], -1).sum(1).reshape(q.shape)
                w = w + (q - q.detach()).reshape((-1,) + (1,) * xa.ndim) * where(fixed, 0.0, slope)
        gx = g.new_zeros(xs.shape).scatter_add(d + 1, lo, g * (1 - w)).scatter_add(d + 1, hi, g * w)
        return gx.sum(0).reshape(x.shape), gq
    return vjp


@op("quantile", result_layout="row_major")
def quantile(xp, input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The ``q``-th quantiles along ``dim`` (of all elements by default), interpolating between order statistics;
    NaN where a NaN is present."""
    return _quantile(xp, "quantile", input, q, dim, keepdim, interpolation, False)


quantile.vjp(_quantile_vjp("quantile", False))


@op("nanquantile", result_layout="row_major")
def nanquantile(xp, input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """``quantile`` ignoring NaN (NaN only where every element is NaN)."""
    return _quantile(xp, "nanquantile", input, q, dim, keepdim, interpolation, True)


nanquantile.vjp(_quantile_vjp("nanquantile", True))


# ---- covariance --------------------------------------------------------------------------------------
def _cov_parts(xp, input, correction, fweights, aweights):
    """(centered observations as 2-D, weights or None, normaliser) of ``cov``."""
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = up(floating(input).astype(D.storage(P.array_result_type(floating(input), aweights)), copy=False))
    x = x.reshape(1, -1) if x.ndim < 2 else x
    n = x.shape[1]
    w = None
    if fweights is not None:
        if fweights.dtype.kind not in "iu":
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with "
                               f"{TORCH_NAME[dtype_of(fweights)]} dtype")
        w = fweights.astype(x.dtype)
    if aweights is not None:
        if not inexact(aweights):
            raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights with "
                               f"{TORCH_NAME[dtype_of(aweights)]} dtype")
        w = up(aweights).astype(x.dtype) if w is None else w * up(aweights)
    for name, v in (("fweights", fweights), ("aweights", aweights)):
        if v is not None and (v.ndim > 1 or v.shape[0] != n):
            raise RuntimeError(f"cov(): expected {name} to have one dimension and the same number of elements as "
                               f"the observations ({n})")
    if w is None:
        total, norm = n, n - correction
        avg = x.mean(axis=1, keepdims=True) if n else xp.zeros((x.shape[0], 1), x.dtype)
    else:
        total = w.sum()
        avg = (x * w).sum(axis=1, keepdims=True) / total
        norm = total - (correction * (w * up(aweights)).sum() / total if aweights is not None else correction)
    return x - avg, w, max(norm, 0) if not hasattr(norm, "ndim") else xp.maximum(norm, 0)


@op("cov")
def cov(xp, input, *, correction=1, fweights=None, aweights=None):
    """Covariance matrix of the rows of ``input`` (variables) over its columns (observations)."""
    xc, w, norm = _cov_parts(xp, input, correction, fweights, aweights)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = ((xc if w is None else xc * w) @ xp.conj(xc).T) / norm
    c = c.reshape(()) if input.ndim < 2 else c
    return c.astype(D.storage(P.array_result_type(floating(input), aweights)))


def _cov_grad(x, g, kwargs):
    """VJP of ``cov``: (G + G^H) (x - mean) W / normaliser (the mean's own term vanishes)."""
    fw, aw = kwargs.get("fweights"), kwargs.get("aweights")
    _, w, norm = _cov_parts(array_module(x), x._data, kwargs.get("correction", 1), None if fw is None else fw._data,
                            None if aw is None else aw._data)
    w = None if w is None else Tensor._wrap(w)
    rows = x.reshape(1, -1) if x.dim() < 2 else x
    centered = rows - (rows.mean(1, keepdim=True) if w is None else (rows * w).sum(1, keepdim=True) / w.sum())
    g = g.reshape(1, 1) if g.dim() == 0 else g
    gx = (g + g.mT.conj()) @ (centered if w is None else centered * w) / float(norm)
    return gx.reshape(x.shape)


@cov.vjp
def _(ctx, g):
    return (_cov_grad(ctx.args[0], g, ctx.kwargs),)


@op("corrcoef")
def corrcoef(xp, input):
    """Pearson correlation coefficients of the rows of ``input``, clipped to [-1, 1]."""
    c = cov.impl(xp, input)
    rd, c = c.dtype, up(c)
    if c.ndim == 0:
        with np.errstate(divide="ignore", invalid="ignore"):
            return (c / c).astype(rd)
    d = xp.sqrt(xp.diagonal(c).real)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = c / d[:, None] / d[None, :]
    if r.dtype.kind == "c":
        return xp.clip(r.real, -1, 1) + 1j * xp.clip(r.imag, -1, 1)
    return xp.clip(r, -1, 1).astype(rd)


@corrcoef.vjp
def _(ctx, g):
    x = ctx.args[0]
    c = cov(x)
    if c.dim() == 0:  # c / c: zero in exact arithmetic, but NaN for constant data and a graph like PyTorch's
        return (_cov_grad(x, g / c - g * c / (c * c), {}),)
    s = c.diagonal().rsqrt()
    gc = g * s.unsqueeze(1) * s.unsqueeze(0)
    gs = ((g * c) @ s) + ((g * c).mT @ s)
    gc = gc + (gs * s ** 3 * -0.5).diag_embed()
    return (_cov_grad(x, gc, {}),)


# ---- counting and histograms -------------------------------------------------------------------------
@op("bincount", differentiable=False)
def bincount(xp, input, weights=None, minlength=0):
    """Occurrences of each non-negative integer in the 1-D ``input`` (weighted sums with ``weights``)."""
    if input.dtype.kind not in "iu":
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{TORCH_NAME[dtype_of(input)]}'")
    if input.ndim != 1 or (input.size and int(input.min()) < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is None:
        return xp.bincount(input, minlength=minlength).astype(np.int64)
    if weights.shape != input.shape:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    rd = np.float32 if weights.dtype == np.float32 else np.float64
    return xp.bincount(input, weights=up(weights).astype(np.float64), minlength=minlength).astype(rd)


def _bin_range(xp, name, x, lo, hi, pad):
    """Histogram range: the data's when ``lo == hi`` (widened by ``pad`` when still equal), finite only."""
    if lo == hi and x.size:
        lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        lo, hi = lo - pad, hi + pad
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"{name}: range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise RuntimeError(f"{name}: min should not exceed max, but got min {lo} max {hi}")
    return lo, hi


def _check_histogram_input(name, x):
    if not inexact(x) or x.dtype.kind == "c":
        raise NotImplementedError(f"\"{name}\" not implemented for '{TORCH_NAME[dtype_of(x)]}'")


@op("histc", differentiable=False)
def histc(xp, input, bins=100, min=0, max=0):
    """Counts of ``input`` in ``bins`` equal bins over [min, max] (the data's range when both are 0)."""
    _check_histogram_input("histogram_cpu", input)
    if bins <= 0:
        raise RuntimeError(f"torch.histc: bins must be > 0, but got {bins} for dimension 0")
    x = input.reshape(-1)  # bin positions in the input's own precision, as PyTorch computes them
    lo, hi = _bin_range(xp, "torch.histc", x, float(min), float(max), 1)
    lo_t, hi_t = x.dtype.type(lo), x.dtype.type(hi)
    x = x[(x >= lo_t) & (x <= hi_t)]
    i = ((x - lo_t) * bins / (hi_t - lo_t)).astype(np.int64)
    i = xp.minimum(i, bins - 1)
    return xp.bincount(i, minlength=bins).astype(input.dtype)


@op("histogram", differentiable=False, returns=("hist", "bin_edges"))
def histogram(xp, input, bins, *, range=None, weight=None, density=False):
    """(counts, bin edges) of ``input`` over ``bins`` (a count of equal bins, or the edges); the last bin
    includes its right edge."""
    _check_histogram_input("histogramdd", input)
    x = up(input).reshape(-1)
    if hasattr(bins, "ndim"):
        edges = up(bins).astype(x.dtype)
    else:
        if bins <= 0:
            raise RuntimeError(f"torch.histogramdd(): bins must be > 0, but got {bins} for dimension 0")
        if range is None:  # the data's range; PyTorch's for no data is [0, 1]
            range = (float(x.min()), float(x.max())) if x.size else (0.0, 1.0)
        lo, hi = range
        lo, hi = _bin_range(xp, "torch.histogramdd", x[:0], float(lo), float(hi), 0.5)
        edges = xp.linspace(lo, hi, bins + 1).astype(x.dtype)
    nb = edges.shape[0] - 1
    keep = (x >= edges[0]) & (x <= edges[-1])
    i = xp.minimum(xp.searchsorted(edges, x[keep], side="right") - 1, nb - 1)
    wts = None if weight is None else up(weight).reshape(-1)[keep].astype(np.float64)
    hist = xp.bincount(i, weights=wts, minlength=nb).astype(x.dtype)
    if density:
        with np.errstate(divide="ignore", invalid="ignore"):
            hist = hist / (hist.sum() * xp.diff(edges))
    return hist.astype(input.dtype), edges.astype(input.dtype)
