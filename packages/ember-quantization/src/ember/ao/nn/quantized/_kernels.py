"""The quantized kernels of ``ao.nn.quantized`` modules that PyTorch keeps outside ``torch.ops.quantized``'s
linear layers and convolutions (those are ember-core's ``ember.ops.quantized``): normalisations (dequantized,
computed in float64, requantized as PyTorch's vectorised kernels do), embeddings, PReLU and matmul.
"""
import numpy as np

import ember

from . import _qarray

_f32 = np.float32


# ---- normalisation: dequantize, float64 statistics, requantize ---------------------------------------------------
def _values(x, name):
    q = _qarray.check(x, f"quantized::{name}")
    return _qarray.dequantize(_qarray.ints(x), q).astype(np.float64), q


def _affine(y, weight, bias, shape):
    if weight is not None:
        y *= weight.detach().numpy().astype(np.float64).reshape(shape)
    if bias is not None:
        y += bias.detach().numpy().astype(np.float64).reshape(shape)
    return y


def _normalized(v, axes, eps):
    mean = v.mean(axis=axes, keepdims=True)
    centered = v - mean
    var = np.mean(centered * centered, axis=axes, keepdims=True)
    centered /= np.sqrt(var + eps)
    return centered


def _out(y, q, scale, zero_point):
    return _qarray.requantize(np.ascontiguousarray(y, _f32), q.dtype, scale, zero_point)


def layer_norm(x, normalized_shape, weight, bias, eps, scale, zero_point):
    v, q = _values(x, "layer_norm")
    k = len(tuple(normalized_shape))
    y = _normalized(v, tuple(range(v.ndim - k, v.ndim)), eps)
    return _out(_affine(y, weight, bias, tuple(normalized_shape)), q, scale, zero_point)


def group_norm(x, num_groups, weight, bias, eps, scale, zero_point, name="group_norm"):
    v, q = _values(x, name)
    N, C = v.shape[:2]
    y = _normalized(v.reshape(N, num_groups, -1), (2,), eps).reshape(v.shape)
    return _out(_affine(y, weight, bias, (1, C) + (1,) * (v.ndim - 2)), q, scale, zero_point)


def instance_norm(x, weight, bias, eps, scale, zero_point):
    return group_norm(x, x.shape[1], weight, bias, eps, scale, zero_point, "instance_norm")


def batch_norm(x, weight, bias, mean, var, eps, scale, zero_point, relu=False, dims=2):
    """Inference batch norm (running statistics) of a quantized (N, C, *spatial) input."""
    name = f"batch_norm{dims}d" + ("_relu" if relu else "")
    v, q = _values(x, name)
    if v.ndim != dims + 2:
        raise RuntimeError(f"Expected {dims + 2}D input to quantized::{name}, got {v.ndim}D")
    shape = (1, -1) + (1,) * dims
    y = (v - mean.detach().numpy().astype(np.float64).reshape(shape)) / np.sqrt(
        var.detach().numpy().astype(np.float64).reshape(shape) + eps)
    y = _affine(y, weight, bias, shape)
    if relu:
        np.maximum(y, 0, out=y)
    return _out(y, q, scale, zero_point)


# ---- embeddings: rows of per-row (scale, zero point) integers, as float ------------------------------------------
def _rows(weight):
    """(integers, scale, bias) per row of a quantized embedding weight, with ``bias = -zero_point * scale``
    (float16 scale and bias for 4-bit rows, as PyTorch packs them)."""
    q = _qarray.quantizer(weight)
    scale = np.asarray(q.scales, _f32)
    bias = (-np.asarray(q.zero_points, _f32) * scale).astype(_f32)
    if weight.dtype == ember.quint4x2:
        scale, bias = scale.astype(np.float16).astype(_f32), bias.astype(np.float16).astype(_f32)
    return _qarray.ints(weight), scale, bias


def embedding(weight, indices):
    """The dequantized rows ``indices`` (``fma(q, scale, bias)``) of a quantized embedding weight."""
    ints, scale, bias = _rows(weight)
    idx = indices.detach().numpy()
    y = ints[idx].astype(np.float64) * scale[idx, None]
    y += bias[idx, None]
    return ember.from_numpy(y.astype(_f32))


def embedding_bag(weight, indices, offsets, per_sample_weights, include_last_offset):
    """Sums of bags of dequantized rows (PyTorch's quantized kernel sums whatever the module's mode), accumulated
    row by row in float32 as there: ``out = fma(q, scale * w, out + bias * w)``."""
    ints, scale, bias = _rows(weight)
    idx = indices.detach().numpy().astype(np.int64)
    if idx.ndim == 2:  # fixed-size bags
        bounds = np.arange(0, idx.size + 1, idx.shape[1])
        idx = idx.reshape(-1)
    else:  # bag i is rows offsets[i]:offsets[i + 1]; the last ends at the end unless include_last_offset says where
        bounds = offsets.detach().numpy().astype(np.int64)
        if not include_last_offset:
            bounds = np.append(bounds, idx.size)
        elif weight.dtype == ember.quint4x2 and bounds[-1] != idx.size:  # (the 4-bit kernel checks; the 8-bit not)
            raise RuntimeError("Yout input seems to be incorrect: the last offset value should be the size of the "
                               "indices tensor, but it appears not.")
    starts, ends = bounds[:-1], bounds[1:]
    lengths = ends - starts
    psw = None if per_sample_weights is None else per_sample_weights.detach().numpy().astype(_f32)
    out = np.zeros((len(starts), ints.shape[1]), _f32)
    for j in range(int(lengths.max(initial=0))):  # the j-th row of every bag that has one
        live = lengths > j
        rows = idx[starts[live] + j]
        s, b = scale[rows], bias[rows]
        if psw is not None:
            w = psw[starts[live] + j]
            s, b = (s * w).astype(_f32), (b * w).astype(_f32)
        acc = (out[live] + b[:, None]).astype(np.float64)
        acc += ints[rows].astype(np.float64) * s[:, None].astype(np.float64)
        out[live] = acc.astype(_f32)
    return ember.from_numpy(out)


# ---- PReLU (on the integers) and matmul (through float) ----------------------------------------------------------
def prelu(x, weight, scale, zero_point):
    """Quantized PReLU as PyTorch's kernel computes it on the integers: ``(max(qx, zx) - zx) * (w(1.0) - zw) +
    (min(qx, zx) - zx) * (qw - zw)``, with ``w(1.0)`` the weight's integer for 1.0, requantized by the float32
    multiplier ``sx * sw * (1 / scale)``."""
    q = _qarray.check(x, "quantized::prelu")
    if x.dim() == 0:
        raise RuntimeError("qprelu: zero-dim input tensor is not allowed.")
    wq = _qarray.quantizer(weight)
    xi = _qarray.ints(x).astype(np.int64)
    wi = _qarray.ints(weight).astype(np.int64) - wq.zero_point
    if x.dim() > 1 and wi.ndim != x.dim():
        wi = wi.reshape((1, -1) + (1,) * (x.dim() - 2))
    one = int(np.clip(wq.zero_point + np.rint(_f32(1) * (_f32(1) / _f32(wq.scale))), wq.dtype.qmin, wq.dtype.qmax))
    acc = (np.maximum(xi, q.zero_point) - q.zero_point) * (one - wq.zero_point) + \
        (np.minimum(xi, q.zero_point) - q.zero_point) * wi
    multiplier = _f32(q.scale) * _f32(wq.scale) * (_f32(1) / _f32(scale))
    r = np.rint(acc.astype(_f32) * multiplier) + zero_point
    return _qarray.per_tensor(np.clip(r, q.dtype.qmin, q.dtype.qmax).astype(q.dtype.np), q.dtype, scale, zero_point)


def matmul(a, b, scale, zero_point):
    """Product of two quantized tensors, requantized (computed on their float values)."""
    qa, qb = _qarray.check(a, "quantized::matmul"), _qarray.check(b, "quantized::matmul")
    if qa.dtype != qb.dtype:
        raise RuntimeError(f"Both inputs to Matmul must have the same int data type, got {qa.dtype.torch_name} and "
                           f"{qb.dtype.torch_name}")
    va, vb = _qarray.dequantize(_qarray.ints(a), qa), _qarray.dequantize(_qarray.ints(b), qb)
    return _out(np.matmul(va, vb), qa, scale, zero_point)
