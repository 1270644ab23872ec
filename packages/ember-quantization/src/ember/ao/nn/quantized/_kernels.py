"""The quantized kernels of ``ao.nn.quantized`` modules that ember-core's ``ember.ops.quantized`` does not hold:
linear layers and convolutions (static, dynamic, float16), normalisations, embeddings, PReLU and matmul.

Integer sums are exact (``_intmath``) and requantized per engine (``_requant``); normalisations dequantize,
compute in float64 and requantize as PyTorch's vectorised kernels do.
"""
import warnings

import numpy as np

import ember
from ember import _quantized as _qt

from . import _intmath, _qarray, _requant
from ._packed import LinearWeightFp16

_f32 = np.float32
_UINT8_BOUND = 255


def _check_quint8(x, q, name):
    if q.dtype != ember.quint8:
        raise RuntimeError(f"Expected input data type QUInt8 but got {q.dtype.torch_name}" if name == "linear" else
                           f"quantized::{name} (ONEDNN): data type of input should be QUint8.")


def linear(x, packed, scale, zero_point, relu=False):
    """Quantized linear layer: quint8 ``x`` (..., in) by packed weight, output quint8 of ``scale``/``zero_point``."""
    q = _qarray.check(x, "quantized::linear_relu" if relu else "quantized::linear")
    _check_quint8(x, q, "linear")
    if x.shape[-1] != packed.weight.shape[1]:
        raise RuntimeError(f"The number of rows in the packB should be equal to K: {x.shape[-1]}")
    acc = _intmath.linear(_qarray.ints(x), q.zero_point, _intmath.bound(q.zero_point, 0, 255), packed.int_weight)
    out = _requant.requantize(acc, q.scale, packed.scales, packed.bias, scale, zero_point, ember.quint8, relu)
    return _qarray.per_tensor(out, ember.quint8, scale, zero_point)


def _onednn_only(op):
    """PyTorch's error for an onednn-only op on another engine (``op`` ends in its separator: "linear_tanh ",
    "conv2d_add.")."""
    engine = _requant.engine()
    if engine != "onednn":
        raise RuntimeError(f"Didn't find engine for operation quantized::{op}{engine.upper()}")


def linear_activation(x, packed, scale, zero_point, activation, negative_slope=None):
    """Quantized linear layer with a fused leaky_relu or tanh, computed on the float result (onednn only, as in
    PyTorch)."""
    _onednn_only(f"linear_{activation} ")
    q = _qarray.check(x, f"quantized::linear_{activation}")
    _check_quint8(x, q, "linear")
    acc = _intmath.linear(_qarray.ints(x), q.zero_point, _intmath.bound(q.zero_point, 0, 255), packed.int_weight)
    y = _requant.to_float(acc, q.scale, packed.scales, packed.bias)
    y = np.where(y > 0, y, y * _f32(negative_slope)) if activation == "leaky_relu" else np.tanh(y)
    return _qarray.requantize(y.astype(_f32), ember.quint8, scale, zero_point)


def conv_add(x, extra, packed, scale, zero_point, relu=False, reflect_padding=None):
    """Quantized conv2d plus a second quantized input (and ReLU), in float, requantized (onednn only)."""
    _onednn_only("conv2d_add" + ("_relu" if relu else "") + ".")
    q = _qarray.check(x, "quantized::conv2d_add")
    _check_quint8(x, q, "conv2d_add")
    padding, mode = (packed.padding, "zeros") if reflect_padding is None else (reflect_padding, "reflect")
    acc = _intmath.conv(_qarray.ints(x), q.zero_point, _intmath.bound(q.zero_point, 0, 255), packed.int_weight,
                        packed.kernel, packed.stride, padding, packed.dilation, packed.groups, mode)
    y = _requant.to_float(acc, q.scale, packed.scales, packed.bias, axis=1)
    y += _qarray.dequantize(_qarray.ints(extra), _qarray.check(extra, "quantized::conv2d_add"))
    if relu:
        np.maximum(y, 0, out=y)
    return _qarray.per_tensor(_qt.quantize_fused(y, scale, zero_point, ember.quint8), ember.quint8, scale, zero_point)


_qnnpack_warned = []


def _dynamic_input(a, reduce_range):
    """float32 array ``a`` quantized to quint8 with the parameters of its own range (PyTorch's dynamic
    quantization: 0..127 with ``reduce_range`` except on qnnpack, which ignores it)."""
    from ember.ao.quantization._qparams import choose_qparams
    if reduce_range and _requant.engine() == "qnnpack":
        if not _qnnpack_warned:
            _qnnpack_warned.append(True)
            warnings.warn("Currently, qnnpack incorrectly ignores reduce_range when it is set to true; this may "
                          "change in a future release.", stacklevel=5)
        reduce_range = False
    lo, hi = (float(a.min()), float(a.max())) if a.size else (0.0, 0.0)
    scale, zero_point = choose_qparams(lo, hi, 0, 255, False, reduce_range)
    scale = float(_f32(scale))
    return _qt.quantize_fused(np.ascontiguousarray(a, _f32), scale, zero_point, ember.quint8), scale, zero_point


def linear_dynamic_array(a, packed, reduce_range=True):
    """float32 ``a`` (..., in) times a packed weight (qint8: ``a`` quantized from its own range; float16: in
    float32), plus bias: the float32 result."""
    if isinstance(packed, LinearWeightFp16):
        y = (a.reshape(-1, a.shape[-1]) @ packed.rows.T).reshape(a.shape[:-1] + (packed.rows.shape[0],))
        if packed.bias is not None:
            y += packed.bias.detach().numpy()
        return y
    if a.shape[-1] != packed.weight.shape[1]:
        raise RuntimeError(f"The number of rows in the packB should be equal to K: {a.shape[-1]}")
    ints, scale, zero_point = _dynamic_input(a, reduce_range)
    acc = _intmath.linear(ints, zero_point, _intmath.bound(zero_point, 0, 255), packed.int_weight)
    return _requant.to_float(acc, scale, packed.scales, packed.bias)


def linear_dynamic(x, packed, reduce_range=True, relu=False):
    """Dynamically quantized linear layer: float32 tensor in and out."""
    if x.dtype != ember.float32:
        raise RuntimeError(f"expected scalar type Float but found {str(x.dtype).split('.')[-1].title()}")
    y = linear_dynamic_array(x.detach().numpy(), packed, reduce_range)
    if relu:
        np.maximum(y, 0, out=y)
    return ember.from_numpy(np.ascontiguousarray(y, _f32))


def conv(x, packed, scale, zero_point, relu=False, reflect_padding=None):
    """Quantized convolution (transposed when the packed weight is): quint8 (N, C, *L) in, quint8 out; with
    ``reflect_padding``, the input padded by reflection instead of the packed weight's zero padding."""
    n = len(packed.stride)
    name = f"conv_transpose{n}d" if packed.transposed else f"conv{n}d"
    # (PyTorch's 2-d and 3-d convolutions are the ".new" overloads of its ops)
    q = _qarray.check(x, f"quantized::{name}" + ("_relu" if relu else "") + (".new" if name in ("conv2d", "conv3d")
                                                                             else ""))
    _check_quint8(x, q, name)
    channels = packed.weight.shape[0] if packed.transposed else packed.weight.shape[1] * packed.groups
    if x.shape[1] != channels:
        raise RuntimeError(f"Given groups={packed.groups}, expected input channels to be {channels}, but got "
                           f"{x.shape[1]} channels")
    bound = _intmath.bound(q.zero_point, 0, 255)
    if packed.transposed:
        acc = _intmath.conv_transpose(_qarray.ints(x), q.zero_point, bound, packed.int_weight, packed.kernel,
                                      packed.stride, packed.padding, packed.output_padding, packed.dilation,
                                      packed.groups)
    else:
        padding, mode = (packed.padding, "zeros") if reflect_padding is None else (reflect_padding, "reflect")
        acc = _intmath.conv(_qarray.ints(x), q.zero_point, bound, packed.int_weight, packed.kernel, packed.stride,
                            padding, packed.dilation, packed.groups, mode)
    out = _requant.requantize(acc, q.scale, packed.scales, packed.bias, scale, zero_point, ember.quint8, relu, 1)
    return _qarray.per_tensor(np.ascontiguousarray(out), ember.quint8, scale, zero_point)


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
