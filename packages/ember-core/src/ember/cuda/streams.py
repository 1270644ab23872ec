"""CUDA streams and events over CuPy's.

ember's kernels and CuPy's run on CuPy's current stream of the current device, so making a stream
current (``ember.cuda.stream(s)``, ``set_stream``) routes all ember work on that device to it.
"""
from .. import _backend
from .. import _device as _dev
from . import _cupy, _index, _on, is_initialized

__all__ = ["Event", "Stream", "StreamContext", "current_stream", "default_stream", "is_current_stream_capturing",
           "set_stream", "stream"]


class Stream:
    """A CUDA stream on ``device``; it does not synchronise with the default stream (as in PyTorch)."""

    def __init__(self, device=None, priority=0):
        cp = _cupy()
        self._idx = _index(device)
        with _on(self._idx):
            self._cs = cp.cuda.Stream(non_blocking=True, priority=priority)

    @classmethod
    def _wrap(cls, cupy_stream, idx):
        s = object.__new__(cls)
        s._cs, s._idx = cupy_stream, idx
        return s

    @property
    def device(self):
        return _dev.device("cuda", self._idx)

    @property
    def cuda_stream(self):
        return self._cs.ptr

    @property
    def priority(self):
        return self._cs.priority

    def query(self):
        """True when all work queued on the stream has finished."""
        return self._cs.done

    def synchronize(self):
        self._cs.synchronize()

    def wait_event(self, event):
        """Make later work on this stream wait for ``event``."""
        self._cs.wait_event(event._ce)

    def wait_stream(self, stream):
        """Make later work on this stream wait for the work queued on ``stream`` so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and (self._cs.ptr, self._idx) == (other._cs.ptr, other._idx)

    def __hash__(self):
        return hash((self._cs.ptr, self._idx))

    def __repr__(self):
        return f"<ember.cuda.Stream device=cuda:{self._idx} cuda_stream={self._cs.ptr:#x}>"


def current_stream(device=None):
    """The stream ember's work on ``device`` is queued to."""
    idx = _index(device)
    return Stream._wrap(_backend.cupy().cuda.get_current_stream(idx), idx)


def default_stream(device=None):
    """The legacy default (null) stream of ``device``."""
    _cupy()
    return Stream._wrap(_backend.cupy().cuda.Stream.null, _index(device))


def set_stream(stream):
    """Make ``stream`` the current stream of its device (None: no change)."""
    if stream is not None:
        with _on(stream._idx):
            stream._cs.use()


class StreamContext:
    """Context manager that makes ``stream`` current, and its device current, for its block (None: no change)."""

    def __init__(self, stream):
        self.stream = stream
        self._saved = []

    def __enter__(self):
        s = self.stream
        if s is not None:
            dev = _on(s._idx)
            dev.__enter__()
            self._saved.append((dev, _backend.cupy().cuda.get_current_stream()))
            s._cs.use()
        return s

    def __exit__(self, *exc):
        if self.stream is not None:
            dev, prev = self._saved.pop()
            prev.use()
            dev.__exit__(*exc)
        return False


def stream(stream):
    return StreamContext(stream)


def is_current_stream_capturing():
    """True while the current stream records a CUDA graph."""
    return is_initialized() and bool(current_stream()._cs.is_capturing())


class Event:
    """A CUDA event: a point in a stream to wait for or to time (``enable_timing=True``)."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self._ce = _cupy().cuda.Event(block=blocking, disable_timing=not enable_timing, interprocess=interprocess)
        self.enable_timing = enable_timing

    @property
    def cuda_event(self):
        return self._ce.ptr

    def record(self, stream=None):
        """Record the event on ``stream`` (default: the current stream)."""
        self._ce.record((current_stream() if stream is None else stream)._cs)

    def wait(self, stream=None):
        """Make later work on ``stream`` (default: the current stream) wait for this event."""
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self):
        """True when the work recorded before the event has finished."""
        return self._ce.done

    def synchronize(self):
        self._ce.synchronize()

    def elapsed_time(self, end_event):
        """Milliseconds between this event and ``end_event``, both recorded and finished."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with enable_timing=True to measure elapsed time")
        return _backend.cupy().cuda.get_elapsed_time(self._ce, end_event._ce)

    def __repr__(self):
        return f"<ember.cuda.Event {self._ce.ptr:#x}>"
