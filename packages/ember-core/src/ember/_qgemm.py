"""Exact integer products of quantized linear layers and convolutions: quint8 inputs times qint8 weights.

Where the CPU has AVX-512 VNNI, the compiled loop of ``ember._qgemm_loops`` (built in the background by
``ember._jit``; never at import) multiplies the raw integers into int32, as fbgemm does, and the zero points are
accounted for around it: ``sum_k (a - za)(b - zb) = sum_k a b - za sum_k b - zb (sum_k a - K za)``. The weight's
column sums come with its packed form, the terms without ``sum_k a`` are the accumulators' starting values, and the
input's row sums are taken only when a weight zero point is not zero (symmetric weights have none).

Elsewhere, until that loop is ready, and for what it does not take (other input types, transposed convolutions),
the products run on float BLAS, also exact: the integers (``q - zero_point``, at most 255 in magnitude) are held as
floats; a float32 product is exact while every partial sum stays below 2**24 in magnitude (each is at most
``max|x| * sum|w|``), float64 up to 2**53. Weights carry their rows' absolute sums, so the check costs nothing
unless the bound from the input's integer range fails; then the input's actual range decides. Either way the sums
are the same integers, so results never depend on which path ran.
"""
import math

import numpy as np

from . import _jit, _parallel

# Inputs per output up to which every partial sum (the starting value and the products, each at most K * 255 * 128
# in magnitude, and the row-sum term) stays within int32; longer products take the float path.
K_MAX = 1 << 14
# Multiply-adds from which a product takes the loop (below, float BLAS costs no more than the loop's setup).
MIN_WORK = 1 << 16
_F32_EXACT = 2.0 ** 24
# Multiply-adds from which a product splits over two threads (the loop does about 0.5 per ns on one core of a 2-core
# AMD EPYC VM; waking a helper costs 20-40 us).
SPLIT_WORK = 1 << 24
_SIG = "(uint8[:, ::1], int8[:, :, :, ::1], int32[::1], int32[:, ::1], intp, intp, intp, intp)"
class Int8Weight:
    """A qint8 weight's integers ``ints`` (N, K) and zero points (N,) (int64), packed for the loop on first need."""

    __slots__ = ("ints", "zero_points", "symmetric", "_packed")

    def __init__(self, ints, zero_points):
        self.ints = np.ascontiguousarray(ints, np.int8).reshape(ints.shape[0], -1)
        self.zero_points = np.broadcast_to(np.asarray(zero_points, np.int64), (self.ints.shape[0],))
        self.symmetric = not self.zero_points.any()
        self._packed = None

    def packed(self):
        """(the weight as ``(panels, groups, width, 4)`` int8, zero-padded, ``width`` columns a panel (the loop's
        NR * 16, or NARROW * 16 for narrow weights); its column sums ``sum_k b``, int64)."""
        if self._packed is None:
            from ._qgemm_loops import NARROW, NR  # (only once the loop is ready: numba is imported by then)
            n, k = self.ints.shape
            width = (NARROW if n <= NARROW * 16 else NR) * 16
            panels, groups = -(-n // width), -(-k // 4)
            full = np.zeros((panels * width, groups * 4), np.int8)
            full[:n, :k] = self.ints
            b = np.ascontiguousarray(full.reshape(panels, width, groups, 4).transpose(0, 2, 1, 3))
            self._packed = b, self.ints.sum(axis=1, dtype=np.int64)
        return self._packed


class Int8ConvWeight:
    """A convolution's qint8 weight (O, C / groups, *kernel) as one ``Int8Weight`` per group, its columns in the order
    of ``conv``'s windows (kernel offsets, then channels); ``in_place``: for a 2-d convolution of one group and
    symmetric weights, the weight whose windows ``conv`` reads in place (channels padded to a multiple of 4)."""

    __slots__ = ("groups", "in_place")

    def __init__(self, ints, zero_points, groups):
        o = ints.shape[0]
        per = o // groups
        w = np.moveaxis(ints, 1, -1)
        zp = np.broadcast_to(np.asarray(zero_points, np.int64), (o,))
        flat = w.reshape(o, -1)
        self.groups = [Int8Weight(flat[g * per:(g + 1) * per], zp[g * per:(g + 1) * per]) for g in range(groups)]
        self.in_place = None
        if groups == 1 and ints.ndim == 4 and not zp.any():
            c = w.shape[-1]
            padded = np.zeros(w.shape[:-1] + (-(-c // 4) * 4,), np.int8)
            padded[..., :c] = w
            self.in_place = Int8Weight(padded.reshape(o, -1), zp)


def _ready(work):
    """The compiled loop, if it may serve a product of ``work`` multiply-adds (queued for compilation if not ready)."""
    return _jit.loop("ember._qgemm_loops", "gemm", _SIG, work, minimum=MIN_WORK, exact=True)


def conv(x, zero_point, weight, kernel, stride, padding, dilation):
    """The exact int32 sums (N, O, *out) (a view of channels-last memory) of the convolution of uint8 ``x`` (N, C,
    *L) minus ``zero_point`` (padded with it: real zeros) by ``weight`` (an ``Int8ConvWeight``), or None as for
    ``product``: each window of the channels-last padded input is one row of the product. Large convolutions split
    over two threads by images (the windows' copy with the product)."""
    n, c = x.shape[:2]
    groups = weight.groups
    per, og = c // len(groups), groups[0].ints.shape[0]
    out = [(s + 2 * p - d * (k - 1) - 1) // st + 1 for s, p, d, k, st in zip(x.shape[2:], padding, dilation, kernel,
                                                                              stride)]
    rows, k = int(np.prod(out)), groups[0].ints.shape[1]
    work = n * rows * og * len(groups) * k
    fn = None if k > K_MAX or not n * rows else _ready(work)
    if fn is None:
        return None
    result = np.empty((n, *out, og * len(groups)), np.int32)
    if weight.in_place is not None:
        in_place = _jit.loop("ember._qgemm_loops", "conv_gemm", _CONV_SIG, work, minimum=MIN_WORK, exact=True)
        if in_place is not None:
            _conv_in_place(in_place, x, zero_point, weight.in_place, kernel, stride, padding, dilation, result, work)
            return np.moveaxis(result, -1, 1)

    def images(lo, hi):
        xl = np.full((hi - lo,) + tuple(s + 2 * p for s, p in zip(x.shape[2:], padding)) + (c,), zero_point,
                     np.uint8)
        xl[(slice(None),) + tuple(slice(p, p + s) for s, p in zip(x.shape[2:], padding))] = np.moveaxis(x[lo:hi], 1,
                                                                                                        -1)
        st = xl.strides
        windows = np.lib.stride_tricks.as_strided(
            xl, (hi - lo, *out, *kernel, c), (st[0], *[s * t for s, t in zip(stride, st[1:-1])],
                                              *[d * t for d, t in zip(dilation, st[1:-1])], st[-1]), writeable=False)
        sums = result[lo:hi].reshape(-1, og * len(groups))
        for g, w in enumerate(groups):
            cols = np.ascontiguousarray(windows[..., g * per:(g + 1) * per]).reshape(sums.shape[0], -1)
            _multiply(fn, cols, zero_point, w, sums[:, g * og:(g + 1) * og], False)

    if work >= SPLIT_WORK and n > 1:
        _parallel.halves(images, n)
    else:
        images(0, n)
    return np.moveaxis(result, -1, 1)


_CONV_SIG = ("(uint8[:, :, :, ::1], int8[:, :, :, ::1], int32[::1], int64[::1], float32[::1], int32[:, ::1], intp, "
             "intp, intp, intp, intp, intp)")
_NO_PARAMS = np.zeros(0, np.float32)  # (conv_gemm's params when the sums are not requantized)


def _conv_in_place(fn, x, zero_point, weight, kernel, stride, padding, dilation, result, work, params=None):
    """``conv``'s sums into ``result`` (N, out_h, out_w, O) by ``ember._qgemm_loops.conv_gemm``, which reads each
    window from the channels-last padded input itself (no copy of the windows); with ``params``, requantized in the
    tiles (``result`` uint8)."""
    n, c, h, w = x.shape
    b, col_sums = weight.packed()
    panels, groups, width = b.shape[:3]
    c4 = -(-c // 4) * 4
    hp, wp = h + 2 * padding[0], w + 2 * padding[1]
    xl = np.empty((n, hp, wp, c4), np.uint8)
    kh, kw = kernel
    offsets = ((np.arange(kh)[:, None, None] * dilation[0] * wp + np.arange(kw)[None, :, None] * dilation[1]) * c4
               + 4 * np.arange(c4 // 4)[None, None, :]).reshape(-1).astype(np.int64)
    o = weight.ints.shape[0]
    init = np.zeros(panels * width, np.int32)
    init[:o] = -zero_point * col_sums  # (symmetric weights: no zero-point terms of their own)
    out_h, out_w = result.shape[1:3]
    rows = n * out_h * out_w
    target = result.reshape(rows, o)
    c_ = target if panels * width == o else np.empty((rows, panels * width), result.dtype)
    args = (xl, b, init, offsets, _NO_PARAMS if params is None else params, c_, out_h, out_w, stride[0] * wp * c4,
            stride[1] * c4)

    def images(lo, hi):  # (padding and padding channels hold the zero point: they meet zero weights)
        xl[lo:hi] = zero_point
        xl[lo:hi, padding[0]:padding[0] + h, padding[1]:padding[1] + w, :c] = np.moveaxis(x[lo:hi], 1, -1)
        fn(*args, lo, hi)

    if work < SPLIT_WORK or n < 2:
        images(0, n)
    elif not (x.flags.c_contiguous and _conv_spun(x, xl, b, init, offsets, params, c_, out_h, out_w, args[-2:],
                                                  zero_point, padding)):
        _parallel.halves(images, n)
    if c_ is not target:
        target[...] = c_[:, :o]


def _conv_spun(x, xl, b, init, offsets, params, c, out_h, out_w, steps, zero_point, padding):
    """Whether ``_conv_in_place``'s images ran (padded, then multiplied) as C-callable parts over ``ember._parallel``'s
    spinning helpers (once compiled)."""
    if not (_parallel.SPINS and _parallel.WORKERS > 1):
        return False
    key = "conv" if params is None else "conv_requantized"
    parts = _jit.loop("ember._qgemm_loops", "parts", key, 1, 0, exact=True)
    if parts is None:
        return False
    from . import _numba_kernels  # (loaded by then: the parts use its run and serve)
    params = _NO_PARAMS if params is None else params
    block = np.array([x.ctypes.data, *x.shape, xl.ctypes.data, *xl.shape[1:], b.ctypes.data, *b.shape[:3],
                      init.ctypes.data, offsets.ctypes.data, offsets.size, params.ctypes.data, params.size,
                      c.ctypes.data, *c.shape, out_h, out_w, *steps, zero_point, *padding], np.int64)
    n = x.shape[0]
    return _parallel.spun(_numba_kernels.parts, _numba_kernels.parts.run, parts.address[key], block, n,
                          max(1, n // 8))


_CONV_REQUANTIZED_SIG = _CONV_SIG.replace("int32[:, ::1]", "uint8[:, ::1]")


def conv_requantized(x, zero_point, weight, kernel, stride, padding, dilation, add, multiplier, out_zero_point, lo,
                     hi):
    """``conv``'s sums requantized to uint8 as ``ember._qloops.requantize`` does (``add``, ``multiplier`` float32
    per output channel), in the product's tiles: (N, O, *out), a view of channels-last memory; None where the sums
    are not read in place (see ``Int8ConvWeight``) or the loop is not ready."""
    w = weight.in_place
    if w is None or w.ints.shape[1] > K_MAX:
        return None
    n = x.shape[0]
    out = [(s + 2 * p - d * (k - 1) - 1) // st + 1 for s, p, d, k, st in zip(x.shape[2:], padding, dilation, kernel,
                                                                              stride)]
    o = w.ints.shape[0]
    work = n * int(np.prod(out)) * o * w.ints.shape[1]
    if not work:
        return None
    fn = _jit.loop("ember._qgemm_loops", "conv_gemm", _CONV_REQUANTIZED_SIG, work, minimum=MIN_WORK, exact=True)
    if fn is None:
        return None
    columns = w.packed()[0].shape[0] * w.packed()[0].shape[2]
    params = np.zeros(2 * columns + 3, np.float32)
    params[:o], params[columns:columns + o] = add, multiplier
    params[2 * columns:] = out_zero_point, lo, hi
    result = np.empty((n, *out, o), np.uint8)
    _conv_in_place(fn, x, zero_point, w, kernel, stride, padding, dilation, result, work, params)
    return np.moveaxis(result, -1, 1)


def _spun(a, b, init, c, m, panels):
    """Whether ``gemm`` ran over ``ember._parallel``'s spinning helpers (its C-callable parts, once compiled: tiles
    of rows, or panels for a product of few rows), in parts of about an eighth of the work."""
    if not (_parallel.SPINS and _parallel.WORKERS > 1):
        return False
    from ._qgemm_loops import MR
    by_rows = m > 2 * MR
    key = "rows" if by_rows else "panels"
    parts = _jit.loop("ember._qgemm_loops", "parts", key, 1, 0, exact=True)
    if parts is None:
        return False
    from . import _numba_kernels  # (loaded by then: the parts use its run and serve)
    size = -(-m // MR) if by_rows else panels
    block = np.array([a.ctypes.data, m, a.shape[1], b.ctypes.data, *b.shape[:3], init.ctypes.data, c.ctypes.data,
                      c.shape[1]], np.int64)
    return _parallel.spun(_numba_kernels.parts, _numba_kernels.parts.run, parts.address[key], block, size,
                          max(1, size // 8))


def product(x, zero_point, weight):
    """The exact int32 sums ``(x - zero_point) @ (w - w_zero_points).T`` of uint8 ``x`` (M, K) by ``weight`` (an
    ``Int8Weight``), or None when the compiled loop cannot serve (no VNNI, K too long, too little work, not yet
    compiled: queued then)."""
    m, k = x.shape
    n = weight.ints.shape[0]
    fn = None if k > K_MAX or not m or not n else _ready(m * n * k)
    return None if fn is None else _multiply(fn, x, zero_point, weight, None, True)


def _multiply(fn, x, zero_point, weight, out, split):
    """``product`` by the ready loop ``fn``, into ``out`` (M, N) if given; over two threads if ``split`` and
    large."""
    from ._qgemm_loops import MR
    m, k = x.shape
    n = weight.ints.shape[0]
    b, col_sums = weight.packed()
    panels, groups, width = b.shape[:3]
    if groups * 4 != k:  # (zero bytes past K meet the weight's zero padding)
        a = np.zeros((m, groups * 4), np.uint8)
        a[:, :k] = x
    else:
        a = np.ascontiguousarray(x, np.uint8)
    zb = weight.zero_points
    init = np.zeros(panels * width, np.int32)
    init[:n] = zero_point * (k * zb - col_sums)
    direct = out is not None and out.flags.c_contiguous and panels * width == n
    c = out if direct else np.empty((m, panels * width), np.int32)
    if not split or m * n * k < SPLIT_WORK:
        fn(a, b, init, c, 0, m, 0, panels)
    elif not _spun(a, b, init, c, m, panels):
        if m > MR:  # rows over the threads, in whole tiles
            _parallel.halves(lambda lo, hi: fn(a, b, init, c, lo * MR, min(hi * MR, m), 0, panels), -(-m // MR))
        else:
            _parallel.halves(lambda lo, hi: fn(a, b, init, c, 0, m, lo, hi), panels)
    r = c[:, :n] if panels * width != n else c
    if not weight.symmetric:
        r -= a.sum(axis=1, dtype=np.int32)[:, None] * zb.astype(np.int32)
    if out is not None and not direct:
        out[...] = r
        return out
    return r


class IntWeight:
    """A weight's integers ``w - zero_point`` ready for products: ``rows`` (dim 0, the rest) as float32, the
    largest absolute sum an output sums over (a row's; of a transposed convolution's weight (in, out / groups,
    *kernel), an output channel's over inputs and kernel offsets), and the float64 copy made on first need; ``int8``,
    the integers as the compiled product takes them (a linear weight's, or with ``groups`` a convolution's)."""

    __slots__ = ("rows", "row_abs_max", "_rows64", "int8")

    def __init__(self, w_int, zero_points, transposed=False, groups=None):
        """``zero_points``: a number, or one per index of dim 0, or an array that broadcasts against ``w_int``."""
        self.int8 = None
        if not transposed and w_int.dtype == np.int8:
            self.int8 = (Int8Weight(w_int, zero_points) if groups is None else
                         Int8ConvWeight(w_int, zero_points, groups))
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


def linear_sums(x_int, zero_point, x_bound, weight):
    """``(x - zero_point) @ w.T`` exactly: (..., in) integers by the (out, in) ``IntWeight``, as int32 or floats."""
    if x_int.dtype == np.uint8 and isinstance(weight.int8, Int8Weight):
        acc = product(x_int.reshape(-1, x_int.shape[-1]), zero_point, weight.int8)
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


def conv_sums(x_int, zero_point, x_bound, weight, kernel, stride, padding, dilation, groups, padding_mode="zeros"):
    """The exact (N, O, *out) convolution sums of integers ``x_int`` (N, C, *L) minus ``zero_point`` by the
    ``IntWeight`` (O, C / groups, *kernel) (zero padding pads with the zero point: a real zero)."""
    if x_int.dtype == np.uint8 and isinstance(weight.int8, Int8ConvWeight):
        if padding_mode != "zeros":  # (the padded integers; the float path below then pads no more)
            x_int, padding = pad(x_int, padding, padding_mode), (0,) * len(padding)
        acc = conv(x_int, zero_point, weight.int8, kernel, stride, padding, dilation)
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
    r = np.matmul(w[0], cols[:, 0]) if groups == 1 else np.matmul(w, cols)
    return r.reshape((N, O) + tuple(out))


def conv_transpose_sums(x_int, zero_point, x_bound, weight, kernel, stride, padding, output_padding, dilation,
                        groups):
    """The exact (N, O, *out) transposed-convolution sums of ``x_int`` (N, C, *L) minus ``zero_point`` by an
    ``IntWeight`` whose ``rows`` hold (C, O / groups * prod(kernel)): the product, then each kernel offset's columns
    added into the output positions it reaches."""
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
