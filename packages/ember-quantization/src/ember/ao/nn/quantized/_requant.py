"""Requantization of exact integer sums (linear layers, convolutions) to a quantized output, per engine.

x86, fbgemm and onednn add the float bias divided by ``input_scale * weight_scale`` to the float32 sum, then
scale by ``input_scale * weight_scale / output_scale`` (all float32 operations); qnnpack first quantizes the bias
to int32 with scale ``input_scale * weight_scale`` and adds it to the integer sum. Both round half to even and
add the output zero point, clamped (a fused ReLU clamps at the zero point). Float outputs (dynamic quantization)
are ``fma(sum, input_scale * weight_scale, bias)`` on x86/fbgemm/onednn, ``sum * scale + bias`` on qnnpack.
"""
import numpy as np

import ember

_f32 = np.float32


def engine():
    return ember.backends.quantized.engine


def _channel_shape(ndim, axis):
    shape = [1] * ndim
    shape[axis] = -1
    return shape


def act_times_weight_scale(x_scale, w_scales):
    """float32 ``input_scale * weight_scale`` per output channel."""
    return _f32(x_scale) * np.asarray(w_scales, _f32)


def _qnnpack_bias(bias, x_scale, w_scales):
    """The bias quantized to int32 with scales ``input_scale * weight_scale`` (as qnnpack packs it)."""
    scales = np.asarray(w_scales, np.float64) * x_scale
    if np.all(scales == scales[0]):
        q = ember.quantize_per_tensor(bias.detach(), float(scales[0]), 0, ember.qint32)
    else:
        q = ember.quantize_per_channel(bias.detach(), ember.tensor(scales), ember.zeros(len(scales),
                                       dtype=ember.int64), 0, ember.qint32)
    return q.int_repr().numpy().astype(np.float64)


def requantize(acc, x_scale, w_scales, bias, out_scale, out_zero_point, dtype, relu=False, axis=-1):
    """Integers (``dtype``'s) of exact sums ``acc`` (floats; output channels along ``axis``) for an output of
    ``out_scale``/``out_zero_point``."""
    shape = _channel_shape(acc.ndim, axis)
    ats = act_times_weight_scale(x_scale, w_scales)
    multiplier = (ats / _f32(out_scale)).reshape(shape)
    if engine() == "qnnpack":
        if bias is not None:
            acc = acc + _qnnpack_bias(bias, x_scale, w_scales).reshape(shape)  # (an int32 sum, then float32)
        v = acc.astype(_f32)
    else:
        v = acc.astype(_f32, copy=False)  # (a float32 accumulator is used in place)
        if bias is not None:
            v += (bias.detach().numpy().astype(_f32) / ats).reshape(shape)
    v *= multiplier
    np.rint(v, out=v)
    v += _f32(out_zero_point)
    np.clip(v, out_zero_point if relu else dtype.qmin, dtype.qmax, out=v)
    return v.astype(dtype.np)


def to_float(acc, x_scale, w_scales, bias, axis=-1):
    """Float32 outputs of exact sums ``acc`` of dynamically quantized inputs (scale ``x_scale``)."""
    shape = _channel_shape(acc.ndim, axis)
    ats = act_times_weight_scale(x_scale, w_scales).reshape(shape)
    if engine() == "qnnpack":
        y = acc.astype(_f32) * ats
        if bias is not None:
            y += bias.detach().numpy().astype(_f32).reshape(shape)
        return y
    # the sum as float32 times a float32 scale is exact in float64; adding the bias there, then rounding: the fma
    y = acc.astype(_f32, copy=False).astype(np.float64)
    y *= ats
    if bias is not None:
        y += bias.detach().numpy().astype(np.float64).reshape(shape)
    return y.astype(_f32)
