"""Logging handlers events go to, by destination name: "null" (dropped), "console" (stderr), "dynamic_rendezvous"
(dropped unless replaced: assign a handler to ``_log_handlers["dynamic_rendezvous"]`` to see rendezvous events)."""
import logging

_log_handlers = {
    "console": logging.StreamHandler(),
    "dynamic_rendezvous": logging.NullHandler(),
    "null": logging.NullHandler(),
}


def get_logging_handler(destination="null"):
    """The handler of ``destination`` (KeyError for an unknown name)."""
    return _log_handlers[destination]
