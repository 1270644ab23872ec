"""ember.ao.nn.quantizable: modules decomposed into observable parts (an LSTM of linear layers, functional adds
and multiplications and activations; a MultiheadAttention with separate projections), which ``prepare`` observes
and ``convert`` quantizes."""
from .modules import *  # noqa: F401,F403
from .modules import __all__  # noqa: F401
