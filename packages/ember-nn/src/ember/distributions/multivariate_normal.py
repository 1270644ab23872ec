"""The multivariate normal distribution, parameterised by a covariance, precision or lower Cholesky factor;
everything is computed from the Cholesky factor ``L`` of the covariance. Samples are ``loc + L @ eps`` with
``eps`` standard normal, as PyTorch's."""
import math

import ember

from . import constraints
from .distribution import Distribution
from .utils import _standard_normal, lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mv(mat, vec):
    return ember.matmul(mat, vec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(low, x):
    """``x^T (L L^T)^{-1} x`` over broadcast batches of lower-triangular ``low`` and vectors ``x``."""
    y = ember.linalg.solve_triangular(low, x.unsqueeze(-1), upper=False).squeeze(-1)
    return y.pow(2).sum(-1)


def _precision_to_scale_tril(precision):
    # the Cholesky factor of P's inverse without inverting P: factor P with rows and columns reversed
    flipped = ember.linalg.cholesky(ember.flip(precision, (-2, -1)))
    inv_low = ember.transpose(ember.flip(flipped, (-2, -1)), -2, -1)
    eye = ember.eye(precision.shape[-1], dtype=precision.dtype, device=precision.device)
    return ember.linalg.solve_triangular(inv_low, eye, upper=False)


class MultivariateNormal(Distribution):
    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        matrix = given[0]
        if matrix.dim() < 2:
            name = ("covariance_matrix" if covariance_matrix is not None else
                    "precision_matrix" if precision_matrix is not None else "scale_tril matrix")
            raise ValueError(f"{name} must be at least two-dimensional, with optional leading batch dimensions")
        batch_shape = ember.Size(ember.broadcast_shapes(matrix.shape[:-2], loc.shape[:-1]))
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(batch_shape + (-1, -1))
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(batch_shape + (-1, -1))
        else:
            self.precision_matrix = precision_matrix.expand(batch_shape + (-1, -1))
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = ember.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = ember.Size(batch_shape)
        new.loc = self.loc.expand(batch_shape + self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(batch_shape + self.event_shape + self.event_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def covariance_matrix(self):
        low = self._unbroadcasted_scale_tril
        return ember.matmul(low, low.mT).expand(self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def precision_matrix(self):
        return ember.cholesky_inverse(self._unbroadcasted_scale_tril).expand(
            self._batch_shape + self._event_shape + self._event_shape)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=ember.Size()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h if len(self._batch_shape) == 0 else h.expand(self._batch_shape)
