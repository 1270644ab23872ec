"""Loss functions. Reductions: "mean", "sum" or "none"; the deprecated ``size_average``/``reduce`` flags map
onto them. Losses that ember-core registers (PyTorch has them in the torch namespace) take the reduction as
PyTorch's enum there."""
import math
import warnings

import ember
from ember._registry import TORCH_NAME

from ._activation import logsigmoid
from ._common import core, reduce_loss, reduction_of, tensor_parameters
from ._layers import linear, pairwise_distance

__all__ = ["nll_loss", "cross_entropy", "linear_cross_entropy", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
           "poisson_nll_loss", "gaussian_nll_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
           "multi_margin_loss", "multilabel_margin_loss", "margin_ranking_loss", "hinge_embedding_loss",
           "cosine_embedding_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss", "ctc_loss"]

_ENUM = {"none": 0, "mean": 1, "sum": 2}


def _torch_size(t):
    return f"torch.Size({list(t.shape)})"


# ---- classification ------------------------------------------------------------------------------
def _class_view(input, target):
    """(input, target) with a batch dim and the class dim at 1; checks PyTorch's shape and dtype rules."""
    shape, tshape = input.shape, target.shape
    nd, td = len(shape), len(tshape)
    if nd < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {nd})")
    if nd <= 2 and td > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    dtype = target.dtype
    if dtype is not ember.int64 and dtype is not ember.uint8:
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {TORCH_NAME[dtype]}")
    if nd == 1:
        return input.unsqueeze(0), target.reshape(1)
    if shape[0] != (tshape[0] if td else 1):
        raise ValueError(f"Expected input batch_size ({shape[0]}) to match target batch_size "
                         f"({tshape[0] if td else 1}).")
    if nd > 2 and list(tshape) != [shape[0], *shape[2:]]:
        raise RuntimeError(f"Expected target size {[shape[0], *shape[2:]]}, got {list(tshape)}")
    return input, target if dtype is ember.int64 else target.long()


def _class_weight(weight, C):
    if weight is not None and (weight.dim() != 1 or weight.shape[0] != C):
        raise RuntimeError(f"weight tensor should be defined either for all {C} classes or no classes but got weight "
                           f"tensor of shape: {list(weight.shape)}")
    return weight


def _picked(x, t, weight, ignore_index):
    """(-x at each target class, the weight of each element): zero weight where the target is ignored."""
    C = x.shape[1]
    keep = t != ignore_index
    safe = ember.where(keep, t, 0)
    # (bounds read from the array: inside ember.func.vmap that holds every example's targets)
    if safe.numel() and not (int(safe._data.min()) >= 0 and int(safe._data.max()) < C):
        bad = (safe < 0) | (safe >= C)
        raise IndexError(f"Target {int(safe[bad][0])} is out of bounds.")
    w = (weight[safe] * keep).to(x.dtype) if weight is not None else keep.to(x.dtype)
    return -x.gather(1, safe.unsqueeze(1)).squeeze(1), w


def _weighted_reduce(loss, w, reduction):
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / w.sum()


@tensor_parameters("input", "target", "weight")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of class indices; ``input`` holds log-probabilities over dim 1."""
    reduction = reduction_of(size_average, reduce, reduction)
    x, t = _class_view(input, target)
    _class_weight(weight, x.shape[1])
    nll, w = _picked(x, t, weight, ignore_index)
    loss = nll * w
    return _weighted_reduce(loss.reshape(target.shape) if reduction == "none" else loss, w, reduction)


@tensor_parameters("input", "target", "weight")
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Cross entropy of logits against class indices or class probabilities (a float target shaped like input)."""
    reduction = reduction_of(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    shape = input.shape
    cdim = 1 if len(shape) > 1 else 0
    C = shape[cdim] if shape else 1
    _class_weight(weight, C)
    if len(shape) == 2 and target.dim() == 1 and label_smoothing == 0 and shape[0] and C:
        x, t = _class_view(input, target)  # (checks shapes and dtypes)
        return core("_softmax_nll")(x, t, weight, _ENUM[reduction], ignore_index)  # one pass, one graph node
    logp = input.log_softmax(cdim)
    wshape = [1] * input.dim()
    if input.dim():
        wshape[cdim] = C
    if target.shape == input.shape and input.dim():  # class probabilities
        if not target.is_floating_point():
            raise RuntimeError(f"Expected floating point type for target with class probabilities, got "
                               f"{TORCH_NAME[target.dtype]}")
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / C
        terms = logp * target if weight is None else logp * target * weight.reshape(wshape)
        loss = -terms.sum(cdim)
        if reduction == "mean":
            return loss.sum() / (input.numel() // C if input.numel() else 0)
        return reduce_loss(loss, reduction)
    nll = nll_loss(logp, target, weight, None, ignore_index, None, reduction)
    if label_smoothing == 0:
        return nll
    # the smoothing term: minus the (weighted) sum of every class's log-probability, over C
    x, t = _class_view(logp, target)
    keep = t != ignore_index
    smooth = -(x if weight is None else x * weight.reshape([1, C] + [1] * (x.dim() - 2))).sum(1) * keep
    if reduction == "mean":
        w = (weight[ember.where(keep, t, 0)] * keep) if weight is not None else keep
        smooth = smooth.sum() / w.sum()
    else:
        smooth = smooth.reshape(target.shape) if reduction == "none" else smooth.sum()
    return (1 - label_smoothing) * nll + smooth * (label_smoothing / C)


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, options=None):
    """``cross_entropy`` of the logits ``input @ linear_weight^T + linear_bias``; a weight (C, *extra, in) gives
    logits (N, C, *extra). ``options`` configures PyTorch's chunked path; ember always takes the reference path."""
    w = linear_weight.reshape(-1, linear_weight.shape[-1])
    logits = linear(input, w, None if linear_bias is None else linear_bias.reshape(-1))
    logits = logits.reshape(tuple(input.shape[:-1]) + tuple(linear_weight.shape[:-1]))
    return cross_entropy(logits, target, weight,
                         ignore_index=-100 if ignore_index is None else ignore_index, reduction=reduction,
                         label_smoothing=label_smoothing)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """``-w * (t * log(x) + (1 - t) * log(1 - x))`` with the logarithms clamped at -100, as PyTorch does."""
    reduction = reduction_of(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({_torch_size(target)}) that is different to the input size "
                         f"({_torch_size(input)}) is deprecated. Please ensure they have the same size.")
    if input.numel() and bool(((input < 0) | (input > 1)).any()):
        raise RuntimeError("all elements of input should be between 0 and 1")
    return core("binary_cross_entropy")(input, target, weight, _ENUM[reduction])


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    reduction = reduction_of(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({_torch_size(target)}) must be the same as input size ({_torch_size(input)})")
    return core("binary_cross_entropy_with_logits")(input, target, weight, pos_weight, _ENUM[reduction])


# ---- regression ---------------------------------------------------------------------------------
def _pointwise(name, input, target, weight, reduction, fn):
    """A pointwise loss of the broadcast difference; with ``weight``, its weighted sum or mean."""
    if target.shape != input.shape:
        warnings.warn(f"Using a target size ({_torch_size(target)}) that is different to the input size "
                      f"({_torch_size(input)}). This will likely lead to incorrect results due to broadcasting. "
                      f"Please ensure they have the same size.", stacklevel=3)
    x, t = ember.broadcast_tensors(input, target)
    loss = fn(x - t)
    if weight is None:
        return reduce_loss(loss, reduction)
    if weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "mean":  # mse/l1 divide by the weight total; huber averages the weighted terms
        return loss.sum() / weight.sum() if name != "huber" else loss.mean()
    return reduce_loss(loss, reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = reduction_of(size_average, reduce, reduction)
    return _pointwise("mse", input, target, weight, reduction, lambda d: d * d)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = reduction_of(size_average, reduce, reduction)
    return _pointwise("l1", input, target, weight, reduction, lambda d: d.abs())


def _huber(d, delta):
    a = d.abs()
    return ember.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    reduction = reduction_of(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0:
        return l1_loss(input, target, reduction=reduction)
    return _pointwise("smooth_l1", input, target, None, reduction, lambda d: _huber(d, beta) / beta)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    reduction_of(None, None, reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return _pointwise("huber", input, target, weight, reduction, lambda d: _huber(d, delta))


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    if size_average is not None or reduce is not None:
        enum = _ENUM[reduction_of(size_average, reduce, reduction)]
    else:
        if reduction == "mean":
            warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                          "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                          "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                          stacklevel=2)
        if reduction not in _ENUM and reduction != "batchmean":
            raise ValueError(f"{reduction} is not a valid value for reduction")
        enum = _ENUM["sum" if reduction == "batchmean" else reduction]
    out = core("kl_div")(input, target, enum, log_target=log_target)
    return out / input.shape[0] if reduction == "batchmean" and input.dim() else out


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    reduction = reduction_of(size_average, reduce, reduction)
    return core("poisson_nll_loss")(input, target, log_input, full, eps, _ENUM[reduction])


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """``0.5 * (log(var) + (input - target)^2 / var)`` (plus ``0.5 * log(2 pi)`` when ``full``)."""
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = ember.full_like(input, var)
    elif bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if var.shape != input.shape:
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)  # one variance per sample, shared by its last-dim entries
        elif not (input.dim() == var.dim() and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in _ENUM:
        raise ValueError(reduction + " is not valid")
    with ember.no_grad():  # the clamp must not stop the gradient of var where it is above eps
        floor = var.detach().clamp_min(eps) - var.detach()
    var = var + floor
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduce_loss(loss, reduction)


# ---- margins ---------------------------------------------------------------------------------------
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``log(1 + exp(-target * input))``."""
    reduction = reduction_of(size_average, reduce, reduction)
    return reduce_loss(core("softplus")(-target * input), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = reduction_of(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    return reduce_loss(loss.sum(input.dim() - 1) / input.shape[-1], reduction)


@tensor_parameters("input", "target", "weight")
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Mean over classes ``i != y`` of ``max(0, margin - x[y] + x[i]) ** p`` (times ``weight[y]``)."""
    reduction = reduction_of(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    x = input.unsqueeze(0) if input.dim() <= 1 else input
    if x.dim() != 2:
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    t = target.reshape(-1)
    if t.shape[0] != x.shape[0]:
        raise RuntimeError(f"inconsistent target size, expected {x.shape[0]} but got {list(target.shape)}")
    C = x.shape[1]
    if t.numel() and bool(((t < 0) | (t >= C)).any()):
        raise RuntimeError("target out of range")
    xy = x.gather(1, t.unsqueeze(1))
    terms = (margin - xy + x).clamp_min(0) ** p
    if weight is not None:
        terms = terms * weight[t].unsqueeze(1)
    not_target = ember.arange(C, device=x.device) != t.unsqueeze(1)
    loss = (terms * not_target).sum(1) / C
    if input.dim() <= 1 and reduction == "none":
        loss = loss.reshape(target.shape)
    return reduce_loss(loss, reduction)


@tensor_parameters("input", "target")
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Sum over target classes j and non-target classes i of ``max(0, 1 - (x[j] - x[i]))``, over C. ``target``
    lists class indices, ended by the first -1."""
    reduction = reduction_of(size_average, reduce, reduction)
    x = input.unsqueeze(0) if input.dim() <= 1 else input
    t = target.reshape(x.shape) if target.dim() == input.dim() else None
    if t is None or x.dim() != 2:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    C = x.shape[1]
    if t.numel() and bool(((t < -1) | (t >= C)).any()):
        raise RuntimeError("multilabel_margin_loss: target out of range")
    listed = (t == -1).long().cumsum(1) == 0  # the indices before the first -1
    safe = ember.where(listed, t, 0)
    is_target = ember.zeros(x.shape, dtype=ember.int64, device=x.device).scatter_add(1, safe, listed.long()) > 0
    xj = x.gather(1, safe)
    margins = (1 - xj.unsqueeze(2) + x.unsqueeze(1)).clamp_min(0)
    loss = (margins * (listed.unsqueeze(2) & ~is_target.unsqueeze(1))).sum((1, 2)) / C
    if input.dim() <= 1:
        loss = loss.reshape(())
    return reduce_loss(loss, reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    reduction = reduction_of(size_average, reduce, reduction)
    if not input1.dim() == input2.dim() == target.dim():
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {_torch_size(input1)}, input2: {_torch_size(input2)}, target: "
                           f"{_torch_size(target)} ")
    return core("margin_ranking_loss")(input1, input2, target, margin, _ENUM[reduction])


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    reduction = reduction_of(size_average, reduce, reduction)
    return core("hinge_embedding_loss")(input, target, margin, _ENUM[reduction])


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    reduction = reduction_of(size_average, reduce, reduction)
    return core("cosine_embedding_loss")(input1, input2, target, margin, _ENUM[reduction])


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    reduction = reduction_of(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    return core("triplet_margin_loss")(anchor, positive, negative, margin, p, eps, swap, _ENUM[reduction])


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """``max(0, margin + d(a, p) - d(a, n))`` for any distance ``d`` (pairwise distance by default)."""
    reduction_of(None, None, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not anchor.dim() == positive.dim() == negative.dim():
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {anchor.dim()}D, positive {positive.dim()}D, and negative "
                           f"{negative.dim()}D inputs")
    d = distance_function or pairwise_distance
    pos, neg = d(anchor, positive), d(anchor, negative)
    if swap:
        neg = ember.minimum(neg, d(positive, negative))
    return reduce_loss((margin + pos - neg).clamp_min(0), reduction)


# ---- CTC ---------------------------------------------------------------------------------------------
def _safe_logsumexp(*terms):
    """``log(sum(exp(terms)))`` whose gradient stays finite (zero) where every term is -inf."""
    m = terms[0]
    for t in terms[1:]:
        m = ember.maximum(m, t)
    m = ember.where(m.isinf(), 0.0, m).detach()
    s = sum((t - m).exp() for t in terms)
    alive = s > 0
    return ember.where(alive, m + ember.where(alive, s, 1.0).log(), -math.inf)


def _as_lengths(v, like):
    return v.to(device=like.device, dtype=ember.int64) if isinstance(v, ember.Tensor) else \
        ember.tensor(list(v), dtype=ember.int64, device=like.device)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """Connectionist temporal classification: minus the log-probability of all alignments of each target, by the
    forward recursion over time (vectorised over the batch and the extended label sequence)."""
    reduction_of(None, None, reduction)
    unbatched = log_probs.dim() == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if unbatched:
        targets = targets.unsqueeze(0)
    T, N, C = lp.shape
    in_len, tgt_len = _as_lengths(input_lengths, lp).reshape(-1), _as_lengths(target_lengths, lp).reshape(-1)
    if in_len.shape[0] != N:
        raise RuntimeError(f"input_lengths must be of size batch_size ({N})")
    if tgt_len.shape[0] != N:
        raise RuntimeError(f"target_lengths must be of size batch_size ({N})")
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    if targets.dim() == 1:  # concatenated targets: gather them into a padded (N, S) matrix
        S = int(tgt_len.max()) if N else 0
        starts = tgt_len.cumsum(0) - tgt_len
        j = ember.arange(S, device=lp.device)
        pos = (starts.unsqueeze(1) + j).clamp_max(max(targets.shape[0] - 1, 0))
        padded = targets[pos] if targets.numel() else ember.zeros((N, S), dtype=ember.int64, device=lp.device)
    else:
        padded = targets
    padded = padded.long()
    S = padded.shape[1]
    L = 2 * S + 1
    s_idx = ember.arange(L, device=lp.device)
    in_target = s_idx.remainder(2) == 1
    labels = ember.where(in_target, padded.gather(1, (s_idx // 2).clamp_max(max(S - 1, 0)).expand(N, L))
                         if S else blank, blank)  # (N, L): blank, l1, blank, l2, ..., blank
    emit = lp.gather(2, labels.unsqueeze(0).expand(T, N, L))  # (T, N, L)
    prev2 = ember.cat([labels.new_full((N, 2), -1), labels[:, :-2]], 1)
    skip = in_target & (labels != prev2)  # may jump over the blank between two different labels
    neg_inf = ember.full((N, 1), -math.inf, dtype=lp.dtype, device=lp.device)
    alpha = ember.where(s_idx < 2, emit[0], -math.inf)
    alpha = ember.where((s_idx == 1) & (tgt_len.unsqueeze(1) == 0), -math.inf, alpha)
    for t in range(1, T):  # the recursion over time is inherently sequential
        shift1 = ember.cat([neg_inf, alpha[:, :-1]], 1)
        shift2 = ember.where(skip, ember.cat([neg_inf, neg_inf, alpha[:, :-2]], 1), -math.inf)
        new = _safe_logsumexp(alpha, shift1, shift2) + emit[t]
        alpha = ember.where((t < in_len).unsqueeze(1), new, alpha)
    end = 2 * tgt_len.unsqueeze(1)
    last = alpha.gather(1, end)
    before = ember.where(end > 0, alpha.gather(1, (end - 1).clamp_min(0)), -math.inf)
    loss = -_safe_logsumexp(last, before).squeeze(1)
    if zero_infinity:
        loss = ember.where(loss.isinf(), 0.0, loss)
    if reduction == "mean":
        return (loss / tgt_len.clamp_min(1).to(loss.dtype)).mean()
    if unbatched and reduction == "none":
        loss = loss[0]
    return reduce_loss(loss, reduction)

