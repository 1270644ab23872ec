"""Student's t distribution. Densities and entropy need ember-special; seeded samples (a normal over the root of
a chi-squared) do not reproduce PyTorch's."""
import math

import ember

from . import constraints
from .chi2 import Chi2
from .distribution import Distribution
from .utils import _standard_normal, broadcast_all

__all__ = ["StudentT"]


class StudentT(Distribution):
    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = ember.Size(batch_shape)
        new.df, new.loc, new.scale = (p.expand(batch_shape) for p in (self.df, self.loc, self.scale))
        new._chi2 = self._chi2.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return ember.where(self.df > 1, self.loc, math.nan)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2).clamp(min=1e-30)
        return ember.where(df > 2, finite, ember.where(df > 1, math.inf, math.nan))

    def rsample(self, sample_shape=ember.Size()):
        shape = self._extended_shape(sample_shape)
        x = _standard_normal(shape, dtype=self.df.dtype, device=self.df.device)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * x * ember.rsqrt(z / self.df)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        df = self.df
        y = (value - self.loc) / self.scale
        log_norm = (self.scale.log() + 0.5 * df.log() + 0.5 * math.log(math.pi) + ember.lgamma(0.5 * df)
                    - ember.lgamma(0.5 * (df + 1.0)))
        return -0.5 * (df + 1.0) * ember.log1p(y ** 2.0 / df) - log_norm

    def entropy(self):
        df = self.df
        log_beta = ember.lgamma(0.5 * df) + math.lgamma(0.5) - ember.lgamma(0.5 * (df + 1))
        return (self.scale.log() + 0.5 * (df + 1) * (ember.digamma(0.5 * (df + 1)) - ember.digamma(0.5 * df))
                + 0.5 * df.log() + log_beta)
