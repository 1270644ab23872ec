"""Packed weights of quantized linear layers and convolutions (PyTorch's ``LinearPackedParamsBase`` and
``ConvPackedParamsBase``): the quantized weight and float bias as given, plus what the kernels need of them
(the weight's integers as floats, its scales and zero points per output channel)."""
import numpy as np

import ember
from ember import _serialization

from . import _intmath, _qarray


def _weight_params(weight, channel_axis=0):
    """(scales, zero_points) per slice along ``channel_axis`` of a quantized weight."""
    q = _qarray.quantizer(weight)
    n = weight.shape[channel_axis]
    if q.per_channel:
        return np.asarray(q.scales, np.float64), np.asarray(q.zero_points, np.int64)
    return np.full(n, q.scale), np.full(n, q.zero_point, np.int64)


def _check_weight(weight, prepack, axis=0):
    """PyTorch's errors for a weight that is not qint8 (``prepack``: the op that packs it); a per-channel weight
    must have its scales along ``axis`` (the output channels), if given."""
    if not getattr(weight, "is_quantized", False):
        raise _qarray.not_implemented(f"quantized::{prepack}")
    if weight.dtype != ember.qint8:
        raise RuntimeError(f"expected scalar type QInt8 but found {weight.dtype.torch_name}")
    q = _qarray.quantizer(weight)
    if q.per_channel and axis is not None and q.axis != axis:  # (PyTorch reads them as the outputs' anyway)
        raise RuntimeError(f"{prepack}: a per-channel quantized weight needs its scales along the output channels "
                           f"(axis {axis}), got axis {q.axis}")


def _check_bias(bias, n):
    if bias is not None:
        if bias.dim() != 1 or bias.shape[0] != n:
            raise RuntimeError(f"bias should be a vector (1D Tensor) of size {n}")
        if bias.dtype != ember.float32:
            raise RuntimeError("Expected bias data type Float but got " + str(bias.dtype).split(".")[-1].title())


class LinearWeight:
    """The packed weight of a quantized linear layer: qint8 (out, in), per tensor or per output channel."""

    def __init__(self, weight, bias):
        _check_weight(weight, "linear_prepack")
        if weight.dim() != 2:
            raise RuntimeError("The weight tensor for quantized::linear_prepack (fbgemm) should be 2-dimensional.")
        _check_bias(bias, weight.shape[0])
        self.weight, self.bias = weight, bias
        self.scales, self.zero_points = _weight_params(weight)
        self.int_weight = _intmath.IntWeight(_qarray.ints(weight), self.zero_points)

    def unpack(self):
        return self.weight, self.bias

    def __getstate__(self):  # (PyTorch's layout: ((weight, bias), extra))
        return (self.weight, self.bias), None

    def __setstate__(self, state):
        self.__init__(*state[0])


class LinearWeightFp16:
    """The packed weight of a float16 dynamic linear layer: the weight rounded to float16 (saturated at its
    largest value), multiplied in float32."""

    def __init__(self, weight, bias):
        if ember.backends.quantized.engine == "qnnpack":
            raise RuntimeError("quantized::linear_prepack_fp16 is currently not supported by QNNPACK")
        _check_bias(bias, weight.shape[0])
        w = weight.detach().numpy().astype(np.float32)
        fp16_max = float(np.finfo(np.float16).max)
        if np.any(np.abs(w) > fp16_max):
            import warnings
            warnings.warn("FOUND weight out of range ", stacklevel=3)
        self.w16 = np.clip(w, -fp16_max, fp16_max).astype(np.float16)
        self.rows = self.w16.astype(np.float32)
        self.bias = bias

    def unpack(self):
        return ember.from_numpy(self.rows.copy()), self.bias

    def __getstate__(self):
        return self.unpack(), None

    def __setstate__(self, state):
        self.__init__(*state[0])


def _linear_weight(payload):
    """A packed linear weight from PyTorch's pickled state (weight, bias): qint8 or float16 by the weight."""
    weight, bias = payload
    return (LinearWeight if weight.is_quantized else LinearWeightFp16)(weight, bias)


# in checkpoints (dynamic RNNs' state_dicts hold them) as PyTorch's TorchScript class
_serialization.register_script_class("__torch__.torch.classes.quantized.LinearPackedParamsBase",
                                     (LinearWeight, LinearWeightFp16), _linear_weight)


class ConvWeight:
    """The packed weight of a quantized convolution: qint8 (out, in / groups, *kernel), or (in, out / groups,
    *kernel) when ``transposed``, with the convolution's geometry."""

    def __init__(self, weight, bias, stride, padding, output_padding, dilation, groups, transposed):
        n = len(stride)
        _check_weight(weight, f"conv_transpose{n}d_prepack" if transposed else f"conv{n}d_prepack",
                      None if transposed else 0)  # (transposed: checked below, per engine)
        if weight.dim() != n + 2:
            raise RuntimeError(f"Weights are expected to have {n + 2} dimensions")
        out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
        _check_bias(bias, out_channels)
        self.weight, self.bias = weight, bias
        self.stride, self.padding, self.output_padding = tuple(stride), tuple(padding), tuple(output_padding)
        self.dilation, self.groups, self.transposed = tuple(dilation), groups, transposed
        self.kernel = tuple(weight.shape[2:])
        w_int = _qarray.ints(weight)
        if not transposed:
            self.scales, self.zero_points = _weight_params(weight)
            self.int_weight = _intmath.IntWeight(w_int, self.zero_points, groups=groups)
            return
        q = _qarray.quantizer(weight)
        if q.per_channel:  # (qnnpack alone takes them: one scale per output channel, along dim 1)
            if ember.backends.quantized.engine != "qnnpack":
                raise RuntimeError("Per Channel Quantization is currently disabled for transposed conv")
            if q.axis != 1 or len(q.scales) != out_channels:
                raise RuntimeError(f"length of scales must equal to channel, expected {out_channels} got, "
                                   f"{len(q.scales)}")
        scales, zero_points = _weight_params(weight, 1 if q.per_channel else 0)
        self.scales = np.resize(scales, out_channels)
        self.zero_points = np.resize(zero_points, out_channels)
        zp = self.zero_points[:weight.shape[1]].reshape((1, -1) + (1,) * n)
        self.int_weight = _intmath.IntWeight(w_int, zp, transposed=True)

    def unpack(self):
        return self.weight, self.bias

    def __getstate__(self):
        return (self.weight, self.bias, self.stride, self.padding, self.output_padding, self.dilation, self.groups,
                self.transposed)

    def __setstate__(self, state):
        self.__init__(*state)
