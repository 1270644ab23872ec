"""ember.ao.nn.intrinsic.quantized.dynamic: the dynamically quantized LinearReLU."""
from .modules import LinearReLU  # noqa: F401

__all__ = ["LinearReLU"]
