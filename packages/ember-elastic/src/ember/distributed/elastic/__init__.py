"""ember.distributed.elastic: torch.distributed.elastic on ember's stores and processes.

Subpackages (loaded on first access, as ``ember.distributed.elastic.agent``): ``agent`` (the elastic agents),
``multiprocessing`` (worker processes, their logs and error files), ``rendezvous`` (how agents meet: ``static`` and
the dynamic ``c10d`` rendezvous), ``timer`` (expiration timers and the watchdog), ``metrics``, ``events``, ``state``
(in-memory checkpoints held by the agent across worker restarts). The launcher is ``ember.distributed.run``
(console script ``emberrun``).
"""
from ember._extensions import lazy_submodule

from ._version import __version__  # noqa: F401


def __getattr__(name):
    return lazy_submodule(__name__, name)
