"""``ember.multiprocessing``: the standard ``multiprocessing`` API plus PyTorch's ``spawn``.

Everything of :mod:`multiprocessing` is re-exported (``Process``, ``Queue``, ``SimpleQueue``, ``Pool``,
``get_context``, ``set_start_method``, ...). Tensors put in its queues or passed to its processes arrive
with their values; tensors moved to shared memory with ``Tensor.share_memory_()`` arrive as views of the
same memory (with every start method), so that in-place writes in one process are seen by the others. See
``ember._shared`` for how, and for where this differs from PyTorch (unshared tensors are sent by copy).

Sharing strategy: ember shares memory through file descriptors only (``"file_descriptor"``).
"""
import multiprocessing
from multiprocessing import *  # noqa: F403

from .._shared import register_reducer
from .spawn import (
    ProcessContext,
    ProcessException,
    ProcessExitedException,
    ProcessRaisedException,
    spawn,
    start_processes,
)

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies", "spawn",
           "start_processes", "ProcessContext", "ProcessException", "ProcessExitedException",
           "ProcessRaisedException", *multiprocessing.__all__]

_STRATEGIES = {"file_descriptor"}


def get_all_sharing_strategies():
    return set(_STRATEGIES)


def get_sharing_strategy():
    return "file_descriptor"


def set_sharing_strategy(new_strategy):
    """Only ``"file_descriptor"`` is available (PyTorch's ``"file_system"`` is not)."""
    if new_strategy not in _STRATEGIES:
        raise AssertionError(f"invalid sharing strategy {new_strategy!r}, expected one of {_STRATEGIES}")


register_reducer()
