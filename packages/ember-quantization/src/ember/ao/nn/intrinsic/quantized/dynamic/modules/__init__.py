from .linear_relu import LinearReLU

__all__ = ["LinearReLU"]
