"""Dynamically quantized Linear: weights quantized ahead of time (qint8, or float16), activations quantized at
each call from their own range."""
import ember
import ember.ao.nn.quantized as nnq
import ember.nn as nn
from ember.ao.nn.quantized.modules.utils import _quantize_weight
from ember.ops import quantized as qops

__all__ = ["Linear"]


def _dynamic_weight_observer(mod):
    """The weight observer of ``mod``'s qconfig (default_dynamic_qconfig's when it has none)."""
    if mod.qconfig is not None and mod.qconfig.weight is not None:
        return mod.qconfig.weight()
    from ember.ao.quantization.qconfig import default_dynamic_qconfig
    return default_dynamic_qconfig.weight()


class Linear(nnq.Linear):
    """A linear layer with float32 input and output: int8 weights times activations quantized per call (reduced
    to 0..127 except on qnnpack), or float16 weights."""

    _version = 4

    def __init__(self, in_features, out_features, bias_=True, dtype=ember.qint8):
        super().__init__(in_features, out_features, bias_, dtype=dtype)
        self.version = 4

    def forward(self, x):
        reduce_range = self.version is not None and self.version >= 4
        return qops.linear_dynamic(x, self._packed_params._packed_params, reduce_range).to(x.dtype)

    def _get_name(self):
        return "DynamicQuantizedLinear"

    def extra_repr(self):
        s = f"in_features={self.in_features}, out_features={self.out_features}, dtype={self._packed_params.dtype}"
        if self._packed_params.dtype == ember.qint8:
            s += f", qscheme={self.weight().qscheme()}"
        return s

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs):
        self.version = local_metadata.get("version")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, *args, **kwargs)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        from ember.ao.nn import intrinsic as nni
        from ember.ao.nn.qat import dynamic as nnqatd
        floats = [nn.Linear, nn.modules.linear.NonDynamicallyQuantizableLinear, nni.LinearReLU, nnqatd.Linear]
        if type(mod) not in floats:
            raise AssertionError("nn.quantized.dynamic.Linear.from_float only works for one of"
                                 + str([f.__name__ for f in floats]) + f", got {type(mod)}")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        if type(mod) is nni.LinearReLU:
            mod = mod[0]
        observer = _dynamic_weight_observer(mod)
        dtype = observer.dtype
        if dtype not in (ember.qint8, ember.float16):
            raise AssertionError("The only supported dtypes for dynamic quantized linear are qint8 and float16, got: "
                                 f"{dtype}")
        observer(mod.weight)
        qweight = _quantize_weight(mod.weight.float(), observer) if dtype == ember.qint8 else mod.weight.float()
        qlinear = cls(mod.in_features, mod.out_features, dtype=dtype)
        qlinear.set_weight_bias(qweight, mod.bias)
        return qlinear

    @classmethod
    def from_reference(cls, ref_qlinear):
        qlinear = cls(ref_qlinear.in_features, ref_qlinear.out_features, dtype=ref_qlinear.weight_dtype)
        qlinear.set_weight_bias(ref_qlinear.get_quantized_weight(), ref_qlinear.bias)
        return qlinear
