"""Convolutions by 3x3 kernels with stride 1 on the host, by Winograd's minimal filtering F(4x4, 3x3).

Every 4x4 block of outputs is computed from the 6x6 tile of input under it: with the tile and the kernel taken to
6x6 by fixed linear maps (V = B d, U = G g: matrices of the Kronecker products of the 1-D maps), the 16 outputs
are Y = A (U * V) summed over the input channels. The sums over channels are 36 matrix products, one per position
of the 6x6 tile, (tiles x C) @ (C x O): 36 multiplications for 16 outputs instead of 144, and the maps are matrix
products too. The 1-D maps use the points 0, -1, 1, 1/2, -2 and infinity: in float32 the results stay within some
3e-6 of the output's scale (a direct sum: 3e-7; the points 0, +-1, +-2: 1e-5).

Inside, tiles are channels-last (a copy moves whole channel vectors), as in ``_channels_last``, whose chunks
spread the work over the cores: chunks of images, or, where the tiles are few and the transformed kernels many
(36 x O x C values), blocks of output channels.

NaN and infinity do not stay where a direct sum leaves them (the maps mix a tile's values): a result that is not
finite is computed again by the caller's direct method. That check is one sum of the result per chunk."""
import math

import numpy as np

from . import _blas, _channels_last
from ._channels_last import (
    accumulate,
    chunks,
    empty_as,
    from_padded,
    padded,
    per_chunk,
    to_channels_first,
    to_channels_last,
    total,
)

_3, _15 = 1 / 3, 1 / 15
# the 1-d maps of F(4, 3): outputs of products, kernel, input (float64; the kernel's thirds round once there)
_AT = [[1, 1, 1, 1, 1, 0], [0, -1, 1, 0.5, -2, 0], [0, 1, 1, 0.25, 4, 0], [0, -1, 1, 0.125, -8, 1]]
_G = [[1, 0, 0], [-_3, _3, -_3], [_3, _3, _3], [-16 * _15, -8 * _15, -4 * _15], [_15, -2 * _15, 4 * _15], [0, 0, 1]]
_BT = [[1, -1.5, -2, 1.5, 1, 0], [0, 1, -2.5, 0.5, 1, 0], [0, -1, 0.5, 2.5, 1, 0], [0, -2, -1, 2, 1, 0],
       [0, 0.5, -1, -0.5, 1, 0], [0, 1, -1.5, -2, 1.5, 1]]
_BIAS = 14  # the product plane of the point 1 in both dims: its column of A is all ones, so a bias added there
# reaches every output
_MATS = {}
MIN_CHANNELS = 32  # below, the maps cost more than the products save (16 -> 32 channels on 32x32: 1.7x torch's
# time, channels-last window rows 1.4x; 64 -> 64: 1.0x against 1.3x)
MIN_WORK = 1 << 25  # multiply-adds of the direct sums below which the maps' fixed costs do not pay (the digits
# demo's 32 -> 64 channels on 4x4, 9.4M: 1.9x torch's time, the batch-first columns 1.3x)
_WEIGHT_BLOCK = 16384  # kernels transformed at a time (the 36 x 9 product runs half as fast on whole large weights)


def usable(xp, x, w, stride, dilation, groups):
    """Whether ``conv`` and ``grads`` compute this convolution (batched ``x``, weight ``w``)."""
    return (_channels_last.usable(xp, x, w, groups) and w.shape[2:] == (3, 3) and tuple(stride) == (1, 1)
            and tuple(dilation) == (1, 1) and min(x.shape[1], w.shape[0]) >= MIN_CHANNELS
            and 9 * math.prod(x.shape) * w.shape[0] >= MIN_WORK)


def _mats(dtype):
    """(A 16x36, B 36x36, G 36x9) in ``dtype``."""
    if dtype not in _MATS:
        at, g, bt = (np.array(m, dtype=np.float64) for m in (_AT, _G, _BT))
        _MATS[dtype] = tuple(np.kron(m, m).astype(dtype) for m in (at, bt, g))
    return _MATS[dtype]


def _tiles(size):
    return -(-size // 4)


def _weights(w):
    """The transformed kernels U (36, O, C) of ``w`` (O, C, 3, 3), computed in cache-sized column blocks."""
    O, C = w.shape[:2]
    G, wt = _mats(w.dtype)[2], w.reshape(O * C, 9).T
    U = np.empty((36, O * C), w.dtype)
    for s in range(0, O * C, _WEIGHT_BLOCK):
        np.matmul(G, wt[:, s:s + _WEIGHT_BLOCK], out=U[:, s:s + _WEIGHT_BLOCK])
    return U.reshape(36, O, C)


def _input(x, pads, TH, TW):
    """The transformed tiles V (36, N TH TW, C) of ``x`` (N, C, H, W) padded by ``pads`` and zeros to
    (4 TH + 2, 4 TW + 2)."""
    N, C = x.shape[:2]
    P = padded(x, pads, (4 * TH + 2, 4 * TW + 2))
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
    to_channels_first(Z.reshape(N, 4 * TH, 4 * TW, O), out)


def _by_channels(NT, O):
    """Whether products go by blocks of output channels (all tiles at once) rather than by chunks of images (all
    channels at once): when the tiles are few, the transformed kernels many."""
    return NT < O


def conv(x, w, b, pads):
    """Convolution of ``x`` (N, C, H, W) by ``w`` (O, C, 3, 3) plus ``b`` (or None) with stride 1 and ``pads``
    ((top, bottom), (left, right)); None where the result is not finite (see the module's doc)."""
    N, C, H, W = x.shape
    O = w.shape[0]
    Ho, Wo = H + sum(pads[0]) - 2, W + sum(pads[1]) - 2
    TH, TW = _tiles(Ho), _tiles(Wo)
    out = empty_as(x, (N, O, Ho, Wo))
    finite = []
    if _by_channels(N * TH * TW, O):
        with np.errstate(all="ignore"):
            V = _input(x, pads, TH, TW)
        M = np.empty((36, N * TH * TW, O), x.dtype)

        def block(a, z):
            np.matmul(V, _weights(w[a:z]).transpose(0, 2, 1), out=M[:, :, a:z])
            if b is not None:
                M[_BIAS, :, a:z] += b[a:z]

        chunks(block, O, per_chunk(36 * C * x.dtype.itemsize, 1, 1), 36 * N * TH * TW * C * O)
        with np.errstate(all="ignore"):
            _output(M, out)
        return out if np.isfinite(out.sum()) else None
    with np.errstate(all="ignore"):
        U = _weights(w).transpose(0, 2, 1)

    def chunk(a, z):
        M = np.matmul(_input(x[a:z], pads, TH, TW), U)
        if b is not None:
            M[_BIAS] += b
        _output(M, out[a:z])
        finite.append(np.isfinite(out[a:z].sum()))

    chunks(chunk, N, per_chunk(36 * TH * TW * C * x.dtype.itemsize, TH * TW, O), 36 * N * TH * TW * C * O)
    return out if all(finite) else None


def _output_grad(g, TH, TW):
    """The output gradient ``g`` (N, O, Ho, Wo) mapped back to the products: (36, N TH TW, O)."""
    N, O, Ho, Wo = g.shape
    gl = to_channels_last(g)
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
    N, C = out.shape[:2]
    dT = (_mats(dV.dtype)[1].T @ dV.reshape(36, -1)).reshape(6, 6, N, TH, TW, C).transpose(2, 3, 0, 4, 1, 5)
    P = np.empty((N, TH + 1, 4, TW + 1, 4, C), dV.dtype)  # (the padded input, 4 TH + 4 x 4 TW + 4)
    P[:, TH] = 0
    P[:, :TH, :, TW] = 0
    P[:, :TH, :, :TW] = dT[:, :, :4, :, :4]
    P[:, 1:, :2, :TW] += dT[:, :, 4:, :, :4]
    P[:, :TH, :, 1:, :2] += dT[:, :, :4, :, 4:]
    P[:, 1:, :2, 1:, :2] += dT[:, :, 4:, :, 4:]
    from_padded(P.reshape(N, 4 * TH + 4, 4 * TW + 4, C), pads, out)


def _weight_grad(dU, out):
    """The gradient ``dU`` (36, O, C) of transformed kernels mapped back to the kernels, written into ``out``
    (O, C, 3, 3)."""
    O, C = dU.shape[1:]
    gw9 = _mats(dU.dtype)[2].T @ dU.reshape(36, O * C)  # (kernel offsets, O C)
    _blas.transpose(gw9[None], out.reshape(1, O * C, 9))


def grads(g, x, w, pads, need_input, need_weight):
    """(input gradient, weight gradient) of ``conv`` at ``x``, ``w`` for the output gradient ``g``, None for what
    is not needed; None where a result is not finite."""
    N, C, H, W = x.shape
    O = w.shape[0]
    Ho, Wo = g.shape[2:]
    TH, TW = _tiles(Ho), _tiles(Wo)
    gx = empty_as(x, x.shape) if need_input else None
    gw = np.empty(w.shape, w.dtype) if need_weight else None
    sums = {}  # each worker's sum of products over its chunks
    size = 36 * N * TH * TW * C * O * (need_input + need_weight)
    with np.errstate(all="ignore"):
        if _by_channels(N * TH * TW, O):
            dM = _output_grad(g, TH, TW)
            V = _input(x, pads, TH, TW) if need_weight else None

            def block(a, z):
                Ub, dMb = _weights(w[a:z]), dM[:, :, a:z]
                if need_input:
                    accumulate(sums, dMb, Ub)
                if need_weight:
                    _weight_grad(np.matmul(dMb.transpose(0, 2, 1), V), gw[a:z])

            chunks(block, O, per_chunk(36 * C * x.dtype.itemsize, 1, 1), size)
            if need_input:
                _input_grad(total(sums), pads, TH, TW, gx)
        else:
            U = _weights(w) if need_input else None

            def chunk(a, z):
                dM = _output_grad(g[a:z], TH, TW)
                if need_weight:
                    accumulate(sums, dM.transpose(0, 2, 1), _input(x[a:z], pads, TH, TW))
                if need_input:
                    _input_grad(np.matmul(dM, U), pads, TH, TW, gx[a:z])

            chunks(chunk, N, per_chunk(36 * TH * TW * max(C, O) * x.dtype.itemsize, TH * TW, O), size)
            if need_weight:
                _weight_grad(total(sums), gw)
    for r in (gx, gw):
        if r is not None and not np.isfinite(r.sum()):
            return None
    return gx, gw
