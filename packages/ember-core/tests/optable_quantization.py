"""Op table lines of fake quantization (the ops behind ``fake_quantize_per_tensor_affine`` and
``fake_quantize_per_channel_affine``, and the learnable per-tensor form)."""
import numpy as np
import torch
from optable import FLOATS, Line, T, values

from ember._registry import REGISTRY

_ATEN = {"_fake_quantize_per_tensor_affine_cachemask": "fake_quantize_per_tensor_affine_cachemask",
         "_fake_quantize_per_channel_affine_cachemask": "fake_quantize_per_channel_affine_cachemask"}


def _call(name):
    """torch's aten op (or its public function) and ember's registry op of the same numerics."""
    def call(m, *a, **k):
        if m is torch:
            return getattr(torch.ops.aten, _ATEN[name])(*a, **k) if name in _ATEN else getattr(torch, name)(*a, **k)
        return REGISTRY[name].fn(*a, **k)
    call.direct = True
    return call


def _grid(dtype, rng, *shape):
    """Values on and between the steps of scale 0.1 (ties of the rounding included), some out of range."""
    v = np.round(values("float64", shape, rng) * 40) / 20
    return T(v, dtype)


def per_tensor(dtype, rng):
    x = _grid(dtype, rng, 4, 5)
    return [((x, 0.1, 3, 0, 40), {}), ((x, 0.25, 0, -8, 7), {}), ((x, 0.1, 50, 0, 40), {}), ((x, 0.1, 3, 9, 5), {})]


def per_tensor_tensors(dtype, rng):
    x = _grid(dtype, rng, 4, 5)
    on, off = T(np.array([1]), "uint8"), T(np.array([0]), "uint8")
    s, z = T(np.array([0.1]), "float32"), T(np.array([3]), "int32")
    return [((x, s, z, on, 0, 40), {}), ((x, s, z, off, 0, 40), {}),
            ((x, T(np.array([0.25]), "float32"), T(np.array([-2]), "int32"), on, -8, 7), {})]


def per_channel(dtype, rng):
    x = _grid(dtype, rng, 3, 5)
    s = T(np.array([0.1, 0.2, 0.05]), "float32")
    return [((x, s, T(np.array([3, 0, -2]), "int32"), 0, -10, 10), {}),
            ((x, s, T(np.array([0.5, 0.0, -1.5]), "float32"), 0, -10, 10), {}),
            ((x, T(np.array([0.1] * 5), "float32"), T(np.array([1, 2, 3, 4, 5]), "int32"), 1, 0, 20), {}),
            ((x, s, T(np.array([3, 0, -2]), "int64"), 0, -10, 10), {}),
            ((x, s, T(np.array([3, 0]), "int32"), 0, -10, 10), {})]


def learnable(dtype, rng):
    x = _grid(dtype, rng, 4, 5)
    return [((x, T(np.array([0.1]), "float32"), T(np.array([3.0]), "float32"), 0, 40, 1.0), {}),
            ((x, T(np.array([0.25]), "float32"), T(np.array([-1.4]), "float32"), -8, 7, 0.5), {})]


LINES = [
    Line("_fake_quantize_per_tensor_affine_cachemask", _call("_fake_quantize_per_tensor_affine_cachemask"),
         per_tensor, dtypes=FLOATS),
    Line("_fake_quantize_per_tensor_affine_cachemask_tensor_qparams",
         _call("_fake_quantize_per_tensor_affine_cachemask_tensor_qparams"), per_tensor_tensors, dtypes=FLOATS),
    Line("_fake_quantize_per_channel_affine_cachemask", _call("_fake_quantize_per_channel_affine_cachemask"),
         per_channel, dtypes=FLOATS),
    Line("_fake_quantize_learnable_per_tensor_affine", _call("_fake_quantize_learnable_per_tensor_affine"),
         learnable, dtypes=("float32",)),
]
