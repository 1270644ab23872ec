"""The Laplace (double exponential) distribution."""
import math
import numbers

import ember

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, expand_params

__all__ = ["Laplace"]


class Laplace(Distribution):
    """Density ``exp(-|x - loc| / scale) / (2 scale)``; samples by inverting the CDF at uniforms on
    ``(eps - 1, 1)``, as PyTorch draws them."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        both_numbers = isinstance(loc, numbers.Number) and isinstance(scale, numbers.Number)
        super().__init__(ember.Size() if both_numbers else self.loc.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return expand_params(self, Laplace, batch_shape, _instance, ["loc", "scale"])

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape=ember.Size()):
        shape = self._extended_shape(sample_shape)
        eps = ember.finfo(self.loc.dtype).eps
        u = ember.empty(shape, dtype=self.loc.dtype, device=self.loc.device).uniform_(eps - 1, 1)
        return self.loc - self.scale * u.sign() * ember.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -ember.log(2 * self.scale) - ember.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = value - self.loc
        return 0.5 - 0.5 * z.sign() * ember.expm1(-z.abs() / self.scale)

    def icdf(self, value):
        t = value - 0.5
        return self.loc - self.scale * t.sign() * ember.log1p(-2 * t.abs())

    def entropy(self):
        return 1 + ember.log(2 * self.scale)
