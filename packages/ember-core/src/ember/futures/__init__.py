"""ember.futures: ``Future``, the result of asynchronous work (RPCs, collectives), with ``collect_all`` and
``wait_all``, as torch.futures."""
import threading

__all__ = ["Future", "collect_all", "wait_all"]


class Future:
    """A value that is set once, later: ``wait()`` blocks for it, ``then(cb)`` chains work on it.

    Callbacks run in the thread that completes the future (or at once, in the caller's, when it is done)."""

    __slots__ = ("_cond", "_done", "_value", "_exc", "_callbacks", "__weakref__")

    def __init__(self, *, devices=None):
        self._cond = threading.Condition(threading.Lock())
        self._done = False
        self._value = self._exc = None
        self._callbacks = []

    def done(self):
        """Whether a result or an error was set."""
        return self._done

    def wait(self):
        """Block until done; the value, or raise the error."""
        if not self._done:
            with self._cond:
                while not self._done:
                    self._cond.wait()
        if self._exc is not None:
            raise self._exc
        return self._value

    def _wait_for(self, timeout):
        """Block at most ``timeout`` seconds; whether done."""
        if not self._done:
            with self._cond:
                if not self._done:
                    self._cond.wait(timeout)
        return self._done

    def value(self):
        """The value of a completed future (raises its error); RuntimeError before completion."""
        if not self._done:
            raise RuntimeError("Future.value() called on a Future that is not completed yet")
        if self._exc is not None:
            raise self._exc
        return self._value

    def set_result(self, result):
        """Complete with ``result``, running the callbacks."""
        self._set(result, None)

    def set_exception(self, result):
        """Complete with the error ``result`` (an exception), raised by ``wait`` and ``value``."""
        if not isinstance(result, BaseException):
            raise TypeError(f"set_exception expects an exception, got {type(result).__name__}")
        self._set(None, result)

    def _set(self, value, exc):
        with self._cond:
            if self._done:
                raise RuntimeError("Attempting to mark a completed Future as complete again. Note that a Future "
                                   "can only be marked completed once.")
            self._value, self._exc, self._done = value, exc, True
            callbacks, self._callbacks = self._callbacks, None
            self._cond.notify_all()
        for cb in callbacks:
            cb(self)

    def _has_callbacks(self):
        return bool(self._callbacks)

    def add_done_callback(self, callback):
        """Run ``callback(self)`` on completion (its errors are the caller's to handle: they are not caught)."""
        with self._cond:
            if not self._done:
                self._callbacks.append(callback)
                return
        callback(self)

    def then(self, callback):
        """A future of ``callback(self)``, run when this one completes; if the callback raises, the new future
        fails with a RuntimeError saying so."""
        fut = Future()

        def run(f):
            try:
                result = callback(f)
            except BaseException as e:  # noqa: BLE001 - the chained future carries it
                fut.set_exception(RuntimeError(
                    f"Got the following error when running the callback: {type(e).__name__}: {e}"))
                return
            fut.set_result(result)
        self.add_done_callback(run)
        return fut

    def __repr__(self):
        state = "done" if self._done else "pending"
        return f"<ember.futures.Future ({state})>"

    @classmethod
    def __class_getitem__(cls, item):
        return cls


def collect_all(futures):
    """A future completed once all ``futures`` are, with the list of them as its value."""
    futures = list(futures)
    out = Future()
    if not futures:
        out.set_result([])
        return out
    left = [len(futures)]
    lock = threading.Lock()

    def one(_):
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            out.set_result(futures)
    for f in futures:
        f.add_done_callback(one)
    return out


def wait_all(futures):
    """Wait for every future; their values in order (raises the first error met)."""
    return [f.wait() for f in collect_all(futures).wait()]
