"""The negative binomial distribution: the number of successes (each of probability ``probs``) before
``total_count`` failures. ``log_prob`` needs ember-special;
samples (a Poisson of a gamma rate) do not reproduce PyTorch's."""
import ember
import ember.nn.functional as F

from . import constraints
from .distribution import Distribution
from .gamma import Gamma
from .utils import broadcast_all, expand_params, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["NegativeBinomial"]


class NegativeBinomial(Distribution):
    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0), "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.type_as(self.probs)
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.type_as(self.logits)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = expand_params(self, NegativeBinomial, batch_shape, _instance, ["total_count", "probs", "logits"])
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    @property
    def mean(self):
        return self.total_count * ember.exp(self.logits)

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / ember.sigmoid(-self.logits)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.size()

    @lazy_property
    def _gamma(self):
        # unvalidated: total_count may be 0
        return Gamma(concentration=self.total_count, rate=ember.exp(-self.logits), validate_args=False)

    def sample(self, sample_shape=ember.Size()):
        with ember.no_grad():
            return ember.poisson(self._gamma.sample(sample_shape=sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        log_unnormalized = n * F.logsigmoid(-self.logits) + value * F.logsigmoid(self.logits)
        # n = 0 and value = 0: probability 1, although lgamma(0) is infinite (n = 1 there keeps inf - inf out)
        certain = n + value == 0.0
        n = ember.where(certain, ember.ones_like(n), n)
        log_norm = -ember.lgamma(n + value) + ember.lgamma(1.0 + value) + ember.lgamma(n)
        return log_unnormalized - log_norm.masked_fill(certain, 0.0)
