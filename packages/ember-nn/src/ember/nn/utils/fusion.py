"""Folding an eval-mode batch norm into the convolution or linear layer before it: one layer computing both."""
import copy

import ember

from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of eval-mode ``conv`` whose weight and bias also apply eval-mode ``bn``."""
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(weight, bias) Parameters of a convolution followed by a batch norm with running statistics: the weight
    scaled per output channel (dim 1 if ``transpose``) by ``bn_w / sqrt(bn_rv + eps)``, the bias moved to match."""
    w_dtype = conv_w.dtype
    b_dtype = conv_b.dtype if conv_b is not None else w_dtype
    if conv_b is None:
        conv_b = ember.zeros_like(bn_rm)
    if bn_w is None:
        bn_w = ember.ones_like(bn_rm)
    if bn_b is None:
        bn_b = ember.zeros_like(bn_rm)
    rsqrt = ember.rsqrt(bn_rv + bn_eps)
    shape = [1, -1] + [1] * (conv_w.dim() - 2) if transpose else [-1, 1] + [1] * (conv_w.dim() - 2)
    fused_w = (conv_w * (bn_w * rsqrt).reshape(shape)).to(dtype=w_dtype)
    fused_b = ((conv_b - bn_rm) * rsqrt * bn_w + bn_b).to(dtype=b_dtype)
    return Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, conv_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of eval-mode ``linear`` whose weight and bias also apply eval-mode ``bn`` (of ``out_features``
    features, or of one)."""
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(linear)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError("To fuse, linear.out_features == bn.num_features or bn.num_features == 1, got "
                             f"linear.out_features={linear.out_features} and bn.num_features={bn.num_features}")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """(weight, bias) Parameters of a linear layer followed by a batch norm with running statistics."""
    w_dtype = linear_w.dtype
    b_dtype = linear_b.dtype if linear_b is not None else w_dtype
    if linear_b is None:
        linear_b = ember.zeros_like(bn_rm)
    bn_scale = bn_w * ember.rsqrt(bn_rv + bn_eps)
    fused_w = linear_w * bn_scale.unsqueeze(-1).to(dtype=w_dtype)
    fused_b = ((linear_b - bn_rm) * bn_scale + bn_b).to(dtype=b_dtype)
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, linear_b.requires_grad)
