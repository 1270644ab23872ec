"""Quantized tensors: integers plus the parameters that map them to real values (per tensor or per channel).

A quantized tensor is a ``Tensor`` subclass whose ``_data`` is a stand-in (``_QArray``) holding its integer array
(one value per element, also for the packed 4- and 2-bit types) and its ``_Quantizer``. The stand-in is no NumPy
array, so the dense fast paths never see one: the registry meets it in its device check and hands the call to
``dispatch`` below (as it does sparse tensors), which runs the ops PyTorch allows on quantized tensors and raises
PyTorch's NotImplementedError for the rest. Views and copies run the op on the integers and keep the parameters
(per-channel tensors follow their channel axis through the op); quantized kernels live in ``ember.ops.quantized``.

Numerics are PyTorch's (x86): ``quantize_per_tensor`` to 8 bits rounds ``x * (1/scale) + zero_point`` once (a fused
multiply-add) half to even; qint32 and per-channel quantization round ``float32(x * (1/scale)) + zero_point``;
dequantization is ``(q - zero_point) * float32(scale)`` in float32 (per channel in float64, rounded once).
"""
import builtins
import math
import warnings

import numpy as np

from . import _dtype as D
from . import _jit, _parallel
from . import _qtypes as Q
from ._device import as_device
from ._registry import STAND_INS, TORCH_NAME
from ._tensor import HostStandInTensor, Tensor, _address

ndarray = np.ndarray
_f32 = np.float32
_wrap = Tensor._wrap


class _Quantizer:
    """The quantization parameters of a tensor: dtype and scheme, then ``scale``/``zero_point`` (Python float and
    int) per tensor, or ``scales``/``zero_points`` (NumPy arrays: float64 and int64, or float32 for
    per_channel_affine_float_qparams) and ``axis`` per channel."""

    __slots__ = ("dtype", "qscheme", "scale", "zero_point", "scales", "zero_points", "axis")

    def __init__(self, dtype, qscheme, scale=None, zero_point=None, scales=None, zero_points=None, axis=None):
        self.dtype, self.qscheme = dtype, qscheme
        self.scale, self.zero_point = scale, zero_point
        self.scales, self.zero_points, self.axis = scales, zero_points, axis

    @property
    def per_channel(self):
        return self.scales is not None

    def channel(self, c):
        """The per-tensor quantizer of channel ``c`` (what selecting one channel leaves)."""
        return _Quantizer(self.dtype, Q.per_tensor_affine, builtins.float(_f32(self.scales[c])),
                          builtins.int(self.zero_points[c]))

    def channels(self, index, axis):
        return _Quantizer(self.dtype, self.qscheme, scales=self.scales[index], zero_points=self.zero_points[index],
                          axis=axis)

    def same(self, other):
        if self.dtype is not other.dtype or self.qscheme is not other.qscheme:
            return False
        if not self.per_channel:
            return self.scale == other.scale and self.zero_point == other.zero_point
        return (self.axis == other.axis and np.array_equal(self.scales, other.scales)
                and np.array_equal(self.zero_points, other.zero_points))


class _QArray:
    """The stand-in array of a quantized tensor: its integers ``arr`` and quantizer ``q``. It answers the shape
    questions Tensor's own methods ask; it is no array, so ops never compute on it."""

    __slots__ = ("arr", "q")

    def __init__(self, arr, q):
        self.arr, self.q = arr, q

    shape = property(lambda self: self.arr.shape)
    ndim = property(lambda self: self.arr.ndim)
    size = property(lambda self: self.arr.size)
    strides = property(lambda self: self.arr.strides)
    itemsize = property(lambda self: self.arr.itemsize)
    nbytes = property(lambda self: self.arr.nbytes)
    flags = property(lambda self: self.arr.flags)
    dtype = property(lambda self: self.arr.dtype)  # (the registry promotes with it before it meets the stand-in)

    def __array__(self, *args, **kwargs):
        raise TypeError("a quantized tensor has no float array: use Tensor.dequantize() or Tensor.int_repr()")


def _new(arr, q, like=None):
    """A quantized tensor over integer array ``arr``; a view of ``like``'s memory shares its version counter."""
    t = _wrap_q(_QArray(arr, q))
    if like is not None:
        t._vc = like._vc
        t._base = like._base if like._base is not None else like
    return t


def _ints(t):
    """A plain tensor over ``t``'s integers (same memory and version counter): ops run on it."""
    i = _wrap(t._data.arr)
    i._vc, i._base = t._vc, t._base
    return i


def _torch_name(t):
    return "QuantizedCPU" if t.is_quantized else "CPU"


def _not_implemented(name, t):
    return NotImplementedError(f"Could not run 'aten::{name}' with arguments from the '{_torch_name(t)}' backend. "
                               "This could be because the operator doesn't exist for this backend.")


class QuantizedTensor(HostStandInTensor):
    """A tensor of a quantized dtype (``ember.quint8``, ...): PyTorch's quantized CPU tensor."""

    __slots__ = ()
    is_quantized = True

    @property
    def dtype(self):
        return self._data.q.dtype

    def storage_offset(self):
        base = (self._base if self._base is not None else self)._data.arr
        return (_address(self._data.arr) - _address(base)) // self._data.arr.itemsize

    def element_size(self):
        return self._data.q.dtype.itemsize

    # ---- the quantization parameters -----------------------------------------------------------------
    def int_repr(self):
        arr = self._data.arr
        if self._data.q.dtype.bits < 8:
            return _wrap(_pack(arr, self._data.q.dtype.bits))
        return _wrap(arr.copy())

    def qscheme(self):
        return self._data.q.qscheme

    def q_scale(self):
        return self._per_tensor().scale

    def q_zero_point(self):
        return self._per_tensor().zero_point

    def q_per_channel_scales(self):
        return _wrap(self._per_channel().scales.copy())

    def q_per_channel_zero_points(self):
        return _wrap(self._per_channel().zero_points.copy())

    def q_per_channel_axis(self):
        return self._per_channel().axis

    def _per_tensor(self):
        q = self._data.q
        if q.per_channel:
            raise RuntimeError("Expected quantizer->qscheme() == kPerTensorAffine to be true, but got false.")
        return q

    def _per_channel(self):
        q = self._data.q
        if not q.per_channel:
            raise RuntimeError("Expected quantizer->qscheme() == kPerChannelAffine || quantizer->qscheme() == "
                               "kPerChannelAffineFloatQParams to be true, but got false.")
        return q

    def dequantize(self):
        return _wrap(dequantize_array(self._data.arr, self._data.q))

    # ---- conversions PyTorch refuses or answers from the real values --------------------------------
    def numpy(self, *, force=False):
        raise TypeError(f"Got unsupported ScalarType {self.dtype.torch_name}")

    def __array__(self, dtype=None, copy=None):
        self.numpy()

    def tolist(self):
        raise RuntimeError("load_scalar: invalid type")

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self.dequantize().item()

    def _host(self):
        return self.dequantize()._data

    def is_signed(self):
        return self.dtype.is_signed

    def is_floating_point(self):
        return False

    # ---- autograd: quantized tensors never require grad ---------------------------------------------
    @property
    def requires_grad(self):
        return False

    @requires_grad.setter
    def requires_grad(self, value):
        if value:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")

    @property
    def data(self):
        return self.detach()

    def detach(self):
        return _new(self._data.arr, self._data.q, self)

    def detach_(self):
        return self

    def contiguous(self, memory_format=None):
        arr = self._data.arr  # (a row-major copy, whatever layout clone keeps)
        return self if arr.flags.c_contiguous else _new(np.ascontiguousarray(arr), self._data.q)

    def __repr__(self, *, tensor_contents=None):
        return quantized_repr(self, tensor_contents)

    def __reduce_ex__(self, protocol):
        q = self._data.q
        params = (q.scale, q.zero_point) if not q.per_channel else (q.scales, q.zero_points, q.axis)
        return _rebuild, (np.ascontiguousarray(self._data.arr), q.dtype.name, q.qscheme.name, params)

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = self.clone()
        return memo[id(self)]

    def __hash__(self):
        return id(self)


_wrap_q = QuantizedTensor._wrap


def _rebuild(arr, dtype, qscheme, params):
    """A quantized tensor from its pickled parts (plain pickling: copy, multiprocessing)."""
    q = _Quantizer(Q.by_name(dtype), getattr(Q, qscheme), *params) if len(params) == 2 else \
        _Quantizer(Q.by_name(dtype), getattr(Q, qscheme), scales=params[0], zero_points=params[1], axis=params[2])
    return _new(arr, q)


def _pack(arr, bits):
    """The bytes of sub-byte values, ``8 // bits`` to a byte, the first in the low bits (PyTorch's int_repr)."""
    per = 8 // bits
    flat = arr.reshape(-1)
    padded = np.zeros(-(-flat.size // per) * per, np.uint8)
    padded[:flat.size] = flat
    parts = padded.reshape(-1, per).astype(np.uint8)
    out = np.zeros(parts.shape[0], np.uint8)
    for k in range(per):
        out |= parts[:, k] << np.uint8(k * bits)
    return out


# ---- quantizing and dequantizing arrays -----------------------------------------------------------------------
def quantize_fused(x, scale, zero_point, dtype):
    """Integers of float32 array ``x``: ``rint(fma(x, 1/scale, zero_point))`` clamped (PyTorch's 8-bit
    ``quantize_per_tensor``). The product of two float32 values is exact in float64, and so is adding a zero point
    of a few bits: the float64 sum rounded to float32 is the fused result. Large inputs take a compiled loop."""
    inv = _f32(1) / _f32(scale)
    out = np.empty(x.shape, dtype.np)
    if x.size and dtype.bits <= 8:
        fn = _jit.loop("ember._qloops", "quantize_fused", _SIG[dtype.np], x.size)
        if fn is not None:
            _split(fn, np.ascontiguousarray(x).reshape(-1), (inv, _f32(zero_point), _f32(dtype.qmin),
                                                             _f32(dtype.qmax)), out.reshape(-1),
                   f"quantize_fused {dtype.np.name}")
            return out
    v = np.multiply(x, np.float64(inv), dtype=np.float64, out=np.empty(x.shape, np.float64))
    v += zero_point
    r = v.astype(_f32)
    np.rint(r, out=r)
    np.clip(r, dtype.qmin, dtype.qmax, out=r)
    out[...] = r
    return out


_SIG = {np.dtype(np.int8): "(float32[::1], float32, float32, float32, float32, int8[::1])",
        np.dtype(np.uint8): "(float32[::1], float32, float32, float32, float32, uint8[::1])"}
_DEQUANTIZE_SIG = {np.dtype(t): f"({t}[::1], float32, float32, float32[::1])" for t in ("int8", "uint8")}
# Elements from which the (de)quantizing loops split over the cores. They run near memory speed (quantize 1M float32:
# 52 us on one core of a 2-core AMD EPYC VM), so a helper woken for half the work starts when it is nearly done: timed
# between calls of torch, one core -> split at 1M: 59-61 -> 60-61 us, 2M: 129-134 -> 109-115, 4M: 411 -> 278-296.
_SPLIT_MIN = 1 << 21


def _split(fn, x, args, out, key):
    """``fn(x, *args, out)`` for an elementwise loop over flat arrays (``key`` its parts' in ``ember._qloops.parts``):
    by its C-callable parts over ``ember._parallel``'s spinning helpers from SPIN_MIN elements once they are
    compiled, else over the cores from ``_SPLIT_MIN`` elements."""
    if x.size >= _parallel.SPIN_MIN and _parallel.SPINS and _parallel.WORKERS > 1:
        parts = _jit.loop("ember._qloops", "parts", key, x.size, _parallel.SPIN_MIN, exact=True)
        if parts is not None:
            from . import _numba_kernels  # (loaded by then: the parts use its run and serve)
            block = np.array([x.ctypes.data, out.ctypes.data] + [np.float64(v).view(np.int64) for v in args],
                             np.int64)
            if _parallel.spun(_numba_kernels.parts, _numba_kernels.parts.run, parts.address[key], block, x.size,
                              _parallel.SPIN_CHUNK):
                return
    if x.size < _SPLIT_MIN:
        fn(x, *args, out)
    else:
        _parallel.loop(lambda a, o: fn(a, *args, o), x, out=out, minimum=_SPLIT_MIN)


def quantize_unfused(x, inv, zero_point, dtype):
    """Integers of float32 ``x``: ``rint(float32(x * inv) + zero_point)`` clamped (qint32, per channel: ``inv`` and
    ``zero_point`` broadcast against ``x``)."""
    r = np.multiply(x, inv, dtype=_f32)
    if dtype is Q.qint32:  # (float32 holds no int32 bound: clamp in float64)
        r = np.rint(r.astype(np.float64) + zero_point)
    else:
        r += zero_point
        np.rint(r, out=r)
    np.clip(r, dtype.qmin, dtype.qmax, out=r)
    return r.astype(dtype.np)


def quantize_rounded(x, scale, zero_point, dtype):
    """Integers of float32 ``x`` as PyTorch's vectorised kernels requantize: ``rint(float32(x * inv)) +
    zero_point`` clamped (the zero point added after rounding), ``inv = float32(1 / scale)``."""
    inv = _f32(1.0 / scale)
    r = np.multiply(x, inv, dtype=_f32)
    np.rint(r, out=r)
    r = r.astype(np.float64) if dtype is Q.qint32 else r
    r += zero_point
    np.clip(r, dtype.qmin, dtype.qmax, out=r)
    return r.astype(dtype.np)


def dequantize_array(arr, q):
    """The float32 values of integers ``arr`` under quantizer ``q`` (8-bit per-tensor integers of many elements: a
compiled loop of the same operations)."""
    if not q.per_channel:
        if _jit.wanted(arr.size) and arr.dtype.itemsize == 1:  # (small: NumPy's own loops are as fast)
            fn = _jit.loop("ember._qloops", "dequantize", _DEQUANTIZE_SIG[arr.dtype], arr.size, exact=True)
            if fn is not None:
                out = np.empty(arr.shape, _f32)
                _split(fn, np.ascontiguousarray(arr).reshape(-1), (_f32(q.zero_point), _f32(q.scale)),
                       out.reshape(-1), f"dequantize {arr.dtype.name}")
                return out
        r = arr.astype(_f32)
        r -= _f32(q.zero_point)
        r *= _f32(q.scale)
        return r
    shape = [1] * arr.ndim
    shape[q.axis] = -1
    if q.qscheme is Q.per_channel_affine_float_qparams:
        r = arr.astype(_f32)
        r -= q.zero_points.astype(_f32).reshape(shape)
        r *= q.scales.astype(_f32).reshape(shape)
        return r
    r = arr.astype(np.float64) - q.zero_points.reshape(shape)
    r *= q.scales.reshape(shape)
    return r.astype(_f32)


# ---- creation -------------------------------------------------------------------------------------------------
_warned = []


def _warn_deprecated():
    """PyTorch 2.13 warns once per process that creating 8- and 32-bit quantized tensors is deprecated."""
    if not _warned:
        _warned.append(True)
        warnings.warn("ember.quantize_per_tensor, ember.quantize_per_channel and other quantized tensor creation "
                      "functions that produce tensors with dtype ember.quint8, ember.qint8, and ember.qint32 are "
                      "deprecated and will be removed in a future PyTorch release.", UserWarning, stacklevel=3)


def _check_dtype(dtype):
    if not isinstance(dtype, Q._QuantizedDtype):
        name = {D.float32: "Float", D.float64: "Double"}.get(dtype, str(dtype))
        raise RuntimeError(f"ScalarType {name} is not supported in new_qtensor.")


def _float_input(input, message=None):
    if not isinstance(input, Tensor):
        raise TypeError(f"quantize_per_tensor(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if input.is_quantized or input.dtype is not D.float32:
        raise RuntimeError(f"{message or 'Quantize only works on Float Tensor'}, got "
                           f"{TORCH_NAME.get(input.dtype, input.dtype)}")
    if input.is_cuda:
        raise RuntimeError("ember has no quantized CUDA tensors (PyTorch's quantized kernels run on the CPU): move "
                           "the tensor to the CPU first")
    return input._data


def _check_zero_point(zp, dtype, where):
    if zp > dtype.qmax:
        raise RuntimeError(f"{where} zero_point {zp} is above upper bound.")
    if zp < dtype.qmin:
        raise RuntimeError(f"{where} zero_point {zp} is below lower bound.")


def _scalar_param(v, kind):
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise RuntimeError(f"quantize_per_tensor: {kind} must hold one element, got {v.numel()}")
        v = v.item()
    return builtins.float(v) if kind == "scale" else builtins.int(v)


def quantize_per_tensor(input, scale, zero_point, dtype):
    """Quantize float32 ``input`` with one scale and zero point (numbers or one-element tensors); given a list of
    tensors, quantize each with its entry of the tensors ``scale`` and ``zero_point``."""
    if isinstance(input, (list, tuple)):
        if not (isinstance(scale, Tensor) and isinstance(zero_point, Tensor)):
            raise TypeError(f"quantize_per_tensor() received an invalid combination of arguments - got (list, "
                            f"{type(scale).__name__}, {type(zero_point).__name__}, {type(dtype).__name__})")
        scales, zps = scale.reshape(-1).tolist(), zero_point.reshape(-1).tolist()
        return [quantize_per_tensor(x, _f32(s).item(), z, dtype) for x, s, z in zip(input, scales, zps)]
    if isinstance(scale, Tensor) and scale.dtype is not D.float64:
        scale = _f32(scale.item()).item()  # (PyTorch reads a float32 scale tensor as float32)
    scale, zero_point = _scalar_param(scale, "scale"), _scalar_param(zero_point, "zero_point")
    _check_dtype(dtype)
    x = _float_input(input)
    _check_zero_point(zero_point, dtype, "quantize_tensor_per_tensor_affine")
    _warn_deprecated()
    if dtype is Q.qint32:
        ints = quantize_unfused(x, _f32(1) / _f32(scale), _f32(zero_point), dtype)
    elif dtype.bits < 8:  # (the packed types add the zero point after rounding)
        ints = np.clip(np.rint(np.multiply(x, _f32(1) / _f32(scale), dtype=_f32)) + zero_point, dtype.qmin,
                       dtype.qmax).astype(dtype.np)
    else:
        ints = quantize_fused(x, scale, zero_point, dtype)
    return _new(ints, _Quantizer(dtype, Q.per_tensor_affine, scale, zero_point))


_SMALL_SCALE = builtins.float(_f32(6.1e-5))  # scales below float16's normal range are raised to it


def choose_qparams(min_val, max_val, qmin, qmax, preserve_sparsity=False, reduce_range=False):
    """(scale, zero_point) mapping [min_val, max_val] (widened to hold 0) onto [qmin, qmax] as PyTorch's C++ side
    chooses them (``ChooseQuantizationParams``: dynamic quantization, the fused observer-fake-quantize op): float32
    bounds, double intermediates; ``preserve_sparsity`` makes the range symmetric around the middle. The scale is a
    Python float (callers that store it in float32 round it)."""
    f32 = lambda v: builtins.float(_f32(v))  # noqa: E731
    lo, hi = f32(min_val), f32(max_val)
    if not lo <= hi:
        raise RuntimeError("In ChooseQuantizationParams, min should be less than or equal to max")
    if reduce_range:
        qmin, qmax = builtins.int(qmin / 2), builtins.int(qmax / 2)  # (C++ division truncates toward zero)
    if lo < 0 < hi and preserve_sparsity:
        sym_min = -((qmax - qmin) // 2 + 1)
        sym_max = (qmax - qmin) // 2
        max_scale = max(abs(f32(lo / sym_min)), abs(f32(hi / sym_max)))
        lo, hi = f32(max_scale * sym_min), f32(max_scale * sym_max)
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if not qmin < qmax:
        raise RuntimeError("In ChooseQuantizationParams, qmin should be less than qmax")
    scale = (hi - lo) / (qmax - qmin)
    if f32(scale) == 0.0 or math.isinf(_f32(1.0) / _f32(scale)):
        scale = 0.1
    if scale < _SMALL_SCALE:
        original = f32(scale)
        scale = _SMALL_SCALE
        if lo == 0.0:
            hi = f32(_SMALL_SCALE * (qmax - qmin))
        elif hi == 0.0:
            lo = f32(-_SMALL_SCALE * (qmax - qmin))
        else:
            amplifier = f32(_f32(_SMALL_SCALE) / _f32(original))
            lo, hi = f32(_f32(lo) * _f32(amplifier)), f32(_f32(hi) * _f32(amplifier))
    from_min, from_max = qmin - lo / scale, qmax - hi / scale
    # the zero point from the end whose terms are smaller carries less rounding error
    zero_point = from_min if abs(qmin) - abs(lo / scale) < abs(qmax) - abs(hi / scale) else from_max
    if lo < 0 < hi and preserve_sparsity:
        zero_point = (qmin + qmax) / 2
    if zero_point < qmin:
        zero_point = qmin
    elif zero_point > qmax:
        zero_point = qmax
    else:
        zero_point = builtins.int(np.rint(zero_point))
    return scale, builtins.int(zero_point)


def _choose_qparams_per_tensor(input, reduce_range=False):
    """(scale, zero_point) of quint8 dynamic quantization of ``input``'s range."""
    x = _float_input(input)
    return choose_qparams(builtins.float(x.min()) if x.size else 0.0, builtins.float(x.max()) if x.size else 0.0,
                          0, 255, reduce_range=reduce_range)


def quantize_per_tensor_dynamic(input, dtype, reduce_range):
    """Quantize ``input`` with the scale and zero point its own range gives (quint8, qint8)."""
    if dtype not in (Q.quint8, Q.qint8):
        raise RuntimeError(f"dtype {dtype.torch_name if isinstance(dtype, Q._QuantizedDtype) else dtype}"
                           "not supported")
    x = _float_input(input)
    lo, hi = (builtins.float(x.min()), builtins.float(x.max())) if x.size else (0.0, 0.0)
    scale, zp = choose_qparams(lo, hi, 0, 255, reduce_range=reduce_range)
    if dtype is Q.qint8:  # (the same grid, the zero point moved by half the range)
        zp -= 64 if reduce_range else 128
    return quantize_per_tensor(input, scale, zp, dtype)


def _channel_params(scales, zero_points, axis, ndim, shape, where):
    if not isinstance(scales, Tensor) or not isinstance(zero_points, Tensor):
        raise TypeError(f"{where}: scales and zero_points must be tensors")
    if scales.dim() != 1:
        raise RuntimeError("scale tensor must have dimension 1")
    if zero_points.dim() != 1:
        raise RuntimeError("zero_points tensor must have dimension 1")
    if scales.numel() != zero_points.numel():
        raise RuntimeError("number of elements in scales and zero_points must match")
    if not scales.dtype.is_floating_point:
        raise RuntimeError("scale tensor must be floating point")
    if not 0 <= axis < ndim:
        raise RuntimeError(f"Channel axis out of range in per channel affine quantization. Got: {axis}Expected: "
                           f"[0, {ndim})")
    if shape[axis] != scales.numel():
        raise RuntimeError(f"length of scales must equal to channel, expected {shape[axis]} got, {scales.numel()}")
    float_zp = zero_points.dtype.is_floating_point
    s = scales._data.astype(_f32 if float_zp else np.float64)
    z = zero_points._data.astype(_f32 if float_zp else np.int64)
    return s, z, float_zp


def quantize_per_channel(input, scales, zero_points, axis, dtype):
    """Quantize float32 ``input`` with one scale and zero point per index along ``axis``; float zero points give
    ``per_channel_affine_float_qparams``."""
    _check_dtype(dtype)
    # (PyTorch names the integer-zero-point kernel when the input is not float32)
    affine = not (isinstance(zero_points, Tensor) and zero_points.dtype.is_floating_point)
    x = _float_input(input, "quantize_tensor_per_channel_affine expects a Float Tensor" if affine else None)
    s, z, float_zp = _channel_params(scales, zero_points, axis, x.ndim, x.shape, "quantize_per_channel")
    if dtype.bits < 8 and not float_zp:
        raise NotImplementedError(f"\"quantize_tensor_per_channel_affine\" not implemented for '{dtype.torch_name}'")
    shape = [1] * x.ndim
    shape[axis] = -1
    if float_zp:
        # per-channel float qparams: rint(x / scale + zero_point) in float32 (PyTorch's embedding-bag packing)
        inv = _f32(1) / s.reshape(shape)
        r = np.rint(np.multiply(x, inv, dtype=_f32) + z.reshape(shape))
        ints = np.clip(r, dtype.qmin, dtype.qmax).astype(dtype.np)
        scheme = Q.per_channel_affine_float_qparams
    else:
        for zp in z.tolist():
            _check_zero_point(zp, dtype, "quantize_tensor_per_channel_affine")
        inv = _f32(1) / s.astype(_f32).reshape(shape)
        ints = quantize_unfused(x, inv, z.astype(_f32 if dtype is not Q.qint32 else np.float64).reshape(shape),
                                dtype)
        scheme = Q.per_channel_affine
    _warn_deprecated()
    return _new(ints, _Quantizer(dtype, scheme, scales=s, zero_points=z, axis=axis))


def _int_input(input):
    if input.is_quantized or input.dtype not in Q.QUANTIZED_OF:
        raise RuntimeError("Creation of quantized tensor requires quantized dtype like ember.quint8")
    return Q.QUANTIZED_OF[input.dtype]


def _make_per_tensor_quantized_tensor(input, scale, zero_point):
    """A quantized tensor over a copy of integer tensor ``input`` (int8 -> qint8, uint8 -> quint8, int32 ->
    qint32) with the given scale and zero point."""
    dtype = _int_input(input)
    _warn_deprecated()
    return _new(input._data.copy(), _Quantizer(dtype, Q.per_tensor_affine, _scalar_param(scale, "scale"),
                                               _scalar_param(zero_point, "zero_point")))


def _make_per_channel_quantized_tensor(input, scale, zero_point, axis):
    dtype = _int_input(input)
    s, z, float_zp = _channel_params(scale, zero_point, axis, input.dim(), input.shape,
                                     "_make_per_channel_quantized_tensor")
    scheme = Q.per_channel_affine_float_qparams if float_zp else Q.per_channel_affine
    _warn_deprecated()
    return _new(input._data.copy(), _Quantizer(dtype, scheme, scales=s, zero_points=z, axis=axis))


def _empty_affine_quantized(size, *, scale=1.0, zero_point=0, dtype=None, device=None, layout=None,
                            pin_memory=False, memory_format=None):
    """An uninitialised per-tensor quantized tensor of ``size``."""
    from ._factory import size_args
    dtype = D.float32 if dtype is None else dtype
    if not isinstance(dtype, Q._QuantizedDtype):
        raise RuntimeError("Creation of quantized tensor requires quantized dtype like ember.quint8")
    return _new(np.empty(size_args((size,)), dtype.np),
                _Quantizer(dtype, Q.per_tensor_affine, builtins.float(scale), builtins.int(zero_point)))


def _empty_per_channel_affine_quantized(size, *, scales, zero_points, axis, dtype=None, device=None, layout=None,
                                        pin_memory=False, memory_format=None):
    """An uninitialised per-channel quantized tensor of ``size``."""
    from ._factory import size_args
    dtype = D.float32 if dtype is None else dtype
    if not isinstance(dtype, Q._QuantizedDtype):
        raise RuntimeError("Creation of quantized tensor requires quantized dtype like ember.quint8")
    shape = size_args((size,))
    s, z, float_zp = _channel_params(scales, zero_points, axis, len(shape), shape,
                                     "_empty_per_channel_affine_quantized")
    scheme = Q.per_channel_affine_float_qparams if float_zp else Q.per_channel_affine
    return _new(np.empty(shape, dtype.np), _Quantizer(dtype, scheme, scales=s, zero_points=z, axis=axis))


def dequantize(tensor):
    """The float32 values of a quantized tensor (a float tensor is returned as is), or a list of them."""
    if isinstance(tensor, (list, tuple)):
        return [dequantize(t) for t in tensor]
    return tensor.dequantize() if tensor.is_quantized else tensor


def int_repr(input):
    """The integers of a quantized tensor (``Tensor.int_repr``); PyTorch's NotImplementedError for others."""
    return input.int_repr()


def _float_dequantize(self):
    return self


def _refuse(name):
    def method(self, *args, **kwargs):
        raise _not_implemented(name, self)
    method.__name__ = name
    return method


Tensor.dequantize = _float_dequantize
for _name in ("int_repr", "q_scale", "q_zero_point", "qscheme", "q_per_channel_scales", "q_per_channel_zero_points",
              "q_per_channel_axis"):
    setattr(Tensor, _name, _refuse(_name))


# ---- ops on quantized tensors ---------------------------------------------------------------------------------
# per-channel tensors refuse ops that give them new strides, as PyTorch's do
_RESTRIDING = {"transpose", "permute", "t", "swapaxes", "swapdims", "movedim", "moveaxis", "expand", "expand_as",
               "broadcast_to", "adjoint", "as_strided"}
_RESHAPING = {"view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "ravel"}
_ON_INTS = {"view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze", "__getitem__",
            "narrow", "select", "unbind", "chunk", "split", "split_with_sizes", "tensor_split", "unsafe_chunk",
            "unsafe_split", "clone", "flip", "repeat", "index_select", "unfold", "ravel", "fliplr", "flipud",
            "narrow_copy", "hsplit", "vsplit", "dsplit", "atleast_1d", "atleast_2d", "atleast_3d",
            *_RESTRIDING}


def _rewrap(r, t, view, cid=None):
    """The quantized tensor of integer result ``r`` of an op on ``t``'s integers (``cid``: the op's result on
    ``t``'s channel ids, for per-channel tensors)."""
    q = t._data.q
    if q.per_channel:
        q = _follow_channels(q, cid._data)
    shares = view and np.shares_memory(r._data, t._data.arr)
    return _new(r._data, q, t if shares else None)


def _follow_channels(q, c):
    """The quantizer of a per-channel tensor's op result, from the op's result ``c`` on its channel ids (zero-strided
    along every dim but the axis): the dim that still steps through channels is the new axis, no such dim (the axis
    was selected away) leaves the selected channel's per-tensor parameters."""
    if c.size == 0:
        return q
    moving = [d for d in range(c.ndim) if c.shape[d] > 1 and c.strides[d] != 0]
    if len(moving) > 1:  # a copy: find the one dim along which the ids vary
        moving = [d for d in moving if np.array_equal(c, np.broadcast_to(
            c[tuple(slice(None) if e == d else slice(0, 1) for e in range(c.ndim))], c.shape))]
    if len(moving) == 1:
        d = moving[0]
        return q.channels(c[tuple(slice(None) if e == d else 0 for e in range(c.ndim))], d)
    if not moving:
        first = c.reshape(-1)[0]
        if c.ndim and q.axis < c.ndim and c.shape[q.axis] == 1:  # (one channel kept along the axis)
            return q.channels(first.reshape(1), q.axis)
        return q.channel(first)
    raise RuntimeError(f"length of scales must equal to channel, expected {c.size} got, {q.scales.size}")


def _channel_ids(t):
    q = t._data.q
    shape = [1] * t._data.ndim
    shape[q.axis] = -1
    return _wrap(np.broadcast_to(np.arange(q.scales.size).reshape(shape), t._data.shape))


def _run_on_ints(op, args, kwargs):
    t = args[0]
    r = op.fn(_ints(t), *args[1:], **kwargs)
    cid = None
    q = t._data.q
    if q.per_channel:
        if op.name in _RESTRIDING:
            raise RuntimeError("Setting strides is possible only on uniformly quantized tensor")
        if op.name in _RESHAPING:  # PyTorch keeps the quantizer: the axis must still have one size per scale
            if q.axis >= r.dim():
                raise RuntimeError(f"Channel axis out of range in per channel affine dequantization. Got:{q.axis} "
                                   f"Expected: [0, {r.dim()})")
            if r.shape[q.axis] != q.scales.size:
                raise RuntimeError(f"length of scales must equal to channel, expected {r.shape[q.axis]} got, "
                                   f"{q.scales.size}")
            return _new(r._data, q, t if np.shares_memory(r._data, t._data.arr) else None)
        cid = op.fn(_channel_ids(t), *args[1:], **kwargs)
        # unbinding the channels leaves each its float64 scale (selecting one rounds it to float32)
        if op.name == "unbind" and kwargs.get("dim", args[1] if len(args) > 1 else 0) % t.dim() == q.axis:
            return type(r)(_new(x._data, _Quantizer(q.dtype, Q.per_tensor_affine, builtins.float(q.scales[i]),
                                                    builtins.int(q.zero_points[i])), t) for i, x in enumerate(r))
    view = bool(op.view) if not callable(op.view) else True
    if isinstance(r, Tensor):
        return _rewrap(r, t, view, cid)
    return type(r)(_rewrap(x, t, view, c) for x, c in zip(r, cid if cid is not None else [None] * len(r)))


def _compare(op, args, kwargs):
    """Comparisons see the real values of quantized operands (PyTorch dequantizes them)."""
    return op.fn(*[a.dequantize() if isinstance(a, QuantizedTensor) else a for a in args], **kwargs)


def _equal(op, args, kwargs):
    a, b = args
    if not (isinstance(a, QuantizedTensor) and isinstance(b, QuantizedTensor)):
        return False
    return (a._data.q.same(b._data.q) and a._data.shape == b._data.shape
            and builtins.bool(np.array_equal(a._data.arr, b._data.arr)))


def _to_copy(op, args, kwargs):
    t = args[0]
    dtype, device = kwargs.get("dtype"), kwargs.get("device")
    if device is not None and as_device(device).type != "cpu":
        raise RuntimeError("ember has no quantized CUDA tensors (PyTorch's quantized kernels run on the CPU)")
    if dtype is not None and dtype is not t.dtype:
        if isinstance(dtype, Q._QuantizedDtype):
            raise RuntimeError("Expected self.scalar_type() == src.scalar_type() to be true, but got false.")
        raise RuntimeError("Creation of quantized tensor requires quantized dtype like ember.quint8")
    return _new(t._data.arr.copy(), t._data.q)


def _copy_(op, args, kwargs):
    target, src = args[0], args[1]
    if not isinstance(target, QuantizedTensor):
        raise RuntimeError("Copying from quantized Tensor to non-quantized Tensor is not allowed, please use "
                           "dequantize to get a float Tensor from a quantized Tensor")
    shape = target._data.shape
    if isinstance(src, QuantizedTensor):
        if src.dtype is not target.dtype:
            raise RuntimeError("Quantized Copy only works with same qtype")
        target._data.q = src._data.q  # (PyTorch's copy_ of a quantized source takes its parameters)
        arr = np.broadcast_to(src._data.arr, shape)
    else:
        arr = _quantized_like(target, src, shape)
    target._data.arr[...] = arr
    target._vc[0] += 1
    return target


def _quantized_like(t, value, shape):
    """``value`` (a number, a float or quantized tensor) as integers of ``t``'s (per-tensor) quantizer."""
    q = t._data.q
    if q.per_channel:
        raise RuntimeError("Quantized copy only works with kPerTensorAffine on Quantizer")
    if isinstance(value, QuantizedTensor):
        if value._data.q.same(q):
            return np.broadcast_to(value._data.arr, shape)
        value = value.dequantize()
    x = np.broadcast_to(value._data if isinstance(value, Tensor) else np.float32(value), shape).astype(_f32)
    if q.dtype is Q.qint32:
        return quantize_unfused(x, _f32(1) / _f32(q.scale), _f32(q.zero_point), q.dtype)
    return quantize_fused(x, q.scale, q.zero_point, q.dtype)


def _setitem(op, args, kwargs):
    t, index, value = args
    if not isinstance(t, QuantizedTensor):
        raise RuntimeError("Copying from quantized Tensor to non-quantized Tensor is not allowed, please use "
                           "dequantize to get a float Tensor from a quantized Tensor")
    part = _ints(t)[index]
    part._data[...] = _quantized_like(t, value, part._data.shape)
    t._vc[0] += 1


def empty_like_quantized(t):
    """An uninitialised quantized tensor of ``t``'s shape and quantizer (``ember.empty_like``)."""
    return _new(np.empty(t._data.shape, t._data.arr.dtype), t._data.q)


def _fill_(op, args, kwargs):
    t, value = args
    t._data.arr[...] = _quantized_like(t, value.item() if isinstance(value, Tensor) else value, ())
    t._vc[0] += 1
    return t


def _masked_fill(op, args, kwargs):
    t, mask, value = args
    r = _new(t._data.arr.copy(), t._data.q)
    r._data.arr[np.broadcast_to(mask._data, t._data.shape)] = _quantized_like(
        t, value.item() if isinstance(value, Tensor) else value, ())
    return r


def _cat(op, args, kwargs):
    from .ops import quantized
    tensors = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if not all(isinstance(x, QuantizedTensor) for x in tensors):
        raise _not_implemented("qscheme", next(x for x in tensors if not isinstance(x, QuantizedTensor)))
    first = tensors[0]._data.q
    if first.per_channel:
        raise RuntimeError("Only per-tensor quantization is supported in Cat.")
    if op.name == "stack":
        tensors, dim = [x.unsqueeze(dim) for x in tensors], dim if dim >= 0 else dim + tensors[0].dim() + 1
    return quantized.cat(tensors, dim, first.scale, first.zero_point)


def _gather_rows(op, args, kwargs):
    """index_select, and embedding (rows of a quantized weight, as PyTorch selects them): per tensor only."""
    if args[0]._data.q.per_channel:
        raise RuntimeError("Only per_tensor quantized quantized tensors are supported by index_select.")
    return _run_on_ints(op, args, kwargs)


def _kernel(name):
    def run(op, args, kwargs):
        from .ops import quantized
        return getattr(quantized, "_" + name)(*args, **kwargs)
    return run


_HANDLERS = {
    "eq": _compare, "ne": _compare, "lt": _compare, "le": _compare, "gt": _compare, "ge": _compare,
    "equal": _equal, "_to_copy": _to_copy, "copy_": _copy_, "fill_": _fill_, "masked_fill": _masked_fill,
    "cat": _cat, "concat": _cat, "concatenate": _cat, "stack": _cat, "__setitem__": _setitem,
    "index_select": _gather_rows, "embedding": _gather_rows,
    **{name: _kernel(name) for name in ("relu", "hardtanh", "clamp", "clip", "clamp_min", "clamp_max", "sigmoid",
                                        "tanh", "hardsigmoid", "leaky_relu", "gelu", "mean", "max", "min", "topk",
                                        "sort", "max_pool1d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
                                        "_upsample")},
}
# in-place calls PyTorch runs on quantized tensors (the kernel writes the result into the target)
_WRITES_TARGET = {"copy_", "fill_", "__setitem__"}  # (their handlers write the target themselves)
_INPLACE = {*_WRITES_TARGET, "relu", "hardtanh", "clamp", "clip", "clamp_min", "clamp_max", "leaky_relu", "sigmoid",
            "tanh", "hardsigmoid", "masked_fill"}


def _arg(args, kwargs, i, name):
    return args[i] if len(args) > i else kwargs.get(name)


def _dtype_name(t):
    return t.dtype.torch_name if t.is_quantized else TORCH_NAME.get(t.dtype, str(t.dtype))


def _check_float_bias(name, args, kwargs):
    """PyTorch's dtype errors of a linear layer or convolution with a bias that meets a quantized operand (a
    quantized tensor fed to a float layer): checked before it finds no kernel."""
    if name in ("linear", "addmm"):  # (linear: addmm(bias, input, weight.t()))
        names = ("bias", "input", "weight") if name == "linear" else ("input", "mat1", "mat2")
        order = (2, 0, 1) if name == "linear" else (0, 1, 2)
        bias, mat1, mat2 = (_arg(args, kwargs, i, n) for i, n in zip(order, names))
        if not isinstance(bias, Tensor):
            return
        for label, a in (("self", bias), ("mat1", mat1)):
            if isinstance(a, Tensor) and isinstance(mat2, Tensor) and (a.dtype is not mat2.dtype):
                raise RuntimeError(f"{label} and mat2 must have the same dtype, but got {_dtype_name(a)} and "
                                   f"{_dtype_name(mat2)}")
    elif name in ("conv1d", "conv2d", "conv3d"):
        x, bias = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 2, "bias")
        if isinstance(x, QuantizedTensor) and isinstance(bias, Tensor) and not bias.is_quantized:
            raise RuntimeError(f"Input type (c10::{x.dtype.name}) and bias type "
                               f"({_C10_FLOAT.get(bias.dtype.name, bias.dtype.name)}) should be the same")


_C10_FLOAT = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16"}


def dispatch(op, args, kwargs, out, mode):
    """Run a registry op that met a quantized operand."""
    handler = _HANDLERS.get(op.name) or (_run_on_ints if op.name in _ON_INTS else None)
    quantized = next((a for a in list(args) + list(kwargs.values())
                      if isinstance(a, QuantizedTensor) or (type(a) in (list, tuple) and a
                                                            and isinstance(a[0], QuantizedTensor))), None)
    if handler is None or out is not None or (mode == "inplace" and op.name not in _INPLACE):
        _check_float_bias(op.name, args, kwargs)
        # a float operand (a tensor, or a Python float: a Float number) meets the quantized dtype in PyTorch's
        # type promotion; an integer number reaches the quantized result's allocation
        if op.kind == "elementwise" and any(type(a) is builtins.float or (isinstance(a, Tensor) and not a.is_quantized)
                                            for a in args):
            names = [_dtype_name(x) for x in args if isinstance(x, Tensor)]
            names += ["Float"] * any(type(a) is builtins.float for a in args)  # (a number comes last, as the other)
            raise RuntimeError("promoteTypes with quantized numbers is not handled yet; figure out what the correct "
                               f"rules should be, offending types: {' '.join(names)}")
        if op.kind == "elementwise" and not all(isinstance(a, Tensor) for a in args):
            raise RuntimeError("empty_strided not supported on quantized tensors yet: ember has no quantized "
                               f"kernel for {op.name} with a Python number (dequantize first)")
        name = op.name + ("_" if mode == "inplace" else ".out" if out is not None else "")
        raise _not_implemented(name, quantized if isinstance(quantized, Tensor) else quantized[0])
    if mode == "inplace" and op.name not in _WRITES_TARGET:
        target = args[0]
        r = handler(op, args, kwargs)
        target._data.arr[...] = r._data.arr
        target._data.q = r._data.q
        target._vc[0] += 1
        return target
    return handler(op, args, kwargs)


STAND_INS[_QArray] = dispatch


# ---- printing -------------------------------------------------------------------------------------------------
def quantized_repr(t, tensor_contents=None):
    """``repr`` of a quantized tensor as PyTorch lays it out: the real values, then size, dtype, scheme and
    parameters."""
    from ._printing import _host_values, _opts, _Printer, _with_suffixes
    prefix = "tensor("
    q = t._data.q
    suffixes = [f"size={tuple(t._data.shape)}", f"dtype={q.dtype}", f"quantization_scheme={q.qscheme}"]
    if q.per_channel:
        suffixes += [f"scale={_wrap(q.scales)!r}", f"zero_point={_wrap(q.zero_points)!r}", f"axis={q.axis}"]
    else:
        suffixes += [f"scale={q.scale!r}", f"zero_point={q.zero_point}"]
    text = tensor_contents
    if text is None:
        values = t.dequantize()
        if values._data.size == 0:
            text = "[]"
        else:
            arr = _host_values(values)
            text = _Printer(arr, arr.size > _opts["threshold"]).block(arr, len(prefix))
    return _with_suffixes(prefix + text, suffixes, len(prefix))
