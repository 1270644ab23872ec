"""Dropout layers: elementwise, channel-wise (1d/2d/3d) and alpha dropout."""
from .. import functional as F
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class _DropoutNd(Module):
    fn = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return getattr(F, self.fn)(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zeroes elements with probability p while training, scaling the rest by 1 / (1 - p)."""
    fn = "dropout"


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of (N, C, L) inputs while training."""
    fn = "dropout1d"


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of (N, C, H, W) inputs while training."""
    fn = "dropout2d"


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of (N, C, D, H, W) inputs while training."""
    fn = "dropout3d"


class AlphaDropout(_DropoutNd):
    """Dropout that keeps the mean and variance of SELU activations."""
    fn = "alpha_dropout"


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels."""
    fn = "feature_alpha_dropout"
