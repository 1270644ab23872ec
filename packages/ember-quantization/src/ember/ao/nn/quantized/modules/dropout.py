"""Quantized Dropout: the identity (quantized models run in inference)."""
import ember.nn as nn

__all__ = ["Dropout"]


class Dropout(nn.Dropout):
    """Returns its quantized input."""

    def forward(self, input):
        return input

    def _get_name(self):
        return "QuantizedDropout"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls(mod.p, mod.inplace)

    @classmethod
    def from_reference(cls, mod, scale, zero_point):
        return cls(mod.p, mod.inplace)
