"""numba loops of quantized tensors (loaded through ``ember._jit`` only, never by ``import ember``).

``quantize_fused`` is PyTorch's 8-bit ``quantize_per_tensor`` in one pass: ``rint(fma(x, inv, zero_point))``
clamped to ``[lo, hi]``, with LLVM's fused multiply-add (the instruction where the CPU has one); ``dequantize`` its
inverse, ``(float32(q) - zero_point) * scale`` (the operations and order of the NumPy path: the same bits).
"""
import numba
import numpy as np

from ._numba_kernels import _fma


@numba.njit(cache=True, nogil=True, error_model="numpy")
def quantize_fused(x, inv, zero_point, lo, hi, out):
    for i in range(x.size):
        out[i] = np.int32(min(max(np.rint(_fma(x[i], inv, zero_point)), lo), hi))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def dequantize(q, zero_point, scale, out):
    for i in range(q.size):
        out[i] = (np.float32(q[i]) - zero_point) * scale


@numba.njit(cache=True, nogil=True, error_model="numpy")
def add(a, b, sa, pa, sb, pb, inv, zero_point, lo, hi, relu, out):
    """PyTorch's vectorised quantized add: both dequantized as ``fma(q, s, -zp * s)``, added in float32 (then
    ``max(., 0)`` with ``relu``), requantized as ``rint(y * inv) + zero_point`` clamped to ``[lo, hi]``."""
    for i in range(a.size):
        y = _fma(np.float32(a[i]), sa, pa) + _fma(np.float32(b[i]), sb, pb)
        if relu:
            y = max(y, np.float32(0))
        out[i] = np.int32(min(max(np.rint(y * inv) + zero_point, lo), hi))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def requantize(acc, add, multiplier, zero_point, lo, hi, out):
    """Integer sums ``acc`` (R, C) of a linear layer or convolution (channels last) to 8-bit integers, as the x86
    engines requantize: ``rint((float32(acc) + add[c]) * multiplier[c]) + zero_point`` clamped to ``[lo, hi]``."""
    for r in range(acc.shape[0]):
        for c in range(acc.shape[1]):
            y = np.rint((np.float32(acc[r, c]) + add[c]) * multiplier[c]) + zero_point
            out[r, c] = np.int32(min(max(y, lo), hi))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def sums_to_float(acc, scale, bias, out):
    """float32 outputs of dynamic quantization's integer sums ``acc`` (R, C): ``float32(acc) * scale[c] + bias[c]``
    in float64 (the product exact there), rounded once to float32."""
    for r in range(acc.shape[0]):
        for c in range(acc.shape[1]):
            out[r, c] = np.float32(np.float64(np.float32(acc[r, c])) * scale[c] + bias[c])
