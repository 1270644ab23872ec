"""Helpers shared by the distributions: broadcasting parameters, probabilities <-> logits, cached properties."""
import numbers

import ember
import ember.nn.functional as F

__all__ = ["broadcast_all", "clamp_probs", "expand_params", "lazy_property", "logits_to_probs", "probs_to_logits",
           "tril_matrix_to_vec", "vec_to_tril_matrix"]


def broadcast_all(*values):
    """Tensors and numbers broadcast to one shape; numbers become tensors of the first tensor's dtype (or the
    default dtype)."""
    if not all(isinstance(v, (ember.Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, torch.Tensor or objects "
                         "implementing __torch_function__.")
    tensors = [v for v in values if isinstance(v, ember.Tensor)]
    if len(tensors) < len(values):
        like = tensors[0] if tensors else None
        opts = {"dtype": like.dtype if like is not None else ember.get_default_dtype(),
                "device": like.device if like is not None else None}
        values = [v if isinstance(v, ember.Tensor) else ember.tensor(v, **opts) for v in values]
    # (ember.broadcast_tensors records every output in the graph: those of constants are detached, as PyTorch's)
    return tuple(b if v.requires_grad else b.detach() for v, b in zip(values, ember.broadcast_tensors(*values)))


def _standard_normal(shape, dtype, device):
    return ember.empty(shape, dtype=dtype, device=device).normal_()


def _sum_rightmost(value, dim):
    return value.reshape(value.shape[:value.dim() - dim] + (-1,)).sum(-1) if dim else value


def clamp_probs(probs):
    """Probabilities kept one machine epsilon away from 0 and 1, so that their logarithms stay finite."""
    eps = ember.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    return ember.sigmoid(logits) if is_binary else F.softmax(logits, dim=-1)


def probs_to_logits(probs, is_binary=False):
    p = clamp_probs(probs)
    return ember.log(p) - ember.log1p(-p) if is_binary else ember.log(p)


class lazy_property:
    """Computed on first access (with gradients recorded, whatever the caller's grad mode) and then stored on the
    instance, so that a distribution made from probabilities computes its logits only if asked."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with ember.enable_grad():
            value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


def expand_params(dist, cls, batch_shape, _instance, names):
    """``dist`` as a ``cls`` of ``batch_shape``: the parameters ``names`` that ``dist`` holds (lazy ones only if
    computed) expanded, keeping their event dimensions; the caller copies anything else."""
    new = dist._get_checked_instance(cls, _instance)
    batch_shape = ember.Size(batch_shape)
    for name in names:
        if name in dist.__dict__:
            value = dist.__dict__[name]
            new.__dict__[name] = value.expand(batch_shape + value.shape[len(dist.batch_shape):])
    from .distribution import Distribution  # (distribution.py imports this module)
    Distribution.__init__(new, batch_shape, dist.event_shape, validate_args=False)
    new._validate_args = dist._validate_args
    return new


def _tril_positions(n, diag, device=None):
    """Boolean (n, n) mask of the entries on or below diagonal ``diag``."""
    r = ember.arange(n, device=device)
    return r < r.view(-1, 1) + (diag + 1)


def vec_to_tril_matrix(vec, diag=0):
    """The (n, n) matrices whose entries on and below diagonal ``diag`` are ``vec``'s, row by row; zeros above."""
    m = vec.shape[-1]
    # n from m, the count of entries on and below diagonal diag of an n x n matrix (a quadratic in n)
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * m + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if abs(round(n) - n) > 1e-6:
        raise ValueError(f"The size of last dimension is {m} which cannot be expressed as the lower triangular part "
                         "of a square D x D matrix.")
    n = round(n)
    where = _tril_positions(n, diag, vec.device).reshape(-1)
    # gather from [0, vec...]: position k of the matrix takes element 1 + rank of k among the masked positions
    source = ember.where(where, where.long().cumsum(0), ember.zeros_like(where.long()))
    padded = F.pad(vec, [1, 0], value=0.0)
    return padded.index_select(-1, source).reshape(vec.shape[:-1] + (n, n))


def tril_matrix_to_vec(mat, diag=0):
    """The entries of ``mat`` on and below diagonal ``diag``, row by row (the inverse of vec_to_tril_matrix)."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    where = _tril_positions(n, diag, mat.device).reshape(-1).nonzero().reshape(-1)
    return mat.reshape(mat.shape[:-2] + (n * n,)).index_select(-1, where)
