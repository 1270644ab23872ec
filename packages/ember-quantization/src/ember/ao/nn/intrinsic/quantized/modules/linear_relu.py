"""Quantized fused linear layers: LinearReLU, LinearLeakyReLU, LinearTanh."""
import ember
import ember.ao.nn.quantized as nnq
from ember.ao.nn import intrinsic as nni
from ember.ao.nn.quantized.modules.utils import _quantize_weight
from ember.ops import quantized as qops

__all__ = ["LinearReLU", "LinearLeakyReLU", "LinearTanh"]


class LinearReLU(nnq.Linear):
    """Quantized Linear with a fused ReLU (the output clamped at its zero point)."""

    _FLOAT_MODULE = nni.LinearReLU

    def __init__(self, in_features, out_features, bias=True, dtype=ember.qint8):
        super().__init__(in_features, out_features, bias, dtype)

    def forward(self, x):
        return qops.linear_relu(x, self._packed_params._packed_params, self.scale, self.zero_point)

    def _get_name(self):
        return "QuantizedLinearReLU"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return super().from_float(mod, use_precomputed_fake_quant)

    @classmethod
    def from_reference(cls, ref_linear_relu, output_scale, output_zero_point):
        return super().from_reference(ref_linear_relu[0], output_scale, output_zero_point)


def _from_fused_float(cls, mod, float_cls, **kwargs):
    """The quantized module of fused float ``mod`` (linear first, then its activation)."""
    if type(mod) is not float_cls:
        raise AssertionError(f"Input float module should be {float_cls.__name__}")
    if not hasattr(mod, "qconfig"):
        raise AssertionError("Input float module must have qconfig defined")
    activation_post_process = mod.activation_post_process
    linear = mod[0]
    observer = linear.qconfig.weight()
    observer(linear.weight)
    act_scale, act_zp = activation_post_process.calculate_qparams()
    if observer.dtype != ember.qint8:
        raise AssertionError(f"Weight observer must have dtype torch.qint8, got {observer.dtype}")
    q = cls(linear.in_features, linear.out_features, dtype=observer.dtype, **kwargs)
    q.set_weight_bias(_quantize_weight(linear.weight.float(), observer), linear.bias)
    q.scale, q.zero_point = float(act_scale), int(act_zp)
    return q


class LinearLeakyReLU(nnq.Linear):
    """Quantized Linear with a fused LeakyReLU of ``negative_slope`` (computed on the float result)."""

    _FLOAT_MODULE = nni.LinearLeakyReLU

    def __init__(self, in_features, out_features, negative_slope, bias=True, dtype=ember.qint8):
        super().__init__(in_features, out_features, bias, dtype)
        self.negative_slope = negative_slope

    def forward(self, x):
        return qops.linear_leaky_relu(x, self._packed_params._packed_params, self.scale, self.zero_point,
                                      self.negative_slope)

    def _get_name(self):
        return "QuantizedLinearLeakyReLU"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return _from_fused_float(cls, mod, nni.LinearLeakyReLU, negative_slope=mod[1].negative_slope)

    @classmethod
    def from_reference(cls, ref_mod, output_scale, output_zero_point):
        linear = ref_mod[0]
        q = cls(linear.in_features, linear.out_features, ref_mod[1].negative_slope)
        q.set_weight_bias(linear.get_quantized_weight(), linear.bias)
        q.scale, q.zero_point = float(output_scale), int(output_zero_point)
        return q


class LinearTanh(nnq.Linear):
    """Quantized Linear with a fused Tanh (computed on the float result)."""

    _FLOAT_MODULE = nni.LinearTanh

    def __init__(self, in_features, out_features, bias=True, dtype=ember.qint8):
        super().__init__(in_features, out_features, bias, dtype)

    def forward(self, x):
        return qops.linear_tanh(x, self._packed_params._packed_params, self.scale, self.zero_point)

    def _get_name(self):
        return "QuantizedLinearTanh"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return _from_fused_float(cls, mod, nni.LinearTanh)

    @classmethod
    def from_reference(cls, ref_mod, output_scale, output_zero_point):
        linear = ref_mod[0]
        q = cls(linear.in_features, linear.out_features)
        q.set_weight_bias(linear.get_quantized_weight(), linear.bias)
        q.scale, q.zero_point = float(output_scale), int(output_zero_point)
        return q
