"""``spawn`` and ``start_processes``: run ``fn(i, *args)`` in ``nprocs`` processes and report the first failure.

Each child writes the traceback of an exception it raises to its own file in a temporary folder (a file, not
a pipe, so that a child never blocks on a full pipe). ``ProcessContext.join`` waits until a process ends; when
one ends with an error it stops the others (SIGTERM, then SIGKILL after a grace period) and raises
``ProcessRaisedException`` with the child's traceback, or ``ProcessExitedException`` with its exit code or
signal, naming the process's index.
"""
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
import warnings

__all__ = ["ProcessContext", "ProcessException", "ProcessExitedException", "ProcessRaisedException", "spawn",
           "start_processes"]


class ProcessException(Exception):
    """A process started by ``spawn`` failed; ``error_index`` is its index, ``error_pid`` its pid."""

    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.msg, self.error_index, self.error_pid = msg, error_index, error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """The process raised an exception; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """The process exited with a non-zero code or was killed by a signal (``exit_code`` < 0, ``signal_name``)."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid, self.exit_code, self.signal_name)


def _run(fn, i, args, error_file):
    """A child's body: ``fn(i, *args)``; an exception's traceback goes to ``error_file`` and the exit code is 1."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # stopped by the parent
    except Exception:
        with open(error_file, "w") as f:
            f.write(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    """The processes of one ``start_processes`` call, joined with ``join``."""

    def __init__(self, processes, error_files, error_dir=None):
        self.processes, self.error_files, self._error_dir = processes, error_files, error_dir
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        return [int(p.pid) for p in self.processes]

    def _join_all(self, timeout):
        end = time.monotonic() + timeout
        for p in self.processes:
            p.join(max(0.0, end - time.monotonic()))

    def join(self, timeout=None, grace_period=None):
        """Wait up to ``timeout`` seconds for a process to end. Returns True when all have ended successfully,
        False while some still run; raises the failure of the first process that ended with an error, after
        stopping the others (given ``grace_period`` seconds to finish first)."""
        if not self.sentinels:
            self._cleanup()
            return True
        failed = None
        for sentinel in multiprocessing.connection.wait(list(self.sentinels), timeout=timeout):
            index = self.sentinels.pop(sentinel)
            self.processes[index].join()
            if self.processes[index].exitcode != 0:
                failed = index
                break
        if failed is None:
            if not self.sentinels:
                self._cleanup()
            return not self.sentinels
        self._stop_others(grace_period)
        try:
            raise self._failure(failed)
        finally:
            self._cleanup()

    def _stop_others(self, grace_period):
        if grace_period is not None:
            self._join_all(grace_period)
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        self._join_all(30 if grace_period is None else grace_period)
        for p in self.processes:
            if p.is_alive():
                p.kill()
            p.join()

    def _failure(self, index):
        process = self.processes[index]
        try:
            with open(self.error_files[index]) as f:
                trace = f.read()
        except FileNotFoundError:
            code = process.exitcode
            if code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"<Unknown signal {-code}>"
                return ProcessExitedException(f"process {index} terminated with signal {name}", index, process.pid,
                                              code, name)
            return ProcessExitedException(f"process {index} terminated with exit code {code}", index, process.pid,
                                          code)
        return ProcessRaisedException(f"\n\n-- Process {index} terminated with the following error:\n{trace}", index,
                                      process.pid)

    def _cleanup(self):
        if self._error_dir is not None:
            shutil.rmtree(self._error_dir, ignore_errors=True)
            self._error_dir = None


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start ``nprocs`` processes running ``fn(i, *args)`` (``i``: the process index) with ``start_method``;
    wait for all of them when ``join`` (raising the first failure), else return their ``ProcessContext``."""
    ctx = multiprocessing.get_context(start_method)
    error_dir = tempfile.mkdtemp(prefix="ember-spawn-")
    error_files = [os.path.join(error_dir, f"{i}.traceback") for i in range(nprocs)]
    processes = []
    for i in range(nprocs):
        p = ctx.Process(target=_run, args=(fn, i, args, error_files[i]), daemon=daemon)
        p.start()
        processes.append(p)
    context = ProcessContext(processes, error_files, error_dir)
    if not join:
        return context
    while not context.join():
        pass


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Run ``fn(i, *args)`` for ``i`` in ``range(nprocs)``, each in a process started with "spawn" (other start
    methods: ``start_processes``). ``fn`` must be importable by the children (defined at a module's top level).

    With ``join`` (the default) returns None once all have finished; if one fails, the others are stopped and
    ``ProcessRaisedException`` (with the child's traceback) or ``ProcessExitedException`` is raised. With
    ``join=False`` returns the ``ProcessContext``."""
    if start_method != "spawn":
        warnings.warn(f"This method only supports start_method=spawn (got: {start_method}).\nTo use a different "
                      "start_method use:\n\t\t ember.multiprocessing.start_processes(...)", FutureWarning,
                      stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
