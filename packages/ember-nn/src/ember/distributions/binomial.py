"""The binomial distribution: successes in ``total_count`` Bernoulli trials. ``log_prob`` and ``entropy`` need
ember-special (lgamma); seeded samples (ember.binomial) do not reproduce PyTorch's."""
import ember

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, expand_params, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Binomial"]


def _clamp_by_zero(x):
    # max(x, 0) with gradient 1/2 at 0, as PyTorch's
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(Distribution):
    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
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
        new = expand_params(self, Binomial, batch_shape, _instance, ["total_count", "probs", "logits"])
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.size()

    def sample(self, sample_shape=ember.Size()):
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            return ember.binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_binom = ember.lgamma(n + 1) - ember.lgamma(value + 1) - ember.lgamma(n - value + 1)
        # n * log(1 + exp(logits)), stable for large |logits|
        log_norm = n * _clamp_by_zero(logits) + n * ember.log1p(ember.exp(-ember.abs(logits)))
        return value * logits + log_binom - log_norm

    def _homogeneous_count(self, what):
        n = int(self.total_count.max())
        if not self.total_count.min() == n:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return n

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(ember.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        n = self._homogeneous_count("enumerate_support")
        values = ember.arange(1 + n, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + self._batch_shape) if expand else values
