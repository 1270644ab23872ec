"""Parameters and buffers: tensors that modules register as their state."""
import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor, _init


def _array_of(data):
    if data is None:
        return np.empty(0, dtype=D.storage(D.get_default_dtype()))
    return data._data


class Parameter(Tensor):
    """A tensor that is a module parameter: assigning it to a Module attribute registers it, and it
    requires grad by default. It shares memory with the tensor it is made from."""

    def __init__(self, data=None, requires_grad=True):
        _init(self, _array_of(data))
        self.requires_grad = requires_grad

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return (Parameter, (Tensor._wrap(self._data), self._rg))


class Buffer(Tensor):
    """A tensor to register as a module buffer (``persistent=False`` keeps it out of the state_dict)."""

    def __init__(self, data=None, *, persistent=True):
        _init(self, _array_of(data))
        self.persistent = persistent
