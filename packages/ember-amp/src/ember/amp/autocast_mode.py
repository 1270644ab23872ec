"""``autocast`` (context manager and decorator), ``custom_fwd``/``custom_bwd`` and ``is_autocast_available``."""
import functools
import warnings

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor

from . import _state as S

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_available"]


def is_autocast_available(device_type):
    """Whether autocast supports ``device_type`` ("cpu" and "cuda" in ember)."""
    return S._device_type(device_type) in S.DEVICE_TYPES


def _cuda_available():
    import ember.cuda
    return ember.cuda.is_available()


def _check_device_type(device_type):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")


class autocast:
    """A region in which eligible ops run in an op-specific dtype (see the device's policy table).

    ``device_type`` is "cpu" or "cuda"; ``dtype`` defaults to the thread's autocast dtype of that device
    (bfloat16 on the CPU, float16 on CUDA). Usable as ``with autocast(...):`` and as a decorator; regions
    nest, and ``enabled=False`` turns autocast off inside an enabled region. The state is thread-local.
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        _check_device_type(device_type)
        self.fast_dtype = S.get_autocast_dtype(device_type) if dtype is None else dtype
        self.device = device_type
        if not is_autocast_available(device_type):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self._cache_enabled = S.is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        if enabled:
            if device_type == "cuda":
                if not _cuda_available():
                    warnings.warn("CUDA is not available. Disabling autocast.", stacklevel=2)
                    enabled = False
                elif self.fast_dtype is D.bfloat16:
                    import ember.cuda
                    if not ember.cuda.is_bf16_supported():
                        raise RuntimeError("Current CUDA Device does not support bfloat16. Please switch dtype to "
                                           "float16.")
            elif self.fast_dtype not in (D.bfloat16, D.float16):
                warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                              f"CPU Autocast only supports dtypes of {D.bfloat16}, {D.float16} currently.",
                              stacklevel=2)
                enabled = False
        self._enabled = enabled

    def __enter__(self):
        self.prev_cache_enabled = S.is_autocast_cache_enabled()
        self.prev = S.is_autocast_enabled(self.device)
        self.prev_fastdtype = S.get_autocast_dtype(self.device)
        S.set_autocast_enabled(self.device, self._enabled)
        S.set_autocast_dtype(self.device, self.fast_dtype)
        S.autocast_increment_nesting()
        S.set_autocast_cache_enabled(self._cache_enabled)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if S.autocast_decrement_nesting() == 0:
            S.clear_autocast_cache()
        S.set_autocast_enabled(self.device, self.prev)
        S.set_autocast_dtype(self.device, self.prev_fastdtype)
        S.set_autocast_cache_enabled(self.prev_cache_enabled)
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError(f"autocast()(func) requires a callable, but got {type(func).__name__}. Did you mean to "
                            f"use autocast as a context manager? For example:\n    with ember.autocast(device_type="
                            f"...):\n        output = model(input)")

        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return decorate_autocast


def _cast(value, device_type, dtype):
    """``value`` with its floating tensors on ``device_type`` (not float64) cast to ``dtype``, recursively."""
    if isinstance(value, Tensor):
        ok = value.dtype.is_floating_point and value.device.type == device_type and value.dtype is not D.float64
        return value.to(dtype) if ok else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, dict):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for ``forward`` of an ``ember.autograd.Function``: records the autocast state for
    ``custom_bwd``; with ``cast_inputs``, inside an enabled region, casts floating tensors of ``device_type``
    to it and runs ``forward`` with autocast off. Outside an enabled region it changes nothing."""
    _check_device_type(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = S.get_autocast_dtype(device_type)
        enabled = S.is_autocast_enabled(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = enabled
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not enabled:
            return fwd(*args, **kwargs)
        with autocast(device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator for ``backward`` of an ``ember.autograd.Function``: runs it with the autocast state that
    ``forward`` (decorated with ``custom_fwd``) ran with."""
    _check_device_type(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd
