"""float8 tensors (``ember.float8_e4m3fn``, ``float8_e5m2``, ``float8_e4m3fnuz``, ``float8_e5m2fnuz``,
``float8_e8m0fnu``): storage for scaled matrix products (``ember._scaled_mm``).

PyTorch gives them few CPU ops: creation and casts, copies, views and indexing, joins, ``where``, equality, the NaN and
infinity tests, ``abs``, ``mm``; the others raise NotImplementedError, and mixing a float8 tensor with another dtype
raises "Promotion for Float8 Types is not supported". ember follows the pattern of its quantized tensors: a
``Float8Tensor`` holds a stand-in (``_F8Array``) over an ml_dtypes array instead of a NumPy array of a dtype the
registry knows, so every op it meets reaches ``dispatch`` below, which runs the allowed ones (layout ops on the
bytes, values through float32) and refuses the rest.

Casts are PyTorch's: float8_e4m3fn saturates to +-448 (infinities too) where ml_dtypes gives NaN; float8_e8m0fnu
(powers of two) drops the sign and rounds the exponent up from a mantissa of one half, 0 giving 2**-127; the other
types round to nearest even (ml_dtypes' casts).
"""
import numpy as np

from . import _dtype as D
from . import _promotion as P
from ._registry import REGISTRY, STAND_INS, TORCH_NAME
from ._tensor import HostStandInTensor, Tensor, _address, tensors_in

_BY_ML = {d.ml: d for d in D.FLOAT8}
TORCH_NAME.update({d: d.torch_name for d in D.FLOAT8})
_E4M3_MAX = np.float32(448.0)

# layout ops PyTorch runs on float8 tensors: ember runs them on the bytes
_ON_BYTES = {"view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze",
             "__getitem__", "narrow", "select", "unbind", "chunk", "split", "split_with_sizes", "tensor_split",
             "clone", "t", "transpose", "permute", "expand", "expand_as", "movedim", "moveaxis", "swapaxes",
             "swapdims", "as_strided", "repeat", "index_select", "ravel", "diagonal", "masked_select", "roll",
             "cat", "concat", "concatenate", "stack", "where"}
# ops computed on the float32 values: name -> (the result is float8, the dtypes PyTorch has the kernel for)
_NOT_E8M0 = set(D.FLOAT8) - {D.float8_e8m0fnu}
_ON_VALUES = {"abs": (True, _NOT_E8M0), "mm": (True, _NOT_E8M0), "matmul": (True, _NOT_E8M0),
              **dict.fromkeys(("eq", "ne", "isnan", "any", "all"), (False, set(D.FLOAT8))),
              "isinf": (False, {D.float8_e5m2}), "isfinite": (False, {D.float8_e5m2, D.float8_e8m0fnu})}


class _F8Array:
    """The stand-in array of a float8 tensor: its ml_dtypes array ``arr``. It reads as uint8 (the bytes), a dtype
    the registry's promotion knows, before the registry meets the stand-in and hands the call to ``dispatch``."""

    __slots__ = ("arr",)

    def __init__(self, arr):
        self.arr = arr

    shape = property(lambda self: self.arr.shape)
    ndim = property(lambda self: self.arr.ndim)
    size = property(lambda self: self.arr.size)
    strides = property(lambda self: self.arr.strides)
    itemsize = property(lambda self: 1)
    nbytes = property(lambda self: self.arr.nbytes)
    flags = property(lambda self: self.arr.flags)
    dtype = property(lambda self: np.dtype(np.uint8))

    def __array__(self, *args, **kwargs):
        raise TypeError(f"Got unsupported ScalarType {_BY_ML[self.arr.dtype].torch_name}")


class Float8Tensor(HostStandInTensor):
    """A tensor of a float8 dtype (on the CPU)."""

    __slots__ = ()
    _prints_as_tensor = True

    @property
    def dtype(self):
        return _BY_ML[self._data.arr.dtype]

    def storage_offset(self):
        return _address(self._data.arr) - _address(_bytes_of(self._base if self._base is not None else self))

    def _host(self):
        return self._data.arr.astype(np.float32)  # (the values, for printing and tolist)

    def tolist(self):
        return self._host().tolist()

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return float(self._host().reshape(()))

    def numpy(self, *, force=False):
        raise TypeError(f"Got unsupported ScalarType {self.dtype.torch_name}")

    def untyped_storage(self):
        from ._storage import UntypedStorage, _span
        return UntypedStorage._over(_span(_bytes_of(self._base if self._base is not None else self)))

    def detach(self):
        return _alias(self._data.arr, self)

    def contiguous(self, memory_format=None):
        return self if self._data.arr.flags.c_contiguous else _new(np.ascontiguousarray(self._data.arr))


def _bytes_of(t):
    """The bytes of a float8 tensor's array, or of a dense one-byte tensor's (the base of a float8 view)."""
    return (t._data.arr if type(t._data) is _F8Array else t._data).view(np.uint8)


def _new(arr):
    return Float8Tensor._wrap(_F8Array(arr))


def _alias(arr, like):
    """A float8 tensor over ``arr``, a view of ``like``'s memory (shared version counter and base)."""
    t = _new(arr)
    t._vc, t._base = like._vc, like._base if like._base is not None else like
    return t


def encode(x, dtype):
    """Float array ``x`` as an ml_dtypes array of float8 ``dtype``, rounded as PyTorch rounds."""
    return np.asarray(_encoded(np.asarray(x, np.float32), dtype))  # (0-d results: arrays, not NumPy scalars)


def _encoded(x, dtype):
    if dtype is D.float8_e5m2:  # (PyTorch's NaN is 0x7f with the sign, ml_dtypes' 0x7e)
        bits = x.astype(dtype.ml).view(np.uint8)
        return np.where(np.isnan(x), (np.signbit(x) << 7 | 0x7F).astype(np.uint8), bits).view(dtype.ml)
    if dtype is D.float8_e4m3fn:
        return np.clip(x, -_E4M3_MAX, _E4M3_MAX).astype(dtype.ml)  # (NaN stays NaN)
    if dtype is D.float8_e8m0fnu:
        bits = np.ascontiguousarray(x).view(np.uint32)
        exponent = (bits >> 23) & 0xFF
        up = (bits & 0x7FFFFF) >= 0x400000
        e = np.where(exponent == 0xFF, 0xFF, np.minimum(exponent + up, 0xFF)).astype(np.uint8)
        return e.reshape(x.shape).view(dtype.ml)
    return x.astype(dtype.ml)


def from_tensor(t, dtype):
    """Dense tensor ``t`` (or a float8 one) converted to float8 ``dtype`` (a new tensor)."""
    if t.device.type != "cpu":
        raise NotImplementedError(f"float8 tensors on {t.device}: ember keeps float8 tensors on the CPU")
    return _new(encode(t.float()._host(), dtype))


def _widen(t):
    """A float32 tensor of a float8 tensor's values."""
    return Tensor._wrap(t._data.arr.astype(np.float32))


def _bytes(t):
    """A plain uint8 tensor over a float8 tensor's memory (same version counter and base), for layout ops."""
    b = Tensor._wrap(t._data.arr.view(np.uint8))
    b._vc, b._base = t._vc, t._base
    return b


def _refuse(name, dtype):
    return NotImplementedError(f"\"{name}\" not implemented for '{dtype.torch_name}'")


def _one_dtype(values):
    """The float8 dtype all value operands share (PyTorch's promotion error otherwise, naming the first first)."""
    f8 = next(t.dtype for t in values if t.dtype in D.FLOAT8)
    for t in values:
        if t.dtype is not f8:
            P.promote_types(*((f8, t.dtype) if values[0].dtype is f8 else (values[0].dtype, f8)))  # (raises)
    return f8


def _as_bytes(x):
    if isinstance(x, Float8Tensor):
        return _bytes(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_as_bytes(v) for v in x)
    return x


def _rewrap(r, source, dtype):
    """The float8 result of a layout op that gave the uint8 tensor(s) ``r`` on ``source``'s bytes."""
    if isinstance(r, (list, tuple)):
        return type(r)(_rewrap(x, source, dtype) for x in r)
    if not isinstance(r, Tensor) or r._data.dtype != np.uint8:
        return r
    t = _new(r._data.view(dtype.ml))
    if r._base is not None:  # a view of the bytes: a view of the source
        t._vc, t._base = source._vc, source._base if source._base is not None else source
    return t


def _value_operands(name, args, kwargs):
    """The tensors of a call that carry values (not index tensors nor where's condition)."""
    if name == "where":
        return tensors_in(args[1:]) + tensors_in(list(kwargs.values()))
    if name in ("__getitem__", "index_select", "masked_select", "__setitem__"):
        return tensors_in(args[:1]) + (tensors_in(args[2:3]) if name == "__setitem__" else [])
    return tensors_in(args) + tensors_in(list(kwargs.values()))


def _copy_(target, source, non_blocking=False):
    if isinstance(target, Float8Tensor):
        P.check_inplace_broadcast(target.shape, P.broadcast_shapes(tuple(target.shape), tuple(source.shape)))
        values = source._data.arr if isinstance(source, Float8Tensor) and source.dtype is target.dtype else (
            encode((_widen(source) if isinstance(source, Float8Tensor) else source).float()._host(), target.dtype))
        target._data.arr[...] = values
        target._vc[0] += 1
        return target
    return target.copy_(_widen(source))  # (a dense target: the float8 values, cast)


def _fill_(target, value):
    v = value.item() if isinstance(value, Tensor) else value
    target._data.arr[...] = encode(np.float32(v), target.dtype)
    target._vc[0] += 1
    return target


def _setitem(target, index, value):
    if not isinstance(value, Tensor):
        value = _new(encode(np.float32(value), target.dtype))
    elif not isinstance(value, Float8Tensor):
        value = from_tensor(value, target.dtype)
    _bytes(target)[index] = _bytes(value)  # (which counts the write: the bytes share the version counter)


def _to_copy(t, *, dtype=None, device=None):
    if device is not None and device.type != "cpu":
        raise NotImplementedError(f"float8 tensors on {device}: ember keeps float8 tensors on the CPU")
    if dtype is None or dtype is t.dtype:
        return _new(t._data.arr.copy())
    return from_tensor(_widen(t), dtype) if dtype in D.FLOAT8 else _widen(t).to(dtype)


def dispatch(op, args, kwargs, out, mode):
    """Run a registry op that met a float8 operand."""
    name = op.name
    values = _value_operands(name, args, kwargs)
    f8 = next((t.dtype for t in values if t.dtype in D.FLOAT8), None) or next(
        t.dtype for t in tensors_in(list(args) + list(kwargs.values())) if isinstance(t, Float8Tensor))
    if name == "copy_":
        return _copy_(*args, **kwargs)
    if name == "_to_copy":
        return _to_copy(*args, **kwargs)
    if out is not None:
        raise _refuse(name + ".out", f8)
    if name in ("fill_", "zero_"):
        return _fill_(args[0], args[1] if name == "fill_" else 0.0)
    if name == "view" and len(args) == 2 and isinstance(args[1], D.dtype):
        return _view_dtype(args[0], args[1])
    if name == "__setitem__":
        return _setitem(*args)
    if name in _ON_BYTES and mode != "inplace":
        _one_dtype(values)
        return _rewrap(op.fn(*_as_bytes(args), **kwargs), args[0] if isinstance(args[0], Tensor) else values[0], f8)
    if len(values) > 1:  # (PyTorch's promotion comes before its kernel look-up)
        _one_dtype(values)
    if name in _ON_VALUES and mode != "inplace" and f8 in _ON_VALUES[name][1]:
        r = op.fn(*[_widen(a) if isinstance(a, Float8Tensor) else a for a in args], **kwargs)
        return from_tensor(r, f8) if _ON_VALUES[name][0] else r
    raise _refuse(name + ("_" if mode == "inplace" else ""), f8)


def _view_dtype(t, dtype):
    """``t.view(dtype)`` for a one-byte dtype: the same bytes read as it."""
    if dtype.itemsize != 1:
        raise RuntimeError(f"float8 tensors are viewed only as one-byte dtypes here, not {dtype}")
    if dtype in D.FLOAT8:
        return _alias(t._data.arr.view(dtype.ml), t)
    v = Tensor._wrap(t._data.arr.view(D.storage(dtype)))
    base = t._base if t._base is not None else t
    if type(base._data) is _F8Array:  # (a dense view's base is dense: the float8 base's bytes, same counter)
        base = Tensor._wrap(_bytes_of(base))
        base._vc = t._vc
    v._vc, v._base = t._vc, base
    return v


def view_as_float8(arr, dtype):
    """The bytes of array ``arr`` (of a one-byte dtype) read as float8 ``dtype``: ``view``'s result (the registry
    makes it a view of the input)."""
    if arr.dtype.itemsize != 1:
        raise RuntimeError(f"a {D.FROM_NP[arr.dtype]} tensor is viewed as {dtype} only from a one-byte dtype here")
    return _new(arr.view(dtype.ml))


def _scaled_mm(self, mat2, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
    """``(self * scale_a) @ (mat2 * scale_b) (+ bias)`` of float8 matrices, in ``out_dtype`` (self's by default):
    PyTorch's tensor-wise (0-d scales) and row-wise ((m, 1) and (1, n) scales) scaling, computed in float32."""
    for t in (self, mat2):
        if not isinstance(t, Float8Tensor):
            raise ValueError("Invalid scaling configuration: self and mat2 must be float8 tensors")
    if self.dim() != 2 or mat2.dim() != 2 or self.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({self.shape[0]}x{self.shape[1]} and "
                           f"{mat2.shape[0]}x{mat2.shape[1]})")
    if mat2._data.arr.flags.c_contiguous and mat2.shape[0] > 1 and mat2.shape[1] > 1:
        raise RuntimeError("mat2 must be col_major")
    r = (_widen(self) * scale_a.float()) @ (_widen(mat2) * scale_b.float())
    if bias is not None:
        r = r + bias.float()
    if scale_result is not None:
        r = r * scale_result.float()
    dtype = out_dtype or self.dtype
    return from_tensor(r, dtype) if dtype in D.FLOAT8 else r.to(dtype)


STAND_INS[_F8Array] = dispatch
assert all(n in REGISTRY for n in _ON_BYTES | set(_ON_VALUES) | {"__setitem__"}), "a float8 op is not registered"
