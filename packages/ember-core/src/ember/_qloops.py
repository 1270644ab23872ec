"""numba loops of quantized tensors (loaded through ``ember._jit`` only, never by ``import ember``).

``quantize_fused`` is PyTorch's 8-bit ``quantize_per_tensor`` in one pass: ``rint(fma(x, inv, zero_point))``
clamped to ``[lo, hi]``, with LLVM's fused multiply-add (the instruction where the CPU has one); ``dequantize`` its
inverse, ``(float32(q) - zero_point) * scale`` (the operations and order of the NumPy path: the same bits).
"""
import numba
import numpy as np
from numba import types

from ._numba_kernels import _fma, _from_bits64, _load, _pointer_to
from ._numba_kernels import parts as _spinning


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


_POINTER = {"float32": _pointer_to(types.float32), "uint8": _pointer_to(types.uint8), "int8": _pointer_to(types.int8)}


def _scalar(block, k):
    return np.float32(_from_bits64(_load(block + 8 * k)))


class _Parts:
    """C-callable parts ``part(block, lo, hi)`` of the (de)quantizing loops, which ``ember._parallel.spun`` runs on
    its spinning helpers (with ember._numba_kernels' run and serve): ``block`` holds the input's and output's
    addresses, then the loop's float32 scalars as float64 bits. ``compile(key)`` ("quantize_fused uint8",
    "dequantize int8", ...) makes one; its address is in ``address``."""

    def __init__(self):
        self.address, self._made = {}, []

    def compile(self, key):
        name, integer = key.split()
        loop = globals()[name]
        ints = _POINTER[integer]
        floats, width = _POINTER["float32"], np.dtype(integer).itemsize
        scalar = numba.njit(inline="always")(_scalar)
        if name == "quantize_fused":
            def part(block, lo, hi):
                loop(numba.carray(floats(_load(block) + lo * 4), hi - lo), scalar(block, 2), scalar(block, 3),
                     scalar(block, 4), scalar(block, 5), numba.carray(ints(_load(block + 8) + lo * width), hi - lo))
        else:
            def part(block, lo, hi):
                loop(numba.carray(ints(_load(block) + lo * width), hi - lo), scalar(block, 2), scalar(block, 3),
                     numba.carray(floats(_load(block + 8) + lo * 4), hi - lo))
        made = numba.cfunc(types.void(types.intp, types.intp, types.intp), nogil=True, error_model="numpy")(part)
        _spinning.run.compile("(int64[::1], int64, int64[::1], int64, int64)")
        _spinning.serve.compile("(int64[::1], int64)")
        self._made.append(made)
        self.address[key] = made.address


parts = _Parts()
