"""The Fisher-Snedecor F distribution: a ratio of chi-squared variables over their degrees of freedom.
``log_prob`` needs ember-special; seeded samples (gamma-based) do not reproduce PyTorch's."""
import math
import numbers

import ember

from . import constraints
from .distribution import Distribution
from .gamma import Gamma
from .utils import broadcast_all

__all__ = ["FisherSnedecor"]


class FisherSnedecor(Distribution):
    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        both_numbers = isinstance(df1, numbers.Number) and isinstance(df2, numbers.Number)
        super().__init__(ember.Size() if both_numbers else self.df1.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(FisherSnedecor, _instance)
        batch_shape = ember.Size(batch_shape)
        new.df1, new.df2 = self.df1.expand(batch_shape), self.df2.expand(batch_shape)
        new._gamma1, new._gamma2 = self._gamma1.expand(batch_shape), self._gamma2.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        df2 = ember.where(self.df2 <= 2, math.nan, self.df2)
        return df2 / (df2 - 2)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return ember.where(self.df1 <= 2, math.nan, mode)

    @property
    def variance(self):
        df2 = ember.where(self.df2 <= 4, math.nan, self.df2)
        return 2 * df2.pow(2) * (self.df1 + df2 - 2) / (self.df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape=ember.Size(())):
        shape = self._extended_shape(sample_shape)
        # X_i ~ Gamma(df_i / 2, df_i) is chi2(df_i) / df_i, so X1 / X2 ~ F(df1, df2)
        x1 = self._gamma1.rsample(sample_shape).view(shape)
        x2 = self._gamma2.rsample(sample_shape).view(shape)
        tiny = ember.finfo(x2.dtype).tiny
        return (x1 / x2.clamp(min=tiny)).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.df1 * 0.5, self.df2 * 0.5
        ratio = self.df1 / self.df2
        log_beta = ember.lgamma(a) + ember.lgamma(b) - ember.lgamma(a + b)
        return -log_beta + a * ratio.log() + (a - 1) * ember.log(value) - (a + b) * ember.log1p(ratio * value)
