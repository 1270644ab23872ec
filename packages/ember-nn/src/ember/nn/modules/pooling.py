"""Pooling layers: max, average, adaptive, power-average, fractional max and max unpooling."""
from .. import functional as F
from ._utils import _pair, _single, _triple
from .module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
           "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "LPPool1d", "LPPool2d", "LPPool3d", "FractionalMaxPool2d",
           "FractionalMaxPool3d"]

_TUPLE = {1: _single, 2: _pair, 3: _triple}


class _MaxPoolNd(Module):
    n = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return getattr(F, f"max_pool{self.n}d")(input, self.kernel_size, self.stride, self.padding, self.dilation,
                                                ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """Maximum over sliding windows of (N, C, L) inputs."""
    n = 1


class MaxPool2d(_MaxPoolNd):
    """Maximum over sliding windows of (N, C, H, W) inputs."""
    n = 2


class MaxPool3d(_MaxPoolNd):
    """Maximum over sliding windows of (N, C, D, H, W) inputs."""
    n = 3


class AvgPool1d(Module):
    """Mean over sliding windows of (N, C, L) inputs."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AvgPoolNd(Module):
    n = None

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return getattr(F, f"avg_pool{self.n}d")(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                                self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    """Mean over sliding windows of (N, C, H, W) inputs."""
    n = 2


class AvgPool3d(_AvgPoolNd):
    """Mean over sliding windows of (N, C, D, H, W) inputs."""
    n = 3


class _AdaptiveAvgPoolNd(Module):
    n = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return getattr(F, f"adaptive_avg_pool{self.n}d")(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class _AdaptiveMaxPoolNd(_AdaptiveAvgPoolNd):
    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input):
        return getattr(F, f"adaptive_max_pool{self.n}d")(input, self.output_size, self.return_indices)


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """Mean over windows spread to give ``output_size`` outputs."""
    n = 1


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Mean over windows spread to give ``output_size`` outputs."""
    n = 2


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """Mean over windows spread to give ``output_size`` outputs."""
    n = 3


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Maximum over windows spread to give ``output_size`` outputs."""
    n = 1


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Maximum over windows spread to give ``output_size`` outputs."""
    n = 2


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Maximum over windows spread to give ``output_size`` outputs."""
    n = 3


class _MaxUnpoolNd(Module):
    n = None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        tup = _TUPLE[self.n]
        self.kernel_size = tup(kernel_size)
        self.stride = tup(stride if stride is not None else kernel_size)
        self.padding = tup(padding)

    def forward(self, input, indices, output_size=None):
        return getattr(F, f"max_unpool{self.n}d")(input, indices, self.kernel_size, self.stride, self.padding,
                                                  output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """Inverse of MaxPool1d: values placed at their indices, zeros elsewhere."""
    n = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """Inverse of MaxPool2d: values placed at their indices, zeros elsewhere."""
    n = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """Inverse of MaxPool3d: values placed at their indices, zeros elsewhere."""
    n = 3


class _LPPoolNd(Module):
    n = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, input):
        return getattr(F, f"lp_pool{self.n}d")(input, float(self.norm_type), self.kernel_size, self.stride,
                                               self.ceil_mode)

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """Power-average pooling: the p-norm of each window."""
    n = 1


class LPPool2d(_LPPoolNd):
    """Power-average pooling: the p-norm of each window."""
    n = 2


class LPPool3d(_LPPoolNd):
    """Power-average pooling: the p-norm of each window."""
    n = 3


class _FractionalMaxPoolNd(Module):
    n = None

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None):
        super().__init__()
        tup = _TUPLE[self.n]
        self.kernel_size = tup(kernel_size)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = tup(output_size) if output_size is not None else None
        self.output_ratio = tup(output_ratio) if output_ratio is not None else None
        name = type(self).__name__
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        return getattr(F, f"fractional_max_pool{self.n}d")(input, self.kernel_size, self.output_size,
                                                           self.output_ratio, self.return_indices,
                                                           _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Max pooling over pseudo-randomly placed windows that shrink the input by a fractional ratio."""
    n = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Max pooling over pseudo-randomly placed windows that shrink the input by a fractional ratio."""
    n = 3
