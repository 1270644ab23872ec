"""QuantStub and DeQuantStub mark where a model's tensors enter and leave the quantized domain; QuantWrapper
puts a module between the two."""
from ember import nn

__all__ = ["QuantStub", "DeQuantStub", "QuantWrapper"]


class QuantStub(nn.Module):
    """Identity before ``prepare`` (an observer then watches its output); ``convert`` swaps it for
    ``nnq.Quantize``. ``qconfig`` overrides the one inherited from parent modules."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class DeQuantStub(nn.Module):
    """Identity until ``convert`` swaps it for ``nnq.DeQuantize``."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class QuantWrapper(nn.Module):
    """``dequant(module(quant(x)))``: quantizes a module's input and dequantizes its output."""

    def __init__(self, module):
        super().__init__()
        qconfig = getattr(module, "qconfig", None)
        self.add_module("quant", QuantStub(qconfig))
        self.add_module("dequant", DeQuantStub(qconfig))
        self.add_module("module", module)
        self.train(module.training)

    def forward(self, X):
        return self.dequant(self.module(self.quant(X)))
