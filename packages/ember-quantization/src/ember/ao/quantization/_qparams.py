"""Quantization parameters as PyTorch's C++ side chooses them (``ChooseQuantizationParams`` of fbgemm/ATen):
used by the fused observer-fake-quantize op and by dynamic quantization, where the Python observers'
formula does not apply. float32 inputs, double intermediates, a float32 scale, exactly as there."""
import math

import numpy as np

_SMALL_SCALE = float(np.float32(6.1e-5))  # scales below fp16's normal range are raised to it


def _f32(v):
    return float(np.float32(v))


def choose_qparams(min_val, max_val, qmin, qmax, preserve_sparsity=False, reduce_range=False):
    """(scale, zero_point) mapping [min_val, max_val] (widened to hold 0) onto [qmin, qmax]; ``preserve_sparsity``
    makes it symmetric around the middle of the range. The scale is PyTorch's double (callers that store it in
    float32 round it)."""
    lo, hi = _f32(min_val), _f32(max_val)
    if not lo <= hi:
        raise RuntimeError("In ChooseQuantizationParams, min should be less than or equal to max")
    if reduce_range:
        qmin, qmax = int(qmin / 2), int(qmax / 2)  # (C++ division truncates toward zero)
    if lo < 0 < hi and preserve_sparsity:
        sym_min = -((qmax - qmin) // 2 + 1)
        sym_max = (qmax - qmin) // 2
        max_scale = max(abs(_f32(lo / sym_min)), abs(_f32(hi / sym_max)))
        lo, hi = _f32(max_scale * sym_min), _f32(max_scale * sym_max)
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if not qmin < qmax:
        raise RuntimeError("In ChooseQuantizationParams, qmin should be less than qmax")
    scale = (hi - lo) / (qmax - qmin)
    if _f32(scale) == 0.0 or math.isinf(np.float32(1.0) / np.float32(scale)):
        scale = 0.1
    if scale < _SMALL_SCALE:
        original = _f32(scale)
        scale = _SMALL_SCALE
        if lo == 0.0:
            hi = _f32(_SMALL_SCALE * (qmax - qmin))
        elif hi == 0.0:
            lo = _f32(-_SMALL_SCALE * (qmax - qmin))
        else:
            amplifier = _f32(np.float32(_SMALL_SCALE) / np.float32(original))
            lo, hi = _f32(np.float32(lo) * np.float32(amplifier)), _f32(np.float32(hi) * np.float32(amplifier))
    from_min, from_max = qmin - lo / scale, qmax - hi / scale
    # the zero point from the end whose terms are smaller carries less rounding error
    zero_point = from_min if abs(qmin) - abs(lo / scale) < abs(qmax) - abs(hi / scale) else from_max
    if lo < 0 < hi and preserve_sparsity:
        zero_point = (qmin + qmax) / 2
    if zero_point < qmin:
        zero_point = qmin
    elif zero_point > qmax:
        zero_point = qmax
    else:
        zero_point = int(np.rint(zero_point))
    return scale, int(zero_point)
