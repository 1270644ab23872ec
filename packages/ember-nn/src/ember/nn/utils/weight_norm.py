"""The older, hook-based weight normalisation (PyTorch's ``nn.utils.weight_norm``): ``<name>`` is replaced by the
parameters ``<name>_g`` (magnitude) and ``<name>_v`` (direction), and a forward pre-hook recomputes
``<name> = g * v / ||v||``. ``nn.utils.parametrizations.weight_norm`` is the newer form."""
import warnings

import ember

from ..modules.lazy import UninitializedParameter
from ..parameter import Parameter

__all__ = ["remove_weight_norm", "weight_norm"]


class _WeightNormHook:
    """The forward pre-hook of one weight-normalised tensor; the norm is over every dim but ``dim`` (-1: all)."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = dim

    def compute_weight(self, module):
        v = getattr(module, self.name + "_v")
        return v * (getattr(module, self.name + "_g") / ember.norm_except_dim(v, 2, self.dim))

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Splits ``module.<name>`` into a magnitude ``<name>_g`` (norms over every dim but ``dim``; over all of them
    when ``dim`` is None) and a direction ``<name>_v``, recombined before every forward. Returns ``module``."""
    warnings.warn("`ember.nn.utils.weight_norm` is deprecated in favor of `ember.nn.utils.parametrizations."
                  "weight_norm`.", FutureWarning, stacklevel=2)
    if any(isinstance(h, _WeightNormHook) and h.name == name for h in module._forward_pre_hooks.values()):
        raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    hook = _WeightNormHook(name, -1 if dim is None else dim)
    weight = getattr(module, name)
    if isinstance(weight, UninitializedParameter):
        raise ValueError("The module passed to `WeightNorm` can't have uninitialized parameters. Make sure to run "
                         "the dummy forward before applying weight normalization")
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(ember.norm_except_dim(weight, 2, hook.dim).data))
    module.register_parameter(name + "_v", Parameter(weight.data))
    setattr(module, name, hook.compute_weight(module))
    module.register_forward_pre_hook(hook)
    return module


def remove_weight_norm(module, name="weight"):
    """Undoes ``weight_norm``: ``<name>`` becomes a plain parameter holding the current ``g * v / ||v||``."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, _WeightNormHook) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
