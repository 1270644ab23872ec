"""ErrorHandler: writes a process's uncaught exception to its error file (``TORCHELASTIC_ERROR_FILE``) as JSON, and
copies a failed child's error file to the parent's, so that schedulers find the root cause in one place.

The file holds ``{"message": {"message": "<Type>: <text>", "extraInfo": {"py_callstack": "<traceback>",
"timestamp": "<seconds>"}}}``; the parent's copy adds ``"errorCode"`` (the child's exit code) to the inner dict."""
import faulthandler
import json
import os
import time
import traceback
import warnings

from ember.distributed.elastic.utils.logging import get_logger

__all__ = ["ErrorHandler"]

logger = get_logger(__name__)


class ErrorHandler:
    """Records exceptions in the file named by TORCHELASTIC_ERROR_FILE (nothing when it is not set)."""

    def _get_error_file_path(self):
        return os.environ.get("TORCHELASTIC_ERROR_FILE")

    def initialize(self):
        """Dump every thread's Python stack on a fatal signal (SIGSEGV, SIGABRT, ...), as the worker dies."""
        try:
            faulthandler.enable(all_threads=True)
        except Exception as e:  # e.g. no usable stderr
            warnings.warn(f"Unable to enable fault handler. {type(e).__name__}: {e}", stacklevel=2)

    def _write_error_file(self, file_path, error_msg):
        try:
            with open(file_path, "w") as f:
                f.write(error_msg)
        except Exception as e:
            warnings.warn(f"Unable to write error to file. {type(e).__name__}: {e}", stacklevel=2)

    def record_exception(self, e):
        """Write ``e`` (being handled: its traceback is the current one) to this process's error file."""
        path = self._get_error_file_path()
        if path:
            data = {"message": {"message": f"{type(e).__name__}: {e}",
                                "extraInfo": {"py_callstack": traceback.format_exc(),
                                              "timestamp": str(int(time.time()))}}}
            with open(path, "w") as f:
                json.dump(data, f)

    def override_error_code_in_rootcause_data(self, rootcause_error_file, rootcause_error, error_code=0):
        """Add ``errorCode`` to the child's error dict (a message in the old plain-string form is left as is)."""
        message = rootcause_error.get("message")
        if message is None:
            logger.warning("child error file (%s) does not have field `message`. \ncannot override error code: %s",
                           rootcause_error_file, error_code)
        elif isinstance(message, str):
            logger.warning("child error file (%s) has a new message format. \nskipping error code override",
                           rootcause_error_file)
        else:
            message["errorCode"] = error_code

    def dump_error_file(self, rootcause_error_file, error_code=0):
        """Copy the root cause's error file to this process's error file (with ``errorCode`` when non-zero)."""
        with open(rootcause_error_file) as f:
            rootcause_error = json.load(f)
        if error_code:
            self.override_error_code_in_rootcause_data(rootcause_error_file, rootcause_error, error_code)
        mine = self._get_error_file_path()
        if not mine:
            logger.error("no error file defined for parent, to copy child error file (%s)", rootcause_error_file)
            return
        self._rm(mine)
        self._write_error_file(mine, json.dumps(rootcause_error))
        logger.info("dumped error file to parent's %s", mine)

    def _rm(self, path):
        if not os.path.isfile(path):
            return
        try:
            with open(path) as f:
                original = json.dumps(json.load(f), indent=2)
            logger.warning("%s already exists and will be overwritten. Original contents:\n%s", path, original)
        except ValueError:
            logger.warning("%s already exists and will be overwritten. Unable to load original contents:\n", path)
        os.remove(path)
