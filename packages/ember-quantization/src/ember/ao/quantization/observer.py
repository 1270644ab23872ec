"""Observers: modules that watch the tensors passing through them and compute the scale and zero point that
quantize them (``calculate_qparams``), with PyTorch's arithmetic (float32 statistics, the same rounding)."""
import warnings
from abc import ABCMeta, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass
from enum import Enum, auto
from functools import partial

import ember
import ember.nn as nn

from .utils import calculate_qmin_qmax, check_min_max_valid, is_per_channel, is_per_tensor, validate_qmin_qmax

__all__ = ["default_affine_fixed_qparams_observer", "default_debug_observer", "default_dynamic_quant_observer",
           "default_fixed_qparams_range_0to1_observer", "default_fixed_qparams_range_neg1to1_observer",
           "default_float_qparams_observer", "default_float_qparams_observer_4bit", "default_histogram_observer",
           "default_observer", "default_per_channel_weight_observer", "default_placeholder_observer",
           "default_reuse_input_observer", "default_symmetric_fixed_qparams_observer", "default_weight_observer",
           "get_observer_state_dict", "load_observer_state_dict", "per_channel_weight_observer_range_neg_127_to_127",
           "weight_observer_range_neg_127_to_127", "FixedQParamsObserver", "HistogramObserver", "MinMaxObserver",
           "MovingAverageMinMaxObserver", "MovingAveragePerChannelMinMaxObserver", "NoopObserver", "ObserverBase",
           "PerChannelMinMaxObserver", "PlaceholderObserver", "RecordingObserver", "ReuseInputObserver",
           "UniformQuantizationObserverBase", "AffineQuantizedObserverBase", "Granularity", "MappingType", "PerAxis",
           "PerBlock", "PerGroup", "PerRow", "PerTensor", "PerToken", "TorchAODType", "ZeroPointDomain",
           "get_block_size"]

_EPS32 = ember.finfo(ember.float32).eps


class _PartialWrapper:
    """A constructor with bound keyword arguments (``Observer.with_args(...)``); ``callable_args`` are called
    anew at each construction (``with_callable_args``)."""

    def __init__(self, p):
        self.p = p
        self.callable_args = {}

    def __call__(self, *args, **keywords):
        for name, fn in self.callable_args.items():
            if name not in keywords:
                keywords = {**keywords, name: fn()}
        return self.p(*args, **keywords)

    def __repr__(self):
        return repr(self.p) + repr(self.callable_args)

    def with_args(self, **kwargs):
        return _with_args(self, **kwargs)

    def with_callable_args(self, **kwargs):
        result = _PartialWrapper(p=self.p)
        result.callable_args = {**self.callable_args, **kwargs}
        return result


def _with_args(cls_or_self, **kwargs):
    """A factory of ``cls_or_self`` with these keyword arguments bound; each call builds a new instance."""
    return _PartialWrapper(partial(cls_or_self, **kwargs))


def _with_callable_args(cls_or_self, **kwargs):
    """A factory whose keyword arguments are callables, called at each construction."""
    return _PartialWrapper(partial(cls_or_self)).with_callable_args(**kwargs)


ABC = ABCMeta("ABC", (object,), {})


class ObserverBase(ABC, nn.Module):
    """Base of observers: ``forward`` records statistics of its input and returns it unchanged;
    ``calculate_qparams`` turns them into quantization parameters."""

    def __init__(self, dtype, is_dynamic=False):
        super().__init__()
        self.dtype = dtype
        self.is_dynamic = is_dynamic

    @abstractmethod
    def forward(self, x):
        pass

    @abstractmethod
    def calculate_qparams(self, **kwargs):
        pass

    with_args = classmethod(_with_args)
    with_callable_args = classmethod(_with_callable_args)


def _qparams(min_val, max_val, quant_min, quant_max, dtype, qscheme, eps, has_customized_qrange):
    """Scale and zero point mapping [min_val, max_val] (widened to hold 0) onto [quant_min, quant_max], computed in
    the dtype of ``min_val`` (float32) as PyTorch does: affine zero points are int32, symmetric ones int64, float
    qparams' float."""
    zero = ember.zeros_like(min_val)
    min_neg, max_pos = ember.minimum(min_val, zero), ember.maximum(max_val, zero)
    zero_point = ember.zeros(min_neg.shape, dtype=ember.int64)
    if qscheme in (ember.per_tensor_symmetric, ember.per_channel_symmetric):
        max_pos = ember.maximum(-min_neg, max_pos)
        scale = ember.maximum(max_pos / (float(quant_max - quant_min) / 2), eps)
        if dtype in (ember.quint8, ember.uint8):
            zero_point.fill_((quant_min + quant_max) // 2 if has_customized_qrange else 128)
        elif dtype == getattr(ember, "uint16", None):
            zero_point.fill_(2 ** 15)
    elif qscheme == ember.per_channel_affine_float_qparams:
        scale = (max_val - min_val) / float(quant_max - quant_min)
        scale = ember.where(scale > eps, scale, ember.ones_like(scale))
        zero_point = -1 * min_val / scale
    else:
        scale = ember.maximum((max_pos - min_neg) / float(quant_max - quant_min), eps)
        zero_point = quant_min - ember.round(min_neg / scale).to(ember.int32)
        zero_point = ember.clamp(zero_point, quant_min, quant_max)
    if scale.dim() == 0:
        scale = scale.reshape(1)
    if zero_point.dim() == 0:
        zero_point = zero_point.reshape(1)
    return scale, zero_point


class UniformQuantizationObserverBase(ObserverBase):
    """Base of observers that quantize uniformly: checks dtype and qscheme, works out the integer range
    (``quant_min``/``quant_max``, ``reduce_range``) and computes qparams from a min and a max."""

    # 2: eps became a buffer; 3: per-channel buffers renamed min_vals -> min_val, histogram min/max 0-dim
    _version = 3

    def __init__(self, dtype=ember.quint8, qscheme=ember.per_tensor_affine, reduce_range=False, quant_min=None,
                 quant_max=None, factory_kwargs=None, eps=_EPS32, is_dynamic=False, **kwargs):
        factory_kwargs = nn.factory_kwargs(factory_kwargs)
        super().__init__(dtype=dtype, is_dynamic=is_dynamic, **kwargs)
        self.qscheme = qscheme
        if reduce_range:
            warnings.warn("Please use quant_min and quant_max to specify the range for observers. "
                          "reduce_range will be deprecated in a future release of PyTorch.", stacklevel=2)
        self.reduce_range = reduce_range
        self.register_buffer("eps", ember.tensor([eps], **factory_kwargs))
        if qscheme not in (ember.per_tensor_affine, ember.per_tensor_symmetric, ember.per_channel_affine,
                           ember.per_channel_symmetric, ember.per_channel_affine_float_qparams):
            raise AssertionError("Default Observer only works for per_tensor_affine, per_tensor_symmetric, "
                                 "per_channel_affine, per_channel_symmetric and per_channel_float_qparams "
                                 "quantization scheme")
        allowed = tuple(getattr(ember, n) for n in (
            "qint8", "quint8", "quint4x2", "qint32", "int8", "uint8", "int16", "int32", "float8_e5m2",
            "float8_e4m3fn", "uint16") if hasattr(ember, n))
        if dtype not in allowed:
            raise AssertionError(f"Default Observer only works for {allowed} data type")
        self.has_customized_qrange = quant_min is not None and quant_max is not None
        if self.has_customized_qrange:
            validate_qmin_qmax(quant_min, quant_max)
        self.quant_min, self.quant_max = calculate_qmin_qmax(quant_min, quant_max, self.has_customized_qrange,
                                                             self.dtype, self.reduce_range)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, *args, **kwargs):
        if local_metadata.get("version") in (None, 1):  # before version 2, eps was no buffer
            state_dict[prefix + "eps"] = ember.tensor([_EPS32])
        super()._load_from_state_dict(state_dict, prefix, local_metadata, *args, **kwargs)

    def _validate_qmin_qmax(self, quant_min, quant_max):
        if not quant_min <= 0 <= quant_max:
            raise AssertionError("Used-specified quantization range must include 0.")
        if quant_min >= quant_max:
            raise AssertionError("qmin must be strictly less than qmax for user-specified quantization range.")

    def _calculate_qparams(self, min_val, max_val):
        """Scale and zero point for the range [min_val, max_val] (per tensor or per channel); 1.0 and 0 while
        nothing was observed."""
        if not check_min_max_valid(min_val, max_val):
            return ember.tensor([1.0]), ember.tensor([0])
        return _qparams(min_val, max_val, self.quant_min, self.quant_max, self.dtype, self.qscheme, self.eps,
                        self.has_customized_qrange)

    def reset_min_max_vals(self):
        raise NotImplementedError("Cannot reset min/max values in the given observer.")


_ObserverBase = UniformQuantizationObserverBase


class MinMaxObserver(UniformQuantizationObserverBase):
    """Records the running minimum and maximum of its inputs; qparams map that range (widened to hold 0)."""

    def __init__(self, dtype=ember.quint8, qscheme=ember.per_tensor_affine, reduce_range=False, quant_min=None,
                 quant_max=None, factory_kwargs=None, eps=_EPS32, is_dynamic=False, **kwargs):
        if not is_per_tensor(qscheme):
            raise NotImplementedError("MinMaxObserver's qscheme only support torch.per_tensor_symmetric "
                                      "and torch.per_tensor_affine.")
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=quant_min,
                         quant_max=quant_max, factory_kwargs=factory_kwargs, eps=eps, is_dynamic=is_dynamic, **kwargs)
        factory_kwargs = nn.factory_kwargs(factory_kwargs)
        self.register_buffer("min_val", ember.tensor(float("inf"), **factory_kwargs))
        self.register_buffer("max_val", ember.tensor(float("-inf"), **factory_kwargs))
        if self.qscheme == ember.per_tensor_symmetric and self.reduce_range and self.dtype == ember.quint8:
            raise NotImplementedError("Cannot reduce range for symmetric quantization for quint8")

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().to(self.min_val.dtype)
        lo, hi = ember.aminmax(x)
        self.min_val.copy_(ember.minimum(lo, self.min_val))
        self.max_val.copy_(ember.maximum(hi, self.max_val))
        return x_orig

    def calculate_qparams(self):
        return self._calculate_qparams(self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"

    def reset_min_max_vals(self):
        self.min_val.copy_(ember.tensor(float("inf")))
        self.max_val.copy_(ember.tensor(float("-inf")))


class MovingAverageMinMaxObserver(MinMaxObserver):
    """Records exponential moving averages of its inputs' minimum and maximum (``averaging_constant``)."""

    def __init__(self, averaging_constant=0.01, dtype=ember.quint8, qscheme=ember.per_tensor_affine,
                 reduce_range=False, quant_min=None, quant_max=None, eps=_EPS32, is_dynamic=False, **kwargs):
        if not is_per_tensor(qscheme):
            raise NotImplementedError("MovingAverageMinMaxObserver's qscheme only support torch.per_tensor_symmetric "
                                      f"and torch.per_tensor_affine. but got: {qscheme}")
        self.averaging_constant = averaging_constant
        if is_dynamic and averaging_constant != 1:
            raise NotImplementedError("MovingAverageMinMaxObserver doesn't support dynamic quantization for "
                                      f"averaging constant of {averaging_constant}")
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=quant_min,
                         quant_max=quant_max, eps=eps, is_dynamic=is_dynamic, **kwargs)

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().to(self.min_val.dtype)
        lo, hi = ember.aminmax(x)
        if not (self.min_val.item() == float("inf") and self.max_val.item() == float("-inf")):
            lo = self.min_val + self.averaging_constant * (lo - self.min_val)
            hi = self.max_val + self.averaging_constant * (hi - self.max_val)
        self.min_val.copy_(lo)
        self.max_val.copy_(hi)
        return x_orig


def _channel_rows(x, ch_axis, dtype):
    """``x`` as (channels, rest) rows along ``ch_axis``."""
    order = list(range(x.dim()))
    order[ch_axis], order[0] = 0, ch_axis
    return ember.flatten(x.permute(order).to(dtype), start_dim=1)


class PerChannelMinMaxObserver(UniformQuantizationObserverBase):
    """Records the running minimum and maximum of each channel (``ch_axis``); qparams per channel."""

    def __init__(self, ch_axis=0, dtype=ember.quint8, qscheme=ember.per_channel_affine, reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS32, is_dynamic=False, **kwargs):
        if not is_per_channel(qscheme):
            raise NotImplementedError("PerChannelMinMaxObserver's qscheme only support torch.per_channel_symmetric, "
                                      "torch.per_channel_affine and torch.per_channel_affine_float_qparams.")
        if is_dynamic:
            raise NotImplementedError("PerChannelMinMaxObserver doesn't support dynamic quantization")
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=quant_min,
                         quant_max=quant_max, factory_kwargs=factory_kwargs, eps=eps, is_dynamic=is_dynamic, **kwargs)
        factory_kwargs = nn.factory_kwargs(factory_kwargs)
        self.ch_axis = ch_axis
        self.register_buffer("min_val", ember.tensor([], **factory_kwargs))
        self.register_buffer("max_val", ember.tensor([], **factory_kwargs))
        if self.qscheme == ember.per_channel_symmetric and self.reduce_range and self.dtype == ember.quint8:
            raise NotImplementedError("Cannot reduce range for symmetric quantization for quint8")

    def forward(self, x_orig):
        return self._forward(x_orig)

    def _update(self, lo, hi):
        """New running (min, max) from this input's per-channel (lo, hi)."""
        return ember.minimum(lo, self.min_val), ember.maximum(hi, self.max_val)

    def _forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        lo, hi = ember.aminmax(_channel_rows(x_orig.detach(), self.ch_axis, self.min_val.dtype), dim=1)
        if self.min_val.numel() and self.max_val.numel():
            lo, hi = self._update(lo, hi)
        self.min_val.resize_(lo.shape)
        self.max_val.resize_(hi.shape)
        self.min_val.copy_(lo)
        self.max_val.copy_(hi)
        return x_orig

    def calculate_qparams(self):
        return self._calculate_qparams(self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs):
        old = local_metadata.get("version") is not None and local_metadata["version"] < 3
        names = ("min_vals", "max_vals") if old else ("min_val", "max_val")
        for name, buffer in zip(names, (self.min_val, self.max_val)):
            key = prefix + name
            if key in state_dict:
                buffer.resize_(state_dict[key].shape)  # (the loaded statistics may have any number of channels)
            elif strict:
                missing_keys.append(key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, *args, **kwargs)

    def reset_min_max_vals(self):
        self.min_val = ember.rand(0)
        self.max_val = ember.rand(0)


class MovingAveragePerChannelMinMaxObserver(PerChannelMinMaxObserver):
    """Per-channel moving averages of the minimum and maximum (``averaging_constant``)."""

    def __init__(self, averaging_constant=0.01, ch_axis=0, dtype=ember.quint8, qscheme=ember.per_channel_affine,
                 reduce_range=False, quant_min=None, quant_max=None, eps=_EPS32, is_dynamic=False, **kwargs):
        if not is_per_channel(qscheme):
            raise NotImplementedError("MovingAveragePerChannelMinMaxObserver's qscheme only support "
                                      "torch.per_channel_symmetric, torch.per_channel_affine and "
                                      "torch.per_channel_affine_float_qparams.")
        if is_dynamic:
            raise NotImplementedError("MovingAveragePerChannelMinMaxObserver doesn't support dynamic quantization")
        super().__init__(ch_axis=ch_axis, dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max, eps=eps, is_dynamic=is_dynamic, **kwargs)
        self.averaging_constant = averaging_constant

    def _update(self, lo, hi):
        c = self.averaging_constant
        return self.min_val + c * (lo - self.min_val), self.max_val + c * (hi - self.max_val)


class HistogramObserver(UniformQuantizationObserverBase):
    """Keeps a histogram (``bins`` bins) of everything it sees over the running range; ``calculate_qparams``
    picks the sub-range that minimises the L2 error of quantizing the histogram's values (PyTorch's search, step
    for step, so that the same inputs give the same qparams)."""

    def __init__(self, bins=2048, dtype=ember.quint8, qscheme=ember.per_tensor_affine, reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS32, is_dynamic=False, **kwargs):
        if not is_per_tensor(qscheme):
            raise NotImplementedError("HistogramObserver's qscheme only support torch.per_tensor_symmetric "
                                      "and torch.per_tensor_affine.")
        if is_dynamic:
            raise NotImplementedError("HistogramObserver doesn't support dynamic quantization")
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=quant_min,
                         quant_max=quant_max, factory_kwargs=factory_kwargs, eps=eps, is_dynamic=is_dynamic, **kwargs)
        factory_kwargs = nn.factory_kwargs(factory_kwargs)
        self.bins = bins
        self.register_buffer("histogram", ember.zeros(bins, **factory_kwargs))
        self.register_buffer("min_val", ember.tensor(float("inf"), **factory_kwargs))
        self.register_buffer("max_val", ember.tensor(float("-inf"), **factory_kwargs))
        self.dst_nbins = 2 ** _bits(dtype)
        self.upsample_rate = 16  # the old histogram's bins are split this finely when the range grows

    def _get_norm(self, delta_begin, delta_end, density):
        """density * integral of x^2 from delta_begin to delta_end (values spread evenly over a bin)."""
        return density * ((delta_end * delta_end * delta_end - delta_begin * delta_begin * delta_begin) / 3)

    def _compute_quantization_error(self, next_start_bin, next_end_bin):
        """L2 error of quantizing the histogram with bins next_start_bin..next_end_bin as the range (float32, as
        PyTorch computes it)."""
        bin_width = (self.max_val.item() - self.min_val.item()) / self.bins
        dst_bin_width = bin_width * (next_end_bin - next_start_bin + 1) / self.dst_nbins
        if dst_bin_width == 0.0:
            return 0.0
        src_bin = ember.arange(self.bins)
        src_begin = (src_bin - next_start_bin) * bin_width
        src_end = src_begin + bin_width
        top = self.dst_nbins - 1
        dst_of_begin = ember.clamp(ember.div(src_begin, dst_bin_width, rounding_mode="floor"), 0, top)
        dst_of_begin_center = (dst_of_begin + 0.5) * dst_bin_width
        dst_of_end = ember.clamp(ember.div(src_end, dst_bin_width, rounding_mode="floor"), 0, top)
        density = self.histogram / bin_width
        half = dst_bin_width / 2
        norm = ember.zeros(self.bins)
        norm += self._get_norm(src_begin - dst_of_begin_center, ember.ones(self.bins) * half, density)
        norm += (dst_of_end - dst_of_begin - 1) * self._get_norm(ember.tensor(-half), ember.tensor(half), density)
        dst_of_end_center = dst_of_end * dst_bin_width + half
        norm += self._get_norm(ember.tensor(-half), src_end - dst_of_end_center, density)
        return norm.sum().item()

    def _non_linear_param_search(self):
        """Shrink [min, max] from whichever end holds less of the histogram's mass, a 1e-5 quantile at a time,
        while the quantization error keeps falling."""
        if self.histogram.shape[0] != self.bins:
            raise AssertionError("bins mismatch")
        bin_width = (self.max_val - self.min_val) / self.bins
        total = self.histogram.sum().item()
        # cumulative counts as float32 values; the thresholds are compared after rounding to float32 too (a
        # float32 tensor against a Python float compares in float32)
        csum = ember.cumsum(self.histogram, dim=0).tolist()
        f32 = _float32
        stepsize, alpha, beta = 1e-5, 0.0, 1.0
        start_bin, end_bin = 0, self.bins - 1
        norm_min = float("inf")
        while alpha < beta:
            next_alpha, next_beta = alpha + stepsize, beta - stepsize
            lo_limit, hi_limit = f32(next_alpha * total), f32(next_beta * total)
            left, right = start_bin, end_bin
            while left < end_bin and csum[left] < lo_limit:
                left += 1
            while right > start_bin and csum[right] > hi_limit:
                right -= 1
            next_start, next_end = start_bin, end_bin
            if left - start_bin > end_bin - right:
                next_start, alpha = left, next_alpha
            else:
                next_end, beta = right, next_beta
            if next_start == start_bin and next_end == end_bin:
                continue
            norm = self._compute_quantization_error(next_start, next_end)
            if norm > norm_min:
                break
            norm_min, start_bin, end_bin = norm, next_start, next_end
        return self.min_val + bin_width * start_bin, self.min_val + bin_width * (end_bin + 1)

    def _upscale_histogram(self, histogram, orig_min, orig_max, update_min, update_max):
        """The old histogram's counts spread over ``upsample_rate`` sub-bins each, then re-binned by their centres
        over the new range."""
        rate = self.upsample_rate
        histogram = histogram.repeat_interleave(rate) / rate
        bin_size = (orig_max - orig_min) / (self.bins * rate)
        mid_points = ember.linspace(orig_min.item(), orig_max.item(), self.bins * rate + 1)[:-1] + 0.5 * bin_size
        boundaries = ember.linspace(update_min.item(), update_max.item(), self.bins + 1)
        assignment = ember.bucketize(mid_points, boundaries, right=True) - 1
        assignment = ember.clamp(assignment, 0, self.bins - 1)
        return ember.bincount(assignment, weights=histogram, minlength=self.bins)

    def _combine_histograms(self, orig_hist, orig_min, orig_max, update_hist, update_min, update_max):
        if update_min.item() == orig_min.item() and update_max.item() == orig_max.item():
            return orig_hist + update_hist
        if orig_min.item() == orig_max.item():  # all of the old mass sits on one value
            moved = ember.histc(orig_min.reshape(1), bins=self.bins, min=update_min.item(), max=update_max.item())
            return moved * ember.sum(orig_hist) + update_hist
        if update_min.item() > orig_min.item():
            raise AssertionError("update_min must be <= orig_min")
        if update_max.item() < orig_max.item():
            raise AssertionError("update_max must be >= orig_max")
        return update_hist + self._upscale_histogram(orig_hist, orig_min, orig_max, update_min, update_max)

    def reset_histogram(self, x, min_val, max_val):
        self.min_val.resize_(min_val.shape)
        self.min_val.copy_(min_val)
        self.max_val.resize_(max_val.shape)
        self.max_val.copy_(max_val)
        if min_val.numel() != 1 or max_val.numel() != 1:
            raise AssertionError("histogram min/max values must be scalar.")
        self._set_histogram(ember.histc(x, self.bins, min=min_val.item(), max=max_val.item()))

    def _set_histogram(self, histogram):
        self.histogram.detach_().resize_(histogram.shape)
        self.histogram.copy_(histogram)

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach()
        x_min, x_max = ember.aminmax(x)
        if x_min.item() == -float("inf") or x_max.item() == float("inf"):
            warnings.warn("torch.inf detected in input tensor, ignoring input", stacklevel=2)
            x = x[x.abs() != float("inf")]
            if x.numel() == 0:
                return x_orig
            x_min, x_max = ember.aminmax(x)
        cur_min, cur_max = self.min_val, self.max_val
        if cur_min.item() == float("inf") or cur_max.item() == float("-inf"):
            self.reset_histogram(x, x_min, x_max)
            return x_orig
        new_min, new_max = ember.minimum(cur_min, x_min).detach(), ember.maximum(cur_max, x_max).detach()
        update = ember.histc(x, self.bins, min=new_min.item(), max=new_max.item())
        if new_min.item() == cur_min.item() and new_max.item() == cur_max.item():
            self._set_histogram(self.histogram + update)
            return x_orig
        self._set_histogram(self._combine_histograms(self.histogram, cur_min, cur_max, update, new_min, new_max))
        for buffer, value in ((self.min_val, new_min), (self.max_val, new_max)):
            buffer.detach_().resize_(value.shape)
            buffer.copy_(value)
        return x_orig

    def calculate_qparams(self):
        if self.min_val.item() == float("inf") and self.max_val.item() == float("-inf"):
            warnings.warn("must run observer before calling calculate_qparams. "
                          "Returning default scale and zero point ", stacklevel=2)
            return ember.tensor([1.0]), ember.tensor([0])
        if self.bins != len(self.histogram):
            raise AssertionError("The number of bins in histogram should be equal to the number of bins "
                                 "supplied while making this observer")
        return self._calculate_qparams(*self._non_linear_param_search())

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "min_val"] = self.min_val
        destination[prefix + "max_val"] = self.max_val

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs):
        version = local_metadata.get("version")
        if version is None or version < 3:  # an unobserved range was stored as an empty tensor
            for name, empty in (("min_val", float("inf")), ("max_val", float("-inf"))):
                if prefix + name in state_dict and tuple(state_dict[prefix + name].shape) == (0,):
                    state_dict[prefix + name] = ember.tensor(empty)
        for name in ("min_val", "max_val"):
            if prefix + name in state_dict:
                setattr(self, name, state_dict[prefix + name])
            elif strict:
                missing_keys.append(prefix + name)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"


def _bits(dtype):
    """Bits of a dtype's storage (as torch.iinfo gives them: quint4x2 counts its whole byte)."""
    return dtype.itemsize * 8


def _float32(value):
    """A Python float rounded to float32."""
    import numpy as np
    return float(np.float32(value))


class FixedQParamsObserver(ObserverBase):
    """Gives fixed qparams (for ops of known output range, such as sigmoid); observes nothing."""

    def __init__(self, scale, zero_point, dtype=ember.quint8, qscheme=ember.per_tensor_affine, quant_min=0,
                 quant_max=255, is_dynamic=False, **kwargs):
        if is_dynamic:
            raise NotImplementedError("FixedQParamsObserver doesn't support dynamic quantization")
        super().__init__(dtype=dtype, is_dynamic=is_dynamic, **kwargs)
        self.quant_min, self.quant_max = quant_min, quant_max
        self.register_buffer("scale", ember.tensor([scale], dtype=ember.float))
        self.register_buffer("zero_point", ember.tensor([zero_point], dtype=ember.int))
        self.dtype, self.qscheme = dtype, qscheme

    def forward(self, X):
        return X

    def calculate_qparams(self):
        return self.scale, self.zero_point


class PlaceholderObserver(ObserverBase):
    """Observes nothing: carries its dtype (float16 weights, dynamic quantization) to ``from_float``."""

    def __init__(self, dtype=ember.float32, custom_op_name="", compute_dtype=None, quant_min=None, quant_max=None,
                 qscheme=None, eps=None, is_dynamic=False):
        super().__init__(dtype=dtype, is_dynamic=is_dynamic)
        self.dtype = dtype
        self.qscheme = ember.per_tensor_affine if qscheme is None else qscheme
        self.quant_min, self.quant_max = quant_min, quant_max
        self.eps = _EPS32 if eps is None else eps
        self.custom_op = custom_op_name
        if compute_dtype:
            warnings.warn("Please use `is_dynamic` instead of `compute_dtype`. `compute_dtype` will be deprecated "
                          "in a future release of PyTorch.", stacklevel=2)

    def forward(self, x):
        return x

    def extra_repr(self):
        return f"dtype={self.dtype}, is_dynamic={self.is_dynamic}"

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for PlaceholderObserver")


class RecordingObserver(ObserverBase):
    """Keeps a copy of every tensor it sees (``get_tensor_value``), for debugging."""

    def __init__(self, dtype=ember.quint8):
        super().__init__(dtype=dtype, is_dynamic=False)
        self.tensor_val = []

    def forward(self, x):
        self.tensor_val.append(x.clone())
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for RecordingObserver")

    def get_tensor_value(self):
        return self.tensor_val


class NoopObserver(ObserverBase):
    """Observes nothing: carries its dtype (float16 by default) to ``from_float``."""

    def __init__(self, dtype=ember.float16, custom_op_name=""):
        super().__init__(dtype=dtype, is_dynamic=False)
        self.dtype = dtype
        self.custom_op = custom_op_name

    def forward(self, x):
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for NoopObserver")


class ReuseInputObserver(ObserverBase):
    """Marks an op's output as quantized with its input's qparams (graph-mode quantization)."""

    def __init__(self):
        super().__init__(ember.quint8, is_dynamic=False)

    def forward(self, x):
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for ReuseInputObserver")


# ---- affine quantization descriptors (torchao's; eager mode only names them) -------------------------------------
class MappingType(Enum):
    """How a float range maps to the integer range: symmetric around 0, or affine."""
    SYMMETRIC = auto()
    SYMMETRIC_NO_CLIPPING_ERR = auto()
    ASYMMETRIC = auto()


class ZeroPointDomain(Enum):
    """Whether the zero point is an integer, a float, or absent."""
    INT = auto()
    FLOAT = auto()
    NONE = auto()


class TorchAODType(Enum):
    """Integer widths PyTorch has no dtype for."""
    INT1 = auto()
    INT2 = auto()
    INT3 = auto()
    INT4 = auto()
    INT5 = auto()
    INT6 = auto()
    INT7 = auto()


@dataclass(frozen=True)
class Granularity:
    """How many elements share one set of qparams."""


@dataclass(frozen=True)
class PerBlock(Granularity):
    block_size: tuple


@dataclass(frozen=True)
class PerTensor(Granularity):
    pass


@dataclass(frozen=True)
class PerAxis(Granularity):
    axis: int


@dataclass(frozen=True)
class PerGroup(Granularity):
    group_size: int


class PerRow(Granularity):
    """One set of qparams per row (all but the last dimension)."""


class PerToken(Granularity):
    """One set of qparams per token (the last dimension's vectors)."""


def get_block_size(input_shape, granularity):
    """The block of elements sharing qparams, for an input shape and a granularity."""
    if not isinstance(granularity, Granularity):
        raise AssertionError("Please provide an instance of Granularity, not subclass of it")
    if isinstance(granularity, PerTensor):
        return input_shape
    if isinstance(granularity, PerAxis):
        block = list(input_shape)
        block[granularity.axis] = 1
        return tuple(block)
    if isinstance(granularity, PerRow):
        return (1,) * (len(input_shape) - 1) + (input_shape[-1],)
    if isinstance(granularity, PerGroup):
        if len(input_shape) != 2:
            raise AssertionError(f"Expecting input shape dim to be 2 for per group quantization, gotinput shape: "
                                 f"{input_shape}")
        return (1, granularity.group_size)
    if isinstance(granularity, PerToken):
        return (1,) * (len(input_shape) - 1) + (input_shape[-1],)
    raise ValueError(f"Unsupported Granularity: {granularity}")


class AffineQuantizedObserverBase(ABC, nn.Module):
    """Base of torchao-style observers (graph-mode export flows); holds their configuration."""

    with_args = classmethod(_with_args)

    def __init__(self, mapping_type, target_dtype, granularity, quant_min=None, quant_max=None, eps=None,
                 scale_dtype=None, zero_point_dtype=None, preserve_zero=True,
                 zero_point_domain=ZeroPointDomain.INT, **kwargs):
        super().__init__()
        if granularity is None:
            raise AssertionError("granularity is None")
        self.mapping_type, self.target_dtype, self.granularity = mapping_type, target_dtype, granularity
        self.quant_min, self.quant_max, self.eps = quant_min, quant_max, eps
        self.scale_dtype, self.zero_point_dtype = scale_dtype, zero_point_dtype
        self.preserve_zero, self.zero_point_domain = preserve_zero, zero_point_domain
        self.block_size = self.original_dtype = None

    @abstractmethod
    def forward(self, input):
        pass

    @abstractmethod
    def calculate_qparams(self):
        pass


def _is_activation_post_process(module):
    from .fake_quantize import FakeQuantizeBase
    return isinstance(module, (ObserverBase, FakeQuantizeBase, AffineQuantizedObserverBase))


def get_observer_state_dict(mod):
    """The entries of ``mod.state_dict()`` that belong to observers (keys holding "activation_post_process")."""
    full = mod.state_dict()
    od = OrderedDict((k, v) for k, v in full.items() if "activation_post_process" in k)
    od._metadata = full._metadata
    return od


def load_observer_state_dict(mod, obs_dict):
    """Load observer statistics saved by ``get_observer_state_dict`` into ``mod``'s observers."""
    missing_keys, unexpected_keys = [], []
    for name, module in mod.named_modules():
        if _is_activation_post_process(module):
            module._load_from_state_dict(obs_dict, name + ".", {}, False, missing_keys, unexpected_keys, [])
    for k in missing_keys:
        if "observer" in k or "activation_post_process" in k:
            raise Exception(f"Missing keys for observer {k} in state_dict")
    for k in unexpected_keys:
        if "observer" in k or "activation_post_process" in k:
            raise Exception(f"Unexpected keys for observer {k} in state_dict")


default_observer = MinMaxObserver.with_args(quant_min=0, quant_max=127)
default_placeholder_observer = PlaceholderObserver
default_debug_observer = RecordingObserver
default_weight_observer = MinMaxObserver.with_args(dtype=ember.qint8, qscheme=ember.per_tensor_symmetric)
weight_observer_range_neg_127_to_127 = MinMaxObserver.with_args(
    dtype=ember.qint8, qscheme=ember.per_tensor_symmetric, quant_min=-127, quant_max=127, eps=2 ** -12)
default_histogram_observer = HistogramObserver.with_args(quant_min=0, quant_max=127)
default_per_channel_weight_observer = PerChannelMinMaxObserver.with_args(
    dtype=ember.qint8, qscheme=ember.per_channel_symmetric)
per_channel_weight_observer_range_neg_127_to_127 = PerChannelMinMaxObserver.with_args(
    dtype=ember.qint8, qscheme=ember.per_channel_symmetric, quant_min=-127, quant_max=127, eps=2 ** -12)
default_dynamic_quant_observer = PlaceholderObserver.with_args(dtype=ember.quint8, quant_min=0, quant_max=255,
                                                               is_dynamic=True)
default_float_qparams_observer = PerChannelMinMaxObserver.with_args(
    dtype=ember.quint8, qscheme=ember.per_channel_affine_float_qparams, ch_axis=0)
default_float_qparams_observer_4bit = PerChannelMinMaxObserver.with_args(
    dtype=ember.quint4x2, qscheme=ember.per_channel_affine_float_qparams, ch_axis=0)
default_fixed_qparams_range_neg1to1_observer = FixedQParamsObserver.with_args(
    scale=2.0 / 256.0, zero_point=128, dtype=ember.quint8, quant_min=0, quant_max=255)
default_fixed_qparams_range_0to1_observer = FixedQParamsObserver.with_args(
    scale=1.0 / 256.0, zero_point=0, dtype=ember.quint8, quant_min=0, quant_max=255)
default_symmetric_fixed_qparams_observer = default_fixed_qparams_range_neg1to1_observer
default_affine_fixed_qparams_observer = default_fixed_qparams_range_0to1_observer
default_reuse_input_observer = ReuseInputObserver
