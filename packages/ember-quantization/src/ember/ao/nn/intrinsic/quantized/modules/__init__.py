from .bn_relu import BNReLU2d, BNReLU3d
from .conv_add import ConvAdd2d, ConvAddReLU2d
from .conv_relu import ConvReLU1d, ConvReLU2d, ConvReLU3d
from .linear_relu import LinearLeakyReLU, LinearReLU, LinearTanh

__all__ = ["LinearReLU", "ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "BNReLU2d", "BNReLU3d", "LinearLeakyReLU",
           "LinearTanh", "ConvAdd2d", "ConvAddReLU2d"]
