"""QConfig: which observer (or fake-quantize) constructors watch a layer's activations and its weight; the
default qconfigs of each engine."""
import copy
import warnings
from collections import namedtuple

import ember
import ember.nn as nn

from .fake_quantize import (
    FakeQuantize,
    FakeQuantizeBase,
    FusedMovingAvgObsFakeQuantize,
    default_dynamic_fake_quant,
    default_embedding_fake_quant,
    default_embedding_fake_quant_4bit,
    default_fake_quant,
    default_fused_act_fake_quant,
    default_fused_per_channel_wt_fake_quant,
    default_fused_wt_fake_quant,
    default_per_channel_weight_fake_quant,
    default_weight_fake_quant,
    fused_per_channel_wt_fake_quant_range_neg_127_to_127,
    fused_wt_fake_quant_range_neg_127_to_127,
)
from .observer import (
    HistogramObserver,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    NoopObserver,
    PerChannelMinMaxObserver,
    PlaceholderObserver,
    ReuseInputObserver,
    _PartialWrapper,
    default_debug_observer,
    default_dynamic_quant_observer,
    default_float_qparams_observer,
    default_float_qparams_observer_4bit,
    default_observer,
    default_per_channel_weight_observer,
    default_placeholder_observer,
    default_reuse_input_observer,
    default_weight_observer,
    per_channel_weight_observer_range_neg_127_to_127,
    weight_observer_range_neg_127_to_127,
)

__all__ = ["QConfig", "QConfigDynamic", "default_qconfig", "default_debug_qconfig", "default_per_channel_qconfig",
           "default_dynamic_qconfig", "float16_dynamic_qconfig", "float16_static_qconfig",
           "per_channel_dynamic_qconfig", "float_qparams_weight_only_qconfig",
           "float_qparams_weight_only_qconfig_4bit", "default_quint8_weight_qconfig", "default_qat_qconfig",
           "default_dynamic_qat_qconfig", "default_weight_only_qconfig", "default_activation_only_qconfig",
           "default_qat_qconfig_v2", "default_reuse_input_qconfig", "default_symmetric_qnnpack_qconfig",
           "default_per_channel_symmetric_qnnpack_qconfig", "default_symmetric_qnnpack_qat_qconfig",
           "default_per_channel_symmetric_qnnpack_qat_qconfig", "default_embedding_qat_qconfig",
           "default_embedding_qat_qconfig_4bit", "get_default_qconfig", "get_default_qat_qconfig",
           "get_default_qconfig_dict", "get_default_qat_qconfig_dict", "QConfigAny", "qconfig_equals"]

_BACKENDS = ["fbgemm", "x86", "qnnpack", "onednn"]


class QConfig(namedtuple("QConfig", ["activation", "weight"])):
    """How to quantize a layer: constructors (classes or ``with_args`` factories, not instances) of the observers
    of its activations and of its weight."""

    __slots__ = ()

    def __new__(cls, activation, weight):
        if isinstance(activation, nn.Module) or isinstance(weight, nn.Module):
            raise ValueError("QConfig received observer instance, please pass observer class instead. "
                             "Use MyObserver.with_args(x=1) to override arguments to constructor if needed")
        return super().__new__(cls, activation, weight)


class QConfigDynamic(namedtuple("QConfigDynamic", ["activation", "weight"])):
    """The former qconfig of dynamic quantization (use ``QConfig``)."""

    __slots__ = ()

    def __new__(cls, activation=nn.Identity, weight=nn.Identity):
        warnings.warn("`QConfigDynamic` is going to be deprecated in PyTorch 1.12, please use `QConfig` instead",
                      FutureWarning, stacklevel=2)
        if isinstance(weight, nn.Module):
            raise ValueError("QConfigDynamic received observer instance, please pass observer class instead. "
                             "Use MyObserver.with_args(x=1) to override arguments to constructor if needed")
        return super().__new__(cls, activation, weight)


QConfigAny = QConfig | None

default_qconfig = QConfig(activation=default_observer, weight=default_weight_observer)
default_debug_qconfig = QConfig(weight=default_weight_observer, activation=default_debug_observer)
default_per_channel_qconfig = QConfig(activation=default_observer, weight=default_per_channel_weight_observer)
default_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer, weight=default_weight_observer)
float16_dynamic_qconfig = QConfig(activation=PlaceholderObserver.with_args(dtype=ember.float16, is_dynamic=True),
                                  weight=PlaceholderObserver.with_args(dtype=ember.float16))
float16_static_qconfig = QConfig(activation=PlaceholderObserver.with_args(dtype=ember.float16),
                                 weight=PlaceholderObserver.with_args(dtype=ember.float16))
per_channel_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                      weight=default_per_channel_weight_observer)
float_qparams_weight_only_qconfig = QConfig(activation=default_placeholder_observer,
                                            weight=default_float_qparams_observer)
float_qparams_weight_only_qconfig_4bit = QConfig(activation=default_placeholder_observer,
                                                 weight=default_float_qparams_observer_4bit)
default_qat_qconfig = QConfig(activation=default_fake_quant, weight=default_weight_fake_quant)
default_dynamic_qat_qconfig = QConfig(activation=default_dynamic_fake_quant, weight=default_weight_fake_quant)
default_weight_only_qconfig = QConfig(activation=nn.Identity, weight=default_weight_fake_quant)
default_activation_only_qconfig = QConfig(activation=default_fake_quant, weight=nn.Identity)
default_qat_qconfig_v2 = QConfig(activation=default_fused_act_fake_quant, weight=default_fused_wt_fake_quant)
default_reuse_input_qconfig = QConfig(activation=default_reuse_input_observer, weight=NoopObserver)


def _check_backend(backend):
    if backend not in _BACKENDS:
        raise AssertionError("backend: " + str(backend) + f" not supported. backend must be one of {_BACKENDS}")


def _vnni_supported():
    """Whether the CPU has the VNNI int8 dot-product instructions (x86 Linux: /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return "avx512_vnni" in f.read()
    except OSError:
        return False


def get_default_qconfig(backend="x86", version=0):
    """The default post-training qconfig of an engine: histogram-observed activations (reduced to 0..127 on
    x86/fbgemm), symmetric int8 weights (per channel except on qnnpack)."""
    _check_backend(backend)
    if version != 0:
        raise AssertionError("Version number: " + str(version) + " in get_default_qconfig is not supported. "
                             "Version number must be 0")
    if backend == "qnnpack":
        return QConfig(activation=HistogramObserver.with_args(reduce_range=False), weight=default_weight_observer)
    if backend == "onednn":
        if not _vnni_supported():
            warnings.warn("Default qconfig of oneDNN backend with reduce_range of false may have accuracy issues "
                          "on CPU without Vector Neural Network Instruction support.", stacklevel=2)
        return QConfig(activation=HistogramObserver.with_args(reduce_range=False),
                       weight=default_per_channel_weight_observer)
    return QConfig(activation=HistogramObserver.with_args(reduce_range=True),
                   weight=default_per_channel_weight_observer)


default_symmetric_qnnpack_qconfig = QConfig(
    activation=HistogramObserver.with_args(dtype=ember.qint8, reduce_range=False, eps=2 ** -12),
    weight=weight_observer_range_neg_127_to_127)
default_per_channel_symmetric_qnnpack_qconfig = QConfig(
    activation=HistogramObserver.with_args(dtype=ember.qint8, reduce_range=False, eps=2 ** -12),
    weight=per_channel_weight_observer_range_neg_127_to_127)
default_embedding_qat_qconfig = QConfig(activation=NoopObserver.with_args(dtype=ember.float32),
                                        weight=default_embedding_fake_quant)
default_embedding_qat_qconfig_4bit = QConfig(activation=NoopObserver.with_args(dtype=ember.float32),
                                             weight=default_embedding_fake_quant_4bit)
default_quint8_weight_qconfig = QConfig(activation=HistogramObserver, weight=MinMaxObserver)


def get_default_qat_qconfig(backend="x86", version=1):
    """The default quantization-aware-training qconfig of an engine (version 1: the fused fake-quantize modules;
    version 0: FakeQuantize)."""
    _check_backend(backend)
    if version not in (0, 1):
        raise AssertionError("Version number: " + str(version) + "in get_default_qat_qconfig is not supported. "
                             "Version number must be 0 or 1")
    fake_quant = FakeQuantize if version == 0 else FusedMovingAvgObsFakeQuantize
    range_kwargs = {} if backend == "onednn" else {"reduce_range": backend != "qnnpack"}
    activation = fake_quant.with_args(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                                      **range_kwargs)
    if version == 0:
        weight = default_weight_fake_quant if backend == "qnnpack" else default_per_channel_weight_fake_quant
    else:
        weight = default_fused_wt_fake_quant if backend == "qnnpack" else default_fused_per_channel_wt_fake_quant
    return QConfig(activation=activation, weight=weight)


default_symmetric_qnnpack_qat_qconfig = QConfig(
    activation=FusedMovingAvgObsFakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=-128,
                                                       quant_max=127, dtype=ember.qint8, reduce_range=False,
                                                       eps=2 ** -12),
    weight=fused_wt_fake_quant_range_neg_127_to_127)
default_per_channel_symmetric_qnnpack_qat_qconfig = QConfig(
    activation=FusedMovingAvgObsFakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=-128,
                                                       quant_max=127, dtype=ember.qint8, reduce_range=False,
                                                       eps=2 ** -12),
    weight=fused_per_channel_wt_fake_quant_range_neg_127_to_127)
_default_fp32_placeholder_qconfig = QConfig(activation=PlaceholderObserver.with_args(dtype=ember.float32),
                                            weight=PlaceholderObserver.with_args(dtype=ember.float32))
_default_quint8_placeholder_qconfig = QConfig(activation=PlaceholderObserver.with_args(dtype=ember.quint8),
                                              weight=None)


def get_default_qconfig_dict(backend="x86", version=0):
    warnings.warn("`torch.ao.quantization.get_default_qconfig_dict` is deprecated and will be removed in a future "
                  "version. Please use `torch.ao.quantization.get_default_qconfig_mapping` instead.",
                  FutureWarning, stacklevel=2)
    from .qconfig_mapping import get_default_qconfig_mapping
    return get_default_qconfig_mapping(backend, version).to_dict()


def get_default_qat_qconfig_dict(backend="x86", version=1):
    warnings.warn("`torch.ao.quantization.get_default_qat_qconfig_dict` is deprecated and will be removed in a "
                  "future version. Please use `torch.ao.quantization.get_default_qat_qconfig_mapping` instead.",
                  FutureWarning, stacklevel=2)
    from .qconfig_mapping import get_default_qat_qconfig_mapping
    return get_default_qat_qconfig_mapping(backend, version).to_dict()


def _assert_valid_qconfig(qconfig, mod):
    """Transposed convolutions take no per-channel weight observer."""
    if qconfig is None or qconfig.weight is None:
        return
    if isinstance(mod, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)) and \
            isinstance(qconfig.weight(), (PerChannelMinMaxObserver, MovingAveragePerChannelMinMaxObserver)):
        raise AssertionError("Per channel weight observer is not supported yet for ConvTranspose{n}d.")


def _add_module_to_qconfig_obs_ctr(qconfig, module):
    """The qconfig with constructors that put observers on ``module``'s device."""
    if module is None or qconfig is None or qconfig._fields != ("activation", "weight"):
        return qconfig

    def module_device_kwargs():
        devices = {p.device for p in module.parameters()} | {b.device for b in module.buffers()}
        return {"device": next(iter(devices))} if devices else None

    def on_module_device(constructor):
        try:
            constructor.with_args(factory_kwargs=None)()
        except (AttributeError, TypeError):  # no with_args, or no factory_kwargs argument
            return constructor
        return constructor.with_callable_args(factory_kwargs=module_device_kwargs)

    return QConfig(on_module_device(qconfig.activation), on_module_device(qconfig.weight))


def _obs_or_fq_ctr_equals(a, b):
    if isinstance(a, _PartialWrapper) and isinstance(b, _PartialWrapper):
        return _partial_wrapper_equals(a, b)
    return a == b


def _partial_wrapper_equals(a, b):
    """Same constructor and arguments (an ``observer`` argument compared the same way)."""
    ka, kb = copy.copy(a.p.keywords), copy.copy(b.p.keywords)
    same = True
    if "observer" in ka and "observer" in kb:
        same = _obs_or_fq_ctr_equals(ka.pop("observer"), kb.pop("observer"))
    return a.p.func == b.p.func and a.p.args == b.p.args and same and ka == kb


def qconfig_equals(q1, q2):
    """Whether two qconfigs build the same observers."""
    if q1 is None or q2 is None:
        return q1 == q2
    try:
        return _obs_or_fq_ctr_equals(q1.activation, q2.activation) and _obs_or_fq_ctr_equals(q1.weight, q2.weight)
    except AttributeError:
        return q1 == q2


def _activation_is_memoryless(qconfig):
    """Whether the activation observer forgets earlier inputs (a moving average with constant 1)."""
    act = qconfig.activation()
    if isinstance(act, FakeQuantizeBase) and hasattr(act, "activation_post_process"):
        act = act.activation_post_process
    return getattr(act, "averaging_constant", None) == 1


def _is_reuse_input_qconfig(qconfig):
    return qconfig is not None and isinstance(qconfig.activation(), ReuseInputObserver) and \
        isinstance(qconfig.weight(), NoopObserver)
