"""ember.cpu.amp: the CPU-only spellings of ember.amp (deprecated in PyTorch, kept for old scripts)."""
import warnings

from ember import _dtype as D
from ember.amp import autocast_mode as _mode
from ember.amp import grad_scaler as _scaler

__all__ = ["autocast", "GradScaler"]


class autocast(_mode.autocast):
    """``ember.autocast("cpu", ...)``."""

    def __init__(self, enabled=True, dtype=D.bfloat16, cache_enabled=True):
        warnings.warn("`ember.cpu.amp.autocast(args...)` is deprecated. Please use `ember.amp.autocast('cpu', "
                      "args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(_scaler.GradScaler):
    """``ember.amp.GradScaler("cpu", ...)``."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        warnings.warn("`ember.cpu.amp.GradScaler(args...)` is deprecated. Please use `ember.amp.GradScaler('cpu', "
                      "args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval, enabled)
