"""Identity, Linear, Bilinear, LazyLinear, and NonDynamicallyQuantizableLinear (MultiheadAttention's output
projection; not exported by ``ember.nn``, as in PyTorch)."""
import math

import ember

from .. import functional as F
from .. import init
from ._utils import empty_parameters, factory
from .lazy import LazyModuleMixin, UninitializedParameter
from .module import Module

__all__ = ["Identity", "Linear", "Bilinear", "LazyLinear"]


class Identity(Module):
    """Returns its input (any constructor arguments are ignored)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


def _fan_in_uniform_(bias, fan_in):
    """The bias initialisation of linear and convolution layers: uniform in +-1/sqrt(fan_in)."""
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
    init.uniform_(bias, -bound, bound)


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight (out_features, in_features)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        empty_parameters(self, factory(device, dtype), weight=(out_features, in_features),
                         bias=out_features if bias else None)
        self.reset_parameters()

    def reset_parameters(self):
        # uniform in +-1/sqrt(in_features): kaiming_uniform_ with a = sqrt(5) gives exactly that bound
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            _fan_in_uniform_(self.bias, self.weight.shape[1])

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear layer that dynamic quantization leaves alone: MultiheadAttention's ``out_proj``, whose weight its
    forward reads directly rather than calling the layer."""


class LazyLinear(LazyModuleMixin, Linear):
    """A Linear layer whose ``in_features`` is taken from the first input."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False)
        self.out_features = out_features
        self.weight = UninitializedParameter(**factory(device, dtype))
        if bias:
            self.bias = UninitializedParameter(**factory(device, dtype))

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            with ember.no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()


class Bilinear(Module):
    """``y[k] = x1 @ weight[k] @ x2 + bias[k]``."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        empty_parameters(self, factory(device, dtype), weight=(out_features, in1_features, in2_features),
                         bias=out_features if bias else None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
