"""Normalization: batch (with running statistics updated in place), instance, layer, group and RMS norm.

Each normalizes over some axes, then scales and shifts per channel (or per normalized element). Statistics
are computed in float32 for half-precision inputs. The gradients share one formula for the normalized
output, written in ember ops."""
import math

import numpy as np

from .. import _loops, _parallel
from .._registry import op
from .._tensor import Tensor
from .activation import bound, grads, tname, up
from .arithmetic import no_graph, saves, wanted


def _channel_shape(x, ndim):
    """Shape broadcasting a per-channel (dim 1) vector against an ``ndim``-dim input."""
    return (1, -1) + (1,) * (ndim - 2)


def _stats(xp, x, axes):
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return mean, var


def _affine(xp, y, weight, bias, shape):
    if weight is not None:
        y = y * up(weight).reshape(shape)
    if bias is not None:
        y = y + up(bias).reshape(shape)
    return y


def _float(name, x):
    if x.dtype.kind not in "fV":
        raise NotImplementedError(f"\"{name}\" not implemented for '{tname(x)}'")
    return up(x)


def _norm_grad(x, g, axes, eps):
    """Gradient of ``(x - mean) / sqrt(var + eps)`` (statistics over ``axes``) for the output gradient ``g``."""
    mean = x.mean(axes, keepdim=True)
    r = (((x - mean) ** 2).mean(axes, keepdim=True) + eps).rsqrt()
    xhat = (x - mean) * r
    return r * (g - g.mean(axes, keepdim=True) - xhat * (g * xhat).mean(axes, keepdim=True)), xhat


def _update(running, stat, momentum):
    """``running = (1 - momentum) * running + momentum * stat``, in place (the running tensors are buffers)."""
    if running is not None:
        running[...] = ((1 - momentum) * up(running) + momentum * stat).astype(running.dtype)


# ---- batch and instance norm ------------------------------------------------------------------------
def _channel_sums(xp, x3):
    """Per-channel sums of an (N, C, L) array (on the host by einsum: NumPy's reduction over the outer and inner
    axes at once is 3-10x slower; a BLAS product as fast, but its threads would then spin on the other core)."""
    if xp is np:
        return np.einsum("ncl->c", x3)
    return x3.sum(axis=(0, 2))


def _channel_dots(xp, a3, b3):
    """Per-channel sums of ``a3 * b3`` for (N, C, L) arrays (on the host without the product's temporary)."""
    if xp is np:
        return np.einsum("ncl,ncl->c", a3, b3)
    return (a3 * b3).sum(axis=(0, 2))


def _by_samples(xp, fn, x3):
    """``fn(lo, hi)`` over the samples of an (N, C, L) array: on the host in two halves over the cores when large
    (every pass is per channel: the halves are blocks of whole samples), the results (per-channel partial sums)
    added."""
    if xp is not np or x3.size < _parallel.MIN_SIZE:
        return fn(0, x3.shape[0])
    first, second = _parallel.halves(fn, x3.shape[0])
    return first if second is None else tuple(a + b for a, b in zip(first, second))


def _batch_stats(xp, x3, g3=None):
    """(mean, biased variance, x3 - mean, and with ``g3`` the sums of g3 and of g3 * (x3 - mean)) per channel of an
    (N, C, L) array, the variance in two passes (as PyTorch's: no cancellation when the mean is large)."""
    n = x3.shape[0] * x3.shape[2]
    sums = _by_samples(xp, lambda lo, hi: tuple(_channel_sums(xp, a[lo:hi]) for a in (x3, g3) if a is not None), x3)
    mean, g_sums = sums[0] / n, sums[1:]
    centered = xp.empty_like(x3)

    def part(lo, hi):
        c = xp.subtract(x3[lo:hi], mean[:, None], out=centered[lo:hi])
        return (_channel_dots(xp, c, c),) + ((_channel_dots(xp, g3[lo:hi], c),) if g3 is not None else ())
    sums = _by_samples(xp, part, x3)
    return (mean, sums[0] / n, centered) + g_sums + sums[1:]


def _batch_norm(xp, name, input, weight, bias, running_mean, running_var, training, momentum, eps):
    x = _float(name, input)
    if x.ndim < 2:
        raise RuntimeError(f"{name}: input must have at least 2 dims, got {x.ndim}")
    C = x.shape[1]
    params = [t for t in (weight, bias, running_mean, running_var) if t is not None]
    for t in params:  # one parameter dtype: the input's, or float32 for a half-precision input
        if t.dtype != params[0].dtype or (t.dtype != input.dtype and (t.dtype != np.float32 or x is input)):
            raise RuntimeError(f"expected scalar type {tname(input)} but found {tname(t)}")
    for t, what in ((weight, "weight"), (bias, "bias"), (running_mean, "running_mean"), (running_var, "running_var")):
        if t is not None and t.size != C:
            raise RuntimeError(f"{what} should contain {C} elements not {t.size}")
    x3 = x.reshape(x.shape[0], C, math.prod(x.shape[2:]))
    out = None
    if training:
        if x.size == 0:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {list(x.shape)}")
        mean, var, out = _batch_stats(xp, x3)
        n = x.size // C
        _update(running_mean, mean, momentum)
        _update(running_var, var * (n / max(n - 1, 1)), momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        mean, var = up(running_mean).reshape(-1), up(running_var).reshape(-1)
    # y = x * scale + shift per channel (two passes, into the centred copy's memory when there is one)
    scale = 1 / xp.sqrt(var + eps)
    if weight is not None:
        scale = scale * up(weight)
    shift = -mean * scale
    if bias is not None:
        shift = shift + up(bias)
    y = xp.empty_like(x3) if out is None else out

    def part(lo, hi):
        xp.multiply(x3[lo:hi], scale[:, None], out=y[lo:hi])
        y[lo:hi] += shift[:, None]
        return ()
    _by_samples(xp, part, x3)
    return y.reshape(x.shape).astype(input.dtype, copy=False)


def _batch_norm_array_grads(x, g, w, eps, need_input):
    """(input, weight, bias) gradients of training-mode batch norm as arrays (host float32/float64 ``x`` and ``g``
    of one dtype, ``w`` None or an array): the statistics recomputed, then ``A g + B (x - mean) + D`` per
    channel, where ``A = w rstd``, ``B = -A rstd^2 sum(g (x - mean)) / n`` and ``D = -A sum(g) / n``."""
    N, C, L = x.shape[0], x.shape[1], math.prod(x.shape[2:])
    n = N * L
    x3, g3 = x.reshape(N, C, L), g.reshape(N, C, L)
    _, var, centered, sum_g, dot = _batch_stats(np, x3, g3)
    rstd = 1 / np.sqrt(var + eps)
    gx = None
    if need_input:
        a = rstd if w is None else rstd * w
        b, d = (-a * rstd * rstd * dot / n)[:, None], (-a * sum_g / n)[:, None]

        def part(lo, hi):
            c = centered[lo:hi]
            c *= b
            c += d
            c += g3[lo:hi] * a[:, None]
            return ()
        _by_samples(np, part, x3)
        gx = centered.reshape(x.shape)
    return gx, dot * rstd, sum_g


@op("batch_norm", method=False)
def batch_norm(xp, input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    """Normalize each channel (dim 1) by batch statistics when ``training`` (updating the running ones in
    place), else by the running statistics; then scale and shift."""
    return _batch_norm(xp, "batch_norm", input, weight, bias, running_mean, running_var, training, momentum, eps)


@op("instance_norm", method=False)
def instance_norm(xp, input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                  cudnn_enabled):
    """Normalize each (sample, channel) plane by its own statistics (``use_input_stats``; the running ones,
    averaged over the batch, are updated in place) or by the running statistics."""
    if not use_input_stats:
        return _batch_norm(xp, "instance_norm", input, weight, bias, running_mean, running_var, False, momentum, eps)
    x = _float("instance_norm", input)
    if x.ndim < 3:
        raise RuntimeError(f"instance_norm: expected an input with at least 3 dims, got {x.ndim}")
    N, C = x.shape[:2]
    mean, var = _stats(xp, x, tuple(range(2, x.ndim)))
    n = math.prod(x.shape[2:])
    _update(running_mean, mean.reshape(N, C).mean(0), momentum)
    _update(running_var, (var.reshape(N, C) * (n / max(n - 1, 1))).mean(0), momentum)
    y = (x - mean) / xp.sqrt(var + eps)
    return _affine(xp, y, weight, bias, _channel_shape(x, x.ndim)).astype(input.dtype, copy=False)


def _channel_vjp(o, stats_axes):
    @o.vjp
    @saves(out=False)
    def _(ctx, g):
        a = bound(ctx, o)
        x, w, b = a["input"], a["weight"], a["bias"]
        if o is batch_norm and a["training"] and no_graph(x, w, b, g) and _host_float(x._data, g._data):
            need = dict(zip(list(a)[:len(ctx.args)], wanted(ctx)))  # (keyword arguments are computed)
            gx, gw, gb = _batch_norm_array_grads(x._data, g._data, None if w is None else w._data, a["eps"],
                                                 need.get("input", True))
            wrap = Tensor._wrap
            return grads(ctx, o, input=None if gx is None else wrap(gx), weight=None if w is None else wrap(gw),
                         bias=None if b is None else wrap(gb))
        shape = _channel_shape(x, x.dim())
        sum_axes = [0] + list(range(2, x.dim()))
        wb = 1.0 if w is None else w.reshape(shape)
        if a.get("training", a.get("use_input_stats")):
            gx, xhat = _norm_grad(x, g * wb, stats_axes(x), a["eps"])
        else:
            r = (a["running_var"].reshape(shape) + a["eps"]).rsqrt()
            xhat = (x - a["running_mean"].reshape(shape)) * r
            gx = g * wb * r
        return grads(ctx, o, input=gx, weight=None if w is None else (g * xhat).sum(sum_axes),
                     bias=None if b is None else g.sum(sum_axes))


def _host_float(x, g):
    """Whether ``x`` and ``g`` are NumPy arrays of one float32/float64 dtype (the array path's operands)."""
    return type(x) is np.ndarray and type(g) is np.ndarray and x.dtype is g.dtype and x.dtype.kind == "f" \
        and x.dtype.itemsize >= 4 and x.size > 0


_channel_vjp(batch_norm, lambda x: [0] + list(range(2, x.dim())))
_channel_vjp(instance_norm, lambda x: list(range(2, x.dim())))


# ---- layer, group and RMS norm ---------------------------------------------------------------------
def _normalized(name, x, normalized_shape, weight, bias):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or x.shape[x.ndim - k:] != shape or x.ndim < k:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape [*, "
                           f"{', '.join(map(str, shape))}], but got input of size{list(x.shape)}")
    for t, what in ((weight, "weight"), (bias, "bias")):
        if t is not None and t.shape != shape:
            raise RuntimeError(f"Expected {what} to be of same shape as normalized_shape, but got {what} of shape "
                               f"{list(t.shape)} and normalized_shape = {list(shape)}")
    return tuple(range(x.ndim - k, x.ndim))


@op("layer_norm", method=False, result_layout="row_major")
def layer_norm(xp, input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    """Normalize over the trailing ``normalized_shape`` dims, then scale and shift elementwise."""
    x = _float("LayerNormKernelImpl", input)
    axes = _normalized("layer_norm", x, normalized_shape, weight, bias)
    if len(axes) == 1 and _rows(x, weight, bias):  # ember's row loop: one pass over each row in cache
        n = x.shape[-1]
        out = np.empty(x.shape, np.float32)
        _loops.rows("layer_norm_rows_f32", x.reshape(-1, n), out=out.reshape(-1, n),
                    scalars=(_given(weight), _given(bias), float(eps)))
        return out
    mean, var = _stats(xp, x, axes)
    y = (x - mean) / xp.sqrt(var + eps)
    return _affine(xp, y, weight, bias, x.shape[axes[0]:]).astype(input.dtype, copy=False)


def _rows(x, *params):
    """Whether float32 NumPy ``x`` (C-contiguous, large enough) and its float32 parameters (or None) suit the row
    loops."""
    return (type(x) is np.ndarray and x.dtype == np.float32 and x.flags.c_contiguous and x.size >= _loops.LOOP_MIN
            and all(p is None or (type(p) is np.ndarray and p.dtype == np.float32) for p in params))


def _given(p):
    """A parameter as the row loops take it: a float32 vector, empty for none."""
    return np.empty(0, np.float32) if p is None else np.ascontiguousarray(p).reshape(-1)


def _layer_norm_rows_vjp(g, x, w, b, eps):
    """layer_norm's gradients by the row loop on the arrays, or None where it does not apply (a graph is being
    recorded; not float32 rows of the last dim)."""
    if any(t is not None and t._rg for t in (g, x, w, b)) or g._data.shape != x._data.shape or not _rows(
            x._data, g._data, *(None if t is None else t._data for t in (w, b))) or not g._data.flags.c_contiguous:
        return None
    n = x.shape[-1]
    xd, gd = x._data.reshape(-1, n), g._data.reshape(-1, n)
    gx = np.empty(xd.shape, np.float32)
    sums = {}

    def accumulators(k):  # per half of the rows: sums of g * xhat and of g (the same pass as gx's)
        sums[k] = [np.zeros(n if t is not None else 0, np.float32) for t in (w, b)]
        return sums[k]
    _loops.rows("layer_norm_backward_rows_f32", xd, gd, out=gx,
                scalars=(_given(None if w is None else w._data), float(eps)), halves=accumulators)
    gw, gb = (sums[0][i] + sums[1][i] for i in (0, 1))
    return (Tensor._wrap(gx.reshape(x._data.shape)),
            *[None if s.size == 0 else Tensor._wrap(s) for s in (gw, gb)])


@layer_norm.vjp
def _(ctx, g):
    a = bound(ctx, layer_norm)
    x, w, b = a["input"], a["weight"], a["bias"]
    k = 1 if isinstance(a["normalized_shape"], int) else len(a["normalized_shape"])
    fast = _layer_norm_rows_vjp(g, x, w, b, a["eps"]) if k == 1 else None
    if fast is not None:
        return grads(ctx, layer_norm, input=fast[0], weight=fast[1], bias=fast[2])
    axes, lead = list(range(x.dim() - k, x.dim())), list(range(x.dim() - k))
    gx, xhat = _norm_grad(x, g if w is None else g * w, axes, a["eps"])
    return grads(ctx, layer_norm, input=gx, weight=None if w is None else (g * xhat).sum(lead),
                 bias=None if b is None else g.sum(lead))


def _groups(x, num_groups):
    if x.shape[1] % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(x.shape)} and num_groups={num_groups}")


@op("group_norm", method=False)
def group_norm(xp, input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    """Normalize each group of ``C / num_groups`` channels (with their spatial dims) per sample, then scale
    and shift per channel."""
    x = _float("GroupNormKernelImpl", input)
    if x.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {x.ndim}")
    C = x.shape[1]
    for t, what in ((weight, "weight"), (bias, "bias")):
        if t is not None and (t.ndim != 1 or t.size != C):
            raise RuntimeError(f"Expected {what} to be a vector of size equal to the number of channels in input, but "
                               f"got {what} of shape {list(t.shape)} and input of shape {list(x.shape)}")
    _groups(x, num_groups)
    xg = x.reshape((x.shape[0], num_groups, math.prod(x.shape[1:]) // num_groups)) if x.size else x
    if x.size:
        mean, var = _stats(xp, xg, (2,))
        x = ((xg - mean) / xp.sqrt(var + eps)).reshape(x.shape)
    return _affine(xp, x, weight, bias, _channel_shape(x, x.ndim)).astype(input.dtype, copy=False)


@group_norm.vjp
def _(ctx, g):
    a = bound(ctx, group_norm)
    x, w, b = a["input"], a["weight"], a["bias"]
    shape, sum_axes = _channel_shape(x, x.dim()), [0] + list(range(2, x.dim()))
    gy = g if w is None else g * w.reshape(shape)
    groups = (x.shape[0], a["num_groups"], x.numel() // max(x.shape[0] * a["num_groups"], 1))
    gx, xhat = _norm_grad(x.reshape(groups), gy.reshape(groups), [2], a["eps"])
    xhat = xhat.reshape(x.shape)
    return grads(ctx, group_norm, input=gx.reshape(x.shape), weight=None if w is None else (g * xhat).sum(sum_axes),
                 bias=None if b is None else g.sum(sum_axes))


_EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52,
        "complex64": 2.0 ** -23, "complex128": 2.0 ** -52}


def _rms_eps(x, eps):
    """``eps``, by default the machine epsilon of ``x``'s dtype."""
    return _EPS[str(x.dtype)] if eps is None else eps


@op("rms_norm", method=False, result_layout="row_major")
def rms_norm(xp, input, normalized_shape, weight=None, eps=None):
    """Divide by the root mean square over the trailing ``normalized_shape`` dims, then scale elementwise. Complex
    inputs divide by the complex root of the mean of their squares (z * z, not |z|^2), as PyTorch's do."""
    x = input if input.dtype.kind == "c" else _float("rms_norm", input)
    axes = _normalized("rms_norm", x, normalized_shape, weight, None)
    eps = _rms_eps(input, eps)
    y = x / xp.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    return _affine(xp, y, weight, None, x.shape[axes[0]:]).astype(input.dtype, copy=False)


@rms_norm.vjp
def _(ctx, g):
    a = bound(ctx, rms_norm)
    x, w = a["input"], a["weight"]
    k = 1 if isinstance(a["normalized_shape"], int) else len(a["normalized_shape"])
    axes, lead = list(range(x.dim() - k, x.dim())), list(range(x.dim() - k))
    r = ((x * x).mean(axes, keepdim=True) + _rms_eps(x._data, a["eps"])).rsqrt()
    if x.dtype.is_complex:  # (the conjugate Jacobian: of a holomorphic map, PyTorch's convention)
        x, r = x.conj(), r.conj()
    gy = g if w is None else g * w.conj()
    gx = r * (gy - x * (r * r) * (gy * x).mean(axes, keepdim=True))
    return grads(ctx, rms_norm, input=gx, weight=None if w is None else (g * x * r).sum(lead))
