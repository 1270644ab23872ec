"""Exact integer products of quantized linear layers and convolutions, on float BLAS.

The integers (``q - zero_point``, at most 255 in magnitude) are held as floats. A float32 product is exact while
every partial sum stays below 2**24 in magnitude (each partial sum is an integer of at most
``max|x| * sum|w|``); float64 is exact up to 2**53. Weights carry their rows' absolute sums, so the check costs
nothing unless the bound from the input's integer range fails; then the input's actual range decides. Where
ember-core's compiled integer product serves (``ember._qgemm``: AVX-512 VNNI), quint8 inputs take it instead, with the
same (exact) sums.
"""
import math

import numpy as np

from ember import _qgemm

_F32_EXACT = 2.0 ** 24


class IntWeight:
    """A weight's integers ``w - zero_point`` ready for products: ``rows`` (dim 0, the rest) as float32, the
    largest absolute sum an output sums over (a row's; of a transposed convolution's weight (in, out / groups,
    *kernel), an output channel's over inputs and kernel offsets), and the float64 copy made on first need; ``int8``,
    the integers as ``ember._qgemm`` takes them (a linear weight's, or with ``groups`` a convolution's)."""

    __slots__ = ("rows", "row_abs_max", "_rows64", "int8")

    def __init__(self, w_int, zero_points, transposed=False, groups=None):
        """``zero_points``: a number, or one per index of dim 0, or an array that broadcasts against ``w_int``."""
        self.int8 = None
        if not transposed and w_int.dtype == np.int8:
            self.int8 = (_qgemm.Int8Weight(w_int, zero_points) if groups is None else
                         _qgemm.ConvWeight(w_int, zero_points, groups))
        zp = np.asarray(zero_points, np.float64)
        if zp.ndim == 1:
            zp = zp.reshape((-1,) + (1,) * (w_int.ndim - 1))
        w = w_int.astype(np.float64) - zp
        sums = np.abs(w).sum(axis=(0,) + tuple(range(2, w.ndim))) if transposed else np.abs(w).reshape(
            w.shape[0], -1).sum(1)
        self.row_abs_max = float(sums.max(initial=0.0))
        self.rows = w.reshape(w.shape[0], -1).astype(np.float32)
        self._rows64 = None

    def dtype_for(self, x_centered, x_bound):
        """float32 if products of inputs with integers of magnitude ``x_bound`` (and, if that fails, of
        ``x_centered``'s actual magnitude) stay exact in float32, else float64."""
        if x_bound * self.row_abs_max < _F32_EXACT:
            return np.float32
        actual = float(np.abs(x_centered).max(initial=0.0))
        return np.float32 if actual * self.row_abs_max < _F32_EXACT else np.float64

    def rows_as(self, dtype):
        if dtype == np.float32:
            return self.rows
        if self._rows64 is None:
            self._rows64 = self.rows.astype(np.float64)
        return self._rows64


def centered(x_int, zero_point, dtype=np.float32):
    """``x_int - zero_point`` as floats."""
    r = x_int.astype(dtype)
    if zero_point:
        r -= dtype(zero_point)
    return r


def bound(zero_point, qmin, qmax):
    """The largest ``|x - zero_point|`` of integers in [qmin, qmax]."""
    return max(zero_point - qmin, qmax - zero_point)


def linear(x_int, zero_point, x_bound, weight):
    """``(x - zero_point) @ w.T`` exactly: (..., in) integers by the (out, in) weight, as floats (or int32)."""
    if x_int.dtype == np.uint8 and isinstance(weight.int8, _qgemm.Int8Weight):
        acc = _qgemm.product(x_int.reshape(-1, x_int.shape[-1]), zero_point, weight.int8)
        if acc is not None:
            return acc.reshape(x_int.shape[:-1] + (acc.shape[1],))
    x = centered(x_int, zero_point)
    dtype = weight.dtype_for(x, x_bound)
    x = x.astype(dtype, copy=False).reshape(-1, x_int.shape[-1])
    return (x @ weight.rows_as(dtype).T).reshape(x_int.shape[:-1] + (weight.rows.shape[0],))


def _windows(x, kernel, stride, dilation):
    """The (N, C, *kernel, *out) windows of padded ``x`` (N, C, *L), a strided view."""
    n = len(kernel)
    out = [(s - d * (k - 1) - 1) // st + 1 for s, k, st, d in zip(x.shape[2:], kernel, stride, dilation)]
    sp = x.strides[2:]
    return np.lib.stride_tricks.as_strided(
        x, x.shape[:2] + tuple(kernel) + tuple(out),
        x.strides[:2] + tuple(d * t for d, t in zip(dilation, sp)) + tuple(s * t for s, t in zip(stride, sp[:n])),
        writeable=False), out


def pad(x, padding, mode="zeros"):
    """``x`` (N, C, *L) padded by ``padding`` per spatial dim on both sides (zeros, or reflect/replicate/circular
    copies of its values)."""
    if not any(padding):
        return x
    widths = ((0, 0), (0, 0)) + tuple((p, p) for p in padding)
    numpy_mode = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    return np.pad(x, widths, mode=numpy_mode)


def conv(x_int, zero_point, x_bound, weight, kernel, stride, padding, dilation, groups, padding_mode="zeros"):
    """The exact (N, O, *out) convolution sums of integers ``x_int`` (N, C, *L) minus ``zero_point`` by the
    weight (O, C / groups, *kernel) (zero padding pads with the zero point: a real zero)."""
    if x_int.dtype == np.uint8 and isinstance(weight.int8, _qgemm.ConvWeight):
        if padding_mode != "zeros":
            x_int, padding = pad(x_int, padding, padding_mode), (0,) * len(padding)
        acc = _qgemm.conv(x_int, zero_point, weight.int8, kernel, stride, padding, dilation)
        if acc is not None:
            return acc
    x = centered(x_int, zero_point)
    dtype = weight.dtype_for(x, x_bound)
    x = pad(x.astype(dtype, copy=False), padding, padding_mode)
    windows, out = _windows(x, kernel, stride, dilation)
    N, C = x.shape[:2]
    O = weight.rows.shape[0]
    cols = np.ascontiguousarray(windows).reshape(N, groups, C // groups * math.prod(kernel), math.prod(out))
    w = weight.rows_as(dtype).reshape(groups, O // groups, -1)
    if groups == 1:
        r = np.matmul(w[0], cols[:, 0])
    else:
        r = np.matmul(w, cols)
    return r.reshape((N, O) + tuple(out))


def conv_transpose(x_int, zero_point, x_bound, weight, kernel, stride, padding, output_padding, dilation, groups):
    """The exact (N, O, *out) transposed-convolution sums of ``x_int`` (N, C, *L) minus ``zero_point`` by a weight
    whose ``rows`` hold (C, O / groups * prod(kernel)): the product, then each kernel offset's columns added into
    the output positions it reaches."""
    x = centered(x_int, zero_point)
    dtype = weight.dtype_for(x, x_bound)
    x = x.astype(dtype, copy=False)
    N, C, L = x.shape[0], x.shape[1], x.shape[2:]
    n = len(kernel)
    w = weight.rows_as(dtype).reshape(groups, C // groups, -1)
    Og = w.shape[-1] // math.prod(kernel)
    cols = np.matmul(w.transpose(0, 2, 1), x.reshape(N, groups, C // groups, -1))  # (N, G, Og * K, prod(L))
    cols = cols.reshape((N, groups * Og) + tuple(kernel) + tuple(L))
    full = [(s - 1) * st + d * (k - 1) + 1 + op for s, st, d, k, op in zip(L, stride, dilation, kernel,
                                                                              output_padding)]
    r = np.zeros((N, groups * Og) + tuple(full), dtype)
    for k in np.ndindex(*kernel):
        target = tuple(slice(i * d, i * d + (s - 1) * st + 1, st) for i, d, s, st in zip(k, dilation, L, stride))
        r[(slice(None), slice(None)) + target] += cols[(slice(None), slice(None)) + k]
    crop = tuple(slice(p, f - p) for p, f in zip(padding, full))
    return r[(slice(None), slice(None)) + crop[:n]]
