"""Timers through a ``multiprocessing.Queue``: clients are the server's child processes, known by pid."""
import os
import signal
import time
from queue import Empty

from ember.distributed.elastic.utils.logging import get_logger

from .api import RequestQueue, TimerClient, TimerRequest, TimerServer

__all__ = ["LocalTimerClient", "MultiprocessingRequestQueue", "LocalTimerServer"]

logger = get_logger(__name__)


class LocalTimerClient(TimerClient):
    """Sends this process's timer requests into ``mp_queue`` (shared with a LocalTimerServer)."""

    def __init__(self, mp_queue):
        self._mp_queue = mp_queue

    def acquire(self, scope_id, expiration_time):
        self._mp_queue.put(TimerRequest(os.getpid(), scope_id, expiration_time))

    def release(self, scope_id):
        self._mp_queue.put(TimerRequest(os.getpid(), scope_id, -1))


class MultiprocessingRequestQueue(RequestQueue):
    def __init__(self, mp_queue):
        self._mp_queue = mp_queue

    def size(self):
        return self._mp_queue.qsize()

    def get(self, size, timeout):
        requests, end = [], time.monotonic() + timeout
        while len(requests) < size:
            try:
                requests.append(self._mp_queue.get(block=True, timeout=max(end - time.monotonic(), 0)))
            except Empty:
                break
            if time.monotonic() >= end:
                break
        return requests


class LocalTimerServer(TimerServer):
    """Reaps (SIGKILL) the child processes whose timers expired; requests come from ``mp_queue``."""

    def __init__(self, mp_queue, max_interval=60, daemon=True):
        super().__init__(MultiprocessingRequestQueue(mp_queue), max_interval, daemon)
        self._timers = {}  # (pid, scope) -> TimerRequest

    def register_timers(self, timer_requests):
        for r in timer_requests:
            if r.expiration_time < 0:
                self._timers.pop((r.worker_id, r.scope_id), None)
            else:
                self._timers[(r.worker_id, r.scope_id)] = r

    def clear_timers(self, worker_ids):
        for key in [k for k in self._timers if k[0] in worker_ids]:
            del self._timers[key]

    def get_expired_timers(self, deadline):
        expired = {}
        for r in self._timers.values():
            if r.expiration_time <= deadline:
                expired.setdefault(r.worker_id, []).append(r)
        return expired

    def _reap_worker(self, worker_id):
        try:
            os.kill(worker_id, signal.SIGKILL)
        except ProcessLookupError:
            logger.info("Process with pid=%s does not exist. Skipping", worker_id)
        except Exception:
            logger.exception("Error terminating pid=%s", worker_id)
            return False
        return True
