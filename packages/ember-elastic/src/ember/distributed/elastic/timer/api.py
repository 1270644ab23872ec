"""Expiration timers: a worker acquires a timer before code that may hang (``with expires(after=60): ...``); if it
does not release it in time, the timer server reaps the worker (kills it), and the agent restarts the group.

A TimerClient sends TimerRequests (worker id, scope, expiration time; a negative time releases) to its
TimerServer, whose watchdog thread registers them and reaps the workers whose timers expired."""
import abc
import inspect
import threading
import time
from contextlib import contextmanager

from ember.distributed.elastic.utils.logging import get_logger

__all__ = ["TimerRequest", "TimerClient", "RequestQueue", "TimerServer", "configure", "expires"]

logger = get_logger(__name__)


class TimerRequest:
    """Acquire (or, with a negative ``expiration_time``, release) the timer ``scope_id`` of ``worker_id``."""
    __slots__ = ["worker_id", "scope_id", "expiration_time"]

    def __init__(self, worker_id, scope_id, expiration_time):
        self.worker_id, self.scope_id, self.expiration_time = worker_id, scope_id, expiration_time

    def __eq__(self, other):
        return isinstance(other, TimerRequest) and (self.worker_id, self.scope_id, self.expiration_time) == (
            other.worker_id, other.scope_id, other.expiration_time)

    def __repr__(self):
        return f"{type(self).__name__}({self.worker_id!r}, {self.scope_id!r}, {self.expiration_time!r})"


class TimerClient(abc.ABC):
    """The worker's side: acquire and release timers."""

    @abc.abstractmethod
    def acquire(self, scope_id, expiration_time):
        ...

    @abc.abstractmethod
    def release(self, scope_id):
        ...


class RequestQueue(abc.ABC):
    """Where a server reads requests from."""

    @abc.abstractmethod
    def size(self):
        """Requests waiting now (a lower bound)."""

    @abc.abstractmethod
    def get(self, size, timeout):
        """Up to ``size`` requests, waiting at most ``timeout`` seconds."""


class TimerServer(abc.ABC):
    """Watches timers from ``request_queue`` in a (daemon) thread, at least every ``max_interval`` seconds, and
    reaps the workers whose timers expired."""

    def __init__(self, request_queue, max_interval, daemon=True):
        self._request_queue, self._max_interval, self._daemon = request_queue, max_interval, daemon
        self._watchdog_thread = None
        self._stop_signaled = False

    @abc.abstractmethod
    def register_timers(self, timer_requests):
        """Apply acquire and release requests."""

    @abc.abstractmethod
    def clear_timers(self, worker_ids):
        """Forget every timer of ``worker_ids``."""

    @abc.abstractmethod
    def get_expired_timers(self, deadline):
        """{worker id: [its timers expiring at or before ``deadline``]}."""

    @abc.abstractmethod
    def _reap_worker(self, worker_id):
        """Kill the worker; whether that succeeded (False: try again next time)."""

    def _reap_worker_no_throw(self, worker_id):
        try:
            return self._reap_worker(worker_id)
        except Exception:
            logger.exception("Uncaught exception thrown from _reap_worker(), check that the implementation "
                             "correctly catches exceptions")
            return True

    def _watchdog_loop(self):
        while not self._stop_signaled:
            try:
                self._run_watchdog()
            except Exception:
                logger.exception("Error running watchdog")

    def _run_watchdog(self):
        requests = self._request_queue.get(max(1, self._request_queue.size()), self._max_interval)
        self.register_timers(requests)
        reaped = set()
        for worker_id, expired in self.get_expired_timers(time.time()).items():
            logger.info("Reaping worker_id=[%s]. Expired timers: %s", worker_id, [r.scope_id for r in expired])
            if self._reap_worker_no_throw(worker_id):
                logger.info("Successfully reaped worker=[%s]", worker_id)
                reaped.add(worker_id)
            else:
                logger.error("Error reaping worker=[%s]. Will retry on next watchdog.", worker_id)
        self.clear_timers(reaped)

    def start(self):
        logger.info("Starting %s... max_interval=%s, daemon=%s", type(self).__name__, self._max_interval,
                    self._daemon)
        self._watchdog_thread = threading.Thread(target=self._watchdog_loop, daemon=self._daemon)
        self._watchdog_thread.start()

    def stop(self):
        logger.info("Stopping %s", type(self).__name__)
        self._stop_signaled = True
        if self._watchdog_thread is not None:
            self._watchdog_thread.join(self._max_interval)
            self._watchdog_thread = None


_timer_client = None


def configure(timer_client):
    """Make ``timer_client`` the client ``expires`` uses by default."""
    global _timer_client
    _timer_client = timer_client
    logger.info("Timer client configured to: %s", type(timer_client).__name__)


@contextmanager
def expires(after, scope=None, client=None):
    """A timer expiring ``after`` seconds from now for the block it wraps (released when the block ends). ``scope``
    names it (default: the caller's file and line); ``client`` defaults to the configured one."""
    client = client or _timer_client
    if client is None:
        raise RuntimeError("Configure timer client before using countdown timers.")
    if scope is None:
        caller = inspect.currentframe().f_back.f_back  # (past contextmanager's frame)
        scope = f"{caller.f_code.co_filename}#{caller.f_lineno}"
    client.acquire(scope, time.time() + after)
    try:
        yield
    finally:
        client.release(scope)
