"""Quantized LayerNorm, GroupNorm and InstanceNorm1d/2d/3d: statistics of the dequantized input, output
requantized to ``scale``/``zero_point`` (buffers)."""
import ember
import ember.nn as nn

from .. import _kernels

__all__ = ["LayerNorm", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


def _output_buffers(module, scale, zero_point, device=None, dtype=None):
    module.register_buffer("scale", ember.tensor(scale, device=device, dtype=dtype))
    module.register_buffer("zero_point", ember.tensor(zero_point, device=device, dtype=dtype))


class LayerNorm(nn.LayerNorm):
    """Layer norm of a quantized input over ``normalized_shape``."""

    def __init__(self, normalized_shape, weight, bias, scale, zero_point, eps=1e-5, elementwise_affine=True,
                 device=None, dtype=None):
        super().__init__(normalized_shape, eps=eps, elementwise_affine=elementwise_affine, device=device, dtype=dtype)
        self.weight, self.bias = weight, bias
        _output_buffers(self, scale, zero_point, device, dtype)

    def forward(self, input):
        return _kernels.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps, float(self.scale),
                                   int(self.zero_point))

    def _get_name(self):
        return "QuantizedLayerNorm"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        scale, zero_point = mod.activation_post_process.calculate_qparams()
        return cls.from_reference(mod, scale, zero_point)

    @classmethod
    def from_reference(cls, mod, scale, zero_point):
        return cls(mod.normalized_shape, mod.weight, mod.bias, float(scale), int(zero_point), mod.eps,
                   mod.elementwise_affine)


class GroupNorm(nn.GroupNorm):
    """Group norm of a quantized (N, C, *) input."""

    def __init__(self, num_groups, num_channels, weight, bias, scale, zero_point, eps=1e-5, affine=True, device=None,
                 dtype=None):
        super().__init__(num_groups, num_channels, eps, affine, device=device, dtype=dtype)
        self.weight, self.bias = weight, bias
        _output_buffers(self, scale, zero_point, device, dtype)

    def forward(self, input):
        return _kernels.group_norm(input, self.num_groups, self.weight, self.bias, self.eps, float(self.scale),
                                   int(self.zero_point))

    def _get_name(self):
        return "QuantizedGroupNorm"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        scale, zero_point = mod.activation_post_process.calculate_qparams()
        return cls(mod.num_groups, mod.num_channels, mod.weight, mod.bias, float(scale), int(zero_point), mod.eps,
                   mod.affine)


def _instance_norm(base, dims):
    class InstanceNorm(base):
        __doc__ = f"Instance norm of a quantized (N, C, {', '.join('DHW'[3 - dims:])}) input."

        def __init__(self, num_features, weight, bias, scale, zero_point, eps=1e-5, momentum=0.1, affine=False,
                     track_running_stats=False, device=None, dtype=None):
            super().__init__(num_features, eps, momentum, affine, track_running_stats, device=device, dtype=dtype)
            self.weight, self.bias = weight, bias
            _output_buffers(self, scale, zero_point, device, dtype)

        def forward(self, input):
            return _kernels.instance_norm(input, self.weight, self.bias, self.eps, float(self.scale),
                                          int(self.zero_point))

        def _get_name(self):
            return f"QuantizedInstanceNorm{dims}d"

        @classmethod
        def from_float(cls, mod, use_precomputed_fake_quant=False):
            scale, zero_point = mod.activation_post_process.calculate_qparams()
            return cls.from_reference(mod, scale, zero_point)

        @classmethod
        def from_reference(cls, mod, scale, zero_point):
            return cls(mod.num_features, mod.weight, mod.bias, float(scale), int(zero_point), mod.eps, mod.affine)

    InstanceNorm.__name__ = InstanceNorm.__qualname__ = f"InstanceNorm{dims}d"
    InstanceNorm.__module__ = __name__
    return InstanceNorm


InstanceNorm1d = _instance_norm(nn.InstanceNorm1d, 1)
InstanceNorm2d = _instance_norm(nn.InstanceNorm2d, 2)
InstanceNorm3d = _instance_norm(nn.InstanceNorm3d, 3)
