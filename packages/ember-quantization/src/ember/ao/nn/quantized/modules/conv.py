"""Quantized convolutions: Conv1d/2d/3d and ConvTranspose1d/2d/3d."""
import ember
import ember.nn as nn
from ember.nn.utils.fusion import fuse_conv_bn_weights
from ember.ops import quantized as qops

from .utils import WeightedQuantizedModule, _quantize_weight, _to_tuple

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

_SUPPORTED_PADDING = {"zeros", "reflect"}


class _ConvNd(WeightedQuantizedModule):
    """State of quantized convolutions: geometry, packed qint8 weight and float bias, output ``scale`` and
    ``zero_point``; saved as ``weight``, ``bias``, ``scale``, ``zero_point`` (PyTorch's keys)."""

    _N = None
    _TRANSPOSED = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None, output_padding=0):
        super().__init__()
        n = self._N
        if out_channels <= 0:
            raise ValueError(f"out_channels must be greater than 0, got {out_channels}")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _SUPPORTED_PADDING:
            raise ValueError(f"'padding_mode' {padding_mode} is not supported by quantized convolution")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = _to_tuple(kernel_size, n), _to_tuple(stride, n)
        self.padding, self.dilation = _to_tuple(padding, n), _to_tuple(dilation, n)
        self.transposed, self.output_padding = self._TRANSPOSED, _to_tuple(output_padding, n)
        self.groups, self.padding_mode = groups, padding_mode
        shape = [in_channels, out_channels // groups] if self.transposed else [out_channels, in_channels // groups]
        weight = ember._make_per_tensor_quantized_tensor(
            ember.zeros(shape + list(self.kernel_size), dtype=ember.int8), 1.0, 0)
        self.set_weight_bias(weight, ember.zeros(out_channels, dtype=ember.float) if bias else None)
        self.scale = 1.0
        self.zero_point = 0

    def _get_name(self):
        return "Quantized" + type(self).__name__

    def set_weight_bias(self, w, b):
        padding = self.padding if self.padding_mode == "zeros" else (0,) * self._N  # (reflection pads the input)
        self._packed_params = qops.ConvPackedParams(w, b, self.stride, padding, self.output_padding, self.dilation,
                                                    self.groups, self.transposed)

    def _weight_bias(self):
        return self._packed_params.unpack()

    def weight(self):
        return self._weight_bias()[0]

    def bias(self):
        return self._weight_bias()[1]

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
             f"scale={self.scale}, zero_point={self.zero_point}")
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias() is None:
            s += ", bias=False"
        return s

    def forward(self, input):
        if input.dim() != self._N + 2:
            raise ValueError("Input shape must be `" + {1: "(N, C, L)", 2: "(N, C, H, W)",
                                                        3: "(N, C, D, H, W)"}[self._N] + "`!")
        reflect = self.padding if self.padding_mode == "reflect" else None
        return qops._conv(input, self._packed_params, self.scale, self.zero_point, reflect_padding=reflect)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        w, b = self._weight_bias()
        destination[prefix + "weight"] = w
        destination[prefix + "bias"] = b
        destination[prefix + "scale"] = ember.tensor(self.scale)
        destination[prefix + "zero_point"] = ember.tensor(self.zero_point)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs):
        self.set_weight_bias(state_dict.pop(prefix + "weight"), state_dict.pop(prefix + "bias"))
        self.scale = float(state_dict.pop(prefix + "scale"))
        self.zero_point = int(state_dict.pop(prefix + "zero_point"))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, *args, **kwargs)

    @classmethod
    def get_qconv(cls, mod, activation_post_process, weight_post_process=None):
        """The quantized convolution of float convolution ``mod`` (its weight observed and quantized)."""
        if weight_post_process is None:
            weight_post_process = mod.qconfig.weight()
        weight_post_process(mod.weight)
        if weight_post_process.dtype != ember.qint8:
            raise AssertionError(f"Weight observer must have a dtype of qint8, got {weight_post_process.dtype}")
        qweight = _quantize_weight(mod.weight.float(), weight_post_process)
        qconv = cls._from_geometry(mod)
        qconv.set_weight_bias(qweight, mod.bias)
        if activation_post_process is not None and activation_post_process.dtype != ember.float:
            act_scale, act_zp = activation_post_process.calculate_qparams()
            qconv.scale, qconv.zero_point = float(act_scale), int(act_zp)
        return qconv

    @classmethod
    def _from_geometry(cls, mod):
        return cls(mod.in_channels, mod.out_channels, mod.kernel_size, mod.stride, mod.padding, mod.dilation,
                   mod.groups, mod.bias is not None, mod.padding_mode)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The quantized convolution of an observed float convolution, a fused ConvReLU, or a QAT convolution
        (a QAT ConvBn's batch norm folded in first)."""
        if hasattr(mod, "weight_fake_quant"):
            if type(mod) is cls._qat_conv_bn():
                mod.weight, mod.bias = fuse_conv_bn_weights(mod.weight, mod.bias, mod.bn.running_mean,
                                                            mod.bn.running_var, mod.bn.eps, mod.bn.weight,
                                                            mod.bn.bias)
            if not hasattr(mod, "activation_post_process"):
                raise AssertionError("Input QAT module must have observer attached")
            return cls.get_qconv(mod, mod.activation_post_process, mod.weight_fake_quant)
        if type(mod) is not cls._FLOAT_MODULE:
            raise AssertionError(f"nnq.{cls.__name__}.from_float only works for {cls._FLOAT_MODULE.__name__} but "
                                 f"got: {type(mod).__name__}")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined.")
        activation_post_process = getattr(mod, "activation_post_process", None)
        if type(mod) in cls._fused_float_modules():
            mod = mod[0]
        return cls.get_qconv(mod, activation_post_process, mod.qconfig.weight())

    @classmethod
    def _fused_float_modules(cls):
        """The fused float modules (ConvReLU...) whose first module this class quantizes."""
        return ()

    @classmethod
    def _qat_conv_bn(cls):
        """The QAT ConvBn class whose batch norm ``from_float`` folds into the weight."""
        return None

    @classmethod
    def from_reference(cls, ref_qconv, output_scale, output_zero_point):
        qconv = cls._from_geometry(ref_qconv)
        qconv.set_weight_bias(ref_qconv.get_quantized_weight(), ref_qconv.bias)
        qconv.scale, qconv.zero_point = float(output_scale), int(output_zero_point)
        return qconv


def _intrinsic():
    """ember.ao.nn.intrinsic and its qat package (imported late: they import this module's package)."""
    from ember.ao.nn import intrinsic as nni
    from ember.ao.nn.intrinsic import qat as nniqat
    return nni, nniqat


class Conv1d(_ConvNd):
    """1-d convolution of a quint8 (N, C, L) input."""

    _N = 1
    _FLOAT_MODULE = nn.Conv1d

    @classmethod
    def _fused_float_modules(cls):
        return (_intrinsic()[0].ConvReLU1d,)

    @classmethod
    def _qat_conv_bn(cls):
        return _intrinsic()[1].ConvBn1d


class Conv2d(_ConvNd):
    """2-d convolution of a quint8 (N, C, H, W) input."""

    _N = 2
    _FLOAT_MODULE = nn.Conv2d

    @classmethod
    def _fused_float_modules(cls):
        nni = _intrinsic()[0]
        return (nni.ConvReLU2d, nni.ConvAdd2d, nni.ConvAddReLU2d)

    @classmethod
    def _qat_conv_bn(cls):
        return _intrinsic()[1].ConvBn2d


class Conv3d(_ConvNd):
    """3-d convolution of a quint8 (N, C, D, H, W) input (zero padding only)."""

    _N = 3
    _FLOAT_MODULE = nn.Conv3d

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        if padding_mode == "reflect":
            raise AssertionError("Conv3d does not support reflection padding")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)

    @classmethod
    def _fused_float_modules(cls):
        return (_intrinsic()[0].ConvReLU3d,)

    @classmethod
    def _qat_conv_bn(cls):
        return _intrinsic()[1].ConvBn3d


class _ConvTransposeNd(_ConvNd):
    _TRANSPOSED = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {self.__class__.__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, output_padding)

    def _input_padding(self, kernel_size, dilation, padding):
        return [d * (k - 1) - p for k, d, p in zip(kernel_size, dilation, padding)]

    @classmethod
    def _from_geometry(cls, mod):
        return cls(mod.in_channels, mod.out_channels, mod.kernel_size, mod.stride, mod.padding, mod.output_padding,
                   mod.groups, mod.bias is not None, mod.dilation, mod.padding_mode)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        if type(mod) is not cls._FLOAT_MODULE:
            raise AssertionError(" nnq." + cls.__name__ + ".from_float only works for " + cls._FLOAT_MODULE.__name__)
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined.")
        return cls.get_qconv(mod, getattr(mod, "activation_post_process", None), mod.qconfig.weight())


class ConvTranspose1d(_ConvTransposeNd):
    """1-d transposed convolution of a quint8 (N, C, L) input."""

    _N = 1
    _FLOAT_MODULE = nn.ConvTranspose1d


class ConvTranspose2d(_ConvTransposeNd):
    """2-d transposed convolution of a quint8 (N, C, H, W) input."""

    _N = 2
    _FLOAT_MODULE = nn.ConvTranspose2d


class ConvTranspose3d(_ConvTransposeNd):
    """3-d transposed convolution of a quint8 (N, C, D, H, W) input."""

    _N = 3
    _FLOAT_MODULE = nn.ConvTranspose3d
