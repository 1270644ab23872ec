"""The rendezvous interface: how the agents of a job find each other, agree on their ranks and share a store.

A ``RendezvousHandler`` is made from ``RendezvousParameters`` by the creator registered for its backend name in
``rendezvous_handler_registry``. Each call of ``next_rendezvous()`` joins the next round and returns a
``RendezvousInfo``: the round's store, this node's rank, the number of nodes, and where the workers' store is.
"""
import abc
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["RendezvousClosedError", "RendezvousConnectionError", "RendezvousError", "RendezvousGracefulExitError",
           "RendezvousHandler", "RendezvousHandlerCreator", "RendezvousHandlerRegistry", "RendezvousInfo",
           "RendezvousParameters", "RendezvousStateError", "RendezvousStoreInfo", "RendezvousTimeoutError",
           "rendezvous_handler_registry"]


class RendezvousError(Exception):
    """A rendezvous failed."""


class RendezvousClosedError(RendezvousError):
    """The rendezvous is closed: the job is over (no node may join it any more)."""


class RendezvousTimeoutError(RendezvousError):
    """The rendezvous did not complete in time."""


class RendezvousConnectionError(RendezvousError):
    """The rendezvous backend (its store) could not be reached."""


class RendezvousStateError(RendezvousError):
    """The rendezvous state is corrupt."""


class RendezvousGracefulExitError(RendezvousError):
    """This node is not needed (the rendezvous closed while it waited as a spare): it may exit normally."""


@dataclass
class RendezvousStoreInfo:
    """Where the workers' store is (MASTER_ADDR, MASTER_PORT)."""
    MASTER_ADDR_KEY: ClassVar[str] = "MASTER_ADDR"
    MASTER_PORT_KEY: ClassVar[str] = "MASTER_PORT"
    master_addr: str
    master_port: int

    @staticmethod
    def build(rank, store, local_addr, server_port=None):
        """Rank 0 publishes its address (``local_addr`` or its FQDN) and ``server_port`` (or a free port) in
        ``store``; every rank reads them back."""
        if rank == 0:
            from ember.distributed.elastic.utils.distributed import get_free_port
            store.set(RendezvousStoreInfo.MASTER_ADDR_KEY, (local_addr or socket.getfqdn()).encode())
            store.set(RendezvousStoreInfo.MASTER_PORT_KEY, str(server_port or get_free_port()).encode())
        addr, port = store.multi_get([RendezvousStoreInfo.MASTER_ADDR_KEY, RendezvousStoreInfo.MASTER_PORT_KEY])
        return RendezvousStoreInfo(addr.decode(), int(port.decode()))


class RendezvousInfo:
    """A completed round: its ``store``, this node's ``rank``, the ``world_size`` (nodes) and the workers' store
    (``bootstrap_store_info``)."""

    def __init__(self, store, rank, world_size, bootstrap_store_info):
        self._store, self._rank, self._world_size = store, rank, world_size
        self._bootstrap_store_info = bootstrap_store_info

    @property
    def store(self):
        return self._store

    @property
    def rank(self):
        return self._rank

    @property
    def world_size(self):
        return self._world_size

    @property
    def bootstrap_store_info(self):
        return self._bootstrap_store_info


class RendezvousHandler(abc.ABC):
    """The rendezvous of one job as one node sees it."""

    @abc.abstractmethod
    def get_backend(self):
        """The backend's name ("c10d", "static", ...)."""

    @property
    def use_agent_store(self):
        """Whether the workers use the store the agent gives them (TORCHELASTIC_USE_AGENT_STORE) rather than
        making their own."""
        return False

    @abc.abstractmethod
    def next_rendezvous(self):
        """Join the next round and wait until it completes; a ``RendezvousInfo``. Raises RendezvousClosedError
        when the rendezvous was closed, RendezvousTimeoutError when it does not complete in time,
        RendezvousGracefulExitError when this node is not needed."""

    @abc.abstractmethod
    def is_closed(self):
        ...

    @abc.abstractmethod
    def set_closed(self):
        """Close the rendezvous: the job ends, no more rounds."""

    @abc.abstractmethod
    def num_nodes_waiting(self):
        """Nodes waiting to join the next round (the agents restart their workers to take them in)."""

    @abc.abstractmethod
    def get_run_id(self):
        ...

    @abc.abstractmethod
    def shutdown(self):
        """Close the rendezvous and release this node's resources; False if that failed."""

    def _leave(self):  # noqa: B027  (optional: a no-op unless a handler has members to leave)
        """(ember) This node stops for good without ending the job (its agent got a termination signal): take it
        out of the rendezvous so that the others need not wait for it. Nothing to do for handlers without
        membership."""

    def _lost_participants(self):
        """(ember) The participants of this node's round that left or stopped sending heartbeats: the agent restarts
        its workers on the survivors, and its exit barrier stops waiting. Handlers without liveness information
        return []."""
        return []


class RendezvousParameters:
    """What a rendezvous handler is made from: the ``backend`` name, its ``endpoint``, the job's ``run_id``, the
    node counts, this node's ``local_addr`` and backend-specific options (``**kwargs``, read with ``get``,
    ``get_as_bool``, ``get_as_int``)."""

    def __init__(self, backend, endpoint, run_id, min_nodes, max_nodes, local_addr=None, **kwargs):
        if not backend:
            raise ValueError("The rendezvous backend name must be a non-empty string.")
        if min_nodes < 1:
            raise ValueError(f"The minimum number of rendezvous nodes ({min_nodes}) must be greater than zero.")
        if max_nodes < min_nodes:
            raise ValueError(f"The maximum number of rendezvous nodes ({max_nodes}) must be greater than or equal "
                             f"to the minimum number of rendezvous nodes ({min_nodes}).")
        self.backend, self.endpoint, self.run_id = backend, endpoint, run_id
        self.min_nodes, self.max_nodes, self.local_addr = min_nodes, max_nodes, local_addr
        self.config = kwargs

    def get(self, key, default=None):
        return self.config.get(key, default)

    def get_as_bool(self, key, default=None):
        value = self.get(key, default)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str):
            if value.lower() in ("1", "true", "t", "yes", "y"):
                return True
            if value.lower() in ("0", "false", "f", "no", "n"):
                return False
        raise ValueError(f"The rendezvous configuration option '{key}' does not represent a valid boolean value.")

    def get_as_int(self, key, default=None):
        value = self.get(key, default)
        if value is None:
            return value
        try:
            return int(value)
        except ValueError as e:
            raise ValueError(f"The rendezvous configuration option '{key}' does not represent a valid integer "
                             "value.") from e


RendezvousHandlerCreator = Callable[[RendezvousParameters], RendezvousHandler]


class RendezvousHandlerRegistry:
    """Backend name -> function making a handler from RendezvousParameters."""

    def __init__(self):
        self._registry: dict[str, Any] = {}

    def register(self, backend, creator):
        if not backend:
            raise ValueError("The rendezvous backend name must be a non-empty string.")
        current = self._registry.get(backend)
        if current is not None and current != creator:
            raise ValueError(f"The rendezvous backend '{backend}' cannot be registered with '{creator}' as it is "
                             f"already registered with '{current}'.")
        self._registry[backend] = creator

    def create_handler(self, params):
        try:
            creator = self._registry[params.backend]
        except KeyError:
            raise ValueError(f"The rendezvous backend '{params.backend}' is not registered. Did you forget to call "
                             "`register`?") from None
        handler = creator(params)
        if handler.get_backend() != params.backend:
            raise RuntimeError(f"The rendezvous backend '{handler.get_backend()}' does not match the requested "
                               f"backend '{params.backend}'.")
        return handler


rendezvous_handler_registry = RendezvousHandlerRegistry()
