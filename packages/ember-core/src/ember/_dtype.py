"""ember's dtypes: PyTorch's names and properties over NumPy (and ml_dtypes) storage types."""
import builtins
import math

import ml_dtypes
import numpy as np

_CATEGORY = {"bool": 0, "int": 1, "float": 2, "complex": 3}


class dtype:
    """A tensor element type. Instances are singletons; compare them with ``is`` or ``==``."""

    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_complex", "is_signed",
                 "category", "rank", "_abbr", "__weakref__")

    def __init__(self, name, np_type, category, rank, abbr):
        self.name = name
        self.np = np.dtype(np_type) if np_type is not None else None
        self.category = _CATEGORY[category]
        self.is_floating_point = category == "float"
        self.is_complex = category == "complex"
        self.is_signed = name not in ("bool", "uint8")
        self.itemsize = {"complex32": 4}.get(name) or self.np.itemsize
        self.rank = rank  # order of promotion within a category
        self._abbr = abbr

    def __repr__(self):
        return "ember." + self.name

    __str__ = __repr__

    def __reduce__(self):
        return (_by_name, (self.name,))

    def to_real(self):
        return {"complex64": float32, "complex128": float64, "complex32": float16}.get(self.name, self)

    def to_complex(self):
        if self.is_complex:
            return self
        return {"float16": complex32, "float64": complex128}.get(self.name, complex64)

    @property
    def is_signed_integer(self):
        return self.category == 1 and self.is_signed


bool = dtype("bool", np.bool_, "bool", 0, "b1")
uint8 = dtype("uint8", np.uint8, "int", 0, "u1")
int8 = dtype("int8", np.int8, "int", 1, "i1")
int16 = dtype("int16", np.int16, "int", 2, "i2")
int32 = dtype("int32", np.int32, "int", 3, "i4")
int64 = dtype("int64", np.int64, "int", 4, "i8")
float16 = dtype("float16", np.float16, "float", 1, "f2")
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, "float", 1, "bf16")
float32 = dtype("float32", np.float32, "float", 2, "f4")
float64 = dtype("float64", np.float64, "float", 3, "f8")
complex32 = dtype("complex32", None, "complex", 1, "c4")  # no NumPy storage: promotion results only
complex64 = dtype("complex64", np.complex64, "complex", 2, "c8")
complex128 = dtype("complex128", np.complex128, "complex", 3, "c16")


class _Float8(dtype):
    """A float8 storage type (``ember.float8_e4m3fn``, ...): ``ml`` is its ml_dtypes type, ``torch_name`` PyTorch's
    scalar-type name. Its ``np`` is None, so that only ``ember._float8`` makes arrays of it (``storage`` refuses)."""

    __slots__ = ("ml", "torch_name")

    def __init__(self, name, ml_type, torch_name, signed=True):
        self.name, self.np, self.category, self.rank, self._abbr = name, None, 2, 0, name
        self.is_floating_point, self.is_complex, self.is_signed, self.itemsize = True, False, signed, 1
        self.ml, self.torch_name = np.dtype(ml_type), torch_name

    def to_real(self):
        return self

    def to_complex(self):
        raise RuntimeError(f"Unknown Complex ScalarType for {self.torch_name}")


float8_e4m3fn = _Float8("float8_e4m3fn", ml_dtypes.float8_e4m3fn, "Float8_e4m3fn")
float8_e5m2 = _Float8("float8_e5m2", ml_dtypes.float8_e5m2, "Float8_e5m2")
float8_e4m3fnuz = _Float8("float8_e4m3fnuz", ml_dtypes.float8_e4m3fnuz, "Float8_e4m3fnuz")
float8_e5m2fnuz = _Float8("float8_e5m2fnuz", ml_dtypes.float8_e5m2fnuz, "Float8_e5m2fnuz")
float8_e8m0fnu = _Float8("float8_e8m0fnu", ml_dtypes.float8_e8m0fnu, "Float8_e8m0fnu", signed=False)
FLOAT8 = (float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu)

# PyTorch's aliases
half, float, double = float16, float32, float64
short, int, long = int16, int32, int64
cfloat, cdouble, chalf = complex64, complex128, complex32

ALL = (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64,
       complex32, complex64, complex128)
_NAMES = {d.name: d for d in ALL + FLOAT8}
# C++ type names, used in PyTorch's messages
CPP_NAME = {bool: "bool", uint8: "unsigned char", int8: "signed char", int16: "short int", int32: "int",
            int64: "long int", float16: "c10::Half", bfloat16: "c10::BFloat16", float32: "float", float64: "double",
            complex64: "c10::complex<float>", complex128: "c10::complex<double>"}
# NumPy storage type -> ember dtype (the lookup done for every tensor's .dtype)
FROM_NP = {d.np: d for d in ALL if d.np is not None}
FROM_NP.update({d.np.type: d for d in ALL if d.np is not None})


def _by_name(name):
    return _NAMES[name]


def from_np(np_dtype):
    """The ember dtype of a NumPy dtype; TypeError for types PyTorch has no tensor for."""
    try:
        return FROM_NP[np_dtype]
    except (KeyError, TypeError):
        pass
    try:
        return FROM_NP[np.dtype(np_dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"can't convert np.ndarray of type {np.dtype(np_dtype)}. The only supported types "
                        "are: float64, float32, float16, bfloat16, complex64, complex128, int64, int32, "
                        "int16, int8, uint8, and bool.") from None


# C++ names of the integer types in PyTorch's "value cannot be converted" messages
_C_INT = {np.dtype(np.uint8): "uint8_t", np.dtype(np.int8): "int8_t", np.dtype(np.int16): "int16_t",
          np.dtype(np.int32): "int", np.dtype(np.int64): "int64_t"}


def number_as(value, np_dtype):
    """Python number ``value`` as a fill value or bound for an integer array of ``np_dtype``, converted as PyTorch
    converts one: in the type's range (for unsigned types, integers down to -max too, which wrap around as C++
    casts do: ``fill_(-1)`` of a uint8 tensor gives 255; floats truncate) or PyTorch's RuntimeError, where NumPy
    raises OverflowError for an integer and casts a float silently. Other values and dtypes pass unchanged."""
    if np_dtype.kind not in "iu" or isinstance(value, (builtins.bool, np.bool_)) or not isinstance(
            value, (builtins.int, builtins.float, np.integer, np.floating)):
        return value
    info = np.iinfo(np_dtype)
    low = -builtins.int(info.max) if np_dtype.kind == "u" and isinstance(value, (builtins.int, np.integer)) \
        else builtins.int(info.min)
    if not low <= value <= info.max:  # (NaN too)
        raise RuntimeError(f"value cannot be converted to type {_C_INT[np_dtype]} without overflow")
    return np.array(builtins.int(value), np.int64).astype(np_dtype)[()]


def storage(d):
    """The NumPy dtype that stores ember dtype ``d``."""
    if d in FLOAT8:  # (only ember._float8 makes their arrays: whatever else asks has no kernel for them)
        raise NotImplementedError(f"this op is not implemented for '{d.torch_name}' tensors")
    if d.np is None:
        raise TypeError(f"{d} tensors are not supported by ember")
    return d.np


_default_float = [float32]
_on_default_change = []  # callbacks: caches keyed on the default dtype register here


def get_default_dtype():
    return _default_float[0]


def set_default_dtype(d):
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default_float[0] = d
    for callback in _on_default_change:
        callback()


def default_complex():
    return {float64: complex128, float16: complex32}.get(_default_float[0], complex64)


class finfo:
    """Machine limits of a floating-point dtype (``ember.finfo(ember.float32).eps``)."""

    def __init__(self, type=None):
        type = get_default_dtype() if type is None else type
        if not (type.is_floating_point or type.is_complex):
            raise TypeError(f"finfo() requires a floating point input type. Use iinfo to handle '{type}'")
        real = type.to_real()
        info = ml_dtypes.finfo(real.ml if real in FLOAT8 else storage(real))
        self.dtype = real.name
        self.bits = info.bits
        self.eps = builtins.float(info.eps)
        self.max = builtins.float(info.max)
        self.min = builtins.float(info.min)
        self.tiny = self.smallest_normal = builtins.float(info.smallest_normal)
        # a power of ten, not rounded to the dtype: the decimal digits the mantissa holds, as PyTorch counts them
        self.resolution = 10.0 ** -math.floor(info.nmant * math.log10(2))

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Machine limits of an integer dtype."""

    def __init__(self, type):
        if type.is_floating_point or type.is_complex:
            raise TypeError(f"iinfo() requires an integer input type. Use finfo to handle '{type}'")
        info = np.iinfo(storage(type)) if type is not bool else None
        self.dtype = type.name
        self.bits = type.itemsize * 8
        self.min = builtins.int(info.min) if info else 0
        self.max = builtins.int(info.max) if info else 1

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
