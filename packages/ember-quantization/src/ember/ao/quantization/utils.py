"""Helpers shared by the quantization flows: qscheme tests, quantization ranges, what a qconfig quantizes."""
import functools
import warnings
from typing import Any

import ember

from .quant_type import QuantType

__all__ = ["MatchAllNode", "Pattern", "get_combined_dict", "is_per_tensor", "is_per_channel", "getattr_from_fqn",
           "to_underlying_dtype", "get_qparam_dict", "get_swapped_custom_module_class", "activation_dtype",
           "weight_dtype", "activation_is_statically_quantized", "activation_is_dynamically_quantized",
           "activation_is_int8_quantized", "activation_is_int32_quantized", "weight_is_quantized",
           "weight_is_statically_quantized", "op_is_int8_dynamically_quantized", "get_qconfig_dtypes",
           "get_quant_type", "check_min_max_valid", "calculate_qmin_qmax", "has_no_children_ignoring_parametrizations",
           "validate_qmin_qmax", "determine_qparams"]

Pattern = Any  # a fusion pattern: a module type or function, or nested tuples of them


class MatchAllNode:
    """Matches any node in a fusion pattern (graph-mode quantization)."""


def _dtypes(*names):
    """The ember dtypes of these names that exist (ember has no float8 or uint16)."""
    return tuple(getattr(ember, n) for n in names if hasattr(ember, n))


# the dtypes a quantize/observer step may produce, by role
_INT8 = _dtypes("quint8", "qint8", "uint8", "int8")
_STATIC = _dtypes("quint8", "qint8", "quint4x2", "qint32", "uint8", "int8", "int16", "int32",
                  "float8_e5m2", "float8_e4m3fn")
_ACTIVATION = _dtypes("quint8", "qint8", "qint32", "float16", "uint8", "int8", "int16", "int32",
                      "float8_e5m2", "float8_e4m3fn")
_WEIGHT = _dtypes("quint8", "qint8", "float16", "quint4x2", "uint8", "int8", "int16", "int32",
                  "float8_e5m2", "float8_e4m3fn")


def get_combined_dict(default_dict, additional_dict):
    """A copy of ``default_dict`` updated with ``additional_dict``."""
    combined = default_dict.copy()
    combined.update(additional_dict)
    return combined


def is_per_tensor(qscheme):
    return qscheme == ember.per_tensor_affine or qscheme == ember.per_tensor_symmetric


def is_per_channel(qscheme):
    return qscheme in (ember.per_channel_affine, ember.per_channel_affine_float_qparams, ember.per_channel_symmetric)


def getattr_from_fqn(obj, fqn):
    """``obj.foo.bar.baz`` for ``fqn`` "foo.bar.baz"."""
    return functools.reduce(getattr, fqn.split("."), obj)


def to_underlying_dtype(qdtype):
    """The integer dtype that stores a quantized dtype's values (plain dtypes map to themselves)."""
    table = {ember.quint8: ember.uint8, ember.qint8: ember.int8, ember.qint32: ember.int32,
             ember.quint4x2: ember.uint8}
    for name in ("quint2x4",):
        if hasattr(ember, name):
            table[getattr(ember, name)] = ember.uint8
    for d in _dtypes("uint8", "int8", "uint16", "int16", "int32", "float8_e5m2", "float8_e4m3fn"):
        table[d] = d
    if qdtype not in table:
        raise AssertionError("Unsupported dtype: " + str(qdtype))
    return table[qdtype]


def get_qparam_dict(observer_or_fake_quant):
    """qscheme, dtype, scale, zero_point (and axis, quant_min/max) that an observer or fake-quantize module gives."""
    from .observer import PlaceholderObserver
    qscheme = getattr(observer_or_fake_quant, "qscheme", None)
    dtype = observer_or_fake_quant.dtype
    if not qscheme or isinstance(observer_or_fake_quant, PlaceholderObserver):
        return {"qscheme": None, "dtype": dtype}
    qparams = {"qscheme": qscheme, "dtype": dtype}
    if is_per_tensor(qscheme):
        qscheme = ember.per_tensor_affine
    elif is_per_channel(qscheme):
        if qscheme == ember.per_channel_symmetric:  # quantized tensors have no symmetric scheme
            qscheme = ember.per_channel_affine
        qparams["axis"] = observer_or_fake_quant.ch_axis
    else:
        raise RuntimeError(f"Unrecognized qscheme: {qscheme}")
    qparams["qscheme"] = qscheme
    qparams["scale"], qparams["zero_point"] = observer_or_fake_quant.calculate_qparams()
    for name in ("quant_min", "quant_max"):
        if hasattr(observer_or_fake_quant, name):
            qparams[name] = getattr(observer_or_fake_quant, name)
    return qparams


def get_swapped_custom_module_class(custom_module, custom_module_class_mapping, qconfig):
    """The observed or quantized class a custom module becomes, from the mapping for its qconfig's quant type."""
    class_mapping = custom_module_class_mapping.get(get_quant_type(qconfig), {})
    if type(custom_module) not in class_mapping:
        raise AssertionError("did not find corresponding observed "
                             f"module class for {type(custom_module)} in mapping: {class_mapping}")
    return class_mapping[type(custom_module)]


def activation_dtype(qconfig):
    if qconfig is None:
        raise AssertionError("qconfig must be provided to determine activation dtype")
    return qconfig.activation().dtype


def weight_dtype(qconfig):
    if qconfig is None:
        raise AssertionError("qconfig must be provided to determine weight dtype")
    return qconfig.weight().dtype


def activation_is_statically_quantized(qconfig):
    """Whether activations are quantized ahead of time (to an integer type or float16), not dynamically."""
    return activation_dtype(qconfig) in _ACTIVATION and not activation_is_dynamically_quantized(qconfig)


def activation_is_dynamically_quantized(qconfig):
    return get_qconfig_dtypes(qconfig)[2]


def activation_is_int8_quantized(qconfig):
    return activation_dtype(qconfig) in _INT8


def activation_is_int32_quantized(qconfig):
    return activation_dtype(qconfig) in (ember.qint32, ember.int32)


def weight_is_quantized(qconfig):
    return weight_dtype(qconfig) in _WEIGHT


def weight_is_statically_quantized(qconfig):
    return weight_dtype(qconfig) in _INT8


def op_is_int8_dynamically_quantized(qconfig):
    act, weight, dynamic = get_qconfig_dtypes(qconfig)
    return act in (ember.quint8, ember.uint8) and weight in (ember.qint8, ember.int8) and dynamic


def get_qconfig_dtypes(qconfig):
    """(activation dtype, weight dtype, whether activations are quantized dynamically) of a qconfig."""
    if qconfig is None:
        raise AssertionError("qconfig must be provided to extract dtypes")
    activation, weight = qconfig.activation(), qconfig.weight()
    return activation.dtype, weight.dtype, getattr(activation, "is_dynamic", False)


def get_quant_type(qconfig):
    """STATIC, DYNAMIC or WEIGHT_ONLY, from the dtypes of a qconfig's observers."""
    if qconfig is None:
        raise AssertionError("qconfig must be provided to determine quant type")
    activation, weight = qconfig.activation(), qconfig.weight()
    dynamic = getattr(activation, "is_dynamic", False)
    if weight.dtype in _STATIC:
        if dynamic:
            return QuantType.DYNAMIC
        return QuantType.STATIC if activation.dtype in _STATIC else QuantType.WEIGHT_ONLY
    if weight.dtype == ember.float16:
        if dynamic:
            return QuantType.DYNAMIC
        if activation.dtype == ember.float16:
            return QuantType.STATIC
    raise Exception(f"Unrecognized dtype combination in get_quant_type: activation({activation.dtype}),"
                    f"weight({weight.dtype})")


def check_min_max_valid(min_val, max_val):
    """False (with a warning) while an observer has seen nothing; AssertionError when a minimum exceeds its
    maximum."""
    if min_val.numel() == 0 or max_val.numel() == 0:
        warnings.warn("must run observer before calling calculate_qparams. Returning default values.", stacklevel=2)
        return False
    if min_val.dim() == 0 or max_val.dim() == 0:
        if min_val.item() == float("inf") and max_val.item() == float("-inf"):
            warnings.warn("must run observer before calling calculate_qparams. Returning default values.",
                          stacklevel=2)
            return False
        if min_val.item() > max_val.item():
            raise AssertionError(f"min {min_val} should be less than max {max_val}")
    elif bool((min_val > max_val).any()):
        raise AssertionError(f"min {min_val} should be less than max {max_val}")
    return True


def calculate_qmin_qmax(quant_min, quant_max, has_customized_qrange, dtype, reduce_range):
    """The integer range of an observer: the user's range (halved by ``reduce_range``), else the dtype's."""
    if has_customized_qrange:
        span = quant_max - quant_min + 1
        if dtype in (ember.qint8, ember.int8) and not 0 < span <= 256:
            raise AssertionError("quantization range should be positive and not exceed the maximum bit range (=256).")
        if dtype in (ember.qint32, ember.int32) and not 0 < span <= 2 ** 32:
            raise AssertionError(
                "quantization range should be positive and not exceed the maximum bit range (=4294967296).")
        if reduce_range:
            quant_min, quant_max = quant_min // 2, quant_max // 2
        return quant_min, quant_max
    if dtype in (ember.qint8, ember.int8):
        return (-64, 63) if reduce_range else (-128, 127)
    if dtype in (ember.quint8, ember.uint8):
        return (0, 127) if reduce_range else (0, 255)
    if dtype in (ember.qint32, ember.int32):
        return -(2 ** 31), 2 ** 31 - 1
    if dtype in _dtypes("uint16"):
        return 0, 2 ** 16 - 1
    if dtype == ember.int16:
        return -(2 ** 15), 2 ** 15 - 1
    return 0, 15


def validate_qmin_qmax(quant_min, quant_max):
    """A user's quantization range must hold 0 and be non-empty."""
    if not quant_min <= 0 <= quant_max:
        raise AssertionError("Used-specified quantization range must include 0.")
    if quant_min >= quant_max:
        raise AssertionError("qmin must be strictly less than qmax for user-specified quantization range.")


def determine_qparams(min_val, max_val, quant_min, quant_max, dtype, eps, has_customized_qrange,
                      qscheme=None):
    """Scale (float64) and zero point (int64) for the range [min_val, max_val], as an observer computes them."""
    from .observer import _qparams
    if qscheme is None:
        qscheme = ember.per_tensor_affine
    if not check_min_max_valid(min_val, max_val):
        return ember.tensor([1.0]), ember.tensor([0])
    scale, zero_point = _qparams(min_val, max_val, quant_min, quant_max, dtype, qscheme, eps, has_customized_qrange)
    return scale.to(ember.float64), zero_point.to(ember.int64)


def has_no_children_ignoring_parametrizations(module):
    """Whether a module is a leaf: no children, or only the ``parametrizations`` container."""
    children = module._modules
    if not children:
        return True
    return len(children) == 1 and "parametrizations" in children and \
        type(children["parametrizations"]).__name__ == "ModuleDict"


def _parent_name(target):
    """'foo.bar' -> ('foo', 'bar'); 'bar' -> ('', 'bar')."""
    parent, _, name = target.rpartition(".")
    return parent, name
