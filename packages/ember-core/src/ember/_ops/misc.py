"""Miscellaneous torch functions: ``gradient`` (finite differences), ``fill``, ``adjoint``, ``binomial``,
``histogramdd``, and small Tensor methods of PyTorch's legacy API (``new``, ``map_``/``apply_``,
``is_nonzero``, shared and pinned memory queries)."""
import warnings

import numpy as np

from .. import _backend, _factory
from .. import _dtype as D
from .. import _promotion as P
from .._random import _draws_for
from .._registry import op
from .._shared import is_shared, share_memory_
from .._size import Size
from .._tensor import Tensor
from .activation import tname, up
from .statistics import _bin_range, _check_histogram_input


# ---- gradient --------------------------------------------------------------------------------------
def _host(a):
    return np.asarray(a.get() if hasattr(a, "get") else a, dtype=np.float64)


def _stencil(x, edge_order):
    """The finite-difference operator along one dim with sample coordinates ``x`` (float64, n >= 2), as
    coefficients ``C`` of shape (n, 5): ``out[i] = sum_k C[i, k] f[i + k - 2]`` (second order inside,
    ``edge_order`` at the two ends, the formulas of non-uniform spacing)."""
    n = x.shape[0]
    C = np.zeros((n, 5))
    hd, hs = x[1:-1] - x[:-2], x[2:] - x[1:-1]
    C[1:-1, 1] = -hs / (hd * (hd + hs))
    C[1:-1, 2] = (hs - hd) / (hs * hd)
    C[1:-1, 3] = hd / (hs * (hd + hs))
    if edge_order == 1:
        C[0, 2:4] = np.array([-1, 1]) / (x[1] - x[0])
        C[-1, 1:3] = np.array([-1, 1]) / (x[-1] - x[-2])
    else:
        a, b = x[1] - x[0], x[2] - x[1]
        C[0, 2:] = [-(2 * a + b) / (a * (a + b)), (a + b) / (a * b), -a / (b * (a + b))]
        a, b = x[-2] - x[-3], x[-1] - x[-2]
        C[-1, :3] = [b / (a * (a + b)), -(a + b) / (a * b), (2 * b + a) / (b * (a + b))]
    return C


def _gradient_plan(input, spacing, dim, edge_order):
    """The dims and each one's coordinates (float64 host arrays), with PyTorch's argument checks."""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    nd = input.ndim
    dims = list(range(nd)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    for d in dims:
        if not -nd <= d < max(nd, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {d})")
    dims = [d % nd for d in dims]
    if len(set(dims)) != len(dims):
        twice = next(d for d in dims if dims.count(d) > 1)
        raise RuntimeError(f"dim {twice} appears multiple times in the list of dims")
    one = not isinstance(spacing, (list, tuple))
    if not one and len(spacing) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                           f"arguments to have the same length, but got a spacing argument of length {len(spacing)} "
                           f"and a dim argument of length {len(dims)}.")
    coords = []
    for i, d in enumerate(dims):
        n = input.shape[d]
        if n < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
        s = spacing if one else spacing[i]
        if hasattr(s, "ndim") and s.ndim == 1:
            if s.shape[0] != n:
                raise RuntimeError(f"torch.gradient expected each tensor to be on the same device, and the size of "
                                   f"spacing along dim {d} to be {n}, but got {s.shape[0]}")
            coords.append(_host(s))
        else:
            coords.append(float(_host(s)) * np.arange(n))
    return dims, coords


def _gradient_dtype(input, spacing):
    if input.dtype == np.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                           "`logical_xor()` operator instead.")
    tensors = [s for s in (spacing if isinstance(spacing, (list, tuple)) else [spacing])
               if hasattr(s, "ndim") and s.ndim == 1]
    rd = P.array_result_type(input, *tensors)
    return D.get_default_dtype() if rd.category < 2 else rd


def _shift(xp, f, k, axis):
    """``f[i + k]`` along ``axis`` (zero outside)."""
    n = f.shape[axis]
    r = xp.zeros_like(f)
    src = [slice(None)] * f.ndim
    dst = [slice(None)] * f.ndim
    src[axis], dst[axis] = slice(max(k, 0), n + min(k, 0)), slice(max(-k, 0), n - max(k, 0))
    r[tuple(dst)] = f[tuple(src)]
    return r


def _along(c, axis, ndim):
    return c.reshape((-1,) + (1,) * (ndim - axis - 1))


@op("gradient", method=False, result_layout="row_major")
def gradient(xp, input, *, spacing=1, dim=None, edge_order=1):
    """Finite-difference estimates of the derivative of ``input`` along each of ``dim`` (all by default), with
    uniform ``spacing`` (a number per dim) or sample coordinates (a 1-D tensor per dim)."""
    rd = _gradient_dtype(input, spacing)
    if input.ndim == 0:
        return ()
    dims, coords = _gradient_plan(input, spacing, dim, edge_order)
    f = up(input.astype(D.storage(rd), copy=False))
    out = []
    for d, x in zip(dims, coords):
        C = xp.asarray(_stencil(x, edge_order).astype(f.dtype))
        r = 0
        for k in range(5):  # terms with a zero coefficient are left out, so that inf and nan do not leak through
            c = _along(C[:, k], d, f.ndim)
            r = r + xp.where(c != 0, c * _shift(xp, f, k - 2, d), 0)
        out.append(r.astype(D.storage(rd), copy=False))
    return tuple(out)


@gradient.vjp
def _(ctx, *gs):
    x = ctx.args[0]
    spacing, edge_order = ctx.kwargs.get("spacing", 1), ctx.kwargs.get("edge_order", 1)
    unwrapped = [s._data if isinstance(s, Tensor) else s for s in spacing] \
        if isinstance(spacing, (list, tuple)) else spacing._data if isinstance(spacing, Tensor) else spacing
    dims, coords = _gradient_plan(x._data, unwrapped, ctx.kwargs.get("dim"), edge_order)
    total = None
    for g, d, c in zip(gs, dims, coords):
        if g is None:
            continue
        C = _factory.tensor(_stencil(c, edge_order), dtype=g.dtype, device=g.device)
        # the adjoint of out[i] = sum_k C[i, k] f[i + k - 2]: f[j] gets C[i, k] g[i] from i = j - k + 2
        for k in range(5):
            h = g * C[:, k].reshape((-1,) + (1,) * (g.dim() - d - 1))
            term = _shift_t(h, 2 - k, d)
            total = term if total is None else total + term
    return (total if total is not None else x * 0,)


def _shift_t(t, k, dim):
    """Tensor ``t[i + k]`` along ``dim`` (zero outside), in ember ops."""
    n = t.shape[dim]
    if k == 0:
        return t
    if abs(k) >= n:
        return t * 0
    z = t.narrow(dim, 0, abs(k)) * 0
    return _cat([t.narrow(dim, k, n - k), z] if k > 0 else [z, t.narrow(dim, 0, n + k)], dim)


def _cat(ts, dim):
    from .shape import cat
    return cat.fn(ts, dim)


# ---- fill, adjoint ---------------------------------------------------------------------------------
@op("fill", method=False)
def fill(xp, input, value):
    """A tensor shaped and typed like ``input`` filled with ``value`` (a number or a zero-dim tensor)."""
    if hasattr(value, "ndim"):
        if value.ndim:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                               f"dimensions.")
        value = value[()]
    return xp.full(input.shape, value, dtype=input.dtype)


@fill.vjp
def _(ctx, g):
    return g * 0, g.sum() if isinstance(ctx.args[1], Tensor) else None


@op("adjoint", view=True)
def adjoint(xp, input):
    """The conjugate transpose of the last two dims (a view)."""
    if input.ndim == 1:
        raise RuntimeError("tensor.adjoint() is only supported on matrices or batches of matrices. Got 1-D tensor.")
    if input.ndim == 0:
        warnings.warn("adjoint() is deprecated on 0-D tensors. Consider using x.conj().", UserWarning, stacklevel=3)
    t = xp.swapaxes(input, -1, -2) if input.ndim else input
    return t.conj() if t.dtype.kind == "c" else t


@adjoint.vjp
def _(ctx, g):
    return (adjoint.fn(g),)


def _H(self):
    if self.dim() not in (0, 2):
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.dim()}-D tensor."
                           + (" For batches of matrices, consider using tensor.mH" if self.dim() > 2 else ""))
    return adjoint.fn(self)


def _mH(self):
    if self.dim() == 1:
        raise RuntimeError("tensor.mH is only supported on matrices or batches of matrices. Got 1-D tensor.")
    return adjoint.fn(self)


Tensor.H, Tensor.mH = property(_H), property(_mH)


# ---- binomial, histogramdd -----------------------------------------------------------------------
@op("binomial", method=False, differentiable=False)
def binomial(xp, count, prob, generator=None):
    """Draws of the number of successes in ``count`` trials of probability ``prob`` (elementwise)."""
    if count.dtype.kind not in "fV":
        raise ValueError(f"binomial only supports floating-point dtypes for count, got: {tname(count)}")
    if prob.dtype.kind not in "fV":
        raise ValueError(f"binomial only supports floating-point dtypes for prob, got: {tname(prob)}")
    shape = P.broadcast_shapes(count.shape, prob.shape)
    n = xp.broadcast_to(up(count), shape).astype(np.int64)
    p = xp.clip(xp.broadcast_to(up(prob), shape), 0, 1)
    return xp.asarray(_draws_for(generator, count).binomial(n, p)).astype(count.dtype)


@op("histogramdd", differentiable=False, returns=("hist", "bin_edges"))
def histogramdd(xp, input, bins, range=None, weight=None, density=False):
    """A D-dimensional histogram of the rows of ``input`` (its last dim has the D coordinates): counts per
    cell and each dim's bin edges; ``bins`` is a count, a count per dim, or a 1-D tensor of edges per dim."""
    _check_histogram_input("histogramdd", input)
    if input.ndim < 2:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    D_ = input.shape[-1]
    x = up(input).reshape(-1, D_)
    bins = [bins] * D_ if isinstance(bins, int) else list(bins)
    if len(bins) != D_:
        raise RuntimeError(f"torch.histogramdd: expected {D_} sequences of bin edges for each dimension, but got "
                           f"{len(bins)}")
    if range is not None and len(range) != 2 * D_:
        raise RuntimeError(f"torch.histogramdd: for a {D_}-dimensional histogram range should have {2 * D_} "
                           f"elements, but got {len(range)}")
    edges, index, keep = [], 0, xp.ones(x.shape[0], bool)
    for d, b in enumerate(bins):
        col = x[:, d]
        if hasattr(b, "ndim"):
            e = up(b).astype(x.dtype)
        else:
            if b <= 0:
                raise RuntimeError(f"torch.histogramdd(): bins must be > 0, but got {b} for dimension {d}")
            lo, hi = (range[2 * d], range[2 * d + 1]) if range is not None else \
                ((float(col.min()), float(col.max())) if col.size else (0.0, 1.0))
            lo, hi = _bin_range(xp, "torch.histogramdd", col[:0], float(lo), float(hi), 0.5)
            e = xp.linspace(lo, hi, b + 1).astype(x.dtype)
        nb = e.shape[0] - 1
        keep &= (col >= e[0]) & (col <= e[-1])
        index = index * nb + xp.clip(xp.searchsorted(e, col, side="right") - 1, 0, nb - 1)
        edges.append(e)
    sizes = tuple(e.shape[0] - 1 for e in edges)
    wts = None if weight is None else up(weight).reshape(-1)[keep].astype(np.float64)
    hist = xp.bincount(index[keep], weights=wts, minlength=int(np.prod(sizes))).reshape(sizes).astype(x.dtype)
    if density:
        with np.errstate(divide="ignore", invalid="ignore"):
            widths = 1
            for d, e in enumerate(edges):
                widths = widths * xp.diff(e).reshape((-1,) + (1,) * (D_ - d - 1))
            hist = hist / (hist.sum() * widths)
    return hist.astype(input.dtype), tuple(e.astype(input.dtype) for e in edges)


# ---- legacy and memory Tensor methods ----------------------------------------------------------------
def is_nonzero(self):
    """The truth of a one-element tensor (PyTorch's error for none or several)."""
    n = self.numel()
    if n != 1:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous" if n == 0 else
                           "Boolean value of Tensor with more than one value is ambiguous")
    return bool(self._data.reshape(-1)[0])


def is_same_size(self, other):
    return tuple(self.shape) == tuple(other.shape)


def new(self, *args, device=None):
    """Legacy constructor in this tensor's dtype: ``new(*sizes)`` (uninitialised), ``new(data)`` (a copy of a
    sequence or tensor) or ``new()`` (empty)."""
    if len(args) == 1 and not isinstance(args[0], (int, np.integer, Size)):
        return _factory.tensor(args[0], dtype=self.dtype, device=device or self.device)
    return _factory.empty(*(args or (0,)), dtype=self.dtype, device=device or self.device)


def map_(self, other, callable):  # noqa: A002 - PyTorch's parameter name
    """Set each element to ``callable(self_element, other_element)`` (``other`` broadcast); CPU only."""
    _cpu_only(self, "map_")
    P.check_inplace_broadcast(self._data.shape, P.broadcast_shapes(self._data.shape, other._data.shape))
    f = np.frompyfunc(callable, 2, 1)
    self._data[...] = f(self._data, np.broadcast_to(other._data, self._data.shape)).astype(self._data.dtype)
    self._vc[0] += 1
    return self


def apply_(self, callable):  # noqa: A002
    """Set each element to ``callable(element)``; CPU only."""
    _cpu_only(self, "apply_")
    self._data[...] = np.frompyfunc(callable, 1, 1)(self._data).astype(self._data.dtype)
    self._vc[0] += 1
    return self


def _cpu_only(t, name):
    if type(t._data) is not np.ndarray:
        raise TypeError(f"{name} is only implemented on CPU tensors")
    if t._rg:
        raise RuntimeError(f"{name} cannot be used on a tensor that requires grad")


def pin_memory(self, device=None):
    """A copy in page-locked host memory when CuPy can allocate it (faster, asynchronous copies to CUDA);
    otherwise ``RuntimeError`` as PyTorch raises without a GPU. CUDA tensors cannot be pinned."""
    if type(self._data) is not np.ndarray:
        raise RuntimeError("cannot pin a CUDA tensor: only dense CPU tensors can be pinned")
    try:
        mem = _backend.cupy().cuda.alloc_pinned_memory(self._data.nbytes)
    except Exception as e:  # noqa: BLE001 - no CUDA driver: the same refusal as PyTorch's without a GPU
        raise RuntimeError("Cannot access accelerator device when none is available.") from e
    arr = np.frombuffer(mem, self._data.dtype, self._data.size).reshape(self._data.shape)
    arr[...] = self._data
    t = Tensor._wrap(arr)
    t._ext = {"pinned": True}
    return t


def is_pinned(self, device=None):
    return bool(self._ext and self._ext.get("pinned"))


def is_distributed(self):
    return False


Tensor.is_nonzero, Tensor.is_same_size, Tensor.new = is_nonzero, is_same_size, new
Tensor.map_, Tensor.apply_ = map_, apply_
Tensor.share_memory_, Tensor.is_shared, Tensor.pin_memory, Tensor.is_pinned = share_memory_, is_shared, pin_memory, \
    is_pinned
Tensor.is_distributed = is_distributed
