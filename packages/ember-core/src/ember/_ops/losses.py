"""Loss functions of the torch namespace (``torch.kl_div``, ``torch.ctc_loss``, ...). Their ``reduction`` is
an int as in at::Reduction: 1 is mean, 2 is sum, anything else none (the Python bindings of torch 2.13
default to none). Half precision computes in float32 and rounds; ember-nn's functional forms call these."""
import types

import numpy as np

from .. import _backend
from .. import _dtype as D
from .. import _promotion as P
from .._registry import op
from .._tensor import Tensor
from .activation import bound, grads, tname, up
from .arithmetic import no_graph, quiet
from .comparison import NO_COMPLEX_CLAMP, where
from .nn_misc import pairwise_distance
from .pointwise import refuse_complex


# ---- shared helpers ------------------------------------------------------------------------------
def _reduction(name, reduction):
    if isinstance(reduction, bool) or not isinstance(reduction, (int, np.integer)):
        raise TypeError(f"{name}(): argument 'reduction' must be int, not {type(reduction).__name__}")
    return int(reduction)


def _reduce(loss, reduction, dtype):
    """The loss array reduced (mean over every element, or sum) and cast to the result dtype."""
    if reduction == 1:
        loss = loss.mean() if loss.size else loss.dtype.type(np.nan)
    elif reduction == 2:
        loss = loss.sum()
    return loss.astype(dtype, copy=False)


def _unreduce(g, reduction, shape):
    """The gradient of the unreduced loss from that of the reduced one."""
    if reduction == 1:
        n = int(np.prod(shape))
        return (g / max(n, 1)).expand(shape) if n else g.new_zeros(shape)
    return g.expand(shape) if reduction == 2 else g


def _floats(*arrays):
    """The promoted result dtype (integers and bool promote to the default float, as the float constants of
    PyTorch's formulas make them) and the arrays in their compute dtype."""
    P.broadcast_shapes(*(a.shape for a in arrays))
    rd = P.array_result_type(*arrays)
    if rd.category < 2:
        rd = D.get_default_dtype()
    cd = np.float32 if rd in (D.float16, D.bfloat16) else rd.np
    return D.storage(rd), [a.astype(cd, copy=False) for a in arrays]


def _pointwise_grads(ctx, o, g, dx, dt=None):
    """The gradients of the pointwise loss ``o`` of ``input`` and ``target`` from its output gradient ``g`` and
    the partial derivatives ``dx`` and ``dt`` (None: target gets none)."""
    a = bound(ctx, o)
    x, t = a["input"], a["target"]
    g = _unreduce(g, a["reduction"], P.broadcast_shapes(tuple(x.shape), tuple(t.shape)))
    gt = None if dt is None else (g * dt).sum_to_size(t.shape)
    return grads(ctx, o, input=(g * dx).sum_to_size(x.shape), target=gt)


def _chain_vjp(o, args, g, **kwargs):
    """The VJP of op ``o`` at ``args`` (tensors) for output gradient ``g``: composite losses reuse it."""
    return o.vjp_fn(types.SimpleNamespace(args=args, kwargs=kwargs, out=o.fn(*args, **kwargs)), g)


# ---- binary cross entropy of probabilities ------------------------------------------------------
# the floor of x * (1 - x) in the input gradient (PyTorch's): finite gradients where a sigmoid saturated to
# exactly 0 or 1, where the derivative of the clamped logarithms would be 0 * inf
_BCE_EPS = 1e-12


@op("binary_cross_entropy", method=False, function=False)
@quiet
def binary_cross_entropy(xp, input, target, weight=None, reduction=0):
    """``-w * (t * log(x) + (1 - t) * log(1 - x))``, each logarithm clamped at -100 (torch's
    nn.functional.binary_cross_entropy; ember-nn checks the input's range)."""
    reduction = _reduction("binary_cross_entropy", reduction)
    refuse_complex("binary_cross_entropy", input, target)
    rd, (x, t) = _floats(input, target)
    loss = (t - 1) * xp.maximum(xp.log1p(-x), -100) - t * xp.maximum(xp.log(x), -100)
    if weight is not None:
        loss = loss * up(weight)
    return _reduce(loss, reduction, rd)


@binary_cross_entropy.vjp
def _(ctx, g):
    o = binary_cross_entropy
    a = bound(ctx, o)
    x, t, w = a["input"], a["target"], a["weight"]
    g = _unreduce(g, a["reduction"], P.broadcast_shapes(tuple(x.shape), tuple(t.shape)))
    if w is not None:
        g = g * w
    gx = g * (x - t) / ((1 - x) * x).clamp_min(_BCE_EPS)
    gt = g * ((-x).log1p() - x.log())
    return grads(ctx, o, input=gx.sum_to_size(x.shape), target=gt.sum_to_size(t.shape))


# ---- binary cross entropy with logits -----------------------------------------------------------
@op("binary_cross_entropy_with_logits", method=False)
@quiet
def binary_cross_entropy_with_logits(xp, input, target, weight=None, pos_weight=None, reduction=0):
    """Binary cross entropy of ``sigmoid(input)`` against ``target`` (stable log-sum-exp form), with optional
    element ``weight`` and ``pos_weight`` scaling the positive term."""
    reduction = _reduction("binary_cross_entropy_with_logits", reduction)
    if input.dtype.kind not in "fV":
        raise NotImplementedError(f"\"log_sigmoid_cpu\" not implemented for '{tname(input)}'")
    shape = P.broadcast_shapes(input.shape, target.shape)
    if shape != target.shape:  # PyTorch writes into a tensor of the target's shape
        raise RuntimeError(f"output with shape {list(target.shape)} doesn't match the broadcast shape {list(shape)}")
    rd, (x, t) = _floats(input, target)
    softplus = xp.logaddexp(0, -x)  # log(1 + exp(-x)), exact for large |x|
    if pos_weight is not None:
        loss = (1 - t) * x + (1 + (up(pos_weight) - 1) * t) * softplus
    else:
        loss = (1 - t) * x + softplus
    if weight is not None:
        loss = loss * up(weight)
    return _reduce(loss, reduction, rd)


@binary_cross_entropy_with_logits.vjp
def _(ctx, g):
    o = binary_cross_entropy_with_logits
    a = bound(ctx, o)
    x, t, w, pw = a["input"], a["target"], a["weight"], a["pos_weight"]
    shape = P.broadcast_shapes(tuple(x.shape), tuple(t.shape), *(tuple(v.shape) for v in (w, pw) if v is not None))
    g = _unreduce(g, a["reduction"], shape)
    if w is not None:
        g = g * w
    lw = 1 + (pw - 1) * t if pw is not None else 1
    gx = g * ((1 - t) - lw * (-x).sigmoid())
    gt = g * ((pw - 1) * (-x).logaddexp(x.new_zeros(())) - x if pw is not None else -x)
    return grads(ctx, o, input=gx.sum_to_size(x.shape), target=gt.sum_to_size(t.shape))


# ---- cross entropy of class indices --------------------------------------------------------------
# Classes up to which the logits are copied column-major for the reductions over them: NumPy reduces short
# rows one by one (256 rows of 10: 29 us for max and sum of exp, 7.6 us on the copy; of 300: 118 and 111;
# of 1000: 323 and 440)
_FEW = 256


def _by_class(xp, x):
    """Logits (N, C) laid out for reductions over the classes (dim 1)."""
    return np.asfortranarray(x) if xp is np and x.shape[1] <= _FEW else x


def _rows(xp, target, C, weight, ignore_index, dtype):
    """(each row's class, 0 where ignored; whether the row counts; its weight of ``dtype``: the class's, zero where
    ignored), the last two None when every row counts once (no class weights, no target ignored: the checks of the
    targets' range tell); PyTorch's IndexError for a class out of range."""
    if weight is None and target.size:
        lo, hi = target.min(), target.max()
        if 0 <= lo and hi < C and not lo <= ignore_index <= hi:
            return target, None, None
    keep = target != ignore_index
    safe = xp.where(keep, target, 0)
    if safe.size and (safe.min() < 0 or safe.max() >= C):
        raise IndexError(f"Target {int(safe[(safe < 0) | (safe >= C)][0])} is out of bounds.")
    return safe, keep, up(weight)[safe] * keep if weight is not None else keep.astype(dtype)


@op("_softmax_nll", method=False, function=False)
def _softmax_nll(xp, input, target, weight=None, reduction=0, ignore_index=-100):
    """Cross entropy of (N, C) logits against class indices (N,) in one pass: log-softmax over dim 1 and the
    negative log-likelihood of each target class, times its class ``weight``; rows whose target is
    ``ignore_index`` count zero, and the mean divides by the summed weights."""
    reduction = _reduction("cross_entropy_loss", reduction)
    if input.dtype.kind not in "fV":
        raise NotImplementedError(f"\"log_softmax_lastdim_kernel_impl\" not implemented for '{tname(input)}'")
    if weight is not None and weight.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {tname(input)} but found {tname(weight)}")
    x = _by_class(xp, up(input))
    safe, _, w = _rows(xp, target, x.shape[1], weight, ignore_index, x.dtype)
    m = x.max(1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        loss = xp.log(xp.exp(x - m).sum(1)) + m[:, 0] - x[xp.arange(len(safe)), safe]
        if w is not None:
            loss *= w
        if reduction == 1:
            loss = loss.sum() / (len(safe) if w is None else w.sum())
        elif reduction == 2:
            loss = loss.sum()
    return loss.astype(input.dtype, copy=False)


def _softmax_nll_array_grad(x, t, weight, g, reduction, ignore_index):
    """The input gradient of ``_softmax_nll`` computed on NumPy arrays (no graph to record): the softmax with
    one subtracted at each target, times the row's scale (see the VJP)."""
    xa = _by_class(np, up(x))
    safe, keep, w = _rows(np, t, xa.shape[1], weight, ignore_index, xa.dtype)
    with np.errstate(all="ignore"):
        if w is None:  # every row counts once: one scale for all (or the unreduced loss's gradient)
            scale = up(g) / len(safe) if reduction == 1 else up(g)
        else:
            scale = np.where(keep, w * (up(g) / w.sum() if reduction == 1 else up(g)), 0)
        p = np.exp(xa - xa.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
    p[np.arange(len(safe)), safe] -= 1
    return np.multiply(p, scale.reshape(-1, 1), order="C").astype(x.dtype, copy=False)  # (row-major, as PyTorch's)


@_softmax_nll.vjp
def _(ctx, g):
    a = bound(ctx, _softmax_nll)
    x, t, weight = a["input"], a["target"], a["weight"]
    if no_graph(x, weight, g) and _backend.is_host(x._data):
        gx = _softmax_nll_array_grad(x._data, t._data, None if weight is None else weight._data, g._data,
                                     a["reduction"], a["ignore_index"])
        return grads(ctx, _softmax_nll, input=Tensor._wrap(gx))
    keep = t != a["ignore_index"]
    safe = where(keep, t, 0)
    w = weight[safe] * keep if weight is not None else keep.to(x.dtype)
    # an ignored row's gradient is zero even when the mean divides by a zero total weight (0 * inf)
    scale = where(keep, w * (g / w.sum() if a["reduction"] == 1 else g), 0)
    onehot = x.new_zeros(x.shape).scatter(1, safe.unsqueeze(1), 1.0)
    return grads(ctx, _softmax_nll, input=(x.softmax(1) - onehot) * scale.unsqueeze(1))


# ---- Kullback-Leibler divergence ----------------------------------------------------------------
@op("kl_div", method=False)
@quiet
def kl_div(xp, input, target, reduction=0, *, log_target=False):
    """Pointwise KL divergence ``target * (log(target) - input)`` (``input`` holds log-probabilities;
    ``log_target``: so does ``target``)."""
    reduction = _reduction("kl_div", reduction)
    if input.dtype.kind in "biu" or target.dtype.kind in "biu":
        raise RuntimeError("kl_div: Integral inputs not supported.")
    refuse_complex(RuntimeError("kl_div: Complex inputs not supported."), input, target)
    rd, (x, t) = _floats(input, target)
    if log_target:
        loss = xp.exp(t) * (t - x)
    else:
        loss = xp.where(t == 0, t.dtype.type(0), t * xp.log(xp.where(t == 0, 1, t))) - t * x
        loss = xp.where(xp.isnan(t), t, loss)
    return _reduce(loss, reduction, rd)


@kl_div.vjp
def _(ctx, g):
    a = bound(ctx, kl_div)
    x, t = a["input"], a["target"]
    if a["log_target"]:
        gx, gt = -t.exp(), t.exp() * (t - x + 1)
    else:  # d/dt of xlogy(t, t) as PyTorch's composite computes it: nan at t == 0
        gx, gt = -t, where(t != 0, t.log(), 0.0) + t / t - x
    return _pointwise_grads(ctx, kl_div, g, gx, gt)


# ---- margin losses ------------------------------------------------------------------------------
@op("hinge_embedding_loss", method=False)
def hinge_embedding_loss(xp, input, target, margin=1.0, reduction=0):
    """``input`` where ``target`` is 1, ``max(0, margin - input)`` where it is -1 (both elsewhere)."""
    reduction = _reduction("hinge_embedding_loss", reduction)
    refuse_complex(NotImplementedError(NO_COMPLEX_CLAMP), input)
    shape = P.broadcast_shapes(input.shape, target.shape)
    rd, x = input.dtype, up(input)
    loss = xp.where(target != 1, xp.maximum(margin - x, 0), 0) + xp.where(target != -1, x, 0)
    return _reduce(xp.broadcast_to(loss, shape), reduction, rd)


@hinge_embedding_loss.vjp
def _(ctx, g):
    a = bound(ctx, hinge_embedding_loss)
    x, t, m = a["input"], a["target"], a["margin"]
    d = where((t != 1) & (m - x >= 0), -1.0, 0.0) + where(t != -1, 1.0, 0.0)
    return _pointwise_grads(ctx, hinge_embedding_loss, g, d)


@op("margin_ranking_loss", method=False)
def margin_ranking_loss(xp, input1, input2, target, margin=0.0, reduction=0):
    """``max(0, -target * (input1 - input2) + margin)``: ``input1`` should rank above ``input2`` where
    ``target`` is 1, below where it is -1."""
    reduction = _reduction("margin_ranking_loss", reduction)
    refuse_complex(NotImplementedError(NO_COMPLEX_CLAMP), input1, input2, target)
    rd, (x1, x2, t) = _floats(input1, input2, target)
    return _reduce(xp.maximum(-t * (x1 - x2) + margin, 0), reduction, rd)


@margin_ranking_loss.vjp
def _(ctx, g):
    a = bound(ctx, margin_ranking_loss)
    x1, x2, t = a["input1"], a["input2"], a["target"]
    z = -t * (x1 - x2) + a["margin"]
    g = where(z >= 0, _unreduce(g, a["reduction"], tuple(z.shape)), 0.0)
    return (-g * t).sum_to_size(x1.shape), (g * t).sum_to_size(x2.shape), (-g * (x1 - x2)).sum_to_size(t.shape)


_EPS = 1e-12  # keeps the cosine of a zero vector finite, as PyTorch's does


def _cosine_check(x1, x2, t):
    if t.ndim not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    want = t.ndim + 1
    if x1.ndim != want or x2.ndim != want:
        raise RuntimeError(f"{t.ndim}D target tensor expects {want}D input tensors, but found inputs with sizes "
                           f"{list(x1.shape)} and {list(x2.shape)}.")


@op("cosine_embedding_loss", method=False)
def cosine_embedding_loss(xp, input1, input2, target, margin=0.0, reduction=0):
    """``1 - cos(input1, input2)`` where ``target`` is 1, ``max(0, cos - margin)`` where it is -1 (cosine
    along the last dim)."""
    reduction = _reduction("cosine_embedding_loss", reduction)
    _cosine_check(input1, input2, target)
    rd, (x1, x2) = _floats(input1, input2)
    eps = float(np.asarray(_EPS, rd))  # rounded as PyTorch adds it in the input's dtype (0 in float16)
    cos = (x1 * x2).sum(-1) / xp.sqrt(((x1 * x1).sum(-1) + eps) * ((x2 * x2).sum(-1) + eps))
    loss = xp.where(target == 1, 1 - cos, 0) + xp.where(target == -1, xp.maximum(cos - margin, 0), 0)
    return _reduce(loss, reduction, rd)


@cosine_embedding_loss.vjp
def _(ctx, g):
    a = bound(ctx, cosine_embedding_loss)
    x1, x2, t = a["input1"], a["input2"], a["target"]
    m1 = (x1 * x1).sum(-1, keepdim=True) + _EPS
    m2 = (x2 * x2).sum(-1, keepdim=True) + _EPS
    denom = (m1 * m2).sqrt()
    cos = (x1 * x2).sum(-1, keepdim=True) / denom
    g = _unreduce(g, a["reduction"], tuple(cos.shape[:-1])).unsqueeze(-1)
    gc = g * (where(t.unsqueeze(-1) == 1, -1.0, 0.0) + where((t.unsqueeze(-1) == -1) & (cos >= a["margin"]), 1.0, 0.0))
    return gc * (x2 / denom - cos * x1 / m1), gc * (x1 / denom - cos * x2 / m2), None


# ---- Poisson negative log-likelihood ------------------------------------------------------------
@op("poisson_nll_loss", method=False)
@quiet
def poisson_nll_loss(xp, input, target, log_input, full, eps, reduction):
    """Poisson negative log-likelihood of ``target`` with rate ``exp(input)`` (``log_input``) or ``input``;
    ``full`` adds Stirling's approximation of ``log(target!)`` where ``target > 1``."""
    reduction = _reduction("poisson_nll_loss", reduction)
    rd, (x, t) = _floats(input, target)
    loss = xp.exp(x) - t * x if log_input else x - t * xp.log(x + eps)
    if full:
        tt = xp.where(t > 1, t, 1)
        loss = loss + xp.where(t > 1, tt * xp.log(tt) - tt + 0.5 * xp.log(2 * np.pi * tt), 0)
    return _reduce(loss, reduction, rd)


@poisson_nll_loss.vjp
def _(ctx, g):
    a = bound(ctx, poisson_nll_loss)
    x, t = a["input"], a["target"]
    if a["log_input"]:
        gx, gt = x.exp() - t, -x
    else:
        gx, gt = 1 - t / (x + a["eps"]), -(x + a["eps"]).log()
    if a["full"]:
        # PyTorch masks the Stirling term after computing it: its nan/inf at t <= 0 reach the gradient
        gt = gt + (t.log() + 0.5 / t) * where(t > 1, 1.0, 0.0)
    return _pointwise_grads(ctx, poisson_nll_loss, g, gx, gt)


# ---- triplet margin loss ------------------------------------------------------------------------
@op("triplet_margin_loss", method=False)
def triplet_margin_loss(xp, anchor, positive, negative, margin=1.0, p=2.0, eps=1e-06, swap=False, reduction=0):
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` with ``d`` the pairwise ``p``-distance
    (``swap``: the smaller of d(anchor, negative) and d(positive, negative))."""
    reduction = _reduction("triplet_margin_loss", reduction)
    dims = (anchor.ndim, positive.ndim, negative.ndim)
    if len(set(dims)) > 1:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {dims[0]}D, positive {dims[1]}D, and negative {dims[2]}D "
                           f"inputs")
    dist = pairwise_distance.impl
    dp, dn = dist(xp, anchor, positive, p, eps), dist(xp, anchor, negative, p, eps)
    if swap:
        dn = xp.minimum(dn, dist(xp, positive, negative, p, eps))
    return _reduce(xp.maximum(margin + up(dp) - up(dn), 0), reduction, dp.dtype)


@triplet_margin_loss.vjp
def _(ctx, g):
    a = bound(ctx, triplet_margin_loss)
    an, po, ne, p, eps = a["anchor"], a["positive"], a["negative"], a["p"], a["eps"]
    dp, dn = pairwise_distance.fn(an, po, p, eps), pairwise_distance.fn(an, ne, p, eps)
    use_swap = None
    if a["swap"]:
        ds = pairwise_distance.fn(po, ne, p, eps)
        use_swap = ds < dn
        dn = where(use_swap, ds, dn)
    g = where(a["margin"] + dp - dn >= 0, _unreduce(g, a["reduction"], tuple(dp.shape)), 0.0)
    ga, gp = _chain_vjp(pairwise_distance, (an, po, p, eps), g)[:2]
    gn_from = g if use_swap is None else where(use_swap, 0.0, g)
    ga2, gn = _chain_vjp(pairwise_distance, (an, ne, p, eps), -gn_from)[:2]
    ga, gn = ga + ga2, gn
    if use_swap is not None:
        gp2, gn2 = _chain_vjp(pairwise_distance, (po, ne, p, eps), -where(use_swap, g, 0.0))[:2]
        gp, gn = gp + gp2, gn + gn2
    return ga.sum_to_size(an.shape), gp.sum_to_size(po.shape), gn.sum_to_size(ne.shape)
