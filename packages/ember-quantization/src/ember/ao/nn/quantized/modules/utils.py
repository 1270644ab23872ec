"""Helpers of the quantized modules: quantizing a weight from its observer, the base of modules with weights, and
a repr that leaves out the packed parameters."""
import abc

import ember
import ember.nn as nn
from ember.nn.modules.module import _addindent

__all__ = ["WeightedQuantizedModule"]


class WeightedQuantizedModule(nn.Module, metaclass=abc.ABCMeta):
    """Base of quantized modules with weights (they can also be made from reference quantized modules)."""

    @classmethod
    @abc.abstractmethod
    def from_reference(cls, ref_module, output_scale, output_zero_point):
        raise NotImplementedError


def _get_weight_observer(observer):
    return getattr(observer, "activation_post_process", observer)  # (a fake-quantize module's observer)


def _needs_weight_clamping(observer, dtype):
    observer = _get_weight_observer(observer)
    if dtype in (ember.qint8, ember.quint8, ember.qint32):
        return observer.quant_min > dtype.qmin or observer.quant_max < dtype.qmax
    return False


def _clamp_weights(qweight, observer, scale, zp):
    """``qweight`` with its integers clamped to the observer's narrower range (e.g. -127..127)."""
    if not _needs_weight_clamping(observer, qweight.dtype):
        return qweight
    observer = _get_weight_observer(observer)
    ints = ember.clamp(qweight.int_repr(), observer.quant_min, observer.quant_max)
    if observer.qscheme in (ember.per_tensor_symmetric, ember.per_tensor_affine):
        return ember._make_per_tensor_quantized_tensor(ints, scale.item(), zp.item())
    if observer.qscheme in (ember.per_channel_symmetric, ember.per_channel_affine,
                            ember.per_channel_affine_float_qparams):
        return ember._make_per_channel_quantized_tensor(ints, scale, zp, axis=observer.ch_axis)
    raise ValueError("Unexpected qscheme " + str(observer.qscheme))


def _quantize_weight(float_wt, observer):
    """A float weight quantized with its observer's qparams (qint8, or the observer's dtype for float qparams)."""
    scale, zp = observer.calculate_qparams()
    if observer.qscheme in (ember.per_tensor_symmetric, ember.per_tensor_affine):
        qweight = ember.quantize_per_tensor(float_wt, float(scale), int(zp), ember.qint8)
    elif observer.qscheme in (ember.per_channel_symmetric, ember.per_channel_affine):
        qweight = ember.quantize_per_channel(float_wt, scale.to(ember.double), zp.to(ember.int64), observer.ch_axis,
                                             ember.qint8)
    elif observer.qscheme == ember.per_channel_affine_float_qparams:
        qweight = ember.quantize_per_channel(float_wt, scale.to(ember.float), zp.to(ember.float), observer.ch_axis,
                                             observer.dtype)
    else:
        raise ValueError("Unexpected qscheme " + str(observer.qscheme))
    return _clamp_weights(qweight, observer, scale, zp)


def _to_tuple(v, n):
    """``v`` (a number, or a sequence of one or ``n`` numbers) as ``n`` numbers."""
    v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    return v * n if len(v) == 1 else v


def _hide_packed_params_repr(self, params):
    """The module's repr without its children of type ``params`` (the packed weights)."""
    lines = self.extra_repr().split("\n") if self.extra_repr() else []
    children = [f"({key}): " + _addindent(repr(m), 2) for key, m in self._modules.items()
                if not isinstance(m, params)]
    if not lines and not children:
        return self._get_name() + "()"
    if len(lines) == 1 and not children:
        return self._get_name() + "(" + lines[0] + ")"
    return self._get_name() + "(\n  " + "\n  ".join(lines + children) + "\n)"
