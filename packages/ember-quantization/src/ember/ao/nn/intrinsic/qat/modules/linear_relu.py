"""QAT LinearReLU."""
import ember.nn as nn
import ember.nn.functional as F
from ember.ao.nn import intrinsic as nni
from ember.ao.nn import qat as nnqat

__all__ = ["LinearReLU"]


class LinearReLU(nnqat.Linear, nni._FusedModule):
    """Linear + ReLU for quantization-aware training: ``relu(linear(x, fq(weight), bias))``."""

    _FLOAT_MODULE = nni.LinearReLU

    def __init__(self, in_features, out_features, bias=True, qconfig=None):
        super().__init__(in_features, out_features, bias, qconfig)

    def forward(self, input):
        return F.relu(F.linear(input, self.weight_fake_quant(self.weight), self.bias))

    def to_float(self):
        linear = nn.Linear(self.in_features, self.out_features, self.bias is not None)
        linear.weight = nn.Parameter(self.weight.detach())
        if self.bias is not None:
            linear.bias = nn.Parameter(self.bias.detach())
        return nni.LinearReLU(linear, nn.ReLU())
