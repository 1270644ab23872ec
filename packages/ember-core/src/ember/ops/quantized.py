"""Quantized kernels: ``ember.ops.quantized.add(qa, qb, scale, zero_point)`` and the rest of PyTorch's
``torch.ops.quantized`` elementwise family, plus the kernels behind ``ember.relu(q)``, ``ember.sigmoid(q)``, pooling
and the other top-level ops PyTorch runs on quantized tensors.

Numerics are those of PyTorch's x86 kernels. Elementwise kernels dequantize as ``fma(q, scale, -zero_point *
scale)`` in float32, compute in float32 and requantize as ``rint(float32(y * inv_scale)) + zero_point``, clamped
(``_qt.quantize_rounded``); products requantize the integer product ``(qa - za) * (qb - zb)`` with the float32
multiplier ``sa * sb / s``; ops that keep the input's parameters (relu, clamp, max pooling, topk) work on the
integers themselves.
"""
import builtins

import numpy as np

from .. import _dtype as D
from .. import _jit, _parallel, _qgemm, _serialization
from .. import _qtypes as Q
from .. import _quantized as _qt
from .._registry import REGISTRY
from .._tensor import Tensor

_f32 = np.float32
_wrap = Tensor._wrap


def _check(qx, name):
    if not getattr(qx, "is_quantized", False):
        raise _qt._not_implemented(f"quantized::{name}", qx)
    q = qx._data.q
    if q.per_channel:
        raise RuntimeError(f"quantized::{name}: only per-tensor quantized tensors are supported")
    return q


def _dequantize(arr, q):
    """float32 values as PyTorch's vectorised kernels compute them: ``q * scale + (-zero_point * scale)`` fused
    (the premultiplied term rounded to float32; the product of float32 values is exact in float64)."""
    s = _f32(q.scale)
    r = arr.astype(np.float64)
    r *= np.float64(s)
    r += np.float64(s * _f32(-q.zero_point))
    return r.astype(_f32)


def _out(ints, dtype, scale, zero_point):
    return _qt._new(ints, _qt._Quantizer(dtype, Q.per_tensor_affine, builtins.float(scale),
                                         builtins.int(zero_point)))


def _requantized(y, dtype, scale, zero_point):
    return _out(_qt.quantize_rounded(y, scale, zero_point, dtype), dtype, scale, zero_point)


def _same_dtype(qa, qb, name):
    if qa.dtype is not qb.dtype:
        raise RuntimeError(f"{name} operands should have same data type.")


def _binary(qa, qb, scale, zero_point, relu, name):
    qa_q, qb_q = _check(qa, name), _check(qb, name)
    _same_dtype(qa, qb, "Add" if "add" in name else "Mul")
    a, b = np.broadcast_arrays(qa._data.arr, qb._data.arr)
    return qa_q, qb_q, a, b


def add(qa, qb, scale, zero_point):
    """``qa + qb`` requantized to ``scale``/``zero_point``."""
    return _add(qa, qb, scale, zero_point, False)


def add_relu(qa, qb, scale, zero_point):
    return _add(qa, qb, scale, zero_point, True)


def _add(qa, qb, scale, zero_point, relu):
    qa_q, qb_q, a, b = _binary(qa, qb, scale, zero_point, relu, "add")
    dtype = qa_q.dtype
    if dtype.bits == 8 and a.flags.c_contiguous and b.flags.c_contiguous and a.size:
        fn = _jit.loop("ember._qloops", "add", _ADD_SIG[dtype.np], a.size)
        if fn is not None:  # (one compiled pass; the NumPy path below computes the same values)
            sa, sb = _f32(qa_q.scale), _f32(qb_q.scale)
            args = (sa, sa * _f32(-qa_q.zero_point), sb, sb * _f32(-qb_q.zero_point), _f32(1.0 / scale),
                    _f32(zero_point), _f32(dtype.qmin), _f32(dtype.qmax), relu)
            out = np.empty(a.shape, dtype.np)
            _parallel.loop(lambda x, y, o: fn(x, y, *args, o), a.reshape(-1), b.reshape(-1), out=out.reshape(-1),
                           minimum=_parallel.MIN_SIZE)
            return _out(out, dtype, scale, zero_point)
    y = _dequantize(a, qa_q)
    y += _dequantize(b, qb_q)
    if relu:
        np.maximum(y, 0, out=y)
    return _requantized(y, qa_q.dtype, scale, zero_point)


_ADD_SIG = {np.dtype(t): f"({t}[::1], {t}[::1], float32, float32, float32, float32, float32, float32, float32, "
                        f"float32, boolean, {t}[::1])" for t in ("int8", "uint8")}


def mul(qa, qb, scale, zero_point):
    """``qa * qb`` requantized: the integer product times ``float32(sa * sb / scale)``."""
    return _mul(qa, qb, scale, zero_point, False)


def mul_relu(qa, qb, scale, zero_point):
    return _mul(qa, qb, scale, zero_point, True)


def _mul(qa, qb, scale, zero_point, relu):
    qa_q, qb_q, a, b = _binary(qa, qb, scale, zero_point, relu, "mul")
    inv = np.float64(_f32(1) / _f32(scale))
    multiplier = _f32(qa_q.scale * qb_q.scale * inv)
    c = (a.astype(np.int32) - qa_q.zero_point) * (b.astype(np.int32) - qb_q.zero_point)
    return _out(_requantize_ints(c, multiplier, zero_point, qa_q.dtype, relu), qa_q.dtype, scale, zero_point)


def _scalar_value(b):
    return b.item() if isinstance(b, Tensor) else b


def add_scalar(qa, b):
    """``qa + b``: the integers kept, the zero point moved by ``round(b / scale)`` (requantized when the move
    would leave the integer range)."""
    return _add_scalar(qa, b, False)


def add_scalar_relu(qa, b):
    return _add_scalar(qa, b, True)


def _add_scalar(qa, b, relu):
    q = _check(qa, "add_scalar")
    s, z = q.scale, q.zero_point
    c_q = builtins.int(np.rint(_scalar_value(b) / s))
    qmin, qmax = q.dtype.qmin, q.dtype.qmax
    if qmin <= z - c_q <= qmax:  # the common case: a shift of the zero point
        z_new, s_new, r = z - c_q, s, qa._data.arr.astype(np.int64)
    else:  # the shift would leave the range: a wider scale, the integers (q - z + c_q) requantized to it
        if z - c_q < qmin:
            s_new, z_new = (qmax - (z - c_q)) / (qmax - qmin) * s, qmin
        else:
            s_new, z_new = ((z - c_q) - qmin) / (qmax - qmin) * s, qmax
        r = _requantize_ints(qa._data.arr.astype(np.int64) - z + c_q, _f32(s) * (_f32(1) / _f32(s_new)), z_new,
                             q.dtype)
    if relu:
        r = np.maximum(r, z_new)
    return _out(np.clip(r, qmin, qmax).astype(q.dtype.np), q.dtype, s_new, z_new)


def _requantize_ints(c, multiplier, zero_point, dtype, relu=False):
    """Integer accumulators ``c`` to ``dtype``'s integers: ``rint(float32(c) * float32(multiplier)) + zero_point``,
    clamped (PyTorch's ``requantize_from_int``)."""
    r = np.rint(c.astype(_f32) * _f32(multiplier)).astype(np.float64)
    r += zero_point
    np.clip(r, max(dtype.qmin, zero_point) if relu else dtype.qmin, dtype.qmax, out=r)
    return r.astype(dtype.np)


def mul_scalar(qa, b):
    """``qa * b``: the integers kept, the scale multiplied by ``|b|`` (a negative ``b`` mirrors the integers);
    ``b == 0`` gives zeros with scale 1 and zero point 0."""
    return _mul_scalar(qa, b, False)


def mul_scalar_relu(qa, b):
    return _mul_scalar(qa, b, True)


def _mul_scalar(qa, b, relu):
    q = _check(qa, "mul_scalar")
    b = builtins.float(_scalar_value(b))
    qmin, qmax = q.dtype.qmin, q.dtype.qmax
    arr = qa._data.arr
    if b == 0:
        scale, zp, r = 1.0, 0, np.zeros_like(arr)
    elif b > 0:
        scale, zp, r = q.scale * b, q.zero_point, arr.copy()
    else:
        scale, zp = q.scale * -b, qmax - (q.zero_point - qmin)
        r = (qmax - (arr.astype(np.int64) - qmin)).astype(arr.dtype)
    if relu:
        r = np.maximum(r, np.asarray(zp, arr.dtype))
    return _out(r, q.dtype, scale, zp)


def cat(qx, dim, scale=None, zero_point=None):
    """The quantized tensors ``qx`` joined along ``dim``, each requantized to ``scale``/``zero_point`` (by
    default the first one's) unless it has them already."""
    return _cat(qx, dim, scale, zero_point, False)


def cat_relu(qx, dim, scale=None, zero_point=None):
    return _cat(qx, dim, scale, zero_point, True)


def _cat(qx, dim, scale, zero_point, relu):
    qs = [_check(x, "cat") for x in qx]
    dtype = qs[0].dtype
    for x in qx:
        if x.dtype is not dtype:
            raise RuntimeError(f"Expected object of scalar type {dtype.torch_name} but got scalar type "
                               f"{x.dtype.torch_name}")
    scale = qs[0].scale if scale is None else builtins.float(scale)
    zero_point = qs[0].zero_point if zero_point is None else builtins.int(zero_point)
    # (PyTorch joins the dequantized tensors and quantizes the result)
    y = REGISTRY["cat"].fn([_wrap(_qt.dequantize_array(x._data.arr, q)) for x, q in zip(qx, qs)], dim)._data
    ints = _qt.quantize_fused(y, scale, zero_point, dtype) if dtype.bits == 8 else \
        _qt.quantize_unfused(y, _f32(1) / _f32(scale), zero_point, dtype)
    if relu:
        np.maximum(ints, np.asarray(zero_point, ints.dtype), out=ints)
    return _out(ints, dtype, scale, zero_point)


def relu6(qx, inplace=False):
    """``min(max(qx, 0), 6)`` on the integers."""
    q = _check(qx, "relu6")
    r = _clamped(qx, q, 0.0, 6.0)
    return _into(qx, r) if inplace else r


def _into(target, r):
    target._data.arr[...] = r._data.arr
    target._vc[0] += 1
    return target


def _quantized_bound(v, q):
    """A real bound as an integer of ``q`` (PyTorch quantizes clamp bounds like values)."""
    return builtins.int(_qt.quantize_fused(np.full((), v, _f32), q.scale, q.zero_point, q.dtype))


def _clamped(qx, q, lo, hi):
    arr = qx._data.arr
    lo_q = q.dtype.qmin if lo is None else _quantized_bound(lo, q)
    hi_q = q.dtype.qmax if hi is None else _quantized_bound(hi, q)
    r = np.minimum(np.maximum(arr, np.asarray(lo_q, arr.dtype)), np.asarray(hi_q, arr.dtype))
    return _out(r, q.dtype, q.scale, q.zero_point)


def clamp(qx, min=None, max=None):
    q = _check(qx, "clamp")
    return _clamped(qx, q, _scalar_value(min), _scalar_value(max))


def threshold(qx, threshold, value):
    """``qx`` where it exceeds ``threshold``, else ``value`` (computed on the real values, requantized)."""
    q = _check(qx, "threshold")
    y = _dequantize(qx._data.arr, q)
    y = np.where(y > _f32(threshold), y, _f32(value)).astype(_f32)
    return _requantized(y, q.dtype, q.scale, q.zero_point)


def _through_float(qx, fn, scale, zero_point, name):
    q = _check(qx, name)
    y = fn(_dequantize(qx._data.arr, q))
    return _requantized(np.asarray(y, _f32), q.dtype, scale, zero_point)


def _float_op(name, **kwargs):
    f = REGISTRY[name].fn
    return lambda y: f(_wrap(y), **kwargs)._data


def sigmoid(qx, output_scale, output_zero_point):
    return _through_float(qx, _float_op("sigmoid"), output_scale, output_zero_point, "sigmoid")


def hardswish(input, output_scale, output_zero_point):
    return _through_float(input, _float_op("hardswish"), output_scale, output_zero_point, "hardswish")


def elu(self, output_scale, output_zero_point, alpha=1, scale=1, input_scale=1):
    """ELU of the real values (PyTorch's scalar kernel: dequantized with the float64 scale, requantized with the
    zero point added after rounding)."""
    q = _check(self, "elu")
    y = ((self._data.arr.astype(np.float64) - q.zero_point) * q.scale).astype(_f32)
    neg = np.expm1(y * _f32(input_scale), dtype=_f32) * _f32(alpha) * _f32(scale)
    y = np.where(y >= 0, y * _f32(scale), neg).astype(_f32)
    r = np.rint(y * (_f32(1) / _f32(output_scale))).astype(np.float64) + output_zero_point
    ints = np.clip(r, q.dtype.qmin, q.dtype.qmax).astype(q.dtype.np)
    return _out(ints, q.dtype, output_scale, output_zero_point)


def celu(self, output_scale, output_zero_point, alpha=1):
    return elu(self, output_scale, output_zero_point, alpha, 1, 1 / alpha)


def leaky_relu(qx, negative_slope, inplace, output_scale, output_zero_point):
    r = _through_float(qx, _float_op("leaky_relu", negative_slope=negative_slope), output_scale, output_zero_point,
                       "leaky_relu")
    return _into(qx, r) if inplace else r


def softmax(qx, dim, output_scale, output_zero_point):
    return _through_float(qx, _float_op("softmax", dim=dim), output_scale, output_zero_point, "softmax")


# ---- the kernels of top-level ops on quantized tensors (ember._quantized's dispatch calls them) -----------------
def _relu(input):
    q = _check(input, "relu")
    return _out(np.maximum(input._data.arr, np.asarray(q.zero_point, input._data.arr.dtype)), q.dtype, q.scale,
                q.zero_point)


def _hardtanh(input, min_val=-1.0, max_val=1.0):
    return _clamped(input, _check(input, "hardtanh"), min_val, max_val)


def _clamp(input, min=None, max=None):
    return clamp(input, min, max)


_clip = _clamp


def _clamp_min(input, min):
    return clamp(input, min, None)


def _clamp_max(input, max):
    return clamp(input, None, max)


def _fixed_range(input, name, fn, signed, unsigned):
    """An op whose output range is fixed (sigmoid: [0, 1]) quantizes to fixed parameters per dtype."""
    q = _check(input, name)
    scale, zp = signed if q.dtype is Q.qint8 else unsigned if q.dtype is Q.quint8 else (q.scale, q.zero_point)
    return _through_float(input, fn, scale, zp, name)


def _sigmoid(input):
    return _fixed_range(input, "sigmoid", _float_op("sigmoid"), (1 / 256, -128), (1 / 256, 0))


def _hardsigmoid(input):
    return _fixed_range(input, "hardsigmoid", _float_op("hardsigmoid"), (1 / 256, -128), (1 / 256, 0))


def _tanh(input):
    return _fixed_range(input, "tanh", _float_op("tanh"), (2 / 256, 0), (2 / 256, 128))


def _leaky_relu(input, negative_slope=0.01):
    q = _check(input, "leaky_relu")
    return leaky_relu(input, negative_slope, False, q.scale, q.zero_point)


def _gelu(input, approximate="none"):
    q = _check(input, "gelu")
    return _through_float(input, _float_op("gelu", approximate=approximate), q.scale, q.zero_point, "gelu")


def _mean(input, dim=None, keepdim=False, *, dtype=None):
    q = _check(input, "mean")
    y = _dequantize(input._data.arr, q)
    m = REGISTRY["mean"].fn(_wrap(y), *(() if dim is None else (dim,)), keepdim=keepdim)._data
    return _out(_qt.quantize_fused(np.asarray(m, _f32), q.scale, q.zero_point, q.dtype), q.dtype, q.scale,
                q.zero_point)


def _on_ints(name, input, *args, **kwargs):
    """Op ``name`` on the integers (order-preserving ops: max, min, sort, topk); tensors of integers come back
    quantized with the input's parameters, index tensors as they are."""
    q = _check(input, name)
    r = REGISTRY[name].fn(_wrap(input._data.arr), *args, **kwargs)

    def back(x):
        if isinstance(x, Tensor) and x.dtype is D.FROM_NP[input._data.arr.dtype]:
            return _out(x._data, q.dtype, q.scale, q.zero_point)
        return x
    if isinstance(r, tuple):
        return type(r)(*[back(x) for x in r]) if hasattr(r, "_fields") else tuple(back(x) for x in r)
    return back(r)


def _max(input, *args, **kwargs):
    return _on_ints("max", input, *args, **kwargs)


def _min(input, *args, **kwargs):
    return _on_ints("min", input, *args, **kwargs)


def _topk(input, *args, **kwargs):
    return _on_ints("topk", input, *args, **kwargs)


def _sort(input, *args, **kwargs):
    return _on_ints("sort", input, *args, **kwargs)


def _through_float32_ints(name, input, *args, **kwargs):
    """A pooling op run on the integers as float32 (exact), the result rounded back to integers."""
    q = _check(input, name)
    r = REGISTRY[name].fn(_wrap(input._data.arr.astype(_f32)), *args, **kwargs)
    r = r[0] if isinstance(r, tuple) else r
    ints = np.clip(np.rint(r._data), q.dtype.qmin, q.dtype.qmax).astype(q.dtype.np)
    return _out(ints, q.dtype, q.scale, q.zero_point)


def _max_pool1d(input, *args, **kwargs):
    return _through_float32_ints("max_pool1d", input, *args, **kwargs)


def _max_pool2d(input, *args, **kwargs):
    return _through_float32_ints("max_pool2d", input, *args, **kwargs)


def _avg_pool2d(input, *args, **kwargs):
    return _through_float32_ints("avg_pool2d", input, *args, **kwargs)


def _adaptive_avg_pool2d(input, *args, **kwargs):
    return _through_float32_ints("adaptive_avg_pool2d", input, *args, **kwargs)


def _upsample(input, *args, **kwargs):
    return _through_float32_ints("_upsample", input, *args, **kwargs)


# ---- linear layers and convolutions: packed weights, exact integer sums, requantization per engine ------------
_backends = []


def _engine():
    if not _backends:  # (imported on first use: ember.backends imports this module's package)
        from ..backends import quantized
        _backends.append(quantized)
    return _backends[0].engine


def _no_kernel(op):
    """PyTorch's error for a float tensor given to ``quantized::op``."""
    return NotImplementedError(f"Could not run 'quantized::{op}' with arguments from the 'CPU' backend. This could be "
                               "because the operator doesn't exist for this backend, or was omitted during the "
                               "selective/custom build process (if using custom build).")


def _checked_weight(weight, prepack, axis=0):
    """PyTorch's errors for a weight that is not qint8 (``prepack``: the op that packs it); a per-channel weight
    must have its scales along ``axis`` (the output channels), if given."""
    if not getattr(weight, "is_quantized", False):
        raise _no_kernel(prepack)
    if weight.dtype is not Q.qint8:
        raise RuntimeError(f"expected scalar type QInt8 but found {weight.dtype.torch_name}")
    q = weight._data.q
    if q.per_channel and axis is not None and q.axis != axis:  # (PyTorch reads them as the outputs' anyway)
        raise RuntimeError(f"{prepack}: a per-channel quantized weight needs its scales along the output channels "
                           f"(axis {axis}), got axis {q.axis}")
    return q


def _check_bias(bias, n):
    if bias is not None:
        if bias.dim() != 1 or bias.shape[0] != n:
            raise RuntimeError(f"bias should be a vector (1D Tensor) of size {n}")
        if bias.dtype is not D.float32:
            raise RuntimeError("Expected bias data type Float but got " + str(bias.dtype).split(".")[-1].title())


def _weight_params(weight, channel_axis=0):
    """(scales, zero_points) per slice along ``channel_axis`` of a quantized weight (float64, int64)."""
    q = weight._data.q
    n = weight._data.shape[channel_axis]
    if q.per_channel:
        return np.asarray(q.scales, np.float64), np.asarray(q.zero_points, np.int64)
    return np.full(n, q.scale), np.full(n, q.zero_point, np.int64)


class LinearPackedParams:
    """The packed weight of a quantized linear layer (PyTorch's ``LinearPackedParamsBase``): the qint8 (out, in)
    weight, per tensor or per output channel, and float bias as given (``unpack()``), plus their scales and zero
    points per output and the integers ready for products (``ember._qgemm.IntWeight``)."""

    def __init__(self, weight, bias):
        _checked_weight(weight, "linear_prepack")
        if weight.dim() != 2:
            raise RuntimeError("The weight tensor for quantized::linear_prepack (fbgemm) should be 2-dimensional.")
        _check_bias(bias, weight.shape[0])
        self.weight, self.bias = weight, bias
        self.scales, self.zero_points = _weight_params(weight)
        self.int_weight = _qgemm.IntWeight(weight._data.arr, self.zero_points)

    def unpack(self):
        return self.weight, self.bias

    def __getstate__(self):  # (PyTorch's layout: ((weight, bias), extra))
        return (self.weight, self.bias), None

    def __setstate__(self, state):
        self.__init__(*state[0])


class LinearPackedParamsFp16:
    """The packed weight of a float16 dynamic linear layer: the weight rounded to float16 (saturated at its
    largest value), multiplied in float32."""

    def __init__(self, weight, bias):
        if _engine() == "qnnpack":
            raise RuntimeError("quantized::linear_prepack_fp16 is currently not supported by QNNPACK")
        _check_bias(bias, weight.shape[0])
        w = weight.detach().numpy().astype(_f32)
        fp16_max = builtins.float(np.finfo(np.float16).max)
        if np.any(np.abs(w) > fp16_max):
            import warnings
            warnings.warn("FOUND weight out of range ", stacklevel=3)
        self.w16 = np.clip(w, -fp16_max, fp16_max).astype(np.float16)
        self.rows = self.w16.astype(_f32)
        self.bias = bias

    def unpack(self):
        return _wrap(self.rows.copy()), self.bias

    def __getstate__(self):
        return self.unpack(), None

    def __setstate__(self, state):
        self.__init__(*state[0])


def _linear_packed(payload):
    """A packed linear weight from PyTorch's pickled state (weight, bias): qint8 or float16 by the weight."""
    weight, bias = payload
    return (LinearPackedParams if weight.is_quantized else LinearPackedParamsFp16)(weight, bias)


# in checkpoints (dynamic RNNs' state_dicts hold them) as PyTorch's TorchScript class
_serialization.register_script_class("__torch__.torch.classes.quantized.LinearPackedParamsBase",
                                     (LinearPackedParams, LinearPackedParamsFp16), _linear_packed)


def linear_prepack(W, B=None):
    """The qint8 weight ``W`` and float bias ``B`` packed for ``linear``/``linear_dynamic``."""
    return LinearPackedParams(W, B)


def linear_prepack_fp16(W, B=None):
    return LinearPackedParamsFp16(W, B)


def linear_unpack(packed):
    return packed.unpack()


linear_unpack_fp16 = linear_unpack


class ConvPackedParams:
    """The packed weight of a quantized convolution (PyTorch's ``ConvPackedParamsBase``): qint8 (out, in / groups,
    *kernel), or (in, out / groups, *kernel) when transposed, its float bias, the geometry (``stride()``,
    ``padding()``, ...), scales and zero points per output channel and the integers ready for products."""

    def __init__(self, weight, bias, stride, padding, output_padding, dilation, groups, transposed):
        n = len(stride)
        q = _checked_weight(weight, f"conv_transpose{n}d_prepack" if transposed else f"conv{n}d_prepack",
                            None if transposed else 0)  # (transposed: checked below, per engine)
        if weight.dim() != n + 2:
            raise RuntimeError(f"Weights are expected to have {n + 2} dimensions")
        out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
        _check_bias(bias, out_channels)
        self.weight, self.bias = weight, bias
        self._stride, self._padding, self._output_padding = tuple(stride), tuple(padding), tuple(output_padding)
        self._dilation, self._groups, self.transposed = tuple(dilation), int(groups), bool(transposed)
        self.kernel = tuple(weight.shape[2:])
        w_int = weight._data.arr
        if not transposed:
            self.scales, self.zero_points = _weight_params(weight)
            self.int_weight = _qgemm.IntWeight(w_int, self.zero_points, groups=self._groups)
            return
        if q.per_channel:  # (qnnpack alone takes them: one scale per output channel, along dim 1)
            if _engine() != "qnnpack":
                raise RuntimeError("Per Channel Quantization is currently disabled for transposed conv")
            if q.axis != 1 or len(q.scales) != out_channels:
                raise RuntimeError(f"length of scales must equal to channel, expected {out_channels} got, "
                                   f"{len(q.scales)}")
        scales, zero_points = _weight_params(weight, 1 if q.per_channel else 0)
        self.scales = np.resize(scales, out_channels)
        self.zero_points = np.resize(zero_points, out_channels)
        zp = self.zero_points[:weight.shape[1]].reshape((1, -1) + (1,) * n)
        self.int_weight = _qgemm.IntWeight(w_int, zp, transposed=True)

    def unpack(self):
        return self.weight, self.bias

    def stride(self):
        return list(self._stride)

    def padding(self):
        return list(self._padding)

    def output_padding(self):
        return list(self._output_padding)

    def dilation(self):
        return list(self._dilation)

    def groups(self):
        return self._groups

    def transpose(self):
        return self.transposed

    def __getstate__(self):
        return (self.weight, self.bias, self._stride, self._padding, self._output_padding, self._dilation,
                self._groups, self.transposed)

    def __setstate__(self, state):
        self.__init__(*state)


def _conv_prepack(weight, bias, stride, padding, dilation, groups, dims, output_padding=None):
    transposed = output_padding is not None
    if not getattr(weight, "is_quantized", False) or weight.dtype is not Q.qint8:
        found = weight.dtype.torch_name if getattr(weight, "is_quantized", False) else weight.dtype
        raise RuntimeError(f"expected scalar type QInt8 but found {found}")
    if weight.dim() != dims + 2:
        raise RuntimeError(f"Weights are expected to have {dims + 2} dimensions, got {weight.dim()}")
    geometry = [list(v) if isinstance(v, (list, tuple)) else [v] * dims
                for v in (stride, padding, output_padding or 0, dilation)]
    if dims == 1 and not transposed:  # (PyTorch keeps it as a convolution of height 1)
        weight = weight.unsqueeze(2)
        geometry = [[0 if name in ("padding", "output_padding") else 1, v[0]]
                    for name, v in zip(("stride", "padding", "output_padding", "dilation"), geometry)]
    return ConvPackedParams(weight, bias, *geometry, groups, transposed)


def conv1d_prepack(weight, bias, stride, padding, dilation, groups):
    return _conv_prepack(weight, bias, stride, padding, dilation, groups, 1)


def conv2d_prepack(weight, bias, stride, padding, dilation, groups):
    return _conv_prepack(weight, bias, stride, padding, dilation, groups, 2)


def conv3d_prepack(weight, bias, stride, padding, dilation, groups):
    return _conv_prepack(weight, bias, stride, padding, dilation, groups, 3)


def conv_transpose1d_prepack(weight, bias, stride, padding, output_padding, dilation, groups):
    return _conv_prepack(weight, bias, stride, padding, dilation, groups, 1, output_padding)


def conv_transpose2d_prepack(weight, bias, stride, padding, output_padding, dilation, groups):
    return _conv_prepack(weight, bias, stride, padding, dilation, groups, 2, output_padding)


def conv_transpose3d_prepack(weight, bias, stride, padding, output_padding, dilation, groups):
    return _conv_prepack(weight, bias, stride, padding, dilation, groups, 3, output_padding)


# -- requantization: x86, fbgemm and onednn add the float bias divided by ``input_scale * weight_scale`` to the
# float32 sum, then scale by ``input_scale * weight_scale / output_scale`` (all float32 operations); qnnpack first
# quantizes the bias to int32 with scale ``input_scale * weight_scale`` and adds it to the integer sum. Both round
# half to even and add the output zero point, clamped (a fused ReLU clamps at the zero point). Float outputs
# (dynamic quantization) are ``fma(sum, input_scale * weight_scale, bias)`` on x86/fbgemm/onednn, ``sum * scale +
# bias`` on qnnpack.
def _channel_shape(ndim, axis):
    shape = [1] * ndim
    shape[axis] = -1
    return shape


def _qnnpack_bias(bias, x_scale, w_scales):
    """The bias quantized to int32 with scales ``input_scale * weight_scale`` (as qnnpack packs it)."""
    scales = np.asarray(w_scales, np.float64) * x_scale
    if np.all(scales == scales[0]):
        return _qt.quantize_unfused(bias._data, _f32(1) / _f32(scales[0]), 0, Q.qint32).astype(np.float64)
    return _qt.quantize_unfused(bias._data, _f32(1) / scales.astype(_f32), 0, Q.qint32).astype(np.float64)


def _requantize(acc, x_scale, w_scales, bias, out_scale, out_zero_point, dtype, relu=False, axis=-1):
    """Integers (``dtype``'s) of exact sums ``acc`` (int32 or floats; output channels along ``axis``: -1, or 1 of
    a convolution's (N, O, *L)) for an output of ``out_scale``/``out_zero_point``."""
    shape = _channel_shape(acc.ndim, axis)
    ats = _f32(x_scale) * np.asarray(w_scales, _f32)
    multiplier = ats / _f32(out_scale)
    qnnpack = _engine() == "qnnpack"
    if not qnnpack and acc.dtype == np.int32:  # (the compiled product's sums: one compiled pass, the same values)
        out = _requantize_loop(acc, ats, bias, multiplier, out_zero_point, dtype, relu, axis)
        if out is not None:
            return out
    multiplier = multiplier.reshape(shape)
    if qnnpack:
        if bias is not None:
            acc = acc + _qnnpack_bias(bias, x_scale, w_scales).reshape(shape)  # (an int32 sum, then float32)
        v = acc.astype(_f32)
    else:
        v = acc.astype(_f32, copy=False)  # (a float32 accumulator is used in place)
        if bias is not None:
            v += (bias._data.astype(_f32) / ats).reshape(shape)
    v *= multiplier
    np.rint(v, out=v)
    v += _f32(out_zero_point)
    np.clip(v, out_zero_point if relu else dtype.qmin, dtype.qmax, out=v)
    return v.astype(dtype.np)


_REQUANTIZE_SIG = "(int32[:, :], float32[::1], float32[::1], float32, float32, float32, uint8[:, ::1])"


def _requantize_loop(acc, ats, bias, multiplier, zero_point, dtype, relu, axis):
    """``_requantize`` of int32 sums by ``ember._qloops.requantize``, or None when the loop is not ready. A
    convolution's sums (``_qgemm.conv``'s: channels last in memory) give a channels-last output, as PyTorch's x86
    convolutions do."""
    if dtype is not Q.quint8 or not _jit.wanted(acc.size):
        return None
    fn = _jit.loop("ember._qloops", "requantize", _REQUANTIZE_SIG, acc.size, exact=True)
    if fn is None:
        return None
    sums = np.moveaxis(acc, axis, -1)
    out = np.empty(sums.shape, np.uint8)
    add = np.zeros(len(ats), _f32) if bias is None else (bias._data.astype(_f32) / ats).astype(_f32)
    args = add, multiplier.astype(_f32), _f32(zero_point), _f32(zero_point if relu else dtype.qmin), _f32(dtype.qmax)
    rows, flat = sums.reshape(-1, sums.shape[-1]), out.reshape(-1, sums.shape[-1])
    if acc.size >= _parallel.MIN_SIZE:  # (rows over the cores)
        _parallel.halves(lambda lo, hi: fn(rows[lo:hi], *args, flat[lo:hi]), len(rows))
    else:
        fn(rows, *args, flat)
    return np.moveaxis(out, -1, axis)


def _to_float(acc, x_scale, w_scales, bias, axis=-1):
    """Float32 outputs of exact sums ``acc`` of dynamically quantized inputs (scale ``x_scale``)."""
    shape = _channel_shape(acc.ndim, axis)
    ats = (_f32(x_scale) * np.asarray(w_scales, _f32)).reshape(shape)
    if _engine() == "qnnpack":
        y = acc.astype(_f32) * ats
        if bias is not None:
            y += bias._data.astype(_f32).reshape(shape)
        return y
    # the sum as float32 times a float32 scale is exact in float64; adding the bias there, then rounding: the fma
    if axis == -1 and acc.dtype == np.int32 and _jit.wanted(acc.size):
        fn = _jit.loop("ember._qloops", "sums_to_float", "(int32[:, :], float64[::1], float64[::1], float32[:, ::1])",
                       acc.size, exact=True)
        if fn is not None:  # (one compiled pass of the same operations)
            out = np.empty(acc.shape, _f32)
            args = ats.reshape(-1).astype(np.float64), np.zeros(acc.shape[-1]) if bias is None else \
                bias._data.astype(np.float64)
            rows, flat = acc.reshape(-1, acc.shape[-1]), out.reshape(-1, acc.shape[-1])
            if acc.size >= _parallel.MIN_SIZE:  # (rows over the cores)
                _parallel.halves(lambda lo, hi: fn(rows[lo:hi], *args, flat[lo:hi]), len(rows))
            else:
                fn(rows, *args, flat)
            return out
    y = acc.astype(_f32, copy=False).astype(np.float64)
    y *= ats
    if bias is not None:
        y += bias._data.astype(np.float64).reshape(shape)
    return y.astype(_f32)


# -- the kernels
def _input(x, name, op=None):
    """The per-tensor quantizer of quint8 input ``x`` of ``quantized::name`` (``op``: the name PyTorch's errors give
    the op, if another)."""
    if not getattr(x, "is_quantized", False):
        raise _no_kernel(op or name)
    q = x._data.q
    if q.per_channel:
        raise RuntimeError("Expected quantizer->qscheme() == kPerTensorAffine to be true, but got false.  (Could "
                           "this error message be improved?  If so, please report an enhancement request to "
                           "PyTorch.)")
    if q.dtype is not Q.quint8:
        raise RuntimeError(f"Expected input data type QUInt8 but got {q.dtype.torch_name}" if name == "linear" else
                           f"quantized::{name} (ONEDNN): data type of input should be QUint8.")
    return q


def _linear_sums(x, packed, name):
    q = _input(x, "linear", name)
    if x._data.shape[-1] != packed.weight._data.shape[1]:
        raise RuntimeError(f"The number of rows in the packB should be equal to K: {x._data.shape[-1]}")
    return _qgemm.linear_sums(x._data.arr, q.zero_point, _qgemm.bound(q.zero_point, 0, 255), packed.int_weight), q


def _linear(x, packed, scale, zero_point, relu=False):
    acc, q = _linear_sums(x, packed, "linear_relu" if relu else "linear")
    out = _requantize(acc, q.scale, packed.scales, packed.bias, scale, zero_point, Q.quint8, relu)
    return _out(out, Q.quint8, scale, zero_point)


def linear(X, W_prepack, Y_scale, Y_zero_point):
    """quint8 ``X`` (..., in) times the packed qint8 weight plus bias, requantized to ``Y_scale``/``Y_zero_point``
    as the engine (``ember.backends.quantized.engine``) does; the integer sums exact."""
    return _linear(X, W_prepack, Y_scale, Y_zero_point)


def linear_relu(X, W_prepack, Y_scale, Y_zero_point):
    return _linear(X, W_prepack, Y_scale, Y_zero_point, True)


def _onednn_only(op):
    """PyTorch's error for an onednn-only op on another engine (``op`` ends in its separator: "linear_tanh ",
    "conv2d_add.")."""
    engine = _engine()
    if engine != "onednn":
        raise RuntimeError(f"Didn't find engine for operation quantized::{op}{engine.upper()}")


def _linear_activation(x, packed, scale, zero_point, activation, negative_slope=None):
    """Quantized linear layer with a fused leaky_relu or tanh, computed on the float result (onednn only, as in
    PyTorch)."""
    _onednn_only(f"linear_{activation} ")
    acc, q = _linear_sums(x, packed, f"linear_{activation}")
    y = _to_float(acc, q.scale, packed.scales, packed.bias)
    y = np.where(y > 0, y, y * _f32(negative_slope)) if activation == "leaky_relu" else np.tanh(y)
    return _requantized(y.astype(_f32), Q.quint8, scale, zero_point)


def linear_leaky_relu(X, W_prepack, Y_scale, Y_zero_point, negative_slope):
    return _linear_activation(X, W_prepack, Y_scale, Y_zero_point, "leaky_relu", negative_slope)


def linear_tanh(X, W_prepack, Y_scale, Y_zero_point):
    return _linear_activation(X, W_prepack, Y_scale, Y_zero_point, "tanh")


_qnnpack_warned = []


def _dynamic_input(a, reduce_range):
    """float32 array ``a`` quantized to quint8 with the parameters of its own range (PyTorch's dynamic
    quantization: 0..127 with ``reduce_range`` except on qnnpack, which ignores it): (integers, scale, zero_point)."""
    if reduce_range and _engine() == "qnnpack":
        if not _qnnpack_warned:
            _qnnpack_warned.append(True)
            import warnings
            warnings.warn("Currently, qnnpack incorrectly ignores reduce_range when it is set to true; this may "
                          "change in a future release.", stacklevel=5)
        reduce_range = False
    lo, hi = (builtins.float(a.min()), builtins.float(a.max())) if a.size else (0.0, 0.0)
    scale, zero_point = _qt.choose_qparams(lo, hi, 0, 255, reduce_range=reduce_range)
    scale = builtins.float(_f32(scale))
    return _qt.quantize_fused(np.ascontiguousarray(a, _f32), scale, zero_point, Q.quint8), scale, zero_point


def _linear_dynamic_array(a, packed, reduce_range=True):
    """float32 array ``a`` (..., in) times a packed weight (qint8: ``a`` quantized from its own range; float16: in
    float32), plus bias: the float32 result."""
    if isinstance(packed, LinearPackedParamsFp16):
        y = (a.reshape(-1, a.shape[-1]) @ packed.rows.T).reshape(a.shape[:-1] + (packed.rows.shape[0],))
        if packed.bias is not None:
            y += packed.bias._data.astype(_f32)
        return y
    if a.shape[-1] != packed.weight._data.shape[1]:
        raise RuntimeError(f"The number of rows in the packB should be equal to K: {a.shape[-1]}")
    ints, scale, zero_point = _dynamic_input(a, reduce_range)
    acc = _qgemm.linear_sums(ints, zero_point, _qgemm.bound(zero_point, 0, 255), packed.int_weight)
    return _to_float(acc, scale, packed.scales, packed.bias)


def _linear_dynamic(X, W_prepack, reduce_range, relu):
    if X.dtype is not D.float32:
        raise RuntimeError(f"expected scalar type Float but found {str(X.dtype).split('.')[-1].title()}")
    y = _linear_dynamic_array(X._data, W_prepack, reduce_range)
    if relu:
        np.maximum(y, 0, out=y)
    return _wrap(np.ascontiguousarray(y, _f32))


def linear_dynamic(X, W_prepack, reduce_range=False):
    """Float ``X`` quantized to quint8 with its own range (``reduce_range``: 7 bits), times the packed weight, plus
    bias: a float32 result."""
    return _linear_dynamic(X, W_prepack, reduce_range, False)


def linear_relu_dynamic(X, W_prepack, reduce_range=False):
    return _linear_dynamic(X, W_prepack, reduce_range, True)


def linear_dynamic_fp16(X, W_prepack):
    return _linear_dynamic(X, W_prepack, False, False)


def linear_relu_dynamic_fp16(X, W_prepack):
    return _linear_dynamic(X, W_prepack, False, True)


def _conv_sums(x, packed, name, reflect_padding=None, relu=False, output=None):
    """(the exact sums of quint8 ``x`` (N, C, *L) by the packed (possibly transposed) weight, x's quantizer); given
    ``output`` (scale, zero point) of an x86 engine, the quint8 output itself instead where the compiled
    convolution requantizes in its tiles (``ember._qgemm.conv_requantized``)."""
    # (PyTorch's 2-d and 3-d convolutions are the ".new" overloads of its ops)
    q = _input(x, name, name + ("_relu" if relu else "") + (".new" if name in ("conv2d", "conv3d") else ""))
    channels = packed.weight._data.shape[0] if packed.transposed else packed.weight._data.shape[1] * packed._groups
    if x._data.shape[1] != channels:
        raise RuntimeError(f"Given groups={packed._groups}, expected input channels to be {channels}, but got "
                           f"{x._data.shape[1]} channels")
    bound = _qgemm.bound(q.zero_point, 0, 255)
    if packed.transposed:
        return _qgemm.conv_transpose_sums(x._data.arr, q.zero_point, bound, packed.int_weight, packed.kernel,
                                          packed._stride, packed._padding, packed._output_padding, packed._dilation,
                                          packed._groups), q
    padding, mode = (packed._padding, "zeros") if reflect_padding is None else (reflect_padding, "reflect")
    ints = x._data.arr
    int8 = packed.int_weight.int8
    if output is not None and ints.dtype == np.uint8 and getattr(int8, "in_place", None) is not None:
        if mode != "zeros":
            ints, padding = _qgemm.pad(ints, padding, mode), (0,) * len(padding)
        ats = _f32(q.scale) * packed.scales.astype(_f32)
        add = np.zeros(len(ats), _f32) if packed.bias is None else (packed.bias._data.astype(_f32) / ats).astype(_f32)
        scale, zero_point = output
        r = _qgemm.conv_requantized(ints, q.zero_point, int8, packed.kernel, packed._stride, padding,
                                    packed._dilation, add, (ats / _f32(scale)).astype(_f32), zero_point,
                                    zero_point if relu else 0, 255)
        if r is not None:
            return r, q
    return _qgemm.conv_sums(ints, q.zero_point, bound, packed.int_weight, packed.kernel, packed._stride, padding,
                            packed._dilation, packed._groups, mode), q


def _conv(x, packed, scale, zero_point, relu=False, reflect_padding=None):
    """Quantized convolution (transposed when the packed weight is) of any dims: quint8 (N, C, *L) in, quint8 out;
    with ``reflect_padding``, the input padded by reflection instead of the packed weight's zero padding."""
    n = len(packed._stride)
    name = f"conv_transpose{n}d" if packed.transposed else f"conv{n}d"
    dims = x._data.ndim - 2
    if dims == 1 and n == 2 and getattr(x, "is_quantized", False):  # (conv1d_prepack's: a convolution of height 1)
        r = _conv(_new_view(x, x._data.arr[:, :, None]), packed, scale, zero_point, relu, reflect_padding)
        return _out(r._data.arr[:, :, 0], Q.quint8, scale, zero_point)
    if dims != n:
        raise RuntimeError(f"quantized::{name}: expected a {n + 2}-d input (batch, channels and {n} spatial dims), "
                           f"got {x._data.ndim}-d")
    output = None if packed.transposed or _engine() == "qnnpack" else (scale, zero_point)
    acc, q = _conv_sums(x, packed, name, reflect_padding, relu, output)
    if acc.dtype != np.uint8:  # (sums: requantized here)
        acc = _requantize(acc, q.scale, packed.scales, packed.bias, scale, zero_point, Q.quint8, relu, 1)
    return _out(acc, Q.quint8, scale, zero_point)


def _new_view(x, arr):
    return _qt._new(arr, x._data.q)


def _conv_op(args, name):
    if len(args) not in (2, 6):
        raise TypeError(f"quantized::{name}() takes the packed weight, then output_scale and output_zero_point")
    return args[-2:]


def conv1d(qx, packed_weight, *args):
    """Quantized 1-d convolution: ``conv1d(qx, packed, output_scale, output_zero_point)``."""
    return _conv(qx, packed_weight, *_conv_op(args, "conv1d"))


def conv1d_relu(qx, packed_weight, *args):
    return _conv(qx, packed_weight, *_conv_op(args, "conv1d_relu"), True)


def conv2d(qx, weight, *args):
    """Quantized 2-d convolution (quint8 input, packed qint8 weight): the exact integer sums requantized as the
    engine does; ``conv2d(qx, packed, output_scale, output_zero_point)``."""
    return _conv(qx, weight, *_conv_op(args, "conv2d"))


def conv2d_relu(qx, weight, *args):
    return _conv(qx, weight, *_conv_op(args, "conv2d_relu"), True)


def conv3d(qx, weight, *args):
    return _conv(qx, weight, *_conv_op(args, "conv3d"))


def conv3d_relu(qx, weight, *args):
    return _conv(qx, weight, *_conv_op(args, "conv3d_relu"), True)


def conv_transpose1d(qx, packed_weight, output_scale, output_zero_point):
    return _conv(qx, packed_weight, output_scale, output_zero_point)


conv_transpose2d = conv_transpose3d = conv_transpose1d


def _conv_add(x, extra, packed, scale, zero_point, relu=False, reflect_padding=None):
    """Quantized conv2d plus a second quantized input (and ReLU), in float, requantized (onednn only)."""
    _onednn_only("conv2d_add" + ("_relu" if relu else "") + ".")
    acc, q = _conv_sums(x, packed, "conv2d_add", reflect_padding)
    y = _to_float(acc, q.scale, packed.scales, packed.bias, axis=1)
    y += _qt.dequantize_array(extra._data.arr, _check(extra, "conv2d_add"))
    if relu:
        np.maximum(y, 0, out=y)
    return _out(_qt.quantize_fused(y, scale, zero_point, Q.quint8), Q.quint8, scale, zero_point)


def conv2d_add(qx, qaccum, packed_weight, output_scale, output_zero_point):
    return _conv_add(qx, qaccum, packed_weight, output_scale, output_zero_point)


def conv2d_add_relu(qx, qaccum, packed_weight, output_scale, output_zero_point):
    return _conv_add(qx, qaccum, packed_weight, output_scale, output_zero_point, True)


# ---- normalization ---------------------------------------------------------------------------------------------
def _norm_vector(v, c):
    return np.ones(c, _f32) if v is None else v._data.astype(_f32)


def _batch_norm(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, relu, name):
    """Per channel (dim 1) ``alpha * (q - zx) + beta`` in float32, with ``alpha = weight / sqrt(var + eps) * sx /
    s`` and ``beta = (bias - mean * weight / sqrt(var + eps)) / s + zero_point``, rounded and clamped."""
    q = _check(qx, name)
    c = qx._data.shape[1]
    a = (_norm_vector(weight, c) / np.sqrt(var._data.astype(_f32) + _f32(eps))).astype(_f32)
    beta = (np.zeros(c, _f32) if bias is None else bias._data.astype(_f32)) - mean._data.astype(_f32) * a
    so = _f32(output_scale)
    alpha = (a * _f32(q.scale) / so).astype(_f32)
    beta = (beta.astype(_f32) / so + _f32(output_zero_point)).astype(_f32)
    shape = (1, -1) + (1,) * (qx._data.ndim - 2)
    y = (qx._data.arr.astype(_f32) - _f32(q.zero_point)) * alpha.reshape(shape) + beta.reshape(shape)
    r = np.clip(np.rint(y), output_zero_point if relu else q.dtype.qmin, q.dtype.qmax)
    return _out(r.astype(q.dtype.np), q.dtype, output_scale, output_zero_point)


def batch_norm(qx, weight, bias, mean, var, eps, output_scale, output_zero_point):
    """Quantized batch norm with running statistics (PyTorch's ``quantized::batch_norm``)."""
    return _batch_norm(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, False, "batch_norm")


def batch_norm_relu(qx, weight, bias, mean, var, eps, output_scale, output_zero_point):
    return _batch_norm(qx, weight, bias, mean, var, eps, output_scale, output_zero_point, True, "batch_norm_relu")


batch_norm1d = batch_norm2d = batch_norm3d = batch_norm
batch_norm1d_relu = batch_norm2d_relu = batch_norm3d_relu = batch_norm_relu


def layer_norm(input, normalized_shape, weight, bias, eps, output_scale, output_zero_point):
    """Layer norm of the real values, requantized to ``output_scale``/``output_zero_point``."""
    return _through_float(input, lambda y: REGISTRY["layer_norm"].fn(_wrap(y), list(normalized_shape), weight, bias,
                                                                     eps)._data, output_scale, output_zero_point,
                          "layer_norm")


def group_norm(input, num_groups, weight, bias, eps, output_scale, output_zero_point):
    return _through_float(input, lambda y: REGISTRY["group_norm"].fn(_wrap(y), num_groups, weight, bias, eps)._data,
                          output_scale, output_zero_point, "group_norm")


def instance_norm(input, weight, bias, eps, output_scale, output_zero_point):
    return _through_float(input, lambda y: REGISTRY["instance_norm"].fn(_wrap(y), weight, bias, None, None, True,
                                                                        0.0, eps, False)._data,
                          output_scale, output_zero_point, "instance_norm")
