"""``Work`` (the handle of an asynchronous collective); its ``get_future()`` is an ``ember.futures.Future``."""
import datetime
import threading
import time

from ember.futures import Future

from ._errors import DistBackendError


class _WorkFuture(Future):
    """A Work's future. Its callbacks run on the thread of the Work's stream; one that waits for a later call of
    that stream (as torch's PowerSGD hook does: ``all_reduce(...).get_future().wait()`` inside ``then``) gets the
    queued calls run there, in order, instead of blocking the only thread that would run them."""
    __slots__ = ("_work",)

    def __init__(self, work):
        super().__init__()
        self._work = work

    def wait(self):
        self._work._help(self.done)
        return super().wait()


def _seconds(timeout):
    return timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)


class Work:
    """A collective issued with ``async_op=True`` (or a send/recv): ``wait``, ``is_completed``, ``is_success``,
    ``exception``, ``result``, ``source_rank``, ``get_future``."""

    def __init__(self, name, outputs, rank):
        self._name, self._outputs, self._rank = name, outputs, rank
        self._event = threading.Event()
        self._exc = None
        self._future = None
        self._source = None
        self._sents, self._deadline = (), None  # a send's pieces still leaving (the transport's handles)
        self._lock = threading.Lock()
        self._stream = None  # the backend's stream running it (see _help)

    def _complete(self, exc=None):
        with self._lock:
            self._exc = exc
            self._event.set()
            fut = self._future
        if fut is not None:
            self._settle(fut)

    def _settle(self, fut):
        if self._exc is not None:
            fut.set_exception(self._exc)
        else:
            fut.set_result(self._future_value())

    def _future_value(self):
        return self._outputs if self._outputs is not None else []

    def _help(self, done):
        """Called from a call of this Work's stream (a completion callback): run the stream's queued calls here until
        ``done()`` (see _WorkFuture)."""
        stream = self._stream
        if stream is not None and not done() and stream.runs_here():
            stream.help_until(done)

    def wait(self, timeout=None):
        """Block until done (at most ``timeout``, a timedelta or seconds); raise its error; True."""
        self._help(self._event.is_set)
        if timeout is None:
            self._event.wait()
        elif not self._event.wait(_seconds(timeout)):
            raise self._timed_out(timeout)
        if self._exc is None and self._sents:
            deadline = self._deadline
            if timeout is not None:
                deadline = min(deadline, time.monotonic() + _seconds(timeout))
            try:
                for s in self._sents:
                    s.wait(deadline)
            except TimeoutError:
                raise self._timed_out(timeout if timeout is not None else deadline - time.monotonic()) from None
            self._sents = ()
        if self._exc is not None:
            raise self._exc
        return True

    def _timed_out(self, timeout):
        ms = int(_seconds(timeout) * 1000)
        return DistBackendError(f"[Rank {self._rank}] Timed out waiting {ms}ms for {self._name} operation to "
                                "complete")

    def synchronize(self):
        self.wait()

    def is_completed(self):
        return self._event.is_set() and all(s.done() for s in self._sents)

    def is_success(self):
        if not self.is_completed():
            raise RuntimeError("Work.is_success(): the work has not completed yet")
        return self._exc is None

    def exception(self):
        return self._exc

    def source_rank(self):
        if self._source is None:
            raise RuntimeError("source_rank() may only be called on a recv from any source, once completed")
        return self._source

    def result(self):
        if self._outputs is None:
            raise RuntimeError("result() not implemented.")
        self.wait()
        return self._outputs

    def get_future(self):
        """A Future completed with the work (its value: the output tensors, as a list)."""
        with self._lock:
            fut = self._future
            if fut is not None:
                return fut
            fut = self._future = _WorkFuture(self)
            done = self._event.is_set()
        if done:
            self._settle(fut)
        return fut
