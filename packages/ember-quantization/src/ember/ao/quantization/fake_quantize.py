"""Fake quantization: modules that observe a tensor and return it quantized and dequantized again (in float), so
that training sees the rounding of the quantized model (quantization-aware training)."""
from abc import ABC, abstractmethod

import ember
from ember._quantized import choose_qparams
from ember.nn import Module

from .observer import (
    FixedQParamsObserver,
    HistogramObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    _with_args,
    default_fixed_qparams_range_0to1_observer,
    default_fixed_qparams_range_neg1to1_observer,
)

__all__ = ["FakeQuantizeBase", "FakeQuantize", "FixedQParamsFakeQuantize", "FusedMovingAvgObsFakeQuantize",
           "disable_fake_quant", "disable_observer", "enable_fake_quant", "enable_observer", "default_fake_quant",
           "default_weight_fake_quant", "default_dynamic_fake_quant", "default_fixed_qparams_range_neg1to1_fake_quant",
           "default_fixed_qparams_range_0to1_fake_quant", "default_symmetric_fixed_qparams_fake_quant",
           "default_affine_fixed_qparams_fake_quant", "default_per_channel_weight_fake_quant",
           "default_embedding_fake_quant", "default_embedding_fake_quant_4bit", "default_histogram_fake_quant",
           "default_fused_act_fake_quant", "default_fused_wt_fake_quant", "default_fused_per_channel_wt_fake_quant",
           "fused_wt_fake_quant_range_neg_127_to_127", "fused_per_channel_wt_fake_quant_range_neg_127_to_127"]


def _is_per_channel(qscheme):
    return qscheme in (ember.per_channel_symmetric, ember.per_channel_affine, ember.per_channel_affine_float_qparams)


def _is_per_tensor(qscheme):
    return qscheme in (ember.per_tensor_symmetric, ember.per_tensor_affine)


def _is_symmetric_quant(qscheme):
    return qscheme in (ember.per_tensor_symmetric, ember.per_channel_symmetric)


def _is_float_qparams(qscheme):
    return qscheme == ember.per_channel_affine_float_qparams


def _int_range(dtype):
    """(min, max) of the integers a (quantized or integer) dtype holds."""
    if hasattr(dtype, "qmin"):
        return dtype.qmin, dtype.qmax
    info = ember.iinfo(dtype)
    return info.min, info.max


class FakeQuantizeBase(ABC, Module):
    """Base of fake-quantize modules: the ``fake_quant_enabled`` and ``observer_enabled`` switches."""

    def __init__(self):
        super().__init__()
        self.register_buffer("fake_quant_enabled", ember.tensor([1], dtype=ember.uint8))
        self.register_buffer("observer_enabled", ember.tensor([1], dtype=ember.uint8))

    @abstractmethod
    def forward(self, x):
        pass

    @abstractmethod
    def calculate_qparams(self, **kwargs):
        pass

    def enable_fake_quant(self, enabled=True):
        self.fake_quant_enabled[0] = 1 if enabled else 0

    def disable_fake_quant(self):
        self.enable_fake_quant(False)

    def enable_observer(self, enabled=True):
        self.observer_enabled[0] = 1 if enabled else 0

    def disable_observer(self):
        self.enable_observer(False)

    @classmethod
    def with_args(cls, **kwargs):
        return _with_args(cls, **kwargs)


class FakeQuantize(FakeQuantizeBase):
    """``(clamp(round(x / scale + zero_point), quant_min, quant_max) - zero_point) * scale``, with scale and
    zero point from an observer (``activation_post_process``) that watches every input while enabled."""

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min=None, quant_max=None, is_dynamic=False,
                 **observer_kwargs):
        super().__init__()
        if quant_min is not None and quant_max is not None:
            if quant_min > quant_max:
                raise AssertionError("quant_min must be less than or equal to quant_max")
            dtype = observer_kwargs.get("dtype", ember.quint8)
            if hasattr(observer, "p"):  # a with_args factory: its bound dtype wins
                dtype = getattr(getattr(observer, "p", {}), "keywords", {}).get("dtype", dtype)
            lo, hi = _int_range(dtype)
            if lo > quant_min:
                raise AssertionError("quant_min out of bound")
            if quant_max > hi:
                raise AssertionError("quant_max out of bound")
            observer_kwargs.update({"quant_min": quant_min, "quant_max": quant_max})
        observer_kwargs["is_dynamic"] = is_dynamic
        self.activation_post_process = observer(**observer_kwargs)
        self.quant_min = self.activation_post_process.quant_min
        self.quant_max = self.activation_post_process.quant_max
        self.is_dynamic = self.activation_post_process.is_dynamic
        zero_point_dtype = ember.float if _is_float_qparams(self.activation_post_process.qscheme) else ember.int
        self.register_buffer("scale", ember.tensor([1.0], dtype=ember.float))
        self.register_buffer("zero_point", ember.tensor([0], dtype=zero_point_dtype))
        self.dtype = self.activation_post_process.dtype
        self.qscheme = self.activation_post_process.qscheme
        self.ch_axis = getattr(self.activation_post_process, "ch_axis", -1)
        if not (_is_per_channel(self.qscheme) or _is_per_tensor(self.qscheme)):
            raise AssertionError("Only per channel and per tensor quantization are supported in fake quantize"
                                 " got qscheme: " + str(self.qscheme))
        self.is_per_channel = _is_per_channel(self.qscheme)

    def calculate_qparams(self):
        return self.activation_post_process.calculate_qparams()

    def _store_qparams(self, scale, zero_point):
        if self.scale.shape != scale.shape:
            self.scale.resize_(scale.shape)
            self.zero_point.resize_(zero_point.shape)
        self.scale.copy_(scale)
        self.zero_point.copy_(zero_point)

    def forward(self, X):
        if self.observer_enabled[0].item() == 1:
            self.activation_post_process(X.detach())
            self._store_qparams(*self.calculate_qparams())
        if self.fake_quant_enabled[0].item() == 1:
            apo = self.activation_post_process
            if self.is_per_channel:
                X = ember.fake_quantize_per_channel_affine(X, self.scale, self.zero_point, self.ch_axis,
                                                           apo.quant_min, apo.quant_max)
            else:
                X = ember.fake_quantize_per_tensor_affine(X, self.scale, self.zero_point, apo.quant_min,
                                                          apo.quant_max)
        return X

    def extra_repr(self):
        apo = self.activation_post_process
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled={self.observer_enabled}, "
                f"quant_min={apo.quant_min}, quant_max={apo.quant_max}, dtype={self.dtype}, qscheme={self.qscheme}, "
                f"ch_axis={self.ch_axis}, scale={self.scale}, zero_point={self.zero_point}")

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "scale"] = self.scale
        destination[prefix + "zero_point"] = self.zero_point

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs):
        for name, buffer in (("scale", self.scale), ("zero_point", self.zero_point)):
            key = prefix + name
            if key in state_dict:
                buffer.resize_(state_dict[key].shape)  # (per-channel qparams: as many as the checkpoint has)
            elif strict:
                missing_keys.append(key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs)


class FixedQParamsFakeQuantize(FakeQuantize):
    """Fake quantization with the fixed qparams of a ``FixedQParamsObserver`` (ops of known output range)."""

    def __init__(self, observer):
        super().__init__(observer=observer)
        if type(self.activation_post_process) is not FixedQParamsObserver:
            raise AssertionError(f"{self.__class__.__name__}'s observer must be a {FixedQParamsObserver.__name__}")
        self._observer_ctr = observer
        self.scale = self.activation_post_process.scale
        self.zero_point = self.activation_post_process.zero_point
        if not _is_per_tensor(self.qscheme):
            raise AssertionError("Only per tensor quantization is supported FixedQParamsFakeQuantize module, "
                                 "got qscheme:" + str(self.qscheme))

    def calculate_qparams(self):
        return self.scale, self.zero_point

    def extra_repr(self):
        apo = self.activation_post_process
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled={self.observer_enabled}, "
                f"scale={self.scale}, zero_point={self.zero_point}, dtype={self.dtype}, quant_min={apo.quant_min}, "
                f"quant_max={apo.quant_max}, qscheme={self.qscheme}")


class FusedMovingAvgObsFakeQuantize(FakeQuantize):
    """Moving-average min/max observation, qparams and fake quantization in one step, as PyTorch's fused op: the
    qparams come from the C++ formula (``ChooseQuantizationParams``; symmetric schemes keep the zero point at the
    middle of the range), not from the observer's ``calculate_qparams``."""

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, **observer_kwargs):
        super().__init__(observer, quant_min, quant_max, **observer_kwargs)
        if not isinstance(self.activation_post_process,
                          (MovingAverageMinMaxObserver, MovingAveragePerChannelMinMaxObserver)):
            raise AssertionError("Fused observer+fake_quant module only works with MovingAverageMinMaxObserver")
        self.register_buffer("fake_quant_enabled", ember.tensor([1], dtype=ember.long))
        self.register_buffer("observer_enabled", ember.tensor([1], dtype=ember.long))
        self.is_symmetric_quant = _is_symmetric_quant(self.activation_post_process.qscheme)

    def calculate_qparams(self):
        return self.activation_post_process.calculate_qparams()

    def extra_repr(self):
        apo = self.activation_post_process
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled={self.observer_enabled}, "
                f"scale={self.scale}, zero_point={self.zero_point}, dtype={self.dtype}, quant_min={apo.quant_min}, "
                f"quant_max={apo.quant_max}, qscheme={self.qscheme}, reduce_range={apo.reduce_range}")

    def forward(self, X):
        apo = self.activation_post_process
        if self.observer_enabled[0].item():
            self._observe(X.detach())
        if not self.fake_quant_enabled[0].item():
            return X.clone()
        lo, hi = apo.min_val.tolist(), apo.max_val.tolist()
        if self.is_per_channel:
            pairs = [choose_qparams(a, b, apo.quant_min, apo.quant_max, self.is_symmetric_quant)
                     for a, b in zip(lo, hi)]
        else:
            pairs = [choose_qparams(lo, hi, apo.quant_min, apo.quant_max, self.is_symmetric_quant)]
        scale = ember.tensor([s for s, _ in pairs], dtype=ember.float32)
        zero_point = ember.tensor([z for _, z in pairs], dtype=self.zero_point.dtype)
        self._store_qparams(scale, zero_point)
        if self.is_per_channel:
            return ember.fake_quantize_per_channel_affine(X, self.scale, self.zero_point, self.ch_axis,
                                                          apo.quant_min, apo.quant_max)
        return ember.fake_quantize_per_tensor_affine(X, self.scale, self.zero_point, apo.quant_min, apo.quant_max)

    def _observe(self, x):
        """The fused op's moving average: a running value that is still infinite takes the new one."""
        apo = self.activation_post_process
        if self.is_per_channel:
            if self.ch_axis != 0:
                raise RuntimeError("Per-channel FakeQuant in fused_moving_avg_obs_fake_quant is only supported on "
                                   "axis == 0")
            lo, hi = ember.aminmax(ember.flatten(x.to(ember.float32), start_dim=1), dim=1)
            if apo.min_val.numel() != lo.numel():
                apo.min_val.resize_(lo.shape).fill_(float("inf"))
                apo.max_val.resize_(hi.shape).fill_(float("-inf"))
        else:
            lo, hi = ember.aminmax(x.to(ember.float32))
        c = apo.averaging_constant
        for running, current in ((apo.min_val, lo), (apo.max_val, hi)):
            # (the first statistics replace the infinite initial ones: no inf - inf computed)
            base = ember.where(ember.isinf(running), current, running)
            running.copy_(base + c * (current - base))


def disable_fake_quant(mod):
    """Turn fake quantization off in ``mod`` if it is a fake-quantize module (``model.apply(disable_fake_quant)``)."""
    if isinstance(mod, FakeQuantizeBase):
        mod.disable_fake_quant()


def enable_fake_quant(mod):
    if isinstance(mod, FakeQuantizeBase):
        mod.enable_fake_quant()


def disable_observer(mod):
    if isinstance(mod, FakeQuantizeBase):
        mod.disable_observer()


def enable_observer(mod):
    if isinstance(mod, FakeQuantizeBase):
        mod.enable_observer()


default_fake_quant = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                                            dtype=ember.quint8, qscheme=ember.per_tensor_affine, reduce_range=True)
default_weight_fake_quant = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=-128,
                                                   quant_max=127, dtype=ember.qint8,
                                                   qscheme=ember.per_tensor_symmetric, reduce_range=False)
default_dynamic_fake_quant = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                                                    is_dynamic=True, dtype=ember.quint8, averaging_constant=1)
default_fixed_qparams_range_neg1to1_fake_quant = FixedQParamsFakeQuantize.with_args(
    observer=default_fixed_qparams_range_neg1to1_observer)
default_fixed_qparams_range_0to1_fake_quant = FixedQParamsFakeQuantize.with_args(
    observer=default_fixed_qparams_range_0to1_observer)
default_symmetric_fixed_qparams_fake_quant = default_fixed_qparams_range_neg1to1_fake_quant
default_affine_fixed_qparams_fake_quant = default_fixed_qparams_range_0to1_fake_quant
default_per_channel_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127, dtype=ember.qint8,
    qscheme=ember.per_channel_symmetric, reduce_range=False, ch_axis=0)
default_embedding_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, qscheme=ember.per_channel_affine_float_qparams,
    dtype=ember.quint8, quant_min=0, quant_max=255, ch_axis=0, averaging_constant=1)
default_embedding_fake_quant_4bit = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, qscheme=ember.per_channel_affine_float_qparams, ch_axis=0,
    dtype=ember.quint4x2, averaging_constant=1)
default_histogram_fake_quant = FakeQuantize.with_args(observer=HistogramObserver, quant_min=0, quant_max=255,
                                                      dtype=ember.quint8, qscheme=ember.per_tensor_affine,
                                                      reduce_range=True)
default_fused_act_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, dtype=ember.quint8)
default_fused_wt_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-128, quant_max=127, dtype=ember.qint8,
    qscheme=ember.per_tensor_symmetric)
default_fused_per_channel_wt_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127, dtype=ember.qint8,
    qscheme=ember.per_channel_symmetric)
fused_wt_fake_quant_range_neg_127_to_127 = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-127, quant_max=127, dtype=ember.qint8,
    qscheme=ember.per_tensor_symmetric, eps=2 ** -12)
fused_per_channel_wt_fake_quant_range_neg_127_to_127 = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-127, quant_max=127, dtype=ember.qint8,
    qscheme=ember.per_channel_symmetric, eps=2 ** -12)
