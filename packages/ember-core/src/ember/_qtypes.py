"""Quantized dtypes (``ember.qint8``, ``quint8``, ``qint32``, ``quint4x2``, ``quint2x4``) and quantization schemes.

A quantized dtype is an ``ember.dtype`` whose ``np`` is the integer type of its stored values; it is in neither
``_dtype.ALL`` nor ``_dtype.FROM_NP``, so promotion, the op registry and NumPy arrays never meet one: only the
quantized tensors of ``ember._quantized`` carry them.
"""
import numpy as np

from . import _dtype as D


class _QuantizedDtype(D.dtype):
    """A quantized element type: ``qmin``/``qmax`` bound its integers, ``bits`` per value (``quint4x2`` packs two
    4-bit values in a byte), ``torch_name`` is PyTorch's scalar-type name (QUInt8) used in its messages."""

    __slots__ = ("qmin", "qmax", "bits", "torch_name")

    def __init__(self, name, np_type, qmin, qmax, bits, torch_name):
        # (dtype.__init__ would store is_signed, which PyTorch refuses to answer for quantized types)
        self.name, self.np, self.category, self.rank = name, np.dtype(np_type), 1, 0
        self.is_floating_point = self.is_complex = False
        self.itemsize = self.np.itemsize
        self._abbr = name
        self.qmin, self.qmax, self.bits, self.torch_name = qmin, qmax, bits, torch_name

    @property
    def is_signed(self):
        raise RuntimeError("isSignedType not supported for quantized types")

    is_signed_integer = is_signed

    def to_real(self):
        return self

    def to_complex(self):
        raise RuntimeError(f"Unknown Complex ScalarType for {self.torch_name}")

    def __reduce__(self):
        return (by_name, (self.name,))


qint8 = _QuantizedDtype("qint8", np.int8, -128, 127, 8, "QInt8")
quint8 = _QuantizedDtype("quint8", np.uint8, 0, 255, 8, "QUInt8")
qint32 = _QuantizedDtype("qint32", np.int32, -(1 << 31), (1 << 31) - 1, 32, "QInt32")
quint4x2 = _QuantizedDtype("quint4x2", np.uint8, 0, 15, 4, "QUInt4x2")
quint2x4 = _QuantizedDtype("quint2x4", np.uint8, 0, 3, 2, "QUInt2x4")
QUANTIZED = (qint8, quint8, qint32, quint4x2, quint2x4)
_BY_NAME = {d.name: d for d in QUANTIZED}
# the integer dtype of each quantized dtype's int_repr (quint4x2/quint2x4: packed bytes)
INT_OF = {qint8: D.int8, quint8: D.uint8, qint32: D.int32, quint4x2: D.uint8, quint2x4: D.uint8}
QUANTIZED_OF = {D.int8: qint8, D.uint8: quint8, D.int32: qint32}


def by_name(name):
    return _BY_NAME[name]


class qscheme:
    """How a quantized tensor maps its integers to real values (``ember.per_tensor_affine``, ...)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "ember." + self.name

    def __reduce__(self):
        return self.name  # a global of this module, as PyTorch pickles its schemes


per_tensor_affine = qscheme("per_tensor_affine")
per_channel_affine = qscheme("per_channel_affine")
per_tensor_symmetric = qscheme("per_tensor_symmetric")
per_channel_symmetric = qscheme("per_channel_symmetric")
per_channel_affine_float_qparams = qscheme("per_channel_affine_float_qparams")
QSCHEMES = (per_tensor_affine, per_channel_affine, per_tensor_symmetric, per_channel_symmetric,
            per_channel_affine_float_qparams)
