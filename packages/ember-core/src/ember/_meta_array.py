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


def no_data():
    """PyTorch's error for copying values out of a meta tensor."""
    raise NotImplementedError("Cannot copy out of meta tensor; no data! Please use Module.to_empty() instead when "
                              "moving a module from meta to a different device.")


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

    # (autograd accumulates gradients into .grad with array additions)
    def __add__(self, other):
        return MetaArray(np.broadcast_shapes(self.shape, other.shape), np.result_type(self.dtype, other.dtype))

    def __iadd__(self, other):
        return self

    def get(self):
        no_data()

    def __array__(self, *args, **kwargs):
        self.get()

    def __repr__(self):
        return f"MetaArray(shape={self.shape}, dtype={self.dtype})"


# ---- stand-ins: arrays of a meta array's layout over zero pages -------------------------------------------
_SMALL = 1 << 20  # stand-ins of at most this many bytes are plain zeros (a mapping costs more)


def _zero_pages(nbytes):
    """``nbytes`` of read-only zeros that take no memory: an anonymous private mapping without reserve (reading it
    maps the kernel's shared zero page)."""
    import mmap  # (on first use: import time)
    flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_ANONYMOUS", 0x20) | getattr(mmap, "MAP_NORESERVE", 0)
    return np.frombuffer(mmap.mmap(-1, nbytes, flags=flags, prot=mmap.PROT_READ), np.uint8)


def stand_in(a, storage=0):
    """A NumPy array of ``a``'s shape, dtype, strides and offset whose elements are zeros, over a buffer of at least
    ``storage`` elements (the extent of the storage ``a`` views: ops such as as_strided address all of it). Writes to
    it, which some implementations make into buffers such as running statistics, are lost; one over zero pages is
    read-only."""
    item = a.itemsize
    steps = [s // item for s in a.strides]
    if any(s < 0 for s in steps):
        return np.zeros(a.shape, a.dtype)
    count = max(storage, a.offset + 1 + sum((n - 1) * s for n, s in zip(a.shape, steps) if n))
    buf = np.zeros(count * item, np.uint8) if count * item <= _SMALL else _zero_pages(count * item)
    return np.ndarray(a.shape, a.dtype, buffer=buf, offset=a.offset * item, strides=a.strides)


def extent(a):
    """How many elements of its storage ``a`` reaches (from the storage's start)."""
    return a.offset + 1 + sum((n - 1) * s // a.itemsize for n, s in zip(a.shape, a.strides) if n and s > 0)


class meta_xp:
    """What ``xp_of`` gives for meta arrays: the constructors engine code calls (backward's implicit ones)."""

    @staticmethod
    def empty(shape, dtype=np.float64):
        return MetaArray(shape if isinstance(shape, (tuple, list)) else (shape,), dtype)

    zeros = ones = empty
