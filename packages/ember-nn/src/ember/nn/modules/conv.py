"""Convolutions: Conv1d/2d/3d, ConvTranspose1d/2d/3d and their lazy forms."""
import math

import ember

from .. import functional as F
from .. import init
from ._utils import _pair, _single, _triple, empty_parameters, factory
from .lazy import LazyModuleMixin, UninitializedParameter
from .linear import _fan_in_uniform_
from .module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d",
           "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
_TUPLE = {1: _single, 2: _pair, 3: _triple}


class _ConvNd(Module):
    """State shared by convolutions: weight (out, in / groups, *kernel) or, transposed, (in, out / groups, *kernel)."""

    n = None
    transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", output_padding=0, device=None, dtype=None):
        super().__init__()
        tup = _TUPLE[self.n]
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in tup(stride)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {set(_PADDING_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = tup(kernel_size), tup(stride)
        self.padding = padding if isinstance(padding, str) else tup(padding)
        self.dilation, self.output_padding = tup(dilation), tup(output_padding)
        self.groups, self.padding_mode = groups, padding_mode
        # F.pad's argument for the non-zero padding modes: (before, after) per dim, last dim first
        if padding == "same":
            pads = []
            for d, k in zip(self.dilation, self.kernel_size):
                total = d * (k - 1)
                pads.append((total // 2, total - total // 2))
        else:
            pads = [(p, p) for p in self.padding] if not isinstance(padding, str) else [(0, 0)] * self.n
        self._reversed_padding_repeated_twice = [p for pair in reversed(pads) for p in pair]
        shape = (in_channels, out_channels // groups) if self.transposed else (out_channels, in_channels // groups)
        empty_parameters(self, factory(device, dtype), weight=shape + self.kernel_size,
                         bias=out_channels if bias else None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            _fan_in_uniform_(self.bias, self.weight.shape[1] * math.prod(self.weight.shape[2:]))

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self.n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self.n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self.n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__.setdefault("padding_mode", "zeros")


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, 0, device, dtype)

    def _conv_forward(self, input, weight, bias):
        conv = getattr(F, f"conv{self.n}d")
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-d convolution over (N, C, L) inputs."""
    n = 1


class Conv2d(_Conv):
    """2-d convolution over (N, C, H, W) inputs."""
    n = 2


class Conv3d(_Conv):
    """3-d convolution over (N, C, D, H, W) inputs."""
    n = 3


class _ConvTranspose(_ConvNd):
    transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, output_padding, device, dtype)

    def _output_padding(self, input, output_size):
        """The output padding that makes the output ``output_size`` (spatial, or with batch/channel dims)."""
        if output_size is None:
            return self.output_padding
        n = self.n
        lead = 2 if input.dim() == n + 2 else 1
        size = list(output_size)
        if len(size) == lead + n:
            size = size[lead:]
        if len(size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.dim()}D input, output_size must have {n} or {lead + n} "
                             f"elements (got {len(output_size)})")
        mins = [(input.shape[d + lead] - 1) * self.stride[d] - 2 * self.padding[d]
                + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n)]
        for d in range(n):
            if not mins[d] <= size[d] <= mins[d] + self.stride[d] - 1:
                raise ValueError(f"requested an output size of {size}, but valid sizes range from {mins} to "
                                 f"{[m + s - 1 for m, s in zip(mins, self.stride)]} (for an input of "
                                 f"{list(input.shape[lead:])})")
        return tuple(size[d] - mins[d] for d in range(n))

    def forward(self, input, output_size=None):
        output_padding = self._output_padding(input, output_size)
        return getattr(F, f"conv_transpose{self.n}d")(input, self.weight, self.bias, self.stride, self.padding,
                                                      output_padding, self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """1-d transposed convolution."""
    n = 1


class ConvTranspose2d(_ConvTranspose):
    """2-d transposed convolution."""
    n = 2


class ConvTranspose3d(_ConvTranspose):
    """3-d transposed convolution."""
    n = 3


class _LazyConv(LazyModuleMixin):
    """``in_channels`` taken from the first input (dim 1, or dim 0 when unbatched)."""

    def __init__(self, out_channels, kernel_size, *args, device=None, dtype=None, **kwargs):
        super().__init__(0, 0, kernel_size, *args, **kwargs)
        self.out_channels = out_channels
        self.weight = UninitializedParameter(**factory(device, dtype))
        if self.bias is not None:
            self.bias = UninitializedParameter(**factory(device, dtype))

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args):
        if not self.has_uninitialized_params():
            return
        self.in_channels = input.shape[1] if input.dim() == self.n + 2 else input.shape[0]
        if self.in_channels % self.groups:
            raise ValueError("in_channels must be divisible by groups")
        a, b = (self.in_channels, self.out_channels) if self.transposed else (self.out_channels, self.in_channels)
        with ember.no_grad():
            self.weight.materialize((a, b // self.groups) + self.kernel_size)
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


def _lazy(base):
    return type(f"Lazy{base.__name__}", (_LazyConv, base), {"cls_to_become": base, "__module__": __name__,
                                                              "__doc__": f"{base.__name__} with lazy in_channels."})


LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d = map(
    _lazy, (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d))
