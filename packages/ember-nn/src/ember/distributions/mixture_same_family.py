"""A mixture of distributions of one family: a Categorical picks one of the ``k`` components, the rightmost
batch dimension of ``component_distribution``."""
import ember

from . import constraints
from .categorical import Categorical
from .distribution import Distribution

__all__ = ["MixtureSameFamily"]


class MixtureSameFamily(Distribution):
    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution needs to be an instance of torch.distributions.Distribution")
        mixture_batch = mixture_distribution.batch_shape
        component_batch = component_distribution.batch_shape[:-1]
        for a, b in zip(reversed(mixture_batch), reversed(component_batch)):
            if a != 1 and b != 1 and a != b:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mixture_batch}) is not compatible with "
                                 f"`component_distribution.batch_shape`({component_batch})")
        km, kc = mixture_distribution.logits.shape[-1], component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(f"`mixture_distribution component` ({km}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({kc})")
        self._num_component = km
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(batch_shape=component_batch, event_shape=component_distribution.event_shape,
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = ember.Size(batch_shape)
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        new._component_distribution = self._component_distribution.expand(batch_shape + (self._num_component,))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component, new._event_ndims = self._num_component, self._event_ndims
        Distribution.__init__(new, batch_shape, new._component_distribution.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property
    def support(self):
        return constraints.MixtureSameFamilyConstraint(self._component_distribution.support)

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    def _pad(self, x):
        """A value with a components dimension before its event dimensions."""
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x):
        """Mixture weights (..., k) shaped to broadcast against the components' (batch..., k, event...)."""
        missing = len(self.batch_shape) - len(self.mixture_distribution.batch_shape)
        pad = 0 if len(self.mixture_distribution.batch_shape) == 1 else missing
        return x.reshape(x.shape[:-1] + (1,) * pad + x.shape[-1:] + (1,) * self._event_ndims)

    @property
    def mean(self):
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        return ember.sum(probs * self.component_distribution.mean, dim=-1 - self._event_ndims)

    @property
    def variance(self):
        # total variance: E[Var(Y | X)] + Var(E[Y | X])
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        dim = -1 - self._event_ndims
        within = ember.sum(probs * self.component_distribution.variance, dim=dim)
        between = ember.sum(probs * (self.component_distribution.mean - self._pad(self.mean)).pow(2.0), dim=dim)
        return within + between

    def cdf(self, x):
        return ember.sum(self.component_distribution.cdf(self._pad(x)) * self.mixture_distribution.probs, dim=-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        log_prob_x = self.component_distribution.log_prob(self._pad(x))
        return ember.logsumexp(log_prob_x + ember.log_softmax(self.mixture_distribution.logits, dim=-1), dim=-1)

    def sample(self, sample_shape=ember.Size()):
        with ember.no_grad():
            gather_dim = len(sample_shape) + len(self.batch_shape)
            es = self.event_shape
            which = self.mixture_distribution.sample(sample_shape)  # (n, B)
            samples = self.component_distribution.sample(sample_shape)  # (n, B, k, E)
            index = which.reshape(which.shape + (1,) * (len(es) + 1)).repeat((1,) * which.dim() + (1,) + tuple(es))
            return ember.gather(samples, gather_dim, index).squeeze(gather_dim)

    def __repr__(self):
        return f"MixtureSameFamily(\n  {self.mixture_distribution},\n  {self.component_distribution})"
