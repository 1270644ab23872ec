"""The continuous Bernoulli distribution on [0, 1]: density proportional to ``p^x (1 - p)^(1 - x)``. Near
``p = 1/2`` (inside ``lims``) the closed forms lose precision to cancellation and Taylor expansions in
``p - 1/2`` take over. Samples invert the CDF at ``rand`` draws, so seeded samples are PyTorch's."""
import math
import numbers

import ember
import ember.nn.functional as F

from . import constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all, clamp_probs, expand_params, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            # checked before clamping away from 0 and 1, after which any value would pass
            if validate_args is not None and not bool(self.arg_constraints["probs"].check(self.probs).all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        self._lims = lims
        shape = ember.Size() if isinstance(given, numbers.Number) else self._param.size()
        super().__init__(shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = expand_params(self, ContinuousBernoulli, batch_shape, _instance, ["probs", "logits"])
        new._lims = self._lims
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    def _stable(self):
        """Where ``probs`` is far enough from 1/2 for the closed forms."""
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return ember.where(self._stable(), self.probs, self._lims[0] * ember.ones_like(self.probs))

    def _cont_bern_log_norm(self):
        """log C(p), C(p) = 2 atanh(1 - 2p) / (1 - 2p) the normalising constant."""
        p = self._cut_probs()
        below = ember.where(p <= 0.5, p, ember.zeros_like(p))
        above = ember.where(p >= 0.5, p, ember.ones_like(p))
        log_norm = (ember.log(ember.abs(ember.log1p(-p) - ember.log(p)))
                    - ember.where(p <= 0.5, ember.log1p(-2.0 * below), ember.log(2.0 * above - 1.0)))
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return ember.where(self._stable(), log_norm, taylor)

    @property
    def mean(self):
        p = self._cut_probs()
        exact = p / (2.0 * p - 1.0) + 1.0 / (ember.log1p(-p) - ember.log(p))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return ember.where(self._stable(), exact, taylor)

    @property
    def stddev(self):
        return self.variance.sqrt()

    @property
    def variance(self):
        p = self._cut_probs()
        exact = p * (p - 1.0) / (1.0 - 2.0 * p).pow(2) + 1.0 / (ember.log1p(-p) - ember.log(p)).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return ember.where(self._stable(), exact, taylor)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self):
        return self._param.size()

    def sample(self, sample_shape=ember.Size()):
        u = ember.rand(self._extended_shape(sample_shape), dtype=self.probs.dtype, device=self.probs.device)
        with ember.no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape=ember.Size()):
        u = ember.rand(self._extended_shape(sample_shape), dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        p = self._cut_probs()
        exact = (p.pow(value) * (1.0 - p).pow(1.0 - value) + p - 1.0) / (2.0 * p - 1.0)
        inside = ember.where(self._stable(), exact, value)
        return ember.where(value <= 0.0, ember.zeros_like(value),
                           ember.where(value >= 1.0, ember.ones_like(value), inside))

    def icdf(self, value):
        p = self._cut_probs()
        exact = (ember.log1p(-p + value * (2.0 * p - 1.0)) - ember.log1p(-p)) / (ember.log(p) - ember.log1p(-p))
        return ember.where(self._stable(), exact, value)

    def entropy(self):
        log_q, log_p = ember.log1p(-self.probs), ember.log(self.probs)
        return self.mean * (log_q - log_p) - self._cont_bern_log_norm() - log_q

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        stable = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut = ember.where(stable, x, (self._lims[0] - 0.5) * ember.ones_like(x))
        log_norm = ember.log(ember.abs(ember.expm1(cut))) - ember.log(ember.abs(cut))
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return ember.where(stable, log_norm, taylor)
