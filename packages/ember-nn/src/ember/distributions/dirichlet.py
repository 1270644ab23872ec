"""The Dirichlet distribution over the simplex. Densities and entropy need ember-special; seeded samples
(normalised gamma variates) do not reproduce PyTorch's, and their gradients flow through the gammas' implicit
reparameterisation (PyTorch differentiates the Dirichlet sample directly): both are unbiased, their values per
sample differ."""
import ember
import ember.nn.functional as F

from . import constraints
from ._gamma import standard_gamma
from .exp_family import ExponentialFamily
from .utils import expand_params

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """Points of the simplex with density proportional to ``prod x_i ** (concentration_i - 1)``."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return expand_params(self, Dirichlet, batch_shape, _instance, ["concentration"])

    def rsample(self, sample_shape=ember.Size()):
        g = standard_gamma(self.concentration.expand(self._extended_shape(sample_shape)))
        info = ember.finfo(g.dtype)
        return (g / g.sum(-1, keepdim=True)).clamp(min=info.tiny, max=1 - info.eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return ember.xlogy(c - 1.0, value).sum(-1) + ember.lgamma(c.sum(-1)) - ember.lgamma(c).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        excess = (self.concentration - 1).clamp(min=0.0)
        mode = excess / excess.sum(-1, True)
        # all concentrations below 1: the density peaks at a vertex; which one follows PyTorch's choice, the
        # argmax of the 0/0 row (its first entry)
        vertex = F.one_hot(mode.argmax(dim=-1), excess.shape[-1]).to(mode)
        return ember.where((self.concentration < 1).all(dim=-1, keepdim=True), vertex, mode)

    @property
    def variance(self):
        total = self.concentration.sum(-1, True)
        return self.concentration * (total - self.concentration) / (total.pow(2) * (total + 1))

    def entropy(self):
        c = self.concentration
        k, total = c.size(-1), c.sum(-1)
        return (ember.lgamma(c).sum(-1) - ember.lgamma(total) - (k - total) * ember.digamma(total)
                - ((c - 1.0) * ember.digamma(c)).sum(-1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return ember.lgamma(x).sum(-1) - ember.lgamma(x.sum(-1))
