"""ember.ao.nn.quantized.functional: functional forms of the quantized ops (weights packed at each call)."""
import warnings

import ember
import ember.nn.functional as F
from ember.ops import quantized as qops

from .modules.utils import _to_tuple

__all__ = ["avg_pool2d", "avg_pool3d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "conv1d", "conv2d", "conv3d",
           "interpolate", "linear", "max_pool1d", "max_pool2d", "celu", "leaky_relu", "hardtanh", "hardswish",
           "threshold", "elu", "hardsigmoid", "clamp", "upsample", "upsample_bilinear", "upsample_nearest"]


def _require_quantized(input, name):
    if not input.is_quantized:
        raise ValueError(f"Input to '{name}' must be quantized!")


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """2-d average pooling of a quantized input (its qparams kept)."""
    _require_quantized(input, "quantized.avg_pool2d")
    return F.avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    _require_quantized(input, "quantized.avg_pool3d")
    return F.avg_pool3d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def adaptive_avg_pool2d(input, output_size):
    _require_quantized(input, "quantized.functional.adaptive_avg_pool2d")
    return F.adaptive_avg_pool2d(input, output_size)


def adaptive_avg_pool3d(input, output_size):
    _require_quantized(input, "quantized.functional.adaptive_avg_pool3d")
    return F.adaptive_avg_pool3d(input, output_size)


def _conv(n, input, weight, bias, stride, padding, dilation, groups, padding_mode, scale, zero_point):
    if padding_mode != "zeros":
        raise NotImplementedError("Only zero-padding is supported!")
    if input.dtype != ember.quint8:
        raise NotImplementedError("Only torch.quint8 is supported for activation tensor!")
    if weight.dtype != ember.qint8:
        raise NotImplementedError("Only torch.qint8 is supported for weight tensor!")
    if input.dim() != n + 2:
        raise ValueError("Input shape must be `" + {1: "(N, C, L)", 2: "(N, C, H, W)", 3: "(N, C, D, H, W)"}[n] + "`!")
    packed = qops.ConvPackedParams(weight, bias, _to_tuple(stride, n), _to_tuple(padding, n), (0,) * n,
                                   _to_tuple(dilation, n), groups, False)
    return qops._conv(input, packed, scale, zero_point)


def conv1d(input, weight, bias, stride=1, padding=0, dilation=1, groups=1, padding_mode="zeros", scale=1.0,
           zero_point=0, dtype=ember.quint8):
    """Quantized 1-d convolution (quint8 input, qint8 weight, float bias), output ``scale``/``zero_point``."""
    return _conv(1, input, weight, bias, stride, padding, dilation, groups, padding_mode, scale, zero_point)


def conv2d(input, weight, bias, stride=1, padding=0, dilation=1, groups=1, padding_mode="zeros", scale=1.0,
           zero_point=0, dtype=ember.quint8):
    """Quantized 2-d convolution (quint8 input, qint8 weight, float bias), output ``scale``/``zero_point``."""
    return _conv(2, input, weight, bias, stride, padding, dilation, groups, padding_mode, scale, zero_point)


def conv3d(input, weight, bias, stride=1, padding=0, dilation=1, groups=1, padding_mode="zeros", scale=1.0,
           zero_point=0, dtype=ember.quint8):
    """Quantized 3-d convolution (quint8 input, qint8 weight, float bias), output ``scale``/``zero_point``."""
    return _conv(3, input, weight, bias, stride, padding, dilation, groups, padding_mode, scale, zero_point)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Nearest or bilinear resampling of a quantized input (its qparams kept)."""
    _require_quantized(input, "quantized.interpolate")
    return F.interpolate(input, size, scale_factor, mode, align_corners)


def linear(input, weight, bias=None, scale=None, zero_point=None):
    """Quantized linear layer; output qparams default to the input's."""
    if scale is None:
        scale = input.q_scale()
    if zero_point is None:
        zero_point = input.q_zero_point()
    return qops.linear(input, qops.LinearPackedParams(weight, bias), scale, zero_point)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        raise NotImplementedError("return_indices is not yet implemented!")
    return F.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        raise NotImplementedError("return_indices is not yet implemented!")
    return F.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode)


def celu(input, scale, zero_point, alpha=1.0):
    _require_quantized(input, "quantized.celu")
    return qops.celu(input, scale, zero_point, alpha)


def leaky_relu(input, negative_slope=0.01, inplace=False, scale=None, zero_point=None):
    """Leaky ReLU of a quantized input, requantized to ``scale``/``zero_point`` if given (else the input's)."""
    if scale is not None and zero_point is not None:
        if inplace:
            raise AssertionError("Cannot rescale with `inplace`")
        return qops.leaky_relu(input, negative_slope, False, scale, int(zero_point))
    return F.leaky_relu(input, negative_slope, inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    _require_quantized(input, "quantized.hardtanh")
    return F.hardtanh(input, min_val, max_val, inplace)


def hardswish(input, scale, zero_point):
    _require_quantized(input, "quantized.hardswish")
    return qops.hardswish(input, scale, zero_point)


def threshold(input, threshold, value):
    _require_quantized(input, "quantized.threshold")
    if threshold is None:
        raise ValueError("Input to 'threshold' must be specified!")
    if value is None:
        raise ValueError("Input to 'value' must be specified!")
    return qops.threshold(input, threshold, value)


def elu(input, scale, zero_point, alpha=1.0):
    _require_quantized(input, "quantized.elu")
    return qops.elu(input, scale, zero_point, alpha)


def hardsigmoid(input, inplace=False):
    _require_quantized(input, "quantized.hardsigmoid")
    return F.hardsigmoid(input, inplace)


def clamp(input, min_, max_):
    _require_quantized(input, "quantized.clamp")
    return ember.clamp(input, min_, max_)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    warnings.warn("nn.quantized.functional.upsample is deprecated. Use nn.quantized.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_bilinear(input, size=None, scale_factor=None):
    warnings.warn("nn.quantized.functional.upsample_bilinear is deprecated. Use nn.quantized.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def upsample_nearest(input, size=None, scale_factor=None):
    warnings.warn("nn.quantized.functional.upsample_nearest is deprecated. Use nn.quantized.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")
