"""Convolutions by 3x3 kernels with stride 1 on the host, by Winograd's minimal filtering F(4x4, 3x3).

Every 4x4 block of outputs is computed from the 6x6 tile of input under it: with the tile and the kernel taken to
6x6 by fixed linear maps (V = B d, U = G g: matrices of the Kronecker products of the 1-D maps), the 16 outputs
are Y = A (U * V) summed over the input channels. The sums over channels are 36 matrix products, one per position
of the 6x6 tile, (tiles x C) @ (C x O): 36 multiplications for 16 outputs instead of 144, and the maps are matrix
products too. The 1-D maps use the points 0, -1, 1, 1/2, -2 and infinity: in float32 the results stay within some
3e-6 of the output's scale (a direct sum: 3e-7; the points 0, +-1, +-2: 1e-5).

Inside, tiles are channels-last (a copy moves whole channel vectors): the input is transposed once per image
(OpenBLAS's omatcopy), the result back. The batch is processed in chunks of images small enough for the caches;
on several cores, each core takes the next chunk while OpenBLAS computes single-threaded (its products per chunk
are small, its own threads would mostly synchronise).

NaN and infinity do not stay where a direct sum leaves them (the maps mix a tile's values): a result that is not
finite is computed again by the caller's direct method. That check is one sum of the result per chunk."""
import itertools
from fractions import Fraction

import numpy as np

from . import _blas, _parallel

_h, _3, _15 = Fraction(1, 2), Fraction(1, 3), Fraction(1, 15)
# the 1-D maps of F(4, 3): outputs of products, kernel, input
_AT = [[1, 1, 1, 1, 1, 0], [0, -1, 1, _h, -2, 0], [0, 1, 1, _h ** 2, 4, 0], [0, -1, 1, _h ** 3, -8, 1]]
_G = [[1, 0, 0], [-_3, _3, -_3], [_3, _3, _3], [-16 * _15, -8 * _15, -4 * _15], [_15, -2 * _15, 4 * _15], [0, 0, 1]]
_BT = [[1, -3 * _h, -2, 3 * _h, 1, 0], [0, 1, -5 * _h, _h, 1, 0], [0, -1, _h, 5 * _h, 1, 0], [0, -2, -1, 2, 1, 0],
       [0, _h, -1, -_h, 1, 0], [0, 1, -3 * _h, -2, 3 * _h, 1]]
_BIAS = 14  # the product plane of the point 1 in both dims: its column of A is all ones, so a bias added there
# reaches every output
_MATS = {}
MIN_CHANNELS = 16  # below, the maps cost more than the products save (measured against im2col, 32x32 images)
_CHUNK_BYTES = 2 << 20  # the transformed input of a chunk: about the size of a core's L2 cache


def usable(xp, x, w, stride, dilation, groups):
    """Whether ``conv`` and ``grads`` compute this convolution (batched ``x``, weight ``w``)."""
    return (xp is np and x.ndim == 4 and w.shape[2:] == (3, 3) and tuple(stride) == (1, 1)
            and tuple(dilation) == (1, 1) and groups == 1 and x.dtype in (np.float32, np.float64)
            and w.dtype == x.dtype and x.shape[0] and min(x.shape[1], w.shape[0]) >= MIN_CHANNELS)


def _mats(dtype):
    """(A 16x36, B 36x36, G 36x9) in ``dtype``."""
    if dtype not in _MATS:
        at, g, bt = (np.array(m, dtype=np.float64) for m in (_AT, _G, _BT))
        _MATS[dtype] = tuple(np.kron(m, m).astype(dtype) for m in (at, bt, g))
    return _MATS[dtype]


def _tiles(size):
    return -(-size // 4)


def _chunks(work, n, per_row, itemsize):
    """``work(a, b, slot)`` for chunks [a, b) of range(n) images (``per_row`` bytes of transformed input each):
    over the threads BLAS would use (``slot``: the worker), BLAS single-threaded meanwhile. Returns the number of
    workers."""
    k = max(1, min(n, _CHUNK_BYTES // max(1, per_row * itemsize)))
    workers = min(_parallel.WORKERS, _blas.threads(), n)
    if workers > 1:
        k = min(k, -(-n // workers))
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
        return 1
    with _blas.single_threaded():
        jobs = [_parallel.pool().submit(run, slot) for slot in range(1, workers)]
        try:
            run(0)
        finally:
            for job in jobs:  # (one that has not started has nothing left to do: never wait for a busy pool)
                if not job.cancel():
                    job.result()
    return workers


def _weights(w):
    """The transformed kernels U (36, O, C) of ``w`` (O, C, 3, 3)."""
    O, C = w.shape[:2]
    return (_mats(w.dtype)[2] @ w.reshape(O * C, 9).T).reshape(36, O, C)


def _input(x, pads, TH, TW):
    """The transformed tiles V (36, N TH TW, C) of ``x`` (N, C, H, W) padded by ``pads`` ((top, _), (left, _))
    and zeros to (4 TH + 2, 4 TW + 2)."""
    N, C, H, W = x.shape
    (t, _), (l, _) = pads
    P = np.empty((N, 4 * TH + 2, 4 * TW + 2, C), x.dtype)
    P[:, :t] = 0
    P[:, t + H:] = 0
    P[:, t:t + H, :l] = 0
    P[:, t:t + H, l + W:] = 0
    P[:, t:t + H, l:l + W] = _blas.transpose(x.reshape(N, C, H * W), np.empty((N, H * W, C), x.dtype)).reshape(
        N, H, W, C)
    s = P.strides
    tiles = np.lib.stride_tricks.as_strided(P, (6, 6, N, TH, TW, C), (s[1], s[2], s[0], 4 * s[1], 4 * s[2], s[3]))
    T = np.empty((36, N * TH * TW * C), x.dtype)
    np.copyto(T.reshape(tiles.shape), tiles)
    return (_mats(x.dtype)[1] @ T).reshape(36, N * TH * TW, C)


def _output(M, out):
    """Products ``M`` (36, N TH TW, O) mapped to the outputs, written into ``out`` (N, O, Ho, Wo)."""
    N, O, Ho, Wo = out.shape
    TH, TW = _tiles(Ho), _tiles(Wo)
    Y = (_mats(M.dtype)[0] @ M.reshape(36, -1)).reshape(4, 4, N, TH, TW, O)
    Z = np.empty((N, TH, 4, TW, 4, O), M.dtype)
    np.copyto(Z, Y.transpose(2, 3, 0, 4, 1, 5))
    Z = Z.reshape(N, 4 * TH, 4 * TW, O)
    if (4 * TH, 4 * TW) != (Ho, Wo):
        Z = np.ascontiguousarray(Z[:, :Ho, :Wo])
    _blas.transpose(Z.reshape(N, Ho * Wo, O), out.reshape(N, O, Ho * Wo))


def conv(x, w, b, pads):
    """Convolution of ``x`` (N, C, H, W) by ``w`` (O, C, 3, 3) plus ``b`` (or None) with stride 1 and ``pads``
    ((top, bottom), (left, right)); None where the result is not finite (see the module's doc)."""
    N, C, H, W = x.shape
    O = w.shape[0]
    Ho, Wo = H + sum(pads[0]) - 2, W + sum(pads[1]) - 2
    TH, TW = _tiles(Ho), _tiles(Wo)
    with np.errstate(all="ignore"):
        U = _weights(w).transpose(0, 2, 1)
    out = np.empty((N, O, Ho, Wo), x.dtype)
    finite = []

    def work(a, z, _):
        M = np.matmul(_input(x[a:z], pads, TH, TW), U)
        if b is not None:
            M[_BIAS] += b
        _output(M, out[a:z])
        finite.append(np.isfinite(out[a:z].sum()))

    _chunks(work, N, 36 * TH * TW * C, x.dtype.itemsize)
    return out if all(finite) else None


def _output_grad(g, TH, TW):
    """The output gradient ``g`` (N, O, Ho, Wo) mapped back to the products: (36, N TH TW, O)."""
    N, O, Ho, Wo = g.shape
    gl = _blas.transpose(g.reshape(N, O, Ho * Wo), np.empty((N, Ho * Wo, O), g.dtype)).reshape(N, Ho, Wo, O)
    if (4 * TH, 4 * TW) != (Ho, Wo):
        full = np.zeros((N, 4 * TH, 4 * TW, O), g.dtype)
        full[:, :Ho, :Wo] = gl
        gl = full
    D = np.empty((4, 4, N, TH, TW, O), g.dtype)
    np.copyto(D.transpose(2, 3, 0, 4, 1, 5), gl.reshape(N, TH, 4, TW, 4, O))
    return (_mats(g.dtype)[0].T @ D.reshape(16, -1)).reshape(36, N * TH * TW, O)


def _input_grad(dV, pads, TH, TW, out):
    """The gradient ``dV`` (36, N TH TW, C) of the transformed tiles mapped back to the input, written into
    ``out`` (N, C, H, W): the tiles overlap by two rows and columns, where their parts add up."""
    N, C, H, W = out.shape
    (t, _), (l, _) = pads
    dT = (_mats(dV.dtype)[1].T @ dV.reshape(36, -1)).reshape(6, 6, N, TH, TW, C).transpose(2, 3, 0, 4, 1, 5)
    P = np.empty((N, TH + 1, 4, TW + 1, 4, C), dV.dtype)  # (the padded input, 4 TH + 4 x 4 TW + 4)
    P[:, TH] = 0
    P[:, :TH, :, TW] = 0
    P[:, :TH, :, :TW] = dT[:, :, :4, :, :4]
    P[:, 1:, :2, :TW] += dT[:, :, 4:, :, :4]
    P[:, :TH, :, 1:, :2] += dT[:, :, :4, :, 4:]
    P[:, 1:, :2, 1:, :2] += dT[:, :, 4:, :, 4:]
    crop = np.ascontiguousarray(P.reshape(N, 4 * TH + 4, 4 * TW + 4, C)[:, t:t + H, l:l + W])
    _blas.transpose(crop.reshape(N, H * W, C), out.reshape(N, C, H * W))


def grads(g, x, w, pads, need_input, need_weight):
    """(input gradient, weight gradient) of ``conv`` at ``x``, ``w`` for the output gradient ``g``, None for what
    is not needed; None where a result is not finite."""
    N, C, H, W = x.shape
    O = w.shape[0]
    Ho, Wo = g.shape[2:]
    TH, TW = _tiles(Ho), _tiles(Wo)
    with np.errstate(all="ignore"):
        U = _weights(w) if need_input else None
    gx = np.empty(x.shape, x.dtype) if need_input else None
    sums = [None] * max(_parallel.WORKERS, 1)  # each worker's weight gradient of the products (36, O, C)
    finite = []

    def work(a, z, slot):
        dM = _output_grad(g[a:z], TH, TW)
        if need_weight:
            V = _input(x[a:z], pads, TH, TW)
            if sums[slot] is None:
                sums[slot] = np.matmul(dM.transpose(0, 2, 1), V)
            else:
                for ab in range(36):
                    _blas.gemm(dM[ab].T, V[ab], sums[slot][ab], 1)
        if need_input:
            _input_grad(np.matmul(dM, U), pads, TH, TW, gx[a:z])
            finite.append(np.isfinite(gx[a:z].sum()))

    _chunks(work, N, 36 * TH * TW * max(C, O), x.dtype.itemsize)
    gw = None
    if need_weight:
        with np.errstate(all="ignore"):
            gw9 = _mats(x.dtype)[2].T @ sum(s for s in sums if s is not None).reshape(36, O * C)  # (offsets, O C)
        gw = _blas.transpose(gw9[None], np.empty((1, O * C, 9), x.dtype)).reshape(O, C, 3, 3)
        finite.append(np.isfinite(gw.sum()))
    return (gx, gw) if all(finite) else None
