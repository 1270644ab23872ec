"""Exponential-family distributions: densities ``h(x) exp(<theta, t(x)> - A(theta))``, whose entropy follows
from the log-normaliser ``A`` and its gradient (a Bregman divergence), for subclasses without a closed form."""
import ember

from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Subclasses give ``_natural_params`` (tuple of tensors), ``_log_normalizer(*params)`` and
    ``_mean_carrier_measure`` (E[log h(x)])."""

    @property
    def _natural_params(self):
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def entropy(self):
        # H = A(theta) - <theta, grad A(theta)> - E[log h(x)]
        params = [p.detach().requires_grad_() for p in self._natural_params]
        with ember.enable_grad():
            log_norm = self._log_normalizer(*params)
            grads = ember.autograd.grad(log_norm.sum(), params, create_graph=True)
        result = log_norm - self._mean_carrier_measure
        for p, g in zip(params, grads):
            result = result - (p * g).reshape(self._batch_shape + (-1,)).sum(-1)
        return result
