"""ember.ao.nn.intrinsic.qat: fused modules for quantization-aware training."""
from .modules import *  # noqa: F401,F403
from .modules import __all__  # noqa: F401
