"""PyTorch's memory formats. An ember tensor is a NumPy/CuPy array with strides, so a channels-last tensor is an
NHWC (NDHWC) array seen through NCHW (NCDHW) axes: the format is read from the strides, never stored beside them.
Elementwise NumPy/CuPy kernels keep their inputs' layout, as PyTorch's do."""
import builtins

import numpy as np

from ._backend import xp_of


class memory_format:
    """A way of laying a tensor's elements out in memory (``ember.channels_last``...). Instances are singletons."""

    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return "ember." + self._name

    __str__ = __repr__

    def __reduce__(self):  # (pickled by name: unpickling gives the singleton)
        return self._name


contiguous_format = memory_format("contiguous_format")
legacy_contiguous_format = contiguous_format
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")

# the formats that put channels last: the order of the axes from the outermost in memory to the innermost
_AXES = {channels_last: (0, 2, 3, 1), channels_last_3d: (0, 2, 3, 4, 1)}


def checked(fmt, where):
    """``fmt`` (None meaning ``default``) after PyTorch's type check of a ``memory_format=`` argument."""
    if fmt is not None and not isinstance(fmt, memory_format):
        raise TypeError(f"{where}(): argument 'memory_format' must be ember.memory_format, not {type(fmt).__name__}")
    return fmt


def axes_of(fmt, ndim):
    """The memory order of the axes for a channels-last ``fmt``, after PyTorch's rank check."""
    axes = _AXES[fmt]
    if ndim != len(axes):
        raise RuntimeError(f"required rank {len(axes)} tensor to use {fmt._name} format")
    return axes


def is_contiguous(shape, strides, fmt):
    """Whether element ``strides`` lay ``shape`` out densely in the channels-last ``fmt`` (size-1 axes ignored,
    as PyTorch ignores them; a tensor of another rank is not)."""
    axes = _AXES[fmt]
    if len(shape) != len(axes):
        return False
    step = 1
    for d in reversed(axes):
        if shape[d] != 1:
            if strides[d] != step:
                return False
            step *= shape[d]
    return True


def _stride_order(shape, strides):
    """The axes from the outermost in memory to the innermost, as PyTorch infers them for a copy that keeps a
    strided tensor's layout: by stride, ties by size, an axis of stride 0 keeping its place."""
    inner_first = list(range(len(shape) - 1, -1, -1))
    for i in range(1, len(inner_first)):  # (an insertion sort: zero strides compare with nothing)
        j = i
        while j > 0:
            a, b = inner_first[j - 1], inner_first[j]
            if strides[a] == 0 or strides[b] == 0 or strides[a] < strides[b]:
                break
            if strides[a] == strides[b] and shape[a] <= shape[b]:
                break
            inner_first[j - 1], inner_first[j] = b, a
            j -= 1
    return inner_first[::-1]


def suggested(shape, strides):
    """The format PyTorch reads in a tensor's strides: channels-last for a 4-d (5-d) one whose channels step least,
    then its spatial axes from the last, its batch most (ambiguous strides read as contiguous)."""
    fmt = {4: channels_last, 5: channels_last_3d}.get(len(shape))
    if fmt is None or strides[1] == 0:
        return contiguous_format
    least = 0
    for d in reversed(_AXES[fmt]):
        if shape[d] == 0 or strides[d] < least or (d == 0 and least == strides[1]):
            return contiguous_format
        least = strides[d] * builtins.max(shape[d], 1)
    return fmt


def channels_last_like(arr, *others):
    """``arr`` (4-d), as a channels-last copy when any of ``others`` reads as channels-last (PyTorch's layout for
    the result of a convolution, pooling... of such inputs) and it does not already."""
    def reads_channels_last(a):
        return a is not None and a.ndim == 4 and suggested(a.shape, [s // a.itemsize for s in a.strides]) is \
            channels_last
    if arr.ndim != 4 or reads_channels_last(arr) or not any(reads_channels_last(a) for a in others):
        return arr
    return copy(xp_of(arr), arr, _AXES[channels_last])


def new_result(r, keep_channels_last):
    """An op's result (an array, or a tuple of them) laid out as PyTorch lays out a new tensor: row-major, or with
    ``keep_channels_last`` channels-last where it reads so (a copy only where it is neither)."""
    if type(r) is tuple:
        return tuple(new_result(a, keep_channels_last) for a in r)
    if type(r) is not np.ndarray and not hasattr(r, "__cuda_array_interface__") or r.flags.c_contiguous or \
            keep_channels_last and suggested(r.shape, [s // r.itemsize for s in r.strides]) is not contiguous_format:
        return r
    return xp_of(r).asarray(r, order="C")


def layout(arr, fmt):
    """The memory order of the axes (a list, or None for row-major) that a copy of ``arr`` takes under ``fmt``:
    preserve_format keeps the order of ``arr``'s strides (and so its very strides when they leave no gaps)."""
    if fmt is None or fmt is contiguous_format:
        return None
    if fmt is not preserve_format:
        return list(axes_of(fmt, arr.ndim))
    if arr.ndim < 2 or arr.flags.c_contiguous:
        return None
    order = _stride_order(arr.shape, [s // arr.itemsize for s in arr.strides])
    return None if order == list(range(arr.ndim)) else order


def dense_layout(arr):
    """``arr``'s own layout (``layout``'s form) when it leaves no gaps, else None: the layout PyTorch gives a leaf's
    gradient."""
    order = layout(arr, preserve_format)
    return order if order is not None and arr.transpose(order).flags.c_contiguous else None


def like(arr, memory_format=None):
    """The layout (``layout``'s form) of a new tensor like ``arr``: ``memory_format``'s, by default ``arr``'s own
    when it has no gaps (PyTorch's ``empty_like``)."""
    return layout(arr, checked(memory_format, "empty_like") or preserve_format)


def empty(xp, shape, dtype, order):
    """An uninitialised array of ``shape`` whose axes lie in memory in ``order`` (None: row-major)."""
    if order is None:
        return xp.empty(shape, dtype)
    inverse = sorted(range(len(order)), key=order.__getitem__)
    return xp.empty([shape[d] for d in order], dtype).transpose(inverse)


def copy(xp, arr, order):
    """A copy of ``arr`` laid out in ``order`` (see ``empty``)."""
    if order is None:
        return arr.copy()  # (row-major)
    out = empty(xp, arr.shape, arr.dtype, order)
    out[...] = arr
    return out
