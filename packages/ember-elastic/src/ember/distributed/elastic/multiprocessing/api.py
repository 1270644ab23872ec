"""Process contexts: ``n`` copies of a function (``MultiprocessContext``, through Python's multiprocessing) or of a
binary (``SubprocessContext``), with per-rank environments, log files, tee to the console and error files.

A context wakes its waiter as soon as any process exits (it waits on the processes' sentinels and pidfds instead
of polling), stops the others with a signal, then SIGKILL after the timeout, and reaps every process it started.
Workers started from the main thread die with the agent (Linux ``PR_SET_PDEATHSIG``): a launcher killed by SIGKILL
leaves no orphan training its model alone.
"""
import abc
import ctypes
import multiprocessing
import multiprocessing.connection
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from enum import IntFlag

from ember.distributed.elastic.multiprocessing.errors import ProcessFailure, record
from ember.distributed.elastic.multiprocessing.tail_log import TailLog
from ember.distributed.elastic.utils.logging import get_logger

__all__ = ["DefaultLogsSpecs", "LogsDest", "LogsSpecs", "MultiprocessContext", "PContext", "RunProcsResult",
           "SignalException", "Std", "SubprocessContext", "to_map"]

logger = get_logger(__name__)


class SignalException(Exception):
    """The agent process received a termination signal (``sigval``) while it ran workers."""

    def __init__(self, msg, sigval):
        super().__init__(msg)
        self.sigval = sigval


def _terminate_process_handler(signum, frame):
    sigval = signal.Signals(signum)
    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)


def _install_signal_handlers():
    """Turn the signals named by TORCHELASTIC_SIGNALS_TO_HANDLE into SignalException (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        logger.warning("Failed to register signal handlers since torchelastic is running on a child thread. "
                       "This could lead to orphaned worker processes if the torchrun is terminated.")
        return
    names = os.environ.get("TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT")
    for name in filter(None, names.split(",")):  # "" (an agent under Ray): none
        try:
            signal.signal(getattr(signal, name.strip()), _terminate_process_handler)
        except (AttributeError, ValueError, RuntimeError):
            logger.warning("Failed to register signal handler for %s", name, exc_info=True)


def _validate_full_rank(d, nprocs, what):
    if set(d) != set(range(nprocs)):
        raise RuntimeError(f"{what}, local rank mapping mismatch, expected: {set(range(nprocs))}, actual: {set(d)}")


class Std(IntFlag):
    """Which standard streams of a worker go to its log files: NONE, OUT, ERR, ALL."""
    NONE = 0
    OUT = 1
    ERR = 2
    ALL = OUT | ERR

    @classmethod
    def from_str(cls, vm):
        """"3" -> Std.ALL; "0:1,1:2" -> {0: Std.OUT, 1: Std.ERR} (the launcher's --redirects/--tee syntax)."""
        if re.fullmatch(r"[0123]", vm):
            return cls(int(vm))
        if re.fullmatch(r"(\d:[0123],)*(\d:[0123])", vm):
            return {int(rank): cls(int(v)) for rank, v in (item.split(":") for item in vm.split(","))}
        raise ValueError(f"{vm} does not match: <^[0123]$> or <^(\\d:[0123],)*(\\d:[0123])$>")


def to_map(val_or_map, local_world_size):
    """A Std or a {local rank: Std} as a map over every local rank (missing ranks: Std.NONE)."""
    if isinstance(val_or_map, Std):
        return dict.fromkeys(range(local_world_size), val_or_map)
    return {rank: val_or_map.get(rank, Std.NONE) for rank in range(local_world_size)}


@dataclass
class LogsDest:
    """Where each local rank's streams go ("" = the console), which files are teed, and its error file."""
    stdouts: dict = field(default_factory=dict)
    stderrs: dict = field(default_factory=dict)
    tee_stdouts: dict = field(default_factory=dict)
    tee_stderrs: dict = field(default_factory=dict)
    error_files: dict = field(default_factory=dict)
    filtered_stdout: str = ""
    filtered_stderr: str = ""


class LogsSpecs(abc.ABC):
    """A policy for workers' log files: ``reify(envs)`` makes the files of one attempt (and may add variables to
    each rank's environment, e.g. TORCHELASTIC_ERROR_FILE)."""

    def __init__(self, log_dir=None, redirects=Std.NONE, tee=Std.NONE, local_ranks_filter=None):
        self._root_log_dir, self._redirects, self._tee = log_dir, redirects, tee
        self._local_ranks_filter = local_ranks_filter

    @abc.abstractmethod
    def reify(self, envs):
        ...

    @property
    @abc.abstractmethod
    def root_log_dir(self):
        ...


class DefaultLogsSpecs(LogsSpecs):
    """torchrun's layout: ``<log_dir>/<run_id>_<random>/attempt_<restart count>/<local rank>/`` holding
    ``stdout.log``, ``stderr.log`` (when redirected or teed) and ``error.json``. Without ``log_dir`` a temporary
    folder ``torchelastic_*`` is made; ``os.devnull`` keeps no files at all. A reused attempt folder (a restart for
    a membership change keeps the count) is emptied first. With ``local_ranks_filter``, the console shows only
    those ranks."""

    def __init__(self, log_dir=None, redirects=Std.NONE, tee=Std.NONE, local_ranks_filter=None):
        if log_dir != os.devnull:
            if not log_dir:
                log_dir = tempfile.mkdtemp(prefix="torchelastic_")
            elif os.path.isfile(log_dir):
                raise NotADirectoryError(f"log_dir: {log_dir} is a file")
            else:
                os.makedirs(log_dir, exist_ok=True)
        super().__init__(log_dir, redirects, tee, local_ranks_filter)
        self._run_log_dir = None

    @property
    def root_log_dir(self):
        return str(self._root_log_dir)

    def _attempt_dir(self, run_id, restart_count):
        if self._run_log_dir is None:
            os.makedirs(self._root_log_dir, exist_ok=True)
            self._run_log_dir = tempfile.mkdtemp(prefix=f"{run_id}_", dir=self._root_log_dir)
            logger.info("log directory set to: %s", self._run_log_dir)
        path = os.path.join(self._run_log_dir, f"attempt_{restart_count}")
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path

    def reify(self, envs):
        nprocs = len(envs)
        first = envs[0] if nprocs else {}
        if not nprocs:
            logger.warning("Empty envs map provided when defining logging destinations.")
        redirects, tees = to_map(self._redirects, nprocs), to_map(self._tee, nprocs)
        dest = LogsDest(stdouts=dict.fromkeys(range(nprocs), ""), stderrs=dict.fromkeys(range(nprocs), ""))
        if self._root_log_dir == os.devnull:
            for rank in range(nprocs):
                dest.tee_stdouts[rank] = dest.tee_stderrs[rank] = dest.error_files[rank] = os.devnull
                envs[rank]["TORCHELASTIC_ERROR_FILE"] = ""
            dest.filtered_stdout = dest.filtered_stderr = os.devnull
            return dest
        attempt = self._attempt_dir(first.get("TORCHELASTIC_RUN_ID", "test_run_id"),
                                    first.get("TORCHELASTIC_RESTART_COUNT", "0"))
        hidden = self._local_ranks_filter
        for rank in range(nprocs):
            folder = os.path.join(attempt, str(rank))
            os.mkdir(folder)
            to_file, tee = redirects[rank] | tees[rank], tees[rank]
            for std, files, teed, name in ((Std.OUT, dest.stdouts, dest.tee_stdouts, "stdout.log"),
                                           (Std.ERR, dest.stderrs, dest.tee_stderrs, "stderr.log")):
                if to_file & std:
                    files[rank] = os.path.join(folder, name)
                if tee & std and not (hidden and rank not in hidden):
                    teed[rank] = files[rank]
                if hidden and rank not in hidden and files[rank] == "":
                    files[rank] = os.devnull
            dest.error_files[rank] = os.path.join(folder, "error.json")
            envs[rank]["TORCHELASTIC_ERROR_FILE"] = dest.error_files[rank]
            logger.info("Setting worker%s reply file to: %s", rank, dest.error_files[rank])
        dest.filtered_stdout = os.path.join(attempt, "filtered_stdout.log")
        dest.filtered_stderr = os.path.join(attempt, "filtered_stderr.log")
        return dest

    def __repr__(self):
        return (f"DefaultLogsSpecs(root_log_dir={self._root_log_dir}, redirects={self._redirects}, "
                f"tee={self._tee}, local_ranks_filter={self._local_ranks_filter})")

    def __eq__(self, other):
        return isinstance(other, DefaultLogsSpecs) and (
            (self._root_log_dir, self._redirects, self._tee, self._local_ranks_filter)
            == (other._root_log_dir, other._redirects, other._tee, other._local_ranks_filter))


@dataclass
class RunProcsResult:
    """The outcome of a context's processes, by local rank: ``return_values`` (functions; None for binaries),
    ``failures``, and the log file of each stream ("" when it went to the console)."""
    return_values: dict = field(default_factory=dict)
    failures: dict = field(default_factory=dict)
    stdouts: dict = field(default_factory=dict)
    stderrs: dict = field(default_factory=dict)

    def is_failed(self):
        return len(self.failures) > 0


_PR_SET_PDEATHSIG = 1
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None


def _die_with_parent(parent_pid):
    """In a new worker: be killed when the thread that started it ends (the agent's main thread), and end now if
    the agent is already gone."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)


def _wait_any(waitables, timeout):
    """Wait until one of ``waitables`` is ready or ``timeout`` seconds (None: no limit) passed; where one cannot
    be waited on (None: no pidfd on this system), look again after 50 ms."""
    if None in waitables:
        time.sleep(0.05 if timeout is None else min(timeout, 0.05))
    else:
        multiprocessing.connection.wait(waitables, timeout)


def _open_log(path):
    return None if not path else open(path, "w")


class PContext(abc.ABC):
    """``n`` processes started together (``start()``), watched (``wait``), stopped together (``close``)."""

    def __init__(self, name, entrypoint, args, envs, logs_specs, log_line_prefixes=None,
                 duplicate_stdout_filters=None, duplicate_stderr_filters=None):
        self.name, self.entrypoint, self.args, self.envs = name, entrypoint, args, envs
        self.nprocs = len(args)
        dest = logs_specs.reify(envs)
        _validate_full_rank(dest.stdouts, self.nprocs, "stdouts")
        _validate_full_rank(dest.stderrs, self.nprocs, "stderrs")
        self.stdouts, self.stderrs, self.error_files = dest.stdouts, dest.stderrs, dest.error_files
        self._tail_logs = [TailLog(name, dest.tee_stdouts, sys.stdout, log_line_prefixes),
                           TailLog(name, dest.tee_stderrs, sys.stderr, log_line_prefixes)]
        self.filtered_stdout = self.filtered_stderr = None
        for filters, teed, path, attr in ((duplicate_stdout_filters, dest.tee_stdouts, dest.filtered_stdout,
                                           "filtered_stdout"),
                                          (duplicate_stderr_filters, dest.tee_stderrs, dest.filtered_stderr,
                                           "filtered_stderr")):
            if filters:
                stream = open(path, "w", errors="replace", buffering=1)
                setattr(self, attr, stream)
                self._tail_logs.append(TailLog(name, teed, stream, log_line_prefixes,
                                               log_line_filter=lambda line, f=filters: any(s in line for s in f)))

    def start(self):
        """Install the agent's signal handlers (main thread), start the processes and the console tails."""
        _install_signal_handlers()
        self._start()
        for tail in self._tail_logs:
            tail.start()

    @abc.abstractmethod
    def _start(self):
        ...

    @abc.abstractmethod
    def _poll(self):
        """A RunProcsResult once every process ended or one failed (the others are then stopped), else None."""

    @abc.abstractmethod
    def _waitables(self):
        """Objects that ``multiprocessing.connection.wait`` sees ready when something changed (a process ended,
        a return value arrived); None stands for one that cannot be waited on (then polled)."""

    @abc.abstractmethod
    def pids(self):
        """{local rank: pid}."""

    @abc.abstractmethod
    def _close(self, death_sig, timeout=30):
        ...

    def wait(self, timeout=-1, period=1):
        """Wait up to ``timeout`` seconds (< 0: no limit; 0: just look) for the processes' result; None if they
        are still running then. Returns as soon as a process ends (``period`` is kept for torch's signature)."""
        if timeout == 0:
            return self._poll()
        end = None if timeout < 0 else time.monotonic() + timeout
        while True:
            result = self._poll()
            if result is not None:
                return result
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return None
            _wait_any(self._waitables(), left)

    def _wait_for_event(self, timeout):
        """Block until a process may have ended (or a return value arrived), at most ``timeout`` seconds."""
        _wait_any(self._waitables(), timeout)

    def close(self, death_sig=None, timeout=30):
        """Stop every running process with ``death_sig`` (SIGTERM), SIGKILL those alive after ``timeout``
        seconds, reap them all, then finish the console tails."""
        self._close(death_sig or signal.SIGTERM, timeout)
        for tail in self._tail_logs:
            tail.stop()
        for stream in (self.filtered_stdout, self.filtered_stderr):
            if stream is not None:
                stream.close()


def _fileno(stream, default):
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return default


def _run_function(local_rank, fn, args, env, stdout, stderr, result_conn, parent_pid):
    """A worker process of MultiprocessContext: its environment and log files, then ``record(fn)(*args)``, whose
    return value goes back through ``result_conn``."""
    if parent_pid is not None:
        _die_with_parent(parent_pid)
    os.environ.update(env)
    for path, stream, fd in ((stdout, sys.stdout, 1), (stderr, sys.stderr, 2)):
        if path:
            stream.flush()
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            # the C-level descriptor and the one Python's stream writes to (they differ under output capture)
            for into in {fd, _fileno(stream, fd)}:
                os.dup2(target, into)
            os.close(target)
    result = record(fn)(*args)
    result_conn.send(result)
    result_conn.close()


class MultiprocessContext(PContext):
    """Copies of a function, started with the multiprocessing start method ``start_method`` (spawn, fork,
    forkserver); their return values are collected by local rank."""

    def __init__(self, name, entrypoint, args, envs, start_method, logs_specs, log_line_prefixes=None,
                 numa_options=None, duplicate_stdout_filters=None, duplicate_stderr_filters=None):
        super().__init__(name, entrypoint, args, envs, logs_specs, log_line_prefixes, duplicate_stdout_filters,
                         duplicate_stderr_filters)
        self.start_method = start_method
        self._procs, self._conns, self._return_values = [], [], {}

    def _start(self):
        if self._procs:
            raise ValueError("The process context already initialized. Most likely the start method got called "
                             "twice.")
        ctx = multiprocessing.get_context(self.start_method)
        # (a forkserver's children are the server's, not ours)
        parent = os.getpid() if threading.current_thread() is threading.main_thread() and \
            self.start_method != "forkserver" else None
        for rank in range(self.nprocs):
            reader, writer = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_run_function, name=f"{self.name}{rank}", daemon=False, args=(
                rank, self.entrypoint, self.args[rank], self.envs[rank], self.stdouts[rank], self.stderrs[rank],
                writer, parent))
            proc.start()
            writer.close()
            self._procs.append(proc)
            self._conns.append(reader)

    def _collect(self, rank):
        conn = self._conns[rank]
        if rank not in self._return_values and conn is not None:
            try:
                if conn.poll():
                    self._return_values[rank] = conn.recv()
            except (EOFError, OSError):  # the worker ended without sending
                self._conns[rank] = None

    def _poll(self):
        for rank, proc in enumerate(self._procs):
            self._collect(rank)
            code = proc.exitcode
            if code is None:
                continue
            if code != 0:
                logger.error("failed (exitcode: %s) local_rank: %s (pid: %s) of fn: %s (start_method: %s)", code,
                             rank, proc.pid, getattr(self.entrypoint, "__qualname__", self.entrypoint),
                             self.start_method)
                self.close()
                failure = ProcessFailure(local_rank=rank, pid=proc.pid, exitcode=code,
                                         error_file=self.error_files.get(rank, ""))
                return RunProcsResult(failures={rank: failure}, stdouts=self.stdouts, stderrs=self.stderrs)
            self._return_values.setdefault(rank, None)  # ended well without a value (e.g. os._exit(0))
        if len(self._return_values) == self.nprocs and all(p.exitcode is not None for p in self._procs):
            self.close()
            return RunProcsResult(return_values=dict(sorted(self._return_values.items())), stdouts=self.stdouts,
                                  stderrs=self.stderrs)
        return None

    def _waitables(self):
        return [p.sentinel for p in self._procs if p.exitcode is None] + \
            [c for r, c in enumerate(self._conns) if c is not None and r not in self._return_values]

    def pids(self):
        return {rank: proc.pid for rank, proc in enumerate(self._procs)}

    def _close(self, death_sig, timeout=30):
        alive = [p for p in self._procs if p.exitcode is None]
        for proc in alive:
            logger.warning("Closing process %s via signal %s", proc.pid, death_sig.name)
            try:
                os.kill(proc.pid, death_sig)
            except ProcessLookupError:
                pass
        _reap(alive, timeout, lambda p: p.exitcode is None, lambda p: p.sentinel,
              lambda p: os.kill(p.pid, signal.SIGKILL), death_sig)
        for proc in self._procs:
            proc.join(0)
        for conn in self._conns:
            if conn is not None:
                conn.close()
        self._conns = [None] * len(self._procs)


def _reap(procs, timeout, alive, sentinel, kill, death_sig):
    """Wait until ``procs`` ended or ``timeout`` passed; SIGKILL the rest and wait for them as long again."""
    for deadline_sig in (death_sig, signal.SIGKILL):
        end = time.monotonic() + timeout
        while True:
            running = [p for p in procs if alive(p)]
            left = end - time.monotonic()
            if not running or left <= 0:
                break
            _wait_any([sentinel(p) for p in running], left)
        if not running or deadline_sig == signal.SIGKILL:
            for proc in running:
                logger.error("Process %s did not exit after SIGKILL within %ss; abandoning it", proc.pid, timeout)
            return
        for proc in running:
            logger.warning("Unable to shutdown process %s via %s, forcefully exiting via %s", proc.pid, death_sig,
                           signal.SIGKILL)
            try:
                kill(proc)
            except ProcessLookupError:
                pass


class _Binary:
    """One worker binary: its Popen (in a new session, so that a signal reaches its whole process group), a pidfd
    that becomes readable when it exits, and its log files."""

    def __init__(self, entrypoint, args, env, stdout, stderr, parent_pid):
        self._files = [_open_log(stdout), _open_log(stderr)]
        preexec = None if parent_pid is None else (lambda: _die_with_parent(parent_pid))
        self.proc = subprocess.Popen([entrypoint, *map(str, args)], env={**os.environ, **env},
                                     stdout=self._files[0], stderr=self._files[1], start_new_session=True,
                                     preexec_fn=preexec)
        try:
            self.sentinel = os.pidfd_open(self.proc.pid)
        except (AttributeError, OSError):  # no pidfds: polled instead
            self.sentinel = None

    @property
    def pid(self):
        return self.proc.pid

    def running(self):
        return self.proc.poll() is None

    def signal(self, sig):
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def release(self):
        self.proc.poll()
        for f in self._files:
            if f is not None:
                f.close()
        if self.sentinel is not None:
            os.close(self.sentinel)
            self.sentinel = None


class SubprocessContext(PContext):
    """Copies of a binary (``entrypoint`` is a command, ``args`` its arguments, made strings)."""

    def __init__(self, name, entrypoint, args, envs, logs_specs, log_line_prefixes=None, numa_options=None,
                 duplicate_stdout_filters=None, duplicate_stderr_filters=None):
        super().__init__(name, entrypoint, args, envs, logs_specs, log_line_prefixes, duplicate_stdout_filters,
                         duplicate_stderr_filters)
        self._running = set(range(self.nprocs))
        self._failures = {}
        self.subprocess_handlers = {}

    def _start(self):
        if self.subprocess_handlers:
            raise ValueError("The subprocess handlers already initialized. Most likely the start method got called "
                             "twice.")
        parent = os.getpid() if threading.current_thread() is threading.main_thread() else None
        for rank in range(self.nprocs):
            self.subprocess_handlers[rank] = _Binary(self.entrypoint, self.args[rank], self.envs[rank],
                                                     self.stdouts[rank], self.stderrs[rank], parent)

    def _capture_failures(self):
        for rank in sorted(self._running):
            code = self.subprocess_handlers[rank].proc.poll()
            if code is not None:
                self._running.discard(rank)
                if code != 0:
                    self._failures[rank] = ProcessFailure(local_rank=rank, pid=self.subprocess_handlers[rank].proc.pid,
                                                          exitcode=code, error_file=self.error_files.get(rank, ""))

    def _poll(self):
        self._capture_failures()
        if self._running and not self._failures:
            return None
        self.close()
        self._capture_failures()  # the peers just stopped count as failures too (torchrun reports them)
        result = RunProcsResult(failures=self._failures, stdouts=self.stdouts, stderrs=self.stderrs)
        if result.is_failed():
            first = min(result.failures.values(), key=lambda f: f.timestamp)
            logger.error("failed (exitcode: %s) local_rank: %s (pid: %s) of binary: %s", first.exitcode,
                         first.local_rank, first.pid, self.entrypoint)
        else:
            result.return_values = dict.fromkeys(range(self.nprocs))
        return result

    def _waitables(self):
        return [self.subprocess_handlers[r].sentinel for r in self._running]

    def pids(self):
        return {rank: h.proc.pid for rank, h in self.subprocess_handlers.items()}

    def _close(self, death_sig, timeout=30):
        handlers = list(self.subprocess_handlers.values())
        alive = [h for h in handlers if h.running()]
        for h in alive:
            logger.warning("Sending process %s closing signal %s", h.proc.pid, death_sig.name)
            h.signal(death_sig)
        _reap(alive, timeout, _Binary.running, lambda h: h.sentinel, lambda h: h.signal(signal.SIGKILL), death_sig)
        for h in handlers:
            h.release()

