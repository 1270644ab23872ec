"""Dynamically quantized LinearReLU."""
import ember
import ember.ao.nn.quantized.dynamic as nnqd
from ember.ao.nn import intrinsic as nni
from ember.ops import quantized as qops

__all__ = ["LinearReLU"]


class LinearReLU(nnqd.Linear):
    """Dynamically quantized Linear + ReLU: float32 in and out."""

    _FLOAT_MODULE = nni.LinearReLU

    def __init__(self, in_features, out_features, bias=True, dtype=ember.qint8):
        super().__init__(in_features, out_features, bias, dtype)

    def forward(self, x):
        return qops.linear_relu_dynamic(x, self._packed_params._packed_params, reduce_range=True)

    def _get_name(self):
        return "DynamicQuantizedLinearReLU"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return super().from_float(mod, use_precomputed_fake_quant)

    @classmethod
    def from_reference(cls, ref_qlinear_relu):
        return super().from_reference(ref_qlinear_relu[0])
