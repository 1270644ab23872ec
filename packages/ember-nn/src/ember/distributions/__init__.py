"""Probability distributions with sampling and log-densities, as ``torch.distributions``: Normal, Categorical,
OneHotCategorical, Bernoulli, Uniform, Independent, ``kl_divergence``. Samples come from ember's generator in
PyTorch's order, so a seeded program draws the same values under both."""
from . import constraints
from .bernoulli import Bernoulli
from .categorical import Categorical, OneHotCategorical
from .distribution import Distribution
from .independent import Independent
from .kl import kl_divergence, register_kl
from .normal import Normal
from .uniform import Uniform

__all__ = ["Bernoulli", "Categorical", "Distribution", "Independent", "Normal", "OneHotCategorical", "Uniform",
           "constraints", "kl_divergence", "register_kl"]
