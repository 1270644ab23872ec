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
from .. import _jit, _parallel, _qgemm
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
    target._version[0] += 1
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


# ---- linear (PyTorch's x86/fbgemm numerics) -------------------------------------------------------------------
class LinearPackedParams:
    """A quantized weight (qint8, per tensor or per channel along dim 0) and its float bias, as
    ``linear_prepack`` packs them for ``linear``/``linear_dynamic``; ``unpack()`` gives them back."""

    __slots__ = ("weight", "bias", "_centered", "_int8")

    def __init__(self, weight, bias):
        self.weight, self.bias, self._centered, self._int8 = weight, bias, None, None

    def unpack(self):
        return self.weight, self.bias

    def centered(self):
        """(the weight's integers minus their zero points as float32, their largest magnitude): made once, the
        packing."""
        if self._centered is None:
            c = _centered_weight(self.weight)
            self._centered = c, int(np.abs(c).max(initial=0))
        return self._centered

    def int8(self):
        """The weight as ``ember._qgemm``'s compiled product takes it."""
        if self._int8 is None:
            self._int8 = _qgemm.Int8Weight(self.weight._data.arr.reshape(self.weight._data.shape[0], -1),
                                           _weight_params(self.weight)[1])
        return self._int8

    def __getstate__(self):
        return self.unpack()

    def __setstate__(self, state):
        (self.weight, self.bias), self._centered, self._int8 = state, None, None


def linear_prepack(W, B=None):
    if not getattr(W, "is_quantized", False) or W.dtype is not Q.qint8:
        found = W.dtype.torch_name if getattr(W, "is_quantized", False) else W.dtype
        raise RuntimeError(f"expected scalar type QInt8 but found {found}")
    return LinearPackedParams(W, B)


def _centered_weight(w):
    """(rows, K) float32 of a quantized weight's integers minus their zero points (per row)."""
    _, w_zp = _weight_params(w)
    arr = w._data.arr.reshape(w._data.shape[0], -1)
    return (arr.astype(np.int32) - w_zp[:, None]).astype(_f32)


def _int_matmul(a, b, bound):
    """Exact integer ``a @ b.T`` of centered 8-bit values (float32 arrays; ``bound`` >= |a| * |b| elementwise), as
    float64: float32 BLAS over slices of K short enough that every partial sum stays below 2**24 (as few slices as
    that allows, of equal size, each copied contiguous: NumPy's matmul leaves BLAS for strided operands), the slices
    added in float64."""
    k = a.shape[-1]
    parts = -(-k * max(bound, 1) // (1 << 24))
    if parts <= 1:
        return np.matmul(a, b.T).astype(np.float64)
    step = -(-k // parts)
    out = None
    for lo in range(0, k, step):
        part = np.matmul(np.ascontiguousarray(a[:, lo:lo + step]), np.ascontiguousarray(b[:, lo:lo + step]).T)
        out = part.astype(np.float64) if out is None else out.__iadd__(part)
    return out


def _bound(zero_point, packed):
    """The largest product of a centered quint8 input (zero point ``zero_point``) and the packed weight's values."""
    return max(zero_point, 255 - zero_point) * packed.centered()[1]


def _weight_params(w):
    q = w._data.q
    rows = w._data.shape[0]
    if q.per_channel:
        return q.scales.astype(_f32), q.zero_points.astype(np.int64)
    return np.full(rows, _f32(q.scale)), np.full(rows, q.zero_point, np.int64)


def _accumulate(X, packed, name):
    """(integer accumulators of X's quint8 integers times the packed weight's, as float64; the float32 products of
    the scales per output)."""
    qx = _check(X, name)
    if qx.dtype is not Q.quint8:
        raise RuntimeError(f"Expected input data type QUInt8 but got {qx.dtype.torch_name}")
    k = packed.weight._data.shape[1]
    if X._data.shape[-1] != k:
        raise RuntimeError(f"The number of rows in the packB should be equal to K: {X._data.shape[-1]}")
    acc = _qgemm.product(X._data.arr.reshape(-1, k), qx.zero_point, packed.int8())
    if acc is None:
        xi = X._data.arr.reshape(-1, k).astype(_f32)
        xi -= qx.zero_point
        acc = _int_matmul(xi, packed.centered()[0], _bound(qx.zero_point, packed))
    return acc, _f32(qx.scale) * _weight_params(packed.weight)[0]


def _linear(X, W_prepack, Y_scale, Y_zero_point, relu, name):
    acc, ats = _accumulate(X, W_prepack, name)
    y = acc.astype(_f32)
    if W_prepack.bias is not None:
        y += (W_prepack.bias._data.astype(_f32) / ats).astype(_f32)
    y *= (ats / _f32(Y_scale)).astype(_f32)
    r = np.rint(y).astype(np.float64) + Y_zero_point
    np.clip(r, Y_zero_point if relu else 0, 255, out=r)
    shape = X._data.shape[:-1] + (W_prepack.weight._data.shape[0],)
    return _out(r.astype(np.uint8).reshape(shape), Q.quint8, Y_scale, Y_zero_point)


def linear(X, W_prepack, Y_scale, Y_zero_point):
    """quint8 ``X`` times the packed qint8 weight plus bias, requantized as fbgemm does: ``rint((acc + bias / (sx *
    sw)) * (sx * sw / Y_scale)) + Y_zero_point`` in float32 (the integer accumulator exact)."""
    return _linear(X, W_prepack, Y_scale, Y_zero_point, False, "linear")


def linear_relu(X, W_prepack, Y_scale, Y_zero_point):
    return _linear(X, W_prepack, Y_scale, Y_zero_point, True, "linear_relu")


def linear_dynamic(X, W_prepack, reduce_range=False):
    """Float ``X`` quantized to quint8 with its own range (``reduce_range``: 7 bits), times the packed weight:
    a float32 result ``fma(acc, sx * sw, bias)``."""
    return _linear_dynamic(X, W_prepack, reduce_range, False)


def linear_relu_dynamic(X, W_prepack, reduce_range=False):
    return _linear_dynamic(X, W_prepack, reduce_range, True)


def _linear_dynamic(X, W_prepack, reduce_range, relu):
    x = X._data.astype(_f32, copy=False)
    lo, hi = (float(x.min()), float(x.max())) if x.size else (0.0, 0.0)
    scale, zp = _qt.choose_qparams(lo, hi, Q.quint8, reduce_range)
    qx = _qt._new(_qt.quantize_fused(x, scale, zp, Q.quint8), _qt._Quantizer(Q.quint8, Q.per_tensor_affine, scale,
                                                                            zp))
    acc, ats = _accumulate(qx, W_prepack, "linear_dynamic")
    y = acc.astype(_f32).astype(np.float64) * ats  # (exact: fbgemm adds the bias in a fused multiply-add)
    if W_prepack.bias is not None:
        y += W_prepack.bias._data.astype(_f32)
    y = y.astype(_f32)
    if relu:
        np.maximum(y, 0, out=y)
    return _wrap(y.astype(_f32).reshape(X._data.shape[:-1] + (W_prepack.weight._data.shape[0],)))


# ---- convolution (PyTorch's x86 numerics: fbgemm's and oneDNN's requantization agree) ------------------------
class ConvPackedParams:
    """A quantized convolution weight (qint8, per tensor or per output channel), its float bias and geometry, as
    ``conv{1,2,3}d_prepack`` packs them; ``unpack()`` gives (weight, bias). A 1-d weight is kept as 2-d with a
    height of 1, as PyTorch keeps it."""

    __slots__ = ("weight", "bias", "_stride", "_padding", "_dilation", "_groups", "_centered", "_int8")
    centered = LinearPackedParams.centered

    def __init__(self, weight, bias, stride, padding, dilation, groups):
        self.weight, self.bias, self._centered, self._int8 = weight, bias, None, None
        self._stride, self._padding, self._dilation = list(stride), list(padding), list(dilation)
        self._groups = int(groups)

    def unpack(self):
        return self.weight, self.bias

    def stride(self):
        return list(self._stride)

    def padding(self):
        return list(self._padding)

    def dilation(self):
        return list(self._dilation)

    def groups(self):
        return self._groups

    def transpose(self):
        return False

    def output_padding(self):
        return [0] * len(self._stride)

    def int8(self):
        """The weight as ``ember._qgemm``'s compiled convolution takes it."""
        if self._int8 is None:
            self._int8 = _qgemm.ConvWeight(self.weight._data.arr, _weight_params(self.weight)[1], self._groups)
        return self._int8

    def __getstate__(self):
        return self.weight, self.bias, self._stride, self._padding, self._dilation, self._groups

    def __setstate__(self, state):
        self.weight, self.bias, self._stride, self._padding, self._dilation, self._groups = state
        self._centered = self._int8 = None


def _conv_prepack(weight, bias, stride, padding, dilation, groups, dims):
    if not getattr(weight, "is_quantized", False) or weight.dtype is not Q.qint8:
        found = weight.dtype.torch_name if getattr(weight, "is_quantized", False) else weight.dtype
        raise RuntimeError(f"expected scalar type QInt8 but found {found}")
    if weight.dim() != dims + 2:
        raise RuntimeError(f"Weights are expected to have {dims + 2} dimensions, got {weight.dim()}")
    geometry = [list(v) if isinstance(v, (list, tuple)) else [v] * dims for v in (stride, padding, dilation)]
    if dims == 1:  # (kept as a convolution of height 1)
        weight = weight.unsqueeze(2)
        geometry = [[1, v[0]] if name != "padding" else [0, v[0]] for name, v in
                    zip(("stride", "padding", "dilation"), geometry)]
    return ConvPackedParams(weight, bias, *geometry, groups)


def conv1d_prepack(weight, bias, stride, padding, dilation, groups):
    return _conv_prepack(weight, bias, stride, padding, dilation, groups, 1)


def conv2d_prepack(weight, bias, stride, padding, dilation, groups):
    return _conv_prepack(weight, bias, stride, padding, dilation, groups, 2)


def conv3d_prepack(weight, bias, stride, padding, dilation, groups):
    return _conv_prepack(weight, bias, stride, padding, dilation, groups, 3)


def _conv_accumulate(xi, wi, stride, padding, dilation, groups, bound):
    """Exact integer convolution of centered integers ``xi`` (N, C, *S) and ``wi`` (O, C/groups, *K), as floats:
    windows of the zero-padded input against the weight, on float BLAS (float32 while the sums stay below 2**24,
    float64 beyond)."""
    d = len(stride)
    xi = np.pad(xi, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    kernel = wi.shape[2:]
    extent = [(k - 1) * dl + 1 for k, dl in zip(kernel, dilation)]
    win = np.lib.stride_tricks.sliding_window_view(xi, extent, axis=tuple(range(2, 2 + d)))
    win = win[(Ellipsis,) + tuple(slice(None, None, s) for s in stride) + tuple(slice(None, None, dl)
                                                                              for dl in dilation)]
    # win: (N, C, *out, *kernel)
    n, c = xi.shape[:2]
    out_shape = win.shape[2:2 + d]
    o = wi.shape[0]
    per = c // groups
    k_size = per * int(np.prod(kernel))
    result = np.empty((n, o) + out_shape, np.float64)
    og = o // groups
    for g in range(groups):
        part = win[:, g * per:(g + 1) * per]
        # (N, *out, C/g, *kernel) rows against (O/g, C/g * kernel)
        cols = np.moveaxis(part, 1, 1 + d).reshape(n * int(np.prod(out_shape)), k_size)
        prod = _int_matmul(cols, wi[g * og:(g + 1) * og].reshape(og, k_size), bound)
        result[:, g * og:(g + 1) * og] = np.moveaxis(prod.reshape((n,) + out_shape + (og,)), -1, 1)
    return result


def _conv(qx, packed, args, relu, dims, name):
    if len(args) not in (2, 6):
        raise TypeError(f"quantized::{name}() takes the packed weight, then output_scale and output_zero_point")
    scale, zero_point = args[-2:]
    q = _check(qx, name)
    if q.dtype is not Q.quint8:
        raise RuntimeError(f"Expected input data type QUInt8 but got {q.dtype.torch_name}")
    w = packed.weight
    x = qx._data.arr
    if x.ndim != dims + 2:
        raise RuntimeError(f"quantized::{name}: expected a {dims + 2}-d input (batch, channels and {dims} spatial "
                           f"dims), got {x.ndim}-d")
    if dims == 1:
        x = x[:, :, None]
    if x.shape[1] != w._data.shape[1] * packed.groups():
        raise RuntimeError(f"quantized::{name}: the input has {x.shape[1]} channels, the weight expects "
                           f"{w._data.shape[1] * packed.groups()}")
    w_scale = _weight_params(w)[0]
    shape = (-1,) + (1,) * (w._data.ndim - 2)
    acc = _qgemm.conv(x, q.zero_point, packed.int8(), w._data.shape[2:], packed.stride(), packed.padding(),
                      packed.dilation())
    if acc is None:
        xi = x.astype(_f32)
        xi -= q.zero_point
        acc = _conv_accumulate(xi, packed.centered()[0].reshape(w._data.shape), packed.stride(), packed.padding(),
                               packed.dilation(), packed.groups(), _bound(q.zero_point, packed))
    ats = _f32(q.scale) * w_scale
    y = acc.astype(_f32)
    if packed.bias is not None:
        y += (packed.bias._data.astype(_f32) / ats).astype(_f32).reshape(shape)
    y *= (ats / _f32(scale)).astype(_f32).reshape(shape)
    r = np.rint(y).astype(np.float64) + zero_point
    np.clip(r, zero_point if relu else 0, 255, out=r)
    r = r.astype(np.uint8)
    return _out(r[:, :, 0] if dims == 1 else r, Q.quint8, scale, zero_point)


def conv1d(qx, packed_weight, *args):
    """Quantized 1-d convolution: ``conv1d(qx, packed, output_scale, output_zero_point)``."""
    return _conv(qx, packed_weight, args, False, 1, "conv1d")


def conv1d_relu(qx, packed_weight, *args):
    return _conv(qx, packed_weight, args, True, 1, "conv1d_relu")


def conv2d(qx, weight, *args):
    """Quantized 2-d convolution (quint8 input, packed qint8 weight): the exact integer sums requantized as
    fbgemm/oneDNN do; ``conv2d(qx, packed, output_scale, output_zero_point)``."""
    return _conv(qx, weight, args, False, 2, "conv2d")


def conv2d_relu(qx, weight, *args):
    return _conv(qx, weight, args, True, 2, "conv2d_relu")


def conv3d(qx, weight, *args):
    return _conv(qx, weight, args, False, 3, "conv3d")


def conv3d_relu(qx, weight, *args):
    return _conv(qx, weight, args, True, 3, "conv3d_relu")


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
