"""Loggers of the elastic package, and the launcher's log format.

Library code only gets loggers (level from LOGLEVEL, WARNING by default, as torchelastic's). The launcher installs
one stderr handler on ``ember.distributed`` with the format torchrun prints, ``W1127 09:57:28.027000 28123
ember/distributed/run.py:874] message`` (level letter, date and time, pid, file and line)."""
import logging
import os
import time

__all__ = ["get_logger", "configure_launcher_logging"]


def get_logger(name):
    logger = logging.getLogger(name)
    logger.setLevel(os.environ.get("LOGLEVEL", "WARNING"))
    return logger


class _LauncherFormatter(logging.Formatter):
    def format(self, record):
        stamp = time.strftime("%m%d %H:%M:%S", time.localtime(record.created))
        path = record.pathname.replace(os.sep, "/")
        cut = path.rfind("/ember/")
        where = f"{path[cut + 1:] if cut >= 0 else os.path.basename(path)}:{record.lineno}"
        head = f"{record.levelname[0]}{stamp}.{int(record.msecs * 1000):06d} {record.process} {where}] "
        text = super().format(record)
        return "\n".join(head + line for line in text.split("\n"))


def configure_launcher_logging():
    """Give ``ember.distributed`` loggers the launcher's stderr format (once per process)."""
    logger = logging.getLogger("ember.distributed")
    if not any(getattr(h, "_ember_launcher", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(_LauncherFormatter())
        handler._ember_launcher = True
        logger.addHandler(handler)
        logger.propagate = False
