"""The "c10d" rendezvous backend: the rendezvous state in a key of a TCPStore (or a FileStore), written by
compare-and-set. One agent serves the TCPStore at the endpoint (the one on that host that binds the port first);
the others are its clients."""
import hashlib
import os
import tempfile
from collections import deque
from datetime import timedelta

from ember.distributed import FileStore, TCPStore
from ember.distributed.elastic.events import NodeState, construct_and_record_rdzv_event
from ember.distributed.elastic.utils.logging import get_logger

from .api import RendezvousConnectionError, RendezvousError, RendezvousStateError
from .dynamic_rendezvous import RendezvousBackend
from .utils import _matches_machine_hostname, parse_rendezvous_endpoint

__all__ = ["C10dRendezvousBackend", "create_backend"]

logger = get_logger(__name__)

DEFAULT_PORT = 29400
_KEPT_SIGNALS = 8  # change signals a node keeps in the store before deleting its oldest


class C10dRendezvousBackend(RendezvousBackend):
    """The state of rendezvous ``run_id`` in ``store``. Each write also sets a key that the state it replaced
    names, so that waiting nodes wake at once (``wait_for_change``)."""
    _NULL_SENTINEL = "Y2FuaW1hZGFt"  # "no state yet"

    def __init__(self, store, run_id):
        if not run_id:
            raise ValueError("The run id must be a non-empty string.")
        self._store, self._key = store, "torch.rendezvous." + run_id
        self._signals = deque()
        self._call_store("compare_set", self._key, "", self._NULL_SENTINEL)

    @property
    def name(self):
        return "c10d"

    def _call_store(self, op, *args):
        try:
            return getattr(self._store, op)(*args)
        except (ValueError, RuntimeError, TimeoutError) as e:
            raise RendezvousConnectionError("The connection to the C10d store has failed. See inner exception for "
                                            "details.") from e

    def _decode(self, value):
        if value == self._NULL_SENTINEL.encode():
            return None
        if not value.startswith(b"{"):
            raise RendezvousStateError("The state object is corrupt: not a rendezvous state.")
        return value, value

    def _signal_key(self, token):
        return f"{self._key}/changed/{hashlib.sha1(token).hexdigest()}"

    def get_state(self):
        return self._decode(self._call_store("get", self._key))

    def set_state(self, state, token=None):
        expected = token if token else self._NULL_SENTINEL.encode()
        stored = self._call_store("compare_set", self._key, expected, state)
        pair = self._decode(stored)
        if pair is None:
            return None
        written = pair[0] == state
        if written:
            key = self._signal_key(expected)
            self._call_store("set", key, b"")
            self._signals.append(key)
            if len(self._signals) > _KEPT_SIGNALS:
                self._call_store("delete_key", self._signals.popleft())
        return pair[0], pair[1], written

    def wait_for_change(self, token, timeout):
        try:
            self._store.wait([self._signal_key(token or self._NULL_SENTINEL.encode())],
                             timedelta(seconds=max(timeout, 0.0)))
        except RuntimeError:  # timed out (or the store went away: the next read says so)
            pass


def _create_tcp_store(params):
    host, port = parse_rendezvous_endpoint(params.endpoint, default_port=DEFAULT_PORT)
    configured = params.get_as_bool("is_host")
    is_host = configured if configured is not None else _matches_machine_hostname(host)
    read_timeout = params.get_as_int("read_timeout", 60)
    if read_timeout <= 0:
        raise ValueError("The read timeout must be a positive integer.")
    for is_server in dict.fromkeys([is_host, False]):
        try:
            store = TCPStore(host, port, is_master=is_server, multi_tenant=True,
                             timeout=timedelta(seconds=read_timeout))
        except (ValueError, RuntimeError, TimeoutError) as e:
            if not is_server or configured is not None:
                raise RendezvousConnectionError("The connection to the C10d store has failed. See inner exception "
                                                "for details.") from e
            continue
        if is_server:
            msg = f"Process {os.getpid()} hosts the TCP store for the C10d rendezvous backend."
            construct_and_record_rdzv_event(run_id=params.run_id, message=msg, node_state=NodeState.INIT)
            logger.info(msg)
        return store


def _create_file_store(params):
    path = params.endpoint
    if not path:
        try:
            fd, path = tempfile.mkstemp()
            os.close(fd)
        except OSError as e:
            raise RendezvousError("The file creation for C10d store has failed. See inner exception for "
                                  "details.") from e
    try:
        return FileStore(path)
    except (ValueError, RuntimeError) as e:
        raise RendezvousConnectionError("The connection to the C10d store has failed. See inner exception for "
                                        "details.") from e


def create_backend(params):
    """(backend, store) from RendezvousParameters: option ``store_type`` "tcp" (default; options ``is_host``,
    ``read_timeout``) or "file" (the endpoint is the file's path)."""
    store_type = params.get("store_type", "tcp").strip().lower()
    try:
        if store_type == "file":
            store = _create_file_store(params)
        elif store_type == "tcp":
            store = _create_tcp_store(params)
        else:
            raise ValueError("Invalid store type given. Currently only supports file and tcp.")
        return C10dRendezvousBackend(store, params.run_id), store
    except Exception as e:
        construct_and_record_rdzv_event(message=f"{type(e).__name__}: {e}", run_id=params.run_id,
                                        node_state=NodeState.FAILED)
        raise
