"""QAT Conv1d/2d/3d: float convolutions whose weight passes through a fake-quantize module."""
import ember.nn as nn

__all__ = ["Conv1d", "Conv2d", "Conv3d"]


class _ConvNd:
    """Mixin of QAT convolutions (before the float convolution class in the bases)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", qconfig=None, device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device=device, dtype=dtype)
        if not qconfig:
            raise AssertionError("qconfig must be provided for QAT module")
        self.qconfig = qconfig
        self.weight_fake_quant = qconfig.weight(factory_kwargs={"device": device, "dtype": dtype})

    def forward(self, input):
        return self._conv_forward(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The QAT convolution of float ``mod`` (sharing its parameters; a fused module gives its first part)."""
        from ember.ao.nn.intrinsic import _FusedModule
        if type(mod) is not cls._FLOAT_MODULE:
            raise AssertionError(f"qat.{cls.__name__}.from_float only works for {cls._FLOAT_MODULE.__name__}, got "
                                 f"{type(mod).__name__}")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        if not mod.qconfig:
            raise AssertionError("Input float module must have a valid qconfig")
        qconfig = mod.qconfig
        if isinstance(mod, _FusedModule):
            mod = mod[0]
        qat = cls(mod.in_channels, mod.out_channels, mod.kernel_size, stride=mod.stride, padding=mod.padding,
                  dilation=mod.dilation, groups=mod.groups, bias=mod.bias is not None, padding_mode=mod.padding_mode,
                  qconfig=qconfig)
        qat.weight, qat.bias = mod.weight, mod.bias
        return qat

    def to_float(self):
        """The float convolution (with a ReLU, as the fused float module, for QAT ConvReLU modules)."""
        cls = type(self)
        conv = cls._FLOAT_CONV_MODULE(self.in_channels, self.out_channels, self.kernel_size, self.stride,
                                      self.padding, self.dilation, self.groups, self.bias is not None,
                                      self.padding_mode)
        conv.weight = nn.Parameter(self.weight.detach())
        if self.bias is not None:
            conv.bias = nn.Parameter(self.bias.detach())
        relu = getattr(cls, "_FLOAT_RELU_MODULE", None)
        if relu is None:
            return conv
        fused = cls._FLOAT_MODULE(conv, relu())
        fused.train(self.training)
        return fused


class Conv1d(_ConvNd, nn.Conv1d):
    """nn.Conv1d with ``weight_fake_quant`` applied to the weight in forward."""
    _FLOAT_MODULE = _FLOAT_CONV_MODULE = nn.Conv1d


class Conv2d(_ConvNd, nn.Conv2d):
    """nn.Conv2d with ``weight_fake_quant`` applied to the weight in forward."""
    _FLOAT_MODULE = _FLOAT_CONV_MODULE = nn.Conv2d


class Conv3d(_ConvNd, nn.Conv3d):
    """nn.Conv3d with ``weight_fake_quant`` applied to the weight in forward."""
    _FLOAT_MODULE = _FLOAT_CONV_MODULE = nn.Conv3d
