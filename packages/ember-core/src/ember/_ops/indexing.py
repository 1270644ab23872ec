"""Indexing: ``tensor[index]`` and ``tensor[index] = value``, basic and advanced, as in PyTorch."""
import numpy as np

from .. import _dtype as D
from .._factory import arange
from .._registry import op
from .._tensor import Tensor


def _is_basic(index):
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, (int, slice)) and not isinstance(i, bool)
               for i in items)


_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.bool_))


def _convert_item(xp, i):
    if isinstance(i, slice):
        if i.step is not None and int(i.step) <= 0:
            raise ValueError("step must be greater than zero")
        return slice(*(None if v is None else int(v) for v in (i.start, i.stop, i.step)))
    if hasattr(i, "dtype") and hasattr(i, "ndim"):  # an unwrapped index tensor
        if i.dtype == np.uint8:
            return i.astype(bool)
        if i.dtype not in _INDEX_DTYPES:  # (int8 and int16 index tensors too)
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return i
    if isinstance(i, (list, tuple)):
        arr = xp.asarray([x.item() if isinstance(x, Tensor) else x for x in i])
        if arr.dtype.kind not in "iub" and arr.size:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return arr.astype(np.int64) if arr.size == 0 else arr
    if isinstance(i, float):
        raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                         "valid indices (got float)")
    return i


def convert_index(xp, index):
    """A NumPy/CuPy index for a PyTorch one (arrays already unwrapped from tensors)."""
    if isinstance(index, tuple):
        return tuple(_convert_item(xp, i) for i in index)
    return _convert_item(xp, index)  # a list is one advanced index, not a tuple of indices


def _index_error(e):
    return IndexError(str(e).replace("axis", "dimension"))


def _unwrap_index(index):
    if isinstance(index, Tensor):
        return index._data
    if isinstance(index, tuple):
        return tuple(i._data if isinstance(i, Tensor) else i for i in index)
    return index


_TAKE_MIN = 1 << 14  # below this many indices the bounds pass costs more than take saves


def _take_rows(x, idx):
    """``x[idx]`` for one large integer index array on NumPy, or None to index the ordinary way (which raises
    PyTorch's error for an index out of bounds). With the bounds checked once, take's "wrap" mode skips the
    per-element checks (about twice as fast as indexing) and reads negative indices as PyTorch does."""
    if type(x) is not np.ndarray or not x.ndim or type(idx) is not np.ndarray or idx.dtype.kind != "i" \
            or idx.size < _TAKE_MIN:
        return None
    n = x.shape[0]
    if idx.min() < -n or idx.max() >= n:
        return None
    return np.take(x, idx, axis=0, mode="wrap")


@op("__getitem__", function=False, view=lambda call: _is_basic(call.args[1]))
def getitem(xp, input, index):
    """``input[index]``: a view for basic indexing (ints, slices, None, ...), a copy for advanced."""
    r = _take_rows(input, index._data if isinstance(index, Tensor) else index)
    if r is not None:
        return r
    idx = convert_index(xp, _unwrap_index(index))
    if _is_basic(index) and Ellipsis not in (idx if isinstance(idx, tuple) else (idx,)):
        idx = (idx if isinstance(idx, tuple) else (idx,)) + (Ellipsis,)  # full integer indexing stays a 0-d view
    try:
        r = input[idx]
    except IndexError as e:
        raise _index_error(e) from None
    if not _is_basic(index):  # (NumPy lays out some advanced indexing's copies transposed; PyTorch's are contiguous)
        return xp.asarray(r, order="C")
    return r if isinstance(r, (np.ndarray,)) or hasattr(r, "__cuda_array_interface__") else xp.asarray(r)


@getitem.vjp
def _(ctx, g):
    x, index = ctx.args[:2]
    full = g.new_zeros(x.shape)
    if _is_basic(index):
        full[index] = g
    else:  # repeated advanced indices accumulate
        items = index if isinstance(index, tuple) else (index,)
        if any(i is None for i in items):  # index_put reads None as a whole dim: go through flat positions
            pos = arange(x.numel(), device=g.device).reshape(x.shape)[index]
            flat = full.reshape(-1).index_put_((pos.reshape(-1),), g.reshape(-1), accumulate=True)
            return flat.reshape(x.shape), None
        full.index_put_(items, g, accumulate=True)
    return full, None


@op("__setitem__", function=False, mutates=True)
def setitem(xp, input, index, value):
    """``input[index] = value``: ``value`` (a number or tensor) is cast to ``input``'s dtype and broadcast."""
    if hasattr(value, "dtype") and hasattr(value, "ndim"):
        value = value.astype(input.dtype, copy=False)
        if xp is not np and type(value) is np.ndarray:
            value = xp.asarray(value)
    elif not isinstance(value, (bool, int, float, complex, np.generic)):
        raise TypeError(f"can't assign a {type(value).__name__} to a {D.from_np(input.dtype)} tensor")
    elif isinstance(value, complex) and input.dtype.kind != "c":
        raise TypeError("can't convert complex to float")
    else:
        value = D.number_as(value, input.dtype)
    try:
        input[convert_index(xp, _unwrap_index(index))] = value
    except IndexError as e:
        raise _index_error(e) from None
    except ValueError as e:
        if "read-only" in str(e):
            raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to "
                               "a single memory location. Please clone() the tensor before performing the "
                               "operation.") from None
        raise RuntimeError(f"shape mismatch: {e}") from None


@setitem.vjp
def _(ctx, g):
    x, index, value = ctx.args[:3]
    gx = g.clone()
    gx[index] = 0
    return gx, None, g[index].sum_to_size(value.shape) if isinstance(value, Tensor) else None
