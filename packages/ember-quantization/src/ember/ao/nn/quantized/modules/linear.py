"""Quantized Linear and its packed parameters."""
from collections.abc import Iterable

import ember
import ember.nn as nn
from ember.nn.utils.fusion import fuse_linear_bn_weights
from ember.ops import quantized as qops

from .utils import WeightedQuantizedModule, _hide_packed_params_repr, _quantize_weight

__all__ = ["LinearPackedParams", "Linear"]


def _empty_qint8(shape):
    return ember._make_per_tensor_quantized_tensor(ember.zeros(shape, dtype=ember.int8), 1.0, 0)


class LinearPackedParams(nn.Module):
    """Holds a linear layer's packed weight and bias (qint8, or float16 for dynamic layers); in a state_dict as
    ``dtype`` and ``_packed_params`` (the (weight, bias) tuple), as PyTorch saves them."""

    _version = 3

    def __init__(self, dtype=ember.qint8):
        super().__init__()
        self.dtype = dtype
        if dtype == ember.qint8:
            self.set_weight_bias(_empty_qint8((1, 1)), None)
        elif dtype == ember.float16:
            self.set_weight_bias(ember.zeros(1, 1), None)

    def set_weight_bias(self, weight, bias):
        if self.dtype == ember.qint8:
            self._packed_params = qops.LinearPackedParams(weight, bias)
        elif self.dtype == ember.float16:
            self._packed_params = qops.LinearPackedParamsFp16(weight, bias)
        else:
            raise RuntimeError("Unsupported dtype on dynamic quantized linear!")

    def _weight_bias(self):
        return self._packed_params.unpack()

    def forward(self, x):
        return x

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "dtype"] = self.dtype
        destination[prefix + "_packed_params"] = self._weight_bias()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs):
        version = local_metadata.get("version")
        self.dtype = ember.qint8 if version is None or version < 2 else state_dict.pop(prefix + "dtype")
        if version is None or version < 3:
            self.set_weight_bias(state_dict.pop(prefix + "weight"), state_dict.pop(prefix + "bias"))
        else:
            self.set_weight_bias(*state_dict.pop(prefix + "_packed_params"))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, *args, **kwargs)

    def __repr__(self):
        return repr(self._weight_bias())


class Linear(WeightedQuantizedModule):
    """A linear layer on quantized tensors: quint8 input and output (``scale``, ``zero_point``), qint8 weight (per
    tensor or per output channel), float bias; the integer sums are requantized as the engine does."""

    _version = 3
    _FLOAT_MODULE = (nn.Linear, nn.modules.linear.NonDynamicallyQuantizableLinear)

    def __init__(self, in_features, out_features, bias_=True, dtype=ember.qint8):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bias = ember.zeros(out_features, dtype=ember.float) if bias_ else None
        if dtype == ember.qint8:
            weight = _empty_qint8((out_features, in_features))
        elif dtype == ember.float16:
            weight = ember.zeros(out_features, in_features)
        else:
            raise RuntimeError("Unsupported dtype specified for quantized Linear!")
        self._packed_params = LinearPackedParams(dtype)
        self._packed_params.set_weight_bias(weight, bias)
        self.scale = 1.0
        self.zero_point = 0

    def _get_name(self):
        return "QuantizedLinear"

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, scale={self.scale}, "
                f"zero_point={self.zero_point}, qscheme={self.weight().qscheme()}")

    def __repr__(self):
        return _hide_packed_params_repr(self, LinearPackedParams)

    def forward(self, x):
        return qops.linear(x, self._packed_params._packed_params, self.scale, self.zero_point)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "scale"] = ember.tensor(self.scale)
        destination[prefix + "zero_point"] = ember.tensor(self.zero_point)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs):
        self.scale = float(state_dict.pop(prefix + "scale"))
        self.zero_point = int(state_dict.pop(prefix + "zero_point"))
        if local_metadata.get("version") in (None, 1):  # weight and bias were saved beside the packed params
            state_dict[prefix + "_packed_params.weight"] = state_dict.pop(prefix + "weight")
            state_dict[prefix + "_packed_params.bias"] = state_dict.pop(prefix + "bias")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, *args, **kwargs)

    def _weight_bias(self):
        return self._packed_params._weight_bias()

    def weight(self):
        return self._weight_bias()[0]

    def bias(self):
        return self._weight_bias()[1]

    def set_weight_bias(self, w, b):
        self._packed_params.set_weight_bias(w, b)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The quantized layer of an observed float (or QAT) linear layer: weight quantized by its observer,
        output qparams from the activation observer."""
        from ember.ao.nn import intrinsic as nni
        from ember.ao.nn.intrinsic import qat as nniqat
        if hasattr(mod, "weight_fake_quant"):
            if type(mod) is nniqat.LinearBn1d:
                mod.weight, mod.bias = fuse_linear_bn_weights(mod.weight, mod.bias, mod.bn.running_mean,
                                                              mod.bn.running_var, mod.bn.eps, mod.bn.weight,
                                                              mod.bn.bias)
            weight_post_process = mod.weight_fake_quant
            activation_post_process = mod.activation_post_process
        else:
            floats = cls._FLOAT_MODULE if isinstance(cls._FLOAT_MODULE, Iterable) else [cls._FLOAT_MODULE]
            names = ", ".join(f.__name__ for f in floats)
            if type(mod) not in floats:
                raise AssertionError(f"nnq.{cls.__name__}.from_float only works for {names}, but got: {type(mod)}")
            if not hasattr(mod, "qconfig"):
                raise AssertionError("Input float module must have qconfig defined")
            activation_post_process = mod.activation_post_process
            if type(mod) is nni.LinearReLU:
                mod = mod[0]
            weight_post_process = mod.qconfig.weight()
        if not use_precomputed_fake_quant:
            weight_post_process(mod.weight)
        dtype = weight_post_process.dtype
        act_scale, act_zp = activation_post_process.calculate_qparams()
        if dtype != ember.qint8:
            raise AssertionError(f"Weight observer must have dtype torch.qint8, got {dtype}")
        qweight = _quantize_weight(mod.weight.float(), weight_post_process)
        qlinear = cls(mod.in_features, mod.out_features, dtype=dtype)
        qlinear.set_weight_bias(qweight, mod.bias)
        qlinear.scale, qlinear.zero_point = float(act_scale), int(act_zp)
        return qlinear

    @classmethod
    def from_reference(cls, ref_qlinear, output_scale, output_zero_point):
        qlinear = cls(ref_qlinear.in_features, ref_qlinear.out_features)
        qlinear.set_weight_bias(ref_qlinear.get_quantized_weight(), ref_qlinear.bias)
        qlinear.scale, qlinear.zero_point = float(output_scale), int(output_zero_point)
        return qlinear
