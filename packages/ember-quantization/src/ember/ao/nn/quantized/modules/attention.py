"""The quantized MultiheadAttention: a converted quantizable one (quantized projections and output, float
attention in between), made from an observed one by ``convert`` through the default custom module mapping."""
import ember
from ember.ao.nn.quantizable.modules import activation as _quantizable

__all__ = ["MultiheadAttention"]


class MultiheadAttention(_quantizable.MultiheadAttention):
    """A quantized multi-head attention: quantized query, key and value in, quantized output; ``bias_k`` and
    ``bias_v`` (with ``add_bias_kv``) quantized to quint8 from their own ranges."""

    _FLOAT_MODULE = _quantizable.MultiheadAttention

    def _get_name(self):
        return "QuantizedMultiheadAttention"

    @classmethod
    def from_float(cls, other):
        raise NotImplementedError("It looks like you are trying to convert a non-observed MHA module. Please, see the "
                                  "examples on quantizable MHAs.")

    @classmethod
    def from_observed(cls, other):
        """The quantized form of an observed (prepared and calibrated) quantizable attention."""
        from ember.ao.quantization import convert
        converted = convert(other, mapping=None, inplace=False, remove_qconfig=True)
        converted.__class__ = cls
        # (PyTorch quantizes bias_v with bias_k's parameters, clamping it to bias_k's range: each has its own here)
        for name in ("bias_k", "bias_v"):
            if getattr(converted, name) is not None:
                bias = converted._parameters.pop(name).detach()
                scale, zero_point = ember._choose_qparams_per_tensor(bias, reduce_range=False)
                setattr(converted, name, ember.quantize_per_tensor(bias, scale, zero_point, ember.quint8))
        del converted.in_proj_weight, converted.in_proj_bias  # (the projections' weights are in linear_Q/K/V)
        return converted
