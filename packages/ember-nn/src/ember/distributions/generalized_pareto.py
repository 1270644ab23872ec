"""The generalised Pareto distribution (peaks over a threshold): shape ``concentration`` (0 gives the
exponential, negative a bounded support). Samples invert the CDF at ``rand`` draws, as PyTorch's."""
import math
import numbers

import ember

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, expand_params

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        numbers_only = all(isinstance(v, numbers.Number) for v in (loc, scale, concentration))
        super().__init__(ember.Size() if numbers_only else self.loc.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return expand_params(self, GeneralizedPareto, batch_shape, _instance, ["loc", "scale", "concentration"])

    def _safe_concentration(self):
        """(concentration == 0, the concentration with ones there): the zero case has its own formulas."""
        zero = ember.isclose(self.concentration, ember.zeros_like(self.concentration))
        return zero, ember.where(zero, ember.ones_like(self.concentration), self.concentration)

    def rsample(self, sample_shape=ember.Size()):
        u = ember.rand(self._extended_shape(sample_shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def _z(self, x):
        return (x - self.loc) / self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        zero, c = self._safe_concentration()
        y = 1 / c + ember.ones_like(z)
        nonzero = ember.where(y == 0, y, y * ember.log1p(c * z))
        return -self.scale.log() - ember.where(zero, z, nonzero)

    def log_survival_function(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        zero, c = self._safe_concentration()
        return ember.where(zero, -z, -ember.log1p(c * z) / c)

    def log_cdf(self, value):
        return ember.log1p(-ember.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return ember.exp(self.log_cdf(value))

    def icdf(self, value):
        zero, c = self._safe_concentration()
        log_u = ember.log1p(-value)
        return ember.where(zero, self.loc - self.scale * log_u, self.loc + self.scale / c * ember.expm1(-c * log_u))

    @property
    def mean(self):
        valid = self.concentration < 1
        c = ember.where(valid, self.concentration, 0.5)
        return ember.where(valid, self.loc + self.scale / (1 - c), math.nan)

    @property
    def variance(self):
        valid = self.concentration < 0.5
        c = ember.where(valid, self.concentration, 0.25)
        return ember.where(valid, self.scale ** 2 / ((1 - c) ** 2 * (1 - 2 * c)), math.nan)

    def entropy(self):
        return ember.broadcast_to(ember.log(self.scale) + self.concentration + 1, self._batch_shape)

    @property
    def mode(self):
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        upper = ember.where(self.concentration < 0, self.loc - self.scale / self.concentration, math.inf)
        return constraints.interval(self.loc, upper)
