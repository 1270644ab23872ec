"""ember.ao.nn.qat.dynamic: QAT Linear for dynamic quantization."""
from .modules import Linear  # noqa: F401

__all__ = ["Linear"]
