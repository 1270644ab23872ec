"""TailLog: copies the lines workers write to their log files onto the console, each behind its rank's header
(``[default0]:``), as ``tail -f`` would; one thread per console stream."""
import threading

from ember.distributed.elastic.utils.logging import get_logger

__all__ = ["TailLog"]

logger = get_logger(__name__)


class _Follower:
    """One log file being followed; keeps a line that is not finished yet until it is (or until the end)."""

    def __init__(self, header, path):
        self.header, self.path, self.file, self.partial = header, path, None, ""

    def lines(self, final):
        if self.file is None:
            try:
                self.file = open(self.path, errors="replace")
            except FileNotFoundError:
                return []
        text = self.partial + self.file.read()
        lines = text.split("\n")
        self.partial = lines.pop()
        if final and self.partial:
            lines.append(self.partial)
            self.partial = ""
        return lines

    def close(self):
        if self.file is not None:
            self.file.close()


class TailLog:
    """Follows ``log_files`` (local rank -> path) and writes their lines to ``dst`` (a text stream) behind
    ``[{name}{local_rank}]:`` or the rank's entry of ``log_line_prefixes``; with ``log_line_filter``, only the
    lines it accepts. ``start()``, then ``stop()`` copies what is left and ends the thread."""

    def __init__(self, name, log_files, dst, log_line_prefixes=None, interval_sec=0.05, log_line_filter=None):
        prefixes = log_line_prefixes or {}
        self._followers = [_Follower(prefixes.get(rank, f"[{name}{rank}]:"), path)
                           for rank, path in log_files.items()]
        self._dst, self._interval, self._filter = dst, interval_sec, log_line_filter
        self._finished = threading.Event()
        self._thread = None
        self._name = name

    def start(self):
        if self._followers and self._dst is not None:
            self._thread = threading.Thread(target=self._run, name=f"TailLog_{self._name}", daemon=True)
            self._thread.start()
        return self

    def _copy(self, final):
        copied = False
        for f in self._followers:
            for line in f.lines(final):
                if self._filter is None or self._filter(line):
                    self._dst.write(f"{f.header}{line}\n")
                copied = True
        if copied:
            self._dst.flush()
        return copied

    def _run(self):
        try:
            while not self._finished.is_set():
                if not self._copy(final=False):
                    self._finished.wait(self._interval)
            self._copy(final=True)
        except Exception:
            logger.exception("error in log tailer for %s", self._name)
        finally:
            for f in self._followers:
                f.close()

    def stop(self):
        self._finished.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def stopped(self):
        return self._finished.is_set() and self._thread is None
