"""The linear layer's product (one graph node computing only the gradients wanted), dropout (plain, alpha,
per-feature; masks drawn as PyTorch draws them), embedding lookup, pixel and channel shuffles, cosine similarity and
pairwise distance."""
import math

import numpy as np

from .. import _backend, _blas, _memory_format
from .. import _dtype as D
from .. import _promotion as P
from .._random import generator_for, sample_bernoulli
from .._registry import op
from .._tensor import Tensor
from .activation import bound, grads, tname, up
from .arithmetic import no_graph, wanted
from .comparison import where
from .linalg import _add_scaled, _check_matmul, _mm, _rounded
from .reduction import sum as sum_op

_PLAIN = (np.dtype(np.float32), np.dtype(np.float64))  # the dtypes NumPy's BLAS multiplies as they are
# Outputs up to which the linear's bias is added after the product (a direct BLAS call accumulating onto it costs
# ~2.5 us more in Python than it saves), and gradient rows up to which the bias's is a reduction over them
_SMALL_OUT, _FEW_ROWS = 4096, 32
_ALPHA = 1.7580993408473766  # the SELU negative saturation value, -scale * alpha


# ---- linear --------------------------------------------------------------------------------------
@op("linear", method=False, function=False)
def linear(xp, input, weight, bias=None):
    """``input @ weight^T + bias`` over the last dim of ``input`` (at least 1-D; ``weight`` 2-D, ``bias`` at
    most 1-D): one product, with the bias added into it."""
    flat = input.ndim == 2
    x, wt = input if flat else input.reshape(-1, input.shape[-1]), weight.T
    _check_matmul(x, wt)
    shape = input.shape[:-1] + weight.shape[:1]
    if input.dtype in _PLAIN and type(x) is np.ndarray and (
            bias is None or bias.dtype is input.dtype and bias.shape in (weight.shape[:1], (1,), ())):
        out = np.empty(shape, input.dtype)  # (the transposed weight is a BLAS operand as it stands: no copy)
        out2 = out if flat else out.reshape(x.shape[0], weight.shape[0])
        if bias is None:
            np.matmul(x, wt, out=out2)
        elif out.size <= _SMALL_OUT:
            np.add(np.matmul(x, wt, out=out2), bias, out=out2)
        else:  # the bias written first and the product accumulated onto it: no pass adding it after
            out2[...] = bias
            _blas.gemm(x, wt, out2, 1)
        return out
    prod = _mm(xp, x, wt)
    r = _rounded(prod, input.dtype) if bias is None else _add_scaled(xp, "addmm", bias, prod, input.dtype, 1, 1)
    return r.reshape(shape)


def _product(a, b, shape):
    """``a @ b`` (2-D NumPy arrays of one dtype) as a new array of ``shape`` owning its memory: a gradient the
    autograd engine may then hand to the next VJP to write into (a reshaped product would be a view)."""
    if a.dtype not in _PLAIN or b.dtype is not a.dtype:
        return _rounded(_mm(np, a, b), a.dtype).reshape(shape)
    out = np.empty(shape, a.dtype)
    np.matmul(a, b, out=out.reshape(a.shape[0], b.shape[1]))
    return out


def _column_sums(g2):
    """The bias's gradient: over many rows one matrix-vector product (NumPy's reduction over rows is slower)."""
    n, dt = g2.shape[0], g2.dtype
    if dt not in _PLAIN:
        return sum_op.impl(np, g2, 0)
    return np.add.reduce(g2, 0) if n <= _FEW_ROWS else np.ones(n, dt) @ g2


@linear.vjp
def _(ctx, g):
    args = ctx.args
    input, weight = args[0], args[1]
    bias = args[2] if len(args) > 2 else ctx.kwargs.get("bias")
    want = wanted(ctx)
    gb = bias is not None and (len(want) < 3 or want[2])
    rows = math.prod(input.shape[:-1])  # (not -1 in the reshapes: a weight with no rows or columns has no size)
    if no_graph(input, weight, bias, g) and _backend.is_host(g._data):  # the same products on the arrays
        ga, wa = g._data, weight._data
        g2 = ga.reshape(rows, wa.shape[0])
        gi = Tensor._wrap(_product(g2, wa, input._data.shape)) if want[0] else None
        gw = Tensor._wrap(_product(g2.T, input._data.reshape(rows, wa.shape[1]), wa.shape)) if want[1] else None
        return gi, gw, Tensor._wrap(_column_sums(g2)) if gb else None
    g2 = g.reshape(rows, weight.shape[0])
    # the weight's gradient is made in its own (out, in) layout; the input's only when wanted (not for data)
    gi = (g2 @ weight).reshape(input.shape) if want[0] else None
    gw = g2.mT @ input.reshape(rows, weight.shape[1]) if want[1] else None
    return gi, gw, g2.sum(0) if gb else None


# ---- dropout -------------------------------------------------------------------------------------
def _keep(xp, input, p, feature):
    """A boolean mask: True where kept (probability 1 - p), per element or per (sample, channel) plane; drawn
    as PyTorch's bernoulli_(1 - p) of a mask laid out as the input (contiguous per plane)."""
    if feature:
        return sample_bernoulli(generator_for(None, input), input.shape[:2] + (1,) * (input.ndim - 2), 1 - p)
    return sample_bernoulli(generator_for(None, input), input.shape, 1 - p, _memory_format.like(input))


def _dropout(xp, input, p, train, alpha, feature):
    """(the result, the keep mask or None where no mask was drawn)."""
    if p < 0 or p > 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not train:
        return input, None
    if feature and input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if p == 0:
        return input, None
    if p == 1:
        return input * input.dtype.type(0), None
    if input.dtype.kind not in "fV":
        raise NotImplementedError(f"\"dropout\" not implemented for '{tname(input)}'")
    x = up(input)
    # PyTorch's steps, each rounded to the input's dtype: noise = mask / (1 - p), or for alpha dropout
    # noise = mask * a and an offset ((mask - 1) * alpha * a) + alpha * a * p
    rd = (lambda v: v.astype(input.dtype).astype(x.dtype)) if x.dtype != input.dtype else (lambda v: v)
    keep = _keep(xp, input, p, feature)
    k = keep.astype(x.dtype)
    if alpha:
        a = 1 / math.sqrt((_ALPHA * _ALPHA * p + 1) * (1 - p))  # a Python float: scales in x's precision
        r = rd(x * rd(k * a)) + rd(rd((k - 1) * (_ALPHA * a)) + _ALPHA * a * p)
    else:
        r = x * rd(k / (1 - p))
    return r.astype(input.dtype, copy=False), keep


def _dropout_op(name, alpha, feature):
    """The op ``name`` and, for calls that record a graph, a private twin that also returns the keep mask: the
    gradient needs the mask (a dropped zero and a kept zero give the same output), and the plain op need not
    keep it."""
    def impl(xp, input, p, train):
        return _dropout(xp, input, p, train, alpha, feature)[0]
    impl.__doc__ = (f"{'Alpha d' if alpha else 'D'}ropout{' of whole channels' if feature else ''}: when ``train``, "
                    f"elements are zeroed with probability ``p`` and the rest "
                    f"{'rescaled to keep mean and variance' if alpha else 'scaled by 1 / (1 - p)'}.")
    o = op(name, method=False, inplace=True, differentiable=False)(impl)

    def with_mask(xp, input, p, train):
        r, keep = _dropout(xp, input, p, train, alpha, feature)
        return r, xp.ones((), bool) if keep is None else keep
    with_mask.__doc__ = f"``{name}`` returning its keep mask too (recorded calls)."
    masked = op(f"_{name}_with_mask", method=False, function=False)(with_mask)
    masked.constant_outputs = lambda args, kwargs: (1,)

    @masked.vjp
    def _(ctx, g, gmask=None):
        a = bound(ctx, masked)
        p = a["p"]
        if not a["train"] or p == 0:
            return grads(ctx, masked, input=g)
        if p == 1:
            return grads(ctx, masked, input=g * 0)
        scale = 1 / np.sqrt((_ALPHA * _ALPHA * p + 1) * (1 - p)) if alpha else 1 / (1 - p)
        return grads(ctx, masked, input=where(ctx.out[1], g * scale, 0.0))

    plain, plain_inplace = o.fn, o.inplace_fn

    def fn(input, p=0.5, train=True, **kwargs):
        if isinstance(input, Tensor) and input._rg:
            return masked.fn(input, p, train, **kwargs)[0]
        return plain(input, p, train, **kwargs)

    def inplace(self, p=0.5, train=True):
        if self._rg:  # recorded as PyTorch's in-place dropout is: the input overwritten by the masked result
            return self.copy_(masked.fn(self, p, train)[0])
        return plain_inplace(self, p, train)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__, fn.__module__, fn.op = impl.__doc__, "ember", o
    o.fn, o.inplace_fn = fn, inplace
    return o


dropout = _dropout_op("dropout", False, False)
alpha_dropout = _dropout_op("alpha_dropout", True, False)
feature_dropout = _dropout_op("feature_dropout", False, True)
feature_alpha_dropout = _dropout_op("feature_alpha_dropout", True, True)


@op("native_dropout", method=False)
def native_dropout(xp, input, p, train):
    """Dropout returning its boolean keep mask too (the exact gradient needs it)."""
    if p < 0 or p > 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not train:
        return input.copy(), xp.ones(input.shape, bool)
    x = up(input)
    keep = _keep(xp, input, p, False)  # PyTorch draws the mask also for p = 0 and p = 1
    scale = 0.0 if p == 1 else 1 / (1 - p)
    return (x * keep * x.dtype.type(scale)).astype(input.dtype, copy=False), keep


@native_dropout.vjp
def _(ctx, g, gmask=None):
    a = bound(ctx, native_dropout)
    p = a["p"]
    if not a["train"] or p == 0:
        return grads(ctx, native_dropout, input=g)
    return grads(ctx, native_dropout, input=g * ctx.out[1] * (0.0 if p == 1 else 1 / (1 - p)))


# ---- embedding -----------------------------------------------------------------------------------
@op("embedding", method=False)
def embedding(xp, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by integer ``indices`` (result shape: indices' shape + the row's)."""
    if indices.dtype not in (np.int64, np.int32):
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {tname(indices)} instead (while checking arguments for embedding)")
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    if indices.size and (indices.min() < 0 or indices.max() >= weight.shape[0]):
        raise IndexError("index out of range in self")
    return weight[indices]


@embedding.vjp
def _(ctx, g):
    a = bound(ctx, embedding)
    w, idx, pad = a["weight"], a["indices"].reshape(-1), a["padding_idx"]
    rows = g.reshape((-1, w.shape[1]))
    if a["sparse"]:  # PyTorch's sparse gradient: one entry per looked-up position but the padding row's
        return grads(ctx, embedding, weight=_sparse_rows(idx, rows, None if pad is None or pad < 0 else
                                                         (idx != pad)._data, w.shape, a["scale_grad_by_freq"]))
    if a["scale_grad_by_freq"]:
        counts = idx.new_zeros(w.shape[0]).index_add(0, idx, idx.new_ones(idx.shape))
        rows = rows / counts.index_select(0, idx).unsqueeze(1).to(g.dtype)
    if pad is not None and pad >= 0:  # the padding row gets no gradient
        rows = where((idx != pad).unsqueeze(1), rows, 0.0)
    if no_graph(w, rows) and type(rows._data) is np.ndarray and rows.dtype.is_floating_point and \
            rows._data.dtype.itemsize >= 4:
        return grads(ctx, embedding, weight=Tensor._wrap(_row_sums(idx._data, rows._data, w.shape[0])))
    return grads(ctx, embedding, weight=g.new_zeros(w.shape).index_add(0, idx, rows))


def _sparse_rows(index, rows, keep, shape, scaled=False):
    """The sparse COO gradient of a (rows, D) table ``shape`` made of ``rows`` (positions, D) at rows ``index``
    (positions), only the positions where boolean array ``keep`` is True (all if None); uncoalesced, as PyTorch's,
    which refuses gradients ``scaled`` by the rows' frequencies."""
    from .._sparse import sparse_coo_tensor  # (the sparse module registers ops of its own: imported when needed)
    if scaled:
        raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse gradients")
    if keep is not None:
        at = Tensor._wrap(_backend.xp_of(keep).flatnonzero(keep))
        index, rows = index.index_select(0, at), rows.index_select(0, at)
    return sparse_coo_tensor(index.long().unsqueeze(0), rows, shape)


def _row_sums(index, rows, n):
    """(n, D) zeros plus each of ``rows`` (N, D) at row ``index[k]``, a row named several times getting their sum
    (in order: np.add.at's sums bit for bit): the rows sorted stably by index and summed per index by one reduceat,
    several times faster than np.add.at (LSTM LM and GPT embeddings: 0.6 ms to 0.1-0.3 ms)."""
    out = np.zeros((n, rows.shape[1]), rows.dtype)
    if index.size:
        order = np.argsort(index, kind="stable")
        ordered = index[order]
        starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        out[ordered[starts]] = np.add.reduceat(rows[order], starts, axis=0)
    return out


# ---- shuffles ------------------------------------------------------------------------------------
def _shuffle_check(name, x, r, what):
    if x.ndim < 3:
        raise RuntimeError(f"{name} expects input to have at least 3 dimensions, but got input with {x.ndim} "
                           f"dimension(s)")
    if r <= 0:
        raise RuntimeError(f"{name} expects a positive {what}, but got {r}")


@op("pixel_shuffle", method=False)
def pixel_shuffle(xp, input, upscale_factor):
    """(*, C r^2, H, W) to (*, C, H r, W r): channel blocks become spatial blocks."""
    r = upscale_factor
    _shuffle_check("pixel_shuffle", input, r, "upscale_factor")
    *lead, C, H, W = input.shape
    if C % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={C} is not divisible by {r * r}")
    x = input.reshape(tuple(lead) + (C // (r * r), r, r, H, W))
    n = len(lead)
    x = x.transpose(tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return xp.ascontiguousarray(x).reshape(tuple(lead) + (C // (r * r), H * r, W * r))


@op("pixel_unshuffle", method=False)
def pixel_unshuffle(xp, input, downscale_factor):
    """(*, C, H r, W r) to (*, C r^2, H, W): the inverse of ``pixel_shuffle``."""
    r = downscale_factor
    _shuffle_check("pixel_unshuffle", input, r, "downscale_factor")
    *lead, C, H, W = input.shape
    if H % r or W % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but got "
                           f"height={H} and width={W} for downscale_factor={r}")
    n = len(lead)
    x = input.reshape(tuple(lead) + (C, H // r, r, W // r, r))
    x = x.transpose(tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return xp.ascontiguousarray(x).reshape(tuple(lead) + (C * r * r, H // r, W // r))


@pixel_shuffle.vjp
def _(ctx, g):
    return pixel_unshuffle.fn(g, bound(ctx, pixel_shuffle)["upscale_factor"]), None


@pixel_unshuffle.vjp
def _(ctx, g):
    return pixel_shuffle.fn(g, bound(ctx, pixel_unshuffle)["downscale_factor"]), None


@op("channel_shuffle", method=False)
def channel_shuffle(xp, input, groups):
    """Channels (dim 1) regrouped: (groups, C / groups) read transposed."""
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    C = input.shape[1]
    if C % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {C} channels and {groups} groups.")
    x = input.reshape((input.shape[0], groups, C // groups) + input.shape[2:]).swapaxes(1, 2)
    return xp.ascontiguousarray(x).reshape(input.shape)


@channel_shuffle.vjp
def _(ctx, g):
    groups = bound(ctx, channel_shuffle)["groups"]
    return channel_shuffle.fn(g, g.shape[1] // groups), None


# ---- similarities and distances --------------------------------------------------------------------
@op("cosine_similarity", method=False)
def cosine_similarity(xp, x1, x2, dim=1, eps=1e-08):
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim`` (broadcast), norms clamped below by ``eps``."""
    if x1.dtype.kind not in "fV" or x2.dtype.kind not in "fV":
        raise RuntimeError(f"cosine_similarity requires floating point inputs, got {tname(x1)} and {tname(x2)}")
    a, b = up(x1), up(x2)
    shape = P.broadcast_shapes(a.shape, b.shape)
    eps = float(np.float16(eps)) if np.float16 in (x1.dtype, x2.dtype) else eps  # PyTorch clamps in float16
    n = max(len(shape), 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    a, b = xp.broadcast_to(a, shape), xp.broadcast_to(b, shape)
    na = xp.maximum(xp.sqrt((a * a).sum(dim)), eps)
    nb = xp.maximum(xp.sqrt((b * b).sum(dim)), eps)
    return ((a / xp.expand_dims(na, dim)) * (b / xp.expand_dims(nb, dim))).sum(dim).astype(
        np.result_type(x1.dtype, x2.dtype), copy=False)


@cosine_similarity.vjp
def _(ctx, g):
    a = bound(ctx, cosine_similarity)
    shape = P.broadcast_shapes(a["x1"].shape, a["x2"].shape)
    x1, x2, dim, eps = a["x1"].expand(shape), a["x2"].expand(shape), a["dim"], a["eps"]
    n1 = (x1 * x1).sum(dim, keepdim=True).sqrt()
    n2 = (x2 * x2).sum(dim, keepdim=True).sqrt()
    c1, c2 = n1.clamp(min=eps), n2.clamp(min=eps)
    u1, u2 = x1 / c1, x2 / c2
    gu = g.unsqueeze(dim)
    cos = (u1 * u2).sum(dim, keepdim=True)
    # through x / max(|x|, eps): the projection removing the radial part only where the norm exceeds eps
    g1 = gu * u2 / c1 - where(n1 > eps, gu * cos * u1 / c1, 0.0)
    g2 = gu * u1 / c2 - where(n2 > eps, gu * cos * u2 / c2, 0.0)
    return g1.sum_to_size(a["x1"].shape), g2.sum_to_size(a["x2"].shape)


@op("pairwise_distance", method=False)
def pairwise_distance(xp, x1, x2, p=2.0, eps=1e-06, keepdim=False):
    """``p``-norm of ``x1 - x2 + eps`` along the last dim (broadcast)."""
    P.broadcast_shapes(x1.shape, x2.shape)
    rd = P.array_result_type(x1, x2)
    rd = (D.get_default_dtype() if rd.category < 2 else rd).np  # the float eps promotes integers
    d = up(x1.astype(rd)) - up(x2.astype(rd)) + eps
    shape = d.shape
    if not shape:
        return xp.abs(d).astype(rd)
    ad = xp.abs(d)
    if p == float("inf"):
        r = ad.max(-1, keepdims=keepdim)
    elif p == 0:
        r = (ad != 0).sum(-1, keepdims=keepdim).astype(d.dtype)
    else:
        r = (ad ** p).sum(-1, keepdims=keepdim) ** (1 / p)
    return r.astype(rd, copy=False)


@pairwise_distance.vjp
def _(ctx, g):
    a = bound(ctx, pairwise_distance)
    x1, x2, p, keepdim = a["x1"], a["x2"], a["p"], a["keepdim"]
    d = x1 - x2 + a["eps"]
    out = ctx.out if keepdim or d.dim() == 0 else ctx.out.unsqueeze(-1)
    gu = g if keepdim or d.dim() == 0 else g.unsqueeze(-1)
    if p == float("inf"):
        gd = where(d.abs() == out, gu * d.sign(), 0.0)
        gd = gd / (d.abs() == out).sum(-1, keepdim=True).clamp(min=1) if d.dim() else gd
    elif p == 0:
        gd = d * 0
    else:
        gd = gu * d.sign() * d.abs() ** (p - 1) / where(out == 0, 1.0, out ** (p - 1))
    return gd.sum_to_size(x1.shape), (-gd).sum_to_size(x2.shape)
