"""Matrix and vector products, einsum, tensordot, kron, trace, cross, norms and matrix functions."""
import builtins
import math
import types

import numpy as np

from .. import _dtype as D
from .. import _factory, _parallel
from .. import _promotion as P
from .._halfcast import narrow, widen
from .._registry import REGISTRY, TORCH_NAME, op
from .._tensor import Tensor
from .activation import bound, grads
from .arithmetic import saves, wanted

_HALF = (np.dtype(np.float16), D.bfloat16.np)
# the C++ type names PyTorch's matmul errors print
_CPP = {D.bool: "bool", D.uint8: "unsigned char", D.int8: "signed char", D.int16: "short int", D.int32: "int",
        D.int64: "long int", D.float16: "c10::Half", D.bfloat16: "c10::BFloat16", D.float32: "float",
        D.float64: "double", D.complex64: "c10::complex<float>", D.complex128: "c10::complex<double>"}
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def tname(a):
    """PyTorch's name of an array's dtype (Float, Long, ...)."""
    return TORCH_NAME[D.from_np(a.dtype)]


def upcast(a):
    """Half-precision arrays as float32 (NumPy has no half BLAS; widen: NumPy's own float16 cast is slow), in
    their layout (a transposed operand stays a BLAS operand as it stands); others unchanged."""
    return widen(a) if a.dtype in _HALF else a


def _check_matmul(a, b):
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {a.ndim}D and {b.ndim}D")
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_CPP[D.from_np(a.dtype)]} != "
                           f"{_CPP[D.from_np(b.dtype)]}")
    if a.dtype == np.bool_ and a.size and b.size:  # empty products never reach the missing kernel
        raise NotImplementedError(f"\"{'dot' if a.ndim == b.ndim == 1 else 'addmm_impl_cpu_'}\" not implemented "
                                  "for 'Bool'")
    k_a = a.shape[-1]
    k_b = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if k_a != k_b:
        if a.ndim == 1 and b.ndim == 1:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to "
                               f"have the same number of elements, but got {a.shape[0]} and {b.shape[0]} elements "
                               "respectively")
        rows = a.shape[-2] if a.ndim > 1 else 1
        cols = b.shape[-1] if b.ndim > 1 else 1
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{k_a} and {k_b}x{cols})")


def _mm(xp, a, b):
    """xp.matmul, half precision computed in float32 and left there (callers round once at the end). Products over
    an inner dim of one (batches of outer products, as per-example weight gradients are) multiply with broadcasting:
    the same values, where NumPy's matmul takes a loop without BLAS, three times slower."""
    if a.ndim > 2 and b.ndim > 1 and a.shape[-1] == 1 and b.shape[-2] == 1:
        return _outer(upcast(a), upcast(b)) if xp is np else a * b
    return xp.matmul(upcast(a), upcast(b)) if xp is np else xp.matmul(a, b)


def _outer(a, b):
    """Batches of outer products ``a`` (..., m, 1) times ``b`` (..., 1, n): written with the longer of m and n
    innermost (else as the transpose of the other product: a view), and over the cores by the leading dim when
    large (the products only write memory: one core's writes take twice as long)."""
    if a.shape[-2] > b.shape[-1]:
        return _outer(b.mT, a.mT).mT
    shape = np.broadcast_shapes(a.shape, b.shape)
    out = np.empty(shape, np.result_type(a, b))
    if out.size < _parallel.MIN_SIZE or shape[0] < 2:
        return np.multiply(a, b, out=out)

    def part(lo, hi):
        np.multiply(*(t[lo:hi] if t.ndim == out.ndim and t.shape[0] > 1 else t for t in (a, b)), out=out[lo:hi])
    if _parallel._parts(part, (0, shape[0] // 2, shape[0])) is None:
        np.multiply(a, b, out=out)
    return out


def _rounded(r, dtype):
    return r if r.dtype == dtype else narrow(r, dtype)


def _factors_saved(args):
    """A product's gradient of one factor reads the other: keep a factor only if the other requires grad
    (a leading ``input`` of the add* ops is never read)."""
    *lead, a, b = args
    return ((None,) * len(lead) + (a if isinstance(b, Tensor) and b._rg else None,
                                   b if isinstance(a, Tensor) and a._rg else None))


@op("matmul", operators=("__matmul__", "__rmatmul__"))
def matmul(xp, input, other):
    """Matrix product with NumPy's broadcasting of batch dims; half precision multiplies in float32 and
    rounds the result (there is no half-precision BLAS on the CPU)."""
    _check_matmul(input, other)
    return _rounded(_mm(xp, input, other), input.dtype)


def H(t):
    """Conjugate transpose of the last two dims of a tensor (plain transpose for real ones)."""
    return t.mT.conj() if t.dtype.is_complex else t.mT


@matmul.vjp
@saves(out=False)  # both operands: their dims choose the formula
def _(ctx, g):
    a, b = ctx.args
    wa, wb = wanted(ctx)[:2]
    if a.dim() == 1 and b.dim() == 1:
        return g * b.conj() if wa else None, g * a.conj() if wb else None
    if a.dim() == 1:
        ga = (g.unsqueeze(-2) @ H(b)).squeeze(-2) if wa else None
        gb = a.conj().unsqueeze(-1) @ g.unsqueeze(-2) if wb else None
    elif b.dim() == 1:
        ga = g.unsqueeze(-1) @ b.conj().unsqueeze(-2) if wa else None
        gb = (H(a) @ g.unsqueeze(-1)).squeeze(-1) if wb else None
    elif b.dim() == 2 and a.dim() == 2 and not b.dtype.is_complex and not b.is_contiguous() and b.mT.is_contiguous():
        # b is a transposed matrix (linear's weight.t()): its gradient in the same layout, so the one
        # transposing back to the weight is contiguous and needs no strided copy
        ga, gb = g @ b.mT if wa else None, (g.mT @ a).mT if wb else None
    else:
        ga, gb = g @ H(b) if wa else None, H(a) @ g if wb else None
    return (ga.sum_to_size(a.shape) if wa else None), (gb.sum_to_size(b.shape) if wb else None)


# ---- the mm family ------------------------------------------------------------------------------
def _need_dims(a, n, what):
    if a.ndim != n:
        raise RuntimeError(f"{what} must be a {'matrix' if n == 2 else f'{n}D tensor'}")


@op("mm")
def mm(xp, input, mat2):
    """Product of two matrices."""
    _need_dims(input, 2, "self")
    _need_dims(mat2, 2, "mat2")
    return matmul.impl(xp, input, mat2)


def _check_bmm(b1, b2):
    _need_dims(b1, 3, "batch1")
    _need_dims(b2, 3, "batch2")
    if b1.dtype == np.bool_ and b1.size and b2.size:
        raise NotImplementedError("\"bmm\" not implemented for 'Bool'")
    if b1.dtype != b2.dtype:
        raise RuntimeError(f"expected scalar type {tname(b1)} but found {tname(b2)}")
    if b2.shape[:2] != (b1.shape[0], b1.shape[2]):
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{b1.shape[0]}, "
                           f"{b1.shape[2]}] but got: [{b2.shape[0]}, {b2.shape[1]}].")


@op("bmm")
def bmm(xp, input, mat2):
    """Batched product of two stacks of matrices with the same batch size."""
    _check_bmm(input, mat2)
    return _rounded(_mm(xp, input, mat2), input.dtype)


# ---- grouped products (mixture-of-experts layers) -----------------------------------------------
_GROUPED = (np.dtype(np.float32), np.dtype(np.float16), D.bfloat16.np)


def _check_grouped(a, b, offs, bias, out_dtype):
    """PyTorch's checks of a grouped product, in its order and with its messages."""
    for name, m in (("mat_a", a), ("mat_b", b)):
        if m.dtype not in _GROUPED:
            raise RuntimeError(f"Expected {name} to be Float32, BFloat16 or Float16 matrix, got {tname(m)}")
    for name, m in (("mat_a", a), ("mat_b", b)):
        if m.ndim not in (2, 3):
            raise RuntimeError(f"{name} has to be 2 or 3d")
    if (a.ndim == b.ndim == 3) != (offs is None):
        raise RuntimeError("Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d")
    if offs is not None and offs.ndim != 1:
        raise RuntimeError("offs has to be 1D")
    if a.shape[-1] != b.shape[-2]:
        raise RuntimeError("contraction dimension of mat_a and mat_b must match")
    if offs is not None and offs.dtype != np.int32:
        raise RuntimeError("Offsets have to be int32")
    if a.ndim == b.ndim == 3 and a.shape[0] != b.shape[0]:
        raise RuntimeError("batched dimension has to match")
    if a.ndim + b.ndim == 5 and offs.shape[0] != (a if a.ndim == 3 else b).shape[0]:
        raise RuntimeError("matrix batch sizes have to match")
    if bias is not None:
        raise RuntimeError("Bias not supported yet")
    if out_dtype is not None and D.storage(out_dtype) != a.dtype:
        raise RuntimeError("Grouped gemm output dtype must match `mat_a` dtype")
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_CPP[D.from_np(a.dtype)]} != "
                           f"{_CPP[D.from_np(b.dtype)]}")


@op("_grouped_mm", method=False)
def _grouped_mm(xp, input, mat2, offs=None, bias=None, out_dtype=None):
    """Products of groups of matrices, as a mixture-of-experts layer multiplies each expert's tokens by its weights.
    Two 3-d operands are a batched product. A 2-d operand is cut into groups along one dim by the int32 ``offs``
    (the group ends: group g is the slice offs[g-1]:offs[g]): the rows of a 2-d ``input`` times ``mat2[g]``
    (G, K, N); ``input[g]`` (G, M, K) times the columns of a 2-d ``mat2``; or, both 2-d, the groups of the inner
    dim, which gives (G, M, N) (a weight gradient). Half precision multiplies in float32 and rounds once. Output rows or
    columns past the last offset belong to no group and are zero (PyTorch leaves them unset); offsets out of order
    are sliced as PyTorch's CPU kernel slices them, in Python's manner, a later group overwriting an earlier one.
    Unlike PyTorch's CPU kernel, any strides are taken (it wants 16-byte-aligned ones)."""
    _check_grouped(input, mat2, offs, bias, out_dtype)
    if offs is None:
        return _rounded(_mm(xp, input, mat2), input.dtype)
    ragged = 0 if input.ndim == 2 and mat2.ndim == 3 else -1 if input.ndim == 3 else None
    ends = (offs if xp is np else offs.get()).tolist()
    if ragged == 0:
        shape = (input.shape[0], mat2.shape[-1])
    elif ragged == -1:
        shape = (input.shape[1], mat2.shape[-1])
    else:
        shape = (len(ends), input.shape[0], mat2.shape[-1])
    out = xp.zeros(shape, np.float32 if input.dtype in _HALF else input.dtype)
    # one BLAS product per group: the groups differ in size, and padding them to one batched product would cost up
    # to G times the work when the tokens go to few experts
    for g, (lo, hi) in enumerate(zip([0] + ends[:-1], ends)):
        if ragged == 0:
            out[lo:hi] = _mm(xp, input[lo:hi], mat2[g])
        elif ragged == -1:
            out[:, lo:hi] = _mm(xp, input[g], mat2[:, lo:hi])
        else:
            out[g] = _mm(xp, input[:, lo:hi], mat2[lo:hi])
    return _rounded(out, input.dtype)


def _check_mv(mat, vec):
    if mat.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {mat.ndim}, {vec.ndim}")
    if mat.dtype != vec.dtype:
        raise RuntimeError(f"expected scalar type {tname(mat)} but found {tname(vec)}")
    if mat.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({mat.shape[0]}), mat ({mat.shape[0]}x{mat.shape[1]}), "
                           f"vec ({vec.shape[0]})")
    if mat.dtype == np.bool_ and mat.size:
        raise NotImplementedError("\"addmv_impl_cpu\" not implemented for 'Bool'")


@op("mv")
def mv(xp, input, vec):
    """Matrix-vector product."""
    _check_mv(input, vec)
    return _rounded(_mm(xp, input, vec), input.dtype)


def _check_dot(name, a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.dtype != b.dtype:
        raise RuntimeError(f"{name} : expected both vectors to have same dtype, but found {tname(a)} and {tname(b)}")
    if a.dtype == np.bool_:
        raise NotImplementedError(f"\"{name}\" not implemented for 'Bool'")
    if a.shape != b.shape:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to have "
                           f"the same number of elements, but got {a.shape[0]} and {b.shape[0]} elements respectively")


@op("dot")
def dot(xp, input, tensor):
    """Inner product of two 1-D tensors (no conjugation)."""
    _check_dot("dot", input, tensor)
    return _rounded(_mm(xp, input, tensor), input.dtype)


@op("vdot")
def vdot(xp, input, other):
    """Inner product of two 1-D tensors, conjugating the first."""
    _check_dot("vdot", input, other)
    return _rounded(_mm(xp, xp.conj(input) if input.dtype.kind == "c" else input, other), input.dtype)


@op("inner")
def inner(xp, input, other):
    """Sum of products over the last dims of both tensors (a product when either is a scalar)."""
    if input.dtype != other.dtype:
        raise RuntimeError("both inputs should have same dtype")
    if input.ndim == 0 or other.ndim == 0:
        return _rounded(upcast(input) * upcast(other), input.dtype)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    if input.dtype == np.bool_:
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
    return _rounded(xp.tensordot(upcast(input), upcast(other), axes=([-1], [-1])), input.dtype)


def _promoted(a, b):
    return P.promote_types(D.from_np(a.dtype), D.from_np(b.dtype)).np


@op("outer")
def outer(xp, input, vec2):
    """Outer product of two 1-D tensors (operands promote)."""
    for name, v in (("self", input), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {v.ndim}-D")
    dt = _promoted(input, vec2)
    return _rounded(upcast(input.astype(dt, copy=False))[:, None] * upcast(vec2.astype(dt, copy=False))[None, :], dt)


@op("ger")
def ger(xp, input, vec2):
    """Alias of ``outer``."""
    return outer.impl(xp, input, vec2)


@dot.vjp
@saves(args=_factors_saved, out=False)
def _(ctx, g):
    a, b = ctx.args
    wa, wb = wanted(ctx)[:2]
    return g * b.conj() if wa else None, g * a.conj() if wb else None


@vdot.vjp
def _(ctx, g):
    a, b = ctx.args
    return b * g.conj(), g * a


@mm.vjp
@saves(args=_factors_saved, out=False)
def _(ctx, g):
    a, b = ctx.args
    wa, wb = wanted(ctx)[:2]
    return g @ H(b) if wa else None, H(a) @ g if wb else None


bmm.vjp(mm.vjp_fn)


@_grouped_mm.vjp
@saves(args=lambda args: _factors_saved(args[:2]) + tuple(args[2:]), out=False)
def _(ctx, g):
    """Each factor's gradient is a grouped product again, of the output gradient and the other factor transposed,
    over the same offsets (in the mode the shapes then give)."""
    call = bound(ctx, _grouped_mm)
    a, b, offs = call["input"], call["mat2"], call["offs"]
    wa, wb = wanted(ctx)[:2]
    return grads(ctx, _grouped_mm, input=_grouped_mm(g, b.mT, offs) if wa else None,
                 mat2=_grouped_mm(a.mT, g, offs) if wb else None)


@mv.vjp
@saves(args=_factors_saved, out=False)
def _(ctx, g):
    a, b = ctx.args
    wa, wb = wanted(ctx)[:2]
    return g.unsqueeze(-1) * b.conj() if wa else None, H(a) @ g if wb else None


@inner.vjp
def _(ctx, g):
    a, b = ctx.args
    if a.dim() == 0 or b.dim() == 0:
        return (g * b.conj()).sum_to_size(a.shape), (g * a.conj()).sum_to_size(b.shape)
    eq = _dims_equation(a.dim(), b.dim(), [a.dim() - 1], [b.dim() - 1])
    return einsum_grads(eq, [a, b], g)


@outer.vjp
@saves(args=_factors_saved, out=False)
def _(ctx, g):
    a, b = ctx.args
    wa, wb = wanted(ctx)[:2]
    # elementwise, not matmul: the operands may differ in dtype (outer promotes)
    return (g * b.conj()).sum(-1) if wa else None, (g * a.conj().unsqueeze(-1)).sum(0) if wb else None


ger.vjp(outer.vjp_fn)


# ---- products plus a scaled input: addmm, addbmm, baddbmm, addmv, addr --------------------------
def _scalar_for(v, dt):
    """beta/alpha in the tensor's dtype class: integers truncate as PyTorch's do."""
    if dt.kind in "iub":
        if isinstance(v, complex) or (isinstance(v, float) and not math.isfinite(v)):
            raise RuntimeError("value cannot be converted to type int64_t without overflow")
        return int(v) if dt.kind != "b" else builtins.bool(v)
    if isinstance(v, complex) and dt.kind != "c":
        raise RuntimeError("value cannot be converted to type float without overflow")
    return v


def _add_scaled(xp, name, input, prod, dtype, beta, alpha):
    """``beta * input + alpha * prod`` with ``input`` broadcast to the product's shape; ``beta == 0`` ignores
    ``input`` (NaN included), as PyTorch does."""
    if input.dtype != dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {tname(input)} and "
                           f"{TORCH_NAME[D.from_np(dtype)]}")
    try:
        base = xp.broadcast_to(input, prod.shape)  # checks the shapes (and serves bool)
    except ValueError:
        raise RuntimeError(f"The expanded size of the tensor ({prod.shape[-1]}) must match the existing size "
                           f"({input.shape[-1]}) at non-singleton dimension {input.ndim - 1}.  Target sizes: "
                           f"{list(prod.shape)}.  Tensor sizes: {list(input.shape)}") from None
    beta, alpha = _scalar_for(beta, dtype), _scalar_for(alpha, dtype)
    if dtype == np.bool_:
        r = (base & builtins.bool(beta)) | (prod & builtins.bool(alpha)) if beta else prod & builtins.bool(alpha)
    else:
        r = prod * alpha if alpha != 1 else prod
        if beta:  # every caller hands a fresh product: accumulate into it, converting ``input`` before it
            # broadcasts (a bias: its few elements, not the product's many)
            r += upcast(input) * beta if beta != 1 else upcast(input)
    return _rounded(xp.asarray(r), dtype)


@op("addmm", inplace=True)
def addmm(xp, input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)``."""
    _need_dims(mat1, 2, "mat1")
    _need_dims(mat2, 2, "mat2")
    _check_matmul(mat1, mat2)
    return _add_scaled(xp, "addmm", input, _mm(xp, mat1, mat2), mat1.dtype, beta, alpha)


@op("addbmm", inplace=True)
def addbmm(xp, input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``."""
    _check_bmm(batch1, batch2)
    return _add_scaled(xp, "addbmm", input, _mm(xp, batch1, batch2).sum(0), batch1.dtype, beta, alpha)


@op("baddbmm", inplace=True)
def baddbmm(xp, input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * (batch1 @ batch2)`` per batch item."""
    _check_bmm(batch1, batch2)
    return _add_scaled(xp, "baddbmm", input, _mm(xp, batch1, batch2), batch1.dtype, beta, alpha)


@op("addmv", inplace=True)
def addmv(xp, input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)``."""
    _check_mv(mat, vec)
    return _add_scaled(xp, "addmv", input, _mm(xp, mat, vec), mat.dtype, beta, alpha)


@op("addr", inplace=True)
def addr(xp, input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)``."""
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v.ndim}-D")
    if vec1.dtype != vec2.dtype:
        raise RuntimeError(f"expected scalar type {tname(vec1)} but found {tname(vec2)}")
    for name, v in (("beta", beta), ("alpha", alpha)):
        if vec1.dtype.kind in "iub" and isinstance(v, float):
            raise RuntimeError(f"For integral input tensors, argument {name} must not be a floating point number.")
    prod = vec1[:, None] & vec2[None, :] if vec1.dtype == np.bool_ else upcast(vec1)[:, None] * upcast(vec2)[None, :]
    return _add_scaled(xp, "addr", input, prod, vec1.dtype, beta, alpha)


def _scales(ctx):
    return ctx.kwargs.get("beta", 1), ctx.kwargs.get("alpha", 1)


def _scaled_vjp(product_vjp):
    """VJP of ``beta * input + alpha * product(a, b)`` from the product's VJP (``input``'s gradient in the
    product's shape: autograd sums it back)."""
    @saves(args=_factors_saved, out=False)
    def vjp(ctx, g):
        beta, alpha = _scales(ctx)
        want = wanted(ctx)
        inner = types.SimpleNamespace(args=ctx.args[1:3], kwargs={}, needs_input_grad=want[1:3])
        ga, gb = product_vjp(inner, g * alpha if alpha != 1 else g) if want[1] or want[2] else (None, None)
        return (g * beta if beta != 1 else g) if want[0] else None, ga, gb
    return vjp


addmm.vjp(_scaled_vjp(mm.vjp_fn))
baddbmm.vjp(_scaled_vjp(mm.vjp_fn))
addmv.vjp(_scaled_vjp(mv.vjp_fn))
addr.vjp(_scaled_vjp(outer.vjp_fn))


@addbmm.vjp
@saves(args=_factors_saved, out=False)
def _(ctx, g):
    beta, alpha = _scales(ctx)
    want = wanted(ctx)
    a, b = ctx.args[1:3]
    g2 = (g * alpha if alpha != 1 else g).unsqueeze(0)
    return ((g * beta if beta != 1 else g) if want[0] else None, g2 @ H(b) if want[1] else None,
            H(a) @ g2 if want[2] else None)


# ---- einsum and tensordot ---------------------------------------------------------------------
def _sublist(sub):
    return "".join("..." if s is Ellipsis else _LETTERS[s] for s in sub)


def _einsum_args(args):
    """(equation, operands, how the operands sit in ``args``) for the string and sublist forms."""
    if isinstance(args[0], str):
        if len(args) == 2 and isinstance(args[1], (list, tuple)):
            return args[0], list(args[1]), "list"
        return args[0], list(args[1:]), "varargs"
    n = len(args) // 2
    eq = ",".join(_sublist(s) for s in args[1:2 * n:2]) + ("->" + _sublist(args[-1]) if len(args) % 2 else "")
    ops = list(args[0:2 * n:2])
    return eq, ops, "sublist"


def _explicit(eq, shapes):
    """The equation with ellipses spelt out as letters and its output made explicit, checking
    labels and sizes with PyTorch's errors."""
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) > len(shapes):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(terms) < len(shapes):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    free = [c for c in _LETTERS if c not in eq]
    n_ell = 0
    for i, (t, shape) in enumerate(zip(terms, shapes)):
        labels = len(t.replace("...", ""))
        if "..." in t:
            n_ell = builtins.max(n_ell, len(shape) - labels)
        elif labels != len(shape):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({labels}) does not match the "
                               f"number of dimensions ({len(shape)}) for operand {i} and no ellipsis was given")
    ell = "".join(free[:n_ell])
    terms = [t.replace("...", ell[n_ell - (len(s) - len(t) + 3):] if n_ell else "") if "..." in t else t
             for t, s in zip(terms, shapes)]
    sizes = {}
    for i, (t, shape) in enumerate(zip(terms, shapes)):
        for c, n in zip(t, shape):
            seen = sizes.get(c)
            if seen is not None and seen != n and 1 not in (seen, n):
                kind = "is repeated for operand {i} but the sizes don't match, {n} != {seen}" if c in t[:t.index(c)] \
                    or t.count(c) > 1 else f"has size {n} for operand {i} which does not broadcast with previously " \
                    f"seen size {seen}"
                raise RuntimeError(f"einsum(): subscript {c} " + kind.format(i=i, n=n, seen=seen))
            sizes[c] = n if seen in (None, 1) else seen
    if arrow:
        out = rhs.replace("...", ell)
        for c in out:
            if c not in sizes:
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                                   "operand")
    else:
        counts = "".join(terms)
        out = ell + "".join(sorted(c for c in set(counts) if counts.count(c) == 1 and c not in ell))
    return terms, out, sizes


@op("einsum", method=False, result_layout="row_major")
def einsum(xp, *args):
    """Sum of products over labelled dims (string or sublist form), contracting through BLAS."""
    eq, ops, _ = _einsum_args(args)
    terms, out, _ = _explicit(eq, [o.shape for o in ops])
    dt = ops[0].dtype
    for o in ops[1:]:
        if o.dtype != dt:
            raise RuntimeError(f"expected scalar type {tname(ops[0])} but found {tname(o)}")
    if dt == np.bool_ and len(ops) > 1:
        raise NotImplementedError("\"bmm\" not implemented for 'Bool'")
    # pairwise from the left, as PyTorch contracts (BLAS for each pair)
    path = ["einsum_path"] + [(0, 1)] * (len(ops) - 1) if len(ops) > 1 and xp is np else len(ops) > 2
    r = xp.einsum(",".join(terms) + "->" + out, *[upcast(o) for o in ops], optimize=path)
    return _rounded(xp.asarray(r), dt if dt != np.bool_ else np.int64)


def einsum_grads(eq, tensors, g):
    """Gradients of ``einsum(eq, *tensors)`` for output gradient ``g``, each an einsum of ``g`` with the other
    operands; repeated labels multiply by an identity, labels only in that operand by a ones vector."""
    terms, out, sizes = _explicit(eq, [tuple(t.shape) for t in tensors])
    free = iter(c for c in _LETTERS if c not in "".join(terms) + out)
    grads = []
    for i, (t, x) in enumerate(zip(terms, tensors)):
        if not x.dtype.is_floating_point and not x.dtype.is_complex:
            grads.append(None)
            continue
        others = [(s, y.conj()) for j, (s, y) in enumerate(zip(terms, tensors)) if j != i]
        seen, target, extra = set(), "", []
        used = out + "".join(s for s, _ in others)
        for c in t:
            if c in seen:  # repeated label: a fresh label tied to it by an identity matrix
                f = next(free)
                extra.append((c + f, _factory.eye(sizes[c], dtype=x.dtype, device=x.device)))
                target += f
                continue
            seen.add(c)
            target += c
            if c not in used:
                extra.append((c, _factory.ones(sizes[c], dtype=x.dtype, device=x.device)))
        subs = [out] + [s for s, _ in others] + [s for s, _ in extra]
        r = einsum.fn(",".join(subs) + "->" + target, g, *[y for _, y in others], *[y for _, y in extra])
        grads.append(r.sum_to_size(x.shape) if tuple(r.shape) != tuple(x.shape) else r)
    return grads


@einsum.vjp
def _(ctx, g):
    eq, ops, layout = _einsum_args(ctx.args)
    grads = einsum_grads(eq, ops, g)
    if layout == "list":
        return None, grads
    if layout == "varargs":
        return (None, *grads)
    return tuple(x for gr in grads for x in (gr, None)) + (None,) * (len(ctx.args) - 2 * len(ops))


def _tensordot_dims(dims, na, nb):
    if hasattr(dims, "tolist"):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > na or dims > nb:
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        return list(range(na - dims, na)), list(range(dims))
    da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(da) != len(db):
        raise RuntimeError(f"both dimension lists should have same length, but got {len(da)} and {len(db)}")
    return [d % builtins.max(na, 1) for d in da], [d % builtins.max(nb, 1) for d in db]


def _dims_equation(na, nb, da, db):
    la = _LETTERS[:na]
    lb = list(_LETTERS[na:na + nb])
    for i, j in zip(da, db):
        lb[j] = la[i]
    lb = "".join(lb)
    return la + "," + lb + "->" + "".join(c for c in la if c not in lb) + "".join(c for c in lb if c not in la)


@op("tensordot", method=False)
def tensordot(xp, a, b, dims=2):
    """Contract the given dims of ``a`` with those of ``b`` (the last/first ``dims`` ones for an int)."""
    if a.dtype != b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    da, db = _tensordot_dims(dims, a.ndim, b.ndim)
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {i} and "
                               f"second has size {b.shape[j]} in dim {j}")
    if a.dtype == np.bool_:
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
    return _rounded(xp.asarray(xp.tensordot(upcast(a), upcast(b), axes=(da, db))), a.dtype)


@tensordot.vjp
def _(ctx, g):
    a, b = ctx.args[:2]
    dims = ctx.kwargs.get("dims", ctx.args[2] if len(ctx.args) > 2 else 2)
    da, db = _tensordot_dims(dims, a.dim(), b.dim())
    return (*einsum_grads(_dims_equation(a.dim(), b.dim(), da, db), [a, b], g), None)


@op("kron")
def kron(xp, input, other):
    """Kronecker product (operands promote; the shorter shape is padded with leading ones)."""
    dt = _promoted(input, other)
    return _rounded(xp.kron(upcast(input.astype(dt, copy=False)), upcast(other.astype(dt, copy=False))), dt)


@kron.vjp
def _(ctx, g):
    a, b = ctx.args
    n = builtins.max(a.dim(), b.dim())
    sa, sb = (1,) * (n - a.dim()) + tuple(a.shape), (1,) * (n - b.dim()) + tuple(b.shape)
    la, lb = _LETTERS[:n], _LETTERS[n:2 * n]
    gr = g.reshape(tuple(s for pair in zip(sa, sb) for s in pair))
    gl = "".join(x + y for x, y in zip(la, lb))
    ga = einsum.fn(f"{gl},{lb}->{la}", gr, b.reshape(sb).conj().to(g.dtype)).reshape(a.shape)
    gb = einsum.fn(f"{gl},{la}->{lb}", gr, a.reshape(sa).conj().to(g.dtype)).reshape(b.shape)
    return (ga if a.dtype.is_floating_point or a.dtype.is_complex else None,
            gb if b.dtype.is_floating_point or b.dtype.is_complex else None)


@op("trace")
def trace(xp, input):
    """Sum of the main diagonal of a matrix (integers sum to int64)."""
    if input.dtype == np.bool_:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    dt = np.int64 if input.dtype.kind in "iu" else input.dtype
    return xp.asarray(xp.trace(upcast(input).astype(dt if dt not in _HALF else np.float32, copy=False))).astype(dt)


@trace.vjp
def _(ctx, g):
    (x,) = ctx.args
    return (g * _factory.eye(x.shape[0], x.shape[1], dtype=g.dtype, device=g.device),)


# ---- cross, vecdot ----------------------------------------------------------------------------
def _cross(xp, a, b, dim):
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected scalar type {tname(a)} but found {tname(b)}")
    if a.ndim != b.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions. Got {a.ndim} and {b.ndim}")
    n = builtins.max(a.ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    if a.shape[dim] != 3 or b.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[dim]} and "
                           f"{b.shape[dim]}")
    shape = P.broadcast_shapes(a.shape, b.shape)
    # half precision rounds after each product and difference, as PyTorch's kernel does
    return xp.asarray(xp.cross(xp.broadcast_to(a, shape), xp.broadcast_to(b, shape), axis=dim))


@op("linalg_cross", function=False, method=False, result_layout="row_major")
def linalg_cross(xp, input, other, *, dim=-1):
    """Cross product of 3-vectors along ``dim``, batch dims broadcast."""
    return _cross(xp, input, other, dim)


@op("cross", result_layout="row_major")
def cross(xp, input, other, dim=None):
    """Cross product along ``dim`` (by default the first dim of size 3)."""
    if dim is None:
        dim = next((i for i, (m, n) in enumerate(zip(input.shape, other.shape)) if m == n == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return _cross(xp, input, other, dim)


def _cross_grads(a, b, g, dim):
    ga = linalg_cross.fn(b.conj().expand(g.shape), g, dim=dim)
    gb = linalg_cross.fn(g, a.conj().expand(g.shape), dim=dim)
    return ga.sum_to_size(a.shape), gb.sum_to_size(b.shape)


@cross.vjp
def _(ctx, g):
    a, b = ctx.args[:2]
    dim = ctx.kwargs.get("dim", ctx.args[2] if len(ctx.args) > 2 else None)
    if dim is None:
        dim = next(i for i, (m, n) in enumerate(zip(a.shape, b.shape)) if m == n == 3)
    return _cross_grads(a, b, g, dim)


@linalg_cross.vjp
def _(ctx, g):
    return _cross_grads(*ctx.args[:2], g, ctx.kwargs.get("dim", -1))


def need_float(name, a):
    """PyTorch's refusal of integer and bool inputs to linalg functions."""
    if a.dtype.kind not in "fcV":
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got {tname(a)}")


@op("linalg_vecdot", function=False, method=False)
def linalg_vecdot(xp, x, y, *, dim=-1):
    """Dot product of vectors along ``dim`` (conjugating ``x``), batch dims broadcast."""
    need_float("linalg.vecdot", x)
    need_float("linalg.vecdot", y)
    if x.dtype != y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type {tname(x)} "
                           f"and y of type {tname(y)} instead")
    shape = P.broadcast_shapes(x.shape, y.shape)
    n = builtins.max(len(shape), 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    r = upcast(xp.conj(x) * y).sum(axis=dim)  # products rounded to half precision, the sum accumulated in float32
    return _rounded(xp.asarray(r), x.dtype)


@linalg_vecdot.vjp
def _(ctx, g):
    x, y = ctx.args
    g = g.unsqueeze(ctx.kwargs.get("dim", -1) % builtins.max(len(P.broadcast_shapes(x.shape, y.shape)), 1))
    return (y * g.conj()).sum_to_size(x.shape), (x * g).sum_to_size(y.shape)


# ---- norms ------------------------------------------------------------------------------------
def _reduction():
    from . import reduction  # the vector-norm kernels and their VJP live with the reductions
    return reduction


@op("linalg_vector_norm", function=False, method=False, result_layout="row_major")
def linalg_vector_norm(xp, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """Vector ``ord``-norm over ``dim`` (every element by default); the result is real."""
    red = _reduction()
    a, rd = red._norm_input("linalg.vector_norm", x, dtype)
    r = red._vector_norm(xp, "linalg.vector_norm", a, ord, red.reduce_dims(dim, a.ndim), keepdim)
    return xp.asarray(r).astype(D.storage(rd), copy=False)


def _vector_norm_vjp(x, g, ord, dim, keepdim, out):
    red = _reduction()
    xc = x.to(out.dtype) if x.dtype.is_floating_point else x
    return red._norm_grad(xc, g, ord, red.reduce_dims(dim, x.dim()), keepdim, out).to(x.dtype)


@linalg_vector_norm.vjp
def _(ctx, g):
    x = ctx.args[0]
    red = _reduction()
    ord_, dim, keepdim = red.arg(ctx, 1, "ord", 2), red.arg(ctx, 2, "dim"), red.arg(ctx, 3, "keepdim", False)
    return (_vector_norm_vjp(x, g, ord_, dim, keepdim, ctx.out),)


_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def _matrix_dims(name, a, dim):
    red = _reduction()
    if len(dim) != 2:
        raise RuntimeError(f"{name}: dim must be a 2-tuple. Got {' '.join(map(str, dim))}")
    d0, d1 = (red.one_dim(d, a.ndim) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"{name}: dims must be different. Got ({dim[0]}, {dim[1]})")
    return d0, d1


def _matrix_norm(xp, a, ord, dim, keepdim, dtype):
    name = "linalg.matrix_norm"
    red = _reduction()
    if a.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    x, rd = red._norm_input(name, a, dtype)
    if ord not in _MATRIX_ORDS:
        raise RuntimeError(f"{name}: Order {ord} not supported.")
    d0, d1 = _matrix_dims(name, x, dim)
    if ord == "fro":
        r = red._vector_norm(xp, name, x, 2, (builtins.min(d0, d1), builtins.max(d0, d1)), keepdim)
    elif ord in ("nuc", 2, -2):
        if a.dtype in _HALF:
            raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {tname(a)}")
        s = REGISTRY["linalg_svdvals"].impl(xp, xp.moveaxis(x, (d0, d1), (-2, -1))) if x.size else \
            xp.zeros(x.shape[:0] + (0,), x.real.dtype)
        r = s.sum(-1) if ord == "nuc" else (s.max(-1) if ord == 2 else s.min(-1))
        if keepdim:
            r = xp.expand_dims(r, (builtins.min(d0, d1), builtins.max(d0, d1)))
    else:  # 1 / inf: the largest (smallest) column / row absolute sum
        summed, kept = (d0, d1) if abs(ord) == 1 else (d1, d0)
        sums = xp.abs(x).sum(axis=summed, keepdims=True)
        r = sums.max(axis=kept, keepdims=True) if ord > 0 else sums.min(axis=kept, keepdims=True)
        if not keepdim:
            r = r.squeeze(axis=(d0, d1))
    return xp.asarray(r).astype(D.storage(rd), copy=False)


@op("linalg_matrix_norm", function=False, method=False, result_layout="row_major")
def linalg_matrix_norm(xp, A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """Matrix norm over the two ``dim``: "fro", "nuc", 1, -1, 2, -2, inf or -inf; the result is real."""
    return _matrix_norm(xp, A, ord, dim, keepdim, dtype)


def _matrix_norm_grad(a, g, ord, dim, keepdim, out):
    red = _reduction()
    d0, d1 = (red.one_dim(d, a.dim()) for d in dim)
    if ord == "fro":
        return _vector_norm_vjp(a, g, 2, (d0, d1), keepdim, out)
    if ord == "nuc":
        return red._nuclear_grad(a, g, (d0, d1), keepdim)
    lo, hi = builtins.min(d0, d1), builtins.max(d0, d1)
    if not keepdim:
        g, out = g.unsqueeze(lo).unsqueeze(hi), out.unsqueeze(lo).unsqueeze(hi)
    if ord in (2, -2):
        from .decompositions import linalg_svd
        m = a.movedim((d0, d1), (-2, -1))
        u, _, vh = linalg_svd.fn(m, full_matrices=False)
        k = slice(0, 1) if ord == 2 else slice(-1, None)  # singular values come in descending order
        gm = u[..., :, k] @ vh[..., k, :] * g.movedim((d0, d1), (-2, -1))
        return gm.movedim((-2, -1), (d0, d1))
    summed = d0 if abs(ord) == 1 else d1
    sums = a.abs().sum(summed, keepdim=True)
    hit = sums == out
    w = hit / hit.sum(d1 if abs(ord) == 1 else d0, keepdim=True)
    return a.sgn() * w * g


@linalg_matrix_norm.vjp
def _(ctx, g):
    red = _reduction()
    ord_, dim = red.arg(ctx, 1, "ord", "fro"), red.arg(ctx, 2, "dim", (-2, -1))
    return (_matrix_norm_grad(ctx.args[0], g, ord_, dim, red.arg(ctx, 3, "keepdim", False), ctx.out),)


def _norm_kind(a, ord, dim):
    """("vector" | "matrix", ord, dim) of a ``linalg.norm`` call."""
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return "vector", 2 if ord is None else ord, dims
        if len(dims) == 2:
            return "matrix", "fro" if ord is None else ord, dims
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
    if ord is None:
        return "vector", 2, None
    if a.ndim not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                           f"{a.ndim}D.")
    return ("vector", ord, None) if a.ndim == 1 else ("matrix", ord, (-2, -1))


@op("linalg_norm", function=False, method=False, result_layout="row_major")
def linalg_norm(xp, A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """Vector or matrix norm, picked from ``ord`` and ``dim`` as PyTorch does."""
    if isinstance(ord, str) and dim is None and A.ndim != 2:
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                           f"{A.ndim}D.")
    kind, ord, dim = _norm_kind(A, ord, dim)
    if kind == "vector":
        return linalg_vector_norm.impl(xp, A, ord, dim, keepdim, dtype=dtype)
    return _matrix_norm(xp, A, ord, dim, keepdim, dtype)


@linalg_norm.vjp
def _(ctx, g):
    red = _reduction()
    a = ctx.args[0]
    kind, ord_, dim = _norm_kind(a, red.arg(ctx, 1, "ord"), red.arg(ctx, 2, "dim"))
    keepdim = red.arg(ctx, 3, "keepdim", False)
    if kind == "vector":
        return (_vector_norm_vjp(a, g, ord_, dim, keepdim, ctx.out),)
    return (_matrix_norm_grad(a, g, ord_, dim, keepdim, ctx.out),)


@op("linalg_diagonal", function=False, method=False, view=True)
def linalg_diagonal(xp, A, *, offset=0, dim1=-2, dim2=-1):
    """The ``offset``-th diagonal of the matrices spanned by (``dim1``, ``dim2``), as the last dim."""
    return REGISTRY["diagonal"].impl(xp, A, offset, dim1, dim2)


@linalg_diagonal.vjp
def _(ctx, g):
    k = ctx.kwargs
    inner = type("Ctx", (), {"args": (ctx.args[0], k.get("offset", 0), k.get("dim1", -2), k.get("dim2", -1)),
                             "kwargs": {}, "out": ctx.out})
    return REGISTRY["diagonal"].vjp_fn(inner, g)[:1]


# ---- matrix functions -------------------------------------------------------------------------
def _square(name, a):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are {a.shape[-2]} by "
                           f"{a.shape[-1]} matrices" if a.ndim >= 2 else
                           f"{name}: The input tensor A must have at least 2 dimensions.")


def _matrix_power(xp, a, n):
    """A^n by repeated squaring, each product rounded to A's dtype as PyTorch's are."""
    _square("linalg.matrix_power", a)
    if n < 0:
        from .decompositions import _inv
        a, n = _inv(xp, "linalg.matrix_power", a), -n
    result = None
    while n:
        if n & 1:
            result = a if result is None else _rounded(_mm(xp, result, a), a.dtype)
        n >>= 1
        if n:
            a = _rounded(_mm(xp, a, a), a.dtype)
    if result is None:
        return xp.broadcast_to(xp.eye(a.shape[-1], dtype=a.dtype), a.shape).copy()
    return result.copy() if result is a else result


@op("matrix_power")
def matrix_power(xp, input, n):
    """``input`` multiplied by itself ``n`` times (inverse powers for negative ``n``)."""
    if not isinstance(n, int):
        raise TypeError(f"matrix_power(): argument 'n' must be int, not {type(n).__name__}")
    return _matrix_power(xp, input, n)


@op("linalg_matrix_power", function=False, method=False)
def linalg_matrix_power(xp, A, n):
    """``A`` multiplied by itself ``n`` times (inverse powers for negative ``n``)."""
    return matrix_power.impl(xp, A, n)


def _matrix_power_vjp(ctx, g):
    a = ctx.args[0]
    n = ctx.kwargs.get("n", ctx.args[1] if len(ctx.args) > 1 else None)
    if n == 0:
        return (g * 0, None)
    base = linalg_matrix_power.fn(a, -1) if n < 0 else a
    k = abs(n)
    powers = [None] * k  # (base^H)^i for i < k
    bh = H(base)
    powers[0] = _factory.eye(a.shape[-1], dtype=g.dtype, device=g.device).expand(tuple(a.shape))
    for i in range(1, k):
        powers[i] = powers[i - 1] @ bh
    gb = sum(powers[i] @ g @ powers[k - 1 - i] for i in range(k))
    if n < 0:
        gb = -(bh @ gb @ bh)
    return (gb, None)


matrix_power.vjp(_matrix_power_vjp)
linalg_matrix_power.vjp(_matrix_power_vjp)

# Padé(13) coefficients of exp (Higham, "The scaling and squaring method for the matrix exponential revisited")
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
           10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)
_THETA13 = {np.dtype(np.float64): 5.371920351148152, np.dtype(np.float32): 3.925724783138660}


def _matrix_exp(xp, a):
    """exp(A) by scaling and squaring with a degree-13 Padé approximant; each matrix of the batch gets its own
    scaling, the squarings run batched (matrices needing fewer keep their value)."""
    _square("linalg.matrix_exp", a)
    dt = a.dtype
    x = upcast(a)
    if x.size == 0:
        return a.copy()
    n = x.shape[-1]
    norm1 = xp.abs(x).sum(-2).max(-1)
    theta = _THETA13[np.dtype(x.real.dtype)]
    with np.errstate(divide="ignore", invalid="ignore"):
        s = xp.maximum(0, xp.ceil(xp.log2(norm1 / theta))).astype(np.int64)
    s = xp.where(xp.isfinite(norm1), s, 0)
    x = x / (2.0 ** s)[..., None, None].astype(x.real.dtype)
    b = _PADE13
    eye = xp.eye(n, dtype=x.dtype)
    x2 = x @ x
    x4 = x2 @ x2
    x6 = x4 @ x2
    u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2) + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye)
    v = x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2) + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye
    r = xp.linalg.solve(v - u, v + u)
    for i in range(int(s.max()) if s.size else 0):
        r = xp.where((s > i)[..., None, None], r @ r, r)
    return _rounded(r, dt)


@op("matrix_exp")
def matrix_exp(xp, input):
    """Matrix exponential of square matrices."""
    need_float("linalg.matrix_exp", input)
    return _matrix_exp(xp, input)


@op("linalg_matrix_exp", function=False, method=False)
def linalg_matrix_exp(xp, A):
    """Matrix exponential of square matrices."""
    return matrix_exp.impl(xp, A)


def _matrix_exp_vjp(ctx, g):
    # the adjoint is the upper-right block of exp([[A^H, G], [0, A^H]])
    a = ctx.args[0]
    n = a.shape[-1]
    ah = H(a)
    top = REGISTRY["cat"].fn([ah, g], -1)
    bottom = REGISTRY["cat"].fn([g * 0, ah], -1)
    big = matrix_exp.fn(REGISTRY["cat"].fn([top, bottom], -2))
    return (big[..., :n, n:],)


matrix_exp.vjp(_matrix_exp_vjp)
linalg_matrix_exp.vjp(_matrix_exp_vjp)


# ---- chains of products -----------------------------------------------------------------------
def _chain_order(shapes):
    """Split points of the cheapest parenthesisation of a matrix chain (dynamic programming over the chain)."""
    dims = [shapes[0][0]] + [s[1] for s in shapes]
    n = len(shapes)
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(xp, mats):
    split = _chain_order([m.shape for m in mats])

    def prod(i, j):  # each product rounded, as PyTorch's are
        if i == j:
            return mats[i]
        k = split[i][j]
        return _rounded(_mm(xp, prod(i, k), prod(k + 1, j)), mats[i].dtype)
    return prod(0, len(mats) - 1)


def _chain_check(name, mats, first_last_1d):
    if len(mats) < (2 if first_last_1d else 1):
        raise RuntimeError(f"{name}(): expected at least 2 tensors but got {len(mats)}" if first_last_1d else
                           f"{name}(): Expected one or more matrices")
    dt = mats[0].dtype
    for i, m in enumerate(mats):
        ends = first_last_1d and i in (0, len(mats) - 1)
        if not (m.ndim == 2 or (ends and m.ndim == 1)):
            raise RuntimeError(f"{name}(): the {'first' if i == 0 else 'last' if ends else 'middle'} tensor must be "
                               f"{'1D or 2D' if ends else '2D'} but got {m.ndim}D" if first_last_1d else
                               f"Tensor dimension is {m.ndim}, expected 2 instead.")
        if m.dtype != dt:
            raise RuntimeError(f"{name}(): all tensors must have be the same dtype but tensor 0 is {tname(mats[0])} "
                               f"and tensor {i} {tname(m)}")
    mats = list(mats)
    first_vec, last_vec = mats[0].ndim == 1, mats[-1].ndim == 1
    if first_vec:
        mats[0] = mats[0][None, :]
    if last_vec and len(mats) > 1:
        mats[-1] = mats[-1][:, None]
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"{name}(): tensors {i} and {i + 1} with shapes {list(mats[i].shape)} and "
                               f"{list(mats[i + 1].shape)} cannot be multiplied")
    if dt == np.bool_:
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
    return mats, first_vec, last_vec


@op("linalg_multi_dot", function=False, method=False)
def linalg_multi_dot(xp, tensors):
    """Product of a chain of matrices in the cheapest order (the first and last may be vectors)."""
    mats, first_vec, last_vec = _chain_check("linalg.multi_dot", tensors, True)
    r = _chain(xp, mats)
    if first_vec:
        r = r[0]
    return r[..., 0] if last_vec else r


@op("chain_matmul", method=False)
def chain_matmul(xp, *matrices):
    """Product of a chain of 2-D matrices in the cheapest order."""
    mats, _, _ = _chain_check("chain_matmul", matrices, False)
    return _chain(xp, mats) if len(mats) > 1 else mats[0].copy()


def _chain_grads(mats, g):
    """Gradient of each factor of the product of ``mats`` (all 2-D) for output gradient ``g``."""
    n = len(mats)
    prefix, suffix = [None] * n, [None] * n
    for i in range(1, n):
        prefix[i] = mats[0] if i == 1 else prefix[i - 1] @ mats[i - 1]
    for i in range(n - 2, -1, -1):
        suffix[i] = mats[n - 1] if i == n - 2 else mats[i + 1] @ suffix[i + 1]
    grads = []
    for i in range(n):
        gi = g if prefix[i] is None else H(prefix[i]) @ g
        grads.append(gi if suffix[i] is None else gi @ H(suffix[i]))
    return grads


@linalg_multi_dot.vjp
def _(ctx, g):
    ts = list(ctx.args[0])
    first_vec, last_vec = ts[0].dim() == 1, ts[-1].dim() == 1
    mats = [t.unsqueeze(0) if i == 0 and first_vec else t.unsqueeze(-1) if i == len(ts) - 1 and last_vec else t
            for i, t in enumerate(ts)]
    gm = g.unsqueeze(0) if first_vec else g
    gm = gm.unsqueeze(-1) if last_vec else gm
    grads = _chain_grads(mats, gm)
    return ([gr.reshape(t.shape) for gr, t in zip(grads, ts)],)


@chain_matmul.vjp
def _(ctx, g):
    return tuple(_chain_grads(list(ctx.args), g)) if len(ctx.args) > 1 else (g,)


# ---- distances, Vandermonde matrices ----------------------------------------------------------
@op("cdist", method=False)
def cdist(xp, x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distances between the rows of ``x1`` and of ``x2`` (batch dims broadcast); the Euclidean
    distance goes through a matrix product for more than 25 rows, as PyTorch's default mode does."""
    for name, x in (("X1", x1), ("X2", x2)):
        if x.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.ndim}D")
        if x.dtype.kind not in "fV":
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {tname(x)}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    a, b = upcast(x1), upcast(x2)
    rows = builtins.max(a.shape[-2], b.shape[-2])
    mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist" or
                     (compute_mode == "use_mm_for_euclid_dist_if_necessary" and rows > 25))
    if x1.dtype in _HALF and not mm:  # only the matrix-product path has half-precision kernels
        raise NotImplementedError(f"\"cdist\" not implemented for '{tname(x1)}'")
    if mm:  # one product of augmented rows [-2x, |x|^2, 1] . [y, 1, |y|^2], rounded where PyTorch rounds
        dt = x1.dtype
        n1, n2 = (upcast(_rounded((v * v).sum(-1, keepdims=True), dt)) for v in (a, b))
        lhs = xp.concatenate([-2 * a, n1, xp.ones_like(n1)], -1)
        rhs = xp.concatenate([b, xp.ones_like(n2), n2], -1)
        sq = upcast(_rounded(xp.matmul(lhs, xp.swapaxes(rhs, -1, -2)), dt))
        r = xp.sqrt(xp.maximum(sq, 1e-30))
    else:
        d = xp.abs(a[..., :, None, :] - b[..., None, :, :])
        if p == 0:
            r = (d != 0).sum(-1).astype(a.dtype)
        elif p == math.inf:
            r = d.max(-1) if d.shape[-1] else d.sum(-1)
        elif p == 1:
            r = d.sum(-1)
        elif p == 2:
            r = xp.sqrt((d * d).sum(-1))
        else:
            r = (d ** p).sum(-1) ** (1.0 / p)
    return _rounded(xp.asarray(r), x1.dtype)


@cdist.vjp
def _(ctx, g):
    x1, x2 = ctx.args[:2]
    p = ctx.kwargs.get("p", ctx.args[2] if len(ctx.args) > 2 else 2.0)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    dist = ctx.out.unsqueeze(-1)
    gd = g.unsqueeze(-1)
    where = REGISTRY["where"].fn
    if p == 0:
        w = diff * 0
    elif p == 1:
        w = diff.sgn() * gd
    elif p == math.inf:
        hit = diff.abs() == dist
        w = where(hit, gd / hit.sum(-1, keepdim=True), 0.0) * diff.sgn()
    else:
        safe = where(dist == 0, 1.0, dist)
        scale = gd / safe if p == 2 else gd * (diff.abs() / safe) ** (p - 2) / safe
        w = where(dist == 0, 0.0, scale) * diff
    return w.sum(-2).sum_to_size(x1.shape), (-w).sum(-3).sum_to_size(x2.shape)


def _vander(xp, x, n, increasing):
    if n is None:
        n = x.shape[-1]
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    dt = np.int64 if x.dtype.kind in "biu" else x.dtype
    powers = xp.arange(n) if increasing else xp.arange(n)[::-1]
    r = upcast(x.astype(dt))[..., None] ** powers
    return _rounded(xp.asarray(r), dt)


@op("vander", method=False)
def vander(xp, x, N=None, increasing=False):
    """Vandermonde matrix of a 1-D tensor: its powers as columns, decreasing unless ``increasing``."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    return _vander(xp, x, N, increasing)


@op("linalg_vander", function=False, method=False)
def linalg_vander(xp, x, *, N=None):
    """Vandermonde matrices of the last dim of ``x``: increasing powers, batch dims kept."""
    if x.ndim < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension")
    if (x.shape[-1] if N is None else N) <= 1:
        raise RuntimeError("N must be greater than 1.")
    if x.dtype == np.bool_:
        raise NotImplementedError("\"linalg_vander\" not implemented for 'Bool'")
    if x.dtype in _HALF:
        raise RuntimeError(f"linalg.vander supports floating point, complex, and integer tensors, but got {tname(x)}")
    return _vander(xp, x, N, True)


def _vander_grad(x, g, increasing):
    n = g.shape[-1]
    k = _factory.arange(n, dtype=g.dtype, device=g.device)
    if not increasing:
        k = k.flip(0)
    # d x^k / dx = k x^(k-1); the k = 0 column has none
    deriv = k * x.unsqueeze(-1) ** (k - 1).clamp(min=0)
    return (g * deriv).sum(-1)


@vander.vjp
def _(ctx, g):
    inc = ctx.kwargs.get("increasing", ctx.args[2] if len(ctx.args) > 2 else False)
    return _vander_grad(ctx.args[0], g, inc), None, None


@linalg_vander.vjp
def _(ctx, g):
    return (_vander_grad(ctx.args[0], g, True),)
