"""The integers and parameters inside ember-core's quantized tensors, read and made without copies: the one
place ember-quantization's kernels touch core's representation (``ember._quantized``)."""
from ember import _qtypes as Q
from ember import _quantized as _qt

dequantize = _qt.dequantize_array  # (integers, quantizer) -> float32 values


def ints(q):
    """The integer array of quantized tensor ``q`` (one value per element; no copy)."""
    return q._data.arr


def quantizer(q):
    """``q``'s parameters: ``dtype``, ``qscheme``, ``scale``/``zero_point`` or ``scales``/``zero_points``/``axis``."""
    return q._data.q


def per_tensor(arr, dtype, scale, zero_point):
    """A per-tensor quantized tensor over integer array ``arr`` (taken, not copied)."""
    return _qt._new(arr, _qt._Quantizer(dtype, Q.per_tensor_affine, float(scale), int(zero_point)))


def requantize(y, dtype, scale, zero_point):
    """float32 values ``y`` quantized as PyTorch's vectorised kernels do (``rint(y * (1 / scale)) + zero_point``,
    clamped)."""
    return per_tensor(_qt.quantize_rounded(y, scale, zero_point, dtype), dtype, scale, zero_point)


def not_implemented(name):
    """PyTorch's error for a quantized op given a float tensor."""
    return NotImplementedError(f"Could not run '{name}' with arguments from the 'CPU' backend. This could be because "
                               "the operator doesn't exist for this backend, or was omitted during the "
                               "selective/custom build process (if using custom build).")


def check(x, name):
    """The per-tensor quantizer of input ``x`` of op ``name`` ("quantized::linear"); PyTorch's errors for float and
    per-channel inputs."""
    if not getattr(x, "is_quantized", False):
        raise not_implemented(name)
    q = x._data.q
    if q.per_channel:
        raise RuntimeError("Expected quantizer->qscheme() == kPerTensorAffine to be true, but got false.  (Could "
                           "this error message be improved?  If so, please report an enhancement request to "
                           "PyTorch.)")
    return q
