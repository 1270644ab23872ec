"""ember.ao.nn.qat: modules for quantization-aware training (float layers with fake-quantized weights);
``dynamic`` holds the dynamic-quantization form of Linear."""
from .modules import *  # noqa: F401,F403
from .modules import __all__  # noqa: F401


def __getattr__(name):
    from ember._extensions import lazy_submodule
    return lazy_submodule(__name__, name)
