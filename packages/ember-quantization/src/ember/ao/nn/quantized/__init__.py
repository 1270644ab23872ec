"""ember.ao.nn.quantized: modules on quantized tensors (``functional``, ``dynamic`` load on first access)."""
from .modules import *  # noqa: F401,F403
from .modules import __all__  # noqa: F401


def __getattr__(name):
    from ember._extensions import lazy_submodule
    return lazy_submodule(__name__, name)
