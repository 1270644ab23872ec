"""The array of a tensor on the 'meta' device: shape, dtype and strides, no elements.

A meta tensor is a plain ``Tensor`` whose ``_data`` is a ``MetaArray``. It answers the attributes ember reads from
NumPy arrays (shape, dtype, strides in bytes, size, ...), so metadata works unchanged, but it is no NumPy array:
every fast path, which tests ``type(arr) is ndarray``, passes it by, and the registry meets it only in its device
check, which hands the call to ``ember._meta.dispatch``. Its memory is a few fields whatever its size.
"""
import math

import numpy as np


def contiguous_byte_strides(shape, itemsize):
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


class _Flags:
    __slots__ = ("c_contiguous", "f_contiguous", "writeable")

    def __init__(self, c, f):
        self.c_contiguous, self.f_contiguous, self.writeable = c, f, True


class _Pointer:
    """What ember reads of a device array's ``data``: its address (meta storage starts at 0) and its memory."""
    __slots__ = ("ptr", "mem")

    def __init__(self, ptr, mem):
        self.ptr, self.mem = ptr, mem


class MetaArray:
    """Shape, NumPy dtype, byte strides and element offset of a meta tensor; ``storage`` identifies the storage
    that views share (an object, so that ``shares_memory`` can tell views of one tensor)."""

    __slots__ = ("shape", "dtype", "strides", "offset", "storage")

    def __init__(self, shape, dtype, strides=None, offset=0, storage=None):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.strides = contiguous_byte_strides(self.shape, self.dtype.itemsize) if strides is None else tuple(strides)
        self.offset = offset
        self.storage = storage if storage is not None else object()

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)
    base = None

    @property
    def flags(self):
        c = self.strides == contiguous_byte_strides(self.shape, self.itemsize)
        f = self.strides[::-1] == contiguous_byte_strides(self.shape[::-1], self.itemsize)
        return _Flags(c or self.size <= 1, f or self.size <= 1)

    @property
    def data(self):
        return _Pointer(self.offset * self.itemsize, self.storage)

    def copy(self, order="C"):
        return MetaArray(self.shape, self.dtype)

    def astype(self, dtype, copy=True):
        return MetaArray(self.shape, dtype)

    def get(self):
        raise NotImplementedError("Cannot copy out of meta tensor; no data! Please use Module.to_empty() instead "
                                  "when moving a module from meta to a different device.")

    def __array__(self, *args, **kwargs):
        self.get()

    def __repr__(self):
        return f"MetaArray(shape={self.shape}, dtype={self.dtype})"


class meta_xp:
    """The few array constructors engine code calls through ``xp_of(arr)`` (e.g. backward's implicit ones)."""

    @staticmethod
    def empty(shape, dtype=np.float32):
        return MetaArray(shape if isinstance(shape, tuple) else (shape,), dtype)

    zeros = ones = empty

    @staticmethod
    def full(shape, fill_value, dtype=np.float32):
        return meta_xp.empty(shape, dtype)

    @staticmethod
    def broadcast_to(a, shape):
        """A view of ``a`` broadcast to ``shape`` (zero strides along the dims it repeats)."""
        shape = tuple(shape)
        lead = len(shape) - a.ndim
        strides = [0] * lead + [0 if n == 1 and m != 1 else s for n, m, s in zip(a.shape, shape[lead:], a.strides)]
        return MetaArray(shape, a.dtype, strides, a.offset, a.storage)
