"""Rendezvous: how the agents of an elastic job find each other.

Backends: "static" (fixed nodes and ranks, the launcher's default with --master-addr/--master-port) and "c10d"
(dynamic: ``min_nodes``..``max_nodes`` nodes on a TCPStore, with heartbeats, scale-up and scale-down; options given
with ``--rdzv-conf``: join_timeout, last_call_timeout, close_timeout, heartbeat_timeout, keep_alive_interval,
keep_alive_max_attempt, is_host, read_timeout, store_type). Write your own by subclassing ``RendezvousHandler``
and registering a creator with ``rendezvous_handler_registry.register(name, creator)``.
"""
from .api import (
    RendezvousClosedError,
    RendezvousConnectionError,
    RendezvousError,
    RendezvousGracefulExitError,
    RendezvousHandler,
    RendezvousHandlerCreator,
    RendezvousHandlerRegistry,
    RendezvousInfo,
    RendezvousParameters,
    RendezvousStateError,
    RendezvousStoreInfo,
    RendezvousTimeoutError,
    rendezvous_handler_registry,
)
from .registry import _register_default_handlers, _register_out_of_tree_handlers

_register_default_handlers()
_register_out_of_tree_handlers()

__all__ = ["RendezvousClosedError", "RendezvousConnectionError", "RendezvousError", "RendezvousGracefulExitError",
           "RendezvousHandler", "RendezvousHandlerCreator", "RendezvousHandlerRegistry", "RendezvousInfo",
           "RendezvousParameters", "RendezvousStateError", "RendezvousStoreInfo", "RendezvousTimeoutError",
           "rendezvous_handler_registry"]
