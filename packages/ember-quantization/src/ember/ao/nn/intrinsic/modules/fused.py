"""Fused float modules: sequences (conv + bn + relu, linear + relu, ...) that quantization treats as one layer.
``fuse_modules`` makes them; ``prepare_qat`` and ``convert`` swap them for their QAT and quantized forms."""
import ember.nn as nn

__all__ = ["ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "LinearReLU", "ConvBn1d", "ConvBn2d", "ConvBnReLU1d",
           "ConvBnReLU2d", "ConvBn3d", "ConvBnReLU3d", "BNReLU2d", "BNReLU3d", "LinearBn1d", "LinearLeakyReLU",
           "LinearTanh", "ConvAdd2d", "ConvAddReLU2d"]


class _FusedModule(nn.Sequential):
    """A Sequential of modules fused for quantization; subclasses check the types of their parts."""

    _PARTS = ()

    def __init__(self, *modules):
        if len(modules) != len(self._PARTS) or any(type(m) is not t for m, t in zip(modules, self._PARTS)):
            names = [type(m).__name__ for m in modules]
            listed = " and ".join(names) if len(names) == 2 else ", ".join(names[:-1]) + ", and " + names[-1]
            raise AssertionError(f"Incorrect types for input modules: {listed}")
        super().__init__(*modules)


def _fused(name, *parts):
    cls = type(name, (_FusedModule,), {"_PARTS": parts, "__module__": __name__,
                                       "__doc__": f"{' + '.join(p.__name__ for p in parts)}, fused for quantization."})
    return cls


ConvReLU1d = _fused("ConvReLU1d", nn.Conv1d, nn.ReLU)
ConvReLU2d = _fused("ConvReLU2d", nn.Conv2d, nn.ReLU)
ConvReLU3d = _fused("ConvReLU3d", nn.Conv3d, nn.ReLU)
LinearReLU = _fused("LinearReLU", nn.Linear, nn.ReLU)
ConvBn1d = _fused("ConvBn1d", nn.Conv1d, nn.BatchNorm1d)
ConvBn2d = _fused("ConvBn2d", nn.Conv2d, nn.BatchNorm2d)
ConvBn3d = _fused("ConvBn3d", nn.Conv3d, nn.BatchNorm3d)
ConvBnReLU1d = _fused("ConvBnReLU1d", nn.Conv1d, nn.BatchNorm1d, nn.ReLU)
ConvBnReLU2d = _fused("ConvBnReLU2d", nn.Conv2d, nn.BatchNorm2d, nn.ReLU)
ConvBnReLU3d = _fused("ConvBnReLU3d", nn.Conv3d, nn.BatchNorm3d, nn.ReLU)
BNReLU2d = _fused("BNReLU2d", nn.BatchNorm2d, nn.ReLU)
BNReLU3d = _fused("BNReLU3d", nn.BatchNorm3d, nn.ReLU)
LinearBn1d = _fused("LinearBn1d", nn.Linear, nn.BatchNorm1d)
LinearLeakyReLU = _fused("LinearLeakyReLU", nn.Linear, nn.LeakyReLU)
LinearTanh = _fused("LinearTanh", nn.Linear, nn.Tanh)


class ConvAdd2d(_FusedModule):
    """Conv2d of the first input plus the second input (``add`` a callable)."""

    def __init__(self, conv, add):
        nn.Sequential.__init__(self, conv)
        self.add = add

    def forward(self, x1, x2):
        return self.add(self[0](x1), x2)


class ConvAddReLU2d(_FusedModule):
    """ReLU of Conv2d of the first input plus the second input."""

    def __init__(self, conv, add, relu):
        nn.Sequential.__init__(self, conv)
        self.add, self.relu = add, relu

    def forward(self, x1, x2):
        return self.relu(self.add(self[0](x1), x2))
