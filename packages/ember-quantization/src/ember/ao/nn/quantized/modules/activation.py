"""Quantized activations: ReLU6, Hardswish, ELU, LeakyReLU, Sigmoid, Softmax, PReLU (kernels of
``ember.ops.quantized``; PReLU's of this package)."""
import warnings

import ember
import ember.nn as nn
from ember.ops import quantized as qops

from .. import _kernels

__all__ = ["ReLU6", "Hardswish", "ELU", "LeakyReLU", "Sigmoid", "Softmax", "PReLU"]


def _output_qparams(mod):
    scale, zero_point = mod.activation_post_process.calculate_qparams()
    return float(scale), int(zero_point)


class ReLU6(nn.ReLU):
    """``min(max(x, 0), 6)`` on the integers (the input's qparams)."""

    def __init__(self, inplace=False):
        super().__init__(inplace)

    def forward(self, input):
        return qops.relu6(input, self.inplace)

    def _get_name(self):
        return "QuantizedReLU6"

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant=False):
        return ReLU6(mod.inplace)


class Hardswish(nn.Hardswish):
    """Hardswish requantized to the output ``scale``/``zero_point`` (buffers)."""

    def __init__(self, scale, zero_point, device=None, dtype=None):
        super().__init__()
        self.register_buffer("scale", ember.tensor(scale, device=device, dtype=dtype))
        self.register_buffer("zero_point", ember.tensor(zero_point, device=device, dtype=dtype))

    def forward(self, input):
        return qops.hardswish(input, float(self.scale), int(self.zero_point))

    def _get_name(self):
        return "QuantizedHardswish"

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant=False):
        return Hardswish(*_output_qparams(mod))

    @classmethod
    def from_reference(cls, mod, scale, zero_point):
        return cls(float(scale), int(zero_point))


class ELU(nn.ELU):
    """ELU requantized to ``scale``/``zero_point``."""

    def __init__(self, scale, zero_point, alpha=1.0):
        super().__init__(alpha)
        self.scale, self.zero_point = scale, zero_point

    def forward(self, input):
        from .. import functional
        return functional.elu(input, self.scale, self.zero_point, self.alpha)

    def _get_name(self):
        return "QuantizedELU"

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant=False):
        return ELU(*_output_qparams(mod), mod.alpha)

    @classmethod
    def from_reference(cls, mod, scale, zero_point):
        return cls(float(scale), int(zero_point), mod.alpha)


class LeakyReLU(nn.LeakyReLU):
    """LeakyReLU requantized to the output ``scale``/``zero_point`` (buffers)."""

    def __init__(self, scale, zero_point, negative_slope=1e-2, inplace=False, device=None, dtype=None):
        super().__init__(negative_slope, inplace)
        self.register_buffer("scale", ember.tensor(scale, device=device, dtype=dtype))
        self.register_buffer("zero_point", ember.tensor(zero_point, device=device, dtype=dtype))

    def forward(self, input):
        return qops.leaky_relu(input, self.negative_slope, self.inplace, float(self.scale), int(self.zero_point))

    def _get_name(self):
        return "QuantizedLeakyReLU"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls(*_output_qparams(mod), mod.negative_slope, mod.inplace)

    @classmethod
    def from_reference(cls, mod, scale, zero_point):
        return cls(float(scale), int(zero_point), mod.negative_slope, mod.inplace)


class Sigmoid(nn.Sigmoid):
    """Sigmoid requantized to ``output_scale``/``output_zero_point``."""

    def __init__(self, output_scale, output_zero_point):
        super().__init__()
        self.output_scale, self.output_zero_point = output_scale, output_zero_point

    def forward(self, input):
        return qops.sigmoid(input, self.output_scale, self.output_zero_point)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls(*_output_qparams(mod))


class Softmax(nn.Softmax):
    """Softmax along ``dim`` requantized to ``scale``/``zero_point``."""

    def __init__(self, dim=None, scale=1.0, zero_point=0):
        super().__init__()
        self.dim, self.scale, self.zero_point = dim, scale, zero_point

    def forward(self, input):
        dim = self.dim
        if dim is None:
            warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the call to include "
                          "dim=X as an argument.", stacklevel=2)
            dim = 0 if input.dim() in (0, 1, 3) else 1
        return qops.softmax(input, dim, self.scale, self.zero_point)

    def _get_name(self):
        return "QuantizedSoftmax"

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant=False):
        return Softmax(mod.dim, *_output_qparams(mod))

    @classmethod
    def from_reference(cls, mod, scale, zero_point):
        return cls(mod.dim, float(scale), int(zero_point))


class PReLU(nn.Module):
    """PReLU with a quint8 weight (``num_parameters`` slopes), requantized to ``scale``/``zero_point``."""

    def __init__(self, output_scale, output_zero_point, num_parameters=1):
        super().__init__()
        self.num_parameters = num_parameters
        self.scale, self.zero_point = output_scale, output_zero_point
        self.set_weight(ember.quantize_per_tensor(ember.randn(num_parameters), 1.0, 0, ember.quint8))

    def set_weight(self, w):
        self.weight = w

    def forward(self, input):
        return _kernels.prelu(input, self.weight, self.scale, self.zero_point)

    def _get_name(self):
        return "QuantizedPReLU"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls._with_weight(mod, *_output_qparams(mod))

    @classmethod
    def from_reference(cls, mod, scale, zero_point):
        return cls._with_weight(mod, float(scale), int(zero_point))

    @classmethod
    def _with_weight(cls, mod, scale, zero_point):
        qprelu = cls(scale, zero_point, mod.num_parameters)
        weight = mod.weight.float()
        observer = mod.qconfig.weight()
        observer(weight)
        if observer.dtype != ember.quint8:
            warnings.warn(f"PReLU's weight observer should have dtype quint8 but got {observer.dtype}", stacklevel=3)
        w_scale, w_zp = observer.calculate_qparams()
        qprelu.set_weight(ember.quantize_per_tensor(weight, float(w_scale), int(w_zp), ember.quint8))
        return qprelu
