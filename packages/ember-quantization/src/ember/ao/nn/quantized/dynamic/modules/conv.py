"""Dynamically quantized convolutions: float32 in and out, qint8 weights. As PyTorch's kernels do, each input is
quantized to quint8 from its own range, convolved on the integers, requantized with the input's own scale and zero
point and dequantized (hence PyTorch's warning of their poor accuracy, repeated here)."""
import warnings

import ember
from ember.ao.nn.quantized import _qarray
from ember.ao.nn.quantized.modules import conv as _qconv
from ember.ops import quantized as qops

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


def _warn(module):
    warnings.warn(f"The current implementation of the {module._get_name()} module has poor numerical accuracy and "
                  "its use is not recommended", stacklevel=3)


class _DynamicConv:
    """The forward pass and name shared by the dynamic convolutions (mixed into the quantized ones)."""

    def _get_name(self):
        return "Dynamic" + super()._get_name()

    @classmethod
    def _fused_float_modules(cls):  # (from_float takes plain float convolutions only)
        return ()

    @classmethod
    def _qat_conv_bn(cls):
        return None

    def forward(self, input, reduce_range=True):
        if input.dim() != self._N + 2:
            raise ValueError("Input shape must be `" + {1: "(N, C, L)", 2: "(N, C, H, W)",
                                                        3: "(N, C, D, H, W)"}[self._N] + "`!")
        if input.dtype != ember.float32:
            raise RuntimeError(f"expected scalar type Float but found {str(input.dtype).split('.')[-1].title()}")
        ints, scale, zero_point = qops._dynamic_input(input.detach().numpy(), reduce_range)
        q = _qarray.per_tensor(ints, ember.quint8, scale, zero_point)
        reflect = self.padding if self.padding_mode == "reflect" else None
        return qops._conv(q, self._packed_params, scale, zero_point, reflect_padding=reflect).dequantize()


class Conv1d(_DynamicConv, _qconv.Conv1d):
    """Dynamically quantized 1-d convolution of a float32 (N, C, L) input."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None, reduce_range=True):
        _warn(self)
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)


class Conv2d(_DynamicConv, _qconv.Conv2d):
    """Dynamically quantized 2-d convolution of a float32 (N, C, H, W) input."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        _warn(self)
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)


class Conv3d(_DynamicConv, _qconv.Conv3d):
    """Dynamically quantized 3-d convolution of a float32 (N, C, D, H, W) input (zero padding only)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        _warn(self)
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)


class _DynamicConvTranspose(_DynamicConv):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        _warn(self)
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias,
                         dilation, padding_mode, device, dtype)


class ConvTranspose1d(_DynamicConvTranspose, _qconv.ConvTranspose1d):
    """Dynamically quantized 1-d transposed convolution of a float32 (N, C, L) input."""


class ConvTranspose2d(_DynamicConvTranspose, _qconv.ConvTranspose2d):
    """Dynamically quantized 2-d transposed convolution of a float32 (N, C, H, W) input."""


class ConvTranspose3d(_DynamicConvTranspose, _qconv.ConvTranspose3d):
    """Dynamically quantized 3-d transposed convolution of a float32 (N, C, D, H, W) input."""
