"""Pooling over 1 to 3 spatial dims: max (with PyTorch's flat indices), average, adaptive average and
adaptive max, max-unpooling.

Max pooling copies every window (a strided view when the windows are evenly spaced inside the input, else
one index grid per dim) and takes the argmax over it (on CuPy, one fused kernel scans each window); average
pooling is a convolution by a kernel of ones (im2col and one product) divided by the window sizes; adaptive
average pooling multiplies each spatial dim by a small averaging matrix. Gradients: a scatter-add of the
output gradient to the argmax positions (in a backward that records no graph, one ``np.add.at`` on the arrays,
with the argmax found again from the pooled values on the views path; else ember ops, a plain scatter when the
windows are disjoint); a transposed convolution by ones; the transposed averaging matrices."""
import functools
import math

import numpy as np

from .. import _backend, _kernels
from .. import _dtype as D
from .._registry import op
from .._tensor import Tensor
from .activation import bound, grads, tname, up
from .arithmetic import no_graph
from .conv import _conv, convolution
from .conv import _tuple as _conv_tuple


def _tuple(v, n, name, default=None):
    """``v`` as ``n`` ints (``default`` when None or empty), with pooling's error for the wrong length."""
    if v is None or (not isinstance(v, int) and len(v) == 0):
        v = default
    return _conv_tuple(v, n, name, f"{name} must either be a single int, or a tuple of {n} ints")


def _batched(name, x, n):
    """``x`` with a batch dim (unbatched inputs get one) and whether it had none; PyTorch's shape errors."""
    if x.ndim not in (n + 1, n + 2) or 0 in x.shape[x.ndim - n - 1:]:
        raise RuntimeError(f"{name}: Expected {n + 1}D or {n + 2}D (batch mode) tensor with optional 0 dim batch "
                           f"size for input, but got: {list(x.shape)}")
    return (x[None], True) if x.ndim == n + 1 else (x, False)


def _out_size(name, L, k, s, p, d, ceil_mode):
    """Output length of a pooling window sweep (PyTorch's rule: a last window must start inside the input)."""
    span = L + 2 * p - d * (k - 1) - 1
    o = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= L + p:
        o -= 1
    return o


def _window_params(name, x, n, kernel_size, stride, padding, dilation, ceil_mode, avg=False):
    k = _tuple(kernel_size, n, "kernel_size")
    s = _tuple(stride, n, "stride", default=k)
    p, d = _tuple(padding, n, "padding"), _tuple(dilation, n, "dilation")
    if min(k) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_size={list(k)}")
    if min(s) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got stride={list(s)}")
    if min(d) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilation={list(d)}")
    for pi, ki, di in zip(p, k, d):
        if pi < 0 or pi > (di * (ki - 1) + 1) // 2:
            what = "kernel size" if avg else "effective kernel size"
            raise RuntimeError(f"pad should be at most half of {what}, but got pad={pi}, kernel_size={ki} and "
                               f"dilation={di}")
    xb, unbatched = _batched(name, x, n)
    out = [_out_size(name, L, *a, ceil_mode) for L, *a in zip(xb.shape[2:], k, s, p, d)]
    if min(out) < 1:
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, xb.shape[1:]))}). Calculated output size: "
                           f"({'x'.join(map(str, [xb.shape[1]] + out))}). Output size is too small")
    return xb, unbatched, k, s, p, d, out


def _affine(g, L):
    """(stride, dilation) when the grid ``g`` is ``start + o * stride + j * dilation`` inside [0, L), else None."""
    if not g.size or g.min() < 0 or g.max() >= L:
        return None
    s = int(g[1, 0] - g[0, 0]) if g.shape[0] > 1 else 0
    d = int(g[0, 1] - g[0, 0]) if g.shape[1] > 1 else 0
    o, j = np.ogrid[:g.shape[0], :g.shape[1]]
    return (s, d) if (g == g[0, 0] + o * s + j * d).all() else None


def _gather(xp, x, starts, fill):
    """Windows of batched ``x``: ``starts[d]`` is an (out_d, k_d) grid of input positions along dim ``d``
    (outside the input: ``fill``). Returns (windows (N, C, *out, prod k), flat input positions (*out, prod k))."""
    n = len(starts)
    out = [g.shape[0] for g in starts]
    k = math.prod(g.shape[1] for g in starts)
    flat = 0
    for d, (grid, L) in enumerate(zip(starts, x.shape[2:])):
        shape = [1] * (2 * n)
        shape[d], shape[n + d] = grid.shape
        flat = flat * L + np.clip(grid, 0, L - 1).reshape(shape)
    flat = np.broadcast_to(flat, tuple(out) + tuple(g.shape[1] for g in starts)).reshape(tuple(out) + (k,))
    steps = [_affine(g, L) for g, L in zip(starts, x.shape[2:])]
    if None not in steps:  # evenly spaced windows wholly inside the input: one strided view, copied once
        st = x.strides[2:]
        view = xp.lib.stride_tricks.as_strided(
            x[(slice(None),) * 2 + tuple(slice(int(g[0, 0]), None) for g in starts)],
            x.shape[:2] + tuple(out) + tuple(g.shape[1] for g in starts),
            x.strides[:2] + tuple(s * t for (s, _), t in zip(steps, st)) + tuple(d * t for (_, d), t in zip(steps, st)))
        return xp.ascontiguousarray(view).reshape(x.shape[:2] + tuple(out) + (k,)), flat
    xp_ = xp.pad(x, [(0, 0), (0, 0)] + [(1, 0)] * n, constant_values=fill)
    idx = []
    for d, (grid, L) in enumerate(zip(starts, x.shape[2:])):
        valid = (grid >= 0) & (grid < L)
        shape = [1] * (2 * n)
        shape[d], shape[n + d] = grid.shape
        idx.append(xp.asarray(np.where(valid, grid + 1, 0).reshape(shape)))
    win = xp_[(slice(None), slice(None)) + tuple(idx)]
    return win.reshape(x.shape[:2] + tuple(out) + (k,)), flat


def _lowest(dt):
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min


def _max_input(x, kernel_name):
    """``x`` upcast for max pooling; PyTorch's NotImplementedError for bool and complex."""
    if x.dtype.kind == "b" or x.dtype.kind == "c":
        raise NotImplementedError(f"\"{kernel_name}\" not implemented for '{tname(x)}'")
    return up(x)


def _max_windows(xp, x, starts, kernel_name):
    """(values, flat indices) of the maximum of each window; NaN wins (the last NaN, as PyTorch's scan that
    takes ``v > best || isnan(v)``), other ties go to the first."""
    a = _max_input(x, kernel_name)
    win, flat = _gather(xp, a, starts, _lowest(a.dtype))
    am = win.argmax(-1)  # (NumPy's and CuPy's argmax pick the first NaN)
    k = flat.shape[-1]
    if win.dtype.kind == "f":
        nan = xp.isnan(win)
        if nan.any():
            am = xp.where(nan.any(-1), k - 1 - nan[..., ::-1].argmax(-1), am)
    values = win.reshape(-1)[xp.arange(0, win.size, k).reshape(am.shape) + am].astype(x.dtype, copy=False)
    idx = xp.asarray(flat).reshape(-1)[xp.arange(0, flat.size, k).reshape(flat.shape[:-1]) + am]
    return values, idx.astype(np.int64, copy=False)


def _pool_grids(k, s, p, d, out):
    return [np.arange(o)[:, None] * si - pi + np.arange(ki)[None] * di for ki, si, pi, di, o in zip(k, s, p, d, out)]


# max pooling with indices on CuPy: one thread per output element scans its window (up to 3 spatial dims, the
# missing ones of size 1); the last NaN wins, other ties and all -inf windows go to the first element inside the input
_MAX_POOL_CODE = r"""
template <typename T>
__device__ void max_pool(const T* x, T* y, long long* idx, long long total, const long long* in,
                         const long long* out, const long long* ker, const long long* st, const long long* pad,
                         const long long* dil) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)blockDim.x * gridDim.x) {
    long long r = i;
    long long o2 = r % out[2]; r /= out[2];
    long long o1 = r % out[1]; r /= out[1];
    long long o0 = r % out[0]; r /= out[0];
    const T* plane = x + r * in[0] * in[1] * in[2];
    T best = 0;
    long long at = -1;
    for (long long k0 = 0; k0 < ker[0]; ++k0) {
      long long p0 = o0 * st[0] - pad[0] + k0 * dil[0];
      if (p0 < 0 || p0 >= in[0]) continue;
      for (long long k1 = 0; k1 < ker[1]; ++k1) {
        long long p1 = o1 * st[1] - pad[1] + k1 * dil[1];
        if (p1 < 0 || p1 >= in[1]) continue;
        for (long long k2 = 0; k2 < ker[2]; ++k2) {
          long long p2 = o2 * st[2] - pad[2] + k2 * dil[2];
          if (p2 < 0 || p2 >= in[2]) continue;
          long long j = (p0 * in[1] + p1) * in[2] + p2;
          T v = plane[j];
          if (at < 0 || v > best || v != v) {  // a NaN always takes over: the last NaN wins, as PyTorch's
            best = v;
            at = j;
          }
        }
      }
    }
    y[i] = best;
    idx[i] = at;
  }
}

extern "C" __global__ void ember_max_pool_float(const float* x, float* y, long long* idx, long long total,
    const long long* in, const long long* out, const long long* ker, const long long* st, const long long* pad,
    const long long* dil) {
  max_pool<float>(x, y, idx, total, in, out, ker, st, pad, dil);
}

extern "C" __global__ void ember_max_pool_double(const double* x, double* y, long long* idx, long long total,
    const long long* in, const long long* out, const long long* ker, const long long* st, const long long* pad,
    const long long* dil) {
  max_pool<double>(x, y, idx, total, in, out, ker, st, pad, dil);
}
"""
_MAX_POOL = {t: _kernels.raw_kernel(f"ember_max_pool_{t}", _MAX_POOL_CODE) for t in ("float", "double")}


def _max_pool_cupy(xp, x, k, s, p, d, out):
    """(values, int64 flat indices) of max pooling a batched float CuPy array, by the fused kernel."""
    n = len(k)
    a = up(x)
    y = xp.empty(x.shape[:2] + tuple(out), a.dtype)
    idx = xp.empty(y.shape, np.int64)
    arg = lambda v, f=1: xp.asarray(tuple(v) + (f,) * (3 - n), dtype=np.int64)  # noqa: E731  (padded to 3 dims)
    if y.size:
        _MAX_POOL["float" if a.dtype == np.float32 else "double"](
            (min((y.size + 255) // 256, 65535),), (256,),
            (xp.ascontiguousarray(a), y, idx, np.int64(y.size), arg(x.shape[2:]), arg(out), arg(k), arg(s),
             arg(p, 0), arg(d)))
    return y.astype(x.dtype, copy=False), idx


@functools.lru_cache(maxsize=256)
def _view_offsets(shape, k, s, d, out):
    """Flat in-plane offset of each window element (row-major window order) and of each window's first element."""
    plane = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    off = [sum(j * di * t for j, di, t in zip(js, d, plane)) for js in np.ndindex(*k)]
    base = sum(np.arange(o).reshape((-1,) + (1,) * (len(out) - i - 1)) * si * t
               for i, (o, si, t) in enumerate(zip(out, s, plane)))
    return np.asarray(off, np.int64), np.asarray(base, np.int64)


def _pick(m, lead, start, step, count):
    """Positions ``start, start + step, ...`` (``count`` of them) along dim ``lead`` of contiguous ``m``, as a new
    contiguous array: one strided copy whose items are whole runs of the later dims, not a loop per short row."""
    outer, L, B = math.prod(m.shape[:lead]), m.shape[lead], math.prod(m.shape[lead + 1:])
    rows = m.reshape(outer, L * B)
    items = rows.view(np.dtype((np.void, B * m.itemsize))) if B > 1 else rows
    return items[:, start:start + (count - 1) * step + 1:step].copy().view(m.dtype).reshape(
        m.shape[:lead] + (count,) + m.shape[lead + 1:])


def _views(a, k, s, d, out):
    """The strided views of batched ``a`` holding each window element (row-major window order) of every window."""
    return [a[(Ellipsis,) + tuple(slice(j * di, j * di + (o - 1) * si + 1, si) for j, di, si, o in zip(js, d, s, out))]
            for js in np.ndindex(*k)]


def _first_max(views, m):
    """Position in its window (uint8) of PyTorch's element for each maximum ``m``: the first view equal to it (the
    count of misses before it), or the last NaN."""
    miss = views[0] < m  # (never in a NaN window: those are settled below)
    first = miss.astype(np.uint8)
    for v in views[1:-1]:
        miss &= v < m
        first += miss
    if m.dtype.kind == "f" and np.isnan(m).any():
        for j, v in enumerate(views):
            np.copyto(first, j, where=v != v)
    return first


def _view_indices(views, m, shape, k, s, d, out):
    """PyTorch's flat in-plane index (planes of ``shape``) of each window's maximum ``m`` among the ``views``."""
    off, base = _view_offsets(shape, k, s, d, tuple(out))
    idx = off.take(_first_max(views, m))
    idx += base
    return idx


def _max_views(x, k, s, d, out, indices, kernel_name):
    """Max pooling on NumPy when every window lies inside the input: elementwise maxima (NaN propagates), and, if
    asked, PyTorch's flat index of the maximum. Several times faster than copying the windows for an argmax.
    The maximum is taken one spatial dim at a time (a window's maximum is the maximum of its rows'), of the
    window elements along it: picked by ``_pick`` along all but the last dim, strided views along the last."""
    a = _max_input(x, kernel_name)
    n, m = len(k), np.ascontiguousarray(a)
    for i in range(n - 1):
        views = [_pick(m, m.ndim - n + i, j * d[i], s[i], out[i]) for j in range(k[i])]
        m = views[0]
        for v in views[1:]:
            np.maximum(m, v, out=m)
    views = [m[..., j * d[-1]:j * d[-1] + (out[-1] - 1) * s[-1] + 1:s[-1]] for j in range(k[-1])]
    m = np.maximum(views[0], views[1]) if len(views) > 1 else np.array(views[0])
    for v in views[2:]:
        np.maximum(m, v, out=m)
    idx = _view_indices(_views(a, k, s, d, out), m, x.shape[2:], k, s, d, out) if indices else None
    return m.astype(x.dtype, copy=False), idx


def _views_fit(xp, x, k, p, s, d, out):
    """Whether max pooling takes the strided views path: NumPy, no padding, every window (of at most 16 elements)
    inside the input."""
    return xp is np and math.prod(k) <= 16 and not any(p) and all(
        (o - 1) * si + (ki - 1) * di < L for L, o, ki, si, di in zip(x.shape[2:], out, k, s, d))


def _max_pool(xp, name, n, input, kernel_size, stride, padding, dilation, ceil_mode, indices=True):
    x, unbatched, k, s, p, d, out = _window_params(name, input, n, kernel_size, stride, padding, dilation, ceil_mode)
    if xp is not np and (x.dtype.kind == "f" or x.dtype == D.bfloat16.np):
        v, i = _max_pool_cupy(xp, x, k, s, p, d, out)
    elif _views_fit(xp, x, k, p, s, d, out):
        v, i = _max_views(x, k, s, d, out, indices, f"max_pool{n}d")
    else:
        v, i = _max_windows(xp, x, _pool_grids(k, s, p, d, out), f"max_pool{n}d")
    return (v[0], None if i is None else i[0]) if unbatched else (v, i)


def _scatter_max_grad(x, g, idx, n, disjoint=False):
    """Gradient of picking ``x``'s elements at flat per-plane indices ``idx``: ``g`` added there (written
    there when the windows are ``disjoint``: no index repeats, and a plain scatter is several times faster)."""
    lead = tuple(x.shape[:x.dim() - n])
    k = math.prod(g.shape[g.dim() - n:])
    z = g.new_zeros(lead + (math.prod(x.shape[x.dim() - n:]),))
    scatter = z.scatter if disjoint else z.scatter_add
    return scatter(-1, idx.reshape(lead + (k,)), g.reshape(lead + (k,))).reshape(x.shape)


def _scatter_max_array(x, g, idx, n):
    """``_scatter_max_grad`` on NumPy arrays, for a backward that records no graph: one ``np.add.at``, which adds
    in the outputs' order as PyTorch does, in ``g``'s compute dtype, rounded."""
    lead = x.shape[:x.ndim - n]
    plane, k = math.prod(x.shape[x.ndim - n:]), math.prod(g.shape[g.ndim - n:])
    gc = up(g)
    flat = idx.reshape(lead + (k,)) + np.arange(0, math.prod(lead) * plane, plane).reshape(lead + (1,))
    gx = np.zeros(x.shape, gc.dtype)
    np.add.at(gx.reshape(-1), flat.reshape(-1), gc.reshape(-1))
    return Tensor._wrap(gx.astype(g.dtype, copy=False))


def _on_arrays(x, g):
    """Whether a max pooling VJP computes on the arrays: NumPy, and no graph to record."""
    return no_graph(x, g) and _backend.is_host(x._data)


def _max_grad(x, g, idx, n, disjoint=False):
    """``_scatter_max_grad`` of the tensor ``idx``, on the arrays when ``_on_arrays``."""
    return _scatter_max_array(x._data, g._data, idx._data, n) if _on_arrays(x, g) else \
        _scatter_max_grad(x, g, idx, n, disjoint)


def _disjoint(a, n):
    """Whether the windows of a max pooling call (bound arguments ``a``) never share an input element."""
    k = _tuple(a["kernel_size"], n, "kernel_size")
    s, d = _tuple(a["stride"], n, "stride", default=k), _tuple(a["dilation"], n, "dilation")
    return all(si >= di * (ki - 1) + 1 for ki, si, di in zip(k, s, d))


def _max_pool_ops(n):
    def impl(xp, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        if n == 1 and input.dtype.kind in "iu":  # PyTorch's 1-d kernel without indices is float-only
            raise NotImplementedError(f"\"max_pool1d_impl\" not implemented for '{tname(input)}'")
        return _max_pool(xp, f"max_pool{n}d", n, input, kernel_size, stride, padding, dilation, ceil_mode,
                         indices=False)[0]
    impl.__doc__ = f"Maximum over sliding {n}-d windows (strided, padded with -inf, dilated)."
    plain = op(f"max_pool{n}d", method=False)(impl)

    def impl_i(xp, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        return _max_pool(xp, f"max_pool{n}d", n, input, kernel_size, stride, padding, dilation, ceil_mode)
    impl_i.__doc__ = f"``max_pool{n}d`` values with the flat index of each maximum in its input plane."
    indexed = op(f"max_pool{n}d_with_indices", method=False, function=n == 1)(impl_i)

    @plain.vjp
    def _(ctx, g):
        a = bound(ctx, plain)
        x = a["input"]
        if _on_arrays(x, g):
            xb, unbatched, k, s, p, d, out = _window_params(plain.name, x._data, n, a["kernel_size"], a["stride"],
                                                            a["padding"], a["dilation"], a["ceil_mode"])
            if _views_fit(np, xb, k, p, s, d, out):  # the maxima found again from the values
                m = up(ctx.out._data)
                idx = _view_indices(_views(up(xb), k, s, d, out), m[None] if unbatched else m, xb.shape[2:], k, s,
                                    d, out)
            else:
                idx = _max_pool(np, plain.name, n, x._data, a["kernel_size"], a["stride"], a["padding"],
                                a["dilation"], a["ceil_mode"])[1]
            return grads(ctx, plain, input=_scatter_max_array(x._data, g._data, idx, n))
        idx = indexed.fn(*ctx.args, **ctx.kwargs)[1]
        return grads(ctx, plain, input=_scatter_max_grad(x, g, idx, n, _disjoint(a, n)))

    @indexed.vjp
    def _(ctx, g, gi=None):
        a = bound(ctx, indexed)
        return grads(ctx, indexed, input=_max_grad(a["input"], g, ctx.out[1], n, _disjoint(a, n)))
    return plain, indexed


(max_pool1d, max_pool1d_with_indices), (max_pool2d, max_pool2d_with_indices), \
    (max_pool3d, max_pool3d_with_indices) = (_max_pool_ops(n) for n in (1, 2, 3))


# ---- average pooling -----------------------------------------------------------------------------
def _avg_divisors(L, k, s, p, out, count_include_pad):
    """Per-dim window sizes of average pooling (the divisor is their outer product)."""
    start = np.arange(out) * s - p
    end = np.minimum(start + k, L + p)
    if not count_include_pad:
        start, end = np.maximum(start, 0), np.minimum(end, L)
    return end - start


def _avg_setup(name, n, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    x, unbatched, k, s, p, d, out = _window_params(name, input, n, kernel_size, stride, padding, 1, ceil_mode,
                                                   avg=True)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    if divisor_override is not None:
        div = np.full(out, float(divisor_override))
    else:
        div = 1.0
        for i, (L, ki, si, pi, o) in enumerate(zip(x.shape[2:], k, s, p, out)):
            sizes = _avg_divisors(L, ki, si, pi, o, count_include_pad).astype(np.float64)
            div = np.multiply.outer(div, sizes) if i else sizes
    return x, unbatched, k, s, p, out, div


def _avg_pool(xp, n, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    name = f"avg_pool{n}d"
    x, unbatched, k, s, p, out, div = _avg_setup(name, n, input, kernel_size, stride, padding, ceil_mode,
                                                 count_include_pad, divisor_override)
    if x.dtype.kind in "bc" or (n == 3 and x.dtype in (np.float16, D.bfloat16.np)):
        raise NotImplementedError(f"\"{name}_out_frame\" not implemented for '{tname(x)}'")
    a = up(x)
    N, C = a.shape[:2]
    # the windows past the input that ceil_mode adds read zeros, as padding does
    hi = [max(0, (o - 1) * si + ki - (L + 2 * pi)) for o, si, ki, L, pi in zip(out, s, k, a.shape[2:], p)]
    ones = xp.ones((1, 1) + k, a.dtype)
    r = _conv(xp, a.reshape((N * C, 1) + a.shape[2:]), ones, None, s, tuple(zip(p, [pi + h for pi, h in zip(p, hi)])),
              (1,) * n, 1)
    r = r.reshape((N, C) + r.shape[2:])
    if a.dtype.kind == "f":
        r = r / xp.asarray(div, a.dtype)
    else:  # integers: PyTorch divides and truncates towards zero
        q = xp.asarray(div.astype(np.int64))
        r = xp.where(r < 0, -(-r // q), r // q)
    r = r.astype(x.dtype, copy=False)
    return r[0] if unbatched else r


def _avg_pool_vjp(o, n):
    @o.vjp
    def _(ctx, g):
        a = bound(ctx, o)
        x = a["input"]
        xb, unbatched, k, s, p, out, div = _avg_setup(
            o.name, n, x._data, a["kernel_size"], a.get("stride"), a["padding"], a["ceil_mode"],
            a["count_include_pad"], a.get("divisor_override"))
        gb = g.unsqueeze(0) if unbatched else g
        N, C = xb.shape[:2]
        gs = (gb / g.new_tensor(div)).reshape((N * C, 1) + tuple(out))
        extra = [L + 2 * pi - ((oi - 1) * si + ki) for L, pi, oi, si, ki in zip(xb.shape[2:], p, out, s, k)]
        ones = g.new_ones((1, 1) + k)
        gx = convolution.fn(gs, ones, None, list(s), list(p), [1] * n, True, [max(e, 0) for e in extra], 1)
        for i, e in enumerate(extra):
            if e < 0:
                gx = gx.narrow(2 + i, 0, xb.shape[2 + i])
        gx = gx.reshape(x.shape)
        return grads(ctx, o, input=gx)


@op("avg_pool1d", method=False)
def avg_pool1d(xp, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Mean over sliding 1-d windows (zero padding counted unless ``count_include_pad=False``)."""
    return _avg_pool(xp, 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


@op("avg_pool2d", method=False, function=False)
def avg_pool2d(xp, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over sliding 2-d windows; ``divisor_override`` replaces the window size as divisor."""
    return _avg_pool(xp, 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


@op("avg_pool3d", method=False, function=False)
def avg_pool3d(xp, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over sliding 3-d windows; ``divisor_override`` replaces the window size as divisor."""
    return _avg_pool(xp, 3, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


for _n, _o in ((1, avg_pool1d), (2, avg_pool2d), (3, avg_pool3d)):
    _avg_pool_vjp(_o, _n)


# ---- adaptive pooling ----------------------------------------------------------------------------
def _adaptive_bounds(L, o):
    i = np.arange(o)
    return (i * L) // o, -((-(i + 1) * L) // o)


def _adaptive_setup(name, input, n, output_size):
    x, unbatched = _batched(name, input, n)
    sizes = (output_size,) * n if isinstance(output_size, (int, np.integer)) or output_size is None else output_size
    if len(sizes) != n:
        raise RuntimeError(f"{name}: output_size must be {n}")
    out = tuple(int(L if o is None else o) for o, L in zip(sizes, x.shape[2:]))
    if min(out) < 0:
        raise RuntimeError(f"{name}: elements of output_size must be greater than or equal to 0 but received "
                           f"{list(out)}")
    return x, unbatched, out


def _adaptive_dtype(name, x, out):
    """PyTorch's refusal of integer and bool inputs (except an empty input to 1-d and 2-d average pooling; an
    output of ones is a mean)."""
    if x.dtype.kind in "fV" or (not x.size and "avg" in name and x.ndim <= 4):
        return
    if all(o == 1 for o in out) and "avg" in name:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating point or "
                           f"complex dtype. Got: {tname(x)}")
    raise NotImplementedError(f"\"{name}\" not implemented for '{tname(x)}'")


def _averaging(L, o):
    """The (o, L) matrix averaging each adaptive window."""
    start, end = _adaptive_bounds(L, o)
    pos = np.arange(L)
    inside = (pos >= start[:, None]) & (pos < end[:, None])
    return inside / (end - start)[:, None]


def _adaptive_avg(xp, n, input, output_size):
    name = f"adaptive_avg_pool{n}d"
    x, unbatched, out = _adaptive_setup(name, input, n, output_size)
    _adaptive_dtype(name, x, out)
    r = up(x)
    for d, o in enumerate(out):
        m = xp.asarray(_averaging(x.shape[2 + d], o), r.dtype)
        r = xp.moveaxis(xp.matmul(xp.moveaxis(r, 2 + d, -1), m.T), -1, 2 + d)
    r = xp.ascontiguousarray(r).astype(x.dtype, copy=False)
    return r[0] if unbatched else r


def _adaptive_avg_vjp(o, n):
    @o.vjp
    def _(ctx, g):
        a = bound(ctx, o)
        x = a["input"]
        sp = x.shape[x.dim() - n:]
        _, _, out = _adaptive_setup(o.name, x._data, n, a["output_size"])
        for d, (L, k) in enumerate(zip(sp, out)):
            axis = g.dim() - n + d
            m = g.new_tensor(_averaging(L, k))
            g = (g.transpose(axis, -1) @ m).transpose(axis, -1)
        return grads(ctx, o, input=g.contiguous())


def _adaptive_max(xp, n, input, output_size):
    name = f"adaptive_max_pool{n}d"
    x, unbatched, out = _adaptive_setup(name, input, n, output_size)
    _adaptive_dtype(name, x, out)
    grids = []
    for L, o in zip(x.shape[2:], out):
        start, end = _adaptive_bounds(L, o)
        k = int((end - start).max(initial=1))
        grids.append(np.minimum(start[:, None] + np.arange(k)[None], end[:, None] - 1))
    v, i = _max_windows(xp, x, grids, f"{name}_cpu")
    return (v[0], i[0]) if unbatched else (v, i)


def _adaptive_ops(n):
    def avg(xp, input, output_size):
        return _adaptive_avg(xp, n, input, output_size)
    avg.__doc__ = f"Mean over {n}-d windows spread evenly to give ``output_size`` outputs per dim."
    avg_op = op(f"adaptive_avg_pool{n}d", method=False, function=n == 1)(avg)
    _adaptive_avg_vjp(avg_op, n)

    def mx(xp, input, output_size):
        return _adaptive_max(xp, n, input, output_size)
    mx.__doc__ = f"Maximum (and its flat index) over {n}-d windows spread evenly to give ``output_size`` outputs."
    max_op = op(f"adaptive_max_pool{n}d", method=False, function=n == 1)(mx)

    @max_op.vjp
    def _(ctx, g, gi=None):
        return grads(ctx, max_op, input=_max_grad(bound(ctx, max_op)["input"], g, ctx.out[1], n))
    return avg_op, max_op


(adaptive_avg_pool1d, adaptive_max_pool1d), (adaptive_avg_pool2d, adaptive_max_pool2d), \
    (adaptive_avg_pool3d, adaptive_max_pool3d) = (_adaptive_ops(n) for n in (1, 2, 3))


# ---- max unpooling -------------------------------------------------------------------------------
def _unpool(xp, n, input, indices, output_size):
    out = tuple(output_size)
    if len(out) != n:
        raise RuntimeError(f"There should be exactly {n} elements in output_size, got {list(output_size)}")
    if indices.dtype != np.int64:
        raise RuntimeError("elements in indices should be type int64 but got: " + tname(indices))
    if input.shape != indices.shape:
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(indices.shape)}) "
                           f"but got: {list(input.shape)}")
    lead = input.shape[:input.ndim - n]
    plane = math.prod(out)
    flat_idx = indices.reshape(lead + (-1,))
    if flat_idx.size and (flat_idx.min() < 0 or flat_idx.max() >= plane):
        raise RuntimeError(f"Found an invalid max index: {int(flat_idx.max())} (output volumes are of size "
                           f"{'x'.join(map(str, out))}")
    r = xp.zeros(lead + (plane,), input.dtype)
    xp.put_along_axis(r, flat_idx, input.reshape(lead + (-1,)), -1)
    return r.reshape(lead + out)


@op("max_unpool2d", method=False, function=False)
def max_unpool2d(xp, input, indices, output_size):
    """Each value placed at its flat index in a zero plane of ``output_size`` (undoes 2-d max pooling)."""
    return _unpool(xp, 2, input, indices, output_size)


@op("max_unpool3d", method=False, function=False)
def max_unpool3d(xp, input, indices, output_size, stride, padding):
    """Each value placed at its flat index in a zero volume of ``output_size`` (``stride``/``padding`` as given
    to the pooling, checked only)."""
    if min(_tuple(stride, 3, "stride")) <= 0:
        raise RuntimeError("strides should be greater than zero")
    return _unpool(xp, 3, input, indices, output_size)


def _unpool_vjp(o, n):
    @o.vjp
    def _(ctx, g):
        x, idx = ctx.args[:2]
        lead = tuple(g.shape[:x.dim() - n])
        return (g.reshape(lead + (-1,)).gather(-1, idx.reshape(lead + (-1,))).reshape(x.shape), None) + \
            (None,) * (len(ctx.args) - 2)


_unpool_vjp(max_unpool2d, 2)
_unpool_vjp(max_unpool3d, 3)
