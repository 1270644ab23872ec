"""QAT Linear: a float linear layer whose weight passes through a fake-quantize module."""
import ember.nn as nn
import ember.nn.functional as F

__all__ = ["Linear"]


class Linear(nn.Linear):
    """nn.Linear with ``weight_fake_quant`` (from ``qconfig.weight``) applied to the weight in forward."""

    _FLOAT_MODULE = nn.Linear

    def __init__(self, in_features, out_features, bias=True, qconfig=None, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        if not qconfig:
            raise AssertionError("qconfig must be provided for QAT module")
        self.qconfig = qconfig
        self.weight_fake_quant = qconfig.weight(factory_kwargs={"device": device, "dtype": dtype})

    def forward(self, input):
        return F.linear(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The QAT layer of float ``mod`` (sharing its parameters); a fused LinearReLU gives its linear part."""
        from ember.ao.nn.intrinsic import LinearReLU
        if type(mod) is not cls._FLOAT_MODULE:
            raise AssertionError(f"qat.{cls.__name__}.from_float only works for {cls._FLOAT_MODULE.__name__}, got "
                                 f"{type(mod).__name__}")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        if not mod.qconfig:
            raise AssertionError("Input float module must have a valid qconfig")
        qconfig = mod.qconfig
        if type(mod) is LinearReLU:
            mod = mod[0]
        qat = cls(mod.in_features, mod.out_features, bias=mod.bias is not None, qconfig=qconfig)
        qat.weight, qat.bias = mod.weight, mod.bias
        return qat

    def to_float(self):
        linear = nn.Linear(self.in_features, self.out_features, self.bias is not None)
        linear.weight = nn.Parameter(self.weight.detach())
        if self.bias is not None:
            linear.bias = nn.Parameter(self.bias.detach())
        linear.train(self.training)
        return linear
