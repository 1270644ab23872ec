"""QuantType: the kinds of quantization a qconfig asks for."""
import enum

__all__ = ["QuantType"]


class QuantType(enum.IntEnum):
    DYNAMIC = 0
    STATIC = 1
    QAT = 2
    WEIGHT_ONLY = 3


_NAMES = {QuantType.STATIC: "static", QuantType.DYNAMIC: "dynamic", QuantType.QAT: "qat",
          QuantType.WEIGHT_ONLY: "weight_only"}


def _get_quant_type_to_str(quant_type):
    return _NAMES[quant_type]


def _quant_type_from_str(name):
    for quant_type, text in _NAMES.items():
        if text == name:
            return quant_type
    raise ValueError(f"Unknown QuantType name '{name}'")
