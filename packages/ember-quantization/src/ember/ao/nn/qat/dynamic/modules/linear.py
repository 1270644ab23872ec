"""QAT Linear for dynamic quantization: its activation observer must forget earlier inputs."""
from ember.ao.nn.qat.modules.linear import Linear as _QATLinear

__all__ = ["Linear"]


class Linear(_QATLinear):
    """QAT Linear whose qconfig's activation observer is memoryless (a moving average with constant 1)."""

    def __init__(self, in_features, out_features, bias=True, qconfig=None, device=None, dtype=None):
        from ember.ao.quantization.qconfig import _activation_is_memoryless
        super().__init__(in_features, out_features, bias, qconfig, device, dtype)
        if not _activation_is_memoryless(qconfig):
            raise ValueError("Dynamic QAT requires a memoryless observer.This means a MovingAverage observer with "
                             "averaging constant equal to 1")
