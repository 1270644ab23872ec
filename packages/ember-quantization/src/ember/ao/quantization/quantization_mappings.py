"""The default mappings: float module -> quantized (static, dynamic) and -> QAT module classes, the modules
qconfigs propagate to, and the ops with fixed output qparams."""
import copy

import ember.ao.nn.intrinsic as nni
import ember.ao.nn.intrinsic.qat as nniqat
import ember.ao.nn.intrinsic.quantized as nniq
import ember.ao.nn.intrinsic.quantized.dynamic as nniqd
import ember.ao.nn.qat as nnqat
import ember.ao.nn.qat.dynamic as nnqatd
import ember.ao.nn.quantizable as nnqa
import ember.ao.nn.quantized as nnq
import ember.ao.nn.quantized.dynamic as nnqd
import ember.nn as nn
import ember.nn.functional as F
from ember.ao.nn.quantized import _kernels
from ember.ops import quantized as qops

from .fake_quantize import default_fixed_qparams_range_0to1_fake_quant, default_fixed_qparams_range_neg1to1_fake_quant
from .stubs import DeQuantStub, QuantStub
from .utils import get_combined_dict

__all__ = ["DEFAULT_STATIC_QUANT_MODULE_MAPPINGS", "DEFAULT_QAT_MODULE_MAPPINGS",
           "DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS", "DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS",
           "DEFAULT_MODULE_TO_ACT_POST_PROCESS", "no_observer_set",
           "get_default_static_quant_module_mappings", "get_default_static_quant_reference_module_mappings",
           "get_embedding_static_quant_module_mappings", "get_default_static_sparse_quant_module_mappings",
           "get_static_quant_module_class", "get_dynamic_quant_module_class", "get_default_qat_module_mappings",
           "get_embedding_qat_module_mappings", "get_default_dynamic_quant_module_mappings",
           "get_default_dynamic_sparse_quant_module_mappings", "get_default_qconfig_propagation_list",
           "get_default_compare_output_module_list", "get_default_float_to_quantized_operator_mappings",
           "get_quantized_operator"]

_NDQL = nn.modules.linear.NonDynamicallyQuantizableLinear

DEFAULT_STATIC_QUANT_MODULE_MAPPINGS = {
    QuantStub: nnq.Quantize, DeQuantStub: nnq.DeQuantize, nn.BatchNorm2d: nnq.BatchNorm2d,
    nn.BatchNorm3d: nnq.BatchNorm3d, nn.Dropout: nnq.Dropout, nn.Conv1d: nnq.Conv1d, nn.Conv2d: nnq.Conv2d,
    nn.Conv3d: nnq.Conv3d, nn.ConvTranspose1d: nnq.ConvTranspose1d, nn.ConvTranspose2d: nnq.ConvTranspose2d,
    nn.ConvTranspose3d: nnq.ConvTranspose3d, nn.ELU: nnq.ELU, nn.Embedding: nnq.Embedding,
    nn.EmbeddingBag: nnq.EmbeddingBag, nn.GroupNorm: nnq.GroupNorm, nn.Hardswish: nnq.Hardswish,
    nn.InstanceNorm1d: nnq.InstanceNorm1d, nn.InstanceNorm2d: nnq.InstanceNorm2d,
    nn.InstanceNorm3d: nnq.InstanceNorm3d, nn.LayerNorm: nnq.LayerNorm, nn.LeakyReLU: nnq.LeakyReLU,
    _NDQL: nnq.Linear, nn.Linear: nnq.Linear, nn.ReLU6: nnq.ReLU6, nn.PReLU: nnq.PReLU,
    nnq.FloatFunctional: nnq.QFunctional,
    nni.BNReLU2d: nniq.BNReLU2d, nni.BNReLU3d: nniq.BNReLU3d, nni.ConvReLU1d: nniq.ConvReLU1d,
    nni.ConvReLU2d: nniq.ConvReLU2d, nni.ConvReLU3d: nniq.ConvReLU3d, nni.ConvAdd2d: nniq.ConvAdd2d,
    nni.ConvAddReLU2d: nniq.ConvAddReLU2d, nni.LinearReLU: nniq.LinearReLU,
    nni.LinearLeakyReLU: nniq.LinearLeakyReLU, nni.LinearTanh: nniq.LinearTanh,
    nniqat.ConvBn1d: nnq.Conv1d, nniqat.ConvBn2d: nnq.Conv2d, nniqat.ConvBn3d: nnq.Conv3d,
    nniqat.ConvBnReLU1d: nniq.ConvReLU1d, nniqat.ConvBnReLU2d: nniq.ConvReLU2d, nniqat.ConvBnReLU3d: nniq.ConvReLU3d,
    nniqat.ConvReLU2d: nniq.ConvReLU2d, nniqat.ConvReLU3d: nniq.ConvReLU3d, nniqat.LinearReLU: nniq.LinearReLU,
    nniqat.LinearBn1d: nnq.Linear, nnqat.Linear: nnq.Linear, nnqat.Conv2d: nnq.Conv2d, nnqat.Conv3d: nnq.Conv3d,
}

DEFAULT_QAT_MODULE_MAPPINGS = {
    nn.Conv2d: nnqat.Conv2d, nn.Conv3d: nnqat.Conv3d, nn.Linear: nnqat.Linear, _NDQL: nnqat.Linear,
    nni.ConvBn1d: nniqat.ConvBn1d, nni.ConvBn2d: nniqat.ConvBn2d, nni.ConvBn3d: nniqat.ConvBn3d,
    nni.ConvBnReLU1d: nniqat.ConvBnReLU1d, nni.ConvBnReLU2d: nniqat.ConvBnReLU2d,
    nni.ConvBnReLU3d: nniqat.ConvBnReLU3d, nni.ConvReLU2d: nniqat.ConvReLU2d, nni.ConvReLU3d: nniqat.ConvReLU3d,
    nni.LinearReLU: nniqat.LinearReLU, nni.LinearBn1d: nniqat.LinearBn1d,
}

DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS = {
    nn.GRUCell: nnqd.GRUCell, nn.Linear: nnqd.Linear, nnqatd.Linear: nnqd.Linear, _NDQL: nnqd.Linear,
    nn.LSTM: nnqd.LSTM, nn.GRU: nnqd.GRU, nn.LSTMCell: nnqd.LSTMCell, nn.RNNCell: nnqd.RNNCell,
    nni.LinearReLU: nniqd.LinearReLU, nn.EmbeddingBag: nnq.EmbeddingBag, nn.Embedding: nnq.Embedding,
}

_INCLUDE_QCONFIG_PROPAGATE_LIST = {nn.Sequential}


def _quantized_dropout(input, p, train):
    """Dropout of a quantized inference model: the identity."""
    return input


DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS = {
    F.elu: qops.elu, F.hardswish: qops.hardswish, F.instance_norm: _kernels.instance_norm,
    F.layer_norm: _kernels.layer_norm, F.leaky_relu: qops.leaky_relu, F.dropout: _quantized_dropout,
}

DEFAULT_MODULE_TO_ACT_POST_PROCESS = {
    nn.Hardsigmoid: default_fixed_qparams_range_0to1_fake_quant,
    nn.Sigmoid: default_fixed_qparams_range_0to1_fake_quant,
    nn.Softmax: default_fixed_qparams_range_0to1_fake_quant,
    nn.Tanh: default_fixed_qparams_range_neg1to1_fake_quant,
}


def no_observer_set():
    """Module types whose outputs get no observer (the quantizable LSTM and MultiheadAttention observe inside)."""
    return {nnqa.LSTM, nnqa.MultiheadAttention}


def get_default_static_quant_module_mappings():
    return copy.deepcopy(DEFAULT_STATIC_QUANT_MODULE_MAPPINGS)


def _no_reference_modules(what):
    raise NotImplementedError(f"ember has no {what} quantized modules yet (torch.ao.nn.quantized.reference / "
                              "torch.ao.nn.sparse)")


def get_default_static_quant_reference_module_mappings():
    _no_reference_modules("reference")


def get_embedding_static_quant_module_mappings():
    mapping = copy.deepcopy(DEFAULT_STATIC_QUANT_MODULE_MAPPINGS)
    mapping[nnqat.EmbeddingBag] = nnq.EmbeddingBag
    mapping[nnqat.Embedding] = nnq.Embedding
    return mapping


def get_default_static_sparse_quant_module_mappings():
    _no_reference_modules("sparse")


def get_static_quant_module_class(float_module_class, additional_static_quant_mapping=None, is_reference=False):
    """The quantized class of a float module class."""
    if is_reference:
        _no_reference_modules("reference")
    mappings = get_combined_dict(DEFAULT_STATIC_QUANT_MODULE_MAPPINGS, additional_static_quant_mapping or {})
    qclass = mappings.get(float_module_class)
    if qclass is None:
        raise AssertionError(f"Floating point module class {float_module_class} does not have a corresponding "
                             "quantized module class")
    return copy.deepcopy(qclass)


def get_dynamic_quant_module_class(float_module_class, additional_dynamic_quant_mapping=None):
    """The dynamically quantized class of a float module class."""
    mappings = get_combined_dict(DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS, additional_dynamic_quant_mapping or {})
    qclass = mappings.get(float_module_class)
    if qclass is None:
        raise AssertionError(f"Floating point module class {float_module_class} does not have a corresponding "
                             "quantized module class")
    return copy.deepcopy(qclass)


def get_default_qat_module_mappings():
    return copy.deepcopy(DEFAULT_QAT_MODULE_MAPPINGS)


def get_embedding_qat_module_mappings():
    mapping = copy.deepcopy(DEFAULT_QAT_MODULE_MAPPINGS)
    mapping[nn.EmbeddingBag] = nnqat.EmbeddingBag
    mapping[nn.Embedding] = nnqat.Embedding
    return mapping


def get_default_dynamic_quant_module_mappings():
    return DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS


def get_default_dynamic_sparse_quant_module_mappings():
    _no_reference_modules("sparse")


def get_default_qconfig_propagation_list():
    """Module types that get a qconfig (and observers) during ``prepare``."""
    return copy.deepcopy(set(DEFAULT_STATIC_QUANT_MODULE_MAPPINGS) | set(DEFAULT_QAT_MODULE_MAPPINGS)
                         | set(DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS) | _INCLUDE_QCONFIG_PROPAGATE_LIST)


def get_default_compare_output_module_list():
    """Module types whose outputs the numeric suite compares."""
    return copy.deepcopy(set(DEFAULT_STATIC_QUANT_MODULE_MAPPINGS.values()) | set(DEFAULT_QAT_MODULE_MAPPINGS.values())
                         | set(DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS.values())
                         | set(DEFAULT_STATIC_QUANT_MODULE_MAPPINGS) | set(DEFAULT_QAT_MODULE_MAPPINGS)
                         | set(DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS) | _INCLUDE_QCONFIG_PROPAGATE_LIST)


def get_default_float_to_quantized_operator_mappings():
    return copy.deepcopy(DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS)


def get_quantized_operator(float_op):
    """The quantized op of a float functional op."""
    quantized_op = DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS.get(float_op)
    if quantized_op is None:
        raise AssertionError(f"Operator {float_op} does not have corresponding quantized op")
    return quantized_op


def _get_special_act_post_process(module):
    return DEFAULT_MODULE_TO_ACT_POST_PROCESS.get(type(module))


def _has_special_act_post_process(module):
    return module.training and type(module) in DEFAULT_MODULE_TO_ACT_POST_PROCESS
