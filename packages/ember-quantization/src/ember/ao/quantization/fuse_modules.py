"""fuse_modules / fuse_modules_qat: replace sequences of submodules (named by dotted path) by one fused module,
the rest by Identity."""
import copy

import ember.nn as nn

from .fuser_method_mappings import fuse_conv_bn, fuse_conv_bn_relu, get_fuser_method  # noqa: F401

__all__ = ["fuse_known_modules", "fuse_modules", "fuse_modules_qat"]


def _get_module(model, submodule_key):
    for name in submodule_key.split("."):
        model = getattr(model, name)
    return model


def _set_module(model, submodule_key, module):
    *path, last = submodule_key.split(".")
    for name in path:
        model = getattr(model, name)
    setattr(model, last, module)


def fuse_known_modules(mod_list, is_qat, additional_fuser_method_mapping=None):
    """The fused module of ``mod_list`` followed by Identity modules in place of the others; the first module's
    forward pre-hooks and the last one's forward hooks move to the fused module."""
    types = tuple(type(m) for m in mod_list)
    fuser_method = get_fuser_method(types, additional_fuser_method_mapping)
    fused = fuser_method(is_qat, *mod_list)
    for hook in mod_list[0]._forward_pre_hooks.values():
        fused.register_forward_pre_hook(hook)
    mod_list[0]._forward_pre_hooks.clear()
    for hook in mod_list[-1]._forward_hooks.values():
        fused.register_forward_hook(hook)
    mod_list[-1]._forward_hooks.clear()
    rest = []
    for _ in mod_list[1:]:
        identity = nn.Identity()
        identity.training = mod_list[0].training
        rest.append(identity)
    return [fused] + rest


def _fuse_modules_helper(model, modules_to_fuse, is_qat, fuser_func=fuse_known_modules, fuse_custom_config_dict=None):
    additional = (fuse_custom_config_dict or {}).get("additional_fuser_method_mapping", {})
    new_mods = fuser_func([_get_module(model, name) for name in modules_to_fuse], is_qat, additional)
    for name, module in zip(modules_to_fuse, new_mods):
        _set_module(model, name, module)


def _fuse_modules(model, modules_to_fuse, is_qat, inplace=False, fuser_func=fuse_known_modules,
                  fuse_custom_config_dict=None):
    if not inplace:
        model = copy.deepcopy(model)
    groups = [modules_to_fuse] if all(isinstance(m, str) for m in modules_to_fuse) else modules_to_fuse
    for group in groups:
        _fuse_modules_helper(model, group, is_qat, fuser_func, fuse_custom_config_dict)
    return model


def fuse_modules(model, modules_to_fuse, inplace=False, fuser_func=fuse_known_modules, fuse_custom_config_dict=None):
    """Fuse lists of submodules of an eval-mode model (conv-bn, conv-bn-relu, conv-relu, linear-bn, linear-relu,
    bn-relu): ``modules_to_fuse`` is one list of names or a list of such lists."""
    return _fuse_modules(model, modules_to_fuse, False, inplace, fuser_func, fuse_custom_config_dict)


def fuse_modules_qat(model, modules_to_fuse, inplace=False, fuser_func=fuse_known_modules,
                     fuse_custom_config_dict=None):
    """``fuse_modules`` for quantization-aware training: batch norms stay (in ConvBn/LinearBn modules)."""
    return _fuse_modules(model, modules_to_fuse, True, inplace, fuser_func, fuse_custom_config_dict)
