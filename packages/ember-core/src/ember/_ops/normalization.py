"""Normalization: batch (with running statistics updated in place), instance, layer, group and RMS norm.

Each normalizes over some axes, then scales and shifts per channel (or per normalized element). Statistics
are computed in float32 for half-precision inputs. The gradients share one formula for the normalized
output, written in ember ops."""
import math

import numpy as np

from .._registry import op
from .activation import bound, grads, tname, up


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
    shape = _channel_shape(x, x.ndim)
    axes = (0,) + tuple(range(2, x.ndim))
    if training:
        if x.size == 0:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {list(x.shape)}")
        mean, var = _stats(xp, x, axes)
        n = x.size // C
        _update(running_mean, mean.reshape(-1), momentum)
        _update(running_var, var.reshape(-1) * (n / max(n - 1, 1)), momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        mean, var = up(running_mean).reshape(shape), up(running_var).reshape(shape)
    y = (x - mean) / xp.sqrt(var + eps)
    return _affine(xp, y, weight, bias, shape).astype(input.dtype, copy=False)


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
    def _(ctx, g):
        a = bound(ctx, o)
        x, w, b = a["input"], a["weight"], a["bias"]
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


@op("layer_norm", method=False)
def layer_norm(xp, input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    """Normalize over the trailing ``normalized_shape`` dims, then scale and shift elementwise."""
    x = _float("LayerNormKernelImpl", input)
    axes = _normalized("layer_norm", x, normalized_shape, weight, bias)
    mean, var = _stats(xp, x, axes)
    y = (x - mean) / xp.sqrt(var + eps)
    return _affine(xp, y, weight, bias, x.shape[axes[0]:]).astype(input.dtype, copy=False)


@layer_norm.vjp
def _(ctx, g):
    a = bound(ctx, layer_norm)
    x, w, b = a["input"], a["weight"], a["bias"]
    k = 1 if isinstance(a["normalized_shape"], int) else len(a["normalized_shape"])
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


_EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}


def _rms_eps(x, eps):
    """``eps``, by default the machine epsilon of ``x``'s dtype."""
    return _EPS[str(x.dtype)] if eps is None else eps


@op("rms_norm", method=False)
def rms_norm(xp, input, normalized_shape, weight=None, eps=None):
    """Divide by the root mean square over the trailing ``normalized_shape`` dims, then scale elementwise."""
    x = _float("rms_norm", input)
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
    gy = g if w is None else g * w
    gx = r * (gy - x * (r * r) * (gy * x).mean(axes, keepdim=True))
    return grads(ctx, rms_norm, input=gx, weight=None if w is None else (g * x * r).sum(lead))
