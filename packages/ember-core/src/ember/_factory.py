"""Creation functions: tensor, as_tensor, from_numpy, zeros/ones/full/empty (+ _like), arange, linspace,
logspace, eye; and the default device (``ember.set_default_device``, ``with ember.device(...)``)."""
import builtins
import math

import numpy as np

from . import _backend, _extensions, _memory_format, _quiet
from . import _dtype as D
from ._device import CPU, as_device
from ._meta_array import MetaArray
from ._registry import factory, write_out
from ._tensor import Tensor

_default_device = [CPU]


def push_default_device(dev):
    _default_device.append(dev)


def pop_default_device():
    _default_device.pop()


def set_default_device(device):
    _default_device[0] = CPU if device is None else as_device(device)


def get_default_device():
    return _default_device[-1]


def size_args(size, what="size"):
    """``f(2, 3)``, ``f((2, 3))``, ``f([2, 3])`` and ``f(ember.Size)`` all mean the shape (2, 3)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = s.item()
        if isinstance(s, (float, builtins.bool)) or not hasattr(s, "__index__"):
            raise TypeError(f"{what} must be tuple of ints, but got {type(s).__name__}")
        out.append(s.__index__())
    return tuple(out)


def _check_sizes(shape):
    for s in shape:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(shape)}")


def _place(arr, device, requires_grad=False):
    """Move a freshly made host array to ``device`` and wrap it."""
    dev = as_device(device) or _default_device[-1]
    if dev.type != "cpu":
        arr = _backend.to_device(arr, dev)
    t = Tensor._wrap(arr)
    created = _extensions.hooks.get("created")  # set while ember-autograd's inference mode is on
    if created is not None:
        created(t)
    if requires_grad:
        t.requires_grad = True
    return t


def _make(shape, dtype, device, requires_grad, out, fill):
    shape = size_args(shape)
    _check_sizes(shape)
    dtype = dtype or D.get_default_dtype()
    if dtype in D.FLOAT8:  # made in float32, then rounded (see ember._float8)
        from ._float8 import from_tensor
        return _float8_result(from_tensor(_make(shape, D.float32, device, False, None, fill), dtype), requires_grad,
                              out)
    if out is None and (device is not None or _default_device[-1] is not CPU) and (
            as_device(device) or _default_device[-1]).type == "meta":  # (nothing to fill)
        return _place(MetaArray(shape, D.storage(dtype)), device, requires_grad)
    arr = fill(shape, D.storage(dtype))
    if out is not None:
        return write_out(out, arr)
    return _place(arr, device, requires_grad)


def _float8_result(t, requires_grad, out):
    if out is not None:
        return out.copy_(t) if out.shape == t.shape else out.resize_(t.shape).copy_(t)
    return t.requires_grad_() if requires_grad else t


def shape_or_size(name, shape, size):
    """The shape of a factory call: the positional sizes, or the ``size=`` keyword PyTorch also takes
    (``torch.empty(size=(2, 3))``)."""
    if size is None:
        return shape
    if shape:
        raise TypeError(f"{name}() got multiple values for argument 'size'")
    return (size,)


@factory("zeros")
def zeros(*shape, size=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False):
    """A tensor of zeros of the given shape."""
    return _make(shape_or_size("zeros", shape, size), dtype, device, requires_grad, out, np.zeros)


@factory("ones")
def ones(*shape, size=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
         pin_memory=False):
    """A tensor of ones of the given shape."""
    return _make(shape_or_size("ones", shape, size), dtype, device, requires_grad, out, np.ones)


@factory("empty")
def empty(*shape, size=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False, memory_format=None):
    """An uninitialised tensor of the given shape (laid out as ``memory_format`` says)."""
    shape = shape_or_size("empty", shape, size)
    fmt = _memory_format.checked(memory_format, "empty")
    if fmt is None or fmt is _memory_format.contiguous_format:
        return _make(shape, dtype, device, requires_grad, out, np.empty)
    if fmt is _memory_format.preserve_format:
        raise RuntimeError("unsupported memory format Preserve")
    order = _memory_format.axes_of(fmt, len(size_args(shape)))
    return _make(shape, dtype, device, requires_grad, out, lambda s, t: _memory_format.empty(np, s, t, order))


def _infer_scalar_dtype(value):
    if isinstance(value, Tensor):
        return value.dtype
    from ._promotion import scalar_dtype
    return scalar_dtype(value)


@factory("full")
def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None, requires_grad=False,
         pin_memory=False):
    """A tensor of the given shape filled with ``fill_value`` (its dtype inferred from the value)."""
    dtype = dtype or _infer_scalar_dtype(fill_value)
    value = fill_value.item() if isinstance(fill_value, Tensor) else fill_value
    return _make((size,), dtype, device, requires_grad, out, lambda s, t: np.full(s, D.number_as(value, t), dtype=t))


@factory("zeros_like")
def zeros_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    """Zeros with the shape (and by default dtype and device) of ``input``."""
    if type(input) is not Tensor and hasattr(input, "_batched_like"):  # (inside ember.func.vmap)
        return input._batched_like(zeros_like, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)
    return _laid_out(zeros(input.shape, **_like_kw(input, dtype, device, requires_grad)), input, memory_format)


@factory("ones_like")
def ones_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    """Ones with the shape (and by default dtype and device) of ``input``."""
    if type(input) is not Tensor and hasattr(input, "_batched_like"):  # (inside ember.func.vmap)
        return input._batched_like(ones_like, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)
    return _laid_out(ones(input.shape, **_like_kw(input, dtype, device, requires_grad)), input, memory_format)


@factory("empty_like")
def empty_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    """An uninitialised tensor with the shape (and by default dtype and device) of ``input``."""
    if type(input) is not Tensor and hasattr(input, "_batched_like"):  # (inside ember.func.vmap)
        return input._batched_like(empty_like, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)
    if input.is_quantized and dtype is None:  # (a quantized tensor of the same parameters)
        from ._quantized import empty_like_quantized
        return empty_like_quantized(input)
    return _laid_out(empty(input.shape, **_like_kw(input, dtype, device, requires_grad)), input, memory_format)


@factory("full_like")
def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None):
    """``fill_value`` in the shape (and by default dtype and device) of ``input``."""
    if type(input) is not Tensor and hasattr(input, "_batched_like"):  # (inside ember.func.vmap)
        return input._batched_like(full_like, fill_value, dtype=dtype, layout=layout, device=device,
                                   requires_grad=requires_grad)
    t = full(input.shape, fill_value, **_like_kw(input, dtype, device, requires_grad))
    return _laid_out(t, input, memory_format)


def _laid_out(t, input, memory_format):
    """``t``, a new row-major tensor like ``input``, in the layout ``memory_format`` gives it (by default
    ``input``'s own, when that has no gaps)."""
    if not _backend.is_array(input._data):
        return t
    order = _memory_format.like(input._data, memory_format)
    if order is not None:
        t._data = _memory_format.copy(_backend.xp_of(t._data), t._data, order)
    return t


def _like_kw(input, dtype, device, requires_grad):
    return {"dtype": dtype or input.dtype, "device": device or input.device, "requires_grad": requires_grad}


def _from_data(data, dtype):
    """A host array for ``data`` (nested sequences, scalars, arrays, tensors) with PyTorch's dtype
    inference: Python floats take the default dtype, Python ints int64, bools bool."""
    if isinstance(data, Tensor):
        arr = data._host()
    elif isinstance(data, np.ndarray) or hasattr(data, "__array_interface__"):
        arr = np.asarray(data)
    elif hasattr(data, "__cuda_array_interface__"):
        arr = _backend.cupy().asarray(data).get()
    else:
        if isinstance(data, (str, bytes)) or data is None:
            raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
        arr = np.asarray(data)
        if arr.dtype == object:
            raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
        if dtype is None:
            inferred = _sequence_dtype(data if isinstance(data, (list, tuple)) else (data,))
            if inferred is not None and inferred.np != arr.dtype:
                arr = arr.astype(D.storage(inferred))
            elif arr.size == 0 and arr.dtype == np.float64:
                arr = arr.astype(D.get_default_dtype().np)
    if dtype is not None:
        token = _quiet.STATE.set(_quiet.IGNORE)  # (out-of-range values become inf, as in PyTorch: no warning)
        try:
            arr = arr.astype(D.storage(dtype), copy=False)
        finally:
            _quiet.STATE.reset(token)
    else:
        D.from_np(arr.dtype)  # TypeError for dtypes PyTorch has no tensor for
    return arr


def _sequence_dtype(data):
    """PyTorch's dtype for nested sequences: each element's own (Python floats the default dtype, ints int64,
    complexes the default complex dtype; NumPy scalars, arrays and tensors theirs), promoted together. (NumPy's
    inference differs: np.float64 is a Python float to it, and [1, np.float32(2)] is float64.) None for no
    elements or elements of other types (NumPy's conversion decides)."""
    found = set()
    stack = [data]
    while stack:
        seq = stack.pop()
        for kind in set(map(type, seq)):
            if kind is list or kind is tuple:
                stack.extend(x for x in seq if type(x) is kind)
            elif kind is float:
                found.add(D.get_default_dtype())
            elif kind is bool or kind is int:
                found.add(D.bool if kind is bool else D.int64)
            elif kind is complex:
                found.add(D.default_complex())
            elif issubclass(kind, (np.generic, np.ndarray, Tensor)):
                found.update(D.from_np(np.dtype(x.dtype)) if not isinstance(x, Tensor) else x.dtype
                             for x in seq if type(x) is kind)
            else:
                return None
    if not found:
        return None
    from ._promotion import promote_types
    result = found.pop()
    for d in found:
        result = promote_types(result, d)
    return result


@factory("tensor")
def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of ``data``."""
    if dtype in D.FLOAT8:  # (see ember._float8)
        from ._float8 import from_tensor
        return _float8_result(from_tensor(tensor(data, device=device), dtype), requires_grad, None)
    arr = np.array(_from_data(data, dtype), copy=True)
    dev = as_device(device) or (data.device if isinstance(data, Tensor) and device is None else None)
    return _place(arr, dev, requires_grad)


@factory("as_tensor")
def as_tensor(data, dtype=None, device=None):
    """``data`` as a tensor, sharing memory with it where dtype and device allow."""
    if isinstance(data, Tensor):
        return data.to(dtype=dtype, device=device)
    if hasattr(data, "__cuda_array_interface__"):
        arr = _backend.cupy().asarray(data)
        return Tensor._wrap(arr if dtype is None else arr.astype(D.storage(dtype), copy=False))
    return _place(_from_data(data, dtype), device)


@factory("asarray")
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """Like as_tensor; ``copy=True`` always copies, ``copy=False`` refuses to."""
    t = as_tensor(obj, dtype=dtype, device=device)
    if copy:
        t = t.clone() if t is obj or (isinstance(obj, np.ndarray) and np.shares_memory(t._data, obj)) else t
    if requires_grad:
        t.requires_grad = True
    return t


@factory("from_numpy")
def from_numpy(ndarray):
    """A tensor sharing memory with a NumPy array. Instances of ndarray subclasses (np.memmap and its slices,
    np.matrix, masked arrays: their data, as PyTorch) are held as plain ndarray views of the same memory: ember tells
    host arrays by their exact type."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    D.from_np(ndarray.dtype)
    return Tensor._wrap(ndarray if type(ndarray) is np.ndarray else ndarray.view(np.ndarray))


def _range_dtype(values, dtype):
    if dtype is D.bool:
        raise NotImplementedError("\"arange_cpu\" not implemented for 'Bool'")
    if dtype is not None:
        return dtype
    if any(isinstance(v, float) or (isinstance(v, Tensor) and v.dtype.is_floating_point) for v in values):
        return D.get_default_dtype()
    return D.int64


@factory("arange")
def arange(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
           requires_grad=False, pin_memory=False):
    """Values from ``start`` (inclusive) to ``end`` (exclusive) spaced by ``step``."""
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    dtype = _range_dtype((start, end, step), dtype)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    n = math.ceil((end - start) / step)

    def fill(shape, storage):
        return (start + np.arange(n, dtype=np.float64 if dtype.category >= 2 else np.int64) * step).astype(storage)
    return _make((n,), dtype, device, requires_grad, out, fill)


@factory("linspace")
def linspace(start, end, steps, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dtype = dtype or D.get_default_dtype()
    return _make((steps,), dtype, device, requires_grad, out,
                 lambda s, t: _symmetric_linspace(start, end, steps).astype(t))


def _symmetric_linspace(start, end, steps):
    """Evenly spaced points computed from both ends, so that both endpoints are exact."""
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    if steps == 1:
        return np.array([start], dtype=np.float64)
    i = np.arange(steps, dtype=np.float64)
    step = (end - start) / (steps - 1)
    half = steps // 2
    return np.where(i < half, start + i * step, end - (steps - 1 - i) * step)


@factory("logspace")
def logspace(start, end, steps, base=10.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False):
    """``base`` raised to ``steps`` evenly spaced exponents from ``start`` to ``end``."""
    dtype = dtype or D.get_default_dtype()
    return _make((steps,), dtype, device, requires_grad, out,
                 lambda s, t: np.power(base, _symmetric_linspace(start, end, steps)).astype(t))


@factory("eye")
def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A 2-D tensor with ones on the diagonal."""
    m = n if m is None else m
    if n < 0 or m < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {min(n, m)}")
    return _make((n, m), dtype, device, requires_grad, out, lambda s, t: np.eye(n, m, dtype=t))


def _new(fill, name):
    def method(self, *shape, size=None, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
        return fill(*shape_or_size(name, shape, size), dtype=dtype or self.dtype, device=device or self.device,
                    requires_grad=requires_grad)
    return method


Tensor.new_zeros = _new(zeros, "new_zeros")
Tensor.new_ones = _new(ones, "new_ones")
Tensor.new_empty = _new(empty, "new_empty")


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False, layout=None,
              pin_memory=False):
    return full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device,
                requires_grad=requires_grad)


Tensor.new_full = _new_full
