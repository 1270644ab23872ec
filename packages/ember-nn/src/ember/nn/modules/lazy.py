"""Lazy modules: parameters whose shape is inferred from the first input (or from a loaded state_dict)."""
import ember

from ..parameter import Buffer, Parameter

__all__ = ["UninitializedParameter", "UninitializedBuffer"]


class _Uninitialized:
    """Shared by the uninitialised parameter and buffer: an empty placeholder until ``materialize``."""

    cls_to_become = None

    def materialize(self, shape, device=None, dtype=None):
        """Allocate the tensor with ``shape`` and become a regular Parameter/Buffer."""
        self._data = ember.empty(tuple(shape), device=device or self.device, dtype=dtype or self.dtype)._data
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. This error usually happens "
                           "in `load_state_dict` when trying to load an uninitialized parameter into an initialized "
                           "one. Call `forward` to initialize the parameters before accessing their attributes.")

    def __repr__(self):
        return f"<{type(self).__name__}>"


class UninitializedParameter(_Uninitialized, Parameter):
    """A parameter whose shape is not known yet (of a lazy module)."""

    cls_to_become = Parameter

    def __init__(self, requires_grad=True, device=None, dtype=None):
        Parameter.__init__(self, ember.empty(0, device=device, dtype=dtype), requires_grad)


class UninitializedBuffer(_Uninitialized, Buffer):
    """A buffer whose shape is not known yet (of a lazy module)."""

    cls_to_become = Buffer

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        Buffer.__init__(self, ember.empty(0, device=device, dtype=dtype), persistent=persistent)
        self.requires_grad = requires_grad


def _uninitialized(t):
    return isinstance(t, _Uninitialized)


class LazyModuleMixin:
    """Mixed in before a layer class: ``initialize_parameters(input)`` runs on the first call, then the module
    turns into ``cls_to_become``."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters)

    def has_uninitialized_params(self):
        return any(_uninitialized(t) for t in list(self._parameters.values()) + list(self._buffers.values()))

    def _materialize(self, name, shape):
        """Give the uninitialised parameter or buffer ``name`` its shape (buffers become plain tensors, as
        modules keep them)."""
        if name in self._parameters:
            self._parameters[name].materialize(shape)
        else:
            t = self._buffers[name]
            self._buffers[name] = ember.empty(tuple(shape), device=t.device, dtype=t.dtype)

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        for store in (self._parameters, self._buffers):
            for name, t in list(store.items()):
                if _uninitialized(t) and prefix + name in state_dict:
                    with ember.no_grad():
                        self._materialize(name, state_dict[prefix + name].shape)

    @staticmethod
    def _infer_parameters(module, args):
        module.initialize_parameters(*args)
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        del module._initialize_hook, module._load_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become
