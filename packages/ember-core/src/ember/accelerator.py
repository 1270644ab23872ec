"""``ember.accelerator``: the device-generic accelerator API, over ``ember.cuda``.

ember's one accelerator is CUDA (through CuPy). PyTorch's current accelerator is the one it was built for;
ember is not built per device, so its accelerator is CUDA exactly when ``ember.cuda.is_available()``:
``current_accelerator()`` is then ``device('cuda')``, and otherwise None, as in a CPU build of PyTorch. Without
an accelerator, everything that needs a device raises ``RuntimeError`` as PyTorch does; ``is_available()``,
``device_count()``, ``current_accelerator()`` and ``device_index(None)`` work everywhere.

Not provided: ``Graph`` (ember records no CUDA graphs).
"""
import collections
import functools
import warnings

from . import _device as _dev
from . import cuda

__all__ = ["current_accelerator", "current_device_idx", "current_device_index", "current_stream", "device_count",
           "device_index", "empty_cache", "empty_host_cache", "get_device_capability", "get_memory_info",
           "is_available", "max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved",
           "memory_stats", "reset_accumulated_memory_stats", "reset_peak_memory_stats", "set_device_idx",
           "set_device_index", "set_stream", "synchronize"]


def current_accelerator(check_available=False):
    """``device('cuda')`` when ember can use a GPU, else None (``check_available`` changes nothing: ember's
    accelerator is only ever named when it is available)."""
    return _dev.device("cuda") if cuda.is_available() else None


def is_available():
    return current_accelerator() is not None


def device_count():
    return cuda.device_count() if is_available() else 0


def _require():
    if not is_available():
        raise RuntimeError("Cannot access accelerator device when none is available.")


def _index(device, optional=True):
    """The device index named by an int, a str or an ember.device of the accelerator's type; None (when
    ``optional``) is the current device."""
    _require()
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    if isinstance(device, str):
        device = _dev.device(device)
    index = None
    if isinstance(device, _dev.device):
        if device.type != "cuda":
            raise ValueError(f"{device.type} doesn't match the current accelerator {current_accelerator()}.")
        index = device.index
    elif device is not None:
        raise TypeError(f"expected a device, a device string or an index, got {type(device).__name__}")
    if index is None:
        if not optional:
            raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{device}")
        return cuda.current_device()
    return index


def current_device_index():
    """The index of the current accelerator device."""
    _require()
    return cuda.current_device()


def set_device_index(device, /):
    """Make ``device`` (an index, or a device with an index) the current one; a negative index does nothing."""
    cuda.set_device(_index(device, optional=False))


def _deprecated(new):
    def wrap(old):
        @functools.wraps(old)
        def call(*args, **kwargs):
            warnings.warn(f"Use `{new.__name__}` instead.", FutureWarning, stacklevel=2)
            return new(*args, **kwargs)
        return call
    return wrap


@_deprecated(current_device_index)
def current_device_idx():
    """Deprecated name of ``current_device_index``."""


@_deprecated(set_device_index)
def set_device_idx(device, /):
    """Deprecated name of ``set_device_index``."""


def current_stream(device=None, /):
    return cuda.current_stream(_index(device))


def set_stream(stream):
    _require()
    cuda.set_stream(stream)


def synchronize(device=None, /):
    """Wait for all work queued on ``device`` (default: the current one) to finish."""
    cuda.synchronize(_index(device))


class device_index:
    """Context manager that makes device ``device`` (an index) current inside it; ``None`` changes nothing."""

    def __init__(self, device, /):
        self.idx = device
        self._ctx = None

    def __enter__(self):
        if self.idx is not None:
            _require()
            self._ctx = cuda.device(self.idx)
            self._ctx.__enter__()

    def __exit__(self, *exc_info):
        if self._ctx is not None:
            self._ctx.__exit__(*exc_info)
            self._ctx = None


@functools.cache
def get_device_capability(device=None, /):
    """``{"supported_dtypes": {...}}``: the dtypes ember can hold on the device (every dtype with a storage)."""
    _index(device)
    from . import _dtype as D
    return {"supported_dtypes": {d for d in D.ALL if d.np is not None}}


def empty_cache():
    """Give the memory pool's cached free blocks back to the driver."""
    _require()
    cuda.empty_cache()


def empty_host_cache():
    """Give the pinned host memory pool's cached free blocks back."""
    _require()
    cuda._cupy().get_default_pinned_memory_pool().free_all_blocks()


def get_memory_info(device_index=None, /):
    """(free, total) bytes of the device."""
    return cuda.mem_get_info(_index(device_index))


def memory_stats(device_index=None, /):
    """The memory pool's statistics, flat keys as in ``ember.cuda.memory_stats``."""
    return collections.OrderedDict(cuda.memory_stats(_index(device_index)))


def memory_allocated(device_index=None, /):
    return memory_stats(device_index).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device_index=None, /):
    return memory_stats(device_index).get("allocated_bytes.all.peak", 0)


def memory_reserved(device_index=None, /):
    return memory_stats(device_index).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device_index=None, /):
    return memory_stats(device_index).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device_index=None, /):
    cuda.reset_peak_memory_stats(_index(device_index))


def reset_accumulated_memory_stats(device_index=None, /):
    cuda.reset_accumulated_memory_stats(_index(device_index))
