"""Quantized ConvAdd2d / ConvAddReLU2d: a convolution plus a second quantized input (and a ReLU)."""
import ember.ao.nn.quantized as nnq
from ember.ao.nn import intrinsic as nni
from ember.ops import quantized as qops

__all__ = ["ConvAdd2d", "ConvAddReLU2d"]


class ConvAdd2d(nnq.Conv2d):
    """``conv(input) + extra_input``, requantized."""

    _FLOAT_MODULE = nni.ConvAdd2d
    _RELU = False

    def forward(self, input, extra_input):
        if input.dim() != 4:
            raise ValueError("Input shape must be `(N, C, H, W)`!")
        reflect = self.padding if self.padding_mode == "reflect" else None
        return qops._conv_add(input, extra_input, self._packed_params, self.scale, self.zero_point, self._RELU,
                              reflect)

    def _get_name(self):
        return "QuantizedConvAdd2d"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return super().from_float(mod, use_precomputed_fake_quant)

    @classmethod
    def from_reference(cls, ref_qconv, output_scale, output_zero_point):
        return super().from_reference(ref_qconv[0], output_scale, output_zero_point)


class ConvAddReLU2d(ConvAdd2d):
    """``relu(conv(input) + extra_input)``, requantized."""

    _FLOAT_MODULE = nni.ConvAddReLU2d
    _RELU = True

    def _get_name(self):
        return "QuantizedConvAddReLU2d"
