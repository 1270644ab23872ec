"""The legacy typed constructors (``ember.FloatTensor``, ``ember.cuda.LongTensor``, ...) and type strings.

Each legacy type is a class whose metaclass makes it behave as in PyTorch: calling it makes a plain
``ember.Tensor`` of its dtype on its device type (``FloatTensor(2, 3)`` uninitialised, ``FloatTensor([1, 2])``
from data, ``FloatTensor(t)`` an alias of a tensor of that very type), and ``isinstance(t, ember.FloatTensor)``
is True for every float32 CPU tensor. Nothing is ever an instance of these classes by type.

``Tensor.type()`` returns PyTorch's spelling, ``'torch.FloatTensor'`` / ``'torch.cuda.FloatTensor'``: programs
compare it with such literals. ``Tensor.type(...)`` accepts those strings (and the same with ``ember.``), the
classes here, ``ember.Tensor`` (the default dtype) and dtypes.
"""
import builtins

from . import _dtype as D
from ._device import as_device
from ._size import Size
from ._tensor import _LEGACY_TYPE, Tensor

# dtype name -> legacy type name (quantized ones live under torch.quantized, as in PyTorch)
NAMES = {d.name: n for d, n in _LEGACY_TYPE.items()}
NAMES.update({"complex32": "ComplexHalfTensor", "qint8": "quantized.QInt8Tensor", "quint8": "quantized.QUInt8Tensor",
              "qint32": "quantized.QInt32Tensor", "quint4x2": "quantized.QUInt4x2Tensor",
              **{d.name: d.torch_name + "Tensor" for d in D.FLOAT8}})
# the constructors PyTorch offers (complex and quantized types have names but no constructor)
_CONSTRUCTED = (D.float32, D.float64, D.float16, D.bfloat16, D.int64, D.int32, D.int16, D.int8, D.uint8, D.bool)


class LegacyTensorType(type):
    """Metaclass of the legacy typed constructors: a call constructs, ``isinstance`` checks dtype and device type."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == cls._device_type

    def __call__(cls, *args, device=None):
        dev = cls._device_type
        if device is not None:
            dev = as_device(device)
            if dev.type != cls._device_type:
                raise RuntimeError(f"legacy constructor expects device type: {cls._device_type} but device type: "
                                   f"{dev.type} was passed")
        if cls._device_type == "cuda":
            from . import cuda
            if not cuda.is_available():
                raise TypeError(f"type ember.cuda.{cls.__name__} not available: CUDA is not available: "
                                f"{cuda._driver_probe()[1]}")
        from . import _factory
        if len(args) == 1 and not isinstance(args[0], (builtins.int, Size)):
            data = args[0]
            if isinstance(data, Tensor):
                if data.dtype is not cls.dtype or data.device.type != cls._device_type:
                    raise TypeError(f"{cls.__name__}(tensor) expects a tensor of dtype {cls.dtype} on "
                                    f"{cls._device_type}, got dtype {data.dtype} on {data.device.type}")
                return data.view_as(data)  # an alias, as PyTorch returns
            if isinstance(data, (builtins.float, builtins.complex)):
                raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
            return _factory.tensor(data, dtype=cls.dtype, device=dev)
        if len(args) == 1 and isinstance(args[0], Size):
            args = tuple(args[0])
        bad = [type(a).__name__ for a in args if not isinstance(a, builtins.int) or isinstance(a, builtins.bool)]
        if bad:
            raise TypeError(f"new(): expected sizes as ints or one data argument, but got "
                            f"({', '.join(type(a).__name__ for a in args)})")
        return _factory.empty(*(args or (0,)), dtype=cls.dtype, device=dev)


def _make(d, device_type):
    name = NAMES[d.name]
    doc = f"Legacy constructor of {d} tensors on {device_type} (``{name}(2, 3)``, ``{name}([1, 2])``)."
    return LegacyTensorType(name, (), {"dtype": d, "_device_type": device_type, "is_cuda": device_type == "cuda",
                                       "is_sparse": False, "__module__": "ember.cuda" if device_type == "cuda"
                                       else "ember", "__doc__": doc})


CPU_TYPES = {NAMES[d.name]: _make(d, "cpu") for d in _CONSTRUCTED}
CUDA_TYPES = {NAMES[d.name]: _make(d, "cuda") for d in _CONSTRUCTED}
globals().update(CPU_TYPES)  # the ember.* ones are exported from here; ember.cuda takes CUDA_TYPES
__all__ = list(CPU_TYPES)
_BY_NAME = {n: D._by_name(d) for d, n in NAMES.items() if d in D._NAMES}


def type_name(t):
    """``'torch.FloatTensor'``, ``'torch.cuda.LongTensor'``: a tensor's legacy type string (PyTorch's spelling)."""
    return ("torch.cuda." if t.is_cuda else "torch.meta." if t.is_meta else "torch.") + NAMES[t.dtype.name]


def parse(name):
    """(dtype, device type) named by ``'torch.FloatTensor'``, ``'torch.cuda.IntTensor'`` (or ``ember.``...)."""
    head, _, tail = name.partition(".")
    device_type = "cpu"
    if tail.startswith("cuda."):
        device_type, tail = "cuda", tail[len("cuda."):]
    if head not in ("torch", "ember") or tail not in _BY_NAME:
        raise ValueError(f"invalid type: '{name}'")
    return _BY_NAME[tail], device_type


def tensor_type(t, dtype=None, non_blocking=False):
    """``Tensor.type``: the type string without an argument, else ``t`` converted to the named type (``t``
    itself when it already has it)."""
    if dtype is None:
        return type_name(t)
    if isinstance(dtype, str):
        dtype, device_type = parse(dtype)
    elif isinstance(dtype, LegacyTensorType):
        dtype, device_type = dtype.dtype, dtype._device_type
    elif isinstance(dtype, type) and issubclass(dtype, Tensor):
        dtype, device_type = D.get_default_dtype(), "cpu"
    elif isinstance(dtype, D.dtype):
        device_type = t.device.type
    else:
        raise TypeError("dtype must be a type, str, or dtype object")
    device = None if device_type == t.device.type else device_type
    return t.to(dtype=dtype, device=device, non_blocking=non_blocking)
