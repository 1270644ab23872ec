"""The multinomial distribution: counts of ``total_count`` categorical draws. Samples count the draws of
Categorical, so seeded samples equal PyTorch's; ``log_prob``/``entropy`` need ember-special (lgamma)."""
import math

import ember

from . import constraints
from .binomial import Binomial
from .categorical import Categorical
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self._categorical.probs)  # (normalised)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = ember.Size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = self._binomial.expand(batch_shape + self.event_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=ember.Size()):
        sample_shape = ember.Size(sample_shape)
        draws = self._categorical.sample(ember.Size((self.total_count,)) + sample_shape)
        draws = draws.permute(*range(1, draws.dim()), 0)  # the draws last
        counts = ember.zeros(self._extended_shape(sample_shape), dtype=draws.dtype, device=draws.device)
        return counts.scatter_add_(-1, draws, ember.ones_like(draws)).type_as(self.probs)

    def entropy(self):
        n = ember.tensor(self.total_count)
        term1 = n * self._categorical.entropy() - ember.lgamma(n + 1)
        # E[sum_i log x_i!] by each count's binomial marginal
        counts = self._binomial.enumerate_support(expand=False)[1:]
        term2 = (self._binomial.log_prob(counts).exp() * ember.lgamma(counts + 1)).sum([0, -1])
        return term1 + term2

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        logits = ember.where((value == 0) & (logits == -math.inf), ember.zeros_like(logits), logits)
        return (ember.lgamma(value.sum(-1) + 1) - ember.lgamma(value + 1).sum(-1)
                + (logits * value).sum(-1))
