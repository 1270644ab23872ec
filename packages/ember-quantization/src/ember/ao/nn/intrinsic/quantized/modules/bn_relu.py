"""Quantized BNReLU2d/3d: batch norm with a fused ReLU."""
import ember.ao.nn.quantized as nnq
from ember.ao.nn import intrinsic as nni
from ember.ao.nn.quantized import _kernels

__all__ = ["BNReLU2d", "BNReLU3d"]


class _BNReLU:
    def forward(self, input):
        if input.dim() != self._DIMS + 2:
            raise ValueError("Input shape must be `(N, C, H, W)`!")
        return _kernels.batch_norm(input, self.weight, self.bias, self.running_mean, self.running_var, self.eps,
                                   float(self.scale), int(self.zero_point), relu=True, dims=self._DIMS)

    def _get_name(self):
        return f"QuantizedBNReLU{self._DIMS}d"

    @classmethod
    def from_reference(cls, bn_relu, output_scale, output_zero_point):
        return super().from_reference(bn_relu[0], output_scale, output_zero_point)


class BNReLU2d(_BNReLU, nnq.BatchNorm2d):
    """Quantized BatchNorm2d + ReLU."""
    _FLOAT_MODULE = nni.BNReLU2d


class BNReLU3d(_BNReLU, nnq.BatchNorm3d):
    """Quantized BatchNorm3d + ReLU."""
    _FLOAT_MODULE = nni.BNReLU3d
