"""Discrete Fourier transforms (``ember.fft``) through ``xp.fft``, with PyTorch's dtypes and norms; each VJP
is the adjoint transform."""
import numpy as np

from .. import _dtype as D
from .. import _factory
from .._parallel import pool
from .._registry import REGISTRY, op
from .linalg import tname

_SPLIT_MIN = 1 << 17  # elements below which a thread hand-off costs about what half the transform saves
_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}
_COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128}


def _wrap_dim(d, ndim):
    n = max(ndim, 1)
    if not -n <= d < n:
        if ndim == 0:
            raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n


def _plan(x, s, dim, default_dims, real_half=None):
    """(dims, sizes) of a transform: ``dim`` defaults to the last len(s) dims, else to ``default_dims``;
    ``real_half`` names a real-to-complex (or back) transform, which needs a dim to halve."""
    if isinstance(s, int):
        s = (s,)
    if isinstance(dim, int):
        dim = (dim,)
    if s is not None and dim is not None and len(s) != len(dim):
        raise RuntimeError("When given, dim and shape arguments must have the same length")
    if dim is None:
        dim = tuple(range(-len(s), 0)) if s is not None else default_dims
        if dim is None:
            dim = tuple(range(x.ndim))
    dims = tuple(_wrap_dim(d, x.ndim) for d in dim)
    if not dims and real_half:
        raise RuntimeError(f"{real_half} must transform at least one axis")
    if len(set(dims)) != len(dims):
        raise RuntimeError("FFT dims must be unique")
    return dims, (tuple(s) if s is not None else None)


def _norm(norm):
    if norm is None:
        return "backward"
    if norm not in _DUAL:
        raise RuntimeError(f"Invalid normalization mode: \"{norm}\"")
    return norm


def _real_input(name, x, real_only=False):
    """The array to transform: integers and bool become the default float; half precision is refused."""
    if x.dtype.kind == "V" or x.dtype == np.float16:
        raise RuntimeError(f"Unsupported dtype {tname(x)}")
    if x.dtype.kind in "biu":
        x = x.astype(D.get_default_dtype().np)
    if real_only and x.dtype.kind == "c":
        raise RuntimeError(f"{name} expects a real input tensor, but got {tname(x)}")
    return x


def _check_sizes(sizes, x, dims, last_out=None):
    """PyTorch's error for a transform length below one (``last_out``: the output length of a c2r dim)."""
    sizes = list(sizes or [x.shape[d] for d in dims])
    if last_out is not None:
        sizes[-1] = last_out
    for n in sizes:
        if n < 1:
            raise RuntimeError(f"Invalid number of data points ({n}) specified")


def _complex_of(x):
    return _COMPLEX.get(np.dtype(x.dtype), x.dtype)


def _transform(xp, f, x, s, dims, norm, sizes, dtype):
    """``f(x, s, dims, norm)``, whose result has ``sizes`` along ``dims`` and ``dtype``. NumPy's pocketfft
    transforms one vector at a time, compute-bound and without the GIL: a large batch (a dim not transformed)
    is split in two over the pool's threads (measured slower with one half on the calling thread)."""
    batch = next((d for d in range(x.ndim) if d not in dims and x.shape[d] > 1), None)
    if xp is not np or batch is None or x.size < _SPLIT_MIN:
        return xp.asarray(f(x, s=s, axes=dims, norm=norm), dtype, order="C")
    shape = list(x.shape)
    for d, n in zip(dims, sizes):
        shape[d] = n
    out = np.empty(shape, dtype)
    half = x.shape[batch] // 2
    parts = [(slice(None),) * batch + (p,) for p in (slice(None, half), slice(half, None))]
    for job in [pool().submit(f, x[p], s, dims, norm, out[p]) for p in parts]:
        job.result()
    return out


def _c2c(xp, name, x, s, dim, norm, inverse, default_dims):
    dims, s = _plan(x, s, dim, default_dims)
    x = _real_input(name, x)
    _check_sizes(s, x, dims)
    f = xp.fft.ifftn if inverse else xp.fft.fftn
    ct = _complex_of(x)
    sizes = s if s is not None else [x.shape[d] for d in dims]
    return _transform(xp, f, x.astype(ct, copy=False), s, dims, _norm(norm), sizes, ct)


def _r2c(xp, name, x, s, dim, norm, default_dims):
    dims, s = _plan(x, s, dim, default_dims, name)
    x = _real_input(name, x, real_only=True)
    _check_sizes(s, x, dims)
    sizes = list(s if s is not None else [x.shape[d] for d in dims])
    sizes[-1] = sizes[-1] // 2 + 1
    return _transform(xp, xp.fft.rfftn, x, s, dims, _norm(norm), sizes, _complex_of(x))


def _c2r(xp, name, x, s, dim, norm, default_dims):
    dims, s = _plan(x, s, dim, default_dims, name)
    x = _real_input(name, x)
    last = s[-1] if s is not None else 2 * (x.shape[dims[-1]] - 1)
    _check_sizes(s, x, dims, last)
    ct = _complex_of(x)
    sizes = s if s is not None else [x.shape[d] for d in dims[:-1]] + [last]
    return _transform(xp, xp.fft.irfftn, x.astype(ct, copy=False), sizes, dims, _norm(norm), sizes,
                      np.dtype(ct).char.lower())


def _one(n):
    return None if n is None else (n,)

# the 1-D transforms refuse half precision before looking at ``dim`` (the n-D ones after)


# ---- the transforms ---------------------------------------------------------------------------
@op("fft_fft", function=False, method=False)
def fft_fft(xp, input, n=None, dim=-1, norm=None):
    """1-D discrete Fourier transform along ``dim``."""
    return _c2c(xp, "fft", _real_input("fft", input), _one(n), dim, norm, False, None)


@op("fft_ifft", function=False, method=False)
def fft_ifft(xp, input, n=None, dim=-1, norm=None):
    """1-D inverse discrete Fourier transform along ``dim``."""
    return _c2c(xp, "ifft", _real_input("ifft", input), _one(n), dim, norm, True, None)


@op("fft_fft2", function=False, method=False)
def fft_fft2(xp, input, s=None, dim=(-2, -1), norm=None):
    """2-D discrete Fourier transform over ``dim``."""
    return _c2c(xp, "fft2", input, s, dim, norm, False, (-2, -1))


@op("fft_ifft2", function=False, method=False)
def fft_ifft2(xp, input, s=None, dim=(-2, -1), norm=None):
    """2-D inverse discrete Fourier transform over ``dim``."""
    return _c2c(xp, "ifft2", input, s, dim, norm, True, (-2, -1))


@op("fft_fftn", function=False, method=False)
def fft_fftn(xp, input, s=None, dim=None, norm=None):
    """N-D discrete Fourier transform (every dim by default)."""
    return _c2c(xp, "fftn", input, s, dim, norm, False, None)


@op("fft_ifftn", function=False, method=False)
def fft_ifftn(xp, input, s=None, dim=None, norm=None):
    """N-D inverse discrete Fourier transform (every dim by default)."""
    return _c2c(xp, "ifftn", input, s, dim, norm, True, None)


@op("fft_rfft", function=False, method=False)
def fft_rfft(xp, input, n=None, dim=-1, norm=None):
    """1-D transform of a real signal: the n // 2 + 1 non-negative frequencies."""
    return _r2c(xp, "rfft", _real_input("rfft", input), _one(n), dim, norm, None)


@op("fft_rfft2", function=False, method=False)
def fft_rfft2(xp, input, s=None, dim=(-2, -1), norm=None):
    """2-D transform of a real signal, halved along the last dim."""
    return _r2c(xp, "rfft2", input, s, dim, norm, (-2, -1))


@op("fft_rfftn", function=False, method=False)
def fft_rfftn(xp, input, s=None, dim=None, norm=None):
    """N-D transform of a real signal, halved along the last transformed dim."""
    return _r2c(xp, "rfftn", input, s, dim, norm, None)


@op("fft_irfft", function=False, method=False)
def fft_irfft(xp, input, n=None, dim=-1, norm=None):
    """Inverse of ``rfft``: a real signal of length ``n`` (2 * (m - 1) by default)."""
    return _c2r(xp, "irfft", _real_input("irfft", input), _one(n), dim, norm, None)


@op("fft_irfft2", function=False, method=False)
def fft_irfft2(xp, input, s=None, dim=(-2, -1), norm=None):
    """Inverse of ``rfft2``."""
    return _c2r(xp, "irfft2", input, s, dim, norm, (-2, -1))


@op("fft_irfftn", function=False, method=False)
def fft_irfftn(xp, input, s=None, dim=None, norm=None):
    """Inverse of ``rfftn``."""
    return _c2r(xp, "irfftn", input, s, dim, norm, None)


@op("fft_hfft", function=False, method=False)
def fft_hfft(xp, input, n=None, dim=-1, norm=None):
    """Transform of a Hermitian-symmetric signal given by its first half: a real result of length ``n``."""
    x = _real_input("hfft", input)
    return _c2r(xp, "hfft", xp.conj(x.astype(_complex_of(x), copy=False)), _one(n), dim, _DUAL[_norm(norm)], None)


@op("fft_ihfft", function=False, method=False)
def fft_ihfft(xp, input, n=None, dim=-1, norm=None):
    """Inverse of ``hfft``: the first half of the transform of a real signal."""
    return xp.conj(_r2c(xp, "ihfft", _real_input("ihfft", input), _one(n), dim, _DUAL[_norm(norm)], None))


# ---- VJPs: adjoint transforms -----------------------------------------------------------------
def _args(ctx, names_defaults):
    out = []
    for i, (name, default) in enumerate(names_defaults):
        out.append(ctx.kwargs.get(name, ctx.args[i + 1] if len(ctx.args) > i + 1 else default))
    return out


def _fit(g, x, dims):
    """``g`` cut or zero-padded along ``dims`` to ``x``'s sizes there (undoing a transform's n / s)."""
    return _fit_sizes(g, {d: x.shape[d] for d in dims})


def _fit_sizes(g, sizes):
    for d, want in sizes.items():
        have = g.shape[d]
        if have > want:
            g = g.narrow(d, 0, want)
        elif have < want:
            shape = list(g.shape)
            shape[d] = want - have
            g = REGISTRY["cat"].fn([g, _factory.zeros(tuple(shape), dtype=g.dtype, device=g.device)], d)
    return g


def _to_input(g, x):
    """A complex gradient for a real input is its real part."""
    return g if x.dtype.is_complex else REGISTRY["real"].fn(g).to(x.dtype)


def _sizes(s, one):
    return _one(s) if one else s


def _c2c_vjp(fwd, one, default_dims):
    def vjp(ctx, g):
        x = ctx.args[0]
        s, dim, norm = _args(ctx, (("n" if one else "s", None), ("dim", -1 if one else default_dims), ("norm", None)))
        dims, s = _plan(x, _sizes(s, one), dim, default_dims)
        adj = REGISTRY["fft_ifftn" if fwd else "fft_fftn"].fn(g, dim=dims, norm=_DUAL[_norm(norm)])
        return (_to_input(_fit(adj, x, dims), x),)
    return vjp


for _name, _fwd, _one_d, _dd in (("fft", True, True, None), ("ifft", False, True, None),
                                 ("fft2", True, False, (-2, -1)), ("ifft2", False, False, (-2, -1)),
                                 ("fftn", True, False, None), ("ifftn", False, False, None)):
    REGISTRY["fft_" + _name].vjp(_c2c_vjp(_fwd, _one_d, _dd))


def _r2c_grad(x, g, dims, s, norm):
    """Adjoint of rfftn: the half spectrum zero-filled to full length, inverse-transformed, real part."""
    g = _fit_sizes(g, {dims[-1]: s[-1] if s is not None else x.shape[dims[-1]]})
    adj = REGISTRY["fft_ifftn"].fn(g, dim=dims, norm=_DUAL[_norm(norm)])
    return REGISTRY["real"].fn(_fit(adj, x, dims)).to(x.dtype)


def _c2r_grad(x, g, dims, norm):
    """Adjoint of irfftn: rfftn of the gradient, interior bins of the halved dim doubled (each stands for
    itself and its mirror image)."""
    n = g.shape[dims[-1]]
    spec = REGISTRY["fft_rfftn"].fn(g, dim=dims, norm=_DUAL[_norm(norm)])
    m = spec.shape[dims[-1]]
    w = _factory.full((m,), 2.0, dtype=spec.dtype.to_real(), device=g.device)
    w[0] = 1.0
    if n % 2 == 0:
        w[m - 1] = 1.0
    shape = [1] * spec.dim()
    shape[dims[-1]] = m
    return _fit(spec * w.reshape(tuple(shape)), x, dims)


def _r2c_vjp(one, default_dims):
    def vjp(ctx, g):
        x = ctx.args[0]
        s, dim, norm = _args(ctx, (("n" if one else "s", None), ("dim", -1 if one else default_dims), ("norm", None)))
        dims, s = _plan(x, _sizes(s, one), dim, default_dims)
        return (_r2c_grad(x, g, dims, s, norm),)
    return vjp


def _c2r_vjp(one, default_dims):
    def vjp(ctx, g):
        x = ctx.args[0]
        s, dim, norm = _args(ctx, (("n" if one else "s", None), ("dim", -1 if one else default_dims), ("norm", None)))
        dims, _ = _plan(x, _sizes(s, one), dim, default_dims)
        return (_to_input(_c2r_grad(x, g, dims, norm), x),)
    return vjp


for _name, _one_d, _dd in (("rfft", True, None), ("rfft2", False, (-2, -1)), ("rfftn", False, None)):
    REGISTRY["fft_" + _name].vjp(_r2c_vjp(_one_d, _dd))
    REGISTRY["fft_i" + _name].vjp(_c2r_vjp(_one_d, _dd))


@fft_hfft.vjp
def _(ctx, g):
    x = ctx.args[0]
    n, dim, norm = _args(ctx, (("n", None), ("dim", -1), ("norm", None)))
    dims, _ = _plan(x, _one(n), dim, None)
    return (_to_input(_c2r_grad(x, g, dims, _DUAL[_norm(norm)]).conj(), x),)


@fft_ihfft.vjp
def _(ctx, g):
    x = ctx.args[0]
    n, dim, norm = _args(ctx, (("n", None), ("dim", -1), ("norm", None)))
    dims, s = _plan(x, _one(n), dim, None)
    return (_r2c_grad(x, g.conj(), dims, s, _DUAL[_norm(norm)]),)


# ---- shifts -----------------------------------------------------------------------------------
def _shift_dims(x, dim):
    if dim is None:
        return tuple(range(x.ndim))
    return tuple(_wrap_dim(d, x.ndim) for d in ((dim,) if isinstance(dim, int) else dim))


@op("fft_fftshift", function=False, method=False)
def fft_fftshift(xp, input, dim=None):
    """Move the zero frequency to the centre of ``dim`` (all dims by default)."""
    return xp.fft.fftshift(input, axes=_shift_dims(input, dim))


@op("fft_ifftshift", function=False, method=False)
def fft_ifftshift(xp, input, dim=None):
    """Inverse of ``fftshift``."""
    return xp.fft.ifftshift(input, axes=_shift_dims(input, dim))


@fft_fftshift.vjp
def _(ctx, g):
    return (fft_ifftshift.fn(g, *ctx.args[1:], **ctx.kwargs),)


@fft_ifftshift.vjp
def _(ctx, g):
    return (fft_fftshift.fn(g, *ctx.args[1:], **ctx.kwargs),)
