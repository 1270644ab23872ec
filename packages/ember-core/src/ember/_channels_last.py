"""2-D convolutions on the host in channels-last layout: an image's pixels as rows of channels.

A convolution is one product of its windows' columns by the kernels, (pixels x kernel offsets x C) @ (kernel
offsets x C x O). With the channels innermost, the window copy (im2col) moves whole runs of kernel width x C
values, the product's result is the output channels-last, and the adding back of column gradients (col2im) moves
whole channel vectors too. Each image is transposed once on the way in and once on the way out (OpenBLAS's
omatcopy, ``_blas.transpose``).

The batch is processed in chunks of images whose columns fit in a core's cache; on several cores each takes the
next chunk while OpenBLAS computes single-threaded (``chunks``): the products of a chunk are too small for
OpenBLAS's own threads to pay, and the copies between them would run on one core.
"""
import itertools

import numpy as np

from . import _blas, _parallel

CHUNK_BYTES = 2 << 20  # the columns of a chunk: about a core's L2 cache
# multiply-adds from which a convolution is spread over the cores: below, a thread's wake-up and the wait for the
# last chunk cost more than they save (and OpenBLAS keeps its own threads for what products it deems large)
SPLIT_MIN = 1 << 25
MIN_CHANNELS = 16  # below, a window row (kernel width x C) is too short to copy fast
MIN_ROWS = 1024  # output pixels of the batch below which the transposes and the kernels' reordering cost more
# than the copies they save (ResNet's 256 -> 512 channels 3x3 stride 2 on 8x8, 512 rows: 1.6x torch's time,
# batch-last columns 1.3x)
MIN_SCATTER = 32  # below, channel vectors are too short to add back fast (16 -> 32 channels on 32x32, 3x3: col2im
# 3.5x slower than batch-first)


def chunks(work, n, k, size):
    """``work(a, b, slot)`` for the chunks [a, b) of ``k`` (or fewer, to keep every worker busy) of range(n): over
    the threads BLAS would use (``slot``: the worker's index), BLAS single-threaded meanwhile, when the work is of
    ``size`` multiply-adds or more."""
    workers = min(_parallel.WORKERS, _blas.threads(), n) if size >= SPLIT_MIN else 1
    k = max(1, min(k, -(-n // workers)))
    cuts = list(range(0, n, k)) + [n]
    claim = itertools.count()

    def run(slot):
        with np.errstate(all="ignore"):  # (a thread of the pool has NumPy's default errstate)
            for i in claim:  # (next() on a count is atomic under the GIL)
                if i >= len(cuts) - 1:
                    return
                work(cuts[i], cuts[i + 1], slot)

    if workers < 2:
        run(0)
        return
    with _blas.single_threaded():
        jobs = [_parallel.pool().submit(run, slot) for slot in range(1, workers)]
        try:
            run(0)
        finally:
            for job in jobs:  # (one that has not started has nothing left to do: never wait for a busy pool)
                if not job.cancel():
                    job.result()


def per_chunk(image_bytes, rows, products):
    """How many images make a chunk: about ``CHUNK_BYTES`` of columns (``image_bytes`` per image), but no fewer
    product rows (``rows`` per image) than ``products`` (the columns of the products' other operand: each chunk
    packs that operand again)."""
    return max(1, CHUNK_BYTES // max(1, image_bytes), -(-products // max(1, rows)))


def padded(x, pads, shape=None):
    """``x`` (N, C, H, W) channels-last, zero padded by ``pads`` ((top, bottom), (left, right)) or, given, to
    ``shape`` (rows, columns) after the top and left pads: (N, rows, columns, C)."""
    N, C, H, W = x.shape
    (t, b), (l, r) = pads
    rows, cols = shape or (t + H + b, l + W + r)
    P = np.empty((N, rows, cols, C), x.dtype)
    P[:, :t] = 0
    P[:, t + H:] = 0
    P[:, t:t + H, :l] = 0
    P[:, t:t + H, l + W:] = 0
    xl = _blas.transpose(x.reshape(N, C, H * W), np.empty((N, H * W, C), x.dtype))
    P[:, t:t + H, l:l + W] = xl.reshape(N, H, W, C)
    return P


def to_channels_first(y, out):
    """Channels-last ``y`` (N, rows, columns, O) (rows and columns from 0 as far as ``out`` reaches) written into
    ``out`` (N, O, Ho, Wo)."""
    N, O, Ho, Wo = out.shape
    if y.shape[1:3] != (Ho, Wo):
        y = np.ascontiguousarray(y[:, :Ho, :Wo])
    _blas.transpose(y.reshape(N, Ho * Wo, O), out.reshape(N, O, Ho * Wo))


def to_channels_last(g):
    """``g`` (N, O, Ho, Wo) as (N, Ho, Wo, O)."""
    N, O, Ho, Wo = g.shape
    return _blas.transpose(g.reshape(N, O, Ho * Wo), np.empty((N, Ho * Wo, O), g.dtype)).reshape(N, Ho, Wo, O)


def from_padded(P, pads, out):
    """The unpadded part of channels-last ``P`` (see ``padded``) written into ``out`` (N, C, H, W)."""
    (t, _), (l, _) = pads
    H, W = out.shape[2:]
    to_channels_first(np.ascontiguousarray(P[:, t:t + H, l:l + W]), out)


def usable(xp, x, w, groups):
    """Whether ``conv`` and ``grads`` compute this convolution (batched ``x``, weight ``w``)."""
    return (xp is np and x.ndim == 4 and groups == 1 and x.dtype in (np.float32, np.float64) and w.dtype == x.dtype
            and x.shape[0] > 0 and x.shape[1] > 0 and w.shape[0] > 0)


def _windows(P, kernel, out, stride, dilation):
    """The windows of channels-last ``P``: a view (N, Ho, Wo, kh, kw, C)."""
    s = P.strides
    return np.lib.stride_tricks.as_strided(
        P, (P.shape[0], *out, *kernel, P.shape[3]),
        (s[0], s[1] * stride[0], s[2] * stride[1], s[1] * dilation[0], s[2] * dilation[1], s[3]))


def _columns(x, kernel, out, stride, pads, dilation, ones):
    """The windows of ``x`` (N, C, H, W) as rows (N Ho Wo, kh kw C), followed by a column of ones with ``ones``."""
    if kernel == (1, 1) and not any(lo or hi for lo, hi in pads):  # (the pixels it reads, before transposing)
        x = np.ascontiguousarray(x[:, :, :(out[0] - 1) * stride[0] + 1:stride[0],
                                   :(out[1] - 1) * stride[1] + 1:stride[1]])
        stride = (1, 1)
    windows = _windows(padded(x, pads), kernel, out, stride, dilation)
    K = kernel[0] * kernel[1] * x.shape[1]
    cols = np.empty((windows.shape[0] * out[0] * out[1], K + ones), x.dtype)
    np.copyto(cols[:, :K].reshape(windows.shape), windows)
    if ones:
        cols[:, K] = 1
    return cols


def _kernel_rows(w, b=None):
    """The kernels ``w`` (O, C, kh, kw) as rows (kh kw C (+ the bias), O)."""
    O, C, kh, kw = w.shape
    m = np.empty((kh * kw * C + (b is not None), O), w.dtype)
    t = _blas.transpose(w.reshape(1, O, C * kh * kw), np.empty((1, C * kh * kw, O), w.dtype))
    m[:kh * kw * C].reshape(kh * kw, C, O)[...] = t.reshape(C, kh * kw, O).transpose(1, 0, 2)
    if b is not None:
        m[-1] = b
    return m


def output_size(x, w, stride, pads, dilation):
    return tuple((s + lo + hi - d * (k - 1) - 1) // st + 1
                 for s, (lo, hi), d, k, st in zip(x.shape[2:], pads, dilation, w.shape[2:], stride))


def conv(x, w, b, stride, pads, dilation):
    """Convolution of ``x`` (N, C, H, W) by ``w`` (O, C, kh, kw) plus ``b`` (or None)."""
    N, C = x.shape[:2]
    O, kernel = w.shape[0], w.shape[2:]
    out_size = output_size(x, w, stride, pads, dilation)
    out = np.empty((N, O) + out_size, x.dtype)
    m = _kernel_rows(w, b)

    def chunk(a, z, _):
        y = _columns(x[a:z], kernel, out_size, stride, pads, dilation, b is not None) @ m
        to_channels_first(y.reshape((z - a,) + out_size + (O,)), out[a:z])

    Q = out_size[0] * out_size[1]
    chunks(chunk, N, per_chunk(Q * m.shape[0] * x.dtype.itemsize, Q, O), N * Q * m.shape[0] * O)
    return out


def grads(g, x, w, stride, pads, dilation, need_input, need_weight):
    """(input gradient, weight gradient) of ``conv`` at ``x``, ``w`` for the output gradient ``g``, None for what
    is not needed."""
    N, C, H, W = x.shape
    O, kernel = w.shape[0], w.shape[2:]
    out_size = g.shape[2:]
    (t, b), (l, r) = pads
    m = _kernel_rows(w) if need_input else None
    gx = np.empty(x.shape, x.dtype) if need_input else None
    sums = [None] * _parallel.WORKERS  # each worker's weight gradient (kh kw C, O) over its chunks

    def chunk(a, z, slot):
        gl = to_channels_last(g[a:z]).reshape(-1, O)
        if need_weight:
            cols = _columns(x[a:z], kernel, out_size, stride, pads, dilation, False)
            if sums[slot] is None:
                sums[slot] = cols.T @ gl
            else:
                _blas.gemm(cols.T, gl, sums[slot], 1)
        if need_input:
            gcols = (gl @ m.T).reshape((z - a,) + out_size + kernel + (C,))
            P = np.zeros((z - a, t + H + b, l + W + r, C), x.dtype)
            for i, j in itertools.product(*map(range, kernel)):
                di, dj = i * dilation[0], j * dilation[1]
                P[:, di:di + (out_size[0] - 1) * stride[0] + 1:stride[0],
                  dj:dj + (out_size[1] - 1) * stride[1] + 1:stride[1]] += gcols[:, :, :, i, j]
            from_padded(P, pads, gx[a:z])

    K, Q = kernel[0] * kernel[1] * C, out_size[0] * out_size[1]
    chunks(chunk, N, per_chunk(Q * K * x.dtype.itemsize, Q, O), N * Q * K * O * (need_input + need_weight))
    gw = None
    if need_weight:
        total = [s for s in sums if s is not None]
        for s in total[1:]:
            total[0] += s
        gw = np.ascontiguousarray(total[0].reshape(kernel + (C, O)).transpose(3, 2, 0, 1))
    return gx, gw
