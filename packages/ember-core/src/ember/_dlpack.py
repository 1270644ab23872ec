"""DLPack exchange: ``ember.from_dlpack`` and ``Tensor.__dlpack__`` / ``__dlpack_device__``.

Zero-copy both ways. Exports are NumPy's (CPU) and CuPy's (CUDA) capsules; a bfloat16 array, which
NumPy's DLPack lacks, travels as its int16 view with the dtype field of the capsule's DLTensor rewritten
(same bytes, other type code). CPU imports read the DLTensor themselves: NumPy would make arrays from
legacy (unversioned) capsules read-only and refuses bfloat16.
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
_NP_KIND = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}  # DLDataTypeCode -> NumPy kind (4, bfloat: ml_dtypes)
# offset of the DLTensor in the capsule's struct: DLManagedTensor starts with it; the versioned one first
# holds version, manager_ctx, deleter and flags (4 x 8 bytes)
_DLTENSOR_AT = {b"dltensor": 0, b"dltensor_versioned": 32}
_FLAGS_AT, _READ_ONLY = 24, 1


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _struct(capsule):
    """(address of the capsule's managed struct, offset of its DLTensor) of an unconsumed DLPack capsule."""
    if type(capsule).__name__ != "PyCapsule":
        raise TypeError(f"from_dlpack expects an object with __dlpack__ or a DLPack capsule, got "
                        f"{type(capsule).__name__}")
    name = _capsule_name(capsule)
    if name not in _DLTENSOR_AT:
        raise RuntimeError(f"from_dlpack received an invalid capsule ('{name.decode()}'): a DLPack capsule can "
                           "be consumed only once")
    return _capsule_pointer(capsule, name), _DLTENSOR_AT[name]


class _Capsule:
    """Hands an existing capsule to cupy.from_dlpack, which accepts only producer objects."""

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
        try:
            capsule = ext_tensor.__dlpack__(max_version=(1, 0))
        except TypeError:  # a producer older than DLPack 1.0
            capsule = ext_tensor.__dlpack__()
    else:
        capsule = ext_tensor
    address, at = _struct(capsule)
    dl = _DLTensor.from_address(address + at)
    if dl.device_type != _KDL_CPU:
        return _wrap(_backend.cupy().from_dlpack(_Capsule(capsule, (dl.device_type, dl.device_id))))
    arr = _host_array(dl, capsule)
    if at and ctypes.c_uint64.from_address(address + _FLAGS_AT).value & _READ_ONLY:
        arr.flags.writeable = False
    return _wrap(arr)


def _host_array(dl, capsule):
    """A NumPy array over a CPU DLTensor's memory, keeping ``capsule`` (whose destructor frees it) alive."""
    code, bits, lanes = dl.dtype.code, dl.dtype.bits, dl.dtype.lanes
    if (code, bits) == (_KDL_BFLOAT, 16):
        dtype = np.dtype(ml_dtypes.bfloat16)
    elif code in _NP_KIND and lanes == 1 and bits % 8 == 0:
        dtype = np.dtype(f"{_NP_KIND[code]}{bits // 8}")
    else:
        raise TypeError(f"ember has no tensors of DLPack type (code {code}, bits {bits}, lanes {lanes})")
    shape = tuple(dl.shape[i] for i in range(dl.ndim))
    if 0 in shape:
        return np.empty(shape, dtype)
    strides = [dl.strides[i] for i in range(dl.ndim)] if dl.strides else np.empty(shape, np.int8).strides
    strides = [s * dtype.itemsize for s in strides]
    low = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
    high = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides)) + dtype.itemsize
    buffer = (ctypes.c_char * (high - low)).from_address(dl.data + dl.byte_offset + low)
    buffer.capsule = capsule
    return np.ndarray(shape, dtype, buffer=buffer, offset=-low, strides=strides)


def _wrap(arr):
    D.from_np(arr.dtype)  # TypeError naming the dtype when ember has no tensors of it
    return Tensor._wrap(arr)


def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule of this tensor's memory (for ``torch.from_dlpack``, ``np.from_dlpack``, ...)."""
    if self._rg:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    arr = self._data
    bf16 = arr.dtype == ml_dtypes.bfloat16
    kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version), ("dl_device", dl_device),
                                ("copy", copy)) if v is not None}
    capsule = (arr.view(np.int16) if bf16 else arr).__dlpack__(**kwargs)
    if bf16:
        address, at = _struct(capsule)
        _DLTensor.from_address(address + at).dtype.code = _KDL_BFLOAT
    return capsule


def __dlpack_device__(self):
    return self._data.__dlpack_device__()


Tensor.__dlpack__ = __dlpack__
Tensor.__dlpack_device__ = __dlpack_device__
