"""Exact integer products of quantized layers: quint8 inputs times qint8 weights, summed in int32.

Where the CPU has AVX-512 VNNI, the compiled loop of ``ember._qgemm_loops`` (built in the background by
``ember._jit``; never at import) multiplies the raw integers, as fbgemm does, and the zero points are accounted for
around it: ``sum_k (a - za)(b - zb) = sum_k a b - za sum_k b - zb (sum_k a - K za)``. The weight's column sums come
with its packed form, the terms without ``sum_k a`` are the accumulators' starting values, and the input's row sums
are taken only when a weight zero point is not zero (symmetric weights have none). ``product`` returns None
elsewhere, and until the loop is ready: the callers then multiply on float BLAS (also exact), so that results never
depend on which path ran.
"""
import numpy as np

from . import _jit, _parallel

# Inputs per output up to which every partial sum (the starting value and the products, each at most K * 255 * 128
# in magnitude, and the row-sum term) stays within int32; longer products take the float path.
K_MAX = 1 << 14
# Multiply-adds from which a product takes the loop (below, float BLAS costs no more than the loop's setup).
MIN_WORK = 1 << 16
# Multiply-adds from which a product splits over two threads (the loop does about 0.5 per ns on one core of a 2-core
# AMD EPYC VM; waking a helper costs 20-40 us).
SPLIT_WORK = 1 << 24
_SIG = "(uint8[:, ::1], int8[:, :, :, ::1], int32[::1], int32[:, ::1], intp, intp, intp, intp)"
_cpu = []


def has_vnni():
    """Whether the CPU multiplies u8 x s8 in 512-bit registers (AVX-512 VNNI), as LLVM sees it."""
    if not _cpu:
        try:
            from llvmlite import binding
            features = binding.get_host_cpu_features()
            _cpu.append(all(features.get(f, False) for f in ("avx512f", "avx512bw", "avx512vnni")))
        except Exception:  # noqa: BLE001 - no llvmlite, or it cannot tell: the float path
            _cpu.append(False)
    return _cpu[0]


class Int8Weight:
    """A qint8 weight's integers ``ints`` (N, K) and zero points (N,) (int64), packed for the loop on first need."""

    __slots__ = ("ints", "zero_points", "_packed")

    def __init__(self, ints, zero_points):
        self.ints = np.ascontiguousarray(ints, np.int8).reshape(ints.shape[0], -1)
        self.zero_points = np.broadcast_to(np.asarray(zero_points, np.int64), (self.ints.shape[0],))
        self._packed = None

    def packed(self):
        """(the weight as ``(panels, groups, NR * 16, 4)`` int8, zero-padded; its column sums ``sum_k b``, int64)."""
        if self._packed is None:
            from ._qgemm_loops import NR  # (only once the loop is ready: numba is imported by then)
            n, k = self.ints.shape
            width = NR * 16
            panels, groups = -(-n // width), -(-k // 4)
            full = np.zeros((panels * width, groups * 4), np.int8)
            full[:n, :k] = self.ints
            b = np.ascontiguousarray(full.reshape(panels, width, groups, 4).transpose(0, 2, 1, 3))
            self._packed = b, self.ints.sum(axis=1, dtype=np.int64)
        return self._packed


class ConvWeight:
    """A convolution's qint8 weight (O, C / groups, *kernel) as one ``Int8Weight`` per group, its columns in the order
    of ``conv``'s windows (kernel offsets, then channels)."""

    __slots__ = ("groups",)

    def __init__(self, ints, zero_points, groups):
        o = ints.shape[0]
        per = o // groups
        w = np.moveaxis(ints, 1, -1).reshape(o, -1)
        zp = np.broadcast_to(np.asarray(zero_points, np.int64), (o,))
        self.groups = [Int8Weight(w[g * per:(g + 1) * per], zp[g * per:(g + 1) * per]) for g in range(groups)]


def _ready(work):
    """The compiled loop, if it may serve a product of ``work`` multiply-adds (queued for compilation if not ready)."""
    if not has_vnni():
        return None
    return _jit.loop("ember._qgemm_loops", "gemm", _SIG, work, minimum=MIN_WORK, exact=True)


def conv(x, zero_point, weight, kernel, stride, padding, dilation):
    """The exact int32 sums (N, O, *out) (a strided view) of the convolution of uint8 ``x`` (N, C, *L) minus
    ``zero_point`` (padded with it: real zeros) by ``weight`` (a ``ConvWeight``), or None as for ``product``: each
    window of the channels-last padded input is one row of the product."""
    n, c = x.shape[:2]
    groups = weight.groups
    per, og = c // len(groups), groups[0].ints.shape[0]
    out = [(s + 2 * p - d * (k - 1) - 1) // st + 1 for s, p, d, k, st in zip(x.shape[2:], padding, dilation, kernel,
                                                                              stride)]
    rows = n * int(np.prod(out))
    if groups[0].ints.shape[1] > K_MAX or not rows or _ready(rows * og * len(groups) * groups[0].ints.shape[1]) is None:
        return None
    xl = np.full((n,) + tuple(s + 2 * p for s, p in zip(x.shape[2:], padding)) + (c,), zero_point, np.uint8)
    xl[(slice(None),) + tuple(slice(p, p + s) for s, p in zip(x.shape[2:], padding))] = np.moveaxis(x, 1, -1)
    st = xl.strides
    windows = np.lib.stride_tricks.as_strided(
        xl, (n, *out, *kernel, c), (st[0], *[s * t for s, t in zip(stride, st[1:-1])],
                                    *[d * t for d, t in zip(dilation, st[1:-1])], st[-1]), writeable=False)
    result = None if len(groups) == 1 else np.empty((n, *out, og * len(groups)), np.int32)
    for g, w in enumerate(groups):
        cols = np.ascontiguousarray(windows[..., g * per:(g + 1) * per]).reshape(rows, -1)
        acc = product(cols, zero_point, w)
        if acc is None:
            return None
        if result is None:
            result = acc.reshape(n, *out, og)
        else:
            result[..., g * og:(g + 1) * og] = acc.reshape(n, *out, og)
    return np.moveaxis(result, -1, 1)


def product(x, zero_point, weight):
    """The exact int32 sums ``(x - zero_point) @ (w - w_zero_points).T`` of uint8 ``x`` (M, K) by ``weight`` (an
    ``Int8Weight``), or None when the compiled loop cannot serve (no VNNI, K too long, too little work, not yet
    compiled: queued then)."""
    m, k = x.shape
    n = weight.ints.shape[0]
    fn = None if k > K_MAX or not m or not n else _ready(m * n * k)
    if fn is None:
        return None
    from ._qgemm_loops import MR
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
    c = np.empty((m, panels * width), np.int32)
    if m * n * k < SPLIT_WORK:
        fn(a, b, init, c, 0, m, 0, panels)
    elif m > MR:  # rows over the threads, in whole tiles
        _parallel.halves(lambda lo, hi: fn(a, b, init, c, lo * MR, min(hi * MR, m), 0, panels), -(-m // MR))
    else:
        _parallel.halves(lambda lo, hi: fn(a, b, init, c, 0, m, lo, hi), panels)
    if zb.any():
        c[:, :n] -= a.sum(axis=1, dtype=np.int32)[:, None] * zb.astype(np.int32)
    return c[:, :n] if panels * width != n else c
