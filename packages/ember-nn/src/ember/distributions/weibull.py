"""The Weibull distribution: ``scale * E ** (1 / concentration)`` for ``E ~ Exponential(1)``. (mean and
variance use lgamma, from ember-special.)"""
import ember

from . import constraints
from .exponential import Exponential
from .gumbel import _EULER_GAMMA
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .utils import broadcast_all

__all__ = ["Weibull"]


class Weibull(TransformedDistribution):
    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        super().__init__(Exponential(ember.ones_like(self.scale), validate_args=validate_args),
                         self._transforms(self), validate_args=validate_args)

    @staticmethod
    def _transforms(d):
        return [PowerTransform(exponent=d.concentration_reciprocal), AffineTransform(loc=0, scale=d.scale)]

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Weibull, _instance)
        new.scale, new.concentration = self.scale.expand(batch_shape), self.concentration.expand(batch_shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        TransformedDistribution.__init__(new, self.base_dist.expand(batch_shape), self._transforms(new),
                                         validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.scale * ember.exp(ember.lgamma(1 + self.concentration_reciprocal))

    @property
    def mode(self):
        k = self.concentration
        return self.scale * ((k - 1) / k) ** k.reciprocal()

    @property
    def variance(self):
        r = self.concentration_reciprocal
        return self.scale.pow(2) * (ember.exp(ember.lgamma(1 + 2 * r)) - ember.exp(2 * ember.lgamma(1 + r)))

    def entropy(self):
        r = self.concentration_reciprocal
        return _EULER_GAMMA * (1 - r) + ember.log(self.scale * r) + 1
