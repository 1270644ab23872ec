"""DLPack exchange: ``ember.from_dlpack`` and ``Tensor.__dlpack__`` / ``__dlpack_device__``.

Zero-copy both ways: NumPy (CPU) and CuPy (CUDA) produce and consume the DLPack capsules. NumPy's DLPack
has no bfloat16, so a bfloat16 array travels as its int16 view and ember rewrites the dtype field of the
DLTensor inside the capsule (the bytes are the same; only the type code differs).
"""
import ctypes

import ml_dtypes
import numpy as np

from . import _backend
from . import _dtype as D
from ._tensor import Tensor

__all__ = ["from_dlpack"]

_KDL_CPU = 1
_KDL_INT, _KDL_BFLOAT = 0, 4
# offset of the DLTensor in the capsule's struct: DLManagedTensor starts with it; the versioned struct
# first holds version, manager_ctx, deleter and flags (4 x 8 bytes)
_DLTENSOR_AT = {b"dltensor": 0, b"dltensor_versioned": 32}
_DEVICE_AT, _DTYPE_AT = 8, 20  # DLTensor: void* data; DLDevice device; int32 ndim; DLDataType dtype; ...


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _dltensor(capsule):
    """The address of the DLTensor in an unconsumed DLPack capsule."""
    if type(capsule).__name__ != "PyCapsule":
        raise TypeError(f"from_dlpack expects an object with __dlpack__ or a DLPack capsule, got "
                        f"{type(capsule).__name__}")
    name = _capsule_name(capsule)
    if name not in _DLTENSOR_AT:
        raise RuntimeError(f"from_dlpack received an invalid capsule ('{name.decode()}'): a DLPack capsule can "
                           "be consumed only once")
    return _capsule_pointer(capsule, name) + _DLTENSOR_AT[name]


class _Capsule:
    """Hands an existing capsule to numpy/cupy.from_dlpack, which accept only producer objects."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def from_dlpack(ext_tensor):
    """A tensor sharing memory with ``ext_tensor``: any object with ``__dlpack__`` (NumPy, CuPy, PyTorch,
    JAX arrays) or a DLPack capsule."""
    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    if hasattr(ext_tensor, "__dlpack__"):
        if int(ext_tensor.__dlpack_device__()[0]) != _KDL_CPU:  # CuPy negotiates the stream with the producer
            return _wrap(_backend.cupy().from_dlpack(ext_tensor))
        capsule = ext_tensor.__dlpack__()
    else:
        capsule = ext_tensor
    address = _dltensor(capsule)
    device = tuple((ctypes.c_int32 * 2).from_address(address + _DEVICE_AT))
    dtype = _DLDataType.from_address(address + _DTYPE_AT)
    bf16 = (dtype.code, dtype.bits, dtype.lanes) == (_KDL_BFLOAT, 16, 1)
    if bf16:
        dtype.code = _KDL_INT
    xp = np if device[0] == _KDL_CPU else _backend.cupy()
    arr = xp.from_dlpack(_Capsule(capsule, device))
    return _wrap(arr.view(ml_dtypes.bfloat16) if bf16 else arr)


def _wrap(arr):
    D.from_np(arr.dtype)  # TypeError naming the dtype when ember has no tensors of it
    return Tensor._wrap(arr)


def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule of this tensor's memory (for ``torch.from_dlpack``, ``np.from_dlpack``, ...)."""
    if self._rg:
        raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
    arr = self._data
    bf16 = arr.dtype == ml_dtypes.bfloat16
    kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version), ("dl_device", dl_device),
                                ("copy", copy)) if v is not None}
    capsule = (arr.view(np.int16) if bf16 else arr).__dlpack__(**kwargs)
    if bf16:
        _DLDataType.from_address(_dltensor(capsule) + _DTYPE_AT).code = _KDL_BFLOAT
    return capsule


def __dlpack_device__(self):
    return self._data.__dlpack_device__()


Tensor.__dlpack__ = __dlpack__
Tensor.__dlpack_device__ = __dlpack_device__
