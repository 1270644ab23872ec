"""``ember.save`` / ``ember.load``: PyTorch's checkpoint formats, written and read without PyTorch.

A checkpoint is a zip archive. ``<archive>/data.pkl`` is the pickled object, in which every tensor is
a call ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)`` and
every storage a persistent id ``('storage', torch.FloatStorage, key, location, numel)`` whose bytes
are the record ``<archive>/data/<key>``. ember writes those torch names itself (``_TorchName``) and
maps them back to ember objects when reading, so neither side needs PyTorch installed. Files of the
legacy format (``_use_new_zipfile_serialization=False``) are read and written too.
"""
import _compat_pickle
import codecs
import collections
import contextlib
import importlib
import io
import os
import pickle
import secrets
import struct
import sys
import warnings
import zipfile

import numpy as np

from . import _backend
from . import _dtype as D
from . import _qtypes as Q
from ._device import device
from ._layout import by_name, layout, strided
from ._meta_array import MetaArray
from ._size import Size
from ._tensor import Tensor, contiguous_strides

__all__ = ["save", "load"]

# storage classes PyTorch pickles per dtype (dtypes without one have no tensors in ember either)
_STORAGE = {D.float32: "FloatStorage", D.float64: "DoubleStorage", D.float16: "HalfStorage",
            D.bfloat16: "BFloat16Storage", D.int64: "LongStorage", D.int32: "IntStorage",
            D.int16: "ShortStorage", D.int8: "CharStorage", D.uint8: "ByteStorage", D.bool: "BoolStorage",
            D.complex64: "ComplexFloatStorage", D.complex128: "ComplexDoubleStorage"}
# quantized tensors: their integers' storage classes
_QSTORAGE = {Q.qint8: "QInt8Storage", Q.quint8: "QUInt8Storage", Q.qint32: "QInt32Storage"}
_ALIGN = 64  # storage records start at multiples of this offset, as PyTorch writes them (lets mmap work)
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001
# TorchScript classes (the packed weights of quantized layers) that ember's packages stand in for: PyTorch
# pickles one as a torch.ScriptObject built from (payload, "__torch__.torch.classes.<namespace>.<Class>")
_SCRIPT_MAKERS = {}  # qualified name -> make(payload): the stand-in object
_SCRIPT_NAMES = {}  # stand-in class -> qualified name; its __getstate__()[0] is the payload
# the module (and distribution) that registers a namespace's stand-ins, imported when a checkpoint holds one
_SCRIPT_PROVIDERS = {"quantized": ("ember.ao.nn.quantized.dynamic", "ember-quantization"),
                     "rnn": ("ember.ao.nn.quantized.dynamic", "ember-quantization")}


def register_script_class(qualname, classes, make):
    """Save instances of ``classes`` as PyTorch's TorchScript class ``qualname`` and load those with
    ``make(payload)``."""
    _SCRIPT_MAKERS[qualname] = make
    _SCRIPT_NAMES.update(dict.fromkeys(classes, qualname))


# ---- writing ---------------------------------------------------------------------------------------
class _TorchName:
    """A PyTorch global, pickled by name (``GLOBAL torch._utils _rebuild_tensor_v2``) without importing it."""

    __slots__ = ("module", "name")
    _cache = {}

    def __new__(cls, qualname):
        self = cls._cache.get(qualname)
        if self is None:
            self = cls._cache[qualname] = object.__new__(cls)
            self.module, _, self.name = qualname.rpartition(".")
        return self

    def __call__(self, *args):  # pickle requires reduce functions to be callable
        raise TypeError(f"{self.module}.{self.name} is a stand-in for PyTorch's function, for pickling only")


class _StorageRef:
    """A storage met while pickling; the pickler writes it as a persistent id."""

    __slots__ = ("pid", "array")

    def __init__(self, pid, array):
        self.pid, self.array = pid, array


class _CheckpointPickler(pickle._Pickler):
    """The pure-Python pickler (the C one cannot write globals of modules it cannot import), writing
    tensors, dtypes, devices and sizes under their PyTorch names."""

    def __init__(self, file, protocol, legacy):
        super().__init__(file, protocol)
        self.dispatch = {**self.dispatch, _TorchName: _CheckpointPickler._save_name,
                         D.dtype: lambda p, dt: p.save(_TorchName("torch." + dt.name)),
                         Q._QuantizedDtype: lambda p, dt: p.save(_TorchName("torch." + dt.name)),
                         D._Float8: lambda p, dt: p.save(_TorchName("torch." + dt.name)),
                         Q.qscheme: lambda p, qs: p.save(_TorchName("torch." + qs.name)),
                         **{cls: _CheckpointPickler._save_script_object for cls in _SCRIPT_NAMES}}
        self.legacy = legacy
        self.storages = []  # _StorageRef, in key order
        self._by_base = {}  # id(base array) -> _StorageRef (the array is kept alive by the ref)

    def _save_name(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    def _save_script_object(self, obj):
        """A stand-in of a TorchScript class as PyTorch pickles one: ``torch.ScriptObject()`` built from
        ``(payload, qualified class name)``."""
        self.save(_TorchName("torch.ScriptObject"))
        self.save(())
        self.write(pickle.NEWOBJ)
        self.memoize(obj)
        self.save((obj.__getstate__()[0], _SCRIPT_NAMES[type(obj)]))
        self.write(pickle.BUILD)

    def persistent_id(self, obj):
        return obj.pid if type(obj) is _StorageRef else None

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return self._reduce_tensor(obj)
        if type(obj) is device:
            return _TorchName("torch.device"), (obj.type,) if obj.index is None else (obj.type, obj.index)
        if type(obj) is Size:
            return _TorchName("torch.Size"), (tuple(obj),)
        if type(obj) is layout:
            return _TorchName("torch.serialization._get_layout"), (f"torch.{obj.name}",)
        return NotImplemented

    def _reduce_tensor(self, t):
        if t.is_quantized:
            return self._reduce_qtensor(t)
        if t.dtype in D.FLOAT8:  # its bytes' storage, and the dtype (as PyTorch writes float8 tensors)
            base = (t._base if t._base is not None else t)._data.arr
            ref, offset, stride = self._storage_of(t, t._data.arr.view(np.uint8), base.view(np.uint8), D.uint8)
            return _TorchName("torch._utils._rebuild_tensor_v3"), (ref, offset, tuple(t.shape), stride, t._rg,
                                                                   collections.OrderedDict(), t.dtype)
        if t.layout is not strided:  # a sparse tensor: its layout and its index and value tensors
            return _TorchName("torch._utils._rebuild_sparse_tensor"), (t.layout, t._parts())
        if t.is_meta:  # (no storage: PyTorch writes a meta tensor's metadata alone)
            plain = (_TorchName("torch._utils._rebuild_meta_tensor_no_storage"),
                     (t.dtype, tuple(t.shape), t.stride(), t._rg))
        else:
            ref, offset, stride = self._storage_of(t)
            plain = (_TorchName("torch._utils._rebuild_tensor_v2"),
                     (ref, offset, tuple(t.shape), stride, t._rg, collections.OrderedDict()))
        if not _is_parameter(t):
            return plain
        data = Tensor._wrap(t._data)._view_of(t)  # a plain tensor on the same storage, wrapped in a Parameter
        return _TorchName("torch._utils._rebuild_parameter"), (data, t._rg, collections.OrderedDict())

    def _reduce_qtensor(self, t):
        """A quantized tensor: the storage of its integers, PyTorch's quantizer tuple (per-channel float qparams
        are written as per_channel_affine with float zero points, as PyTorch writes them)."""
        q = t._data.q
        if q.dtype not in _QSTORAGE:
            raise TypeError(f"cannot save {q.dtype} tensors")
        base = (t._base if t._base is not None else t)._data.arr
        ref, offset, stride = self._storage_of(t, t._data.arr, base, q.dtype)
        if q.per_channel:
            params = (Q.per_channel_affine, Tensor._wrap(q.scales), Tensor._wrap(q.zero_points), q.axis)
        else:
            params = (Q.per_tensor_affine, q.scale, q.zero_point)
        return _TorchName("torch._utils._rebuild_qtensor"), (ref, offset, tuple(t.shape), stride, params, False,
                                                             collections.OrderedDict())

    def _storage_of(self, t, arr=None, base=None, dtype=None):
        """The storage of ``t`` (its view base's memory, shared with other views) and t's place in it (``arr``,
        ``base``, ``dtype``: a quantized tensor's integers, their base and its dtype)."""
        if arr is None:
            arr = t._data
            base = (t._base if t._base is not None else t)._data
        ref = self._by_base.get(id(base))
        layout = _layout_in(arr, base) if ref is None or ref.array.dtype == arr.dtype else None
        if layout is None:  # not expressible in its base's memory: save a contiguous copy of its own
            base = _backend.xp_of(arr).ascontiguousarray(arr)
            layout, ref = (0, contiguous_strides(arr.shape)), None
        if ref is None:
            ref = self._new_ref(base, dtype)
        return ref, layout[0], layout[1]

    def _new_ref(self, base, dtype=None):
        dt = D.from_np(base.dtype) if dtype is None else dtype
        name = _STORAGE.get(dt) or _QSTORAGE.get(dt)
        if name is None:
            raise TypeError(f"cannot save {dt} tensors")
        key = str(len(self.storages))
        location = "cpu" if _backend.is_host(base) else f"cuda:{base.device.id}"
        pid = ("storage", _TorchName("torch." + name), key, location, base.size)
        ref = _StorageRef(pid + (None,) if self.legacy else pid, base)
        self.storages.append(ref)
        self._by_base[id(base)] = ref
        return ref


def _is_parameter(t):
    # ember.nn (another distribution) defines Parameter; recognised by name to keep ember-core independent
    return any(c.__name__ == "Parameter" and c.__module__.startswith("ember.nn") for c in type(t).__mro__)


def _layout_in(arr, base):
    """(offset, strides) in elements of view ``arr`` inside the dense memory of ``base``, or None."""
    if arr.dtype != base.dtype or arr.size == 0 or not (base.flags.c_contiguous or base.flags.f_contiguous):
        return None
    item = arr.itemsize
    start = _address(arr) - _address(base)
    end = start + sum((n - 1) * s for n, s in zip(arr.shape, arr.strides)) + item
    if start < 0 or end > base.nbytes or start % item or any(s < 0 or s % item for s in arr.strides):
        return None  # e.g. flipped (negative strides), or a "view" op that had to copy
    return start // item, tuple(s // item for s in arr.strides)


def _address(arr):
    return arr.__array_interface__["data"][0] if _backend.is_host(arr) else arr.data.ptr


def _storage_bytes(arr):
    """The raw bytes of a dense array in memory order, as a host buffer."""
    flat = arr.ravel(order="K")
    return memoryview((flat if _backend.is_host(flat) else flat.get()).view(np.uint8))


def save(obj, f, pickle_module=pickle, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False, *, _extra_files=None):
    """Save ``obj`` (tensors, state_dicts, nested containers) to a path or binary file in PyTorch's format.

    ``_extra_files`` maps names to bytes or str, stored as ``<archive>/extra/<name>`` (read back with
    ``ember.load(f, _extra_files=d)``).
    """
    if pickle_module is not pickle:
        raise ValueError("ember.save writes PyTorch's names through its own pickler: only pickle_module=pickle "
                         "is supported")
    data = io.BytesIO()
    pickler = _CheckpointPickler(data, pickle_protocol, not _use_new_zipfile_serialization)
    pickler.dump(obj)
    with _opened(f, "wb") as fh:
        if not _use_new_zipfile_serialization:
            if _extra_files:
                raise ValueError("_extra_files needs the zip format (_use_new_zipfile_serialization=True)")
            return _write_legacy(fh, data.getvalue(), pickler.storages, pickle_protocol)
        name = os.path.splitext(os.path.basename(os.fspath(f)))[0] if _is_path(f) else "archive"
        records = [("data.pkl", data.getbuffer()), (".format_version", b"1"),
                   (".storage_alignment", str(_ALIGN).encode())]
        if not _disable_byteorder_record:
            records.append(("byteorder", sys.byteorder.encode()))
        records += [(f"data/{r.pid[2]}", _storage_bytes(r.array)) for r in pickler.storages]
        records += [(f"extra/{k}", v.encode() if isinstance(v, str) else bytes(v))
                    for k, v in (_extra_files or {}).items()]
        records += [("version", b"3\n"), (".data/serialization_id", b"%040d" % secrets.randbits(128))]
        with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
            for rec, payload in records:
                _write_aligned(zf, f"{name}/{rec}", payload)


def _write_aligned(zf, name, payload):
    """Write one stored record whose data starts at a multiple of _ALIGN (padding in an extra field)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.file_size = len(payload)
    zip64 = info.file_size * 1.05 > zipfile.ZIP64_LIMIT  # zipfile's own rule; it adds a 20-byte field
    header = 30 + len(name.encode()) + 4 + (20 if zip64 else 0)
    pad = -(zf.start_dir + header) % _ALIGN
    info.extra = struct.pack("<2sH", b"FB", pad) + b"Z" * pad
    with zf.open(info, "w", force_zip64=zip64) as w:
        w.write(payload)


def _write_legacy(fh, pickled, storages, protocol):
    sys_info = {"protocol_version": _LEGACY_PROTOCOL, "little_endian": sys.byteorder == "little",
                "type_sizes": {"short": 2, "int": 4, "long": 4}}
    for header in (_LEGACY_MAGIC, _LEGACY_PROTOCOL, sys_info):
        pickle.dump(header, fh, protocol=protocol)
    fh.write(pickled)
    pickle.dump([r.pid[2] for r in storages], fh, protocol=protocol)
    for r in storages:
        fh.write(struct.pack("<q", r.array.size))
        fh.write(_storage_bytes(r.array))


# ---- reading: the functions PyTorch's names stand for --------------------------------------------------
def _rebuild_tensor(storage, storage_offset, size, stride):
    return _view(storage, storage_offset, size, stride)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    t = _view(storage, storage_offset, size, stride)
    if requires_grad:
        t.requires_grad = True
    return t


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None):
    if dtype in D.FLOAT8:  # (one byte per element: a view of the bytes, read as float8)
        t = _view(storage, storage_offset, size, stride, D.uint8).view(dtype)
    else:
        t = _view(storage, storage_offset, size, stride, dtype)
    if requires_grad:
        t.requires_grad = True
    return t


def _rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad):
    storage = D.storage(dtype)
    t = Tensor._wrap(MetaArray(size, storage, [s * np.dtype(storage).itemsize for s in stride]))
    if requires_grad:
        t.requires_grad = True
    return t


def _rebuild_parameter(data, requires_grad, backward_hooks):
    return _parameter_class()(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    param = _rebuild_parameter(data, requires_grad, backward_hooks)
    for k, v in state.items():
        setattr(param, k, v)
    return param


def _rebuild_from_type_v2(func, new_type, args, state):
    # ember has one tensor class: the subclass named in the file is not restored, its attributes are
    ret = func(*args)
    for k, v in state.items():
        setattr(ret, k, v)
    return ret


def _get_layout(name):
    try:
        return by_name(name.removeprefix("torch."))
    except KeyError:
        raise pickle.UnpicklingError(f"ember has no tensors of layout {name}, which the checkpoint holds") from None


def _rebuild_sparse_tensor(layout, data):
    from ._sparse import rebuild_sparse_tensor
    return rebuild_sparse_tensor(layout, data)


def _rebuild_qtensor(storage, storage_offset, size, stride, quantizer_params, requires_grad, backward_hooks):
    """A quantized tensor over ``storage`` (of its integers) with PyTorch's quantizer tuple."""
    from ._quantized import _new, _Quantizer
    ints = _view(storage, storage_offset, size, stride)
    dtype = Q.QUANTIZED_OF[D.FROM_NP[ints._data.dtype]]
    scheme = quantizer_params[0]
    if scheme in (Q.per_tensor_affine, Q.per_tensor_symmetric):
        q = _Quantizer(dtype, Q.per_tensor_affine, float(quantizer_params[1]), int(quantizer_params[2]))
    elif scheme in (Q.per_channel_affine, Q.per_channel_affine_float_qparams, Q.per_channel_symmetric):
        scales, zero_points, axis = quantizer_params[1:]
        floats = zero_points.dtype.is_floating_point
        q = _Quantizer(dtype, Q.per_channel_affine_float_qparams if floats else Q.per_channel_affine,
                       scales=scales._data.astype(np.float32 if floats else np.float64),
                       zero_points=zero_points._data.astype(np.float32 if floats else np.int64), axis=int(axis))
    else:
        raise pickle.UnpicklingError(f"unsupported quantization scheme in checkpoint: {scheme!r}")
    return _new(ints._data, q)


class _ScriptObject:
    """``torch.ScriptObject`` while unpickling: its state names the TorchScript class; the object becomes that
    class's ember stand-in (in place, so that references to it already unpickled stay valid)."""

    def __setstate__(self, state):
        payload, qualname = state
        make = _SCRIPT_MAKERS.get(qualname)
        provider = _SCRIPT_PROVIDERS.get(qualname.rpartition(".")[0].rpartition(".")[2])
        if make is None and provider is not None:
            try:
                importlib.import_module(provider[0])
            except ImportError:
                raise pickle.UnpicklingError(f"the checkpoint holds {qualname} objects: loading them needs "
                                             f"{provider[1]} (pip install {provider[1]})") from None
            make = _SCRIPT_MAKERS.get(qualname)
        if make is None:
            raise pickle.UnpicklingError(f"ember cannot load the TorchScript class {qualname} of this checkpoint: "
                                         "it has no ember counterpart")
        made = make(payload)
        self.__class__ = type(made)
        self.__dict__.update(made.__dict__)


def _parameter_class():
    try:
        from .nn import Parameter
    except ImportError:
        raise pickle.UnpicklingError("the checkpoint holds nn.Parameter objects: loading them needs ember-nn "
                                     "(pip install ember-nn)") from None
    return Parameter


def _view(storage, offset, size, stride, dtype=None):
    """A tensor over ``storage`` (the 1-D tensor of a storage) with PyTorch's offset/size/stride."""
    arr = storage._data if dtype is None else storage._data.view(D.storage(dtype))
    size, stride = tuple(map(int, size)), tuple(map(int, stride))
    if len(size) != len(stride) or min(size + stride + (offset,), default=0) < 0:
        raise RuntimeError(f"invalid tensor layout in checkpoint: size {list(size)}, stride {list(stride)}, "
                           f"storage offset {offset}")
    need = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if 0 not in size else 0
    if need > arr.size:  # never let a crafted file read past the storage
        raise RuntimeError(f"tensor of size {list(size)}, stride {list(stride)} and storage offset {offset} needs "
                           f"{need} elements but its storage has {arr.size}")
    xp = _backend.xp_of(arr)
    start = arr[offset:] if need else arr[:0]
    view = xp.lib.stride_tricks.as_strided(start, size, tuple(s * arr.itemsize for s in stride))
    if offset == 0 and view.size == arr.size and view.flags.c_contiguous:
        t = Tensor._wrap(view)  # the whole storage: an ordinary tensor, not a view
        t._vc = storage._vc
        return t
    return Tensor._wrap(view)._view_of(storage)


# PyTorch's global names -> ember objects (storage classes stand for their dtype)
_TORCH = {
    "torch._utils._rebuild_tensor": _rebuild_tensor,
    "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
    "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
    "torch._utils._rebuild_parameter": _rebuild_parameter,
    "torch._utils._rebuild_meta_tensor_no_storage": _rebuild_meta_tensor_no_storage,
    "torch._utils._rebuild_parameter_with_state": _rebuild_parameter_with_state,
    "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
    "torch.serialization._get_layout": _get_layout,
    "torch._utils._rebuild_sparse_tensor": _rebuild_sparse_tensor,
    "torch._utils._rebuild_qtensor": _rebuild_qtensor,
    **{f"torch.{qs.name}": qs for qs in Q.QSCHEMES},
    **{f"torch.{d.name}": d for d in Q.QUANTIZED},
    **{f"torch.{name}": d for d, name in _QSTORAGE.items()},
    "torch.Size": Size, "torch.device": device, "torch.Tensor": Tensor,
    "torch.storage.UntypedStorage": D.uint8,
    **{f"torch.{d.name}": d for d in D.ALL + D.FLOAT8},
    **{f"torch.{name}": d for d, name in _STORAGE.items()},
    **{f"torch.cuda.{name}": d for d, name in _STORAGE.items()},
}
# what weights_only=True allows besides the torch names (the set PyTorch allows by default)
_SAFE = {"collections.OrderedDict": collections.OrderedDict, "collections.Counter": collections.Counter,
         "builtins.set": set, "builtins.complex": complex, "builtins.bytearray": bytearray,
         "_codecs.encode": codecs.encode}
_user_safe = {}


def add_safe_globals(safe_globals):
    """Allow more globals under ``weights_only=True``: objects, or ``(object, "module.name")`` pairs."""
    for g in safe_globals:
        obj, name = g if isinstance(g, tuple) else (g, f"{g.__module__}.{g.__qualname__}")
        _user_safe[name] = obj


def get_safe_globals():
    return [obj if name == f"{obj.__module__}.{getattr(obj, '__qualname__', '')}" else (obj, name)
            for name, obj in _user_safe.items()]


def clear_safe_globals():
    _user_safe.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    """Allow ``safe_globals`` under ``weights_only=True`` within a ``with`` block."""
    saved = dict(_user_safe)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        _user_safe.clear()
        _user_safe.update(saved)


def _unpickler_class(base):
    class _CheckpointUnpickler(base):
        """Maps PyTorch's names to ember; with ``weights_only`` every other global must be allow-listed."""

        def __init__(self, file, storage_loader, weights_only, **kwargs):
            super().__init__(file, **kwargs)
            self._storage_loader, self._weights_only = storage_loader, weights_only

        def find_class(self, module, name):
            module, name = _py3_name(module, name)
            qualname = f"{module}.{name}"
            if qualname == "torch.nn.parameter.Parameter":
                return _parameter_class()
            if qualname in _TORCH:
                return _TORCH[qualname]
            if qualname == "torch.ScriptObject":
                if self._weights_only:  # (as PyTorch's allow-list: TorchScript objects may run code)
                    raise pickle.UnpicklingError("Weights only load failed: the checkpoint holds TorchScript class "
                                                 "objects (torch.ScriptObject), e.g. the packed weights of "
                                                 "dynamically quantized RNNs. Load only files you trust with "
                                                 "weights_only=False.")
                return _ScriptObject
            if module == "torch" or module.startswith("torch."):  # never import torch itself
                raise pickle.UnpicklingError(f"ember cannot load the global {qualname} of this checkpoint: it "
                                             "has no ember counterpart")
            if not self._weights_only:
                return super().find_class(module, name)
            obj = _SAFE.get(qualname, _user_safe.get(qualname))
            if obj is None:
                raise pickle.UnpicklingError(
                    f"Weights only load failed: the checkpoint uses the global {qualname}, which is not on the "
                    "allow-list. Load only files you trust with weights_only=False, or allow it with "
                    f"ember.serialization.add_safe_globals([{qualname}]).")
            return obj

        def persistent_load(self, pid):
            if self._storage_loader is None or not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
                raise pickle.UnpicklingError(f"unsupported persistent id in checkpoint: {pid!r}")
            if not isinstance(pid[1], D.dtype):
                raise pickle.UnpicklingError(f"invalid storage type in checkpoint: {pid[1]!r}")
            return self._storage_loader(*pid[1:])

    return _CheckpointUnpickler


def _py3_name(module, name):
    """Protocol 2 pickles name builtins as ``__builtin__``: the Python 2 names, mapped as pickle does."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


# ---- reading: files ----------------------------------------------------------------------------------
_TRUE = ("1", "y", "yes", "true")


def _weights_only_by_environment(weights_only, pickle_module):
    """``weights_only`` as PyTorch's variables set it, so that older programs whose ``torch.load`` reads whole
    modules run unchanged: TORCH_FORCE_WEIGHTS_ONLY_LOAD forces it on; TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD turns
    the default off (an explicit argument still wins)."""
    force_on = os.getenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0") in _TRUE
    force_off = os.getenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0") in _TRUE
    if force_on and force_off:
        raise RuntimeError("Only one of `TORCH_FORCE_WEIGHTS_ONLY_LOAD` or `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD` "
                           "should be set, but both were set.")
    if force_on:
        return True
    if weights_only is None:
        if force_off:
            warnings.warn("Environment variable TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD detected, since the "
                          "`weights_only` argument was not explicitly passed to `torch.load`, forcing "
                          "weights_only=False.", UserWarning, stacklevel=3)
            return False
        return pickle_module is None
    return weights_only


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Load an object saved by ``ember.save`` or ``torch.save`` (zip or legacy format).

    ``weights_only=True`` (the default unless a ``pickle_module`` is given, as in PyTorch) unpickles only
    tensors, containers and the allow-listed globals. ``_extra_files=d`` fills ``d[name]`` with the bytes
    of ``<archive>/extra/<name>``.
    """
    extra_files = pickle_load_args.pop("_extra_files", None)
    weights_only = _weights_only_by_environment(weights_only, pickle_module)
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    unpickler = _unpickler_class((pickle_module or pickle).Unpickler)
    pickle_load_args.setdefault("encoding", "utf-8")
    if mmap and not _is_path(f):
        raise ValueError(f"f must be a file path in order to use the mmap argument, got {type(f).__name__}")

    def unpickle(file, storage_loader):
        return unpickler(file, storage_loader, weights_only, **pickle_load_args).load()

    with _opened(f, "rb") as fh:
        if fh.read(4) == b"PK\x03\x04":
            fh.seek(0)
            with zipfile.ZipFile(fh) as zf:
                return _load_zip(zf, unpickle, map_location, extra_files, f if mmap else None)
        fh.seek(0)
        if mmap:
            raise RuntimeError("mmap can only be used with files saved in the zip format "
                               "(_use_new_zipfile_serialization=True)")
        if extra_files:
            raise RuntimeError("_extra_files can only be read from files saved in the zip format")
        return _load_legacy(fh, unpickle, map_location)


def _load_zip(zf, unpickle, map_location, extra_files, mmap_path):
    pkl = [n for n in zf.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pkl) != 1:
        raise RuntimeError("not a PyTorch checkpoint: the zip archive has no <archive>/data.pkl record")
    prefix = pkl[0][:-len("data.pkl")]
    names = set(zf.namelist())
    swap = prefix + "byteorder" in names and zf.read(prefix + "byteorder").decode() != sys.byteorder
    mapped = np.memmap(mmap_path, dtype=np.uint8, mode="c") if mmap_path is not None else None
    storages = {}

    def load_storage(dtype, key, location, numel):
        if key not in storages:
            info = zf.getinfo(f"{prefix}data/{key}")
            np_dtype = D.storage(dtype)
            if numel * np_dtype.itemsize != info.file_size:
                raise RuntimeError(f"storage record {info.filename} holds {info.file_size} bytes, the checkpoint "
                                   f"expects {numel} elements of {dtype}")
            if mapped is not None:
                if info.compress_type != zipfile.ZIP_STORED:
                    raise RuntimeError("mmap needs uncompressed storage records")
                start = _data_offset(zf.fp, info)
                # a plain ndarray over the mapping: ember tells host arrays by their exact type
                arr = mapped[start:start + info.file_size].view(np.ndarray).view(np_dtype)
            else:
                arr = np.empty(numel, np_dtype)
                _read_record(zf, info, arr.view(np.uint8))
            if swap:
                arr.byteswap(inplace=True)
            storages[key] = _restore(Tensor._wrap(arr), location, map_location)
        return storages[key]

    result = unpickle(io.BytesIO(zf.read(pkl[0])), load_storage)
    for name in extra_files or ():
        rec = f"{prefix}extra/{name}"
        extra_files[name] = zf.read(rec) if rec in names else b""  # as torch.jit.load does
    return result


def _data_offset(fh, info):
    """Where a stored record's data starts in the file (past its local header, whose extra field may
    differ from the central directory's)."""
    fh.seek(info.header_offset + 26)
    name_len, extra_len = struct.unpack("<HH", fh.read(4))
    return info.header_offset + 30 + name_len + extra_len


def _read_record(zf, info, buf):
    """Read a record into ``buf``: straight from the file when stored (5x faster than ZipExtFile)."""
    if info.compress_type != zipfile.ZIP_STORED or not zf.fp.seekable():
        with zf.open(info) as r:
            r.readinto(buf)
        return
    zf.fp.seek(_data_offset(zf.fp, info))
    if zf.fp.readinto(buf) != len(buf):
        raise RuntimeError(f"truncated checkpoint: record {info.filename} is incomplete")


def _load_legacy(fh, unpickle, map_location):
    """The pre-zip format: magic, protocol, sys_info, the object, its storage keys, then each storage's
    int64 element count and bytes. The storages come after the object but are needed (placed on their
    device) before its tensors are built: a first, inert pass over the object finds their dtypes."""
    if not fh.seekable():
        fh = io.BytesIO(fh.read())

    def header():
        return unpickle(fh, None)

    try:
        magic = header()
    except pickle.UnpicklingError as e:
        raise RuntimeError("not a PyTorch checkpoint: neither a zip archive nor the legacy format") from e
    if magic != _LEGACY_MAGIC:
        raise RuntimeError("not a PyTorch checkpoint: invalid magic number; corrupt file?")
    if header() != _LEGACY_PROTOCOL:
        raise RuntimeError("unsupported legacy checkpoint protocol version")
    swap = header().get("little_endian", True) != (sys.byteorder == "little")
    start, end = fh.tell(), fh.seek(0, os.SEEK_END)
    fh.seek(start)
    scan = _StorageScan(fh)
    scan.load()
    storages = {}
    for key in header():
        (numel,) = struct.unpack("<q", fh.read(8))
        np_dtype = D.storage(scan.dtypes[key][0])
        if not 0 <= numel * np_dtype.itemsize <= end - fh.tell():
            raise RuntimeError(f"corrupt checkpoint: storage {key} claims {numel} elements")
        arr = np.empty(numel, np_dtype)
        if fh.readinto(arr.view(np.uint8)) != arr.nbytes:
            raise RuntimeError(f"truncated checkpoint: storage {key} is incomplete")
        if swap:
            arr.byteswap(inplace=True)
        storages[key] = _restore(Tensor._wrap(arr), scan.dtypes[key][1], map_location)

    def load_storage(dtype, key, location, numel, view_metadata=None):
        if view_metadata is None:
            return storages[key]
        view_key, offset, size = view_metadata  # an old-style view of part of a storage
        if view_key not in storages:
            base = storages[key]
            storages[view_key] = Tensor._wrap(base._data[offset:offset + size])._view_of(base)
        return storages[view_key]

    fh.seek(start)
    return unpickle(fh, load_storage)


class _Inert:
    """Stands for every global while _StorageScan reads a pickle: building it runs nothing."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Inert()

    def __setstate__(self, state):
        pass

    def __setitem__(self, key, value):
        pass

    def append(self, item):
        pass

    def extend(self, items):
        pass


class _StorageScan(pickle.Unpickler):
    """Reads a legacy checkpoint's object pickle only to learn each storage's dtype and location."""

    def __init__(self, file):
        super().__init__(file, encoding="utf-8")
        self.dtypes = {}

    def find_class(self, module, name):
        obj = _TORCH.get(".".join(_py3_name(module, name)))
        return obj if isinstance(obj, D.dtype) else _Inert

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage" and isinstance(pid[1], D.dtype):
            self.dtypes[pid[2]] = (pid[1], pid[3])
        return _Inert()


def _restore(storage, location, map_location):
    """Place a loaded (host) storage where ``map_location`` says, as torch.load does."""
    if callable(map_location):
        placed = map_location(storage, location)
        if placed is not None:
            return placed
    elif isinstance(map_location, dict):
        location = str(map_location.get(location, location))
    elif map_location is not None:
        location = str(map_location)
    dev = device(location)
    if dev.type == "cpu":
        return storage
    if dev.type == "cuda" and not _cuda_available():
        raise RuntimeError("Attempting to deserialize object on a CUDA device but ember.cuda.is_available() is "
                           "False. If you are running on a CPU-only machine, please use ember.load with "
                           "map_location=ember.device('cpu') to map your storages to the CPU.")
    return Tensor._wrap(_backend.to_device(storage._data, dev))


def _cuda_available():
    try:
        from . import cuda
    except ImportError:
        return False
    return cuda.is_available()


# ---- helpers -----------------------------------------------------------------------------------------
def _is_path(f):
    return isinstance(f, (str, os.PathLike))


@contextlib.contextmanager
def _opened(f, mode):
    if _is_path(f):
        with open(f, mode) as fh:
            yield fh
    else:
        yield f


def reduce_tensor(t):
    """``Tensor.__reduce_ex__`` for plain pickling (copy, multiprocessing): the array and requires_grad."""
    return _rebuild_plain, (t._data, t._rg)


def _rebuild_plain(arr, requires_grad):
    t = Tensor._wrap(arr)
    if requires_grad:
        t.requires_grad = True
    return t
