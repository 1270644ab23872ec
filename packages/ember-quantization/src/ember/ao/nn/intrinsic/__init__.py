"""ember.ao.nn.intrinsic: fused float modules (conv + bn + relu, ...); their QAT forms in ``qat``, quantized
forms in ``quantized`` (loaded on first access)."""
from .modules import *  # noqa: F401,F403
from .modules import __all__, _FusedModule  # noqa: F401


def __getattr__(name):
    from ember._extensions import lazy_submodule
    return lazy_submodule(__name__, name)
