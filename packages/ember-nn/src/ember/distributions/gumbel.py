"""The Gumbel (type-I extreme value) distribution."""
import math
import numbers

import ember

from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, ExpTransform
from .uniform import Uniform
from .utils import broadcast_all

__all__ = ["Gumbel"]

_EULER_GAMMA = 0.57721566490153286061


class Gumbel(TransformedDistribution):
    """``loc - scale * log(-log U)`` for U uniform on (tiny, 1 - eps), as PyTorch builds it."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        info = ember.finfo(self.loc.dtype)
        if isinstance(loc, numbers.Number) and isinstance(scale, numbers.Number):
            base = Uniform(info.tiny, 1 - info.eps, validate_args=validate_args)
        else:
            base = Uniform(ember.full_like(self.loc, info.tiny), ember.full_like(self.loc, 1 - info.eps),
                           validate_args=validate_args)
        transforms = [ExpTransform().inv, AffineTransform(loc=0, scale=-ember.ones_like(self.scale)),
                      ExpTransform().inv, AffineTransform(loc=self.loc, scale=-self.scale)]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gumbel, _instance)
        new.loc, new.scale = self.loc.expand(batch_shape), self.scale.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    @property
    def mean(self):
        return self.loc + self.scale * _EULER_GAMMA

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def entropy(self):
        return self.scale.log() + (1 + _EULER_GAMMA)
