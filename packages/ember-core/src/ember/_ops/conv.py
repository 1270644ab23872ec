"""Convolutions over 1 to 3 spatial dims (strided, padded, dilated, grouped) and their transposes.

A convolution copies the windows of its (padded) input once (im2col: a strided view made contiguous on
NumPy, a kernel on CuPy) and multiplies the weight into them: as (batch, group, channels x kernel offsets,
output positions) columns, whose batched product is already the (batch, channels, *spatial) output; or, when
windows are longer than the output is large (the weight gradient's shapes), with the output positions as the
rows of one product. A transposed convolution multiplies first and then adds the columns into the output,
one slice per kernel offset (col2im; with stride 1, one contiguous run per plane of the flattened output).
Gradients are convolutions again, computed only for the arguments that need one: of the input, a transposed
convolution of the output gradient; of the weight, a convolution of the input by the output gradient."""
import itertools
import math

import numpy as np

from .. import _kernels
from .._registry import REGISTRY, op
from .activation import bound, grads, tname, up
from .arithmetic import wanted


def _tuple(v, n, name, error=None):
    """``v`` (an int or a sequence) as ``n`` ints, with PyTorch's error (or ``error``) for the wrong length."""
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    v = tuple(int(x) for x in v)
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise RuntimeError(error or f"expected {name} to be a single integer value or a list of {n} values to match "
                           f"the convolution dimensions, but got {name}={list(v)}")
    return v


def _sizes(v):
    return " x ".join(str(s) for s in v)


def _params(name, x, w, b, stride, padding, dilation, transposed, output_padding, groups, n=None):
    """Checked arguments: (x batched, unbatched flag, stride, pads as (lo, hi) pairs, dilation, output
    padding) with PyTorch's errors for bad shapes, dtypes and values."""
    if n is None:
        n = max(w.ndim - 2, 1)
    if x.ndim not in (n + 1, n + 2) or (name == "convolution" and x.ndim != n + 2):
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, but got input "
                           f"of size: {list(x.shape)}")
    if w.ndim != n + 2:
        raise RuntimeError(f"weight should have {n + 2} dimensions for {name}, but got weight of size "
                           f"{list(w.shape)}")
    unbatched = x.ndim == n + 1
    if unbatched:
        x = x[None]
    stride, dilation = _tuple(stride, n, "stride"), _tuple(dilation, n, "dilation")
    output_padding = _tuple(output_padding, n, "output_padding")
    kernel = w.shape[2:]
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(dilation) <= 0:
        raise RuntimeError("dilation should be greater than zero")
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * n
        elif padding == "same":
            if max(stride) > 1:
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            total = [d * (k - 1) for d, k in zip(dilation, kernel)]
            pads = tuple((t // 2, t - t // 2) for t in total)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        pads = tuple((p, p) for p in _tuple(padding, n, "padding"))
        if min(p for p, _ in pads) < 0:
            raise RuntimeError("negative padding is not supported")
    channels = x.shape[1]
    if transposed:
        if min(output_padding) < 0:
            raise RuntimeError("negative output_padding is not supported")
        if any(o >= s and o >= d for o, s, d in zip(output_padding, stride, dilation)):
            raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                               f"output_padding: {list(output_padding)}, stride: {list(stride)}, "
                               f"dilation: {list(dilation)}")
        if channels != w.shape[0] or w.shape[0] % groups:
            raise RuntimeError(f"Given transposed=1, weight of size {list(w.shape)}, expected input{list(x.shape)} "
                               f"to have {w.shape[0]} channels, but got {channels} channels instead")
        out_channels = w.shape[1] * groups
    else:
        if w.shape[0] % groups:
            raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                               f"but got weight of size {list(w.shape)} instead")
        if channels != w.shape[1] * groups:
            raise RuntimeError(f"Given groups={groups}, weight of size {list(w.shape)}, expected input"
                               f"{list(x.shape)} to have {w.shape[1] * groups} channels, but got {channels} "
                               f"channels instead")
        padded = [s + lo + hi for s, (lo, hi) in zip(x.shape[2:], pads)]
        dilated = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
        if any(k > p for k, p in zip(dilated, padded)):
            raise RuntimeError(f"Calculated padded input size per channel: ({_sizes(padded)}). Kernel size: "
                               f"({_sizes(dilated)}). Kernel size can't be greater than actual input size")
        out_channels = w.shape[0]
    if b is not None and (b.ndim != 1 or b.shape[0] != out_channels):
        raise RuntimeError(f"Given weight of size {list(w.shape)}, expected bias to be 1-dimensional with "
                           f"{out_channels} elements, but got bias of size {list(b.shape)} instead")
    return x, unbatched, stride, pads, dilation, output_padding


# im2col on CuPy: the windows of an NC(D)(H)W input (up to 3 spatial dims) as (N, G, Cg, *kernel, *out)
_IM2COL_CODE = r"""
template <typename T>
__device__ void im2col(const T* x, T* cols, long long total, long long N, long long Cg, long long C,
                       const long long* in, const long long* out, const long long* ker, const long long* st,
                       const long long* pad, const long long* dil) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)blockDim.x * gridDim.x) {
    long long r = i;
    long long o2 = r % out[2]; r /= out[2];
    long long o1 = r % out[1]; r /= out[1];
    long long o0 = r % out[0]; r /= out[0];
    long long k2 = r % ker[2]; r /= ker[2];
    long long k1 = r % ker[1]; r /= ker[1];
    long long k0 = r % ker[0]; r /= ker[0];
    long long c = r % Cg; r /= Cg;
    long long g = r % (C / Cg), n = r / (C / Cg);
    long long p0 = o0 * st[0] - pad[0] + k0 * dil[0];
    long long p1 = o1 * st[1] - pad[1] + k1 * dil[1];
    long long p2 = o2 * st[2] - pad[2] + k2 * dil[2];
    bool inside = p0 >= 0 && p0 < in[0] && p1 >= 0 && p1 < in[1] && p2 >= 0 && p2 < in[2];
    cols[i] = inside ? x[(((n * C + g * Cg + c) * in[0] + p0) * in[1] + p1) * in[2] + p2] : (T)0;
  }
}

extern "C" __global__ void ember_im2col_float(const float* x, float* cols, long long total, long long N,
    long long Cg, long long C, const long long* in, const long long* out, const long long* ker,
    const long long* st, const long long* pad, const long long* dil) {
  im2col<float>(x, cols, total, N, Cg, C, in, out, ker, st, pad, dil);
}

extern "C" __global__ void ember_im2col_double(const double* x, double* cols, long long total, long long N,
    long long Cg, long long C, const long long* in, const long long* out, const long long* ker,
    const long long* st, const long long* pad, const long long* dil) {
  im2col<double>(x, cols, total, N, Cg, C, in, out, ker, st, pad, dil);
}
"""
_IM2COL = {t: _kernels.raw_kernel(f"ember_im2col_{t}", _IM2COL_CODE) for t in ("float", "double")}


def _im2col_cupy(xp, x, groups, kernel, out, stride, pads, dilation):
    """Windows as (N, G, Cg, *kernel, *out) through the CuPy im2col kernel (up to 3 spatial dims)."""
    n = x.ndim - 2
    N, C = x.shape[:2]
    cols = xp.empty((N, groups, C // groups) + tuple(kernel) + tuple(out), x.dtype)
    arg = lambda v, f=1: xp.asarray(tuple(v) + (f,) * (3 - n), dtype=np.int64)  # noqa: E731  (padded to 3 dims)
    total = cols.size
    if total:
        kern = _IM2COL["float" if x.dtype == np.float32 else "double"]
        kern((min((total + 255) // 256, 65535),), (256,),
             (xp.ascontiguousarray(x), cols, np.int64(total), np.int64(N), np.int64(C // groups), np.int64(C),
              arg(x.shape[2:]), arg(out), arg(kernel), arg(stride), arg((p for p, _ in pads), 0), arg(dilation)))
    return cols


def _windows(xp, x, groups, kernel, out, stride, pads, dilation):
    """Windows of ``x`` (N, C, *L) as (N, G, Cg, *kernel, *out): a strided view of the padded input on NumPy
    (copied once by the caller, in the layout its product wants), a kernel's output on CuPy."""
    N, C = x.shape[:2]
    if xp is not np and x.dtype in (np.float32, np.float64):
        return _im2col_cupy(xp, x, groups, kernel, out, stride, pads, dilation)
    if any(lo or hi for lo, hi in pads):
        xpad = xp.zeros((N, C) + tuple(s + lo + hi for s, (lo, hi) in zip(x.shape[2:], pads)), x.dtype)
        xpad[(slice(None),) * 2 + tuple(slice(lo, lo + s) for s, (lo, _) in zip(x.shape[2:], pads))] = x
        x = xpad
    st, Cg = x.strides, C // groups
    return xp.lib.stride_tricks.as_strided(
        x, (N, groups, Cg) + tuple(kernel) + tuple(out),
        (st[0], Cg * st[1], st[1]) + tuple(d * t for d, t in zip(dilation, st[2:]))
        + tuple(s * t for s, t in zip(stride, st[2:])))


def _conv(xp, x, w, b, stride, pads, dilation, groups):
    """Convolution of batched ``x`` (N, C, *L) by ``w`` (O, C / G, *K) plus ``b``."""
    n, N, O = x.ndim - 2, x.shape[0], w.shape[0]
    kernel = w.shape[2:]
    out = [(s + lo + hi - d * (k - 1) - 1) // st + 1
           for s, (lo, hi), d, k, st in zip(x.shape[2:], pads, dilation, kernel, stride)]
    CgK, Q, Og = w.shape[1] * math.prod(kernel), math.prod(out), O // groups
    view = _windows(xp, x, groups, kernel, out, stride, pads, dilation)
    wm = w.reshape(groups, Og, CgK)
    if math.prod(kernel) > Q:  # long windows, few positions (a weight gradient): positions as rows of ONE product
        order = (1, 0) + tuple(range(3 + n, 3 + 2 * n)) + (2,) + tuple(range(3, 3 + n))
        cols = xp.ascontiguousarray(view.transpose(order)).reshape(groups, N * Q, CgK)
        r = xp.matmul(cols, wm.transpose(0, 2, 1)).reshape(groups, N, Q, Og).transpose(1, 0, 3, 2)
    else:  # windows as columns: the product is already the (N, O, *out) output, with no transpose
        cols = xp.ascontiguousarray(view).reshape(N, groups, CgK, Q)
        r = xp.matmul(wm[0], cols[:, 0]) if groups == 1 else xp.matmul(wm, cols)
    r = xp.ascontiguousarray(r).reshape((N, O) + tuple(out))
    if b is not None:
        r += b.reshape((O,) + (1,) * n)
    return r


def _col2im(xp, cols, full, stride, dilation, L):
    """Sum of the columns (N, G, Og, *K, *L) into the (N, G, Og, *full) positions they were taken from; with
    stride 1 the columns come on the output's grid (L[0], *full[1:]) instead (see ``_conv_transpose``)."""
    lead, kernel = cols.shape[:3], cols.shape[3:3 + len(L)]
    offsets = list(itertools.product(*map(range, kernel)))
    if max(stride) > 1:
        r = xp.zeros(lead + tuple(full), cols.dtype)
        for k in offsets:
            target = tuple(slice(i * d, i * d + (s - 1) * st + 1, st) for i, d, s, st in zip(k, dilation, L, stride))
            r[(slice(None),) * 3 + target] += cols[(slice(None),) * 3 + k]
        return r
    # on the flattened output, every kernel offset adds ONE contiguous run per plane
    cols = cols.reshape(lead + kernel + (math.prod(cols.shape[3 + len(L):]),))
    run, steps = cols.shape[-1], [math.prod(full[i + 1:]) for i in range(len(L))]
    starts = [sum(i * d * t for i, d, t in zip(k, dilation, steps)) for k in offsets]
    r = xp.zeros(lead + (max(math.prod(full), max(starts) + run),), cols.dtype)
    for k, start in zip(offsets, starts):
        r[..., start:start + run] += cols[(slice(None),) * 3 + k]
    return r[..., :math.prod(full)].reshape(lead + tuple(full))


def _conv_transpose(xp, x, w, b, stride, pads, dilation, groups, output_padding):
    """Transposed convolution of batched ``x`` (N, C, *L) by ``w`` (C, O / G, *K): product, then col2im."""
    n, (N, C), L = x.ndim - 2, x.shape[:2], x.shape[2:]
    Cg, Og, kernel = C // groups, w.shape[1], w.shape[2:]
    full = [(s - 1) * st + d * (k - 1) + 1 + op for s, st, d, k, op in zip(L, stride, dilation, kernel, output_padding)]
    size = [f - 2 * p for f, (p, _) in zip(full, pads)]
    if min(size, default=1) <= 0:
        raise RuntimeError(f"Given input size per channel: ({_sizes(L)}). Calculated output size per channel: "
                           f"({_sizes(size)}). Output size is too small")
    grid = (L[0],) + tuple(full[1:]) if max(stride) == 1 else L
    if grid != L:  # stride 1: zeros put x on the output's grid, so that col2im adds whole runs
        xg = xp.zeros((N, C) + grid, x.dtype)
        xg[(slice(None),) * 2 + tuple(slice(0, s) for s in L)] = x
        x = xg
    wm = w.reshape(groups, Cg, Og * math.prod(kernel)).transpose(0, 2, 1)
    cols = xp.matmul(wm, x.reshape((N, groups, Cg, math.prod(grid))))  # (N, G, Og * prod(K), prod(grid))
    r = _col2im(xp, cols.reshape((N, groups, Og) + tuple(kernel) + tuple(grid)), full, stride, dilation, L)
    r = r[(slice(None),) * 3 + tuple(slice(p, p + s) for (p, _), s in zip(pads, size))]
    r = xp.ascontiguousarray(r).reshape((N, groups * Og) + tuple(size))
    if b is not None:
        r += b.reshape((-1,) + (1,) * n)
    return r


def _run(xp, name, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, n=None):
    x, unbatched, stride, pads, dilation, output_padding = _params(
        name, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, n)
    if x.dtype.kind == "b" and x.size:
        kernel = f"slow_conv_transpose{max(n or 2, 2)}d_out_cpu" if transposed else f"slow_conv{max(n or 2, 2)}d_cpu"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{tname(x)}'")
    for a, what in ((weight, "weight"), (bias, "bias")):
        if a is not None and a.dtype != x.dtype:
            raise RuntimeError(f"Input type ({tname(x)}) and {what} type ({tname(a)}) should be the same")
    w, b = up(weight), None if bias is None else up(bias)
    x = up(x)
    if transposed:
        r = _conv_transpose(xp, x, w, b, stride, pads, dilation, groups, output_padding)
    else:
        r = _conv(xp, x, w, b, stride, pads, dilation, groups)
    r = r.astype(input.dtype, copy=False)
    return r[0] if unbatched else r


@op("convolution", method=False)
def convolution(xp, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """Convolution (or, with ``transposed``, its transpose) over the spatial dims after batch and channels."""
    return _run(xp, "convolution", input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups)


def _conv_op(n):
    name = f"conv{n}d"

    def impl(xp, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        return _run(xp, name, input, weight, bias, stride, padding, dilation, False, 0, groups, n)
    impl.__doc__ = f"{n}-d convolution of a (batch, channels, *{n} dims) input; ``padding`` may be 'same'/'valid'."
    return op(name, method=False)(impl)


def _conv_transpose_op(n):
    name = f"conv_transpose{n}d"

    def impl(xp, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        return _run(xp, name, input, weight, bias, stride, padding, dilation, True, output_padding, groups, n)
    impl.__doc__ = f"{n}-d transposed convolution (the gradient of conv{n}d with respect to its input)."
    return op(name, method=False)(impl)


conv1d, conv2d, conv3d = (_conv_op(n) for n in (1, 2, 3))
conv_transpose1d, conv_transpose2d, conv_transpose3d = (_conv_transpose_op(n) for n in (1, 2, 3))


# ---- gradients ----------------------------------------------------------------------------------
def _weight_grad(x, gy, kernel, stride, padding, dilation, groups):
    """Gradient of a convolution's weight: ``x`` convolved by ``gy`` with batch and channels swapped (the
    stride and dilation exchange roles); the result may overhang ``kernel`` and is cut to it."""
    n, N, C, O = x.dim() - 2, x.shape[0], x.shape[1], gy.shape[1]
    rest = tuple(range(3, n + 3))
    xs = x.reshape((N, groups, C // groups) + tuple(x.shape[2:])).permute((2, 1, 0) + rest)
    ws = gy.reshape((N, groups, O // groups) + tuple(gy.shape[2:])).permute((1, 2, 0) + rest)
    r = convolution.fn(xs.reshape((C // groups, groups * N) + tuple(x.shape[2:])),
                       ws.reshape((O, N) + tuple(gy.shape[2:])), None, list(dilation), list(padding),
                       list(stride), False, [0] * n, groups)
    for i, k in enumerate(kernel):
        if r.shape[2 + i] != k:
            r = r.narrow(2 + i, 0, k)
    return r.transpose(0, 1)


def _conv_grads(g, x, w, b, stride, pads, dilation, transposed, output_padding, groups, need):
    """Gradients of input, weight and bias; those ``need`` (name -> bool) does not ask for are None, not computed."""
    n = w.dim() - 2
    lo = [p for p, _ in pads]
    gx = gw = None
    if transposed:
        if need["input"]:
            gx = convolution.fn(g, w, None, list(stride), lo, list(dilation), False, [0] * n, groups)
            for i, s in enumerate(x.shape[2:]):  # output padding with stride 1 (dilated): windows past the input
                gx = gx.narrow(2 + i, 0, s) if gx.shape[2 + i] != s else gx
        if need["weight"]:
            gw = _weight_grad(g, x, w.shape[2:], stride, lo, dilation, groups)
    else:
        if any(p != q for p, q in pads):  # padding='same' of an even kernel: pad explicitly, cut back after
            flat = [v for p in reversed(pads) for v in p]
            gx, gw, gb = _conv_grads(g, REGISTRY["constant_pad_nd"].fn(x, flat), w, b, stride, ((0, 0),) * n,
                                     dilation, False, output_padding, groups, need)
            for i, (p, _) in enumerate(pads):
                gx = gx if gx is None else gx.narrow(2 + i, p, x.shape[2 + i])
            return gx, gw, gb
        if need["input"]:
            extra = [s + 2 * p - ((o - 1) * st + d * (k - 1) + 1) for s, p, o, st, d, k in
                     zip(x.shape[2:], lo, g.shape[2:], stride, dilation, w.shape[2:])]
            gx = convolution.fn(g, w, None, list(stride), lo, list(dilation), True, extra, groups)
        if need["weight"]:
            gw = _weight_grad(x, g, w.shape[2:], stride, lo, dilation, groups)
    gb = None if b is None or not need["bias"] else g.sum([0] + list(range(2, n + 2)))
    return gx, gw, gb


def _conv_vjp(o, n=None):
    @o.vjp
    def _(ctx, g):
        a = bound(ctx, o)
        x, w, b = a["input"], a["weight"], a["bias"]
        transposed = a.get("transposed", o.name.startswith("conv_transpose"))
        _, unbatched, stride, pads, dilation, opad = _params(
            o.name, x._data, w._data, None if b is None else b._data, a["stride"], a["padding"], a["dilation"],
            transposed, a.get("output_padding", 0), a["groups"], n)
        if unbatched:
            x, g = x.unsqueeze(0), g.unsqueeze(0)
        # positional arguments map to the engine's needs_input_grad; keyword ones are computed
        need = dict.fromkeys(("input", "weight", "bias"), True) | dict(zip(list(a)[:len(ctx.args)], wanted(ctx)))
        gx, gw, gb = _conv_grads(g, x, w, b, stride, pads, dilation, transposed, opad, a["groups"], need)
        return grads(ctx, o, input=gx[0] if unbatched and gx is not None else gx, weight=gw, bias=gb)


_conv_vjp(convolution)
for _n, _o in ((1, conv1d), (2, conv2d), (3, conv3d), (1, conv_transpose1d), (2, conv_transpose2d),
               (3, conv_transpose3d)):
    _conv_vjp(_o, _n)
