"""Splitting inputs over devices (``scatter``, ``scatter_kwargs``) and joining outputs on one (``gather``): tensors
in chunks along ``dim``; tuples, named tuples, lists and dicts element by element; other objects copied by
reference. Both directions are differentiable (the chunks and joins are ember ops)."""
import warnings

import ember

__all__ = ["scatter", "scatter_kwargs", "gather"]


def as_device(d):
    """A device for ``d``: an index is a CUDA device (-1 the CPU), else a device or its name."""
    if isinstance(d, int):
        return ember.device("cpu") if d == -1 else ember.device("cuda", d)
    return ember.device(d)


def _is_namedtuple(obj):
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def scatter(inputs, target_gpus, dim=0):
    """``inputs`` split into one piece per target device (fewer when a tensor has fewer rows along ``dim``)."""
    devices = [as_device(d) for d in target_gpus]

    def split(obj):
        if isinstance(obj, ember.Tensor):
            return [chunk.to(dev) for chunk, dev in zip(obj.chunk(len(devices), dim), devices)]
        if _is_namedtuple(obj):
            return [type(obj)(*args) for args in zip(*map(split, obj))]
        if isinstance(obj, tuple) and obj:
            return list(zip(*map(split, obj)))
        if isinstance(obj, list) and obj:
            return [list(i) for i in zip(*map(split, obj))]
        if isinstance(obj, dict) and obj:
            return [type(obj)(i) for i in zip(*map(split, obj.items()))]
        return [obj] * len(devices)

    return split(inputs)


def scatter_kwargs(inputs, kwargs, target_gpus, dim=0):
    """Scattered positional and keyword arguments, as many of each (padded with empty ones)."""
    scattered_inputs = scatter(inputs, target_gpus, dim) if inputs else []
    scattered_kwargs = scatter(kwargs, target_gpus, dim) if kwargs else []
    scattered_inputs += [()] * (len(scattered_kwargs) - len(scattered_inputs))
    scattered_kwargs += [{}] * (len(scattered_inputs) - len(scattered_kwargs))
    return tuple(scattered_inputs), tuple(scattered_kwargs)


def gather(outputs, target_device, dim=0):
    """The per-device ``outputs`` joined on ``target_device`` (-1: the CPU) along ``dim``."""
    device = as_device(target_device)

    def join(items):
        first = items[0]
        if isinstance(first, ember.Tensor):
            if all(t.dim() == 0 for t in items) and dim == 0:
                warnings.warn("Was asked to gather along dimension 0, but all input tensors were scalars; will "
                              "instead unsqueeze and return a vector.", stacklevel=4)
                items = [t.reshape(1) for t in items]
            return ember.cat([t.to(device) for t in items], dim)
        if first is None:
            return None
        if isinstance(first, dict):
            if not all(len(first) == len(d) for d in items):
                raise ValueError("All dicts must have the same number of keys")
            return type(first)((k, join([d[k] for d in items])) for k in first)
        if _is_namedtuple(first):
            return type(first)._make(map(join, zip(*items)))
        return type(first)(map(join, zip(*items)))

    return join(outputs)
