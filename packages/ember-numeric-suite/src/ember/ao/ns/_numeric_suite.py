"""PyTorch's eager-mode numeric suite: match a float model with the model quantized from it and collect, per
module, the weights (``compare_weights``), the outputs each quantized module gives next to its float twin fed the
same input (``compare_model_stub``), or the activations of both models at matching places
(``compare_model_outputs``).

Results are keyed and shaped as PyTorch's, quirks included (the name matching ignores dots, ``ShadowLogger`` keeps
only the first item of a batch): code written for ``torch.ao.ns._numeric_suite`` reads them unchanged.
"""
from collections.abc import Callable
from typing import Any

import ember
import ember.ao.nn.quantized as nnq
import ember.ao.nn.quantized.dynamic as nnqd
import ember.nn as nn
from ember.ao.quantization import QConfig, prepare
from ember.ao.quantization.quantization_mappings import get_default_compare_output_module_list

__all__ = ["Any", "Callable", "Logger", "NON_LEAF_MODULE_TO_ADD_OBSERVER_ALLOW_LIST", "OutputLogger", "Shadow",
           "ShadowLogger", "compare_model_outputs", "compare_model_stub", "compare_weights",
           "get_default_compare_output_module_list", "get_logger_dict", "get_matching_activations", "prepare",
           "prepare_model_outputs", "prepare_model_with_stubs"]

# Modules with children that still get an output logger in the quantized model (their children are packed
# parameters, not layers of their own)
NON_LEAF_MODULE_TO_ADD_OBSERVER_ALLOW_LIST = {nnqd.Linear, nnq.Linear, nnqd.LSTM, nn.LSTM}


def _joined(key, drop):
    """``key`` without its last ``drop`` dotted parts, the rest concatenated without the dots (PyTorch matches
    names so: "fc1.0.weight" and "fc10.weight" look alike)."""
    return "".join(key.split(".")[:-drop])


def _first_with_stem(candidates, stem):
    """The first candidate whose name, less its last one or two parts, reads ``stem``."""
    for name in candidates:
        if stem in (_joined(name, 1), _joined(name, 2)):
            return name
    return None


def _find_match(candidates, key, suffix):
    """The name in ``candidates`` that belongs to the module of ``key`` (a name ending in ``suffix``), or None.

    A quantized Linear's "fc._packed_params._packed_params" also matches the float "fc.weight"."""
    if key.split(".")[-1] != suffix:
        return None
    found = _first_with_stem(candidates, _joined(key, 1))
    if found is None and suffix == "_packed_params":
        stem = _joined(key, 2)
        found = _first_with_stem(candidates, stem) if stem else None
    return found


def _packed_weight(cell_params, which):
    """The quantized weight in a dynamic RNN layer's packed parameters: 0 input-hidden, 1 hidden-hidden (the state
    layout is PyTorch's CellParamsBase: (kind, tensors, doubles, longs, [packed weights]))."""
    return cell_params.__getstate__()[0][4][which].__getstate__()[0][0]


def compare_weights(float_dict: dict[str, Any], quantized_dict: dict[str, Any]) -> dict[str, dict[str, ember.Tensor]]:
    """Pair each weight of a quantized model's state_dict with the float weight it was made from.

    Returns ``{quantized key: {"float": float weight, "quantized": quantized weight}}`` for the convolution and
    linear weights (a Linear's key is ``<name>._packed_params._packed_params``) and, for a dynamic LSTM, one entry
    per layer (``<name>._all_weight_values.<i>.param``) holding the hidden-to-hidden weights, as PyTorch does.
    """
    weight_dict = {}
    for key in quantized_dict:
        match = _find_match(float_dict, key, "weight")
        if match is not None:
            weight_dict[key] = {"float": float_dict[match], "quantized": quantized_dict[key]}
            continue
        match = _find_match(float_dict, key, "_packed_params")
        if match is not None:  # (a (weight, bias) pair)
            weight_dict[key] = {"float": float_dict[match], "quantized": quantized_dict[key][0]}
        parts = key.split(".")
        if parts[-1] == "param" and len(parts) >= 3 and parts[-3] == "_all_weight_values":
            module, layer = ".".join(parts[:-3]), parts[-2]
            ih, hh = f"{module}.weight_ih_l{layer}", f"{module}.weight_hh_l{layer}"
            if ih in float_dict and hh in float_dict:
                # (PyTorch fills the entry with the input weights, then overwrites it with the hidden ones)
                weight_dict[key] = {"float": float_dict[hh], "quantized": _packed_weight(quantized_dict[key], 1)}
    return weight_dict


def _collect_stats(mod, target, prefix):
    dotted = prefix + "." if prefix else ""
    logger = next((child for child in mod.children() if isinstance(child, Logger)), None)
    if logger is not None:
        target[dotted + "stats"] = logger.stats
    for name, child in mod.named_children():
        _collect_stats(child, target, dotted + name)


def get_logger_dict(mod: nn.Module, prefix: str = "") -> dict[str, dict]:
    """The stats of every logger in ``mod``: ``{"<module path>.stats": stats}`` for each module with a ``Logger``
    child (the first one; ``"stats"`` for ``mod`` itself), the paths starting with ``prefix``."""
    target = {}
    _collect_stats(mod, target, prefix)
    return target


class Logger(nn.Module):
    """Base class of the loggers: a module that records what it is given in its ``stats`` dict.

    ``dtype`` is quint8 so that graph-mode quantization would treat a logger as the observer of a statically
    quantized op."""

    def __init__(self):
        super().__init__()
        self.stats = {}
        self.dtype = ember.quint8

    def forward(self, x):
        """Record nothing (subclasses record)."""


class ShadowLogger(Logger):
    """The logger of a ``Shadow`` module: appends the quantized module's output to ``stats["quantized"]`` and its
    float shadow's to ``stats["float"]``, detached.

    As PyTorch's, it keeps ``x[0]`` of anything whose length is above 1: the first output of a tuple (an LSTM's
    output sequence), but also only the first item of a batch."""

    def __init__(self):
        super().__init__()
        self.stats["float"] = []
        self.stats["quantized"] = []

    def forward(self, x, y):
        if len(x) > 1:
            x = x[0]
        if len(y) > 1:
            y = y[0]
        self.stats["quantized"].append(x.detach())
        self.stats["float"].append(y.detach())


class OutputLogger(Logger):
    """Appends each output it sees (as given: a tensor, or a tuple such as an LSTM's) to ``stats["tensor_val"]``
    and passes it on."""

    def __init__(self):
        super().__init__()
        self.stats["tensor_val"] = []

    def forward(self, x):
        self.stats["tensor_val"].append(x)
        return x


def _tuples_to_lists(x):
    return [_tuples_to_lists(v) for v in x] if type(x) is tuple else x


def _dequantized(x):
    if type(x) is list:
        return [_dequantized(v) for v in x]
    return x.dequantize() if x.is_quantized else x


class Shadow(nn.Module):
    """A quantized module (``orig_module``) with the float module it came from (``shadow_module``) beside it: each
    call runs both on the same input (dequantized for the float one), hands both outputs to ``logger`` (an
    instance of ``logger_cls``) and returns the quantized output.

    The ``FloatFunctional`` ops (add, add_scalar, mul, mul_scalar, cat, add_relu) are shadowed the same way."""

    def __init__(self, q_module, float_module, logger_cls):
        super().__init__()
        self.orig_module = q_module
        self.shadow_module = float_module
        self.dequant = nnq.DeQuantize()
        self.logger = logger_cls()

    def forward(self, *x):
        args = _tuples_to_lists(x)
        output = self.orig_module(*args)
        self.logger(output, self.shadow_module(*_dequantized(args)))
        return output

    def _both(self, op, args, float_args):
        output = getattr(self.orig_module, op)(*args)
        self.logger(output, getattr(self.shadow_module, op)(*float_args))
        return output

    def add(self, x, y):
        return self._both("add", (x, y), (x.dequantize(), y.dequantize()))

    def add_scalar(self, x, y):
        return self._both("add_scalar", (x, y), (x.dequantize(), y))

    def mul(self, x, y):
        return self._both("mul", (x, y), (x.dequantize(), y.dequantize()))

    def mul_scalar(self, x, y):
        return self._both("mul_scalar", (x, y), (x.dequantize(), y))

    def cat(self, x, dim=0):
        return self._both("cat", (x, dim), ([t.dequantize() for t in x], dim))

    def add_relu(self, x, y):
        return self._both("add_relu", (x, y), (x.dequantize(), y.dequantize()))


def _same_module_types(a, b):
    return [type(m) for m in a.modules()] == [type(m) for m in b.modules()]


def prepare_model_with_stubs(float_module: nn.Module, q_module: nn.Module, module_swap_list: set[type],
                             logger_cls: Callable) -> None:
    """Replace, in ``q_module`` (in place), each child whose float counterpart in ``float_module`` (same name) has a
    type in ``module_swap_list`` by a ``Shadow`` of both with a ``logger_cls`` logger. Children that were not
    quantized (same module types in both) are left alone; other children are searched recursively.

    Then ``q_model(data)`` records the outputs, and ``get_logger_dict(q_model)`` returns them."""
    float_children = dict(float_module.named_children())
    shadows = {}
    for name, q_child in q_module.named_children():
        if name not in float_children:
            continue
        float_child = float_children[name]
        if type(float_child) not in module_swap_list:
            prepare_model_with_stubs(float_child, q_child, module_swap_list, logger_cls)
        elif not _same_module_types(q_child, float_child):
            shadows[name] = Shadow(q_child, float_child, logger_cls)
    q_module._modules.update(shadows)


def compare_model_stub(float_model: nn.Module, q_model: nn.Module, module_swap_list: set[type], *data,
                       logger_cls=ShadowLogger) -> dict[str, dict]:
    """Shadow the quantized modules of ``q_model`` whose float types are in ``module_swap_list`` with their float
    modules (``prepare_model_with_stubs``, in place), run ``q_model(*data)`` and return
    ``{"<module path>.stats": {"float": [...], "quantized": [...]}}``: per call, the outputs of the quantized module
    and of its float twin given the same input. The error of each module alone, not accumulated."""
    prepare_model_with_stubs(float_model, q_model, module_swap_list, logger_cls)
    q_model(*data)
    return get_logger_dict(q_model)


def get_matching_activations(float_module: nn.Module, q_module: nn.Module) -> dict[str, dict[str, ember.Tensor]]:
    """Pair the ``OutputLogger`` stats of a quantized model with those of the float model at the same place:
    ``{"<quantized module path>.stats": {"float": [...], "quantized": [...]}}`` (loggers that saw nothing are
    left out)."""
    float_dict = get_logger_dict(float_module)
    quantized_dict = get_logger_dict(q_module)
    candidates = sorted(float_dict, reverse=True)
    act_dict = {}
    for key, stats in quantized_dict.items():
        if len(stats["tensor_val"]) == 0:
            continue
        match = _find_match(candidates, key, "stats")
        if match is not None:
            act_dict[key] = {"float": float_dict[match]["tensor_val"], "quantized": stats["tensor_val"]}
    return act_dict


def prepare_model_outputs(float_module: nn.Module, q_module: nn.Module, logger_cls=OutputLogger,
                          allow_list=None) -> None:
    """Attach a ``logger_cls`` logger to the output of every module of ``float_module`` and ``q_module`` whose type
    is in ``allow_list`` (default: ``get_default_compare_output_module_list()``), in place, through ``prepare``
    with a qconfig whose activation observer is the logger. In the quantized model the modules of
    ``NON_LEAF_MODULE_TO_ADD_OBSERVER_ALLOW_LIST`` get one too."""
    if allow_list is None:
        allow_list = get_default_compare_output_module_list()
    qconfig_debug = QConfig(activation=logger_cls, weight=None)
    float_module.qconfig = qconfig_debug
    prepare(float_module, inplace=True, allow_list=allow_list, prepare_custom_config_dict={})
    q_module.qconfig = qconfig_debug
    prepare(q_module, inplace=True, allow_list=allow_list,
            observer_non_leaf_module_list=NON_LEAF_MODULE_TO_ADD_OBSERVER_ALLOW_LIST, prepare_custom_config_dict={})


def compare_model_outputs(float_model: nn.Module, q_model: nn.Module, *data, logger_cls=OutputLogger,
                          allow_list=None) -> dict[str, dict[str, ember.Tensor]]:
    """Log the outputs of both models' modules (``prepare_model_outputs``, in place), run both on ``data`` and
    return the matching activations (``get_matching_activations``): the error accumulated up to each module."""
    if allow_list is None:
        allow_list = get_default_compare_output_module_list()
    prepare_model_outputs(float_model, q_model, logger_cls, allow_list)
    float_model(*data)
    q_model(*data)
    return get_matching_activations(float_model, q_model)
