"""A multivariate normal whose covariance is ``W W^T + diag(D)`` (rank-``m`` factor ``W`` plus a diagonal):
densities in O(n m^2) through the ``m x m`` capacitance matrix ``I + W^T D^-1 W`` (Woodbury and the matrix
determinant lemma). Samples are ``loc + W eps_m + sqrt(D) eps_n``, as PyTorch's."""
import math

import ember

from . import constraints
from .distribution import Distribution
from .multivariate_normal import _batch_mahalanobis, _batch_mv
from .utils import _standard_normal, lazy_property

__all__ = ["LowRankMultivariateNormal"]


def _capacitance_tril(factor, diag):
    """Cholesky factor of ``I + W^T D^-1 W``."""
    m = factor.size(-1)
    k = ember.matmul(factor.mT / diag.unsqueeze(-2), factor)
    return ember.linalg.cholesky(k + ember.eye(m, dtype=k.dtype, device=k.device))


def _lowrank_logdet(factor, diag, capacitance_tril):
    # log det(W W^T + D) = log det(capacitance) + log det(D)
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + diag.log().sum(-1)


def _lowrank_mahalanobis(factor, diag, x, capacitance_tril):
    # x^T (W W^T + D)^-1 x = x^T D^-1 x - |C^-1 W^T D^-1 x|^2, C the capacitance factor
    wt_dinv_x = _batch_mv(factor.mT / diag.unsqueeze(-2), x)
    return (x.pow(2) / diag).sum(-1) - _batch_mahalanobis(capacitance_tril, wt_dinv_x)


class LowRankMultivariateNormal(Distribution):
    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if cov_factor.shape[-2:-1] != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if cov_diag.shape[-1:] != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            loc_, self.cov_factor, diag_ = ember.broadcast_tensors(loc.unsqueeze(-1), cov_factor,
                                                                   cov_diag.unsqueeze(-1))
        except RuntimeError as e:
            raise ValueError(f"Incompatible batch shapes: loc {loc.shape}, cov_factor {cov_factor.shape}, "
                             f"cov_diag {cov_diag.shape}") from e
        self.loc, self.cov_diag = loc_[..., 0], diag_[..., 0]
        super().__init__(self.loc.shape[:-1], event_shape, validate_args=validate_args)
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _capacitance_tril(cov_factor, cov_diag)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = ember.Size(batch_shape)
        shape = batch_shape + self.event_shape
        new.loc, new.cov_diag = self.loc.expand(shape), self.cov_diag.expand(shape)
        new.cov_factor = self.cov_factor.expand(shape + self.cov_factor.shape[-1:])
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        var = self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag
        return var.expand(self._batch_shape + self._event_shape)

    @lazy_property
    def scale_tril(self):
        # L = D^1/2 chol(I + D^-1/2 W W^T D^-1/2): well conditioned, unlike chol(W W^T + D) for small D
        n = self._event_shape[0]
        root = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        scaled = self._unbroadcasted_cov_factor / root
        k = ember.matmul(scaled, scaled.mT) + ember.eye(n, dtype=scaled.dtype, device=scaled.device)
        return (root * ember.linalg.cholesky(k)).expand(self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def covariance_matrix(self):
        w = self._unbroadcasted_cov_factor
        cov = ember.matmul(w, w.mT) + ember.diag_embed(self._unbroadcasted_cov_diag)
        return cov.expand(self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def precision_matrix(self):
        # Woodbury: D^-1 - D^-1 W C^-T C^-1 W^T D^-1
        wt_dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        a = ember.linalg.solve_triangular(self._capacitance_tril, wt_dinv, upper=False)
        prec = ember.diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - ember.matmul(a.mT, a)
        return prec.expand(self._batch_shape + self._event_shape + self._event_shape)

    def rsample(self, sample_shape=ember.Size()):
        shape = self._extended_shape(sample_shape)
        opts = {"dtype": self.loc.dtype, "device": self.loc.device}
        eps_w = _standard_normal(shape[:-1] + self.cov_factor.shape[-1:], **opts)
        eps_d = _standard_normal(shape, **opts)
        return (self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_w)
                + self._unbroadcasted_cov_diag.sqrt() * eps_d)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        m = _lowrank_mahalanobis(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, value - self.loc,
                                 self._capacitance_tril)
        log_det = _lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                  self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + log_det + m)

    def entropy(self):
        log_det = _lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                  self._capacitance_tril)
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + log_det)
        return h if len(self._batch_shape) == 0 else h.expand(self._batch_shape)
