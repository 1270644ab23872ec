"""Forward-mode automatic differentiation: dual tensors carry a tangent through every op.

``with dual_level():`` registers the "forward_ad" dispatcher layer (order 150, in front of autograd)
and sends every call through the layers. For a call with an input that has a tangent, the layer runs
the op and then computes the result's tangent: with an explicit JVP rule for common ops, by applying
the op itself to the tangents for ops that are linear in their tensor inputs, and otherwise from the
op's VJP with the double-VJP trick (the VJP is linear in its output gradient ``g``, so the gradient of
``<vjp(g), tangent>`` with respect to ``g`` is the JVP). Tangents are ember tensors computed with ember
ops, so they are themselves differentiable (forward-over-reverse works). One level at a time.
"""
import collections
import contextlib
import math
import threading
import weakref

import ember
from ember import _dispatch
from ember._tensor import Tensor, tensors_in

from . import _engine, grad_mode
from ._engine import _fit, _meta
from ._layer import _bind_tensor_kwargs

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual"]

UnpackedDualTensor = collections.namedtuple("UnpackedDualTensor", ["primal", "tangent"])


class _State(threading.local):
    suspended = False  # inside a JVP computation: the ops there propagate no tangents


_STATE = _State()
_level = [None]  # the active level, or None
_next_level = [0]
_duals = []  # weak references to tensors given a tangent at the active level (cleared on exit)


def enter_dual_level():
    """Open a dual level and return it; only one can be open at a time."""
    if _level[0] is not None:
        raise RuntimeError("Entering a new forward AD level but the current level is not valid. Nested forward "
                           "mode AD is not supported: exit the current level first.")
    _level[0] = _next_level[0]
    _next_level[0] += 1
    _dispatch.register_layer("forward_ad", 150, _layer)
    _dispatch.force_slow(True)
    _engine.OUT_TANGENT[0] = _out_tangent
    return _level[0]


def exit_dual_level(*, level=None):
    """Close the active level: every tangent made in it is dropped."""
    if _level[0] is None or (level is not None and level != _level[0]):
        raise RuntimeError("Trying to exit a forward AD level that was not the last one entered.")
    _dispatch.unregister_layer("forward_ad")
    _dispatch.force_slow(False)
    _engine.OUT_TANGENT[0] = None
    _array_tangents.clear()
    for ref in _duals:
        t = ref()
        if t is not None and t._ext:
            t._ext.pop("tangent", None)
    _duals.clear()
    _level[0] = None


class dual_level:
    """Context manager for a dual level: ``with dual_level(): ...`` (yields the level)."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()


def _check_level(level, what):
    if _level[0] is None:
        raise RuntimeError(f"{what}: no forward AD level is active; use it inside `with forward_ad.dual_level():`.")
    if level is not None and level != _level[0]:
        raise RuntimeError(f"{what}: level {level} is not the active forward AD level {_level[0]}.")


def make_dual(tensor, tangent, *, level=None):
    """A view of ``tensor`` (keeping its autograd history) whose tangent is ``tangent``."""
    _check_level(level, "make_dual")
    if not (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not (tangent.dtype.is_floating_point or tangent.dtype.is_complex):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if tangent.shape != tensor.shape:
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    if tangent.dtype != tensor.dtype:
        raise RuntimeError(f"Expected tangent to have the primal's dtype {tensor.dtype}, but got {tangent.dtype}")
    with _suspended():
        dual = tensor.view_as(tensor)
    _set_tangent(dual, tangent)
    return dual


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)`` of a dual tensor; the tangent is None when it has none at this level."""
    tangent = _tangent(tensor)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    with _suspended():
        primal = tensor.view_as(tensor)
    return UnpackedDualTensor(primal, tangent)


def _tangent(t):
    return t._ext.get("tangent") if isinstance(t, Tensor) and t._ext else None


def _set_tangent(t, tangent):
    t._ext = {**(t._ext or {}), "tangent": tangent}
    _duals.append(weakref.ref(t))
    _array_tangents[id(t._data)] = (t._data, tangent)


_array_tangents = {}  # id(array) -> (array, tangent) of the tensors given a tangent at the active level


def _out_tangent(t):
    """Give ``t``, a call's output rebuilt from its array by the engine, the tangent that array carries."""
    entry = _array_tangents.get(id(t._data))
    if entry is not None and entry[0] is t._data and _tangent(t) is None:
        _set_tangent(t, entry[1])


@contextlib.contextmanager
def _suspended():
    before = _STATE.suspended
    _STATE.suspended = True
    try:
        yield
    finally:
        _STATE.suspended = before


# ---- the layer -------------------------------------------------------------------------------
def _tangents_of(args):
    """Per argument: its tangent (a list of them for a list argument), or None."""
    out = []
    for a in args:
        if type(a) in (list, tuple) and any(isinstance(x, Tensor) for x in a):
            out.append([_tangent(x) for x in a])
        else:
            out.append(_tangent(a))
    return out


def _any(tangents):
    return any(t is not None and (not isinstance(t, list) or any(x is not None for x in t)) for t in tangents)


def _layer(call, call_next):
    if _STATE.suspended or not any(_tangent(t) is not None for t in call.tensors()):
        return call_next(call)
    if call.kwargs:
        call.args, call.kwargs, _ = _bind_tensor_kwargs(call.op, call.args, call.kwargs)
    args = call.args
    tangents = _tangents_of(args)
    if call.mode == "inplace":  # the rule needs the target's value before the op
        args = (Tensor._wrap(args[0]._data.copy()),) + tuple(args[1:])
    result = call_next(call)
    op = call.op
    if not op.differentiable:
        return result
    outs = result if isinstance(result, tuple) else (result,)
    if not any(isinstance(o, Tensor) and (o.dtype.is_floating_point or o.dtype.is_complex) for o in outs):
        return result
    with _suspended():
        out_tangents = _jvp(op, args, call.kwargs, tangents, result)
    for o, t in zip(outs, out_tangents if isinstance(result, tuple) else (out_tangents,)):
        if t is not None and isinstance(o, Tensor) and (o.dtype.is_floating_point or o.dtype.is_complex):
            _set_tangent(o, _fit_to(t, o))
    return result


def _fit_to(t, out):
    """A tangent in its output's shape (materialising broadcasting) and dtype."""
    if t.shape != out.shape:
        t = t.expand(out.shape).clone()
    if t.dtype != out.dtype:
        t = (t.real if t.dtype.is_complex and not out.dtype.is_complex else t).to(out.dtype)
    return t


def _jvp(op, args, kwargs, tangents, out):
    rule = _RULES.get(op.name)
    if rule is not None:
        return rule(op, args, kwargs, tangents, out)
    return _double_vjp(op, args, kwargs, tangents, out)


# ---- JVP rules -------------------------------------------------------------------------------
def _sum(*terms):
    terms = [t for t in terms if t is not None]
    if not terms:
        return None
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


def _times(t, factor):
    return None if t is None else t * factor


def _linear(op, args, kwargs, t, out):
    """Ops linear in their first argument: the op applied to its tangent (when the other tensor
    arguments, such as diff's prepend, have no tangents)."""
    if _any(t[1:]):
        return _double_vjp(op, args, kwargs, t, out)
    return op.fn(t[0], *args[1:], **kwargs) if t[0] is not None else None


def _multilinear_list(op, args, kwargs, t, out):
    """cat/stack: the op applied to the list of tangents (zeros where an input has none)."""
    parts = [ember.zeros_like(a) if ta is None else ta for a, ta in zip(args[0], t[0])]
    return op.fn(parts, *args[1:], **kwargs)


def _bilinear(op, args, kwargs, t, out):
    a, b = args[:2]
    if not isinstance(a, Tensor):  # a Python number first (2 * x): mul, whose function refuses that order
        return _times(t[1], a)
    rest = args[2:]
    return _sum(None if t[0] is None else op.fn(t[0], b, *rest, **kwargs),
                None if t[1] is None else op.fn(a, t[1], *rest, **kwargs))


def _add(op, args, kwargs, t, out):
    alpha = kwargs.get("alpha", 1)
    return _sum(t[0], _times(t[1], alpha if op.name == "add" else -alpha))


def _div(op, args, kwargs, t, out):
    if kwargs.get("rounding_mode") is not None:
        return ember.zeros_like(out)
    return _sum(t[0], _times(t[1], -out)) / args[1]


def _pow(op, args, kwargs, t, out):
    # masked where the formula's factors are 0 * inf but the derivative is 0: a zero exponent, and
    # (for the exponent's tangent) a zero base with a non-negative exponent
    a, b = args[:2]
    da = db = None
    if t[0] is not None:
        da = t[0] * b * a ** (b - 1)
        if isinstance(b, Tensor) or b == 0:
            da = ember.where(ember.zeros_like(out) + b == 0, ember.zeros_like(out), da)
    if t[1] is not None:
        log_a = a.log() if isinstance(a, Tensor) else math.log(a) if a > 0 else math.log(abs(a) or 1.0) if a else 0.0
        db = t[1] * ember.where((ember.zeros_like(out) + a == 0) & (b >= 0), ember.zeros_like(out), out * log_a)
    return _sum(da, db)


def _unary(derivative):
    def rule(op, args, kwargs, t, out):
        return _times(t[0], derivative(args[0], out))
    return rule


def _jointly_linear(op, args, kwargs, t, out):
    """Ops linear in all their floating-point tensor arguments together (scatter, index_put, ...):
    the op applied to the tangents, with zeros for arguments that have none."""
    def tangent(a, ta):
        if isinstance(ta, list):
            return type(a)(tangent(x, tx) for x, tx in zip(a, ta))
        if ta is not None:
            return ta
        return ember.zeros_like(a) if isinstance(a, Tensor) and (a.dtype.is_floating_point or a.dtype.is_complex) else a
    return op.fn(*[tangent(a, ta) for a, ta in zip(args, t)], **kwargs)


def _det(op, args, kwargs, t, out):
    """det(A) tr(A^-1 dA): zero for a singular matrix, as PyTorch's forward AD (its VJP can differ there)."""
    a = args[0]
    return out * (ember.linalg.inv_ex(a).inverse @ t[0]).diagonal(0, -2, -1).sum(-1)


def _poisson_nll_loss(op, args, kwargs, t, out):
    """Written out: PyTorch's forward AD masks Stirling's term of ``full`` after differentiating it, so the
    NaN its log gives at targets <= 0 stays out of the tangent (the VJP keeps it, as PyTorch's backward)."""
    names = ("input", "target", "log_input", "full", "eps", "reduction")
    a = {**dict(zip(names, args)), **kwargs}
    x, y, eps = a["input"], a["target"], a.get("eps", 1e-8)
    log_input, full, reduction = a.get("log_input", True), a.get("full", False), a.get("reduction", 1)
    dx = dy = None
    if t[0] is not None:
        dx = t[0] * (x.exp() - y if log_input else 1 - y / (x + eps))
    if t[1] is not None:
        dy = t[1] * (-x if log_input else -(x + eps).log())
        if full:
            dy = dy + ember.where(y > 1, t[1] * (y.log() + 0.5 / y), 0.0)
    d = _sum(dx, dy)
    return d.mean() if reduction == 1 else d.sum() if reduction == 2 else d


def _logsumexp(op, args, kwargs, t, out):
    """Softmax-weighted tangents, sum(t exp(x - m)) / sum(exp(x - m)) with m the maximum (running sums for
    logcumsumexp): written out since the VJP goes through log(g), not differentiable at the zero seed."""
    a = {**dict(zip(("input", "dim", "keepdim"), args)), **kwargs}
    x, dim = a["input"], a["dim"]
    if x.is_complex():
        return _double_vjp(op, args, kwargs, t, out)
    e = (x - x.detach().amax(dim, keepdim=True)).exp() if x.numel() else x.exp()  # nothing: 0/0, NaN as PyTorch
    if op.name == "logcumsumexp":
        return (e * t[0]).cumsum(dim) / e.cumsum(dim)
    keepdim = a.get("keepdim", False)
    return (e * t[0]).sum(dim, keepdim=keepdim) / e.sum(dim, keepdim=keepdim)


def _where(op, args, kwargs, t, out):
    cond = args[0]
    return ember.where(cond, ember.zeros_like(out) if t[1] is None else t[1],
                       ember.zeros_like(out) if t[2] is None else t[2])


_RULES = {
    "add": _add, "sub": _add, "div": _div, "true_divide": _div, "pow": _pow, "where": _where,
    "det": _det, "linalg_det": _det, "poisson_nll_loss": _poisson_nll_loss, "logsumexp": _logsumexp,
    "logcumsumexp": _logsumexp,
    "exp": _unary(lambda x, y: y),
    "log": _unary(lambda x, y: 1 / x),
    "sqrt": _unary(lambda x, y: 0.5 / y),
    "sin": _unary(lambda x, y: x.cos()),
    "cos": _unary(lambda x, y: -x.sin()),
    "tanh": _unary(lambda x, y: 1 - y * y),
    "sigmoid": _unary(lambda x, y: y * (1 - y)),
    "relu": _unary(lambda x, y: (y <= 0).logical_not().to(y.dtype)),  # passes NaN on, as ReLU's VJP does
}
_RULES.update(dict.fromkeys(("scatter", "scatter_add", "index_put", "put", "index_copy", "index_add", "masked_scatter"),
                            _jointly_linear))
_RULES.update(dict.fromkeys(("cat", "concat", "concatenate", "stack"), _multilinear_list))
_RULES.update(dict.fromkeys(("mul", "matmul", "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger", "kron",
                             "tensordot", "cross", "linalg_cross", "linalg_vecdot"), _bilinear))
_RULES.update(dict.fromkeys(
    ("neg", "positive", "sum", "mean", "reshape", "view", "view_as", "reshape_as", "flatten", "permute", "transpose",
     "swapaxes", "swapdims", "t", "squeeze", "unsqueeze", "expand", "expand_as", "broadcast_to", "sum_to_size",
     "clone", "narrow", "select", "flip", "unbind", "__getitem__", "conj", "conj_physical", "real", "imag",
     "view_as_real", "view_as_complex", "_to_copy", "cumsum", "diff", "trace", "index_select", "gather", "take",
     "take_along_dim", "embedding"), _linear))


# ---- the double-VJP fallback -------------------------------------------------------------------
class _Ctx:
    """The VJP context of the registry contract: the call's arguments and result."""

    def __init__(self, args, kwargs, out):
        self.args, self.kwargs, self.out = args, kwargs, out


def _pairs(args, grads, tangents):
    """(input gradient, input, tangent) for every tensor argument that has a tangent."""
    grads = grads if isinstance(grads, (tuple, list)) else (grads,)
    for i, (a, t) in enumerate(zip(args, tangents)):
        g = grads[i] if i < len(grads) else None
        if isinstance(t, list):
            for j, (x, tx) in enumerate(zip(a, t)):
                yield (None if g is None else g[j]), x, tx
        elif t is not None:
            yield g, a, t


def _double_vjp(op, args, kwargs, tangents, out):
    if op.vjp_fn is None:
        raise NotImplementedError(f"forward AD: the op '{op.name}' has no derivative (neither a JVP rule nor a VJP)")
    outs = out if isinstance(out, tuple) else (out,)
    if all(o.numel() == 0 for o in outs if isinstance(o, Tensor)):
        return tuple(ember.zeros_like(o) for o in outs) if isinstance(out, tuple) else ember.zeros_like(out)
    if all(x.numel() == 0 for _, x, _ in _pairs(args, (), tangents)):
        # only empty inputs carry tangents: the tangent is zero, or NaN where the result is not finite (a mean
        # over nothing), as PyTorch's formulas give it
        zero = tuple(ember.where(o.isfinite(), 0.0, math.nan).to(o.dtype) if isinstance(o, Tensor) else None
                     for o in outs)
        return zero if isinstance(out, tuple) else zero[0]
    seeds = [ember.zeros_like(o).requires_grad_() if o.dtype.is_floating_point or o.dtype.is_complex else None
             for o in outs]
    create_graph = any(t._rg for t in tensors_in(args) + tensors_in(tangents))
    with grad_mode.enable_grad():
        grads = op.vjp_fn(_Ctx(args, kwargs, out), *[s if s is not None else ember.zeros_like(o)
                                                     for s, o in zip(seeds, outs)])
        terms = []
        for g, x, tx in _pairs(args, grads, tangents):
            if g is None or tx is None:
                continue
            g = _fit(g, _meta(x._data))
            terms.append((g.conj() * tx).real.sum() if g.dtype.is_complex else (g * tx).sum())
        total = _sum(*terms)
        live = [s for s in seeds if s is not None]
        if total is None or not total.requires_grad:
            result = [None] * len(live)
        else:
            try:
                result = ember.autograd.grad(total, live, create_graph=create_graph, allow_unused=True)
            except RuntimeError as e:
                raise NotImplementedError(f"forward AD: the VJP of '{op.name}' is not differentiable, so its JVP "
                                          f"can't be derived from it ({e})") from e
    it = iter(result)
    tangents_out = [None if s is None else next(it) for s in seeds]
    tangents_out = [ember.zeros_like(o) if s is not None and t is None else t
                    for t, s, o in zip(tangents_out, seeds, outs)]
    return tuple(tangents_out) if isinstance(out, tuple) else tangents_out[0]


