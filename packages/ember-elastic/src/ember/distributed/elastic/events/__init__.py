"""Events of elastic jobs, published through Python's logging: ``record(event, destination)`` logs the event's JSON
on the destination's handler ("null" by default: dropped; "console": stderr).

    from ember.distributed.elastic import events
    events.record(events.Event("my_event", events.EventSource.WORKER, metadata={"step": 3}), "console")
"""
import inspect
import logging
import os
import socket
import traceback
from typing import Optional  # noqa: F401  (a public name of torch's module)

from .api import Event, EventMetadataValue, EventSource, NodeState, RdzvEvent
from .handlers import get_logging_handler

__all__ = ["Event", "EventMetadataValue", "EventSource", "NodeState", "RdzvEvent", "construct_and_record_rdzv_event",
           "get_logging_handler", "record", "record_rdzv_event"]

_loggers = {}


def _logger(destination):
    """One logger per destination, not propagating to the root logger (events are not log lines)."""
    logger = _loggers.get(destination)
    if logger is None:
        logger = logging.getLogger(f"torchelastic-events-{destination}")
        logger.setLevel(os.environ.get("LOGLEVEL", "INFO"))
        logger.propagate = False
        logger.addHandler(get_logging_handler(destination))
        _loggers[destination] = logger
    return logger


def record(event, destination="null"):
    """Publish ``event`` to ``destination``."""
    _logger(destination).info(event.serialize())


def record_rdzv_event(event):
    """Publish a rendezvous event (destination "dynamic_rendezvous")."""
    _logger("dynamic_rendezvous").info(event.serialize())


def construct_and_record_rdzv_event(run_id, message, node_state, name="", hostname="", pid=None, master_endpoint="",
                                    local_id=None, rank=None):
    """Build a rendezvous event named after the calling file and function and record it; nothing is built while the
    "dynamic_rendezvous" destination drops events."""
    if isinstance(get_logging_handler("dynamic_rendezvous"), logging.NullHandler):
        return
    caller = inspect.currentframe().f_back
    filename = os.path.basename(caller.f_code.co_filename) if caller else "no_file"
    name = name or (caller.f_code.co_name if caller else "")
    del caller
    record_rdzv_event(RdzvEvent(
        name=f"{filename}:{name}", run_id=run_id, message=message, hostname=hostname or socket.getfqdn(),
        pid=pid or os.getpid(), node_state=node_state, master_endpoint=master_endpoint, rank=rank,
        local_id=local_id, error_trace=traceback.format_exc() if node_state == NodeState.FAILED else ""))
