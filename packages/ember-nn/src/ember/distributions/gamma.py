"""The gamma distribution (shape ``concentration``, inverse scale ``rate``). Densities and entropy use
ember.lgamma/digamma/xlogy/igamma, which ember-special provides. Seeded samples do not reproduce PyTorch's (see
``_gamma``)."""
import numbers

import ember

from . import constraints
from ._gamma import standard_gamma
from .exp_family import ExponentialFamily
from .utils import broadcast_all, expand_params

__all__ = ["Gamma"]


class Gamma(ExponentialFamily):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        both_numbers = isinstance(concentration, numbers.Number) and isinstance(rate, numbers.Number)
        super().__init__(ember.Size() if both_numbers else self.concentration.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return expand_params(self, Gamma, batch_shape, _instance, ["concentration", "rate"])

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=ember.Size()):
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return value.clamp(min=ember.finfo(value.dtype).tiny)  # a zero sample would have log_prob -inf

    def log_prob(self, value):
        value = ember.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        c, r = self.concentration, self.rate
        return ember.xlogy(c, r) + ember.xlogy(c - 1, value) - r * value - ember.lgamma(c)

    def entropy(self):
        c = self.concentration
        return c - ember.log(self.rate) + ember.lgamma(c) + (1.0 - c) * ember.digamma(c)

    @property
    def _natural_params(self):
        return self.concentration - 1, -self.rate

    def _log_normalizer(self, x, y):
        return ember.lgamma(x + 1) + (x + 1) * ember.log(-y.reciprocal())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ember.igamma(self.concentration, self.rate * value)
