"""float32 2-d convolutions on a compiled direct kernel (``ember._fconv_loops``), where the CPU has AVX-512.

Each output is read from the channels-last padded input in place (no im2col columns) and the products run in
register tiles at about twice the rate OpenBLAS's sgemm reaches on the same core (measured on a 2-core AMD EPYC VM:
~220 against ~110 GFLOP/s per core). It serves what ``usable`` admits: a network's stem, a large kernel on few input
channels, where the other paths spend as long copying im2col columns as multiplying. Until the loop is compiled (in
the background, by ``ember._jit``), and elsewhere, the other paths compute the convolution; their sums are ordered
otherwise, so results may change in the last bits once the loop is ready (as for every non-exact loop of
``ember._jit``).
"""
import numpy as np

from . import _jit, _parallel
from ._channels_last import empty_as, output_size, padded, to_channels_first

MAX_CHANNELS, MIN_TAPS = 4, 25  # the convolutions ``usable`` gives the loop (stems: 7x7 on RGB)
MIN_WORK = 1 << 20  # multiply-adds from which a convolution takes the loop (below, its setup costs more)
SPLIT_WORK = 1 << 24  # multiply-adds from which the images split over two threads
_SIG = ("(float32[:, :, :, ::1], float32[:, :, ::1], float32[::1], int64[::1], float32[:, ::1], intp, intp, intp, "
        "intp, intp, intp)")


def usable(xp, x, w, groups):
    """Whether ``conv`` should compute this convolution: host float32, one group, and a stem's shape, a kernel of
    25 taps or more on at most 4 input channels (there the im2col columns, kernel x channels wide, cost as much to
    copy as the product; measured on two threads, the other paths are faster for 3x3 kernels and wide inputs, as
    they split chunks over the cores). (The loop's module refuses to load on a CPU without AVX-512, checked in the
    background: ``conv`` then always gives None.)"""
    return (xp is np and x.ndim == 4 and groups == 1 and x.dtype == np.float32 and w.dtype == np.float32
            and 0 < x.shape[1] <= MAX_CHANNELS and w.shape[2] * w.shape[3] >= MIN_TAPS and x.shape[0] > 0
            and w.shape[0] > 0)


def _packed(w, b, panels):
    """The weight (O, C, kh, kw) as (panels, taps, 64) float32 in tap order (row, column, channel), zero past O, and
    the starting sums (the bias, or zeros) of its panels * 64 columns."""
    O, C, kh, kw = w.shape
    wide = np.zeros((panels * 64, kh, kw, C), np.float32)
    wide[:O] = w.transpose(0, 2, 3, 1)
    init = np.zeros(panels * 64, np.float32)
    if b is not None:
        init[:O] = b
    return np.ascontiguousarray(wide.reshape(panels, 64, kh * kw * C).transpose(0, 2, 1)), init


def conv(x, w, b, stride, pads, dilation):
    """The convolution (N, O, Ho, Wo) of ``x`` (N, C, H, W) by ``w`` (O, C, kh, kw) plus ``b`` (or None), laid out
    as ``x`` is (channels-last or row-major); None until the loop is ready, or when the work is too small."""
    N, C = x.shape[:2]
    O, _, kh, kw = w.shape
    Ho, Wo = output_size(x, w, stride, pads, dilation)
    work = N * Ho * Wo * O * C * kh * kw
    fn = _jit.loop("ember._fconv_loops", "conv", _SIG, work, minimum=MIN_WORK) if work else None
    if fn is None:
        return None
    panels = -(-O // 64)
    b_packed, init = _packed(w, b, panels)
    P = padded(x, pads)
    Wp = P.shape[2]
    taps = (np.arange(kh)[:, None, None] * dilation[0] * Wp + np.arange(kw)[None, :, None] * dilation[1]) * C
    offsets = ((taps + np.arange(C)[None, None, :]) * 4).reshape(-1).astype(np.int64)
    sums = np.empty((N, Ho, Wo, panels * 64), np.float32)
    rows = sums.reshape(-1, panels * 64)

    def images(lo, hi):
        fn(P, b_packed, init, offsets, rows, Ho, Wo, stride[0] * Wp * C * 4, stride[1] * C * 4, lo, hi)
    if work >= SPLIT_WORK and N > 1:
        _parallel.halves(images, N)
    else:
        images(0, N)
    out = empty_as(x, (N, O, Ho, Wo))
    to_channels_first(sums[..., :O], out)
    return out
