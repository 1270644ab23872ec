"""ember.amp: automatic mixed precision — ``autocast``, ``GradScaler``, ``custom_fwd``/``custom_bwd``."""
from ._version import __version__  # noqa: F401
from .autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available
from .grad_scaler import GradScaler

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_available", "GradScaler"]
