"""Eager-mode quantization: propagate qconfigs, insert observers (``prepare``, ``prepare_qat``), swap modules for
their quantized forms (``convert``), and the one-call recipes ``quantize``, ``quantize_qat``,
``quantize_dynamic``."""
import copy
import inspect
import itertools
import warnings

import ember
import ember.ao.nn.quantizable as nnqa
import ember.ao.nn.quantized as nnq
import ember.nn as nn
from ember.ao.nn.intrinsic import _FusedModule

from .observer import _is_activation_post_process
from .qconfig import (
    _activation_is_memoryless,
    _add_module_to_qconfig_obs_ctr,
    _assert_valid_qconfig,
    default_dynamic_qconfig,
    float16_dynamic_qconfig,
    float_qparams_weight_only_qconfig,
    float_qparams_weight_only_qconfig_4bit,
)
from .quantization_mappings import (
    _get_special_act_post_process,
    _has_special_act_post_process,
    get_default_dynamic_quant_module_mappings,
    get_default_qat_module_mappings,
    get_default_qconfig_propagation_list,
    get_default_static_quant_module_mappings,
    get_default_static_quant_reference_module_mappings,
    no_observer_set,
)
from .stubs import DeQuantStub, QuantWrapper
from .utils import get_qparam_dict, has_no_children_ignoring_parametrizations

__all__ = ["get_default_custom_config_dict", "propagate_qconfig_", "add_quant_dequant", "prepare", "quantize",
           "quantize_dynamic", "prepare_qat", "quantize_qat", "convert", "swap_module"]

is_activation_post_process = _is_activation_post_process

_DEFAULT_CUSTOM_CONFIG_DICT = {
    "float_to_observed_custom_module_class": {nn.LSTM: nnqa.LSTM, nn.MultiheadAttention: nnqa.MultiheadAttention},
    "observed_to_quantized_custom_module_class": {nnqa.LSTM: nnq.LSTM,
                                                  nnqa.MultiheadAttention: nnq.MultiheadAttention}}


def get_default_custom_config_dict():
    """Custom module mappings used by default: ``nn.LSTM`` and ``nn.MultiheadAttention`` observed as the
    quantizable modules, which convert to the quantized ones."""
    return _DEFAULT_CUSTOM_CONFIG_DICT


def _propagate_qconfig_helper(module, qconfig_dict, qconfig_parent=None, prefix="", prepare_custom_config_dict=None):
    qconfig = qconfig_dict.get(type(module), qconfig_parent)
    qconfig = qconfig_dict.get(prefix, qconfig)
    qconfig = getattr(module, "qconfig", qconfig)
    _assert_valid_qconfig(qconfig, module)
    qconfig = _add_module_to_qconfig_obs_ctr(qconfig, module)
    module.qconfig = qconfig
    skip_names = (prepare_custom_config_dict or {}).get("non_traceable_module_name", [])
    skip_types = (prepare_custom_config_dict or {}).get("non_traceable_module_class", [])
    for name, child in module.named_children():
        if prepare_custom_config_dict is None or not (name in skip_names or type(child) in skip_types):
            _propagate_qconfig_helper(child, qconfig_dict, qconfig, prefix + "." + name if prefix else name)


def propagate_qconfig_(module, qconfig_dict=None, prepare_custom_config_dict=None):
    """Give every submodule a ``qconfig`` attribute: its own, else the one ``qconfig_dict`` maps its name or type
    to, else its parent's (in place)."""
    _propagate_qconfig_helper(module, qconfig_dict or {}, prepare_custom_config_dict=prepare_custom_config_dict or {})


def _observer_forward_hook(self, input, output):
    return self.activation_post_process(output)


def _observer_forward_pre_hook(self, input):
    return self.activation_post_process(input[0])


def _register_activation_post_process_hook(module, pre_hook=False):
    if not hasattr(module, "activation_post_process"):
        raise AssertionError("Expect activation_post_process attribute already attached to the module")
    if pre_hook:
        module.register_forward_pre_hook(_observer_forward_pre_hook, prepend=True)
    else:
        module.register_forward_hook(_observer_forward_hook, prepend=True)


def _get_unique_devices_(module):
    return {p.device for p in module.parameters()} | {b.device for b in module.buffers()}


def _add_observer_(module, qconfig_propagation_list=None, non_leaf_module_list=None, device=None,
                   custom_module_class_mapping=None):
    """Attach an ``activation_post_process`` observer (from each module's qconfig) to the leaves in the
    propagation list and to fused and QAT modules, with a hook that runs it on the module's output (on its input,
    for memoryless observers)."""
    if qconfig_propagation_list is None:
        qconfig_propagation_list = get_default_qconfig_propagation_list()
    custom_module_class_mapping = custom_module_class_mapping or {}
    if device is None:
        devices = _get_unique_devices_(module)
        if len(devices) > 1:
            raise AssertionError(f"_add_observer_ only works with cpu or single-device CUDA modules, but got devices "
                                 f"{devices}")
        device = next(iter(devices)) if devices else None

    def make_observer(qconfig, special=None):
        observer = qconfig.activation() if special is None else special()
        if device is not None:
            observer.to(device)
        return observer

    def needs_observation(m):
        return getattr(m, "qconfig", None) is not None

    def insert(m, special=None):
        if needs_observation(m) and not isinstance(m, DeQuantStub):
            m.add_module("activation_post_process", make_observer(m.qconfig, special))
            _register_activation_post_process_hook(m, pre_hook=_activation_is_memoryless(m.qconfig))

    for name, child in module.named_children():
        if type(child) is nn.Dropout:
            continue
        if issubclass(type(child), (nnq.FloatFunctional, nnq.QFunctional)):
            if needs_observation(child):
                if not hasattr(child, "activation_post_process"):
                    raise AssertionError(f"functional class {type(child)} has no pre-defined `activation_post_process`")
                child.activation_post_process = make_observer(child.qconfig)
        elif isinstance(child, _FusedModule):
            insert(child)
        elif non_leaf_module_list is not None and type(child) in non_leaf_module_list:
            insert(child)
        elif _has_special_act_post_process(child):
            insert(child, _get_special_act_post_process(child))
        elif needs_observation(child) and type(child) in custom_module_class_mapping:
            observed_class = custom_module_class_mapping[type(child)]
            observed = observed_class.from_float(child)
            setattr(module, name, observed)
            if not issubclass(observed_class, tuple(no_observer_set())):
                insert(observed)
        else:
            _add_observer_(child, qconfig_propagation_list, non_leaf_module_list, device, custom_module_class_mapping)
    in_list = not isinstance(module, nn.Sequential) and type(module) in qconfig_propagation_list
    if in_list and (has_no_children_ignoring_parametrizations(module) or hasattr(module, "weight_fake_quant")):
        insert(module)


def add_quant_dequant(module):
    """Wrap every leaf that has a qconfig in a QuantWrapper (QuantStub before it, DeQuantStub after)."""
    if has_no_children_ignoring_parametrizations(module) and getattr(module, "qconfig", None):
        return QuantWrapper(module)
    for name, child in module.named_children():
        module._modules[name] = add_quant_dequant(child)
    return module


def prepare(model, inplace=False, allow_list=None, observer_non_leaf_module_list=None,
            prepare_custom_config_dict=None):
    """Propagate qconfigs and attach observers, ready for calibration (a copy unless ``inplace``)."""
    if prepare_custom_config_dict is None:
        prepare_custom_config_dict = get_default_custom_config_dict()
    custom_module_class_mapping = prepare_custom_config_dict.get("float_to_observed_custom_module_class", {})
    if not inplace:
        model = copy.deepcopy(model)
    propagate_list = get_default_qconfig_propagation_list() if allow_list is None else allow_list
    propagate_qconfig_(model, qconfig_dict=None)
    if not any(getattr(m, "qconfig", None) for m in model.modules()):
        warnings.warn("None of the submodule got qconfig applied. Make sure you passed correct configuration through "
                      "`qconfig_dict` or by assigning the `.qconfig` attribute directly on submodules", stacklevel=2)
    _add_observer_(model, propagate_list, observer_non_leaf_module_list,
                   custom_module_class_mapping=custom_module_class_mapping)
    return model


def _remove_activation_post_process(module):
    if hasattr(module, "activation_post_process") and _is_activation_post_process(module.activation_post_process):
        delattr(module, "activation_post_process")
    for hooks, observer_hook in ((module._forward_pre_hooks, _observer_forward_pre_hook),
                                 (module._forward_hooks, _observer_forward_hook)):
        for handle_id in [k for k, fn in hooks.items() if fn is observer_hook]:
            hooks.pop(handle_id)


def _remove_qconfig(module):
    for child in module.children():
        _remove_qconfig(child)
    if hasattr(module, "qconfig"):
        del module.qconfig
    _remove_activation_post_process(module)


def quantize(model, run_fn, run_args, mapping=None, inplace=False):
    """Post-training static quantization in one call: eval, prepare, ``run_fn(model, *run_args)`` to calibrate,
    convert."""
    if mapping is None:
        mapping = get_default_static_quant_module_mappings()
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    prepare(model, inplace=True)
    run_fn(model, *run_args)
    convert(model, mapping, inplace=True)
    return model


def _dynamic_defaults():
    """dtype -> (module types, default qconfig) of quantize_dynamic."""
    rnn_and_linear = (nn.Linear, nn.LSTM, nn.GRU, nn.LSTMCell, nn.RNNCell, nn.GRUCell)
    return {ember.qint8: (rnn_and_linear, default_dynamic_qconfig),
            ember.float16: (rnn_and_linear, float16_dynamic_qconfig),
            ember.quint8: ((nn.EmbeddingBag, nn.Embedding), float_qparams_weight_only_qconfig),
            ember.quint4x2: ((nn.EmbeddingBag,), float_qparams_weight_only_qconfig_4bit)}


def quantize_dynamic(model, qconfig_spec=None, dtype=ember.qint8, mapping=None, inplace=False):
    """Dynamic quantization: Linear/LSTM/GRU/cells (int8 or float16 weights; or embeddings for quint8/quint4x2)
    swapped for their dynamically quantized forms. ``qconfig_spec`` is a dict of types or names to qconfigs, or a
    set of types/names given ``dtype``'s default qconfig. The top-level module itself is never swapped."""
    defaults = _dynamic_defaults()
    if qconfig_spec is None:
        if dtype not in defaults:
            raise ValueError(f"Don't know how to quantize with default settings for {dtype}. Provide full qconfig "
                             "please")
        types, qconfig = defaults[dtype]
        qconfig_spec = dict.fromkeys(types, qconfig)
    elif isinstance(qconfig_spec, set):
        if dtype not in defaults:
            raise RuntimeError("Unknown dtype specified for quantize_dynamic: ", str(dtype))
        qconfig_spec = dict(zip(qconfig_spec, itertools.repeat(defaults[dtype][1])))
    if mapping is None:
        mapping = get_default_dynamic_quant_module_mappings()
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    propagate_qconfig_(model, qconfig_spec)
    convert(model, mapping, inplace=True)
    return model


def prepare_qat(model, mapping=None, inplace=False):
    """Prepare a training-mode model for quantization-aware training: modules swapped for their QAT forms
    (fake-quantized weights), observers/fake quantization attached to activations."""
    if not model.training:
        raise AssertionError("prepare_qat only works on models in training mode")
    if mapping is None:
        mapping = get_default_qat_module_mappings()
    if not inplace:
        model = copy.deepcopy(model)
    propagate_qconfig_(model, qconfig_dict=None)
    convert(model, mapping=mapping, inplace=True, remove_qconfig=False)
    prepare(model, observer_non_leaf_module_list=set(mapping.values()), inplace=True)
    return model


def quantize_qat(model, run_fn, run_args, inplace=False):
    """Quantization-aware training in one call: train mode, prepare_qat, ``run_fn(model, *run_args)``, convert."""
    if not inplace:
        model = copy.deepcopy(model)
    model.train()
    prepare_qat(model, inplace=True)
    run_fn(model, *run_args)
    convert(model, inplace=True)
    return model


def convert(module, mapping=None, inplace=False, remove_qconfig=True, is_reference=False,
            convert_custom_config_dict=None, use_precomputed_fake_quant=False):
    """Swap each observed module that has a qconfig for its quantized form (``mapping``: float class ->
    quantized class, the static mapping by default); observers and qconfigs removed."""
    if not inplace:
        module = copy.deepcopy(module)
    _convert(module, mapping, inplace=True, is_reference=is_reference,
             convert_custom_config_dict=convert_custom_config_dict,
             use_precomputed_fake_quant=use_precomputed_fake_quant)
    if remove_qconfig:
        _remove_qconfig(module)
    return module


def _convert(module, mapping=None, inplace=False, is_reference=False, convert_custom_config_dict=None,
             use_precomputed_fake_quant=False):
    if mapping is None:
        mapping = get_default_static_quant_reference_module_mappings() if is_reference else \
            get_default_static_quant_module_mappings()
    if convert_custom_config_dict is None:
        convert_custom_config_dict = get_default_custom_config_dict()
    custom = convert_custom_config_dict.get("observed_to_quantized_custom_module_class", {})
    if not inplace:
        module = copy.deepcopy(module)
    reassign = {}
    for name, mod in module.named_children():
        if not isinstance(mod, _FusedModule) and type(mod) not in custom:
            _convert(mod, mapping, True, is_reference, convert_custom_config_dict, use_precomputed_fake_quant)
        reassign[name] = swap_module(mod, mapping, custom, use_precomputed_fake_quant)
    for key, value in reassign.items():
        module._modules[key] = value
    return module


def swap_module(mod, mapping, custom_module_class_mapping, use_precomputed_fake_quant=False):
    """``mod``'s quantized form if it has a qconfig and its type is mapped (its forward hooks, but not the
    observer's, carried over), else ``mod``."""
    if getattr(mod, "qconfig", None) is None:
        return mod
    if type(mod) in custom_module_class_mapping:
        new_mod = custom_module_class_mapping[type(mod)].from_observed(mod)
    elif type(mod) in mapping:
        qmod = mapping[type(mod)]
        if getattr(qmod, "_IS_REFERENCE", False):
            weight_post_process = mod.qconfig.weight()
            weight_post_process(mod.weight)
            new_mod = qmod.from_float(mod, get_qparam_dict(weight_post_process))
        elif "use_precomputed_fake_quant" in inspect.signature(qmod.from_float).parameters:
            new_mod = qmod.from_float(mod, use_precomputed_fake_quant=use_precomputed_fake_quant)
        else:
            new_mod = qmod.from_float(mod)
    else:
        return mod
    for hook in mod._forward_pre_hooks.values():
        new_mod.register_forward_pre_hook(hook)
    for hook in mod._forward_hooks.values():
        if hook is not _observer_forward_hook:
            new_mod.register_forward_hook(hook)
    devices = _get_unique_devices_(mod)
    if len(devices) > 1:
        raise AssertionError("swap_module only works with cpu or single-device CUDA modules, but got devices "
                             f"{devices}")
    if devices:
        new_mod.to(next(iter(devices)))
    return new_mod


def _get_observer_dict(mod, target_dict, prefix=""):
    """Every ``activation_post_process`` of ``mod``, by dotted path, into ``target_dict``."""
    dot = prefix + "." if prefix else ""
    if hasattr(mod, "activation_post_process"):
        target_dict[dot + "activation_post_process"] = mod.activation_post_process
    for name, child in mod.named_children():
        _get_observer_dict(child, target_dict, dot + name if prefix else name)
