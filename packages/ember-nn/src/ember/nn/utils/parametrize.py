"""Parametrizations: a module's parameter or buffer recomputed on every access as ``f(original)``.

``register_parametrization(module, "weight", f)`` moves ``module.weight`` to
``module.parametrizations.weight.original`` and gives the module's class (a subclass made for this module
alone, ``Parametrized<Class>``) a property ``weight`` that returns ``f(original)``; assigning to it stores
``f.right_inverse(value)``. Several parametrizations of one tensor chain in registration order. A
``right_inverse`` that returns a sequence of tensors makes ``original0``, ``original1``, ... instead.
"""
from collections.abc import Sequence
from contextlib import contextmanager
from copy import deepcopy

import ember
from ember._tensor import Tensor

from ..modules.container import ModuleDict, ModuleList
from ..parameter import Parameter

__all__ = ["ParametrizationList", "cached", "is_parametrized", "register_parametrization", "remove_parametrizations",
           "transfer_parametrizations_and_params", "type_before_parametrizations"]

_cache_depth = [0]
_cache = {}  # (id(module), tensor name) -> value, while a ``cached()`` block is open


@contextmanager
def cached():
    """Inside the block each parametrized tensor is computed once, on first access, and reused."""
    _cache_depth[0] += 1
    try:
        yield
    finally:
        _cache_depth[0] -= 1
        if not _cache_depth[0]:
            _cache.clear()


def _register_parameter_or_buffer(module, name, value):
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _set_in_place(original, value):
    """Give ``original`` the contents (and shape) of ``value``, keeping the tensor object (optimizers hold it)."""
    original.data = value


def _check_result(what, value, dtype, shape):
    """``value`` (what a parametrization made) is a tensor of the unparametrized dtype and shape."""
    if not isinstance(value, Tensor):
        raise ValueError(f"{what} must return a tensor. Got {type(value).__name__}.")
    if value.dtype != dtype:
        raise ValueError(f"{what} may not change the dtype of the tensor, unless the `unsafe` flag is enabled.\n"
                         f"unparametrized dtype: {dtype}\nparametrized dtype: {value.dtype}")
    if value.shape != shape:
        raise ValueError(f"{what} may not change the shape of the tensor, unless the `unsafe` flag is enabled.\n"
                         f"unparametrized shape: {shape}\nparametrized shape: {value.shape}")


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, in order, and the tensor(s) they are computed from (``original``,
    or ``original0``, ``original1``, ... when the first ``right_inverse`` returns several)."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        dtype, shape = original.dtype, original.shape
        with ember.no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (Tensor, Sequence)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                             f"Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            for attr in ("dtype", "device"):
                if getattr(original, attr) != getattr(new, attr):
                    raise ValueError(f"When `right_inverse` outputs one tensor, it may not change the {attr}.\n"
                                     f"original.{attr}: {getattr(original, attr)}\n"
                                     f"right_inverse(original).{attr}: {getattr(new, attr)}")
            with ember.no_grad():
                _set_in_place(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, part in enumerate(new):
                if not isinstance(part, Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                                     f"Got element {i} of the sequence with type {type(part).__name__}.")
                if isinstance(original, Parameter):
                    part = Parameter(part, original.requires_grad)
                part.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", part)
        if not self.unsafe:
            _check_result("A parametrization", self(), dtype, shape)

    def right_inverse(self, value):
        """Store ``value`` as the parametrized tensor: run each ``right_inverse``, last registered first."""
        with ember.no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype {value.dtype} while "
                                     f"`original` has dtype {self.original.dtype}")
                _set_in_place(self.original, value)
                return
            if not isinstance(value, Sequence):
                raise ValueError(f"'right_inverse' must return a sequence of tensors. Got {type(value).__name__}.")
            if len(value) != self.ntensors:
                raise ValueError(f"'right_inverse' must return a sequence of tensors of length {self.ntensors}. "
                                 f"Got a sequence of length {len(value)}.")
            for i, tensor in enumerate(value):
                original = getattr(self, f"original{i}")
                if not isinstance(tensor, Tensor):
                    raise ValueError(f"'right_inverse' must return a sequence of tensors. Got element {i} of type "
                                     f"{type(tensor).__name__}.")
                if original.dtype != tensor.dtype:
                    raise ValueError(f"Tensor {i} returned by `right_inverse` has dtype {tensor.dtype} while "
                                     f"`original{i}` has dtype {original.dtype}")
                _set_in_place(original, tensor)

    def forward(self):
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in list(self)[1:]:
            x = module(x)
        return x


def _refuse_pickle(self):
    raise RuntimeError("Serialization of parametrized modules is only supported through state_dict(). See:\n"
                       "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
                       "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training")


def _deepcopy(self, memo):
    # the default __reduce_ex__ path would call __getstate__, which parametrized modules refuse
    found = memo.get(id(self))
    if found is not None:
        return found
    replica = self.__new__(self.__class__)
    memo[id(self)] = replica
    replica.__dict__ = deepcopy(self.__dict__, memo)
    return replica


def _inject_new_class(module):
    """Give ``module`` a class of its own, so that properties added for its parametrized tensors touch no other."""
    cls = module.__class__
    namespace = {"__getstate__": _refuse_pickle}
    if not hasattr(cls, "__deepcopy__"):
        namespace["__deepcopy__"] = _deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), namespace)


def _inject_property(module, tensor_name):
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self):
        parametrization = self.parametrizations[tensor_name]
        if not _cache_depth[0]:
            return parametrization()
        key = (id(self), tensor_name)
        value = _cache.get(key)
        if value is None:
            value = _cache[key] = parametrization()
        return value

    def set_original(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Make ``module.<tensor_name>`` be ``parametrization(original)`` from now on; returns ``module``.

    Unless ``unsafe``, the parametrization (and its ``right_inverse``, if any) must keep dtype and shape.
    Registering on an already parametrized tensor appends to its chain.
    """
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            current = getattr(module, tensor_name)
            made = parametrization(current)
            _check_result("A parametrization", made, current.dtype, current.shape)
            if hasattr(parametrization, "right_inverse"):
                try:
                    back = parametrization.right_inverse(made)
                except NotImplementedError:
                    pass
                else:
                    _check_result("parametrization.right_inverse", back, current.dtype, current.shape)
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with "
                         f"name '{tensor_name}'")
    return module


def is_parametrized(module, tensor_name=None):
    """Whether ``module`` has any parametrization (or one on ``tensor_name``)."""
    parametrizations = getattr(module, "parametrizations", None)
    if not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Undo the parametrizations of ``tensor_name``: it becomes a plain parameter (or buffer) again, holding
    the current parametrized value (``leave_parametrized``) or the original one. Returns ``module``."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with ember.no_grad():
                _set_in_place(original, getattr(module, tensor_name))
    elif leave_parametrized:
        value = getattr(module, tensor_name)
        original = Parameter(value.detach(), value.requires_grad) if value.requires_grad else value.detach()
    else:
        raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized in "
                         "terms of a sequence of tensors.")
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module):
    """The module's class as it was before any parametrization was registered."""
    return module.__class__.__bases__[0] if is_parametrized(module) else type(module)


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Register ``from_module``'s parametrizations (of ``tensor_name``, or all) on ``to_module`` too, sharing
    their original tensors; a parametrized tensor ``to_module`` lacks is created first. Returns ``to_module``."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        source = from_module.parametrizations[name]
        for parametrization in source:
            register_parametrization(to_module, name, parametrization)
        target = to_module.parametrizations[name]
        if hasattr(source, "original"):
            target.original = source.original
        else:
            i = 0
            while hasattr(source, f"original{i}"):
                setattr(target, f"original{i}", getattr(source, f"original{i}"))
                i += 1
    return to_module
