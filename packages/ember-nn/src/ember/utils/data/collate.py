"""Batching samples: ``default_collate`` (samples -> batch) and ``default_convert`` (one sample's NumPy
data -> tensors), with PyTorch's rules for dtypes and containers."""
import collections.abc
import copy
import re

import numpy as np

import ember
from ember._tensor import Tensor

__all__ = ["collate", "default_collate", "default_convert", "default_collate_fn_map"]

_STRING_DTYPES = re.compile(r"[SaUO]")
_ERROR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _collate_tensors(batch, *, collate_fn_map=None):
    first = batch[0]
    for i, t in enumerate(batch[1:], 1):
        if t.shape != first.shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(first.shape)} at entry 0 "
                               f"and {list(t.shape)} at entry {i}")
    return ember.stack(batch, 0)


def _collate_arrays(batch, *, collate_fn_map=None):
    if _STRING_DTYPES.search(batch[0].dtype.str) is not None:
        raise TypeError(_ERROR.format(batch[0].dtype))
    return collate([ember.as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def _collate_numpy_scalars(batch, *, collate_fn_map=None):
    return ember.as_tensor(np.array(batch))


default_collate_fn_map = {
    Tensor: _collate_tensors,
    (np.ndarray, np.memmap): _collate_arrays,
    (np.bool_, np.number, np.object_): _collate_numpy_scalars,
    float: lambda batch, *, collate_fn_map=None: ember.tensor(batch, dtype=ember.float64),
    int: lambda batch, *, collate_fn_map=None: ember.tensor(batch),
    str: lambda batch, *, collate_fn_map=None: batch,
    bytes: lambda batch, *, collate_fn_map=None: batch,
}


def collate(batch, *, collate_fn_map=None):
    """Collate ``batch`` (a list of samples) with ``collate_fn_map`` ({type or tuple of types: fn}) for
    the leaves, recursing through mappings, named tuples and sequences."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for kind, fn in collate_fn_map.items():
            if isinstance(elem, kind):
                return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        fields = {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem}
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update(fields)
                return clone
            return elem_type(fields)
        except TypeError:  # the mapping type can't be built from a dict
            return fields
    if _is_namedtuple(elem):
        return elem_type(*(collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if not all(len(e) == size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns  # tuples become lists, as in PyTorch
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, c in enumerate(columns):
                    clone[i] = c
                return clone
            return elem_type(columns)
        except TypeError:
            return columns
    raise TypeError(_ERROR.format(elem_type))


def default_collate(batch):
    """Samples -> a batch: tensors and NumPy arrays are stacked along a new first dimension, Python
    floats become float64 tensors, ints int64 tensors, bools bool tensors, NumPy scalars tensors of their
    dtype; strings stay a list; dicts, named tuples and sequences are collated field by field (tuples
    become lists)."""
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data):
    """NumPy arrays and scalars inside ``data`` -> tensors, recursing through containers (tuples become
    lists); everything else unchanged. The collate_fn when automatic batching is off."""
    elem_type = type(data)
    if isinstance(data, Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_", "bytes_"):
        if elem_type.__name__ == "ndarray" and _STRING_DTYPES.search(data.dtype.str) is not None:
            return data
        return ember.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        fields = {key: default_convert(data[key]) for key in data}
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update(fields)
                return clone
            return elem_type(fields)
        except TypeError:
            return fields
    if _is_namedtuple(data):
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        converted = [default_convert(d) for d in data]
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, c in enumerate(converted):
                    clone[i] = c
                return clone
            return elem_type(converted)
        except TypeError:
            return converted
    return data
