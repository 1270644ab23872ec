"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict (and the deprecated Container)."""
import collections
import operator
import warnings

from ..parameter import Parameter
from .module import Module, _addindent


def _index(idx, n):
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range")
    return idx % n


class Sequential(Module):
    """Modules applied one after another; built from modules or from an OrderedDict of named modules."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], collections.OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(collections.OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self))]

    def __setitem__(self, idx, module):
        key = list(self._modules)[_index(idx, len(self))]
        self.add_module(key, module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        for key in keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(self))]]:
            del self._modules[key]
        self._renumber()

    def _renumber(self):
        if all(k.isdigit() for k in self._modules):
            items = list(self._modules.values())
            self._modules.clear()
            for i, m in enumerate(items):
                self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return Sequential(*self, *other)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index, module):
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        items = list(self._modules.values())
        items.insert(index % (n + 1) if index < 0 else index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def pop(self, index=-1):
        module = self[index]
        del self[index]
        return module


class ModuleList(Module):
    """A list of modules, registered so that their parameters are the owner's."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self)))]

    def __setitem__(self, idx, module):
        self.add_module(str(_index(idx, len(self))), module)

    def __delitem__(self, idx):
        items = list(self._modules.values())
        del items[idx]
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def pop(self, index=-1):
        module = self[index]
        del self[index]
        return module

    def __repr__(self):
        if not self._modules:
            return "ModuleList()"
        # runs of identical modules print once, as "(0-3): 4 x Layer(...)" (PyTorch's layout)
        reprs = [_addindent(repr(m), 2) for m in self._modules.values()]
        lines, start = [], 0
        for i in range(1, len(reprs) + 1):
            if i == len(reprs) or reprs[i] != reprs[start]:
                count = i - start
                prefix = f"({start}): " if count == 1 else f"({start}-{i - 1}): {count} x "
                lines.append(prefix + reprs[start])
                start = i
        return "ModuleList(\n  " + "\n  ".join(lines) + "\n)"


class _DictProtocol:
    """The dict methods of ModuleDict and ParameterDict, over the ordered names ``self._names()``."""

    def __len__(self):
        return len(self._names())

    def __iter__(self):
        return iter(self._names())

    def __contains__(self, key):
        return key in self._names()

    def keys(self):
        return self._names().keys()

    def items(self):
        return ((k, self[k]) for k in self._names())

    def values(self):
        return (self[k] for k in self._names())

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def update(self, values):
        for key, value in values.items() if hasattr(values, "items") else values:
            self[key] = value


class ModuleDict(_DictProtocol, Module):
    """A dict of modules, registered so that their parameters are the owner's."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def _names(self):
        return self._modules

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def clear(self):
        self._modules.clear()


class ParameterList(Module):
    """A list of parameters (tensors assigned are made Parameters)."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_index(idx, len(self))))

    def __setitem__(self, idx, param):
        setattr(self, str(_index(idx, len(self))), _as_parameter(param))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, params):
        return self.extend(params)

    def append(self, value):
        self._size += 1
        setattr(self, str(self._size - 1), _as_parameter(value))
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return "\n".join(_entry_repr(i, p, str(p.dtype) if hasattr(p, "dtype") else None) for i, p in enumerate(self))


class ParameterDict(_DictProtocol, Module):
    """A dict of parameters (tensors assigned are made Parameters)."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def _names(self):
        return self._keys

    def __getitem__(self, key):
        return getattr(self, key)

    def __setitem__(self, key, value):
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def extra_repr(self):
        return "\n".join(_entry_repr(k, p, p.type() if hasattr(p, "type") else None) for k, p in self.items())


def _entry_repr(key, value, type_name):
    """A parameter container's line for one entry, as PyTorch prints it: indented by two spaces of its own (the
    module's repr indents it again), the type named as the container does (ParameterList: the dtype,
    ParameterDict: the tensor type)."""
    from ember._tensor import Tensor
    if not isinstance(value, Tensor):
        return f"  ({key}): Object of type: {type(value).__name__}"
    where = f" ({value.device})" if value.device.type == "cuda" else ""
    size = "x".join(map(str, value.shape))
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    return f"  ({key}): {kind} containing: [{type_name} of size {size}{where}]"


def _as_parameter(value):
    from ember._tensor import Tensor
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


class Container(Module):
    """Deprecated (PyTorch's first container): a Module holding the modules given by keyword."""

    def __init__(self, **kwargs):
        super().__init__()
        warnings.warn("`nn.Container` is deprecated. All of its functionality is now implemented in `nn.Module`. "
                      "Subclass that instead.", FutureWarning, stacklevel=2)
        for name, module in kwargs.items():
            self.add_module(name, module)


__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Container"]
