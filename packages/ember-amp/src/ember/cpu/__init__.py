"""ember.cpu: the CPU as a device, with the stream and event API of ``ember.cuda`` (all no-ops: the CPU
runs ops in order), and ``ember.cpu.amp``."""
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

import contextlib

from ember._extensions import lazy_submodule

__all__ = ["is_available", "is_initialized", "synchronize", "current_device", "device_count", "set_device",
           "Stream", "Event", "StreamContext", "current_stream", "stream", "get_capabilities"]


def is_available():
    """Always True: ember always runs on the CPU."""
    return True


def is_initialized():
    return True


def synchronize(device=None):
    """Nothing to wait for: CPU ops finish before they return."""


def current_device():
    return "cpu"


def device_count():
    return 1


def set_device(device):
    """Accepted for symmetry with ``ember.cuda.set_device``; there is one CPU device."""


class Stream:
    """The CPU's only stream: work runs in program order."""

    def __init__(self, priority=-1):
        self.priority = priority

    def wait_stream(self, stream):
        pass

    def wait_event(self, event):
        pass

    def record_event(self):
        pass


class Event:
    """A CPU event: always complete."""

    def query(self):
        return True

    def record(self, stream=None):
        pass

    def synchronize(self):
        pass

    def wait(self, stream=None):
        pass


_current = Stream()


def current_stream(device=None):
    return _current


class StreamContext(contextlib.AbstractContextManager):
    """Makes ``stream`` current inside the block."""

    def __init__(self, stream):
        self.stream, self.prev = stream, None

    def __enter__(self):
        global _current
        if self.stream is not None:
            self.prev, _current = _current, self.stream
        return self.stream

    def __exit__(self, *exc):
        global _current
        if self.prev is not None:
            _current = self.prev


def stream(stream):
    """Context manager: ``stream`` is the current CPU stream inside the block."""
    return StreamContext(stream)


def get_capabilities():
    """The CPU's instruction-set extensions NumPy's kernels use, as NumPy reports them."""
    import numpy as np
    found = (np._core if hasattr(np, "_core") else np.core)._multiarray_umath.__cpu_features__
    return {name.lower(): bool(on) for name, on in found.items()}


def __getattr__(name):
    """``ember.cpu.amp`` loads on first access."""
    return lazy_submodule(__name__, name)
