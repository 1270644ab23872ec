"""Rendezvous: from an init_method URL to a store shared by every process, this process's rank and the world size.

``env://`` reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (as torchrun sets them), ``tcp://host:port`` takes the
rank and world size from the arguments, and both put a TCPStore server in rank 0 (or, under the elastic agent with
TORCHELASTIC_USE_AGENT_STORE=True, use the agent's); ``file://path`` shares a FileStore. A handler is a generator
function of the URL (with ``rank`` and ``world_size`` in its query) yielding ``(store, rank, world_size)``.
"""
import numbers
import os
from datetime import timedelta
from urllib.parse import urlparse, urlunparse

from ._store import FileStore, TCPStore

__all__ = ["register_rendezvous_handler", "rendezvous"]

_DEFAULT_TIMEOUT = timedelta(minutes=30)
_handlers = {}


def register_rendezvous_handler(scheme, handler):
    """Make ``rendezvous`` send URLs ``scheme://...`` to ``handler(url, **kwargs)``, a generator of
    ``(store, rank, world_size)`` triplets."""
    if scheme in _handlers:
        raise RuntimeError(f"Rendezvous handler for {scheme}:// already registered")
    _handlers[scheme] = handler


def _query(url):
    return dict(pair.split("=", 1) if "=" in pair else (pair, "") for pair in url.query.split("&") if pair)


def rendezvous(url, rank=-1, world_size=-1, **kwargs):
    """The handler's generator for ``url``, with ``rank`` and ``world_size`` (unless -1) added to its query."""
    if not isinstance(url, (str, bytes)):
        raise RuntimeError(f"`url` must be a string. {type(url)}: {url}")
    if not isinstance(rank, numbers.Integral):
        raise RuntimeError(f"`rank` must be an integer. {rank}")
    if not isinstance(world_size, numbers.Integral):
        raise RuntimeError(f"`world_size` must be an integer. {world_size}")
    if isinstance(url, bytes):
        url = url.decode()
    parsed = urlparse(url)
    if rank != -1 or world_size != -1:
        query = _query(parsed)
        if "rank" in query or "world_size" in query:
            raise AssertionError(f"The url: {url} has node-specific arguments(rank, world_size) already.")
        if rank != -1:
            query["rank"] = str(rank)
        if world_size != -1:
            query["world_size"] = str(world_size)
        parsed = parsed._replace(query="&".join(f"{k}={v}" for k, v in query.items()))
        url = urlunparse(parsed)
    if parsed.scheme not in _handlers:
        raise RuntimeError(f"No rendezvous handler for {parsed.scheme}://")
    return _handlers[parsed.scheme](url, **kwargs)


def _error(scheme, message):
    return ValueError(f"Error initializing ember.distributed using {scheme}:// rendezvous: {message}")


def _rank_and_size(scheme, query):
    for name in ("rank", "world_size"):
        if name not in query:
            raise _error(scheme, f"{'rank' if name == 'rank' else 'world size'} parameter missing")
    return int(query["rank"]), int(query["world_size"])


def _c10d_store(host, port, rank, world_size, timeout, use_libuv):
    """The job's TCPStore: the elastic agent's when it asks its workers to use it, else served by rank 0 (shared
    with any other master store of that port in the process); every rank waits there until all have joined (so a
    rank quick to re-initialise on the same port never stays with the server of the previous group)."""
    if not 0 <= port < 2 ** 16:
        raise ValueError(f"port must have value from 0 to 65535 but was {port}.")
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return TCPStore(host, port, world_size, False, timeout)
    store = TCPStore(host, port, world_size, rank == 0, timeout, wait_for_workers=False, multi_tenant=True,
                     use_libuv=use_libuv)
    try:
        store._join(world_size)
    except BaseException:
        store._release()  # now (the traceback keeps the store alive): a new attempt may bind the port again
        raise
    return store


def _use_libuv(query):
    return query.get("use_libuv", os.environ.get("USE_LIBUV", "1")) == "1"


def _file_handler(url, **kwargs):
    parsed = urlparse(url)
    if not parsed.path:
        raise _error("file", "path missing")
    rank, world_size = _rank_and_size("file", _query(parsed))
    yield FileStore(parsed.path, world_size), rank, world_size
    raise RuntimeError("Unable to perform rerendezvous using file:// method")


def _tcp_handler(url, timeout=_DEFAULT_TIMEOUT, **kwargs):
    parsed = urlparse(url)
    if parsed.port is None:
        raise _error("tcp", "port number missing")
    query = _query(parsed)
    rank, world_size = _rank_and_size("tcp", query)
    yield _c10d_store(parsed.hostname, parsed.port, rank, world_size, timeout, _use_libuv(query)), rank, world_size
    raise RuntimeError("Unable to perform re-rendezvous using tcp:// method")


def _env_handler(url, timeout=_DEFAULT_TIMEOUT, **kwargs):
    query = _query(urlparse(url))

    def setting(name, variable):
        if name in query:
            return query[name]
        value = os.environ.get(variable)
        if not value:
            raise _error("env", f"environment variable {variable} expected, but not set")
        return value

    rank, world_size = int(setting("rank", "RANK")), int(setting("world_size", "WORLD_SIZE"))
    host, port = setting(None, "MASTER_ADDR"), int(setting(None, "MASTER_PORT"))
    yield _c10d_store(host, port, rank, world_size, timeout, _use_libuv(query)), rank, world_size
    raise RuntimeError("Unable to perform re-rendezvous using env:// method")


register_rendezvous_handler("tcp", _tcp_handler)
register_rendezvous_handler("env", _env_handler)
register_rendezvous_handler("file", _file_handler)
