"""Storages: the memory under a tensor, as PyTorch's ``Tensor.untyped_storage()`` and ``Tensor.storage()`` show it.

A tensor's array is its storage (see ``_tensor``); a view's array lies in its base's. So a tensor's storage is the
memory of its base's array, from the base's first byte: ``UntypedStorage`` holds it as a uint8 NumPy/CuPy view,
``TypedStorage`` (deprecated in PyTorch, still common) as that view read as elements of a dtype. Both share the
memory with the tensor (writes show through both ways) and with every view of the same base, so comparing
``data_ptr()`` tells whether two tensors share memory. Their arrays cannot grow: ``resize_`` refuses, as PyTorch does
for storages it does not own (``from_numpy``'s).
"""
import builtins
import warnings

import numpy as np

from . import _backend
from . import _dtype as D
from ._device import CPU, as_device
from ._layout import strided
from ._meta_array import MetaArray
from ._serialization import _STORAGE
from ._tensor import Tensor, _address, _python_scalar, contiguous_strides

__all__ = ["UntypedStorage", "TypedStorage"] + sorted(_STORAGE.values())

_warned = [False]


def _deprecated():
    if not _warned[0]:
        _warned[0] = True
        warnings.warn("TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the "
                      "only storage class. This should only matter to you if you are using storages directly.  To "
                      "access UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()",
                      UserWarning, stacklevel=3)


def _span(arr):
    """A uint8 view of the memory array ``arr`` spans, from its lowest address."""
    xp = _backend.xp_of(arr)
    if not arr.size:
        return xp.zeros(0, np.uint8)
    if type(arr) is MetaArray:  # (a meta tensor's storage: its size, no bytes)
        extent = arr.offset * arr.itemsize + builtins.sum((n - 1) * abs(s) for n, s in zip(arr.shape, arr.strides))
        return MetaArray((extent + arr.itemsize,), np.uint8, storage=arr.storage)
    if arr.flags.c_contiguous or arr.flags.f_contiguous:
        return arr.ravel(order="K").view(np.uint8)
    lowest = arr[tuple(slice(n - 1, n) if s < 0 else slice(0, 1) for n, s in zip(arr.shape, arr.strides))]
    extent = builtins.sum((n - 1) * abs(s) for n, s in zip(arr.shape, arr.strides)) + arr.itemsize
    return xp.lib.stride_tricks.as_strided(lowest.reshape(1).view(np.uint8), (extent,), (1,))


def _new_bytes(arg, device):
    """The array of a new storage: ``arg`` bytes (uninitialised, as PyTorch's) or a sequence of integers (modulo
    256)."""
    dev = as_device(device if device is not None else "cpu")
    if isinstance(arg, (builtins.int, np.integer)):
        arr = np.empty(builtins.int(arg), np.uint8)
    else:
        values = list(arg)
        for v in values:
            if not isinstance(v, (builtins.int, np.integer)):
                raise RuntimeError(f"ember.UntypedStorage(): tried to construct a storage from a sequence "
                                   f"({type(arg).__name__}), but one of the items was of type {type(v).__name__} "
                                   f"instead of int")
        arr = np.array([v % 256 for v in values], np.uint8)  # (wrapping around, as PyTorch's)
    return _backend.to_device(arr, dev)


class _StorageBase:
    """What both storage kinds share, over ``_elements()`` (a 1-D array) and ``_bytes``."""

    __slots__ = ()

    @property
    def device(self):
        return _backend.device_of(self._bytes)

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    def data_ptr(self):
        return _address(self._bytes)

    def nbytes(self):
        return self._bytes.size

    def size(self):
        return self._elements().size

    def __len__(self):
        return self.size()

    def element_size(self):
        return self._elements().itemsize

    def get_device(self):
        return self.device.index if self.is_cuda else -1

    def is_shared(self):
        return False

    def is_pinned(self, device="cuda"):
        return False

    def resize_(self, size):
        raise RuntimeError("Trying to resize storage that is not resizable")

    def tolist(self):
        return _backend.to_device(self._elements(), CPU).tolist()

    def __iter__(self):
        return iter(self.tolist())

    def _index(self, idx):
        n = self.size()
        if not -n <= idx < n:
            raise IndexError(f"index {idx} out of range for storage of size {n}")
        return idx % n

    def __setitem__(self, idx, value):
        self._elements()[idx if isinstance(idx, builtins.slice) else self._index(idx)] = value

    def fill_(self, value):
        self._elements()[...] = value
        return self

    def copy_(self, source, non_blocking=None):
        src = source._elements() if isinstance(source, _StorageBase) else np.asarray(source)
        if src.size != self.size():
            raise RuntimeError(f"size mismatch, copying a storage of {src.size} elements into one of {self.size()}")
        xp = _backend.xp_of(self._bytes)
        self._elements()[...] = xp.asarray(src).astype(self._elements().dtype, copy=False)
        return self

    def __deepcopy__(self, memo):
        return memo.setdefault(id(self), self.clone())

    def _describe(self):
        return f"device={self.device}"

    def __repr__(self):
        body = "".join(f" {v}\n" for v in self.tolist()) if self.size() else " \n"
        return f"{body}[ember.{type(self).__name__}({self._describe()}) of size {self.size()}]"

    __str__ = __repr__


class UntypedStorage(_StorageBase):
    """The bytes of a tensor's memory (``Tensor.untyped_storage()``), or ``size`` new bytes, or bytes of a sequence
    of values in [0, 255]."""

    __slots__ = ("_bytes",)

    def __init__(self, *args, device=None):
        if len(args) > 1:
            raise TypeError(f"UntypedStorage(): expected a size or a sequence, got {len(args)} arguments")
        self._bytes = _new_bytes(args[0] if args else 0, device)

    @classmethod
    def _over(cls, arr):
        s = object.__new__(cls)
        s._bytes = arr
        return s

    def _elements(self):
        return self._bytes

    def __getitem__(self, idx):
        if isinstance(idx, builtins.slice):
            return UntypedStorage._over(self._bytes[idx])
        return builtins.int(self._bytes[self._index(idx)])

    def untyped(self):
        return self

    def clone(self):
        return UntypedStorage._over(self._bytes.copy())

    def cpu(self):
        return UntypedStorage._over(_backend.to_device(self._bytes, CPU))

    def cuda(self, device=None, non_blocking=False):
        return UntypedStorage._over(_backend.to_device(self._bytes, as_device(device if device is not None
                                                                              else "cuda")))

    def share_memory_(self):
        return self


class _LegacyStorageType(type):
    """Metaclass of the legacy storage names: ``FloatStorage(...)`` makes a float32 TypedStorage and
    ``isinstance(s, FloatStorage)`` tests a TypedStorage's dtype, as in PyTorch."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, TypedStorage) and obj.dtype is cls.dtype and not obj.is_cuda

    def __call__(cls, *args, device=None, wrap_storage=None):
        return TypedStorage(*args, dtype=cls.dtype, device=device, wrap_storage=wrap_storage)

    def from_buffer(cls, buffer, byte_order="native", count=-1, offset=0):
        order = {"native": "=", "little": "<", "big": ">"}[byte_order]
        arr = np.frombuffer(buffer, D.storage(cls.dtype).newbyteorder(order), count, offset)
        return TypedStorage(wrap_storage=UntypedStorage._over(arr.astype(D.storage(cls.dtype)).view(np.uint8)),
                            dtype=cls.dtype)


class TypedStorage(_StorageBase):
    """A storage read as elements of ``dtype`` (``Tensor.storage()``): ``TypedStorage(size or sequence, dtype=...)``
    or ``TypedStorage(wrap_storage=untyped, dtype=...)``. Deprecated in PyTorch (which warns once), as here."""

    __slots__ = ("_untyped_storage", "dtype")
    is_sparse = False

    def __init__(self, *args, dtype=None, device=None, wrap_storage=None, _internal=False):
        if not _internal:
            _deprecated()
        self.dtype = dtype if dtype is not None else D.get_default_dtype()
        if wrap_storage is not None:
            if args or device is not None:
                raise RuntimeError("TypedStorage(wrap_storage=...) takes no size, sequence nor device")
            if wrap_storage.nbytes() % self.dtype.itemsize:
                raise RuntimeError(f"the storage's {wrap_storage.nbytes()} bytes are no whole number of "
                                   f"{self.dtype} elements")
            self._untyped_storage = wrap_storage
            return
        if len(args) > 1:
            raise TypeError(f"TypedStorage(): expected a size or a sequence, got {len(args)} arguments")
        arg = args[0] if args else 0
        np_dtype = D.storage(self.dtype)
        if isinstance(arg, (builtins.int, np.integer)):
            arr = np.empty(builtins.int(arg), np_dtype)
        else:
            arr = np.asarray(list(arg)).astype(np_dtype)
        arr = _backend.to_device(arr, as_device(device if device is not None else "cpu"))
        self._untyped_storage = UntypedStorage._over(arr.view(np.uint8))

    @classmethod
    def _over(cls, untyped, dtype):
        return cls(wrap_storage=untyped, dtype=dtype, _internal=True)

    @property
    def _bytes(self):
        return self._untyped_storage._bytes

    def _elements(self):
        return self._bytes.view(D.storage(self.dtype))

    def __getitem__(self, idx):
        if isinstance(idx, builtins.slice):
            raise RuntimeError("slices are only supported in UntypedStorage.__getitem__")
        return _python_scalar(self._elements()[self._index(idx)])

    def untyped(self):
        return self._untyped_storage

    def _size(self):
        return self.size()

    def clone(self):
        return TypedStorage._over(self._untyped_storage.clone(), self.dtype)

    def cpu(self):
        return self if not self.is_cuda else TypedStorage._over(self._untyped_storage.cpu(), self.dtype)

    def cuda(self, device=None, non_blocking=False):
        return TypedStorage._over(self._untyped_storage.cuda(device), self.dtype)

    def share_memory_(self):
        return self

    def _to(self, dtype):
        """A copy whose elements are this storage's converted to ``dtype``."""
        arr = self._elements().astype(D.storage(dtype))
        return TypedStorage._over(UntypedStorage._over(arr.view(np.uint8)), dtype)

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            return f"torch.{'cuda.' if self.is_cuda else ''}{_STORAGE[self.dtype]}"
        target = getattr(dtype, "dtype", dtype)
        return self if target is self.dtype else self._to(target)

    def pickle_storage_type(self):
        return _STORAGE[self.dtype]

    def _describe(self):
        return f"dtype={self.dtype}, device={self.device}"


for _dtype, _name in _STORAGE.items():
    globals()[_name] = _LegacyStorageType(_name, (TypedStorage,), {"dtype": _dtype, "__slots__": (),
                                                                   "__module__": "ember"})
for _name, _dtype in (("float", D.float32), ("double", D.float64), ("half", D.float16), ("bfloat16", D.bfloat16),
                      ("long", D.int64), ("int", D.int32), ("short", D.int16), ("char", D.int8), ("byte", D.uint8),
                      ("bool", D.bool), ("cfloat", D.complex64), ("cdouble", D.complex128)):
    setattr(TypedStorage, _name, lambda self, _d=_dtype: self._to(_d))


# ---- the Tensor methods ---------------------------------------------------------------------------------
def _memory_of(t):
    if t.layout is not strided:
        kind = "SparseTensorImpl" if t.is_sparse else "SparseCsrTensorImpl"
        raise NotImplementedError(f"Cannot access storage of {kind}")
    return UntypedStorage._over(_span((t._base if t._base is not None else t)._data))


def untyped_storage(self):
    """The memory under this tensor (its base's, for a view), as bytes."""
    return _memory_of(self)


def storage(self):
    """The memory under this tensor as elements of its dtype (deprecated in PyTorch: ``untyped_storage``)."""
    _deprecated()
    return TypedStorage._over(_memory_of(self), self.dtype)


def storage_type(self):
    """The legacy storage class of this tensor's dtype (``ember.FloatStorage`` for float32)."""
    return globals()[_STORAGE[self.dtype]]


def set_(self, source=None, storage_offset=0, size=None, stride=None):
    """Make this tensor use other memory, keeping no copy: ``set_()`` empties it, ``set_(tensor)`` shares that
    tensor's elements (same sizes and strides), ``set_(storage or tensor, offset, size, stride)`` views a storage's
    memory (a tensor's: its base's) through the given geometry, in this tensor's dtype."""
    if source is None:
        self._data, self._base = _backend.xp_of(self._data).empty((0,), self._data.dtype), None
    else:
        dtype = getattr(source, "dtype", self.dtype)  # (an UntypedStorage is bytes of any dtype)
        if dtype is not self.dtype:
            raise RuntimeError(f"Could not set tensor of type {D.CPP_NAME[dtype]} to a tensor of type "
                               f"{D.CPP_NAME[self.dtype]}")
        if isinstance(source, Tensor) and size is None and storage_offset == 0:
            self._data, self._base = source._data, source._base
        else:
            memory = (_memory_of(source) if isinstance(source, Tensor) else source.untyped())._bytes
            # (the whole storage as the base: storage_offset() and untyped_storage() count from its start)
            self._base = Tensor._wrap(memory[:memory.size - memory.size % self._data.itemsize].view(self._data.dtype))
            self._data = _geometry(self._base._data, storage_offset, size, stride)
    self._vc[0] += 1
    return self


def _geometry(elements, offset, size, stride):
    """A view of the 1-D array ``elements`` from ``offset`` with sizes ``size`` (all remaining elements when None) and
    strides ``stride`` (contiguous when None), after PyTorch's bounds check."""
    n, itemsize = elements.size, elements.itemsize
    size = (n - offset,) if size is None else tuple(builtins.int(s) for s in size)
    stride = contiguous_strides(size) if stride is None else tuple(builtins.int(s) for s in stride)
    needed = 0 if 0 in size else offset + builtins.sum((k - 1) * s for k, s in zip(size, stride)) + 1
    if needed > n or offset < 0:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and "
                           f"itemsize {itemsize} requiring a storage size of {needed * itemsize} are out of bounds "
                           f"for storage of size {n * itemsize}")
    return _backend.xp_of(elements).lib.stride_tricks.as_strided(elements[offset:], size,
                                                                 [s * itemsize for s in stride])


def is_set_to(self, tensor):
    """Whether both tensors are the same memory seen the same way: storage, offset, sizes and strides."""
    return (self.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr() and self.dtype is tensor.dtype
            and self.storage_offset() == tensor.storage_offset() and self.shape == tensor.shape
            and self.stride() == tensor.stride())


Tensor.untyped_storage, Tensor.storage, Tensor.storage_type = untyped_storage, storage, storage_type
Tensor.set_, Tensor.is_set_to = set_, is_set_to
