"""Matrix decompositions, inverses and solvers (LAPACK through ``xp.linalg``; LU written with batched
row operations since NumPy has none)."""
import builtins
import functools

import numpy as np

from .. import _factory
from .._registry import REGISTRY, op
from .linalg import H, need_float, tname


class LinAlgError(RuntimeError):
    """A matrix is singular or not positive definite: the decomposition or solve could not complete."""


class _EmptyHalf(Exception):
    """An empty half-precision input: PyTorch returns its (empty) result without reaching the missing kernel."""


def _check(name, a, kernel=None, square=True, low=False, ints=False):
    """PyTorch's checks of a linalg input: at least 2 dims, float or complex, square when asked, then the
    kernel's refusal of half precision (LAPACK has none) and, with ``ints``, of integers."""
    if low and (a.dtype.kind == "V" or a.dtype == np.float16):
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {tname(a)}")
    if a.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if not ints:
        need_float(name, a)
    if square and a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are {a.shape[-2]} by "
                           f"{a.shape[-1]} matrices")
    if kernel:
        _kernel(kernel, a)


def _kernel(kernel, a):
    """The missing-kernel error for half precision and integers; empty inputs never reach the kernel."""
    if a.dtype.kind in "iubV" or a.dtype == np.float16:
        if a.size == 0:
            raise _EmptyHalf(a.dtype)
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{tname(a)}'")


def _recast(r, dtype):
    if isinstance(r, tuple):
        return tuple(_recast(x, dtype) for x in r)
    return r.astype(dtype) if getattr(r, "dtype", None) == np.float32 else r  # int64/int32 results stay


def lop(name, **options):
    """Register a LAPACK-backed op: empty half-precision inputs are computed in float32 and cast back; the results
    are row-major (transposes and slices of LAPACK's column-major factors are not: a script may view() them)."""
    def register(impl):
        @functools.wraps(impl)
        def run(xp, *args, **kwargs):
            try:
                return impl(xp, *args, **kwargs)
            except _EmptyHalf as e:
                half = e.args[0]
                args = [a.astype(np.float32) if getattr(a, "dtype", None) == half else a for a in args]
                return _recast(impl(xp, *args, **kwargs), half)
        return op(name, result_layout="row_major", **options)(run)
    return register


def _batch_prefix(info, i):
    return f"(Batch element {i}): " if info.ndim else ""


def lu_factor_arrays(xp, a):
    """Partial-pivoting LU of a batch: (LU, 1-based pivots as int32, info as LAPACK's getrf gives them).
    The loop runs over the columns; each step updates the whole batch at once."""
    *batch, m, n = a.shape
    k = builtins.min(m, n)
    lu = a.reshape(-1, m, n).copy()
    b = lu.shape[0]
    rows = xp.arange(b)
    piv = xp.zeros((b, k), dtype=np.int32)
    info = xp.zeros(b, dtype=np.int32)
    for j in range(k):
        p = xp.argmax(xp.abs(lu[:, j:, j]), axis=1) + j
        piv[:, j] = p + 1
        rj, rp = lu[rows, j].copy(), lu[rows, p].copy()
        lu[rows, j], lu[rows, p] = rp, rj
        pivot = lu[:, j, j]
        zero = pivot == 0
        info = xp.where(zero & (info == 0), j + 1, info)
        scale = xp.where(zero, 1, pivot)
        lu[:, j + 1:, j] /= scale[:, None]
        lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j, None] * lu[:, j, None, j + 1:]
    return lu.reshape(a.shape), piv.reshape(*batch, k), info.reshape(batch)


def _singular_error(name, xp, a):
    """The LinAlgError PyTorch raises for the first singular matrix of a batch."""
    _, _, info = lu_factor_arrays(xp, a)
    flat = info.reshape(-1)
    i = int(xp.argmax(flat > 0))
    prefix = _batch_prefix(info, i)
    if name == "linalg.solve":
        return LinAlgError(f"torch.linalg.solve: {prefix}The solver failed because the input matrix is singular.")
    return LinAlgError(f"{name}: {prefix}The diagonal element {int(flat[i])} is zero, the inversion could not be "
                       "completed because the input matrix is singular.")


# ---- inverse ----------------------------------------------------------------------------------
def _inv(xp, name, a):
    _check(name, a, low=True)
    try:
        return xp.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _singular_error(name, xp, a) from None


@lop("linalg_inv", function=False, method=False)
def linalg_inv(xp, A):
    """Inverse of square matrices; singular ones raise LinAlgError."""
    return _inv(xp, "linalg.inv", A)


@lop("inverse")
def inverse(xp, input):
    """Inverse of square matrices (``linalg.inv``)."""
    return _inv(xp, "linalg.inv", input)


def _inv_vjp(ctx, g):
    inv = ctx.out
    return (-(H(inv) @ g @ H(inv)),)


linalg_inv.vjp(_inv_vjp)
inverse.vjp(_inv_vjp)


def _nonsingular(xp, a, info):
    """Singular matrices replaced by the identity, so that a batched LAPACK call completes."""
    bad = (info > 0)[..., None, None]
    return xp.where(bad, xp.eye(a.shape[-1], dtype=a.dtype), a)


@lop("linalg_inv_ex", function=False, method=False, returns=("inverse", "info"))
def linalg_inv_ex(xp, A, *, check_errors=False):
    """``linalg.inv`` that reports singular matrices in ``info`` instead of raising (unless ``check_errors``)."""
    _check("linalg.inv_ex", A, low=True)
    try:
        return xp.linalg.inv(A), xp.zeros(A.shape[:-2], dtype=np.int32)
    except np.linalg.LinAlgError:
        if check_errors:
            raise _singular_error("linalg.inv", xp, A) from None
    info = lu_factor_arrays(xp, A)[2]
    return xp.linalg.inv(_nonsingular(xp, A, info)), info


@linalg_inv_ex.vjp
def _(ctx, g, g_info=None):
    inv = ctx.out[0]
    return (-(H(inv) @ g @ H(inv)),)


# ---- determinants -----------------------------------------------------------------------------
@lop("det")
def det(xp, input):
    """Determinant of square matrices."""
    _check("linalg.det", input, "lu_cpu")
    return xp.asarray(xp.linalg.det(input))


@lop("linalg_det", function=False, method=False)
def linalg_det(xp, A):
    """Determinant of square matrices."""
    return det.impl(xp, A)


def _det_vjp(ctx, g):
    """g times the conjugated cofactor matrix conj(det) A^-H. Singular matrices (det 0) get zero, as in PyTorch,
    unless a graph is being built (create_graph): then, as PyTorch, the cofactors' SVD form
    conj(det U det Vh) U diag(product of the other singular values) Vh, which is differentiable there."""
    a, d = ctx.args[0], ctx.out
    grad = (g * d.conj()).unsqueeze(-1).unsqueeze(-1) * H(linalg_inv_ex.fn(a).inverse)
    singular = d == 0
    if a.numel() == 0 or not (a.requires_grad or g.requires_grad) or not bool(singular.any()):
        return (grad,)
    n = a.shape[-1]
    eye = _factory.eye(n, dtype=a.dtype, device=a.device)
    mask = singular.unsqueeze(-1).unsqueeze(-1)
    # the other matrices go through the SVD as diag(1..n), whose distinct singular values keep this unused
    # branch's derivatives finite
    stand_in = eye * _factory.arange(1, n + 1, dtype=a.dtype, device=a.device)
    u, s, vh = linalg_svd.fn(where_(mask, a, stand_in))
    others = where_(eye.bool(), 1.0, s.unsqueeze(-2)).prod(-1)  # prod over j != i of s_j
    scale = (g * (det.fn(u) * det.fn(vh)).conj()).unsqueeze(-1) * others
    return (where_(mask, (u * scale.unsqueeze(-2)) @ vh, grad),)


det.vjp(_det_vjp)
linalg_det.vjp(_det_vjp)


def _slogdet(xp, a):
    _check("linalg.slogdet", a, low=True)
    sign, logabs = xp.linalg.slogdet(a)
    return xp.asarray(sign), xp.asarray(logabs)


@lop("slogdet", returns=("sign", "logabsdet"))
def slogdet(xp, input):
    """Sign (or phase) and log of the absolute value of the determinant."""
    return _slogdet(xp, input)


@lop("linalg_slogdet", function=False, method=False, returns=("sign", "logabsdet"))
def linalg_slogdet(xp, A):
    """Sign (or phase) and log of the absolute value of the determinant."""
    return _slogdet(xp, A)


def _slogdet_vjp(ctx, g_sign, g_logabs):
    a = ctx.args[0]
    if g_logabs is None:
        return (None,)
    return (g_logabs.unsqueeze(-1).unsqueeze(-1) * H(linalg_inv.fn(a)),)


slogdet.vjp(_slogdet_vjp)
linalg_slogdet.vjp(_slogdet_vjp)


@lop("logdet")
def logdet(xp, input):
    """Log of the determinant: NaN for a negative determinant, -inf for a singular matrix."""
    _check("logdet", input, "lu_cpu", low=True)
    sign, logabs = xp.linalg.slogdet(input)
    if input.dtype.kind == "c":
        return xp.asarray(logabs + xp.log(sign))
    return xp.asarray(xp.where(sign < 0, np.nan, logabs)).astype(input.dtype)


@logdet.vjp
def _(ctx, g):
    a = ctx.args[0]
    if not a.dtype.is_complex:  # a negative determinant gives NaN, which passes no gradient
        g = where_(slogdet.fn(a).sign < 0, 0.0, g)
    return (g.unsqueeze(-1).unsqueeze(-1) * H(linalg_inv_ex.fn(a).inverse),)


# ---- solve ------------------------------------------------------------------------------------
def _solve_shapes(name, a, b, left):
    """B as a stack of matrices (vectors become one-column matrices) and whether it was a vector."""
    if a.dtype != b.dtype:
        raise RuntimeError(f"{name}: Expected A and B to have the same dtype, but found A of type {tname(a)} and B "
                           f"of type {tname(b)} instead")
    vector = left and (b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1]))
    bm = b[..., None] if vector else b
    n = a.shape[-1]
    if bm.ndim < 2:
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation XA = B ({n}x{n} and "
                           f"{bm.shape[0]}x1)")
    k = bm.shape[-2] if left else bm.shape[-1]
    if k != n:
        eq = "AX = B" if left else "XA = B"
        rows, cols = (bm.shape[-2], bm.shape[-1])
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation {eq} ({n}x{n} and {rows}x{cols})")
    return bm, vector


def _solve(xp, name, a, b, left, check=True):
    """(X, info) of AX = B (or XA = B), batch dims broadcast."""
    _check(name, a, "lu_cpu")
    bm, vector = _solve_shapes(name, a, b, left)
    if not left:
        a, bm = xp.swapaxes(a, -1, -2), xp.swapaxes(bm, -1, -2)
    batch = np.broadcast_shapes(a.shape[:-2], bm.shape[:-2])
    info = xp.zeros(a.shape[:-2], dtype=np.int32)
    try:
        x = xp.linalg.solve(xp.broadcast_to(a, batch + a.shape[-2:]), xp.broadcast_to(bm, batch + bm.shape[-2:]))
    except np.linalg.LinAlgError:
        if check:
            raise _singular_error("linalg.solve", xp, a) from None
        info = lu_factor_arrays(xp, a)[2]
        x = xp.linalg.solve(xp.broadcast_to(_nonsingular(xp, a, info), batch + a.shape[-2:]),
                            xp.broadcast_to(bm, batch + bm.shape[-2:]))
    if not left:
        x = xp.swapaxes(x, -1, -2)
    return x[..., 0] if vector else x, info


@lop("linalg_solve", function=False, method=False)
def linalg_solve(xp, A, B, *, left=True):
    """Solution X of AX = B (``left``) or XA = B; B may be a (batch of) vector(s); batch dims broadcast."""
    return _solve(xp, "linalg.solve", A, B, left)[0]


@lop("linalg_solve_ex", function=False, method=False, returns=("result", "info"))
def linalg_solve_ex(xp, A, B, *, left=True, check_errors=False):
    """``linalg.solve`` that reports singular matrices in ``info`` instead of raising."""
    return _solve(xp, "linalg.solve", A, B, left, check_errors)


def _solve_grads(a, b, x, g, left):
    """Gradients of X = A^-1 B (or B A^-1) for output gradient g."""
    gb = linalg_solve.fn(H(a), g, left=left)
    if left and (b.dim() == 1 or (b.dim() == a.dim() - 1 and tuple(b.shape) == tuple(a.shape[:-1]))):
        gb_m, x_m = gb.unsqueeze(-1), x.unsqueeze(-1)
    else:
        gb_m, x_m = gb, x
    ga = -(gb_m @ H(x_m)) if left else -(H(x_m) @ gb_m)
    return ga.sum_to_size(a.shape), gb.sum_to_size(b.shape)


@linalg_solve.vjp
def _(ctx, g):
    a, b = ctx.args[:2]
    return _solve_grads(a, b, ctx.out, g, ctx.kwargs.get("left", True))


@linalg_solve_ex.vjp
def _(ctx, g, g_info=None):
    a, b = ctx.args[:2]
    return _solve_grads(a, b, ctx.out[0], g, ctx.kwargs.get("left", True))


# ---- triangular solves ------------------------------------------------------------------------
def _triangle(xp, a, upper, unit):
    """The triangle of ``a`` a triangular solve reads (unit diagonal when asked)."""
    n = a.shape[-1]
    keep = xp.triu(xp.ones((n, n), dtype=bool), 1 if unit else 0) if upper else \
        xp.tril(xp.ones((n, n), dtype=bool), -1 if unit else 0)
    t = xp.where(keep, a, 0)
    return t + xp.eye(n, dtype=a.dtype) if unit else t


def _solve_triangular(xp, name, a, b, upper, left, unit):
    _check(name, a, ints=True)
    if a.dtype != b.dtype:
        raise RuntimeError(f"{name}: Expected A and B to have the same dtype, but found A of type {tname(a)} and B "
                           f"of type {tname(b)} instead")
    if b.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor B must have at least 2 dimensions.")
    t = _triangle(xp, a, upper, unit)
    if not left:
        t, b = xp.swapaxes(t, -1, -2), xp.swapaxes(b, -1, -2)
    if t.shape[-1] != b.shape[-2]:
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'}"
                           f" ({a.shape[-2]}x{a.shape[-1]} and {b.shape[-2]}x{b.shape[-1]})")
    _kernel("triangular_solve_cpu", a)
    batch = np.broadcast_shapes(t.shape[:-2], b.shape[:-2])
    with np.errstate(divide="ignore", invalid="ignore"):
        try:
            x = xp.linalg.solve(xp.broadcast_to(t, batch + t.shape[-2:]), xp.broadcast_to(b, batch + b.shape[-2:]))
        except np.linalg.LinAlgError:  # a zero on the diagonal: PyTorch lets inf/NaN through
            x = xp.full(batch + b.shape[-2:], np.nan, dtype=b.dtype)
    return x if left else xp.swapaxes(x, -1, -2)


@lop("linalg_solve_triangular", function=False, method=False)
def linalg_solve_triangular(xp, A, B, *, upper, left=True, unitriangular=False):
    """Solution of AX = B (or XA = B) for triangular A (only its ``upper`` or lower triangle is read)."""
    return _solve_triangular(xp, "linalg.solve_triangular", A, B, upper, left, unitriangular)


def _tri_mask(a, upper, strict):
    """Boolean mask of a's upper or lower triangle (``strict``: without the diagonal)."""
    n = a.shape[-1]
    i = _factory.arange(n, device=a.device)
    rows, cols = i.unsqueeze(-1), i
    return (rows < cols if strict else rows <= cols) if upper else (rows > cols if strict else rows >= cols)


def _solve_triangular_grads(a, b, x, g, upper, left, unit):
    gb = linalg_solve_triangular.fn(H(a), g, upper=not upper, left=left, unitriangular=unit)
    ga = -(gb @ H(x)) if left else -(H(x) @ gb)
    ga = ga * _tri_mask(a, upper, unit)
    return ga.sum_to_size(a.shape), gb.sum_to_size(b.shape)


@linalg_solve_triangular.vjp
def _(ctx, g):
    a, b = ctx.args[:2]
    k = ctx.kwargs
    return _solve_triangular_grads(a, b, ctx.out, g, k["upper"], k.get("left", True), k.get("unitriangular", False))


def _arg(ctx, i, name, default):
    return ctx.kwargs.get(name, ctx.args[i] if len(ctx.args) > i else default)


@lop("triangular_solve", returns=("solution", "cloned_coefficient"))
def triangular_solve(xp, input, A, upper=True, transpose=False, unitriangular=False):
    """(X, copy of A) with A X = input, or A^T X = input when ``transpose``."""
    if input.ndim < 2:
        raise RuntimeError("torch.triangular_solve: Expected b to have at least 2 dimensions, but it has "
                           f"{input.ndim} dimensions instead")
    t = _triangle(xp, A, upper, unitriangular) if A.ndim >= 2 else A
    if transpose:
        t, upper = xp.swapaxes(t, -1, -2), not upper
    x = _solve_triangular(xp, "torch.triangular_solve", t, input, upper, True, unitriangular)
    return x, A.copy()


@triangular_solve.vjp
def _(ctx, g, g_coef=None):
    b, a = ctx.args[:2]
    upper, transpose = _arg(ctx, 2, "upper", True), _arg(ctx, 3, "transpose", False)
    unit = _arg(ctx, 4, "unitriangular", False)
    x = ctx.out[0]
    a_used = a.mT if transpose else a
    gb = linalg_solve_triangular.fn(H(a_used), g, upper=upper == transpose, unitriangular=unit)
    ga = -(gb @ H(x))
    if transpose:
        ga = ga.mT
    ga = ga * _tri_mask(a, upper, unit)
    if g_coef is not None:
        ga = ga + g_coef
    return gb, ga


# ---- Cholesky ---------------------------------------------------------------------------------
def _not_pd_order(xp, a):
    """The order of the first leading minor that is not positive definite, per matrix (0 if none)."""
    n = a.shape[-1]
    k = xp.arange(1, n + 1)[:, None, None]
    i = xp.arange(n)
    inside = (i[None, :, None] < k) & (i[None, None, :] < k)
    minors = xp.where(inside, a[..., None, :, :], xp.eye(n, dtype=a.dtype))
    sign, logabs = xp.linalg.slogdet(minors)
    bad = (sign.real <= 0) | ~xp.isfinite(logabs)
    return xp.where(bad.any(-1), xp.argmax(bad, axis=-1) + 1, 0).astype(np.int32)


def _cholesky(xp, name, a, upper, check=True):
    _check(name, a, "cholesky_cpu")
    info = xp.zeros(a.shape[:-2], dtype=np.int32)
    try:
        low = xp.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        info = _not_pd_order(xp, a)
        if check:
            i = int(xp.argmax(info.reshape(-1) > 0))
            raise LinAlgError(f"{name}: {_batch_prefix(info, i)}The factorization could not be completed because the "
                              f"input is not positive-definite (the leading minor of order {int(info.reshape(-1)[i])}"
                              " is not positive-definite).") from None
        low = xp.linalg.cholesky(_nonsingular(xp, a, info))
    return (xp.conj(xp.swapaxes(low, -1, -2)) if upper else low), info


@lop("linalg_cholesky", function=False, method=False)
def linalg_cholesky(xp, A, *, upper=False):
    """Cholesky factor L (A = L L^H), or U = L^H when ``upper``; raises LinAlgError when A is not positive
    definite."""
    return _cholesky(xp, "linalg.cholesky", A, upper)[0]


@lop("linalg_cholesky_ex", function=False, method=False, returns=("L", "info"))
def linalg_cholesky_ex(xp, A, *, upper=False, check_errors=False):
    """``linalg.cholesky`` reporting in ``info`` the order of the first minor that is not positive definite."""
    return _cholesky(xp, "linalg.cholesky_ex", A, upper, check_errors)


@lop("cholesky")
def cholesky(xp, input, upper=False):
    """Cholesky factor (the older spelling of ``linalg.cholesky``)."""
    _check("cholesky", input, "cholesky_cpu", ints=True)
    return _cholesky(xp, "linalg.cholesky", input, upper)[0]


def _cholesky_grad(low, g_low):
    """Gradient of A for the factor L = cholesky(A) and its gradient."""
    phi = H(low) @ g_low
    phi = phi * _tri_mask(low, False, False)
    phi = phi - 0.5 * phi * _tri_mask(low, False, False) * _tri_mask(low, True, False)
    ga = linalg_solve_triangular.fn(H(low), phi, upper=True)
    ga = H(linalg_solve_triangular.fn(H(low), H(ga), upper=True))
    return 0.5 * (ga + H(ga))


def _chol_vjp(upper_of):
    def vjp(ctx, g, *rest):
        out = ctx.out if not isinstance(ctx.out, tuple) else ctx.out[0]
        if upper_of(ctx):
            return (_cholesky_grad(H(out), H(g)),)
        return (_cholesky_grad(out, g),)
    return vjp


linalg_cholesky.vjp(_chol_vjp(lambda c: c.kwargs.get("upper", False)))
linalg_cholesky_ex.vjp(_chol_vjp(lambda c: c.kwargs.get("upper", False)))
cholesky.vjp(_chol_vjp(lambda c: _arg(c, 1, "upper", False)))


def _cholesky_solve(xp, b, f, upper):
    if b.ndim < 2 or f.ndim < 2:
        raise RuntimeError("cholesky_solve: Expected b and A to have at least 2 dimensions")
    _kernel("cholesky_solve_cpu", f)
    low = xp.conj(xp.swapaxes(f, -1, -2)) if upper else f
    y = _solve_triangular(xp, "cholesky_solve", low, b, False, True, False)
    return _solve_triangular(xp, "cholesky_solve", xp.conj(xp.swapaxes(low, -1, -2)), y, True, True, False)


@lop("cholesky_solve")
def cholesky_solve(xp, input, input2, upper=False):
    """Solution X of A X = input, A given by its Cholesky factor ``input2``."""
    if input.dtype != input2.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type {tname(input)} and A of "
                           f"type {tname(input2)} instead.")
    return _cholesky_solve(xp, input, input2, upper)


def _factor_grad(f, ga, upper):
    """Gradient of the Cholesky factor f (A = L L^H or U^H U) from A's gradient (not symmetrised)."""
    gs = ga + H(ga)
    return (f @ gs) if upper else (gs @ f)


@cholesky_solve.vjp
def _(ctx, g):
    b, f = ctx.args[:2]
    upper = _arg(ctx, 2, "upper", False)
    gb = cholesky_solve.fn(g, f, upper)
    ga = -(gb @ H(ctx.out))
    return gb.sum_to_size(b.shape), _factor_grad(f, ga, upper).sum_to_size(f.shape)


@lop("cholesky_inverse")
def cholesky_inverse(xp, input, upper=False):
    """Inverse of A from its Cholesky factor."""
    _check("cholesky_inverse", input, "cholesky_inverse_out_cpu", ints=True)
    eye = xp.broadcast_to(xp.eye(input.shape[-1], dtype=input.dtype), input.shape)
    return _cholesky_solve(xp, eye, input, upper)


@cholesky_inverse.vjp
def _(ctx, g):
    f = ctx.args[0]
    upper = _arg(ctx, 1, "upper", False)
    inv = ctx.out
    return (_factor_grad(f, -(H(inv) @ g @ H(inv)), upper),)


# ---- QR ---------------------------------------------------------------------------------------
def _qr(xp, a, mode):
    _check("linalg.qr", a, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")
    if a.dtype.kind == "V" or a.dtype == np.float16:  # refused even when empty
        raise NotImplementedError(f"\"geqrf_cpu\" not implemented for '{tname(a)}'")
    if mode == "r":
        return xp.zeros(0, dtype=a.dtype), xp.linalg.qr(a, mode="r")
    q, r = xp.linalg.qr(a, mode=mode)
    return q, r


@lop("linalg_qr", function=False, method=False, returns=("Q", "R"))
def linalg_qr(xp, A, mode="reduced"):
    """QR decomposition (Householder, as LAPACK): ``mode`` "reduced", "complete" or "r"."""
    return _qr(xp, A, mode)


@lop("qr", returns=("Q", "R"))
def qr(xp, input, some=True):
    """QR decomposition, ``some=False`` giving the complete Q."""
    return _qr(xp, input, "reduced" if some else "complete")


def _tril_conj_sym(m):
    """Lower triangle of m mirrored (conjugated) onto the upper one."""
    low = m * _tri_mask(m, False, True)
    return low + H(low) + m * _tri_mask(m, False, False) * _tri_mask(m, True, False)


def _qr_grad(q, r, gq, gr):
    """Gradient of A for A = QR (reduced; A tall or square) from those of Q and R."""
    gq = gq if gq is not None else _factory.zeros(q.shape, dtype=q.dtype, device=q.device)
    gr = gr if gr is not None else _factory.zeros(r.shape, dtype=r.dtype, device=r.device)
    m = r @ H(gr) - H(gq) @ q
    b = gq + q @ _tril_conj_sym(m)
    return H(linalg_solve_triangular.fn(r, H(b), upper=True))


def _qr_vjp(mode_of):
    def vjp(ctx, gq, gr):
        a = ctx.args[0]
        q, r = ctx.out
        m, n = a.shape[-2], a.shape[-1]
        mode = mode_of(ctx)
        if mode == "r" or (mode == "complete" and m > n):
            raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                               "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through "
                               "linalg.qr." if mode == "r" else
                               "The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
        if m >= n:
            return (_qr_grad(q, r, gq, gr),)
        # wide A = Q [X | Y]: X's part as square, Y's through Q
        gr = gr if gr is not None else _factory.zeros(r.shape, dtype=r.dtype, device=r.device)
        y = a[..., m:]
        gy = q @ gr[..., m:]
        gq = (gq if gq is not None else _factory.zeros(q.shape, dtype=q.dtype, device=q.device)) + y @ H(gr[..., m:])
        gx = _qr_grad(q, r[..., :m], gq, gr[..., :m])
        return (REGISTRY["cat"].fn([gx, gy], -1),)
    return vjp


linalg_qr.vjp(_qr_vjp(lambda c: _arg(c, 1, "mode", "reduced")))
qr.vjp(_qr_vjp(lambda c: "reduced" if _arg(c, 1, "some", True) else "complete"))


@lop("geqrf", differentiable=False, returns=("a", "tau"))
def geqrf(xp, input):
    """LAPACK's compact QR: Householder vectors below R's diagonal, and their scales ``tau``."""
    _check("geqrf", input, "geqrf_cpu", square=False, ints=True)
    h, tau = xp.linalg.qr(input, mode="raw")
    return xp.ascontiguousarray(xp.swapaxes(h, -1, -2)), tau


def _householder(xp, a, tau, m_out):
    """Product H_1 ... H_k of the reflectors stored in ``a``'s columns, applied to the first ``m_out``
    columns of the identity; one batched rank-1 update per reflector."""
    *batch, m, n = a.shape
    k = tau.shape[-1]
    q = xp.broadcast_to(xp.eye(m, m_out, dtype=a.dtype), (*batch, m, m_out)).copy()
    rows = xp.arange(m)
    for i in reversed(range(k)):
        v = xp.where(rows > i, a[..., :, i], xp.where(rows == i, 1, 0)).astype(a.dtype)
        w = xp.conj(v)[..., None, :] @ q
        q -= tau[..., i, None, None] * v[..., :, None] * w
    return q


def _check_householder(name, a, tau):
    _check(name, a, square=False, ints=True)
    if a.shape[-2] < a.shape[-1]:
        raise RuntimeError(f"{name}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if tau.shape[-1] > a.shape[-1]:
        raise RuntimeError(f"{name}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if a.dtype != tau.dtype:
        raise RuntimeError(f"{name}: tau dtype {tname(tau)} does not match input dtype {tname(a)}")
    _kernel("orgqr_cpu", a)


@lop("linalg_householder_product", function=False, method=False)
def linalg_householder_product(xp, A, tau):
    """The first n columns of the product of Householder reflectors (LAPACK's orgqr)."""
    _check_householder("torch.linalg.householder_product", A, tau)
    return _householder(xp, A, tau, A.shape[-1])


@lop("orgqr")
def orgqr(xp, input, tau):
    """``linalg.householder_product``."""
    _check_householder("torch.linalg.householder_product", input, tau)
    return _householder(xp, input, tau, input.shape[-1])


def _householder_vjp(ctx, g):
    """Q = H_0 ... H_{k-1} E with H_i = I - tau_i v_i v_i^H: the forward's partial products are recomputed (in
    ember ops, so the gradient is differentiable again), then each reflector's share taken from the left."""
    a, tau = ctx.args[:2]
    m, n, k = a.shape[-2], a.shape[-1], tau.shape[-1]
    rows = _factory.arange(m, device=a.device).unsqueeze(-1)
    vs = [REGISTRY["where"].fn(rows > i, a[..., i:i + 1], (rows == i).to(a.dtype)) for i in range(k)]
    taus = [tau[..., i, None, None] for i in range(k)]
    q = _factory.eye(m, n, dtype=a.dtype, device=a.device).expand(*a.shape[:-2], m, n)
    partial = [None] * k  # partial[i] = H_{i+1} ... H_{k-1} E, what H_i is applied to
    for i in reversed(range(k)):
        partial[i] = q
        q = q - taus[i] * vs[i] @ (H(vs[i]) @ q)
    g_cols, g_tau = [], []
    for i in range(k):
        v, t, x = vs[i], taus[i], partial[i]
        w = H(v) @ x
        g_tau.append(-(H(v) @ g @ H(w))[..., 0, 0])
        g_v = -(t.conj() * (g @ H(w))) - t * (x @ (H(g) @ v))
        g_cols.append(REGISTRY["where"].fn(rows > i, g_v, 0.0))
        g = g - t.conj() * v @ (H(v) @ g)
    g_cols += [_factory.zeros(a.shape[:-1] + (1,), dtype=a.dtype, device=a.device)] * (n - k)
    return REGISTRY["cat"].fn(g_cols, -1), REGISTRY["stack"].fn(g_tau, -1)


linalg_householder_product.vjp(_householder_vjp)
orgqr.vjp(_householder_vjp)


@lop("ormqr", differentiable=False)
def ormqr(xp, input, input2, input3, left=True, transpose=False):
    """Product of ``input3`` with the full Q of a ``geqrf`` result (from the left or right, Q or Q^H)."""
    _check("ormqr", input, "ormqr_cpu", square=False)
    q = _householder(xp, input, input2, input.shape[-2])
    if transpose:
        q = xp.conj(xp.swapaxes(q, -1, -2))
    return q @ input3 if left else input3 @ q


# ---- SVD --------------------------------------------------------------------------------------
def _check_driver(driver):
    """PyTorch's error: ``driver=`` picks a cuSOLVER routine, which the CPU has not (ember's CUDA path neither)."""
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with "
                           "cuSOLVER backend.")


def _svd_input(xp, a):
    """``a`` made safe for LAPACK's SVD, and which of its matrices held infinities (None for none). NaN raises
    PyTorch's error for the first such matrix; a matrix with infinities, on which NumPy's gesdd never returns, is
    replaced by zeros, and the caller makes its singular values NaN, as PyTorch's are (its singular vectors are then
    a zero matrix's, finite, where PyTorch's are what LAPACK left: pinv of it is zero in both)."""
    finite = xp.isfinite(a).all(axis=(-2, -1))
    if bool(finite.all()):
        return a, None
    nan = xp.isnan(a).any(axis=(-2, -1))
    if bool(nan.any()):
        raise LinAlgError(f"linalg.svd: {_batch_prefix(nan, int(xp.argmax(nan.reshape(-1))))}The algorithm failed to "
                          "converge because the input matrix contained non-finite values.")
    return xp.where(finite[..., None, None], a, 0), ~finite


def _svd(xp, a, full):
    _check("linalg.svd", a, "linalg_svd_cpu", square=False)
    if a.size == 0:
        m, n = a.shape[-2:]
        k = builtins.min(m, n)
        mu, nv = (m, n) if full else (k, k)
        batch = a.shape[:-2]
        real = a.real.dtype
        return (xp.broadcast_to(xp.eye(m, mu, dtype=a.dtype), batch + (m, mu)).copy(), xp.zeros(batch + (k,), real),
                xp.broadcast_to(xp.eye(nv, n, dtype=a.dtype), batch + (nv, n)).copy())
    a, infinite = _svd_input(xp, a)
    u, s, vh = xp.linalg.svd(a, full_matrices=full)
    if infinite is not None:
        s[infinite] = np.nan
    return u, s, vh


@lop("linalg_svd", function=False, method=False, returns=("U", "S", "Vh"))
def linalg_svd(xp, A, full_matrices=True, *, driver=None):
    """Singular value decomposition A = U diag(S) Vh, singular values descending."""
    _check_driver(driver)
    return _svd(xp, A, full_matrices)


@lop("svd", returns=("U", "S", "V"))
def svd(xp, input, some=True, compute_uv=True):
    """SVD returning V (not Vh); ``compute_uv=False`` gives zero-filled U and V."""
    if not compute_uv:
        s = linalg_svdvals.impl(xp, input)
        m, n = input.shape[-2:]
        batch = input.shape[:-2]
        return xp.zeros(batch + (m, m), input.dtype), s, xp.zeros(batch + (n, n), input.dtype)
    u, s, vh = _svd(xp, input, not some)
    return u, s, xp.conj(xp.swapaxes(vh, -1, -2))


@lop("linalg_svdvals", function=False, method=False)
def linalg_svdvals(xp, A, *, driver=None):
    """Singular values, descending."""
    _check_driver(driver)
    _check("linalg.svd", A, "linalg_svd_cpu", square=False)
    if A.size == 0:
        return xp.zeros(A.shape[:-2] + (builtins.min(A.shape[-2:]),), A.real.dtype)
    A, infinite = _svd_input(xp, A)
    s = xp.linalg.svd(A, compute_uv=False)
    if infinite is not None:
        s[infinite] = np.nan
    return s


def svd_grad(u, s, vh, gu, gs, gvh):
    """Gradient of A from those of the reduced SVD's factors (any of them may be None)."""
    k = s.shape[-1]
    u, vh = u[..., :k], vh[..., :k, :]
    if gu is not None:
        gu = gu[..., :k]
    if gvh is not None:
        gvh = gvh[..., :k, :]
    v = H(vh)
    gv = H(gvh) if gvh is not None else None
    if gu is None and gv is None:
        return (u * gs.unsqueeze(-2)) @ vh
    eye = _factory.eye(k, dtype=s.dtype, device=s.device)
    s2 = s * s
    diff = s2.unsqueeze(-2) - s2.unsqueeze(-1)  # s_j^2 - s_i^2
    f = where_(eye.bool(), 0.0, 1.0 / (diff + eye))
    ret = _factory.zeros(tuple(s.shape) + (k,), dtype=u.dtype, device=u.device)
    sm = s.unsqueeze(-2)  # S as a row
    if gu is not None:
        uhgu = H(u) @ gu
        skew = uhgu - H(uhgu)
        ret = ret + (f * skew) * sm
    if gv is not None:
        vhgv = H(v) @ gv
        skew = vhgv - H(vhgv)
        ret = ret + s.unsqueeze(-1) * (f * skew)
    if gs is not None:
        ret = ret + eye * gs.unsqueeze(-1)
    ga = u @ ret @ vh
    m, n = u.shape[-2], v.shape[-2]
    if gu is not None and m > k:
        proj = gu - u @ (H(u) @ gu)
        ga = ga + (proj / sm) @ vh
    if gv is not None and n > k:
        proj = gv - v @ (H(v) @ gv)
        ga = ga + u @ H(proj / sm)
    return ga


def where_(c, a, b):
    return REGISTRY["where"].fn(c, a, b)


@linalg_svd.vjp
def _(ctx, gu, gs, gvh):
    u, s, vh = ctx.out
    return (svd_grad(u, s, vh, gu, gs, gvh),)


# without compute_uv, U and V are constant zeros: no gradient history (read by the autograd layer)
svd.constant_outputs = lambda args, kwargs: () if kwargs.get("compute_uv", len(args) < 3 or args[2]) else (0, 2)


@svd.vjp
def _(ctx, gu, gs, gv):
    u, s, v = ctx.out
    if not _arg(ctx, 2, "compute_uv", True):
        gu = gv = None
        u, s, vh = linalg_svd.fn(ctx.args[0], full_matrices=False)
        return (svd_grad(u, s, vh, None, gs, None),)
    return (svd_grad(u, s, H(v), gu, gs, H(gv) if gv is not None else None),)


@linalg_svdvals.vjp
def _(ctx, g):
    u, s, vh = linalg_svd.fn(ctx.args[0], full_matrices=False)
    return (svd_grad(u, s, vh, None, g, None),)


# ---- eigen decompositions ---------------------------------------------------------------------
def _eigh_check(a, uplo):
    _check("linalg.eigh", a, ints=True)
    if uplo not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {uplo}")
    _kernel("linalg_eigh_cpu", a)


@lop("linalg_eigh", function=False, method=False, returns=("eigenvalues", "eigenvectors"))
def linalg_eigh(xp, A, UPLO="L"):
    """Eigenvalues (ascending) and orthonormal eigenvectors of Hermitian matrices, reading one triangle."""
    _eigh_check(A, UPLO)
    w, v = xp.linalg.eigh(A, UPLO=UPLO)
    return w, v


@lop("linalg_eigvalsh", function=False, method=False)
def linalg_eigvalsh(xp, A, UPLO="L"):
    """Eigenvalues (ascending) of Hermitian matrices."""
    _eigh_check(A, UPLO)
    return xp.linalg.eigvalsh(A, UPLO=UPLO)


def eigh_grad(w, v, gw, gv):
    """Gradient of the Hermitian input from those of its eigenvalues and eigenvectors."""
    inner = _factory.zeros(tuple(w.shape) + (w.shape[-1],), dtype=v.dtype, device=v.device)
    if gv is not None:
        n = w.shape[-1]
        eye = _factory.eye(n, dtype=w.dtype, device=w.device)
        e = w.unsqueeze(-2) - w.unsqueeze(-1)  # w_j - w_i
        vhgv = H(v) @ gv
        inner = inner + where_(eye.bool(), 0.0, vhgv / (e + eye))
    if gw is not None:
        inner = inner + _factory.eye(w.shape[-1], dtype=v.dtype, device=v.device) * gw.unsqueeze(-1)
    ga = v @ inner @ H(v)
    return 0.5 * (ga + H(ga))


@linalg_eigh.vjp
def _(ctx, gw, gv):
    w, v = ctx.out
    return (eigh_grad(w, v, gw, gv),)


@linalg_eigvalsh.vjp
def _(ctx, g):
    w, v = linalg_eigh.fn(*ctx.args, **ctx.kwargs)
    return (eigh_grad(w, v, g, None),)


def _complex_of(a):
    return np.complex128 if a.dtype == np.float64 else np.complex64 if a.dtype == np.float32 else a.dtype


@lop("linalg_eig", function=False, method=False, differentiable=False, returns=("eigenvalues", "eigenvectors"))
def linalg_eig(xp, A):
    """Eigenvalues and unit-norm eigenvectors of general square matrices, as complex tensors."""
    _check("linalg.eig", A, "linalg_eig_cpu")
    w, v = xp.linalg.eig(A)
    ct = _complex_of(A)
    return w.astype(ct), v.astype(ct)


@lop("linalg_eigvals", function=False, method=False, differentiable=False)
def linalg_eigvals(xp, A):
    """Eigenvalues of general square matrices, as a complex tensor."""
    _check("linalg.eigvals", A, "linalg_eig_cpu")
    return xp.linalg.eigvals(A).astype(_complex_of(A))


# ---- pseudo-inverse, least squares, rank, condition number ------------------------------------
def _tolerance(xp, s, atol, rtol, m, n):
    """The cutoff below which singular values count as zero (PyTorch's atol/rtol rule)."""
    smax = s[..., :1] if s.shape[-1] else xp.zeros(s.shape[:-1] + (1,), s.dtype)
    if atol is None and rtol is None:
        rtol = np.finfo(s.dtype).eps * builtins.max(m, n)
    if rtol is None:  # an explicit positive atol alone sets the rule
        rtol = 0.0 if hasattr(atol, "ndim") or atol > 0 else np.finfo(s.dtype).eps * builtins.max(m, n)
    at = 0.0 if atol is None else (atol[..., None] if hasattr(atol, "ndim") and atol.ndim else atol)
    rt = rtol[..., None] if hasattr(rtol, "ndim") and rtol.ndim else rtol
    return xp.maximum(at, rt * smax)


def _pinv(xp, a, atol, rtol, hermitian):
    m, n = a.shape[-2:]
    if hermitian:
        w, v = xp.linalg.eigh(a)
        mag = xp.abs(w)
        order = xp.argsort(-mag, axis=-1)
        tol = _tolerance(xp, xp.take_along_axis(mag, order, -1), atol, rtol, m, n)
        winv = xp.where(mag > tol, 1 / xp.where(w == 0, 1, w), 0)
        return (v * winv[..., None, :]) @ xp.conj(xp.swapaxes(v, -1, -2))
    u, s, vh = _svd(xp, a, False)
    tol = _tolerance(xp, s, atol, rtol, m, n)
    sinv = xp.where(s > tol, 1 / xp.where(s == 0, 1, s), 0).astype(s.dtype)
    return xp.conj(xp.swapaxes(vh, -1, -2)) * sinv[..., None, :] @ xp.conj(xp.swapaxes(u, -1, -2))


def _pinv_check(name, a):
    if a.ndim < 2 or a.dtype.kind not in "fc" or a.dtype == np.float16:
        raise RuntimeError(f"{name}({tname(a)}{{{list(a.shape)}}}): expected a tensor with 2 or more dimensions of "
                           "float, double, cfloat or cdouble types")


@lop("linalg_pinv", function=False, method=False)
def linalg_pinv(xp, A, rcond=None, hermitian=False, *, atol=None, rtol=None):
    """Moore-Penrose pseudo-inverse through the SVD, dropping singular values under max(atol, rtol * s_max)."""
    _pinv_check("linalg.pinv", A)
    if rcond is not None:
        rtol = rcond
    return _pinv(xp, A, atol, rtol, hermitian)


@lop("pinverse")
def pinverse(xp, input, rcond=1e-15):
    """Pseudo-inverse, singular values under ``rcond * s_max`` dropped."""
    _pinv_check("linalg.pinv", input)
    return _pinv(xp, input, None, rcond, False)


def pinv_grad(a, p, g):
    """Gradient of A for P = pinv(A)."""
    m, n = a.shape[-2], a.shape[-1]
    em = _factory.eye(m, dtype=a.dtype, device=a.device)
    en = _factory.eye(n, dtype=a.dtype, device=a.device)
    ph, gh = H(p), H(g)
    return -(ph @ g @ ph) + (em - a @ p) @ gh @ (p @ ph) + (ph @ p) @ gh @ (en - p @ a)


@linalg_pinv.vjp
def _(ctx, g):
    return (pinv_grad(ctx.args[0], ctx.out, g),)


pinverse.vjp(linalg_pinv.vjp_fn)


@lop("linalg_lstsq", function=False, method=False, returns=("solution", "residuals", "rank", "singular_values"))
def linalg_lstsq(xp, A, B, rcond=None, *, driver=None):
    """Least-squares (minimum norm) solution of AX = B through the pseudo-inverse, with what ``driver`` reports:
    residuals (not for "gelsy"), rank (not for "gels") and singular values ("gelsd", "gelss")."""
    _check("torch.linalg.lstsq", A, "linalg_lstsq_cpu", square=False)
    if A.dtype != B.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
                           f"dtype {tname(A)} and other's dtype {tname(B)}")
    driver = driver or "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    vector = B.ndim == A.ndim - 1
    bm = B[..., None] if vector else B
    m, n = A.shape[-2:]
    if bm.shape[-2] != m:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    u, s, vh = _svd(xp, A, False)
    rtol = np.finfo(s.dtype).eps * builtins.max(m, n) if rcond is None or rcond < 0 else rcond
    tol = _tolerance(xp, s, None, rtol, m, n)
    keep = s > tol
    sinv = xp.where(keep, 1 / xp.where(s == 0, 1, s), 0).astype(s.dtype)
    x = xp.conj(xp.swapaxes(vh, -1, -2)) @ (sinv[..., :, None] * (xp.conj(xp.swapaxes(u, -1, -2)) @ bm))
    x = xp.where(xp.isnan(s).any(-1)[..., None, None], np.nan, x)  # (a matrix with infinities: no solution)
    rank = keep.sum(-1).astype(np.int64)
    real = A.real.dtype
    if driver != "gelsy" and m > n and bool((rank == n).all()):
        res = (xp.abs(A @ x - bm) ** 2).sum(-2).astype(real)
    else:
        res = xp.zeros(0, real)
    rank_out = rank if driver != "gels" else xp.zeros(0, np.int64)
    sv = s if driver in ("gelsd", "gelss") else xp.zeros(0, real)
    return (x[..., 0] if vector else x), (res[..., 0] if vector and res.size else res), rank_out, sv


@linalg_lstsq.vjp
def _(ctx, g, g_res=None, *rest):  # rank and singular values pass no gradient
    a, b = ctx.args[:2]
    x, res = ctx.out[:2]
    p = linalg_pinv.fn(a)
    vector = b.dim() == a.dim() - 1
    gm, bm, xm = (g.unsqueeze(-1), b.unsqueeze(-1), x.unsqueeze(-1)) if vector else (g, b, x)
    gb = H(p) @ gm
    ga = pinv_grad(a, p, gm @ H(bm))
    if g_res is not None and res.numel():
        # at the least-squares optimum the residuals depend on A and B only directly
        r2 = (a @ xm - bm) * (2 * (g_res.unsqueeze(-1) if vector else g_res).unsqueeze(-2))
        ga, gb = ga + r2 @ H(xm), gb - r2
    return ga.sum_to_size(a.shape), (gb.squeeze(-1) if vector else gb).sum_to_size(b.shape)


@lop("linalg_matrix_rank", function=False, method=False, differentiable=False)
def linalg_matrix_rank(xp, A, tol=None, hermitian=False, *, atol=None, rtol=None):
    """Number of singular values (|eigenvalues| when ``hermitian``) above max(atol, rtol * largest)."""
    _check("torch.linalg.matrix_rank", A, "linalg_svd_cpu", square=False)
    if tol is not None:
        atol, rtol = tol, 0.0
    if hermitian:
        s = -xp.sort(-xp.abs(xp.linalg.eigvalsh(A)), axis=-1)
    else:
        s = linalg_svdvals.impl(xp, A)
    tol_ = _tolerance(xp, s, atol, rtol, *A.shape[-2:])
    return (s > tol_).sum(-1).astype(np.int64)


# ---- LU ---------------------------------------------------------------------------------------
def _check_pivots(xp, name, info):
    """PyTorch's error for a zero on U's diagonal (``info`` > 0)."""
    bad = info.reshape(-1)
    if bad.size and bool((bad > 0).any()):
        i = int(xp.argmax(bad > 0))
        k = int(bad[i]) - 1
        raise RuntimeError(f"{name}: {_batch_prefix(info, i)}U[{k},{k}] is zero and using it on "
                           "lu_solve would result in a division by zero. If you still want to perform the "
                           "factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def _lu_check(name, a, pivot):
    _check(name, a, "lu_cpu", square=False, ints=True)
    if not pivot:
        raise RuntimeError(f"{name}: LU without pivoting is not implemented on the CPU")


@lop("linalg_lu_factor", function=False, method=False, differentiable=False, returns=("LU", "pivots"))
def linalg_lu_factor(xp, A, *, pivot=True):
    """Compact LU with partial pivoting (LAPACK's layout); raises when U has a zero on its diagonal."""
    _lu_check("torch.linalg.lu_factor", A, pivot)
    lu, piv, info = lu_factor_arrays(xp, A)
    _check_pivots(xp, "torch.linalg.lu_factor", info)
    return lu, piv


@lop("linalg_lu_factor_ex", function=False, method=False, differentiable=False, returns=("LU", "pivots", "info"))
def linalg_lu_factor_ex(xp, A, *, pivot=True, check_errors=False):
    """``linalg.lu_factor`` reporting zero pivots in ``info``."""
    _lu_check("torch.linalg.lu_factor_ex", A, pivot)
    lu, piv, info = lu_factor_arrays(xp, A)
    if check_errors:
        _check_pivots(xp, "torch.linalg.lu_factor_ex", info)
    return lu, piv, info


def _permutation(xp, piv, m):
    """Row order ``perm`` such that (P^T A)[i] = A[perm[i]], from LAPACK's 1-based swaps (a loop over the
    swaps, batched)."""
    batch = piv.shape[:-1]
    perm = xp.broadcast_to(xp.arange(m), batch + (m,)).reshape(-1, m).copy()
    p = piv.reshape(-1, piv.shape[-1]).astype(np.int64) - 1
    rows = xp.arange(perm.shape[0])
    for j in range(p.shape[1]):
        a, b = perm[:, j].copy(), perm[rows, p[:, j]].copy()
        perm[:, j], perm[rows, p[:, j]] = b, a
    return perm.reshape(batch + (m,))


def _unpack(xp, lu, piv, unpack_data=True, unpack_pivots=True):
    m, n = lu.shape[-2:]
    k = builtins.min(m, n)
    if unpack_pivots:
        perm = _permutation(xp, piv, m)
        eye = xp.eye(m, dtype=lu.dtype)
        pm = xp.swapaxes(eye[perm], -1, -2)
    else:
        pm = xp.zeros(0, lu.dtype)
    if unpack_data:
        low = xp.tril(lu[..., :, :k], -1) + xp.eye(m, k, dtype=lu.dtype)
        up = xp.triu(lu[..., :k, :])
    else:
        low = up = xp.zeros(0, lu.dtype)
    return pm, low, up


@lop("lu_unpack", method=False, differentiable=False, returns=("P", "L", "U"))
def lu_unpack(xp, LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) from a compact LU and its pivots."""
    if LU_pivots.dtype != np.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype. "
                           "Note: this function is intended to be used with the output produced by "
                           "torch.linalg.lu_factor")
    return _unpack(xp, LU_data, LU_pivots, unpack_data, unpack_pivots)


@lop("linalg_lu", function=False, method=False, differentiable=False, returns=("P", "L", "U"))
def linalg_lu(xp, A, *, pivot=True):
    """LU decomposition with partial pivoting as (P, L, U), A = P L U."""
    _lu_check("linalg.lu", A, pivot)
    lu, piv, _ = lu_factor_arrays(xp, A)
    return _unpack(xp, lu, piv)


@lop("lu", function=False, differentiable=False)
def lu(xp, input, pivot=True, get_infos=False):
    """(LU, pivots) or (LU, pivots, infos): the older spelling of ``linalg.lu_factor_ex``."""
    _lu_check("torch.lu", input, pivot)
    lu_, piv, info = lu_factor_arrays(xp, input)
    return (lu_, piv, info) if get_infos else (lu_, piv)


def _lu_solve(xp, lu_, piv, b, left, adjoint):
    _check("torch.linalg.lu_solve", lu_, "lu_solve_cpu")
    if b.ndim < 2:
        raise RuntimeError("torch.linalg.lu_solve: The input tensor B must have at least 2 dimensions.")
    if lu_.dtype != b.dtype:
        raise RuntimeError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type "
                           f"{tname(lu_)} and B of type {tname(b)} instead")
    pm, low, up = _unpack(xp, lu_, piv)
    a = pm @ low @ up
    if adjoint:
        a = xp.conj(xp.swapaxes(a, -1, -2))
    return _solve(xp, "torch.linalg.lu_solve", a, b, left, check=False)[0]


@lop("linalg_lu_solve", function=False, method=False, differentiable=False)
def linalg_lu_solve(xp, LU, pivots, B, *, left=True, adjoint=False):
    """Solution of AX = B (or XA = B, with A^H when ``adjoint``) from A's compact LU."""
    return _lu_solve(xp, LU, pivots, B, left, adjoint)


@lop("lu_solve", differentiable=False)
def lu_solve(xp, input, LU_data, LU_pivots):
    """Solution X of A X = input from A's compact LU (older argument order)."""
    return _lu_solve(xp, LU_data, LU_pivots, input, True, False)


# ---- tensor inverse / solve -------------------------------------------------------------------
def _prod(shape):
    r = 1
    for s in shape:
        r *= s
    return r


@lop("linalg_tensorinv", function=False, method=False)
def linalg_tensorinv(xp, A, ind=2):
    """Inverse of a tensor seen as a matrix: the first ``ind`` dims index rows, the rest columns."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = A.shape[:ind], A.shape[ind:]
    if _prod(rows) != _prod(cols):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {_prod(cols)} != {_prod(rows)}")
    return _inv(xp, "linalg.inv", A.reshape(_prod(rows), _prod(cols))).reshape(cols + rows)


@linalg_tensorinv.vjp
def _(ctx, g):
    a = ctx.args[0]
    ind = _arg(ctx, 1, "ind", 2)
    rows, cols = tuple(a.shape[:ind]), tuple(a.shape[ind:])
    inv = ctx.out.reshape(_prod(cols), _prod(rows))
    gm = g.reshape(_prod(cols), _prod(rows))
    return ((-(H(inv) @ gm @ H(inv))).reshape(a.shape),)


@lop("linalg_tensorsolve", function=False, method=False)
def linalg_tensorsolve(xp, A, B, dims=None):
    """Solution X of tensordot(A, X, X.ndim) = B."""
    if dims is not None:
        nd = A.ndim
        dims = [d % nd for d in dims]
        A = xp.moveaxis(A, dims, list(range(nd - len(dims), nd)))
    rows, cols = A.shape[:B.ndim], A.shape[B.ndim:]
    if _prod(rows) != _prod(cols):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {_prod(cols)} != {_prod(rows)}")
    x = _solve(xp, "linalg.solve", A.reshape(_prod(rows), _prod(cols)), B.reshape(_prod(rows)), True)[0]
    return x.reshape(cols)


@linalg_tensorsolve.vjp
def _(ctx, g):
    a, b = ctx.args[:2]
    dims = _arg(ctx, 2, "dims", None)
    if dims is not None:
        nd = a.dim()
        perm_to = [d % nd for d in dims]
        rest = [i for i in range(nd) if i not in perm_to]
        am = a.permute(rest + perm_to)
    else:
        am = a
    rows, cols = _prod(b.shape), _prod(ctx.out.shape)
    ga, gb = _solve_grads(am.reshape(rows, cols), b.reshape(rows), ctx.out.reshape(cols), g.reshape(cols), True)
    ga = ga.reshape(am.shape)
    if dims is not None:
        order = rest + perm_to
        ga = ga.permute([order.index(i) for i in range(nd)])
    return ga, gb.reshape(b.shape)

