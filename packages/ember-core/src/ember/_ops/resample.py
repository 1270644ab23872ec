"""Resampling over the spatial dims of an (N, C, *spatial) input, what ``nn.functional.interpolate`` computes:
nearest, nearest-exact, linear (1 to 3 dims), cubic, and the antialiased linear, cubic and Lanczos-3 filters.

Every mode is separable: along each spatial dim the output is a fixed sparse linear map of the input, held as taps
(K rows of input indices and weights, one column per output position). The coordinates and weights follow PyTorch's
CPU kernels: computed in float32 for float32 and half inputs and in float64 for float64 ones, the weights of half
inputs rounded to the half type as PyTorch stores them. The map is applied one dim at a time: the input is gathered
K times along the dim (blocks of the following dims move whole) and the weighted gathers summed; along a short last
dim a product with the dense map is faster than gathers. A channels-last input is computed in its memory order and
gives a channels-last result, as in PyTorch. The gradient is the transposed map applied the same way
(``_upsample_backward``), whose own gradient is ``_upsample`` again.
"""
import functools
import math

import numpy as np

from .. import _dtype as D
from .._halfcast import narrow, widen
from .._parallel import pool
from .._registry import op
from .activation import bound, grads, tname

_HALF = (np.dtype(np.float16), D.bfloat16.np)
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
# The filters' support in input pixels (the antialiased ones widen it by the shrink factor)
_WIDTH = {"linear": 2, "cubic": 4, "lanczos": 6}
_MODES = ("nearest", "nearest-exact") + tuple(_WIDTH)
# PyTorch's cubic convolution constants: -0.75 (as OpenCV) plain, -0.5 (as Pillow) antialiased
_CUBIC, _CUBIC_AA = -0.75, -0.5
# Inputs a block of the banded products along the last dim reads, about (a map of at most this many inputs is one
# block): wider bands multiply more zeros, narrower ones make more, smaller products
_BAND = 64
# Elements from which the work is split over two threads (halves of the leading dim; NumPy releases the GIL)
_SPLIT_MIN = 1 << 20


# ---- the maps: taps of one dim ------------------------------------------------------------------------
class _Taps:
    """The map from ``size_in`` to ``size_out`` positions along a dim: ``index`` (K, size_out) input positions and
    ``weight`` (K, size_out), None for a plain gather; ``identity`` when it copies."""

    def __init__(self, index, weight, size_in):
        self.index, self.weight, self.size_in = index, weight, size_in
        self.size_out = index.shape[1]
        self.identity = self.size_in == self.size_out and bool((index[0] == np.arange(self.size_out)).all()) and (
            weight is None or bool((weight[0] == 1).all() and not weight[1:].any()))

    @functools.lru_cache(maxsize=4)  # noqa: B019  (the maps are cached for good themselves)
    def bands(self, dtype):
        """The map as dense blocks of outputs: ((first input, end, first output, end), transposed block) each; one
        block when the map is short, else blocks of outputs reading about ``_BAND`` inputs."""
        width = self.index.shape[0]  # (inputs per output, at most)
        step = self.size_out if self.size_in <= _BAND else max(8, (_BAND - width) * self.size_out // self.size_in)
        weight = np.ones(self.index.shape) if self.weight is None else self.weight
        out = []
        for j0 in range(0, self.size_out, step):  # (a loop over blocks of the dim)
            j1 = min(j0 + step, self.size_out)
            index, w = self.index[:, j0:j1], weight[:, j0:j1]
            used = index[w != 0]
            i0, i1 = (int(used.min()), int(used.max()) + 1) if used.size else (0, 1)
            block = np.zeros((i1 - i0, j1 - j0), np.float64)
            np.add.at(block, (np.clip(index - i0, 0, i1 - i0 - 1), np.arange(j1 - j0)), np.where(w != 0, w, 0))
            out.append(((i0, i1, j0, j1), block.astype(dtype)))
        return out

    @functools.cached_property
    def transposed(self):
        """The transposed map (each input position's outputs and weights; duplicate pairs summed, zeros dropped)."""
        weight = np.ones(self.index.shape) if self.weight is None else self.weight
        out = np.broadcast_to(np.arange(self.size_out), self.index.shape)
        keep = weight != 0
        key = self.index[keep] * self.size_out + out[keep]
        key, where = np.unique(key, return_inverse=True)
        value = np.bincount(where, weight[keep].astype(np.float64))
        rows, cols = key // self.size_out, key % self.size_out
        counts = np.bincount(rows, minlength=self.size_in)
        k = max(int(counts.max(initial=0)), 1)
        slot = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
        index, w = np.zeros((k, self.size_in), np.intp), np.zeros((k, self.size_in), np.float64)
        index[slot, rows], w[slot, rows] = cols, value
        return _Taps(index, w, self.size_out)


def _scale(size_in, size_out, align_corners, scale, dt):
    """Input pixels per output pixel (in the computation dtype ``dt``): from the corner centres when aligned, else
    the given scale factor's inverse, else the size ratio."""
    if align_corners:
        return dt.type(size_in - 1) / dt.type(size_out - 1) if size_out > 1 else dt.type(0)
    if scale is not None and scale > 0:
        return dt.type(1.0 / scale)
    return dt.type(size_in) / dt.type(size_out)


def _source(s, size_out, align_corners, clamp, dt):
    """The input coordinate of each output position (pixel centres unless aligned; negatives clamped to 0)."""
    i = np.arange(size_out, dtype=dt)
    if align_corners:
        return s * i
    src = s * (i + dt.type(0.5)) - dt.type(0.5)
    return np.maximum(src, 0) if clamp else src


def _floor(src):
    """PyTorch floors coordinates as float32 (``floorf``), whatever their dtype."""
    return np.floor(src.astype(np.float32)).astype(np.intp)


def _cubic1(x, a):
    return ((a + 2) * x - (a + 3)) * x * x + 1


def _cubic2(x, a):
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a


def _identity(size):
    return _Taps(np.arange(size)[None], None, size)


def _nearest(size_in, size_out, scale, exact, legacy, dt):
    if legacy:  # PyTorch's 2-d kernel: equal sizes copy, doubling repeats, else a float32 scale
        if size_out in (size_in, 2 * size_in):
            return _Taps((np.arange(size_out) * size_in // size_out)[None], None, size_in)
        dt = _F32
    s = _scale(size_in, size_out, False, scale, dt)
    if exact:  # rounds the pixel-centre coordinate (adding the half in float64, as PyTorch)
        src = (_source(s, size_out, False, True, dt).astype(np.float64) + 0.5)
    else:
        src = s * np.arange(size_out, dtype=dt)
    return _Taps(np.minimum(_floor(src), size_in - 1)[None], None, size_in)


def _linear(size_in, size_out, align_corners, scale, dt, wdt):
    i = np.arange(size_out)
    if size_in == size_out:  # PyTorch copies, whatever the scale factor says
        return _Taps(np.stack([i, i]), np.stack([np.ones(size_out), np.zeros(size_out)]).astype(dt), size_in)
    src = _source(_scale(size_in, size_out, align_corners, scale, dt), size_out, align_corners, True, dt)
    i0 = np.minimum(_floor(src), size_in - 1)
    w1 = np.clip(src - i0.astype(dt), 0, 1).astype(wdt)
    w0 = (1 - w1.astype(dt)).astype(wdt)
    return _Taps(np.stack([i0, i0 + (i0 < size_in - 1)]), np.stack([w0, w1]).astype(dt), size_in)


def _cubic(size_in, size_out, align_corners, scale, dt, wdt):
    src = _source(_scale(size_in, size_out, align_corners, scale, dt), size_out, align_corners, False, dt)
    i0 = np.minimum(_floor(src), size_in - 1)
    t = np.clip(src - i0.astype(dt), 0, 1)
    w = np.stack([_cubic2(t + 1, _CUBIC), _cubic1(t, _CUBIC), _cubic1(1 - t, _CUBIC), _cubic2(2 - t, _CUBIC)])
    index = np.clip(i0 + np.arange(-1, 3)[:, None], 0, size_in - 1)
    return _Taps(index, w.astype(wdt).astype(dt), size_in)


def _filter(mode, x):
    """The antialiasing filter at offsets ``x`` (in output pixels)."""
    x = np.abs(x)
    if mode == "linear":
        return np.where(x < 1, 1 - x, 0)
    if mode == "cubic":
        return np.where(x < 1, _cubic1(x, _CUBIC_AA), np.where(x < 2, _cubic2(x, _CUBIC_AA), 0))
    with np.errstate(all="ignore"):  # Lanczos-3: sinc(x) sinc(x / 3), 1 at 0
        px = np.pi * x
        v = np.where(x == 0, 1, np.sin(px) * np.sin(px / 3) * 3 / (px * px))
    return np.where(x < 3, v, 0).astype(x.dtype)


def _antialiased(mode, size_in, size_out, align_corners, scale, dt):
    """Each output averages the inputs under the filter stretched by the shrink factor, weights normalised."""
    s = _scale(size_in, size_out, align_corners, scale, dt)
    s64 = float(s)
    support = dt.type(_WIDTH[mode] * 0.5 * (s64 if s64 >= 1 else 1.0))
    k = int(math.ceil(support)) * 2 + 1
    center = (s64 * (np.arange(size_out) + 0.5)).astype(dt)
    invscale = 1.0 / s64 if s64 >= 1 else 1.0
    lo = np.maximum(np.trunc((center - support).astype(np.float64) + 0.5).astype(np.intp), 0)
    hi = np.minimum(np.trunc((center + support).astype(np.float64) + 0.5).astype(np.intp), size_in)
    count = np.clip(hi - lo, 0, k)
    j = np.arange(k)[:, None]
    x = ((((j + lo).astype(dt) - center).astype(np.float64) + 0.5) * dt.type(invscale)).astype(dt)
    w = np.where(j < count, _filter(mode, x), 0).astype(dt)
    total = np.add.reduce(w, axis=0)
    w = np.where(total != 0, w / np.where(total != 0, total, 1), w)
    return _Taps(np.clip(lo + j, 0, size_in - 1), w, size_in)


@functools.lru_cache(maxsize=256)
def _taps(mode, size_in, size_out, align_corners, scale, antialias, n, dt, wdt):
    """The map of one of ``n`` spatial dims."""
    if mode in ("nearest", "nearest-exact"):
        return _nearest(size_in, size_out, scale, mode == "nearest-exact", mode == "nearest" and n == 2, dt)
    if antialias or mode == "lanczos":
        if size_in == size_out:  # (PyTorch skips such a dim)
            return _identity(size_in)
        return _antialiased(mode, size_in, size_out, align_corners, scale, dt)
    if mode == "linear":
        return _linear(size_in, size_out, align_corners, scale, dt, wdt)
    return _cubic(size_in, size_out, align_corners, scale, dt, wdt)


# ---- applying maps ------------------------------------------------------------------------------------
def _take(xp, a, index, axis, out=None):
    if xp is np and out is not None:
        return np.take(a, index, axis=axis, out=out, mode="clip")  # (a clipping take writes unbuffered)
    return xp.take(a, index, axis=axis, out=out)


def _along(xp, a, axis, taps, out=None):
    """``a`` mapped along ``axis`` by ``taps`` (into ``out`` when given)."""
    index = taps.index if xp is np else xp.asarray(taps.index)
    if taps.weight is None:
        return _take(xp, a, index[0], axis, out)
    # along the last dim, products with the dense map's diagonal band beat gathers of single elements (but 0 * inf
    # would spread a non-finite value over the band)
    if axis == a.ndim - 1 and math.isfinite(a.sum()):
        return _banded(xp, a, taps, out)
    k = taps.index.shape[0]
    shape = [1] * a.ndim
    shape[axis] = taps.size_out
    weight = taps.weight.astype(a.dtype).reshape((k,) + tuple(shape))
    if xp is not np:
        weight = xp.asarray(weight)
    out = _take(xp, a, index[0], axis, out)
    out *= weight[0]
    part = xp.empty_like(out)
    for j in range(1, k):  # (a loop over the filter's taps, not over the data)
        part = _take(xp, a, index[j], axis, part)
        part *= weight[j]
        out += part
    return out


def _banded(xp, a, taps, out=None):
    """``a`` mapped along its last dim: for each block of outputs, one product of the inputs it reads with that
    block of the dense map."""
    rows = a.reshape(-1, taps.size_in)
    shape = a.shape[:-1] + (taps.size_out,)
    if out is None:
        out = xp.empty(shape, a.dtype)
    flat = out.reshape(rows.shape[0], taps.size_out)  # (``out`` is contiguous: a view)
    for (i0, i1, j0, j1), m in taps.bands(a.dtype):  # (a loop over blocks of the dim)
        xp.matmul(rows[:, i0:i1], m if xp is np else xp.asarray(m), out=flat[:, j0:j1])
    return out


def _apply(xp, x, maps, axes, out=None):
    """``x`` mapped along each of ``axes`` (the dims that shrink most first: less work for the others); the last
    map writes into ``out`` when given."""
    order = [d for d in sorted(range(len(maps)), key=lambda d: maps[d].size_out / maps[d].size_in)
             if not maps[d].identity]
    with np.errstate(all="ignore"):  # (NaN and inf inputs give NaN and inf where PyTorch's do, silently)
        for i, d in enumerate(order):
            x = _along(xp, x, axes[d], maps[d], out if i == len(order) - 1 else None)
    return x


def _channels_last(a, n):
    """Whether ``a`` (N, C, *spatial) lies in memory as (N, *spatial, C) (C with more than one element)."""
    if a.shape[1] < 2 or a.flags.c_contiguous:
        return False
    return a.transpose((0,) + tuple(range(2, n + 2)) + (1,)).flags.c_contiguous


def _resample(xp, a, maps):
    """``a`` (N, C, *spatial) through one map per spatial dim, computed in its memory order (channels-last stays
    so) and in float32 for half types."""
    n = len(maps)
    if all(m.identity for m in maps):
        return a.copy(order="K")
    last = _channels_last(a, n)
    perm = (0,) + tuple(range(2, n + 2)) + (1,) if last else tuple(range(n + 2))
    x = a.transpose(perm)
    axes = tuple(range(1, n + 1)) if last else tuple(range(2, n + 2))
    r = _split(xp, widen(x) if x.dtype in _HALF else x, maps, axes)
    return (narrow(r, a.dtype) if a.dtype in _HALF else r).transpose(tuple(np.argsort(perm)))


def _split(xp, x, maps, axes):
    """``_apply``, on large host inputs in two halves of the batch (or channels) computed at once, each writing
    its part of the result."""
    shape = list(x.shape)
    for d, m in zip(axes, maps):
        shape[d] = m.size_out
    a = 0 if x.shape[0] > 1 else (1 if axes[0] > 1 else None)
    if xp is not np or max(x.size, math.prod(shape)) < _SPLIT_MIN or a is None or x.shape[a] < 2:
        return _apply(xp, x, maps, axes)
    out = np.empty(shape, x.dtype)
    h = x.shape[a] // 2
    first = (slice(None),) * a + (slice(None, h),)
    second = (slice(None),) * a + (slice(h, None),)
    job = pool().submit(_apply, xp, x[second], maps, axes, out[second])
    _apply(xp, x[first], maps, axes, out[first])
    job.result()
    return out


# ---- the ops --------------------------------------------------------------------------------------------
_LABELS = ("D", "H", "W")


def _check(name, input, spatial_in, spatial_out, mode, antialias):
    """PyTorch's checks of the primitive: mode, rank, positive sizes, a non-empty tensor, the dtype."""
    if mode not in _MODES:
        raise ValueError(f"{name}: unknown mode '{mode}' (expected one of {', '.join(_MODES)})")
    n = len(spatial_out)
    if not 1 <= n <= 3 or len(spatial_in) != n or input.ndim != n + 2:
        raise RuntimeError(f"It is expected input_size equals to {n + 2}, but got size {input.ndim}")
    if min(spatial_in) <= 0 or min(spatial_out) <= 0:
        labels = _LABELS[3 - n:]
        sizes = lambda s: ", ".join(f"{lab}: {v}" for lab, v in zip(labels, s))  # noqa: E731
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({sizes(spatial_in)})"
                           f"{' and' if n == 1 else ''} output ({sizes(spatial_out)})")
    if input.size == 0 and math.prod(input.shape[1:]) == 0:
        raise RuntimeError(f"Non-empty {n + 2}D data tensor expected but got a tensor with sizes {list(input.shape)}")
    gather = mode in ("nearest", "nearest-exact")
    if input.dtype.kind == "f" or input.dtype == D.bfloat16.np:
        if (antialias or mode == "lanczos") and input.dtype in _HALF:  # (as PyTorch on the CPU)
            raise NotImplementedError(f"\"compute_index_ranges_weights\" not implemented for '{tname(input)}'")
        return
    if gather and input.dtype == np.uint8:
        return
    kernel = f"upsample_{mode.replace('-', '_')}{n}d" if gather else "compute_indices_weights_" + mode
    raise NotImplementedError(f"\"{kernel}\" not implemented for '{tname(input)}'")


def _maps(mode, spatial_in, spatial_out, align_corners, scales, antialias, dtype, rounded=True):
    """One map per spatial dim, computed in PyTorch's precision for ``dtype`` (``rounded``: with the weights of half
    types rounded to them, as PyTorch's forward kernels store them)."""
    dt = _F64 if dtype == _F64 else _F32
    wdt = dtype if dtype in _HALF and rounded else dt
    scales = (None,) * len(spatial_out) if scales is None else tuple(scales)
    if len(scales) != len(spatial_out):
        raise RuntimeError(f"expected {len(spatial_out)} scale factors, got {len(scales)}")
    return [_taps(mode, int(i), int(o), bool(align_corners), None if s is None else float(s), bool(antialias),
                  len(scales), dt, wdt) for i, o, s in zip(spatial_in, spatial_out, scales)]


@op("_upsample", method=False, function=False)
def _upsample(xp, input, output_size, mode, align_corners=False, scales=None, antialias=False):
    """``input`` (N, C, *spatial, 1 to 3 spatial dims) resampled to ``output_size``: ``mode`` nearest, nearest-exact,
    linear, cubic or lanczos (antialiased only); ``scales`` (one per dim, or None) set the coordinate mapping in place
    of the size ratio, ``align_corners`` maps the corner pixels' centres onto each other, ``antialias`` widens the
    linear and cubic filters when shrinking."""
    spatial_in, spatial_out = input.shape[2:], tuple(int(o) for o in output_size)
    _check("_upsample", input, spatial_in, spatial_out, mode, antialias)
    return _resample(xp, input, _maps(mode, spatial_in, spatial_out, align_corners, scales, antialias, input.dtype))


@op("_upsample_backward", method=False, function=False)
def _upsample_backward(xp, grad, input_size, mode, align_corners=False, scales=None, antialias=False):
    """The gradient of ``_upsample`` for an input of spatial size ``input_size`` from its output's gradient
    ``grad``: the transposed maps."""
    spatial_in, spatial_out = tuple(int(i) for i in input_size), grad.shape[2:]
    _check("_upsample_backward", grad, spatial_in, spatial_out, mode, antialias)
    maps = _maps(mode, spatial_in, spatial_out, align_corners, scales, antialias, grad.dtype, rounded=False)
    return _resample(xp, grad, [m.transposed for m in maps])


@_upsample.vjp
def _(ctx, g):
    a = bound(ctx, _upsample)
    x = a["input"]
    return grads(ctx, _upsample, input=_upsample_backward(g, tuple(x.shape[2:]), a["mode"], a["align_corners"],
                                                          a["scales"], a["antialias"]))


@_upsample_backward.vjp
def _(ctx, gg):
    a = bound(ctx, _upsample_backward)
    return grads(ctx, _upsample_backward, grad=_upsample(gg, tuple(a["grad"].shape[2:]), a["mode"], a["align_corners"],
                                                         a["scales"], a["antialias"]))
