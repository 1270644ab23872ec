"""QAT forms of fused convolutions: ConvBn (the batch norm folded into a fake-quantized weight), ConvBnReLU and
ConvReLU, in 1, 2 and 3 dims."""
import math

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.ao.nn import intrinsic as nni
from ember.ao.nn import qat as nnqat
from ember.nn import init
from ember.nn.utils.fusion import fuse_conv_bn_weights

__all__ = ["ConvBn1d", "ConvBnReLU1d", "ConvReLU1d", "ConvBn2d", "ConvBnReLU2d", "ConvReLU2d", "ConvBn3d",
           "ConvBnReLU3d", "ConvReLU3d", "update_bn_stats", "freeze_bn_stats"]

_BN_CLASS_MAP = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}


class _ConvBnNd(nni._FusedModule):
    """Conv + BatchNorm for QAT (a mixin before the float convolution class). Forward scales the weight by the
    batch norm's ``weight / running_std`` before fake quantization, convolves, undoes the scale and applies the
    batch norm, so that training sees the folded weight's rounding; ``freeze_bn`` stops updating its statistics."""

    _version = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=None,
                 padding_mode="zeros", eps=1e-05, momentum=0.1, freeze_bn=False, qconfig=None):
        conv_base = self._FLOAT_CONV_MODULE
        conv_base.__init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, False,
                           padding_mode)
        if not qconfig:
            raise AssertionError("qconfig must be provided for QAT module")
        self.qconfig = qconfig
        self.freeze_bn = freeze_bn if self.training else True
        self.bn = _BN_CLASS_MAP[len(self.kernel_size)](out_channels, eps, momentum, True, True)
        self.weight_fake_quant = self.qconfig.weight()
        if bias:
            self.bias = nn.Parameter(ember.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_bn_parameters()
        if self.training and not freeze_bn:
            self.update_bn_stats()
        else:
            self.freeze_bn_stats()
        self._enable_slow_path_for_better_numerical_stability = False

    def reset_running_stats(self):
        self.bn.reset_running_stats()

    def reset_bn_parameters(self):
        self.bn.reset_running_stats()
        init.uniform_(self.bn.weight)
        init.zeros_(self.bn.bias)
        if self.bias is not None:
            fan_in = self.weight.shape[1] * math.prod(self.weight.shape[2:])
            bound = 1 / math.sqrt(fan_in)
            init.uniform_(self.bias, -bound, bound)

    def update_bn_stats(self):
        self.freeze_bn = False
        self.bn.training = True
        return self

    def freeze_bn_stats(self):
        self.freeze_bn = True
        self.bn.training = False
        return self

    def _shapes(self):
        weight_shape = [1] * self.weight.dim()
        weight_shape[0] = -1
        bias_shape = [1] * self.weight.dim()
        bias_shape[1] = -1
        return weight_shape, bias_shape

    def _forward(self, input):
        if self._enable_slow_path_for_better_numerical_stability:
            return self._forward_slow(input)
        return self._forward_approximate(input)

    def _forward_approximate(self, input):
        """One pass: conv(x, fq(w * scale)) / scale (+ bias), then the batch norm; ``scale = bn.weight /
        running_std``."""
        weight_shape, bias_shape = self._shapes()
        running_std = ember.sqrt(self.bn.running_var + self.bn.eps)
        scale_factor = self.bn.weight / running_std
        scaled_weight = self.weight_fake_quant(self.weight * scale_factor.reshape(weight_shape))
        zero_bias = ember.zeros(self.out_channels, dtype=input.dtype)
        conv = self._conv_forward(input, scaled_weight, zero_bias)
        conv_orig = conv / scale_factor.reshape(bias_shape)
        if self.bias is not None:
            conv_orig = conv_orig + self.bias.reshape(bias_shape)
        return self.bn(conv_orig)

    def _forward_slow(self, input):
        """Two passes (exact when bn.weight is 0): batch statistics from the unscaled convolution, the output
        from the folded, fake-quantized weight rescaled by running_std / batch_std."""
        weight_shape, bias_shape = self._shapes()
        zero_bias = ember.zeros(self.out_channels, dtype=input.dtype)
        if self.bn.training:
            conv_out = self._conv_forward(input, self.weight, zero_bias)
            with ember.no_grad():
                self.bn(conv_out if self.bias is None else conv_out + self.bias.reshape(bias_shape))
            running_std = ember.sqrt(self.bn.running_var + self.bn.eps)
            scaled_weight = self.weight_fake_quant(self.weight * (self.bn.weight / running_std).reshape(weight_shape))
            conv_bn = self._conv_forward(input, scaled_weight, zero_bias)
            avg_dims = [0] + list(range(2, self.weight.dim()))
            batch_mean = conv_out.mean(avg_dims)
            batch_var = ember.square(conv_out - batch_mean.reshape(bias_shape)).mean(avg_dims)
            batch_std = ember.sqrt(batch_var + self.bn.eps)
            conv_bn = conv_bn * (running_std / batch_std).reshape(bias_shape)
            fused_mean, fused_std = batch_mean, batch_std
        else:
            running_std = ember.sqrt(self.bn.running_var + self.bn.eps)
            scaled_weight = self.weight_fake_quant(self.weight * (self.bn.weight / running_std).reshape(weight_shape))
            conv_bn = self._conv_forward(input, scaled_weight, zero_bias)
            fused_mean = self.bn.running_mean - (self.bias if self.bias is not None else 0)
            fused_std = running_std
        fused_bias = self.bn.bias - self.bn.weight * fused_mean / fused_std
        conv_bn = conv_bn + fused_bias.reshape(bias_shape)
        if self.bias is not None:  # (keeps the bias in the graph, with a zero gradient)
            conv_bn = conv_bn + (self.bias - self.bias).reshape(bias_shape)
        return conv_bn

    def forward(self, input):
        return self._forward(input)

    def train(self, mode=True):
        """Frozen batch norms stay in eval mode whatever ``mode`` says."""
        self.training = mode
        if not self.freeze_bn:
            for module in self.children():
                module.train(mode)
        return self

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs):
        if local_metadata.get("version") in (None, 1):  # version 1 kept the batch norm's state flat
            for new, old in (("bn.weight", "gamma"), ("bn.bias", "beta"), ("bn.running_mean", "running_mean"),
                             ("bn.running_var", "running_var"), ("bn.num_batches_tracked", "num_batches_tracked")):
                if prefix + old in state_dict:
                    state_dict[prefix + new] = state_dict.pop(prefix + old)
                elif prefix + new not in state_dict and strict:
                    missing_keys.append(prefix + new)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The QAT module of a fused float ConvBn(ReLU), sharing its parameters and batch-norm buffers."""
        if type(mod) is not cls._FLOAT_MODULE:
            raise AssertionError("qat." + cls.__name__ + ".from_float only works for " + cls._FLOAT_MODULE.__name__)
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        if not mod.qconfig:
            raise AssertionError("Input float module must have a valid qconfig")
        conv, bn = mod[0], mod[1]
        qat = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, conv.dilation,
                  conv.groups, conv.bias is not None, conv.padding_mode, bn.eps, bn.momentum, False, mod.qconfig)
        qat.weight, qat.bias = conv.weight, conv.bias
        qat.bn.weight, qat.bn.bias = bn.weight, bn.bias
        qat.bn.running_mean, qat.bn.running_var = bn.running_mean, bn.running_var
        qat.bn.num_batches_tracked = bn.num_batches_tracked
        return qat

    def to_float(self):
        """The float convolution with the batch norm folded in (and a ReLU for ConvBnReLU)."""
        cls = type(self)
        conv = cls._FLOAT_CONV_MODULE(self.in_channels, self.out_channels, self.kernel_size, self.stride,
                                      self.padding, self.dilation, self.groups, self.bias is not None,
                                      self.padding_mode)
        conv.weight = nn.Parameter(self.weight.detach())
        if self.bias is not None:
            conv.bias = nn.Parameter(self.bias.detach())
        conv.weight, conv.bias = fuse_conv_bn_weights(conv.weight, conv.bias, self.bn.running_mean,
                                                      self.bn.running_var, self.bn.eps, self.bn.weight, self.bn.bias)
        if cls._FLOAT_RELU_MODULE is None:
            conv.train(self.training)
            return conv
        fused = cls._FUSED_FLOAT_MODULE(conv, cls._FLOAT_RELU_MODULE())
        fused.train(self.training)
        return fused


def _conv_bn_classes(n, conv_cls, bn_cls):
    conv_bn = type(f"ConvBn{n}d", (_ConvBnNd, conv_cls), {
        "__module__": __name__, "_FLOAT_MODULE": getattr(nni, f"ConvBn{n}d"), "_FLOAT_CONV_MODULE": conv_cls,
        "_FLOAT_BN_MODULE": bn_cls, "_FLOAT_RELU_MODULE": None,
        "__doc__": f"Conv{n}d + BatchNorm{n}d for quantization-aware training."})
    conv_bn_relu = type(f"ConvBnReLU{n}d", (conv_bn,), {
        "__module__": __name__, "_FLOAT_MODULE": getattr(nni, f"ConvBnReLU{n}d"), "_FLOAT_RELU_MODULE": nn.ReLU,
        "_FUSED_FLOAT_MODULE": getattr(nni, f"ConvReLU{n}d"),
        "forward": lambda self, input: F.relu(self._forward(input)),
        "__doc__": f"Conv{n}d + BatchNorm{n}d + ReLU for quantization-aware training."})
    return conv_bn, conv_bn_relu


ConvBn1d, ConvBnReLU1d = _conv_bn_classes(1, nn.Conv1d, nn.BatchNorm1d)
ConvBn2d, ConvBnReLU2d = _conv_bn_classes(2, nn.Conv2d, nn.BatchNorm2d)
ConvBn3d, ConvBnReLU3d = _conv_bn_classes(3, nn.Conv3d, nn.BatchNorm3d)


def _conv_relu_class(n, qat_conv):
    return type(f"ConvReLU{n}d", (qat_conv, nni._FusedModule), {
        "__module__": __name__, "_FLOAT_MODULE": getattr(nni, f"ConvReLU{n}d"),
        "_FLOAT_CONV_MODULE": getattr(nn, f"Conv{n}d"), "_FLOAT_BN_MODULE": None, "_FLOAT_RELU_MODULE": nn.ReLU,
        "forward": lambda self, input: F.relu(self._conv_forward(input, self.weight_fake_quant(self.weight),
                                                                 self.bias)),
        "__doc__": f"Conv{n}d + ReLU for quantization-aware training."})


ConvReLU1d = _conv_relu_class(1, nnqat.Conv1d)
ConvReLU2d = _conv_relu_class(2, nnqat.Conv2d)
ConvReLU3d = _conv_relu_class(3, nnqat.Conv3d)


def update_bn_stats(mod):
    """Let the batch norm of a QAT ConvBn module update its running statistics (``model.apply(...)``)."""
    if type(mod) in (ConvBnReLU1d, ConvBnReLU2d, ConvBnReLU3d, ConvBn1d, ConvBn2d, ConvBn3d):
        mod.update_bn_stats()


def freeze_bn_stats(mod):
    """Freeze the running statistics of the batch norm of a QAT ConvBn module (``model.apply(...)``)."""
    if type(mod) in (ConvBnReLU1d, ConvBnReLU2d, ConvBnReLU3d, ConvBn1d, ConvBn2d, ConvBn3d):
        mod.freeze_bn_stats()
