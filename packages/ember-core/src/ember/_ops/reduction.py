"""Reductions (sum, prod, extrema, norms, all/any, logsumexp) and scans (cumsum, cummax, diff, trapezoid)."""
import builtins
import math

import numpy as np

from .. import _backend, _kernels
from .. import _dtype as D
from .. import _promotion as P
from .._factory import arange
from .._parallel import pool
from .._registry import REGISTRY, TORCH_NAME, compute_dtype, op
from .._tensor import Tensor
from .comparison import maximum, minimum, where
from .pointwise import not_implemented, refuse_complex
from .shape import cat

_HALF = (np.dtype(np.float16), D.bfloat16.np)


def reduce_dims(dim, ndim):
    """``dim`` (None, int, or a sequence) as a sorted tuple of non-negative axes; None means all."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims:
        return None
    n = max(ndim, 1)
    seen = set()
    for d in dims:
        if not -n <= d < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
        if d % n in seen:
            raise RuntimeError(f"dim {d % n} appears multiple times in the list of dims")
        seen.add(d % n)
    return tuple(sorted(d for d in seen if d < ndim)) if ndim else ()


def reduced_shape(shape, axes):
    """``shape`` without ``axes`` (None: all of them)."""
    return tuple(s for i, s in enumerate(shape) if axes is not None and i not in axes)


def one_dim(dim, ndim, name="dim"):
    """A single ``dim`` argument wrapped to [0, max(ndim, 1)), with PyTorch's errors."""
    if not isinstance(dim, int) or isinstance(dim, builtins.bool):
        raise TypeError(f"argument '{name}' must be int, not {type(dim).__name__}")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def dtype_of(x):
    return D.FROM_NP[x.dtype]


def array_module(t):
    """NumPy or CuPy: the module of tensor ``t``'s array."""
    from .. import _backend
    return np if type(t._data) is np.ndarray else _backend.cupy()


def up(x):
    """Half-precision arrays as float32 (NumPy lacks or is slow at half arithmetic); others unchanged."""
    return x.astype(np.float32) if x.dtype in _HALF else x


def inexact(x):
    """Whether array ``x`` holds floating or complex numbers (bfloat16 included)."""
    return D.FROM_NP[x.dtype].category >= 2


def nonempty(name, x, axes, error=RuntimeError):
    """PyTorch's errors for reductions without identity over empty dims (``axes`` None: all, raising ``error``)."""
    if x.size:
        return
    if axes is None:
        raise error(f"{name}(): Expected reduction dim to be specified for input.numel() == 0."
                    + (" Specify the reduction dim with the 'dim' argument." if error is RuntimeError else ""))
    for a in axes:
        if x.shape[a] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {a} to have non-zero size.")


def positional(ctx, grads, names):
    """One gradient per positional argument of the call, from ``grads`` keyed by parameter name."""
    return tuple(grads.get(name) for name in names[:len(ctx.args)])


def arg(ctx, i, name, default=None):
    """Argument ``i``/``name`` of the call a VJP differentiates."""
    if name in ctx.kwargs:
        return ctx.kwargs[name]
    return ctx.args[i] if len(ctx.args) > i else default


def unreduce(g, shape, axes, keepdim):
    """``g`` reshaped so it broadcasts against the reduced input of ``shape`` (``axes`` None: all)."""
    if keepdim or not shape or axes is None:  # a full reduction's 0-d result broadcasts as it is
        return g
    return g.reshape(tuple(1 if axes is None or i in axes else s for i, s in enumerate(shape)))


def along(n, dim, ndim, like):
    """``arange(n)`` shaped to broadcast along ``dim`` of an ``ndim``-dim tensor."""
    return arange(n, device=like.device).reshape((-1,) + (1,) * (ndim - 1 - dim))


def select_grad(x, dim, idx, g, keepdim):
    """Gradient of picking ``x``'s elements at ``idx`` along ``dim`` (one per slice): ``g`` placed there."""
    if x.dim() == 0:
        return g
    d = dim % x.dim()
    if not keepdim:
        g, idx = g.unsqueeze(d), idx.unsqueeze(d)
    return where(along(x.shape[d], d, x.dim(), x) == idx, g, g.new_zeros(()))


def scatter_grad(x, dim, idx, g):
    """Gradient of gathering ``x`` at ``idx`` along ``dim`` (several per slice, repeats accumulate)."""
    if x.dim() == 0:
        return g.reshape(())
    return g.new_zeros(x.shape).scatter_add(dim, idx, g)


def inverse_scan(g, dim):
    """Reversed cumulative sum along ``dim`` (the VJP of cumsum)."""
    return g.flip((dim,)).cumsum(dim).flip((dim,)) if g.dim() else g


# ---- sums and products ---------------------------------------------------------------------------
_SUM = _kernels.reduction_kernel("ember_sum", "T x", "T y", "x", "a + b", "y = a", "0")


def _sum_dtypes(x, dtype):
    """(accumulation, result) dtypes of a sum or product: an explicit ``dtype`` is the result's (the input is cast
    to it first, so bool adds as logical or and multiplies as and); without one, integers and bool give int64."""
    if dtype is None:
        dtype = dtype_of(x)
        dtype = D.int64 if dtype.category < 2 else dtype
    return compute_dtype(dtype), dtype


_SUM_BLOCK = 512  # einsum's per-lane error grows with the run it adds: blocks of this keep it near PyTorch's
_EINSUM_MIN = 4096  # below this many elements np.sum's smaller call overhead wins
_SPLIT_MIN = 1 << 23  # elements (beyond the caches) from which a row sum is split over two threads
_REAL = (np.dtype(np.float32), np.dtype(np.float64))


def _trailing(x, axes):
    """The first reduced dim when ``axes`` (None: all) are the trailing dims of a large C-contiguous float32/64
    NumPy array ``x``, so its sum is one of rows (``_row_sums``); else None."""
    if type(x) is not np.ndarray or x.dtype not in _REAL or x.size < _EINSUM_MIN or not x.flags.c_contiguous:
        return None
    if axes is None:
        return 0
    return axes[0] if axes == tuple(range(axes[0], x.ndim)) else None


def _sums(rows):
    """Sums of the rows of 2-D C-contiguous ``rows``: einsum adds in SIMD lanes (about 3x NumPy's pairwise sum,
    which is scalar) over blocks of _SUM_BLOCK whose sums are then added pairwise, so that the error stays
    that of a pairwise sum, as PyTorch's cascade sum, even for very long rows."""
    m, n = rows.shape
    k = n // _SUM_BLOCK
    if k < 2:
        return np.einsum("ij->i", rows)
    r = np.einsum("ijk->ij", rows[:, :k * _SUM_BLOCK].reshape(m, k, _SUM_BLOCK)).sum(axis=1)
    if n % _SUM_BLOCK:
        r += np.einsum("ij->i", rows[:, k * _SUM_BLOCK:])
    return r


def _row_sums(x, start, keepdim):
    """Sums of C-contiguous ``x`` over its dims from ``start`` on. Beyond the caches the sum is memory-bound
    and a second core adds bandwidth: the rows are split over two pool threads (measured slower with one half
    on the calling thread)."""
    lead = x.shape[:start]
    rows = x.reshape(math.prod(lead), -1)  # (no dim is empty: the array is large)
    if rows.size < _SPLIT_MIN or len(rows) < 2:
        r = _sums(rows)
    else:
        half = len(rows) // 2
        r = np.concatenate([j.result() for j in [pool().submit(_sums, p) for p in (rows[:half], rows[half:])]])
    return r.reshape(lead + (1,) * (x.ndim - start) if keepdim else lead)


@op("sum", out_dtype="compute", result_layout="row_major")
def sum(xp, input, dim=None, keepdim=False, *, dtype=None):
    """Sum over ``dim`` (all dims by default); integers and bool sum to int64, halves accumulate in float32."""
    if dim is None and dtype is None and not keepdim and input.dtype in _REAL and input.size < _EINSUM_MIN \
            and type(input) is np.ndarray:  # the common small full sum, without the steps below
        return np.asarray(np.add.reduce(input, axis=None))
    axes = reduce_dims(dim, input.ndim)
    acc, rd = _sum_dtypes(input, dtype)
    x = input.astype(D.storage(acc), copy=False)
    start = _trailing(x, axes)
    if start is not None:
        r = _row_sums(x, start, keepdim)
    elif xp is not np and acc in (D.float32, D.float64) and axes is None and not keepdim:
        r = _SUM(x)
    else:
        # (np.add.reduce is what the sum method runs, minus its Python wrapper: a third of the cost when tiny)
        r = np.add.reduce(x, axis=axes, keepdims=keepdim) if xp is np else x.sum(axis=axes, keepdims=keepdim)
    return xp.asarray(r).astype(D.storage(rd), copy=False)


@sum.vjp
def _(ctx, g):
    args = ctx.args
    x = args[0]
    if len(args) > 1 or ctx.kwargs:  # (a full reduction's 0-d gradient broadcasts as it is)
        g = unreduce(g, x.shape, reduce_dims(arg(ctx, 1, "dim"), x.dim()), arg(ctx, 2, "keepdim", False))
    if not g._rg:  # no graph to record: a plain broadcast view, without the view op's bookkeeping
        return (Tensor._wrap(_spread(g._data, x._data.shape)),)
    return (g.expand(x.shape),)


def _spread(a, shape):
    """``a`` broadcast to ``shape`` as a read-only view (as PyTorch's expanded gradient, in-place changes are
    refused); a 0-d NumPy array directly as zero strides over its one element (several times cheaper than
    np.broadcast_to, which matters for tiny graphs)."""
    if a.ndim or type(a) is not np.ndarray:
        return _backend.xp_of(a).broadcast_to(a, shape)
    v = np.ndarray(shape, a.dtype, a, 0, (0,) * len(shape))
    v.setflags(write=False)  # (cheaper than assigning v.flags.writeable)
    return v


@op("nansum", result_layout="row_major")
def nansum(xp, input, dim=None, keepdim=False, *, dtype=None):
    """Sum treating NaN as zero."""
    if input.dtype.kind == "c":
        raise RuntimeError("nansum does not support complex inputs")
    if dtype is not None and dtype.is_complex and inexact(input):  # (integers sum as sum does)
        raise not_implemented("nansum_cpu", dtype)
    x = input if not inexact(input) else xp.where(xp.isnan(input), 0, input).astype(input.dtype)
    return sum.impl(xp, x, dim, keepdim, dtype=dtype)


@nansum.vjp
def _(ctx, g):
    x = ctx.args[0]
    (gx,) = sum.vjp_fn(ctx, g)
    return (where(x.isnan(), 0.0, gx),)


def _mean_dtype_check(name, src, dtype):
    """PyTorch's error for a mean of integers or bool (``src``: the input's dtype, or the ``dtype`` given)."""
    if src.category < 2:
        raise RuntimeError(f"{name}(): could not infer output dtype. {'Input' if dtype is None else 'Optional'} "
                           f"dtype must be either a floating point or complex dtype. Got: {TORCH_NAME[src]}")


@op("mean", out_dtype="match", result_layout="row_major")
def mean(xp, input, dim=None, keepdim=False, *, dtype=None):
    """Arithmetic mean over ``dim``; only floating and complex inputs (or an explicit float ``dtype``)."""
    src = dtype_of(input) if dtype is None else dtype
    _mean_dtype_check("mean", src, dtype)
    axes = reduce_dims(dim, input.ndim)
    acc = D.float32 if src in (D.float16, D.bfloat16) else src
    x = input.astype(D.storage(acc), copy=False)
    start = _trailing(x, axes)
    if start is not None:
        r = _row_sums(x, start, keepdim)
        r /= x.size // r.size
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            r = xp.mean(x, axis=axes, keepdims=keepdim)
    return xp.asarray(r).astype(D.storage(src), copy=False)


@mean.vjp
def _(ctx, g):
    (gs,) = sum.vjp_fn(ctx, g)
    return (gs * (ctx.out.numel() / max(ctx.args[0].numel(), 1)),)


@op("nanmean", result_layout="row_major")
def nanmean(xp, input, dim=None, keepdim=False, *, dtype=None):
    """Mean of the non-NaN elements (NaN where there are none)."""
    if not inexact(input):
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype but got "
                           f"{TORCH_NAME[dtype_of(input)]}")
    if dtype is not None:
        _mean_dtype_check("nanmean", dtype, dtype)
    count = sum.impl(xp, ~xp.isnan(input), dim, keepdim)
    total = nansum.impl(xp, input, dim, keepdim, dtype=dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (up(total) / count).astype(total.dtype)


@nanmean.vjp
def _(ctx, g):
    x = ctx.args[0]
    axes = reduce_dims(arg(ctx, 1, "dim"), x.dim())
    keep = ~x.isnan()
    count = keep.sum(dim=axes, keepdim=True) if axes is not None else keep.sum()
    return (unreduce(g, x.shape, axes, arg(ctx, 2, "keepdim", False)) / count * keep,)


@op("prod", out_dtype="compute", result_layout="row_major")
def prod(xp, input, dim=None, keepdim=False, *, dtype=None):
    """Product over one dim (all elements by default); integers and bool multiply in int64."""
    axis = None if dim is None else one_dim(dim, input.ndim)
    acc, rd = _sum_dtypes(input, dtype)
    x = input.astype(D.storage(acc), copy=False)
    if x.ndim == 0:
        return x.copy().astype(D.storage(rd))
    r = xp.prod(x, axis=axis, keepdims=keepdim and axis is not None)
    return xp.asarray(r).astype(D.storage(rd), copy=False)


def _exclusive_cumprod(x, dim, reverse):
    """Products of the elements before each one along ``dim`` (after it when ``reverse``), without division."""
    if x.shape[dim] == 0:
        return x
    if reverse:
        return _exclusive_cumprod(x.flip((dim,)), dim, False).flip((dim,))
    head = x.new_ones(x.shape[:dim] + (1,) + x.shape[dim + 1:])
    return cat([head, x.narrow(dim, 0, x.shape[dim] - 1)], dim).cumprod(dim)


@prod.vjp
def _(ctx, g):
    x = ctx.args[0]
    dim = arg(ctx, 1, "dim")
    if x.dim() == 0:
        return (g,)
    flat = x.reshape(-1) if dim is None else x
    d = 0 if dim is None else dim % x.dim()
    others = _exclusive_cumprod(flat, d, False) * _exclusive_cumprod(flat, d, True)
    g = g if dim is None or arg(ctx, 2, "keepdim", False) else g.unsqueeze(d)
    return ((g * others.conj()).reshape(x.shape),)


# ---- extrema -------------------------------------------------------------------------------------
def _extreme(xp, name, x, axes, keepdim, largest):
    nonempty(name, x, axes)
    f = xp.max if largest else xp.min
    r = f(up(x), axis=axes, keepdims=keepdim)
    return xp.asarray(r).astype(x.dtype, copy=False)


def _even_grad(ctx, g, axes, keepdim, value, nan_hits=False):
    """Gradient of a max/min value reduction: split evenly among the elements that reach it (NaN elements
    reach a NaN result when ``nan_hits``, as in PyTorch's max(); amax's NaN results get NaN gradients)."""
    x = ctx.args[0]
    value = unreduce(value, x.shape, axes, keepdim)
    hit = (x == value) | (x.isnan() & value.isnan()) if nan_hits else x == value
    count = hit.sum(dim=axes, keepdim=True) if axes is not None else hit.sum()
    return unreduce(g, x.shape, axes, keepdim) / count * hit  # NaN where nothing reaches it (a NaN result)


def _no_complex_input(name, x):
    if x.dtype.kind == "c":
        raise RuntimeError(f"{name}(): does not support complex input")


@op("amax", result_layout="row_major")
def amax(xp, input, dim=(), keepdim=False):
    """Largest element over ``dim`` (all dims by default); NaN wins."""
    _no_complex_input("amax", input)
    return _extreme(xp, "amax", input, reduce_dims(dim, input.ndim), keepdim, True)


@amax.vjp
def _(ctx, g):
    x = ctx.args[0]
    return (_even_grad(ctx, g, reduce_dims(arg(ctx, 1, "dim", ()), x.dim()), arg(ctx, 2, "keepdim", False),
                       ctx.out),)


@op("amin", result_layout="row_major")
def amin(xp, input, dim=(), keepdim=False):
    """Smallest element over ``dim`` (all dims by default); NaN wins."""
    _no_complex_input("amin", input)
    return _extreme(xp, "amin", input, reduce_dims(dim, input.ndim), keepdim, False)


amin.vjp(amax.vjp_fn)


@op("aminmax", returns=("min", "max"), result_layout="row_major")
def aminmax(xp, input, *, dim=None, keepdim=False):
    """(smallest, largest) element over one dim or all elements."""
    refuse_complex("aminmax_cpu", input)
    axes = None if dim is None else (one_dim(dim, input.ndim),)
    if input.size == 0 and (axes is None or input.ndim == 0 or input.shape[axes[0]] == 0):
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                           "identity.")
    axes = axes if input.ndim else None
    return (_extreme(xp, "aminmax", input, axes, keepdim, False), _extreme(xp, "aminmax", input, axes, keepdim, True))


@aminmax.vjp
def _(ctx, g_min, g_max):
    x = ctx.args[0]
    dim, keepdim = ctx.kwargs.get("dim"), ctx.kwargs.get("keepdim", False)
    axes = None if dim is None or x.dim() == 0 else (dim % x.dim(),)
    return (_even_grad(ctx, g_min, axes, keepdim, ctx.out[0]) + _even_grad(ctx, g_max, axes, keepdim, ctx.out[1]),)


def _arg_extreme(xp, name, x, dim, keepdim, largest):
    """Index of the first largest (smallest) element along ``dim`` (of the flattened input for None)."""
    _no_complex_input(name, x)
    if dim is None:
        nonempty(name, x, None, IndexError)
        i = xp.argmax(up(x)) if largest else xp.argmin(up(x))
        return xp.asarray(i).reshape((1,) * x.ndim if keepdim else ())
    d = one_dim(dim, x.ndim)
    if x.ndim == 0:
        return xp.zeros((), np.int64)
    nonempty(name, x, (d,))
    f = xp.argmax if largest else xp.argmin
    return xp.asarray(f(up(x), axis=d, keepdims=keepdim)).astype(np.int64, copy=False)


def _value_index(xp, name, x, dim, keepdim, largest):
    """(values, indices) of the largest (smallest) element along ``dim``; the first one on ties, NaN wins."""
    i = _arg_extreme(xp, name, x, dim, True, largest)
    v = xp.take_along_axis(x, i, axis=dim % x.ndim) if x.ndim else x.copy()
    if not keepdim and x.ndim:
        v, i = v.squeeze(dim % x.ndim), i.squeeze(dim % x.ndim)
    return v, i


def _max_min(name, largest, binary):
    def impl(xp, input, dim=None, keepdim=False):
        if hasattr(dim, "ndim"):  # max(input, other): the elementwise maximum
            return binary.fn(Tensor._wrap(input), Tensor._wrap(dim))._data
        _no_complex_input(name, input)
        if dim is None:
            return _extreme(xp, name, input, None, False, largest)
        return _value_index(xp, name, input, dim, keepdim, largest)
    impl.__doc__ = (f"The {'largest' if largest else 'smallest'} element; with ``dim``, (values, indices) "
                    f"along it; with a tensor, the elementwise {binary.name}.")
    return impl


def _max_min_vjp(binary):
    def vjp(ctx, g, *_):
        other = arg(ctx, 1, "dim")
        if isinstance(other, Tensor):
            return binary.vjp_fn(ctx, g)
        if other is None:
            return (_even_grad(ctx, g, None, False, ctx.out, nan_hits=True),)
        return (select_grad(ctx.args[0], other, ctx.out[1], g, arg(ctx, 2, "keepdim", False)),)
    return vjp


max_ = op("max", returns=("values", "indices"))(_max_min("max", True, maximum))
max_.vjp(_max_min_vjp(maximum))
min_ = op("min", returns=("values", "indices"))(_max_min("min", False, minimum))
min_.vjp(_max_min_vjp(minimum))


@op("argmax", differentiable=False)
def argmax(xp, input, dim=None, keepdim=False):
    """Index of the first largest element (of the flattened input when ``dim`` is None)."""
    if input.dtype == np.bool_:
        raise RuntimeError("argmax(): does not support bool input")
    return _arg_extreme(xp, "argmax", input, dim, keepdim, True)


@op("argmin", differentiable=False)
def argmin(xp, input, dim=None, keepdim=False):
    """Index of the first smallest element (of the flattened input when ``dim`` is None)."""
    if input.dtype == np.bool_:
        raise RuntimeError("argmin(): does not support bool input")
    return _arg_extreme(xp, "argmin", input, dim, keepdim, False)


# ---- logsumexp, all/any, count_nonzero -------------------------------------------------------------
# second pass of logsumexp: log(sum(exp(x - m))) with the max ``m`` broadcast, no exp(x - m) temporary
_LSE = _kernels.reduction_kernel("ember_logsumexp", "T x, T m", "T y", "exp(x - m)", "a + b", "y = log(a)", "0")


def floating(x):
    """``x`` as the default float dtype when it holds integers or bool (PyTorch's int-to-float ops)."""
    return x if inexact(x) else x.astype(D.get_default_dtype().np)


@op("logsumexp", result_layout="row_major")
def logsumexp(xp, input, dim, keepdim=False):
    """``log(sum(exp(input)))`` over ``dim``, computed stably by shifting by the maximum."""
    x = floating(input)
    rd, x = x.dtype, up(x)
    axes = reduce_dims(dim, x.ndim)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if x.size == 0:
            return xp.log(xp.sum(xp.exp(x), axis=axes, keepdims=keepdim)).astype(rd)
        m = xp.max(x, axis=axes, keepdims=True)
        m = xp.where(xp.isinf(m), 0, m).astype(x.dtype)  # all -inf (or an inf) slices: no shift
        if xp is np or x.dtype.kind == "c":
            r = xp.log(xp.sum(xp.exp(x - m), axis=axes, keepdims=True)) + m
        else:
            r = _LSE(x, m, axis=axes, keepdims=True) + m
    return (r if keepdim else r.reshape(reduced_shape(x.shape, axes))).astype(rd)


@logsumexp.vjp
def _(ctx, g):
    x = ctx.args[0]
    axes = reduce_dims(arg(ctx, 1, "dim"), x.dim())
    keepdim = arg(ctx, 2, "keepdim", False)
    return (unreduce(g, x.shape, axes, keepdim) * (x - unreduce(ctx.out, x.shape, axes, keepdim)).exp(),)


def _truth(xp, f, input, dim, keepdim):
    r = f(up(input), axis=reduce_dims(dim, input.ndim), keepdims=keepdim)
    return xp.asarray(r).astype(np.uint8 if input.dtype == np.uint8 else np.bool_, copy=False)


@op("all", differentiable=False, result_layout="row_major")
def all_(xp, input, dim=None, keepdim=False):
    """Whether every element over ``dim`` is nonzero (uint8 inputs give uint8, others bool)."""
    return _truth(xp, xp.all, input, dim, keepdim)


@op("any", differentiable=False, result_layout="row_major")
def any_(xp, input, dim=None, keepdim=False):
    """Whether some element over ``dim`` is nonzero (uint8 inputs give uint8, others bool)."""
    return _truth(xp, xp.any, input, dim, keepdim)


@op("count_nonzero", differentiable=False, result_layout="row_major")
def count_nonzero(xp, input, dim=None):
    """Number of nonzero elements over ``dim`` (int64)."""
    return xp.asarray(xp.count_nonzero(up(input), axis=reduce_dims(dim, input.ndim))).astype(np.int64)


# ---- norms -----------------------------------------------------------------------------------------
_SQUARES_BLOCK = 1 << 16  # elements per BLAS dot product of _sum_squares


def _sum_squares(x):
    """The sum of the squares of all elements of a real host array, as a float64: BLAS dot products of blocks
    (one pass, no temporaries; 5-10x NumPy's square-then-sum) added in float64, so that float32 sums of millions
    of elements stay within a few ulp (PyTorch's float32 norm of 2.5M elements errs by some 1e-5)."""
    flat = x.reshape(-1)
    n = flat.size
    if n <= _SQUARES_BLOCK:
        return float(np.dot(flat, flat))
    return math.fsum(float(np.dot(b, b)) for b in (flat[i:i + _SQUARES_BLOCK] for i in range(0, n, _SQUARES_BLOCK)))


def _vector_norm(xp, name, x, p, axes, keepdim):
    if p == 2 and xp is np and x.dtype.kind == "f" and (axes is None or len(axes) == x.ndim):
        r = np.sqrt(np.asarray(_sum_squares(x))).astype(x.dtype)  # (every element: one pass over the array)
        return r.reshape((1,) * x.ndim) if keepdim else r
    if p == 2 and x.dtype.kind == "f":
        return xp.sqrt(xp.sum(x * x, axis=axes, keepdims=keepdim))
    a = xp.abs(x)
    if p == float("inf") or p == -float("inf"):
        return _extreme(xp, name, a, axes, keepdim, p > 0)
    if p == 0:
        return xp.sum(a != 0, axis=axes, keepdims=keepdim).astype(a.dtype)
    if p == 1:
        return xp.sum(a, axis=axes, keepdims=keepdim)
    if p == 2:
        return xp.sqrt(xp.sum(a * a, axis=axes, keepdims=keepdim))
    with np.errstate(divide="ignore", over="ignore"):
        return xp.sum(a ** p, axis=axes, keepdims=keepdim) ** (1.0 / p)


def _norm_input(name, x, dtype):
    """The array a norm computes on: float or complex only, cast to ``dtype``, halves in float32."""
    if not inexact(x):
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got "
                           f"{TORCH_NAME[dtype_of(x)]}")
    if dtype is not None:
        if dtype.category < 2:
            raise RuntimeError(f"{name}: dtype should be floating point or complex, but got {TORCH_NAME[dtype]}")
        x = x.astype(D.storage(dtype), copy=False)
    return up(x), dtype_of(x).to_real()


@op("norm", result_layout="row_major")
def norm(xp, input, p="fro", dim=None, keepdim=False, *, dtype=None):
    """Vector p-norm over ``dim`` (all elements by default); "fro" is the 2-norm, "nuc" the nuclear norm."""
    x, rd = _norm_input("linalg.vector_norm", input, dtype)
    if isinstance(p, str):
        dims = (dim,) if isinstance(dim, int) else dim
        if p == "nuc":
            return _nuclear(xp, input, tuple(range(x.ndim)) if dims is None else dims, keepdim).astype(D.storage(rd))
        if p != "fro" or (dims is not None and len(dims) > 2):
            raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported." if p != "fro" else
                               f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dims))}")
        p = 2
    r = _vector_norm(xp, "linalg.vector_norm", x, p, reduce_dims(dim, x.ndim), keepdim)
    return xp.asarray(r).astype(D.storage(rd), copy=False)


def _norm_grad(x, g, p, axes, keepdim, value):
    """VJP of the vector p-norm ``value`` of ``x`` over ``axes`` (zero where the norm is zero)."""
    g, value = unreduce(g, x.shape, axes, keepdim), unreduce(value, x.shape, axes, keepdim)
    if p == 0:
        return x.new_zeros(x.shape)
    if p == float("inf") or p == -float("inf"):
        hit = x.abs() == value
        count = hit.sum(dim=axes, keepdim=True) if axes is not None else hit.sum()
        return where(hit, g / count, 0.0) * x.sgn()
    if p == 1:
        return g * x.sgn()
    # PyTorch's forms, zero where the norm is (or, for p < 1, the element is) zero; they divide before
    # masking, so the second order is NaN at a zero norm, as PyTorch's
    if p < 1:
        return x.sgn() * where(x == 0, 0.0, x.abs() ** (p - 1)) * g * value ** (1 - p)
    if p == 2:
        return g * where(value == 0, 0.0, x / value)
    scale = where(value == 0, 0.0, g / value ** (p - 1))
    return (x.sgn() * x.abs() ** (p - 1) if p < 2 else x * x.abs() ** (p - 2)) * scale


@norm.vjp
def _(ctx, g):
    x = ctx.args[0]
    p, dim = arg(ctx, 1, "p", "fro"), arg(ctx, 2, "dim")
    if p == "nuc":
        return (_nuclear_grad(x, g, tuple(range(x.dim())) if dim is None else dim, arg(ctx, 3, "keepdim", False)),)
    xc = x.to(ctx.out.dtype if ctx.out.dtype.is_floating_point and x.is_floating_point() else x.dtype)
    gx = _norm_grad(xc, g, 2 if p == "fro" else p, reduce_dims(dim, x.dim()), arg(ctx, 3, "keepdim", False),
                    ctx.out)
    return (gx.to(x.dtype),)


def _nuclear_dims(dims, ndim):
    if len(dims) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dims))}")
    a, b = (one_dim(d, ndim) for d in dims)
    if a == b:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dims[0]}, {dims[1]})")
    return a, b


def _nuclear(xp, x, dims, keepdim):
    """Sum of singular values of the matrices spanned by ``dims`` (a pair)."""
    if x.dtype in _HALF:
        raise RuntimeError(f"linalg.matrix_norm: Low precision dtypes not supported. Got {TORCH_NAME[dtype_of(x)]}")
    a, b = _nuclear_dims(dims, x.ndim)
    s = REGISTRY["linalg_svdvals"].impl(xp, xp.moveaxis(x, (a, b), (-2, -1))).sum(-1)
    return xp.expand_dims(s, tuple(sorted((a, b)))) if keepdim else s


def _nuclear_grad(x, g, dims, keepdim):
    """VJP of the nuclear norm: ``g * U @ Vh`` of the reduced SVD, moved back to ``dims``."""
    a, b = _nuclear_dims(dims, x.dim())
    u, _, vh = REGISTRY["linalg_svd"].fn(x.movedim((a, b), (-2, -1)), full_matrices=False)
    if keepdim:
        g = g.squeeze(max(a, b)).squeeze(min(a, b))
    return (u @ vh * g.unsqueeze(-1).unsqueeze(-1)).movedim((-2, -1), (a, b))


@op("nuclear_norm")
def nuclear_norm(xp, input, dim=None, keepdim=False):
    """Sum of the singular values of the matrix (or the matrices spanned by the pair ``dim``)."""
    if isinstance(dim, bool):  # nuclear_norm(input, keepdim)
        dim, keepdim = None, dim
    _norm_input("linalg.matrix_norm", input, None)
    if input.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    return _nuclear(xp, input, (-2, -1) if dim is None else dim, keepdim)


@nuclear_norm.vjp
def _(ctx, g):
    x, dim, keepdim = ctx.args[0], arg(ctx, 1, "dim"), arg(ctx, 2, "keepdim", False)
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    return (_nuclear_grad(x, g, (-2, -1) if dim is None else dim, keepdim),)


@op("frobenius_norm")
def frobenius_norm(xp, input, dim, keepdim=False):
    """2-norm of the elements over ``dim`` (at most two dims)."""
    return norm.impl(xp, input, "fro", dim, keepdim)


@frobenius_norm.vjp
def _(ctx, g):
    x = ctx.args[0]
    return (_norm_grad(x, g, 2, reduce_dims(arg(ctx, 1, "dim"), x.dim()), arg(ctx, 2, "keepdim", False), ctx.out),)


@op("dist")
def dist(xp, input, other, p=2):
    """p-norm of ``input - other`` (broadcast) over all elements."""
    if hasattr(other, "ndim") and other.dtype != input.dtype:
        raise RuntimeError(f"expected both inputs to have same dtype, but got {TORCH_NAME[dtype_of(input)]} and "
                           f"{TORCH_NAME[dtype_of(other)]}")
    x, rd = _norm_input("linalg.vector_norm", input, None)
    P.broadcast_shapes(input.shape, other.shape)
    d = x - up(other)
    return xp.asarray(_vector_norm(xp, "linalg.vector_norm", d, p, None, False)).astype(D.storage(rd))


@dist.vjp
def _(ctx, g):
    a, b = ctx.args[:2]
    gd = _norm_grad(a - b, g, arg(ctx, 2, "p", 2), None, False, ctx.out)
    return gd.sum_to_size(a.shape), (-gd).sum_to_size(b.shape)


# ---- scans -----------------------------------------------------------------------------------------
def scan(xp, ufunc, x, axis, f=None):
    """``ufunc.accumulate`` along ``axis``; log2(n) doubling passes of ``f(a, b)`` instead where there is no
    accumulate (most of CuPy's ufuncs; an ``f`` that is no ufunc)."""
    if xp is np and f is None:
        return ufunc.accumulate(x, axis=axis)
    f, n, step = f or getattr(xp, ufunc.__name__), x.shape[axis], 1
    lead = (slice(None),) * axis
    while step < n:
        nxt = x.copy()
        nxt[lead + (slice(step, None),)] = f(x[lead + (slice(step, None),)], x[lead + (slice(0, n - step),)])
        x, step = nxt, step * 2
    return x


def _cumulative(xp, input, dim, dtype, ufunc):
    d = one_dim(dim, input.ndim)
    acc, rd = _sum_dtypes(input, dtype)
    if rd is D.bool:
        raise not_implemented(f"{'cumsum' if ufunc is np.add else 'cumprod'}_out_cpu", rd)
    x = input.astype(D.storage(acc), copy=False)
    r = ufunc.accumulate(x, axis=d) if xp is np and x.ndim else (
        (xp.cumsum if ufunc is np.add else xp.cumprod)(x, axis=d) if x.ndim else x.copy())
    return r.astype(D.storage(rd), copy=False)


@op("cumsum", inplace=True, out_dtype="compute", result_layout="row_major")
def cumsum(xp, input, dim, *, dtype=None):
    """Running sum along ``dim``; integers and bool accumulate in int64, halves in float32."""
    return _cumulative(xp, input, dim, dtype, np.add)


@cumsum.vjp
def _(ctx, g):
    return (inverse_scan(g, arg(ctx, 1, "dim")),)


@op("cumprod", inplace=True, out_dtype="compute", result_layout="row_major")
def cumprod(xp, input, dim, *, dtype=None):
    """Running product along ``dim``; integers and bool accumulate in int64, halves in float32."""
    return _cumulative(xp, input, dim, dtype, np.multiply)


@cumprod.vjp
def _(ctx, g):
    # before the first zero of a slice: sum_{j>=i} g_j out_j / x_i; at it: the running product with that
    # zero taken as one; after it: zero (every product through it is zero)
    x, out = ctx.args[0], ctx.out
    if x.dim() == 0:
        return (g,)
    d = arg(ctx, 1, "dim") % x.dim()
    zero = x == 0
    if x.requires_grad and bool(zero.any()):  # building a graph: the form below is wrong past a first zero
        return (_cumprod_grad_table(x.to(out.dtype), g, d).to(x.dtype),)
    seen = zero.cumsum(d)
    first = zero & (seen == 1)
    before = seen == 0
    skip_first = where(first, 1.0, x).to(out.dtype).cumprod(d)
    at_first = inverse_scan(g * skip_first.conj(), d)
    pre = inverse_scan(g * out.conj(), d) / where(before, x, 1.0).conj()
    return (where(before, pre, where(first, at_first, 0.0)).to(x.dtype),)


def _cumprod_grad_table(x, g, d):
    """``grad_k = sum_{i>=k} g_i prod_{j<=i, j!=k} x_j`` from an n-by-n table of partial products: exact
    to every order with zeros in ``x`` (where the O(n) form's derivative is not), at O(n^2) cost."""
    k = arange(x.shape[d], device=x.device)
    rows = where(k.unsqueeze(-1) == k, 1.0, x.conj().movedim(d, -1).unsqueeze(-2)).cumprod(-1)  # row k omits x_k
    return (where(k.unsqueeze(-1) <= k, rows, 0.0) * g.movedim(d, -1).unsqueeze(-2)).sum(-1).movedim(-1, d)


def _cum_extreme(xp, input, dim, largest):
    """(running max/min, index where it was last reached) along ``dim``; NaN wins."""
    d = one_dim(dim, input.ndim)
    if input.ndim == 0 or input.size == 0:
        return input.copy(), xp.zeros(input.shape, np.int64)
    _no_complex_input("cummax" if largest else "cummin", input)
    x = up(input)
    v = scan(xp, np.maximum if largest else np.minimum, x, d)
    hit = (x == v) | xp.isnan(x) if x.dtype.kind == "f" else x == v
    pos = xp.arange(x.shape[d]).reshape((-1,) + (1,) * (x.ndim - 1 - d))
    idx = scan(xp, np.maximum, xp.where(hit, pos, 0), d)
    return v.astype(input.dtype), idx.astype(np.int64)


@op("cummax", returns=("values", "indices"), result_layout="row_major")
def cummax(xp, input, dim):
    """(running maximum, its index) along ``dim``."""
    return _cum_extreme(xp, input, dim, True)


@cummax.vjp
def _(ctx, g, *_):
    x = ctx.args[0]
    return (scatter_grad(x, arg(ctx, 1, "dim"), ctx.out[1], g),)


@op("cummin", returns=("values", "indices"), result_layout="row_major")
def cummin(xp, input, dim):
    """(running minimum, its index) along ``dim``."""
    return _cum_extreme(xp, input, dim, False)


cummin.vjp(cummax.vjp_fn)


def _logaddexp_complex(xp, a, b):
    """``log(exp(a) + exp(b))`` of complex arrays, from the operand of the larger real part (NumPy's logaddexp is
    real only)."""
    first = (a.real >= b.real) | xp.isnan(a.real)  # (a NaN is the larger: it spreads)
    big, small = xp.where(first, a, b), xp.where(first, b, a)
    return xp.where(xp.isneginf(big.real), big.real + 0j, big + xp.log1p(xp.exp(small - big)))


@op("logcumsumexp", result_layout="row_major")
def logcumsumexp(xp, input, dim):
    """Running ``log(sum(exp(input)))`` along ``dim``; of complex inputs too, as PyTorch's: imaginary parts on the
    branch its one-at-a-time sums give, an infinitely small sum as -inf with a zero imaginary part."""
    d = one_dim(dim, input.ndim)
    if not inexact(input):
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for '{TORCH_NAME[dtype_of(input)]}'")
    if input.ndim == 0:
        return input.copy()
    if input.dtype.kind == "c":
        return _logcumsumexp_complex(xp, input, d).astype(input.dtype)
    return scan(xp, np.logaddexp, up(input), d).astype(input.dtype)


def _logcumsumexp_complex(xp, x, d):
    """PyTorch adds one element at a time, ``big + log1p(exp(small - big))`` (big: the larger real part), and so
    leaves the imaginary part on a branch of its own, not the principal one. A doubling scan gives the real parts
    (and each partial sum's exponential); from them, which operand was big at each step and each step's principal
    log1p are known, and the imaginary parts are a running sum restarted where the new element was big."""
    r = scan(xp, None, x, d, lambda a, b: _logaddexp_complex(xp, a, b))
    n = x.shape[d]
    head, rest = (slice(None),) * d + (slice(0, 1),), (slice(None),) * d + (slice(1, None),)
    prev, new = r[(slice(None),) * d + (slice(0, n - 1),)], x[rest]
    restart = xp.concatenate([xp.ones(x[head].shape, bool), new.real > prev.real], axis=d)
    big, small = xp.where(restart[rest], new, prev), xp.where(restart[rest], prev, new)
    step = xp.log1p(xp.exp(small - big)).imag
    add = xp.concatenate([x[head].imag, xp.where(restart[rest], new.imag + step, step)], axis=d)
    empty = xp.isneginf(r.real)  # a sum of nothing so far: -inf with a zero imaginary part
    restart |= empty
    total = xp.cumsum(xp.where(empty, 0, add), axis=d)
    pos = xp.arange(n).reshape((-1,) + (1,) * (x.ndim - 1 - d))
    last = scan(xp, np.maximum, xp.where(restart, pos, 0), d)  # where the running sum restarted
    before = xp.where(last > 0, xp.take_along_axis(total, xp.maximum(last - 1, 0), axis=d), 0)
    r = r.real + 1j * (total - before)
    nan = xp.isnan(r.real) | xp.isnan(r.imag)
    return xp.where(nan, complex(np.nan, np.nan), xp.where(empty, r.real + 0j, r))


@logcumsumexp.vjp
def _(ctx, g):
    # grad_i = sum_{j>=i} g_j exp(x_i - out_j), summed in log space for each sign of g; the other sign's
    # entries get the lowest finite log (not -inf, whose derivatives would be NaN in the second order)
    x, out = ctx.args[0], ctx.out
    if x.dim() == 0 or x.numel() == 0:
        return (g,)
    d = arg(ctx, 1, "dim") % x.dim()
    if x.dtype.is_complex:  # sum_{j>=i} g_j conj(exp(x_i - out_j)), a running log-sum of complex logs
        return ((x.conj() + (g.log() - out.conj()).flip((d,)).logcumsumexp(d).flip((d,))).exp(),)
    log_abs, lowest = g.abs().log(), D.finfo(g.dtype).min

    def part(sign):
        return (x + (where(sign, log_abs, lowest) - out).flip((d,)).logcumsumexp(d).flip((d,))).exp()
    return (part(g > 0) - part(g < 0),)


# ---- differences and integrals ---------------------------------------------------------------------
def _slices(ndim, d, start, stop):
    return (slice(None),) * d + (slice(start, stop),)


@op("diff")
def diff(xp, input, n=1, dim=-1, prepend=None, append=None):
    """``n``-th forward difference along ``dim``, after joining ``prepend`` and ``append`` (bool: xor)."""
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    d = one_dim(dim, input.ndim)
    parts = [p if hasattr(p, "ndim") else xp.asarray(p) for p in (prepend, input, append) if p is not None]
    for p in parts:
        if p.ndim != input.ndim:
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    x = xp.concatenate([up(p) for p in parts], axis=d) if len(parts) > 1 else up(input)
    rd = xp.result_type(*parts) if len(parts) > 1 else input.dtype
    for _ in range(min(n, x.shape[d])):
        hi, lo = x[_slices(x.ndim, d, 1, None)], x[_slices(x.ndim, d, None, -1)]
        x = hi != lo if x.dtype == np.bool_ else hi - lo
    return x.astype(rd, copy=False)


@diff.vjp
def _(ctx, g):
    x = ctx.args[0]
    n, d = arg(ctx, 1, "n", 1), arg(ctx, 2, "dim", -1) % x.dim()
    pre, app = arg(ctx, 3, "prepend"), arg(ctx, 4, "append")
    lengths = [t.shape[d] for t in (pre, x, app) if isinstance(t, Tensor)]
    total = builtins.sum(lengths)
    if n >= total:
        g = g.new_zeros(x.shape[:d] + (total,) + x.shape[d + 1:])
    for _ in range(0 if n >= total else n):  # the transpose of one difference step
        pad = g.new_zeros(g.shape[:d] + (1,) + g.shape[d + 1:])
        g = cat([pad, g], d) - cat([g, pad], d)
    pieces, start = {}, 0
    for name, t in (("prepend", pre), ("input", x), ("append", app)):
        if isinstance(t, Tensor):
            pieces[name], start = g.narrow(d, start, t.shape[d]), start + t.shape[d]
    return positional(ctx, pieces, ("input", "n", "dim", "prepend", "append"))


def _trapezoid_terms(xp, y, x, dx, dim):
    """Per-interval areas along ``dim`` (moved to keep ``dim``) and the dim, for the trapezoid rule."""
    if y.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if y.dtype == np.bool_:
        raise RuntimeError("trapezoid: received a bool input for `y`, but bool is not supported")
    d = one_dim(dim, y.ndim)
    rd = P.array_result_type(y, x)
    rd = D.storage(rd if rd.category >= 2 else D.get_default_dtype())
    # elementwise in the result dtype (halves round at each step, as PyTorch's composite does)
    yf = y.astype(rd, copy=False)
    lead = (slice(None),) * d
    avg = (yf[lead + (slice(1, None),)] + yf[lead + (slice(0, -1),)]) / yf.dtype.type(2)
    if x is None:
        return up(avg * yf.dtype.type(1 if dx is None else dx)), d, rd
    xs = _trapezoid_x(x, y.shape, d).astype(rd, copy=False)
    return up(avg * (xs[lead + (slice(1, None),)] - xs[lead + (slice(0, -1),)])), d, rd


def _trapezoid_x(x, shape, d):
    """Sample points ``x`` shaped to broadcast against ``y`` along ``d`` (a 1-D ``x`` runs along ``d``)."""
    if x.ndim == 1:
        if x.shape[0] != shape[d]:
            raise RuntimeError("trapezoid: There must be one `x` value for each sample point")
        return x.reshape((1,) * d + (-1,) + (1,) * (len(shape) - 1 - d))
    return x.reshape((1,) * (len(shape) - x.ndim) + tuple(x.shape))


@op("trapezoid", method=False)
def trapezoid(xp, y, x=None, *, dx=None, dim=-1):
    """Trapezoid-rule integral of ``y`` along ``dim`` over sample points ``x`` (or spacing ``dx``, default 1)."""
    terms, d, rd = _trapezoid_terms(xp, y, x, dx, dim)
    return terms.sum(axis=d).astype(rd, copy=False)


def _trapezoid_grads(ctx, weights):
    """VJP of the trapezoid rules given ``weights`` (the output gradient each interval's area receives)."""
    y, x = ctx.args[0], arg(ctx, 1, "x")
    d = ctx.kwargs.get("dim", -1) % y.dim()
    n = y.shape[d]
    if n < 2:
        return y.new_zeros(y.shape), (None if x is None else x.new_zeros(x.shape))

    def pad(t, before):
        z = t.new_zeros(t.shape[:d] + (1,) + t.shape[d + 1:])
        return cat([z, t] if before else [t, z], d)
    if x is None:
        sp = (weights * (ctx.kwargs.get("dx") or 1) / 2).expand(y.shape[:d] + (n - 1,) + y.shape[d + 1:])
        return ((pad(sp, True) + pad(sp, False)).to(y.dtype), None)
    xs = x.reshape(_trapezoid_x(x, y.shape, d).shape)
    sp = weights * (xs.narrow(d, 1, n - 1) - xs.narrow(d, 0, n - 1)) / 2
    gy = (pad(sp, True) + pad(sp, False)).sum_to_size(y.shape)
    ga = weights * (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) / 2
    gx = (pad(ga, True) - pad(ga, False)).sum_to_size(xs.shape).reshape(x.shape)
    return gy.to(y.dtype), gx.to(x.dtype)


@trapezoid.vjp
def _(ctx, g):
    y = ctx.args[0]
    d = ctx.kwargs.get("dim", -1) % max(y.dim(), 1)
    return _trapezoid_grads(ctx, g.unsqueeze(d))[:len(ctx.args)]


@op("trapz", method=False)
def trapz(xp, y, x=None, *, dx=None, dim=-1):
    """Alias of trapezoid."""
    return trapezoid.impl(xp, y, x, dx=dx, dim=dim)


trapz.vjp(trapezoid.vjp_fn)


@op("cumulative_trapezoid", method=False, result_layout="row_major")
def cumulative_trapezoid(xp, y, x=None, *, dx=None, dim=-1):
    """Running trapezoid-rule integral of ``y`` along ``dim`` (one element shorter than ``y`` there)."""
    terms, d, rd = _trapezoid_terms(xp, y, x, dx, dim)
    return xp.cumsum(terms, axis=d).astype(rd, copy=False)


@cumulative_trapezoid.vjp
def _(ctx, g):
    d = ctx.kwargs.get("dim", -1) % max(ctx.args[0].dim(), 1)
    return _trapezoid_grads(ctx, inverse_scan(g, d))[:len(ctx.args)]
