"""Timers through a named pipe (FIFO): any process of the host may be a client, known by pid; each request is one
JSON line, short enough (< PIPE_BUF) to be written atomically. The local agent runs a FileTimerServer for its
workers when TORCHELASTIC_ENABLE_FILE_TIMER=1 and tells them the pipe in TORCHELASTIC_TIMER_FILE."""
import json
import os
import select
import signal as signals
import threading
import time

from ember.distributed.elastic.utils.logging import get_logger

from .api import TimerClient, TimerRequest

__all__ = ["FileTimerClient", "FileTimerRequest", "FileTimerServer"]

logger = get_logger(__name__)


class FileTimerRequest(TimerRequest):
    """A TimerRequest with the signal that reaps the worker (0 or negative: not reaped)."""
    __slots__ = ["version", "signal"]

    def __init__(self, worker_pid, scope_id, expiration_time, signal=0):
        super().__init__(worker_pid, scope_id, expiration_time)
        self.version, self.signal = 1, signal

    @property
    def worker_pid(self):
        return self.worker_id

    def __eq__(self, other):
        return isinstance(other, FileTimerRequest) and super().__eq__(other) and \
            (self.version, self.signal) == (other.version, other.signal)

    def to_json(self):
        return json.dumps({"version": self.version, "pid": self.worker_pid, "scope_id": self.scope_id,
                           "expiration_time": self.expiration_time, "signal": self.signal})


class FileTimerClient(TimerClient):
    """Writes this process's timer requests to the FIFO ``file_path`` (made by its FileTimerServer); an expired
    timer reaps the process with ``signal``."""

    def __init__(self, file_path, signal=signals.SIGKILL):
        self._file_path, self.signal = file_path, signal

    def _send_request(self, request):
        line = (request.to_json() + "\n").encode()
        if len(line) > select.PIPE_BUF:
            raise RuntimeError(f"FileTimerRequest larger than {select.PIPE_BUF} bytes is not supported: "
                               f"{request.to_json()}")
        for attempt in range(10):
            try:
                fd = os.open(self._file_path, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as e:
                if attempt == 9:
                    raise BrokenPipeError("Could not send the FileTimerRequest because FileTimerServer is not "
                                          "available.") from e
                time.sleep(0.1)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def acquire(self, scope_id, expiration_time):
        self._send_request(FileTimerRequest(os.getpid(), scope_id, expiration_time, int(self.signal)))

    def release(self, scope_id):
        self._send_request(FileTimerRequest(os.getpid(), scope_id, -1, 0))


class FileTimerServer:
    """Creates the FIFO ``file_path`` and watches the timers written to it in a thread: each request is seen at
    once, each expiration within ``max_interval`` seconds at most. An expired worker is killed with its timer's
    signal; the server's own process is left alone (torchelastic's kills it as well). ``log_event(name,
    request)`` hears "watchdog started", "timer expired", "kill worker process", "watchdog stopped"."""

    def __init__(self, file_path, run_id="", max_interval=10, daemon=True, log_event=None):
        self._file_path, self._run_id = file_path, run_id
        self._max_interval, self._daemon = max_interval, daemon
        self._timers = {}  # (pid, scope) -> FileTimerRequest
        self._stop_signaled = False
        self._watchdog_thread = None
        self._log_event = log_event or (lambda name, request: None)
        self._request_count = 0
        self._last_progress_time = int(time.time())
        self._is_client_started = False
        if os.path.exists(file_path):
            os.remove(file_path)
        os.mkfifo(file_path)
        # read and write ends of our own: opening never blocks, and the pipe never reports end-of-file
        self._fd = os.open(file_path, os.O_RDWR | os.O_NONBLOCK)
        self._wake_r, self._wake_w = os.pipe()  # stop() wakes the watchdog through it
        self._buffer = b""

    def start(self):
        logger.info("Starting %s... max_interval=%s, daemon=%s, file_path=%s", type(self).__name__,
                    self._max_interval, self._daemon, self._file_path)
        self._watchdog_thread = threading.Thread(target=self._watchdog_loop, daemon=self._daemon)
        self._watchdog_thread.start()
        self._log_event("watchdog started", None)

    def stop(self):
        logger.info("Stopping %s", type(self).__name__)
        self._stop_signaled = True
        os.write(self._wake_w, b"x")
        if self._watchdog_thread is not None:
            self._watchdog_thread.join()
            self._watchdog_thread = None
        if self._fd is not None:
            for fd in (self._fd, self._wake_r, self._wake_w):
                os.close(fd)
            self._fd = None
        if os.path.exists(self._file_path):
            os.remove(self._file_path)
        self._log_event("watchdog stopped", None)

    def run_once(self):
        """Handle what is in the pipe now and reap expired workers, without a thread."""
        self._run_watchdog(0)

    @staticmethod
    def is_process_running(pid):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True

    def _watchdog_loop(self):
        self._is_client_started = True
        while not self._stop_signaled:
            try:
                self._run_watchdog(self._max_interval)
                self._last_progress_time = int(time.time())
            except Exception:
                logger.exception("Error running watchdog")

    def _wait_seconds(self, max_interval):
        """Until the next timer expires, at most ``max_interval``."""
        soonest = min((r.expiration_time for r in self._timers.values()), default=None)
        if soonest is None:
            return max_interval
        return max(0.0, min(max_interval, soonest - time.time()))

    def _get_requests(self, max_interval):
        ready, _, _ = select.select([self._fd, self._wake_r], [], [], self._wait_seconds(max_interval))
        if self._fd not in ready:
            return []
        try:
            self._buffer += os.read(self._fd, 1 << 16)
        except BlockingIOError:
            return []
        *lines, self._buffer = self._buffer.split(b"\n")
        requests = []
        for line in lines:
            r = json.loads(line)
            requests.append(FileTimerRequest(r["pid"], r["scope_id"], r["expiration_time"], r["signal"]))
        return requests

    def _run_watchdog(self, max_interval):
        self.register_timers(self._get_requests(max_interval))
        reaped = set()
        for pid, expired in self.get_expired_timers(time.time()).items():
            logger.info("Reaping worker_pid=[%s]. Expired timers: %s", pid, [r.scope_id for r in expired])
            reaped.add(pid)
            expired.sort(key=lambda r: r.expiration_time)
            for r in expired:
                self._log_event("timer expired", r)
            killer = next((r for r in expired if r.signal > 0), None)
            if killer is None:
                logger.info("No signal specified with worker=[%s]. Do not reap it.", pid)
                continue
            if self._reap_worker(pid, killer.signal):
                logger.info("Successfully reaped worker=[%s] with signal=%s", pid, killer.signal)
                self._log_event("kill worker process", killer)
            else:
                logger.error("Error reaping worker=[%s]. Will retry on next watchdog.", pid)
                reaped.discard(pid)
        self.clear_timers(reaped)

    def register_timers(self, timer_requests):
        for r in timer_requests:
            self._request_count += 1
            if r.expiration_time < 0:
                self._timers.pop((r.worker_pid, r.scope_id), None)
            else:
                self._timers[(r.worker_pid, r.scope_id)] = r

    def clear_timers(self, worker_pids):
        for key in [k for k in self._timers if k[0] in worker_pids or not self.is_process_running(k[0])]:
            del self._timers[key]

    def get_expired_timers(self, deadline):
        expired = {}
        for r in self._timers.values():
            if r.expiration_time <= deadline:
                expired.setdefault(r.worker_pid, []).append(r)
        return expired

    def _reap_worker(self, worker_pid, signal):
        try:
            os.kill(worker_pid, signal)
        except ProcessLookupError:
            logger.info("Process with pid=%s does not exist. Skipping", worker_pid)
        except Exception:
            logger.exception("Error terminating pid=%s", worker_pid)
            return False
        return True

    def get_last_progress_time(self):
        return self._last_progress_time if self._is_client_started else int(time.time())
