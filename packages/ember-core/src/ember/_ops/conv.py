"""Convolutions over 1 to 3 spatial dims (strided, padded, dilated, grouped) and their transposes.

A convolution copies the windows of its (padded) input once (im2col: a strided view made contiguous on
NumPy, a kernel on CuPy) and multiplies the weight into them. The columns come batch first, (batch, group,
channels x kernel offsets, positions), whose batched product is already the (batch, channels, *spatial) output;
or batch last, (group, channels x kernel offsets, positions x batch), when rows of output positions are short:
the window copies then run over the batch, several times faster, for the price of transposing the input and
the result. A transposed convolution multiplies first and then adds the columns into the output, one slice per
kernel offset (col2im). Gradients are computed only for the arguments that need one: in a backward that
records no graph, on the arrays (the output gradient as an operand, the other's windows, two products); else
in ember ops, as convolutions again (of the input, a transposed convolution of the output gradient; of the
weight, a convolution of the input by the output gradient), which have gradients in turn.

On the host, 2-d convolutions of one group mostly take faster ways (``_host_paths``): Winograd's minimal filtering
for 3x3 kernels with stride 1 (``ember._winograd``), channels-last columns for the others (``ember._channels_last``),
both spread over the cores in chunks of images."""
import itertools
import math

import numpy as np

from .. import _backend, _channels_last, _fconv, _kernels, _memory_format, _winograd
from .._registry import REGISTRY, op
from .._tensor import Tensor
from .activation import bound, grads, tname, up
from .arithmetic import no_graph, wanted


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


# im2col on CuPy: the windows of an NC(D)(H)W input (up to 3 spatial dims) as (C, *kernel, *out, N)
_IM2COL_CODE = r"""
template <typename T>
__device__ void im2col(const T* x, T* cols, long long total, long long N, long long C, const long long* in,
                       const long long* out, const long long* ker, const long long* st, const long long* pad,
                       const long long* dil) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)blockDim.x * gridDim.x) {
    long long r = i;
    long long n = r % N; r /= N;
    long long o2 = r % out[2]; r /= out[2];
    long long o1 = r % out[1]; r /= out[1];
    long long o0 = r % out[0]; r /= out[0];
    long long k2 = r % ker[2]; r /= ker[2];
    long long k1 = r % ker[1]; r /= ker[1];
    long long k0 = r % ker[0];
    long long c = r / ker[0];
    long long p0 = o0 * st[0] - pad[0] + k0 * dil[0];
    long long p1 = o1 * st[1] - pad[1] + k1 * dil[1];
    long long p2 = o2 * st[2] - pad[2] + k2 * dil[2];
    bool inside = p0 >= 0 && p0 < in[0] && p1 >= 0 && p1 < in[1] && p2 >= 0 && p2 < in[2];
    cols[i] = inside ? x[(((n * C + c) * in[0] + p0) * in[1] + p1) * in[2] + p2] : (T)0;
  }
}

extern "C" __global__ void ember_im2col_float(const float* x, float* cols, long long total, long long N,
    long long C, const long long* in, const long long* out, const long long* ker, const long long* st,
    const long long* pad, const long long* dil) {
  im2col<float>(x, cols, total, N, C, in, out, ker, st, pad, dil);
}

extern "C" __global__ void ember_im2col_double(const double* x, double* cols, long long total, long long N,
    long long C, const long long* in, const long long* out, const long long* ker, const long long* st,
    const long long* pad, const long long* dil) {
  im2col<double>(x, cols, total, N, C, in, out, ker, st, pad, dil);
}
"""
_IM2COL = {t: _kernels.raw_kernel(f"ember_im2col_{t}", _IM2COL_CODE) for t in ("float", "double")}


def _batch_last(xp, N, out, stride, w, groups):
    """Whether products by ``w`` take the batch as the last dim of their columns: always on CuPy (the im2col
    kernel's layout); on NumPy when the rows of output positions (a strided row counts as 1) are shorter than 8
    and than the batch, as window copies then run over the batch instead, and the columns (``w.shape[1]`` x kernel
    rows) are no fewer than the rows of the other operand (``w.shape[0] / groups``), which must be transposed."""
    return xp is not np or ((out[-1] if stride[-1] == 1 else 1) < min(N, 8)
                            and w.shape[1] * math.prod(w.shape[2:]) >= w.shape[0] // groups)


def _padded(xp, x, pads, last):
    """Batched ``x`` (N, C, *L) zero-padded by ``pads`` ((lo, hi) per dim): a contiguous (C, *L, N) when ``last``
    (batch last), else (N, C, *L) (``x`` itself without padding)."""
    n, lead = x.ndim - 2, 1 if last else 2
    if last:
        x = x.transpose((1,) + tuple(range(2, n + 2)) + (0,))
    if not any(lo or hi for lo, hi in pads):
        return xp.ascontiguousarray(x) if last else x
    shape = list(x.shape)
    shape[lead:lead + n] = [s + lo + hi for s, (lo, hi) in zip(shape[lead:lead + n], pads)]
    r = xp.zeros(shape, x.dtype)
    r[(slice(None),) * lead + tuple(slice(lo, lo + s) for s, (lo, _) in zip(x.shape[lead:lead + n], pads))] = x
    return r


def _operand(xp, a, groups, last):
    """Batched ``a`` (N, C, *L) as a product's operand: (G, C / G, prod(L) * N) batch ``last``, else
    (N, G, C / G, prod(L))."""
    N, C, P = a.shape[0], a.shape[1], math.prod(a.shape[2:])
    if last:
        return _padded(xp, a, (), True).reshape(groups, C // groups, P * N)
    return a.reshape(N, groups, C // groups, P)


def _batched(xp, r, C, L, N, last, bias=None):
    """A product's result, (C, *L, N) batch ``last`` else (N, C, *L) (in any shape of that size), as a
    contiguous (N, C, *L) plus ``bias`` (C,): added in place, or while copying out of the batch-last layout."""
    n, L = len(L), tuple(L)
    if last:
        r = r.reshape((C,) + L + (N,)).transpose((n + 1, 0) + tuple(range(1, n + 1)))
    else:
        r = r.reshape((N, C) + L)
    if bias is None:
        return xp.ascontiguousarray(r)
    bias = bias.reshape((-1,) + (1,) * n)
    return xp.add(r, bias, out=r if r.flags.c_contiguous else xp.empty(r.shape, r.dtype))


def _im2col(xp, x, groups, kernel, out, stride, pads, dilation, last, ones=False):
    """The windows of ``x`` (N, C, *L) giving outputs ``out`` as columns: (G, C / G * prod(kernel),
    prod(out) * N) batch ``last``, else (N, G, C / G * prod(kernel), prod(out)). On NumPy a strided view of the
    padded input copied once, each group's columns followed by a row of ones with ``ones`` (a weight column of
    bias then adds the bias within the product, no pass over the output); on CuPy a kernel's output."""
    n, (N, C) = x.ndim - 2, x.shape[:2]
    CgK, Q = C // groups * math.prod(kernel), math.prod(out)
    if last and xp is not np and x.dtype in (np.float32, np.float64):
        cols = xp.empty((C,) + tuple(kernel) + tuple(out) + (N,), x.dtype)
        arg = lambda v, f=1: xp.asarray(tuple(v) + (f,) * (3 - n), dtype=np.int64)  # noqa: E731  (3 dims)
        if cols.size:
            _IM2COL["float" if x.dtype == np.float32 else "double"](
                (min((cols.size + 255) // 256, 65535),), (256,),
                (xp.ascontiguousarray(x), cols, np.int64(cols.size), np.int64(N), np.int64(C), arg(x.shape[2:]),
                 arg(out), arg(kernel), arg(stride), arg((p for p, _ in pads), 0), arg(dilation)))
    else:
        a, lead = _padded(xp, x, pads, last), 1 if last else 2
        st, sp = a.strides, a.strides[lead:lead + n]
        windows = xp.lib.stride_tricks.as_strided(
            a, a.shape[:lead] + tuple(kernel) + tuple(out) + a.shape[lead + n:],
            st[:lead] + tuple(d * t for d, t in zip(dilation, sp)) + tuple(s * t for s, t in zip(stride, sp))
            + st[lead + n:])
        if not ones:
            cols = xp.ascontiguousarray(windows)
        else:
            shape = (groups, CgK + 1, Q * N) if last else (N, groups, CgK + 1, Q)
            cols = xp.empty(shape, x.dtype)
            cols[..., -1, :] = 1
            split = (groups, C // groups) if last else (N, groups, C // groups)  # (views of cols: no reshape copies)
            cols[..., :-1, :].reshape(split + windows.shape[len(split) - 1:])[...] = windows.reshape(
                split + windows.shape[len(split) - 1:])
            return cols
    return cols.reshape((groups, CgK, Q * N) if last else (N, groups, CgK, Q))


def _col2im(xp, cols, stride, dilation, lead, crop):
    """Sum of the columns (``lead`` dims, *kernel, *L, any trailing dims) into the (lead dims, *spatial, trailing
    dims) positions they were taken from, only those inside the slices ``crop`` (the rest would be cut off)."""
    n = len(crop)
    kernel, L = cols.shape[lead:lead + n], cols.shape[lead + n:lead + 2 * n]
    r = xp.zeros(cols.shape[:lead] + tuple(c.stop - c.start for c in crop) + cols.shape[lead + 2 * n:], cols.dtype)
    pre = (slice(None),) * lead
    for k in itertools.product(*map(range, kernel)):
        src, dst = [], []
        for i, d, s, st, c in zip(k, dilation, L, stride, crop):  # columns l at i * d + l * st in [start, stop)
            first, end = max(0, -((i * d - c.start) // st)), min(s, (c.stop - 1 - i * d) // st + 1)
            src.append(slice(first, end))
            dst.append(slice(i * d + first * st - c.start, i * d + (end - 1) * st - c.start + 1, st))
        if all(v.start < v.stop for v in src):
            r[pre + tuple(dst)] += cols[pre + k + tuple(src)]
    return r


def _mm(xp, a, b):
    """Grouped product (..., G, m, k) @ (..., G, k, n): 2-d products when G == 1."""
    if a.shape[-3] == 1 and b.shape[-3] == 1:
        return xp.matmul(a[..., 0, :, :], b[..., 0, :, :])[..., None, :, :]
    return xp.matmul(a, b)


def _windows_product(xp, w, cols, out, N, last, bias=None):
    """The weight (O, C / G, *K) times the columns of ``_im2col`` plus ``bias``: the (N, O, *out) convolution
    output."""
    O, G = w.shape[0], cols.shape[-3]
    w = w.reshape(G, O // G, -1)
    if cols.shape[-2] > w.shape[-1]:  # columns ending in a row of ones: the bias joins the weight
        w, bias = xp.concatenate([w, bias.reshape(G, O // G, 1)], -1), None
    return _batched(xp, _mm(xp, w, cols), O, out, N, last, bias)


def _conv(xp, x, w, b, stride, pads, dilation, groups):
    """Convolution of batched ``x`` (N, C, *L) by ``w`` (O, C / G, *K) plus ``b``: one product of the weight by
    the windows (2-d ones on the host: see ``_host_paths``)."""
    winograd, channels_last = _host_paths(xp, x, w, stride, dilation, groups)
    if winograd:
        r = _winograd.conv(x, w, b, pads)
        if r is not None:  # (else the result is not finite: the direct sums leave NaN and infinity where they were)
            return r
    if _fconv.usable(xp, x, w, groups):  # (None until its loop is compiled, or when the work is small)
        r = _fconv.conv(x, w, b, stride, pads, dilation)
        if r is not None:
            return r
    if channels_last:
        return _channels_last.conv(x, w, b, stride, pads, dilation)
    N, kernel = x.shape[0], w.shape[2:]
    out = [(s + lo + hi - d * (k - 1) - 1) // st + 1
           for s, (lo, hi), d, k, st in zip(x.shape[2:], pads, dilation, kernel, stride)]
    last = _batch_last(xp, N, out, stride, w, groups)
    cols = _im2col(xp, x, groups, kernel, out, stride, pads, dilation, last, b is not None and xp is np)
    return _windows_product(xp, w, cols, out, N, last, b)


def _host_paths(xp, x, w, stride, dilation, groups):
    """(Winograd, channels-last): which of the host's 2-d paths compute a convolution of batched ``x`` by ``w``.
    Winograd's F(4x4, 3x3) for 3x3 kernels with stride 1, 32 channels or more in and out and work enough; else
    channels-last columns for strided convolutions (their window copies are strided in the batch-first layout) or
    16 input channels or more (runs of 16 values or more to copy), with rows enough (output pixels of the batch) for
    the kernels' reordering to pay, and not 1x1 kernels (batch-first, their columns are the input itself, the
    products' results the output: no transposes); else the layouts of ``_batch_last``."""
    if not _channels_last.usable(xp, x, w, groups):
        return False, False
    rows = x.shape[0] * (x.shape[2] // stride[0]) * (x.shape[3] // stride[1])
    return (_winograd.usable(xp, x, w, stride, dilation, groups),
            (max(stride) > 1 or x.shape[1] >= _channels_last.MIN_CHANNELS) and max(w.shape[2:]) > 1
            and rows >= _channels_last.MIN_ROWS)


def _host_grads(xp, g, x, w, stride, pads, dilation, groups, need_input, need_weight):
    """(input gradient, weight gradient) of a convolution as far as the host's 2-d paths (see ``_host_paths``)
    compute them, None for the rest (see ``_channels_last.grads``)."""
    winograd, channels_last = _host_paths(xp, x, w, stride, dilation, groups)
    if winograd:
        r = _winograd.grads(g, x, w, pads, need_input, need_weight)
        if r is not None:
            return r
    if channels_last or winograd:
        return _channels_last.grads(g, x, w, stride, pads, dilation, need_input, need_weight)
    return None, None


def _transposed(xp, xo, w, groups, N, L, stride, dilation, crop, last, bias=None):
    """Transposed convolution of the operand ``xo`` (see ``_operand``) of a (N, C, *L) input by ``w``
    (C, O / G, *K) plus ``bias``: the product, then col2im into the (N, O, *spatial) positions inside ``crop``."""
    Cg, Og, kernel = w.shape[0] // groups, w.shape[1], tuple(w.shape[2:])
    cols = _mm(xp, w.reshape(groups, Cg, Og * math.prod(kernel)).transpose(0, 2, 1), xo)
    O, L = groups * Og, tuple(L)
    cols = cols.reshape((O,) + kernel + L + (N,) if last else (N, O) + kernel + L)
    return _batched(xp, _col2im(xp, cols, stride, dilation, 1 if last else 2, crop), O,
                    [c.stop - c.start for c in crop], N, last, bias)


def _conv_transpose(xp, x, w, b, stride, pads, dilation, groups, output_padding):
    """Transposed convolution of batched ``x`` (N, C, *L) by ``w`` (C, O / G, *K) plus ``b``."""
    N, L, kernel = x.shape[0], x.shape[2:], w.shape[2:]
    full = [(s - 1) * st + d * (k - 1) + 1 + op for s, st, d, k, op in zip(L, stride, dilation, kernel, output_padding)]
    size = [f - 2 * p for f, (p, _) in zip(full, pads)]
    if min(size, default=1) <= 0:
        raise RuntimeError(f"Given input size per channel: ({_sizes(L)}). Calculated output size per channel: "
                           f"({_sizes(size)}). Output size is too small")
    last = _batch_last(xp, N, L, stride, w, groups)
    return _transposed(xp, _operand(xp, x, groups, last), w, groups, N, L, stride, dilation,
                       [slice(p, p + s) for (p, _), s in zip(pads, size)], last, b)


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
    r = _memory_format.channels_last_like(r.astype(input.dtype, copy=False), input, weight)
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


def _weight_product(xp, a, cols, last):
    """The weight gradient from an operand and columns (see ``_operand``, ``_im2col``): ``a @ cols^T``, summed
    over the batch when it is not ``last``; computed transposed, the columns' rows leading (measured faster)."""
    r = _mm(xp, cols, a.swapaxes(-1, -2)).swapaxes(-1, -2)
    return r if last else r.sum(0)


def _array_grads(g, x, w, b, stride, pads, dilation, transposed, groups, need):
    """The gradients ``_conv_grads`` gives, computed on the arrays of batched ``g`` and ``x`` (no graph to
    record): the operand form of one of them paired with the other's windows (one im2col) serves both
    products, with no dispatch in between."""
    xp, dtype = _backend.xp_of(x._data), x._data.dtype
    ga, xa, wa = up(g._data), up(x._data), up(w._data)
    N, kernel = xa.shape[0], wa.shape[2:]
    gx = gw = None
    # transposed: the input gradient is a convolution of g, the weight's pairs x with g's windows; else the input
    # gradient is a transposed convolution of g, the weight's pairs g with x's windows
    if transposed and (need["input"] or need["weight"]):
        last = _batch_last(xp, N, xa.shape[2:], stride, wa, groups)
        cols = _im2col(xp, ga, groups, kernel, xa.shape[2:], stride, pads, dilation, last)
        if need["input"]:
            gx = _windows_product(xp, wa, cols, xa.shape[2:], N, last)
        if need["weight"]:
            gw = _weight_product(xp, _operand(xp, xa, groups, last), cols, last)
    elif not transposed:
        if need["input"] or need["weight"]:
            gx, gw = _host_grads(xp, ga, xa, wa, stride, pads, dilation, groups, need["input"], need["weight"])
        rest_input, rest_weight = need["input"] and gx is None, need["weight"] and gw is None
        last = (rest_input or rest_weight) and _batch_last(xp, N, ga.shape[2:], stride, wa, groups)
        go = _operand(xp, ga, groups, last)
        if rest_input:
            gx = _transposed(xp, go, wa, groups, N, ga.shape[2:], stride, dilation,
                             [slice(lo, lo + s) for s, (lo, _) in zip(xa.shape[2:], pads)], last)
        if rest_weight:
            cols = _im2col(xp, xa, groups, kernel, ga.shape[2:], stride, pads, dilation, last)
            gw = _weight_product(xp, go, cols, last)
    # the bias gradient sums rows of g's batch-last operand, else the batch first: whole planes at a time
    if b is None or not need["bias"]:
        gb = None
    elif not transposed and last:
        gb = go.sum(-1)
    else:
        gb = ga.reshape(ga.shape[:2] + (math.prod(ga.shape[2:]),)).sum(0).sum(-1)

    def wrapped(r, shape, like):  # (the input's and weight's gradients laid out as they are: channels-last or not)
        r = xp.ascontiguousarray(r.reshape(shape).astype(dtype, copy=False))
        return Tensor._wrap(r if like is None else _memory_format.channels_last_like(r, like))
    return tuple(None if r is None else wrapped(r, shape, like)
                 for r, shape, like in ((gx, xa.shape, x._data), (gw, wa.shape, w._data), (gb, (-1,), None)))


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
        if no_graph(x, w, b, g):
            gx, gw, gb = _array_grads(g, x, w, b, stride, pads, dilation, transposed, a["groups"], need)
        else:
            gx, gw, gb = _conv_grads(g, x, w, b, stride, pads, dilation, transposed, opad, a["groups"], need)
        return grads(ctx, o, input=gx[0] if unbatched and gx is not None else gx, weight=gw, bias=gb)


_conv_vjp(convolution)
for _n, _o in ((1, conv1d), (2, conv2d), (3, conv3d), (1, conv_transpose1d), (2, conv_transpose2d),
               (3, conv_transpose3d)):
    _conv_vjp(_o, _n)
