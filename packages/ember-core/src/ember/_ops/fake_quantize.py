"""Fake quantization (quantize, then dequantize, in floating point) with PyTorch's straight-through gradients.

PyTorch's numerics: the per-tensor forward rounds ``x * (1/scale)`` (in the input's precision, ``1/scale`` in float32)
half to even and adds the zero point after rounding; integer zero points per channel do the same, float zero points
round ``x * (1/scale) + zero_point``. The gradient passes where the rounded value lies in [quant_min, quant_max]
(the cached mask) and is zero elsewhere. The learnable form also gives gradients of the scale and zero point.
"""
import numpy as np

from .. import _dtype as D
from .._registry import TORCH_NAME, op
from .._tensor import Tensor

_f32 = np.float32


def _check_range(quant_min, quant_max, zero_points):
    if quant_min > quant_max:
        raise RuntimeError("`quant_min` should be less than or         equal to `quant_max`.")
    zp = np.asarray(zero_points)
    if zp.size and (zp.min() < quant_min or zp.max() > quant_max):
        raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")


def _check_input(xp, x, name):
    if not D.FROM_NP[x.dtype].is_floating_point:
        raise NotImplementedError(f"\"{name}\" not implemented for '{TORCH_NAME[D.FROM_NP[x.dtype]]}'")


def _fake(xp, x, inv, zero_point, scale, quant_min, quant_max, fused, out_in_input_precision=False):
    """(output, mask): ``x`` through the integers and back; ``inv``/``zero_point``/``scale`` broadcast against x.
    The dequantizing product is in float32, per channel in the input's precision (as PyTorch's kernels)."""
    work = _f32 if x.dtype.itemsize < 4 else x.dtype  # (half inputs compute in float32, as PyTorch's)
    xw = x.astype(work, copy=False)
    if fused:  # float zero points: rint(x * inv + zero_point)
        q = xp.rint(xw * inv.astype(work) + zero_point.astype(work))
    else:
        q = xp.rint(xw * inv.astype(work)) + zero_point
    mask = (q >= quant_min) & (q <= quant_max)
    prec = work if out_in_input_precision else _f32
    out = ((xp.clip(q, quant_min, quant_max) - zero_point).astype(prec) * scale.astype(prec)).astype(x.dtype)
    return out, mask


@op("_fake_quantize_per_tensor_affine_cachemask", function=False, method=False)
def fake_quantize_per_tensor_affine_cachemask(xp, input, scale, zero_point, quant_min, quant_max):
    """(output, mask) of per-tensor fake quantization with number qparams."""
    _check_input(xp, input, "fake_quantize_tensor_cachemask_kernel_type_handling")
    _check_range(quant_min, quant_max, zero_point)
    scale = _f32(scale)
    return _fake(xp, input, _f32(1) / scale, np.int64(zero_point), scale, quant_min, quant_max, False)


@op("_fake_quantize_per_tensor_affine_cachemask_tensor_qparams", method=False)
def fake_quantize_per_tensor_affine_cachemask_tensor_qparams(xp, input, scale, zero_point, fake_quant_enabled,
                                                             quant_min, quant_max):
    """(output, mask) of per-tensor fake quantization with one-element tensor qparams; the input passes unchanged
    while ``fake_quant_enabled`` holds 0."""
    _check_input(xp, input, "fake_quantize_tensor_cachemask_kernel_type_handling")
    if not int(fake_quant_enabled.reshape(-1)[0]):
        return input.copy(), xp.ones(input.shape, bool)
    s = _f32(scale.reshape(-1)[0])
    zp = np.int64(np.rint(zero_point.reshape(-1)[0])) if zero_point.dtype.kind == "f" else \
        np.int64(zero_point.reshape(-1)[0])
    _check_range(quant_min, quant_max, zp)
    return _fake(xp, input, _f32(1) / s, zp, s, quant_min, quant_max, False)


def _mask_vjp(ctx, g, *_):
    return (g * ctx.out[1],)


fake_quantize_per_tensor_affine_cachemask.vjp(_mask_vjp)
fake_quantize_per_tensor_affine_cachemask_tensor_qparams.vjp(_mask_vjp)


@op("_fake_quantize_per_channel_affine_cachemask", function=False, method=False)
def fake_quantize_per_channel_affine_cachemask(xp, input, scale, zero_point, axis, quant_min, quant_max):
    """(output, mask) of per-channel fake quantization along ``axis``."""
    _check_input(xp, input, "fake_quantize_per_channel_affine")
    if scale.dtype != np.float32:
        raise RuntimeError(f"Scale must be Float or BFloat16, found {TORCH_NAME[D.FROM_NP[scale.dtype]]}")
    if zero_point.dtype not in (np.int32, np.float32, np.float16):
        raise RuntimeError(f"Zero-point must be Int32, Float or Half, found {TORCH_NAME[D.FROM_NP[zero_point.dtype]]}")
    if not -input.ndim <= axis < input.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-input.ndim}, {input.ndim - 1}], "
                         f"but got {axis})")
    axis %= input.ndim
    if scale.ndim != 1 or scale.shape != zero_point.shape or scale.shape[0] != input.shape[axis]:
        raise RuntimeError("dimensions of scale and zero-point are not consistent with input tensor")
    fused = zero_point.dtype.kind == "f"
    if not fused:
        _check_range(quant_min, quant_max, zero_point)
    shape = [1] * input.ndim
    shape[axis] = -1
    s = scale.reshape(shape)
    z = zero_point.reshape(shape).astype(_f32 if fused else np.int64)
    return _fake(xp, input, _f32(1) / s, z, s, quant_min, quant_max, fused, True)


fake_quantize_per_channel_affine_cachemask.vjp(_mask_vjp)


@op("_fake_quantize_learnable_per_tensor_affine", method=False)
def fake_quantize_learnable_per_tensor_affine(xp, input, scale, zero_point, quant_min, quant_max, grad_factor=1.0):
    """Per-tensor fake quantization whose scale and zero point (one-element tensors) get gradients."""
    _check_input(xp, input, "fake_quantize_tensor_cachemask_kernel_type_handling")
    s = _f32(scale.reshape(-1)[0])
    zp = np.int64(np.clip(np.rint(zero_point.reshape(-1)[0]), quant_min, quant_max))
    return _fake(xp, input, _f32(1) / s, zp, s, quant_min, quant_max, False)[0]


@fake_quantize_learnable_per_tensor_affine.vjp
def _(ctx, g):
    x, scale, zero_point, quant_min, quant_max = ctx.args[:5]
    grad_factor = ctx.args[5] if len(ctx.args) > 5 else ctx.kwargs.get("grad_factor", 1.0)
    s = _f32(scale._host().reshape(-1)[0])
    inv = _f32(1) / s
    zp = np.int64(np.clip(np.rint(zero_point._host().reshape(-1)[0]), quant_min, quant_max))
    xa = x.detach()._host().astype(_f32)
    xq = np.rint((xa * inv).astype(_f32) + _f32(zp))  # (this kernel adds the zero point before rounding)
    low, high = xq < quant_min, xq > quant_max
    inside = ~(low | high)
    xfq = ((np.clip(xq, quant_min, quant_max) - zp).astype(_f32) * s).astype(_f32)
    dscale = np.where(low, _f32(quant_min - zp), np.where(high, _f32(quant_max - zp), (xfq - xa) * inv))
    dzp = np.where(inside, _f32(0), -s)
    c = Tensor._wrap
    gf = _f32(grad_factor)
    gx = g * c(inside.astype(np.dtype(x.dtype.np)))
    gscale = (g * c((dscale * gf).astype(_f32))).sum().reshape(1).to(scale.dtype)
    gzp = (g * c((dzp * gf).astype(_f32))).sum().reshape(1).to(zero_point.dtype)
    return (gx, gscale, gzp, None, None, None)


def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max):
    """``input`` quantized with ``scale``/``zero_point`` to [quant_min, quant_max] and dequantized; numbers or
    one-element tensors as qparams. The gradient passes where the value was in range."""
    if isinstance(scale, Tensor) or isinstance(zero_point, Tensor):
        enabled = Tensor._wrap(np.ones(1, np.uint8))
        return fake_quantize_per_tensor_affine_cachemask_tensor_qparams.fn(
            input, scale, zero_point, enabled, quant_min, quant_max)[0]
    return fake_quantize_per_tensor_affine_cachemask.fn(input, scale, zero_point, quant_min, quant_max)[0]


def fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max):
    """``input`` quantized per channel along ``axis`` (scale float32, zero points int32 or float) and dequantized."""
    return fake_quantize_per_channel_affine_cachemask.fn(input, scale, zero_point, axis, quant_min, quant_max)[0]
