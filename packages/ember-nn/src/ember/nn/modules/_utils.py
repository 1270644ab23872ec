"""Helpers shared by the layer files: tuple arguments, factory keyword arguments, parameter registration."""
import collections.abc

import ember

from ..parameter import Parameter


def _ntuple(n):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return (x,) * n
    return parse


_single, _pair, _triple = _ntuple(1), _ntuple(2), _ntuple(3)


def factory(device, dtype):
    """The ``device``/``dtype`` keyword arguments of tensor factories (PyTorch's ``factory_kwargs``)."""
    return {"device": device, "dtype": dtype}


_FACTORY_KEYS = {"device", "dtype", "memory_format"}


def factory_kwargs(kwargs):
    """``nn.factory_kwargs``: the factory keyword arguments among ``kwargs`` (device, dtype, memory_format, merged
    with a ``factory_kwargs`` dict among them) as one dict; TypeError for any other key or one given twice."""
    if kwargs is None:
        return {}
    unknown = kwargs.keys() - _FACTORY_KEYS - {"factory_kwargs"}
    if unknown:
        raise TypeError(f"unexpected kwargs {unknown}")
    merged = dict(kwargs.get("factory_kwargs", {}))
    for key in _FACTORY_KEYS & kwargs.keys():
        if key in merged:
            raise TypeError(f"{key} specified twice, in **kwargs and in factory_kwargs")
        merged[key] = kwargs[key]
    return merged


def empty_parameters(module, fk, **shapes):
    """Registers an uninitialised Parameter of each given shape on ``module`` (None: the parameter is None)."""
    for name, shape in shapes.items():
        module.register_parameter(name, None if shape is None else Parameter(ember.empty(shape, **fk)))


def inplace_str(inplace, first=False):
    """The ``inplace`` part of an activation's repr."""
    if not inplace:
        return ""
    return "inplace=True" if first else ", inplace=True"
