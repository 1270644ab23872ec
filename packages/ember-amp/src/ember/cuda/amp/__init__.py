"""ember.cuda.amp: the CUDA-only spellings of ember.amp (deprecated in PyTorch, kept for old scripts)."""
import functools
import warnings

from ember import _dtype as D
from ember.amp import autocast_mode as _mode
from ember.amp import grad_scaler as _scaler

__all__ = ["autocast", "custom_fwd", "custom_bwd", "GradScaler"]


class autocast(_mode.autocast):
    """``ember.autocast("cuda", ...)``."""

    def __init__(self, enabled=True, dtype=D.float16, cache_enabled=True):
        warnings.warn("`ember.cuda.amp.autocast(args...)` is deprecated. Please use `ember.amp.autocast('cuda', "
                      "args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(_scaler.GradScaler):
    """``ember.amp.GradScaler("cuda", ...)``."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        warnings.warn("`ember.cuda.amp.GradScaler(args...)` is deprecated. Please use `ember.amp.GradScaler('cuda', "
                      "args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``ember.amp.custom_fwd(device_type="cuda", ...)``."""
    warnings.warn("`ember.cuda.amp.custom_fwd(args...)` is deprecated. Please use `ember.amp.custom_fwd(args..., "
                  "device_type='cuda')` instead.", FutureWarning, stacklevel=2)
    if fwd is None:
        return functools.partial(_mode.custom_fwd, device_type="cuda", cast_inputs=cast_inputs)
    return _mode.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """``ember.amp.custom_bwd(device_type="cuda")``."""
    warnings.warn("`ember.cuda.amp.custom_bwd(args...)` is deprecated. Please use `ember.amp.custom_bwd(args..., "
                  "device_type='cuda')` instead.", FutureWarning, stacklevel=2)
    return _mode.custom_bwd(bwd, device_type="cuda")
