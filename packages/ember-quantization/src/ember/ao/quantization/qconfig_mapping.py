"""QConfigMapping: qconfigs by global default, object type, module-name regex, module name, and (name, type,
index); the default mappings of each engine."""
from collections import OrderedDict

import ember
import ember.nn as nn
import ember.nn.functional as F

from .fake_quantize import FixedQParamsFakeQuantize, default_weight_fake_quant
from .observer import (
    default_fixed_qparams_range_0to1_observer,
    default_fixed_qparams_range_neg1to1_observer,
    default_placeholder_observer,
    default_weight_observer,
)
from .qconfig import (
    QConfig,
    default_quint8_weight_qconfig,
    default_reuse_input_qconfig,
    default_symmetric_qnnpack_qat_qconfig,
    default_symmetric_qnnpack_qconfig,
    get_default_qat_qconfig,
    get_default_qconfig,
)

__all__ = ["get_default_qconfig_mapping", "get_default_qat_qconfig_mapping", "QConfigMapping"]

_GLOBAL_DICT_KEY = ""
_OBJECT_TYPE_DICT_KEY = "object_type"
_MODULE_NAME_REGEX_DICT_KEY = "module_name_regex"
_MODULE_NAME_DICT_KEY = "module_name"
_MODULE_NAME_OBJECT_TYPE_ORDER_DICT_KEY = "module_name_object_type_order"

# ops whose output range is known: their outputs get fixed qparams
_FIXED_QPARAMS_OP_TO_OBSERVER = {
    nn.Hardsigmoid: default_fixed_qparams_range_0to1_observer,
    F.hardsigmoid: default_fixed_qparams_range_0to1_observer,
    "hardsigmoid": default_fixed_qparams_range_0to1_observer,
    "hardsigmoid_": default_fixed_qparams_range_0to1_observer,
    nn.Sigmoid: default_fixed_qparams_range_0to1_observer,
    ember.sigmoid: default_fixed_qparams_range_0to1_observer,
    "sigmoid": default_fixed_qparams_range_0to1_observer,
    "sigmoid_": default_fixed_qparams_range_0to1_observer,
    nn.Softmax: default_fixed_qparams_range_0to1_observer,
    nn.Tanh: default_fixed_qparams_range_neg1to1_observer,
    ember.tanh: default_fixed_qparams_range_neg1to1_observer,
    "tanh": default_fixed_qparams_range_neg1to1_observer,
    "tanh_": default_fixed_qparams_range_neg1to1_observer,
}


def _get_default_qconfig_mapping(is_qat, backend, version):
    qconfig = get_default_qat_qconfig(backend, version) if is_qat else get_default_qconfig(backend, version)
    default_weight = default_weight_fake_quant if is_qat else default_weight_observer
    # x86/fbgemm transposed convolutions take per-tensor weights
    transpose = QConfig(activation=qconfig.activation, weight=default_weight) \
        if backend in ("fbgemm", "x86") else qconfig
    layernorm = QConfig(activation=qconfig.activation, weight=default_placeholder_observer)
    mapping = QConfigMapping().set_global(qconfig).set_object_type("reshape", default_reuse_input_qconfig)
    for op in (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d, F.conv_transpose1d, F.conv_transpose2d,
               F.conv_transpose3d):
        mapping.set_object_type(op, transpose)
    mapping.set_object_type(F.layer_norm, layernorm).set_object_type(nn.LayerNorm, layernorm)
    mapping.set_object_type(nn.PReLU, default_quint8_weight_qconfig)
    by_observer = {}
    for op, observer in _FIXED_QPARAMS_OP_TO_OBSERVER.items():
        if observer not in by_observer:
            activation = FixedQParamsFakeQuantize.with_args(observer=observer) if is_qat else observer
            by_observer[observer] = QConfig(activation=activation, weight=default_weight)
        mapping.set_object_type(op, by_observer[observer])
    return mapping


def get_default_qconfig_mapping(backend="x86", version=0):
    """The default QConfigMapping of post-training quantization for an engine."""
    return _get_default_qconfig_mapping(False, backend, version)


def get_default_qat_qconfig_mapping(backend="x86", version=1):
    """The default QConfigMapping of quantization-aware training for an engine."""
    return _get_default_qconfig_mapping(True, backend, version)


def _get_default_qconfig_mapping_with_default_qconfig(is_qat, backend, default_qconfig):
    """The engine's default mapping with ``default_qconfig`` everywhere but the fixed-qparams ops."""
    mapping = get_default_qat_qconfig_mapping(backend) if is_qat else get_default_qconfig_mapping(backend)
    mapping.set_global(default_qconfig)
    for pattern in mapping.object_type_qconfigs:
        if pattern not in _FIXED_QPARAMS_OP_TO_OBSERVER:
            mapping.set_object_type(pattern, default_qconfig)
    return mapping


def _get_symmetric_qnnpack_qconfig_mapping():
    return _get_default_qconfig_mapping_with_default_qconfig(False, "qnnpack", default_symmetric_qnnpack_qconfig)


def _get_symmetric_qnnpack_qat_qconfig_mapping():
    return _get_default_qconfig_mapping_with_default_qconfig(True, "qnnpack", default_symmetric_qnnpack_qat_qconfig)


_QCONFIG_STYLE_ORDER = ["global_qconfig", "object_type_qconfigs", "module_name_regex_qconfigs",
                        "module_name_qconfigs", "module_name_object_type_order_qconfigs"]


class QConfigMapping:
    """Qconfigs for the parts of a model, by increasing priority: ``set_global``, ``set_object_type`` (module
    type, function or method name), ``set_module_name_regex`` (first registered match wins),
    ``set_module_name``, ``set_module_name_object_type_order``. Setters return the mapping, so they chain."""

    def __init__(self):
        self.global_qconfig = None
        self.object_type_qconfigs = OrderedDict()
        self.module_name_regex_qconfigs = OrderedDict()
        self.module_name_qconfigs = OrderedDict()
        self.module_name_object_type_order_qconfigs = OrderedDict()

    def set_global(self, global_qconfig):
        self.global_qconfig = global_qconfig
        return self

    def set_object_type(self, object_type, qconfig):
        self.object_type_qconfigs[object_type] = qconfig
        return self

    def set_module_name_regex(self, module_name_regex, qconfig):
        self.module_name_regex_qconfigs[module_name_regex] = qconfig
        return self

    def set_module_name(self, module_name, qconfig):
        self.module_name_qconfigs[module_name] = qconfig
        return self

    def set_module_name_object_type_order(self, module_name, object_type, index, qconfig):
        self.module_name_object_type_order_qconfigs[(module_name, object_type, index)] = qconfig
        return self

    def __repr__(self):
        out = self.__class__.__name__ + " ("
        for style in _QCONFIG_STYLE_ORDER:
            out += f"\n {style}"
            qconfigs = getattr(self, style)
            if isinstance(qconfigs, OrderedDict) and qconfigs:
                out += "".join(f"\n  {key}: {qconfig}" for key, qconfig in qconfigs.items())
            else:
                out += f"\n  {qconfigs}"
        return out + "\n)"

    def to_dict(self):
        """The mapping as the old qconfig_dict: {"": global, "object_type": [(type, qconfig)], ...}."""
        return {
            _GLOBAL_DICT_KEY: self.global_qconfig,
            _OBJECT_TYPE_DICT_KEY: list(self.object_type_qconfigs.items()),
            _MODULE_NAME_REGEX_DICT_KEY: list(self.module_name_regex_qconfigs.items()),
            _MODULE_NAME_DICT_KEY: list(self.module_name_qconfigs.items()),
            _MODULE_NAME_OBJECT_TYPE_ORDER_DICT_KEY: [(*k, v) for k, v in
                                                      self.module_name_object_type_order_qconfigs.items()],
        }

    @classmethod
    def from_dict(cls, qconfig_dict):
        """A mapping from a qconfig_dict (all keys optional)."""
        conf = cls()
        if _GLOBAL_DICT_KEY in qconfig_dict:
            conf.set_global(qconfig_dict[_GLOBAL_DICT_KEY])
        for object_type, qconfig in qconfig_dict.get(_OBJECT_TYPE_DICT_KEY, []):
            conf.set_object_type(object_type, qconfig)
        for regex, qconfig in qconfig_dict.get(_MODULE_NAME_REGEX_DICT_KEY, []):
            conf.set_module_name_regex(regex, qconfig)
        for name, qconfig in qconfig_dict.get(_MODULE_NAME_DICT_KEY, []):
            conf.set_module_name(name, qconfig)
        for name, object_type, index, qconfig in qconfig_dict.get(_MODULE_NAME_OBJECT_TYPE_ORDER_DICT_KEY, []):
            conf.set_module_name_object_type_order(name, object_type, index, qconfig)
        return conf
