"""Quantized ConvReLU1d/2d/3d: convolutions with a fused ReLU."""
import ember.ao.nn.quantized as nnq
from ember.ao.nn import intrinsic as nni
from ember.nn.utils.fusion import fuse_conv_bn_weights
from ember.ops import quantized as qops

__all__ = ["ConvReLU1d", "ConvReLU2d", "ConvReLU3d"]


class _ConvReLU:
    """Mixin: the convolution's output clamped at its zero point; from a float ConvReLU or a QAT ConvBnReLU (its
    batch norm folded in)."""

    def forward(self, input):
        if input.dim() != self._N + 2:
            raise ValueError("Input shape must be `" + {1: "(N, C, L)", 2: "(N, C, H, W)",
                                                        3: "(N, C, D, H, W)"}[self._N] + "`!")
        reflect = self.padding if self.padding_mode == "reflect" else None
        return qops._conv(input, self._packed_params, self.scale, self.zero_point, relu=True,
                         reflect_padding=reflect)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        from ember.ao.nn.intrinsic import qat as nniqat
        if type(mod) is getattr(nniqat, f"ConvBnReLU{cls._N}d"):
            if mod.bn.running_var is None or mod.bn.running_mean is None:
                raise AssertionError("mod.bn.running_var and mod.bn.running_mean must not be None")
            mod.weight, mod.bias = fuse_conv_bn_weights(mod.weight, mod.bias, mod.bn.running_mean,
                                                        mod.bn.running_var, mod.bn.eps, mod.bn.weight, mod.bn.bias)
        return super().from_float(mod, use_precomputed_fake_quant)

    @classmethod
    def from_reference(cls, ref_qconv, output_scale, output_zero_point):
        return super().from_reference(ref_qconv[0], output_scale, output_zero_point)


class ConvReLU1d(_ConvReLU, nnq.Conv1d):
    """Quantized Conv1d + ReLU."""
    _FLOAT_MODULE = nni.ConvReLU1d


class ConvReLU2d(_ConvReLU, nnq.Conv2d):
    """Quantized Conv2d + ReLU."""
    _FLOAT_MODULE = nni.ConvReLU2d


class ConvReLU3d(_ConvReLU, nnq.Conv3d):
    """Quantized Conv3d + ReLU."""
    _FLOAT_MODULE = nni.ConvReLU3d
