"""Errors of worker processes: ``@record`` writes a worker's uncaught exception to its error file; the agent
reads it back into a ``ProcessFailure``; the launcher raises ``ChildFailedError``, whose message reports the root
cause (the first failure) with its rank, exit code or signal and traceback, then the other failures.

    from ember.distributed.elastic.multiprocessing.errors import record

    @record
    def main():
        ...
"""
import json
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime
from functools import wraps

from ember.distributed.elastic.utils.logging import get_logger

from .error_handler import ErrorHandler
from .handlers import get_error_handler

__all__ = ["ProcessFailure", "ChildFailedError", "record", "ErrorHandler", "get_error_handler"]

logger = get_logger(__name__)

_NOT_AVAILABLE = "<N/A>"
_NO_TRACEBACK = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"


@dataclass
class ProcessFailure:
    """A failed worker: its local rank, pid, exit code (negative: killed by that signal) and error file.

    ``message`` is the error file's message (a dict ``{"message": ..., "extraInfo": {...}}`` as ``@record`` writes
    it), else "Signal N (SIGNAME) received by PID pid" for a signal, else a hint to use ``@record``;
    ``timestamp`` is the error's time (seconds) or the time the failure was seen; ``error_file`` is "<N/A>" when
    the worker wrote none. ``host`` (ember) names the worker's machine in the report (default: this one's)."""
    local_rank: int
    pid: int
    exitcode: int
    error_file: str
    error_file_data: dict = field(init=False)
    message: str = field(init=False)
    timestamp: int = field(init=False)
    host: str = field(default="", kw_only=True)

    def __post_init__(self):
        self.error_file_data = {"message": "<NONE>"}
        self.message, self.timestamp = "", int(time.time())
        if self.error_file and os.path.isfile(self.error_file):
            try:
                with open(self.error_file) as f:
                    self.error_file_data = json.load(f)
                message = self.error_file_data["message"]
                self.message = message
                self.timestamp = int(self.error_file_data.get("timestamp", 0)) if isinstance(message, str) \
                    else int(message["extraInfo"]["timestamp"])
            except Exception:
                logger.exception("Failed to parse reply file: %s", self.error_file)
                raise
        else:
            self.error_file = _NOT_AVAILABLE
        if not self.message:
            if self.exitcode < 0:
                self.message = f"Signal {-self.exitcode} ({self.signal_name()}) received by PID {self.pid}"
            else:
                self.error_file_data["errorTraits"] = {"category": "system_terminated_error",
                                                       "retryability": "False"}
                self.message = _NO_TRACEBACK

    def signal_name(self):
        """The name of the signal that killed the worker ("<N/A>" if none)."""
        if self.exitcode < 0:
            try:
                return signal.Signals(-self.exitcode).name
            except ValueError:
                pass
        return _NOT_AVAILABLE

    def timestamp_isoformat(self):
        return datetime.fromtimestamp(self.timestamp).isoformat(sep="_")


def _format_failure(idx, rank, failure):
    message = failure.message
    if isinstance(message, dict):
        message = message.get("extraInfo", {}).get("py_callstack", message.get("message", _NOT_AVAILABLE))
        message = message.replace("\n", "\n  ")
    sig = failure.signal_name()
    sig = f" ({sig})" if sig != _NOT_AVAILABLE else ""
    return (f"[{idx}]:\n"
            f"  time      : {failure.timestamp_isoformat()}\n"
            f"  host      : {failure.host or socket.getfqdn()}\n"
            f"  rank      : {rank} (local_rank: {failure.local_rank})\n"
            f"  exitcode  : {failure.exitcode} (pid: {failure.pid}) {sig}\n"
            f"  error_file: {failure.error_file}\n"
            f"  traceback : {message}")


class ChildFailedError(Exception):
    """Workers of ``name`` failed: ``failures`` maps global ranks to ``ProcessFailure``s. Raised from a function
    decorated with ``@record``, the root cause's error file becomes this process's error file."""

    def __init__(self, name, failures):
        if not failures:
            raise AssertionError("ChildFailedError needs at least one failure")
        self.name, self.failures = name, failures
        super().__init__(self.format_msg())

    def get_first_failure(self):
        """(global rank, failure) of the earliest failure (the first one seen among equal timestamps)."""
        rank = min(self.failures, key=lambda r: self.failures[r].timestamp)
        return rank, self.failures[rank]

    def format_msg(self, boarder_delim="=", section_delim="-"):
        title = f"{self.name} FAILED"
        root_rank, _ = self.get_first_failure()
        root, others, width = "", [], len(title)
        for idx, (rank, failure) in enumerate(self.failures.items()):
            text = _format_failure(idx, rank, failure)
            width = max([width, *map(len, text.split("\n"))])
            if rank == root_rank:
                root = text
            else:
                others.append(text)
        width = min(width, 60)
        border, section = boarder_delim * width, section_delim * width
        return (f"\n{border}\n{title}\n{section}\nFailures:\n" + ("\n".join(others) or "  <NO_OTHER_FAILURES>")
                + f"\n{section}\nRoot Cause (first observed failure):\n{root}\n{border}")


def record(fn, error_handler=None):
    """Decorator for a worker's (or the launcher's) main function: an uncaught exception is written to the error
    file before it propagates; ``SystemExit(0)`` returns None; a ``ChildFailedError`` copies the root cause's
    error file to this process's instead."""
    handler = error_handler or get_error_handler()

    @wraps(fn)
    def wrapper(*args, **kwargs):
        handler.initialize()
        try:
            return fn(*args, **kwargs)
        except SystemExit as e:
            if e.code == 0:
                return None
            raise
        except ChildFailedError as e:
            rank, failure = e.get_first_failure()
            if failure.error_file != _NOT_AVAILABLE:
                handler.dump_error_file(failure.error_file, failure.exitcode)
            else:
                logger.info("local_rank %s FAILED with no error file. Decorate your entrypoint fn with @record for "
                            "traceback info. See: https://pytorch.org/docs/stable/elastic/errors.html", rank)
            raise
        except Exception as e:
            handler.record_exception(e)
            raise
    return wrapper
