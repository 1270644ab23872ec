"""Quantized BatchNorm2d/3d: inference batch norm of quantized inputs, requantized."""
import ember
import ember.nn as nn

from .. import _kernels

__all__ = ["BatchNorm2d", "BatchNorm3d"]


class _BatchNorm(nn.modules.normalization._BatchNorm):
    _DIMS = None

    def __init__(self, num_features, eps=1e-5, momentum=0.1, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, True, True, device=device, dtype=dtype)
        self.register_buffer("scale", ember.tensor(1.0, device=device, dtype=dtype))
        self.register_buffer("zero_point", ember.tensor(0, device=device))

    def _get_name(self):
        return f"QuantizedBatchNorm{self._DIMS}d"

    def _check_input_dim(self, input):
        if input.dim() != self._DIMS + 2:
            raise ValueError("Input shape must be `(N, C, H, W)`!")

    def forward(self, input):
        return _kernels.batch_norm(input, self.weight, self.bias, self.running_mean, self.running_var, self.eps,
                                   float(self.scale), int(self.zero_point), dims=self._DIMS)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        from ember.ao.nn import intrinsic as nni
        activation_post_process = mod.activation_post_process
        if type(mod) is getattr(nni, f"BNReLU{cls._DIMS}d"):
            mod = mod[0]
        scale, zero_point = activation_post_process.calculate_qparams()
        new_mod = cls(mod.num_features, mod.eps)
        new_mod.weight, new_mod.bias = mod.weight, mod.bias
        new_mod.running_mean, new_mod.running_var = mod.running_mean, mod.running_var
        new_mod.scale, new_mod.zero_point = scale, zero_point
        return new_mod

    @classmethod
    def from_reference(cls, bn, output_scale, output_zero_point):
        qbn = cls(bn.num_features, bn.eps, bn.momentum)
        qbn.weight, qbn.bias = bn.weight, bn.bias
        qbn.running_mean, qbn.running_var = bn.running_mean, bn.running_var
        qbn.scale, qbn.zero_point = output_scale, output_zero_point
        return qbn


class BatchNorm2d(_BatchNorm):
    """Batch norm of quantized (N, C, H, W) inputs with running statistics."""
    _DIMS = 2


class BatchNorm3d(_BatchNorm):
    """Batch norm of quantized (N, C, D, H, W) inputs with running statistics."""
    _DIMS = 3
