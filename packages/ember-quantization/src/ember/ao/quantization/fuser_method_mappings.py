"""How each sequence of module types is fused: conv/linear + batch norm folded (eval) or kept for QAT, + ReLU as a
fused module."""
import itertools

import ember.nn as nn
from ember.ao.nn import intrinsic as nni
from ember.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval

from .utils import MatchAllNode, get_combined_dict

__all__ = ["fuse_conv_bn", "fuse_conv_bn_relu", "fuse_linear_bn", "fuse_convtranspose_bn", "get_fuser_method",
           "get_fuser_method_new"]


def _check_bn(bn, out, what, bn_name):
    if bn.num_features != out:
        raise AssertionError(what)
    if not bn.affine:
        raise AssertionError(f"Only support fusing {bn_name} with affine set to True")
    if not bn.track_running_stats:
        raise AssertionError(f"Only support fusing {bn_name} with tracking_running_stats set to True")


def fuse_conv_bn(is_qat, conv, bn):
    """Conv + BatchNorm: for QAT the fused ConvBn module, else the conv with the batch norm folded in."""
    if conv.training != bn.training:
        raise AssertionError("Conv and BN both must be in the same mode (train or eval).")
    if not is_qat:
        return fuse_conv_bn_eval(conv, bn)
    _check_bn(bn, conv.out_channels, "Output channel of Conv2d must match num_features of BatchNorm2d.", "BatchNorm2d")
    fused = {nn.Conv1d: nni.ConvBn1d, nn.Conv2d: nni.ConvBn2d, nn.Conv3d: nni.ConvBn3d}.get(type(conv))
    if fused is None:
        raise NotImplementedError(f"Cannot fuse train modules: {(conv, bn)}")
    return fused(conv, bn)


def fuse_conv_bn_relu(is_qat, conv, bn, relu):
    """Conv + BatchNorm + ReLU: for QAT the fused ConvBnReLU module, else ConvReLU of the folded conv."""
    if not conv.training == bn.training == relu.training:
        raise AssertionError("Conv and BN both must be in the same mode (train or eval).")
    if is_qat:
        _check_bn(bn, conv.out_channels, "Output channel of Conv2d must match num_features of BatchNorm2d",
                  "BatchNorm2d")
        fused = {nn.Conv1d: nni.ConvBnReLU1d, nn.Conv2d: nni.ConvBnReLU2d, nn.Conv3d: nni.ConvBnReLU3d}.get(type(conv))
        if fused is None:
            raise NotImplementedError(f"Cannot fuse train modules: {(conv, bn, relu)}")
        return fused(conv, bn, relu)
    fused = {nn.Conv1d: nni.ConvReLU1d, nn.Conv2d: nni.ConvReLU2d, nn.Conv3d: nni.ConvReLU3d}.get(type(conv))
    if fused is None:
        raise NotImplementedError(f"Cannot fuse eval modules: {(conv, bn, relu)}")
    return fused(fuse_conv_bn_eval(conv, bn), relu)


def fuse_linear_bn(is_qat, linear, bn):
    """Linear + BatchNorm1d: for QAT the fused LinearBn1d module, else the linear layer with the batch norm folded
    in."""
    if linear.training != bn.training:
        raise AssertionError("Linear and BN both must be in the same mode (train or eval).")
    if not is_qat:
        return fuse_linear_bn_eval(linear, bn)
    _check_bn(bn, linear.out_features, "Output features of Linear must match num_features of BatchNorm1d",
              "BatchNorm1d")
    return nni.LinearBn1d(linear, bn)


def fuse_convtranspose_bn(is_qat, convt, bn):
    """ConvTranspose + BatchNorm folded (eval only)."""
    if convt.training != bn.training:
        raise AssertionError("ConvTranspose and BN both must be in the same mode (train or eval).")
    if is_qat:
        raise Exception("Fusing ConvTranspose+BatchNorm not yet supported in QAT.")
    return fuse_conv_bn_eval(convt, bn, transpose=True)


def _sequential_wrapper2(sequential):
    """A fuser method that puts the two modules into ``sequential``."""
    def fuser_method(is_qat, m1, m2):
        return sequential(m1, m2)
    return fuser_method


_DEFAULT_OP_LIST_TO_FUSER_METHOD = {
    (nn.Conv1d, nn.BatchNorm1d): fuse_conv_bn,
    (nn.Conv1d, nn.BatchNorm1d, nn.ReLU): fuse_conv_bn_relu,
    (nn.Conv2d, nn.BatchNorm2d): fuse_conv_bn,
    (nn.Conv2d, nn.BatchNorm2d, nn.ReLU): fuse_conv_bn_relu,
    (nn.Conv3d, nn.BatchNorm3d): fuse_conv_bn,
    (nn.Conv3d, nn.BatchNorm3d, nn.ReLU): fuse_conv_bn_relu,
    (nn.Conv1d, nn.ReLU): _sequential_wrapper2(nni.ConvReLU1d),
    (nn.Conv2d, nn.ReLU): _sequential_wrapper2(nni.ConvReLU2d),
    (nn.Conv3d, nn.ReLU): _sequential_wrapper2(nni.ConvReLU3d),
    (nn.Linear, nn.BatchNorm1d): fuse_linear_bn,
    (nn.Linear, nn.ReLU): _sequential_wrapper2(nni.LinearReLU),
    (nn.BatchNorm2d, nn.ReLU): _sequential_wrapper2(nni.BNReLU2d),
    (nn.BatchNorm3d, nn.ReLU): _sequential_wrapper2(nni.BNReLU3d),
    (nn.ConvTranspose1d, nn.BatchNorm1d): fuse_convtranspose_bn,
    (nn.ConvTranspose2d, nn.BatchNorm2d): fuse_convtranspose_bn,
    (nn.ConvTranspose3d, nn.BatchNorm3d): fuse_convtranspose_bn,
}


def get_fuser_method(op_list, additional_fuser_method_mapping=None):
    """The fuser method of a tuple of module types (the defaults, updated by the additional mapping)."""
    mappings = get_combined_dict(_DEFAULT_OP_LIST_TO_FUSER_METHOD, additional_fuser_method_mapping or {})
    fuser_method = mappings.get(op_list)
    if fuser_method is None:
        raise AssertionError(f"did not find fuser method for: {op_list} ")
    return fuser_method


def _reverse2(f):
    def reversed(is_qat, x, y):
        return f(is_qat, y, x)
    return reversed


def _reverse3(f):
    def reversed(is_qat, x, w):
        y, z = w
        return f(is_qat, z, y, x)
    return reversed


def _get_valid_patterns(op_pattern):
    """The pattern and its variants with any of its parts replaced by MatchAllNode."""
    if isinstance(op_pattern, (tuple, list)):
        return list(itertools.product(*[_get_valid_patterns(p) for p in op_pattern]))
    return [op_pattern, MatchAllNode]


def get_fuser_method_new(op_pattern, fuser_method_mapping):
    """The fuser method of a (possibly nested) pattern, trying its MatchAllNode variants in order."""
    for pattern in _get_valid_patterns(op_pattern):
        fuser_method = fuser_method_mapping.get(pattern)
        if fuser_method is not None:
            return fuser_method
    raise AssertionError(f"did not find fuser method for: {op_pattern} ")
