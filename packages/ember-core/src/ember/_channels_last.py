"""2-D convolutions on the host in channels-last layout: an image's pixels as rows of channels.

A convolution is one product of its windows' columns by the kernels, (pixels x kernel offsets x C) @ (kernel
offsets x C x O). With the channels innermost, the window copy (im2col) moves whole runs of kernel width x C
values, the product's result is the output channels-last, and the adding back of column gradients (col2im) moves
whole channel vectors too. Each image is transposed once on the way in and once on the way out (OpenBLAS's
omatcopy, ``_blas.transpose``).

With stride 1 down the rows, the columns hold one window row per pixel of every padded row (kernel width x C
values, not kernel height times that): kernel row i's products read them i rows further on, a view, and add up
(the output then has rows for every padded row, the last ones unused). With stride 1 both ways the input gradient
is the convolution of the output gradient by the flipped kernels, computed the same way, with no col2im.

The batch is processed in chunks of images whose columns fit in a core's cache; on several cores each takes the
next chunk while OpenBLAS computes single-threaded (``chunks``): the products of a chunk are too small for
OpenBLAS's own threads to pay, and the copies between them would run on one core.
"""
import itertools
import threading

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
    """``work(a, b)`` for the chunks [a, b) of about ``k`` (fewer, to give every worker as many) of range(n): over
    the cores (``_parallel``'s helpers), BLAS single-threaded meanwhile, when the work is of ``size`` multiply-adds
    or more."""
    workers = min(_parallel.WORKERS, _blas.threads(), n) if size >= SPLIT_MIN else 1
    count = -(-n // max(1, k))
    count = min(n, -(-count // workers) * workers)  # (a multiple of the workers, of even sizes: none waits for a
    # last one)
    cuts = [n * i // count for i in range(count + 1)]
    with np.errstate(all="ignore"):  # (the helpers run in the caller's context)
        if workers < 2:
            for a, b in zip(cuts, cuts[1:]):
                work(a, b)
            return
        with _blas.single_threaded():
            if _parallel._parts(work, cuts) is None:  # (no helper free: another split runs)
                for a, b in zip(cuts, cuts[1:]):
                    work(a, b)


def accumulate(sums, a, b):
    """``sums[thread] += a @ b`` for matrices or stacks of them (the first time ``sums[thread] = a @ b``): the
    calling worker's sum over its chunks."""
    me = threading.get_ident()
    if me not in sums:
        sums[me] = np.matmul(a, b)
    elif a.ndim == 2:
        _blas.gemm(a, b, sums[me], 1)
    else:
        for i in range(len(a)):
            _blas.gemm(a[i], b[i], sums[me][i], 1)


def total(sums):
    """The sum of the workers' arrays in ``sums``."""
    sums = list(sums.values())
    for s in sums[1:]:
        sums[0] += s
    return sums[0]


def per_chunk(image_bytes, rows, products):
    """How many images make a chunk: about ``CHUNK_BYTES`` of columns (``image_bytes`` per image), but no fewer
    product rows (``rows`` per image) than ``products`` (the columns of the products' other operand: each chunk
    packs that operand again)."""
    return max(1, CHUNK_BYTES // max(1, image_bytes), -(-products // max(1, rows)))


def nhwc(a):
    """``a`` (N, C, H, W) as its (N, H, W, C) view when it is laid out channels-last (``ember.channels_last``)
    rather than row-major, else None."""
    t = a.transpose(0, 2, 3, 1)
    return t if t.flags.c_contiguous and not a.flags.c_contiguous else None


def empty_as(x, shape):
    """An uninitialised (N, O, Ho, Wo) array of ``shape``, channels-last when ``x`` is (PyTorch's layout for a
    convolution's output and its input's gradient)."""
    if nhwc(x) is None:
        return np.empty(shape, x.dtype)
    N, O, Ho, Wo = shape
    return np.empty((N, Ho, Wo, O), x.dtype).transpose(0, 3, 1, 2)


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
    xl = nhwc(x)
    if xl is None:
        xl = _blas.transpose(x.reshape(N, C, H * W), np.empty((N, H * W, C), x.dtype)).reshape(N, H, W, C)
    P[:, t:t + H, l:l + W] = xl
    return P


def to_channels_first(y, out):
    """Channels-last ``y`` (N, rows, columns, O) (rows and columns from 0 as far as ``out`` reaches) written into
    ``out`` (N, O, Ho, Wo)."""
    N, O, Ho, Wo = out.shape
    ol = nhwc(out)
    if ol is not None:
        ol[...] = y[:, :Ho, :Wo]
        return
    if y.shape[1:3] != (Ho, Wo):
        y = np.ascontiguousarray(y[:, :Ho, :Wo])
    _blas.transpose(y.reshape(N, Ho * Wo, O), out.reshape(N, O, Ho * Wo))


def to_channels_last(g):
    """``g`` (N, O, Ho, Wo) as (N, Ho, Wo, O)."""
    gl = nhwc(g)
    if gl is not None:
        return gl
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


def _row_columns(x, kw, Wo, sw, dw, pads, ones):
    """The window rows of ``x`` (N, C, H, W) padded by ``pads`` to (N, Hp, Wp, C): (N Hp Wo + spare, kw C) (and a
    column of ones with ``ones``), the spare rows zero (what the last kernel rows read past the last image)."""
    P = padded(x, pads)
    N, Hp, _, C = P.shape
    s = P.strides
    view = np.lib.stride_tricks.as_strided(P, (N, Hp, Wo, kw, C), (s[0], s[1], s[2] * sw, s[2] * dw, s[3]))
    R, K = N * Hp * Wo, kw * C
    cols = np.empty((R + Hp * Wo, K + ones), x.dtype)
    np.copyto(cols[:R, :K].reshape(view.shape), view)
    cols[R:] = 0
    if ones:
        cols[:R, K] = 1
    return cols


def _row_kernels(w, b=None):
    """The kernels ``w`` (O, C, kh, kw) as (kh, kw C (+ the bias, in kernel row 0 only), O)."""
    O, C, kh, kw = w.shape
    m = _kernel_rows(w).reshape(kh, kw * C, O)
    if b is None:
        return m
    m1 = np.zeros((kh, kw * C + 1, O), w.dtype)
    m1[:, :-1] = m
    m1[0, -1] = b
    return m1


def _kernels_of_rows(m, shape):
    """Kernel rows ``m`` (kh kw C, O) (see ``_kernel_rows``) as kernels of ``shape`` (O, C, kh, kw)."""
    O, C, kh, kw = shape
    t = _blas.transpose(m[None], np.empty((1, O, kh * kw * C), m.dtype)).reshape(O, kh * kw, C)
    return _blas.transpose(t, np.empty((O, C, kh * kw), m.dtype)).reshape(shape)


def _flipped(pads, kernel, dilation):
    """The padding of the convolution by the flipped kernels that gives the input gradient of a stride-1 one (None
    where it would be negative: padding beyond the kernel's reach)."""
    r = tuple((d * (k - 1) - lo, d * (k - 1) - hi) for (lo, hi), k, d in zip(pads, kernel, dilation))
    return r if min(min(p) for p in r) >= 0 else None


def output_size(x, w, stride, pads, dilation):
    return tuple((s + lo + hi - d * (k - 1) - 1) // st + 1
                 for s, (lo, hi), d, k, st in zip(x.shape[2:], pads, dilation, w.shape[2:], stride))


def conv(x, w, b, stride, pads, dilation):
    """Convolution of ``x`` (N, C, H, W) by ``w`` (O, C, kh, kw) plus ``b`` (or None)."""
    N, C, H, _ = x.shape
    O, (kh, kw) = w.shape[0], w.shape[2:]
    Ho, Wo = out_size = output_size(x, w, stride, pads, dilation)
    out = empty_as(x, (N, O) + out_size)
    ol = nhwc(out)
    K, Q = kh * kw * C, Ho * Wo
    if stride[0] == 1:
        m = _row_kernels(w, b)
        Hp, step = H + sum(pads[0]), dilation[0] * Wo

        def chunk(a, z):
            cols, R = _row_columns(x[a:z], kw, Wo, stride[1], dilation[1], pads, b is not None), (z - a) * Hp * Wo
            y = np.empty((R, O), x.dtype)
            for i in range(kh):
                _blas.gemm(cols[i * step:i * step + R], m[i], y, i > 0)
            if ol is not None:
                ol[a:z].reshape(z - a, Q, O)[...] = y.reshape(z - a, Hp * Wo, O)[:, :Q]
            else:
                _blas.transpose(y.reshape(z - a, Hp * Wo, O)[:, :Q], out[a:z].reshape(z - a, O, Q))

        chunks(chunk, N, per_chunk(Hp * Wo * kw * C * x.dtype.itemsize, Q, O), N * Q * K * O)
        return out
    m = _kernel_rows(w, b)

    def chunk(a, z):
        cols = _columns(x[a:z], (kh, kw), out_size, stride, pads, dilation, b is not None)
        if ol is not None:
            np.matmul(cols, m, out=ol[a:z].reshape(-1, O))
        else:
            to_channels_first((cols @ m).reshape((z - a,) + out_size + (O,)), out[a:z])

    chunks(chunk, N, per_chunk(Q * m.shape[0] * x.dtype.itemsize, Q, O), N * Q * K * O)
    return out


def grads(g, x, w, stride, pads, dilation, need_input, need_weight, rows=True):
    """(input gradient, weight gradient) of ``conv`` at ``x``, ``w`` for the output gradient ``g``, None for what
    is not needed, and for the input gradient where neither way fits: the convolution of ``g`` by the flipped
    kernels (stride 1, padding within the kernels' reach, finite kernels: the zero padding of ``g`` would meet an
    infinite one), or col2im with ``MIN_SCATTER`` channels or more. The weight gradient alone comes from window
    rows where the stride down the rows is 1 (and ``rows``); as there the unused output rows meet input values
    (zero times infinity is NaN), a result that is not finite is computed again from whole windows."""
    N, C, H, W = x.shape
    O, kernel = w.shape[0], w.shape[2:]
    (kh, kw), (Ho, Wo) = kernel, g.shape[2:]
    gx = gw = None
    if need_input and tuple(stride) == (1, 1) and _flipped(pads, kernel, dilation) and np.isfinite(w.sum()):
        gx = conv(g, w.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1], None, (1, 1), _flipped(pads, kernel, dilation),
                  dilation)
        need_input = False
    need_input = need_input and C >= MIN_SCATTER
    if not (need_input or need_weight):
        return gx, None
    m = _kernel_rows(w) if need_input else None
    if need_input:
        gx = empty_as(x, x.shape)
    sums = {}  # each worker's weight gradient over its chunks: (kh kw C, O) rows
    rows = rows and stride[0] == 1 and not need_input
    Hp, step = H + sum(pads[0]), dilation[0] * Wo

    def chunk(a, z):
        gl = to_channels_last(g[a:z])
        if rows:
            R = (z - a) * Hp * Wo
            wide = np.zeros((z - a, Hp, Wo, O), x.dtype)  # (g on every padded row: the unused ones zero)
            wide[:, :Ho] = gl
            cols, wide = _row_columns(x[a:z], kw, Wo, stride[1], dilation[1], pads, False), wide.reshape(R, O)
            mine = sums.get(threading.get_ident())
            if mine is None:
                mine = sums[threading.get_ident()] = np.zeros((kh, kw * C, O), x.dtype)
            for i in range(kh):
                _blas.gemm(cols[i * step:i * step + R].T, wide, mine[i], 1)
            return
        gl = gl.reshape(-1, O)
        if need_weight:
            accumulate(sums, _columns(x[a:z], kernel, (Ho, Wo), stride, pads, dilation, False).T, gl)
        if need_input:
            gcols = (gl @ m.T).reshape((z - a, Ho, Wo) + kernel + (C,))
            (t, b), (l, r) = pads
            P = np.zeros((z - a, t + H + b, l + W + r, C), x.dtype)
            for i, j in itertools.product(range(kh), range(kw)):
                di, dj = i * dilation[0], j * dilation[1]
                P[:, di:di + (Ho - 1) * stride[0] + 1:stride[0],
                  dj:dj + (Wo - 1) * stride[1] + 1:stride[1]] += gcols[:, :, :, i, j]
            from_padded(P, pads, gx[a:z])

    K, Q = kh * kw * C, Ho * Wo
    image = (Hp * Wo * kw * C if rows else Q * K) * x.dtype.itemsize  # (the columns of an image)
    chunks(chunk, N, per_chunk(image, Q, O), N * Q * K * O * (need_input + need_weight))
    if need_weight:
        gw = _kernels_of_rows(total(sums).reshape(K, O), w.shape)
        if rows and not np.isfinite(gw.sum()):
            gw = grads(g, x, w, stride, pads, dilation, False, True, False)[1]
    return gx, gw
