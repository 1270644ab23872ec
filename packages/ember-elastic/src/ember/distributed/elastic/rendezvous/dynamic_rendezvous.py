"""The dynamic rendezvous: nodes join rounds through a shared state object kept by a ``RendezvousBackend``.

The state (JSON) holds the round number, whether the round is complete or the rendezvous closed, the round's
participants and their ranks, the nodes waiting for the next round (``wait_list``), the spare nodes beyond
``max_nodes`` (``redundancy_list``), each node's last heartbeat and the last-call deadline. A node changes it
only by compare-and-set: it reads the state, decides one step (join, wait, complete the round, ...), writes the
changed state if nobody wrote in between, else reads again.

A round completes when ``max_nodes`` joined, or when at least ``min_nodes`` did and the last call (``last_call``
timeout, counted from the moment ``min_nodes`` were there) passed. Nodes arriving later wait in the wait list;
``num_nodes_waiting()`` tells the agents, which restart their workers to let them in (scale-up). A node whose
heartbeats stop for ``keep_alive_interval * keep_alive_max_attempt`` seconds is removed (scale-down), and so is
one that leaves (an agent stopped by a signal). Unlike torchelastic, which looks again once a second, a waiting
node wakes as soon as the state changes (when the backend can signal it, as the c10d backend does), and each round
gets a fresh workers' store, so that restarted workers never see the previous attempt's keys.
"""
import abc
import json
import os
import socket
import threading
import time
import weakref
from dataclasses import dataclass, field
from datetime import timedelta

from ember.distributed import PrefixStore, TCPStore
from ember.distributed.elastic.events import NodeState, construct_and_record_rdzv_event
from ember.distributed.elastic.utils.logging import get_logger

from .api import (
    RendezvousClosedError,
    RendezvousError,
    RendezvousGracefulExitError,
    RendezvousHandler,
    RendezvousInfo,
    RendezvousStateError,
    RendezvousStoreInfo,
    RendezvousTimeoutError,
)

__all__ = ["RendezvousBackend", "RendezvousTimeout", "RendezvousSettings", "DynamicRendezvousHandler",
           "create_handler"]

logger = get_logger(__name__)

_ROLLBACK_SECONDS = 5  # after its join timeout a node still takes itself out of the round for this long
_POLL_SECONDS = 1.0  # a waiting node looks again at least this often (deadlines and heartbeats are clock-driven)


class RendezvousBackend(abc.ABC):
    """Keeps the rendezvous state (opaque bytes) with compare-and-set semantics."""

    @property
    @abc.abstractmethod
    def name(self):
        ...

    @abc.abstractmethod
    def get_state(self):
        """``(state, token)``, or None when there is no state yet."""

    @abc.abstractmethod
    def set_state(self, state, token=None):
        """Write ``state`` if the stored state still has ``token`` (None: if there is no state yet). Returns
        ``(stored state, its token, whether the write happened)``, or None when there is no state."""

    def wait_for_change(self, token, timeout):
        """(ember) Return once the state with ``token`` may have been replaced, or after ``timeout`` seconds.
        Backends that cannot tell just sleep (polling)."""
        time.sleep(max(0.0, min(timeout, _POLL_SECONDS)))


class RendezvousTimeout:
    """The rendezvous's timeouts: ``join`` (a whole next_rendezvous), ``last_call`` (how long a round that has
    its minimum waits for more nodes), ``close``, ``heartbeat`` (a keep-alive write)."""
    _DEFAULTS = {"join": timedelta(seconds=600), "last_call": timedelta(seconds=30),
                 "close": timedelta(seconds=30), "heartbeat": timedelta(seconds=5)}

    def __init__(self, join=None, last_call=None, close=None, heartbeat=None):
        for name, value in (("join", join), ("last_call", last_call), ("close", close), ("heartbeat", heartbeat)):
            value = self._DEFAULTS[name] if value is None else value
            if value <= timedelta(0):
                raise ValueError(f"The {name} timeout ({value}) must be positive.")
            setattr(self, "_" + name, value)

    @property
    def join(self):
        return self._join

    @property
    def last_call(self):
        return self._last_call

    @property
    def close(self):
        return self._close

    @property
    def heartbeat(self):
        return self._heartbeat


@dataclass(repr=False, eq=False, frozen=True)
class RendezvousSettings:
    run_id: str
    min_nodes: int
    max_nodes: int
    timeout: RendezvousTimeout
    keep_alive_interval: timedelta
    keep_alive_max_attempt: int


@dataclass(eq=True, order=True, frozen=True)
class _NodeDesc:
    """A node of the rendezvous (an agent): host address, pid, and a counter of handlers in that process. Ranks
    follow this order."""
    addr: str
    pid: int
    local_id: int

    def __repr__(self):
        return f"{self.addr}_{self.pid}_{self.local_id}"

    @staticmethod
    def parse(text):
        addr, pid, local_id = text.rsplit("_", 2)
        return _NodeDesc(addr, int(pid), int(local_id))


class _NodeDescGenerator:
    def __init__(self):
        self._lock, self._local_id = threading.Lock(), 0

    def generate(self, local_addr=None):
        with self._lock:
            local_id, self._local_id = self._local_id, self._local_id + 1
        return _NodeDesc(local_addr or socket.getfqdn(), os.getpid(), local_id)


@dataclass
class _RendezvousState:
    """What every node agrees on; ``version`` grows with each write (to wake waiters)."""
    version: int = 0
    round: int = 0
    complete: bool = False
    deadline: float | None = None  # wall-clock end of the last call
    closed: bool = False
    participants: dict = field(default_factory=dict)  # _NodeDesc -> rank
    wait_list: set = field(default_factory=set)
    redundancy_list: set = field(default_factory=set)
    last_heartbeats: dict = field(default_factory=dict)  # _NodeDesc -> wall-clock seconds

    def encode(self):
        return json.dumps({
            "version": self.version, "round": self.round, "complete": self.complete, "deadline": self.deadline,
            "closed": self.closed, "participants": {repr(n): r for n, r in self.participants.items()},
            "wait_list": sorted(map(repr, self.wait_list)),
            "redundancy_list": sorted(map(repr, self.redundancy_list)),
            "last_heartbeats": {repr(n): t for n, t in self.last_heartbeats.items()}}).encode()

    @staticmethod
    def decode(data):
        try:
            d = json.loads(data)
            parse = _NodeDesc.parse
            return _RendezvousState(
                d["version"], d["round"], d["complete"], d["deadline"], d["closed"],
                {parse(n): r for n, r in d["participants"].items()}, set(map(parse, d["wait_list"])),
                set(map(parse, d["redundancy_list"])), {parse(n): t for n, t in d["last_heartbeats"].items()})
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise RendezvousStateError("The rendezvous state is corrupt. See inner exception for details.") from e


def _participant_removed(state, settings):
    """After a participant left: an emptied complete round ends (the next one begins); an incomplete round below
    its minimum loses its last-call deadline."""
    if state.complete:
        if not state.participants:
            state.complete, state.round = False, state.round + 1
    elif len(state.participants) < settings.min_nodes:
        state.deadline = None


def _remove_dead_nodes(state, settings, now, me):
    """Drop the nodes (other than ``me``: a node running this is alive) whose last heartbeat is older than the
    keep-alive allowance; their names."""
    allowance = settings.keep_alive_interval.total_seconds() * settings.keep_alive_max_attempt
    dead = [n for n, t in state.last_heartbeats.items() if t < now - allowance and n != me]
    removed_participant = False
    for node in dead:
        del state.last_heartbeats[node]
        removed_participant |= state.participants.pop(node, None) is not None
        state.wait_list.discard(node)
        state.redundancy_list.discard(node)
    if removed_participant:
        _participant_removed(state, settings)
    return dead


# ------------------------------------------------------------------------------------------------ steps of a node

class _Step:
    """What a node does next; the executor applies it (a state change written by compare-and-set) or waits."""
    FINISH, WAIT, ERROR_CLOSED, ERROR_TIMEOUT = "finish", "wait", "closed", "timeout"


def _keep_alive(state, node, settings):
    state.last_heartbeats[node] = time.time()


def _add_to_participants(state, node, settings):
    state.wait_list.discard(node)
    state.participants[node] = 0
    _keep_alive(state, node, settings)
    if len(state.participants) == settings.min_nodes:
        state.deadline = time.time() + settings.timeout.last_call.total_seconds()
    if len(state.participants) == settings.max_nodes:
        _mark_complete(state, node, settings)


def _add_to_wait_list(state, node, settings):
    state.redundancy_list.discard(node)
    state.wait_list.add(node)
    _keep_alive(state, node, settings)


def _add_to_redundancy_list(state, node, settings):
    state.redundancy_list.add(node)
    _keep_alive(state, node, settings)


def _remove_from_participants(state, node, settings):
    del state.participants[node]
    state.last_heartbeats.pop(node, None)
    _participant_removed(state, settings)


def _remove_from_wait_list(state, node, settings):
    state.wait_list.discard(node)
    state.last_heartbeats.pop(node, None)


def _remove_from_redundancy_list(state, node, settings):
    state.redundancy_list.discard(node)
    state.last_heartbeats.pop(node, None)


def _leave(state, node, settings):
    if node in state.participants:
        _remove_from_participants(state, node, settings)
    _remove_from_wait_list(state, node, settings)
    _remove_from_redundancy_list(state, node, settings)


def _mark_complete(state, node, settings):
    state.complete, state.deadline = True, None
    for rank, n in enumerate(sorted(state.participants)):
        state.participants[n] = rank


def _mark_closed(state, node, settings):
    state.closed = True


def _exit_op(state, node, settings, deadline):
    """Leave the current round (before joining the next one)."""
    if node not in state.participants:
        return _Step.FINISH
    return _Step.ERROR_TIMEOUT if time.monotonic() > deadline else _remove_from_participants


def _join_op(state, node, settings, deadline):
    """Join the next round and wait until it is complete."""
    if state.closed:
        if node in state.redundancy_list:
            raise RendezvousGracefulExitError(
                f"The rendezvous '{settings.run_id}' is closed, terminating pending rendezvous.")
        return _Step.ERROR_CLOSED
    if node in state.redundancy_list:
        return _Step.WAIT if len(state.participants) == settings.max_nodes else _remove_from_redundancy_list
    participant = node in state.participants
    if state.complete and participant:
        return _Step.FINISH
    now = time.monotonic()
    if now > deadline:
        if now <= deadline + _ROLLBACK_SECONDS:
            if participant:
                return _remove_from_participants
            if node in state.wait_list:
                return _remove_from_wait_list
        return _Step.ERROR_TIMEOUT
    if state.complete:
        if len(state.participants) < settings.max_nodes:
            if node not in state.wait_list:
                return _add_to_wait_list
        elif node not in state.redundancy_list and node not in state.wait_list:
            return _add_to_redundancy_list
    elif participant:
        if settings.min_nodes <= len(state.participants) <= settings.max_nodes and state.deadline is not None \
                and state.deadline < time.time():
            return _mark_complete
    else:
        return _add_to_participants
    return _Step.WAIT


def _close_op(state, node, settings, deadline):
    if state.closed:
        return _Step.FINISH
    return _Step.ERROR_TIMEOUT if time.monotonic() > deadline else _mark_closed


def _keep_alive_op(since):
    """Write a heartbeat newer than ``since`` (if the node is still in the rendezvous)."""
    def op(state, node, settings, deadline):
        if state.last_heartbeats.get(node, since) >= since:
            return _Step.FINISH
        return _Step.ERROR_TIMEOUT if time.monotonic() > deadline else _keep_alive
    return op


def _leave_op(state, node, settings, deadline):
    present = node in state.participants or node in state.wait_list or node in state.redundancy_list
    if not present:
        return _Step.FINISH
    return _Step.ERROR_TIMEOUT if time.monotonic() > deadline else _leave


class _Executor:
    """Runs a node's steps against the backend: read, decide, compare-and-set, repeat."""

    def __init__(self, node, backend, settings):
        self._node, self._backend, self._settings = node, backend, settings
        self.state, self._token = _RendezvousState(), None

    def sync(self):
        """Read the state (dropping nodes whose heartbeats stopped, in this copy); the state read."""
        got = self._backend.get_state()
        if got is None:
            self.state, self._token = _RendezvousState(), None
        else:
            self.state, self._token = _RendezvousState.decode(got[0]), got[1]
        dead = _remove_dead_nodes(self.state, self._settings, time.time(), self._node)
        if dead:
            logger.debug("Detected dead nodes %s, removing them from the rendezvous '%s'", dead,
                         self._settings.run_id)
        return self.state

    def _write(self, change):
        state = self.state
        change(state, self._node, self._settings)
        state.version += 1
        reply = self._backend.set_state(state.encode(), self._token)
        if reply is None:
            return False
        stored, self._token, written = reply
        self.state = _RendezvousState.decode(stored)
        return written

    def run(self, op, deadline, update_deadline=None):
        while True:
            state = self.sync()
            step = op(state, self._node, self._settings, deadline)
            if step == _Step.FINISH:
                return state
            if step == _Step.ERROR_CLOSED:
                raise RendezvousClosedError
            if step == _Step.ERROR_TIMEOUT:
                raise RendezvousTimeoutError
            if step == _Step.WAIT:
                self._backend.wait_for_change(self._token, self._wait_seconds(state, deadline))
                continue
            if self._write(step) and step is _remove_from_redundancy_list and update_deadline is not None:
                deadline = update_deadline(self._settings.timeout.join)

    def _wait_seconds(self, state, deadline):
        """Until something clock-driven may happen: the last call's end, our join deadline, or the next poll."""
        seconds = min(_POLL_SECONDS, max(deadline - time.monotonic(), 0) + 0.01)
        if state.deadline is not None:
            seconds = min(seconds, max(state.deadline - time.time(), 0) + 0.01)
        return seconds


class _Heartbeat:
    """A daemon thread writing this node's heartbeat every keep-alive interval while the handler lives."""

    def __init__(self, handler):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(weakref.ref(handler), self._stop,
                                                                handler._settings.keep_alive_interval),
                                        name=f"RendezvousKeepAliveTimer_{handler._this_node.local_id}", daemon=True)
        self._thread.start()

    @staticmethod
    def _run(ref, stop, interval):
        while not stop.wait(interval.total_seconds()):
            handler = ref()
            if handler is None:
                return
            handler._keep_alive()
            del handler

    def cancel(self):
        self._stop.set()


class DynamicRendezvousHandler(RendezvousHandler):
    """The dynamic rendezvous of one node (see the module's description). Build it with ``create_handler`` or
    ``from_backend``."""
    _node_desc_generator = _NodeDescGenerator()

    @classmethod
    def from_backend(cls, run_id, store, backend, min_nodes, max_nodes, local_addr=None, timeout=None,
                     keep_alive_interval=5, keep_alive_max_attempt=3):
        node = cls._node_desc_generator.generate(local_addr)
        settings = RendezvousSettings(run_id, min_nodes, max_nodes, timeout or RendezvousTimeout(),
                                      timedelta(seconds=keep_alive_interval), keep_alive_max_attempt)
        return cls(node, settings, backend.name, store, backend)

    def __init__(self, node, settings, backend_name, store, backend):
        if not settings.run_id:
            raise ValueError("The run id must be a non-empty string.")
        if settings.min_nodes < 1:
            raise ValueError(f"The minimum number of nodes ({settings.min_nodes}) must be greater than zero.")
        if settings.max_nodes < settings.min_nodes:
            raise ValueError(f"The maximum number of nodes ({settings.max_nodes}) must be greater than or equal to "
                             f"the minimum number of nodes ({settings.min_nodes}).")
        self._this_node, self._settings, self._backend_name = node, settings, backend_name
        self._store, self._backend = store, backend
        self._heartbeat = None
        self._round_participants = ()
        self._workers_store = None  # the workers' store server, when this node is rank 0 of its round
        self._bootstrap_store_info = None

    def _record(self, message, node_state=NodeState.RUNNING, rank=None):
        construct_and_record_rdzv_event(run_id=self._settings.run_id, message=message, node_state=node_state,
                                        hostname=self._this_node.addr, pid=self._this_node.pid,
                                        local_id=self._this_node.local_id, rank=rank)

    @property
    def settings(self):
        return self._settings

    def get_backend(self):
        return self._backend_name

    @property
    def use_agent_store(self):
        return os.getenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "0") != "1"

    def _deadline(self, timeout):
        return time.monotonic() + timeout.total_seconds()

    def _executor(self):
        """Each sequence of steps reads and writes its own copy of the state: the heartbeat thread and the agent's
        thread may run steps at once (compare-and-set keeps them consistent)."""
        return _Executor(self._this_node, self._backend, self._settings)

    def _run(self, op, timeout, update_deadline=None):
        return self._executor().run(op, self._deadline(timeout), update_deadline)

    def next_rendezvous(self):
        msg = f"The node '{self._this_node}' attempts to join the next round of the rendezvous " \
              f"'{self._settings.run_id}'."
        self._record(msg)
        logger.info(msg)
        try:
            deadline = self._deadline(self._settings.timeout.join)
            if self._heartbeat is None:  # (also while waiting in the wait list: a waiting node is alive)
                self._heartbeat = _Heartbeat(self)
            executor = self._executor()
            executor.run(_exit_op, deadline)
            state = executor.run(_join_op, deadline, self._deadline)
            rank, world_size = state.participants[self._this_node], len(state.participants)
            self._round_participants = tuple(state.participants)
            store = PrefixStore(f"torch.rendezvous.{self._settings.run_id}.{state.round}", self._store)
            info = RendezvousInfo(store, rank, world_size, self._workers_store_info(rank, store))
        except Exception as e:
            self._record(f"{type(e).__name__}: {e}", NodeState.FAILED)
            raise
        msg = f"The node '{self._this_node}' has joined round {state.round} of the rendezvous " \
              f"'{self._settings.run_id}' as rank {rank} in a world of size {world_size}."
        self._record(msg, rank=rank)
        logger.info(msg)
        return info

    def _workers_store_info(self, rank, store):
        """Where this round's workers meet. Rank 0 serves a new store each round (the previous round's goes
        away with its workers), unless TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 asks the workers to make their own."""
        if self._workers_store is not None:
            self._workers_store._release()
            self._workers_store = None
        if not self.use_agent_store:
            return RendezvousStoreInfo.build(rank, store, local_addr=self._this_node.addr)
        port = 0
        if rank == 0:
            self._workers_store = TCPStore(self._this_node.addr, 0, is_master=True, wait_for_workers=False)
            port = self._workers_store.port
        return RendezvousStoreInfo.build(rank, store, local_addr=self._this_node.addr, server_port=port)

    def is_closed(self):
        try:
            return self._executor().sync().closed
        except Exception as e:
            self._record(f"{type(e).__name__}: {e}", NodeState.FAILED)
            raise

    def set_closed(self):
        try:
            self._close()
        except Exception as e:
            self._record(f"{type(e).__name__}: {e}", NodeState.FAILED)
            raise

    def num_nodes_waiting(self):
        try:
            return len(self._executor().sync().wait_list)
        except Exception as e:
            self._record(f"{type(e).__name__}: {e}", NodeState.FAILED)
            raise

    def get_run_id(self):
        return self._settings.run_id

    def shutdown(self):
        self._stop_heartbeats()
        try:
            self._close()
            return True
        except RendezvousError as e:
            msg = f"The node '{self._this_node}' has failed to shutdown the rendezvous '{self._settings.run_id}' " \
                  f"due to an error of type {type(e).__name__}."
            self._record(msg, NodeState.FAILED)
            logger.warning(msg)
            return False
        finally:
            self._release_workers_store()

    def _close(self):
        self._run(_close_op, self._settings.timeout.close)
        msg = f"The node '{self._this_node}' has closed the rendezvous '{self._settings.run_id}'."
        self._record(msg, NodeState.SUCCEEDED)
        logger.info(msg)

    def _leave(self):
        """(ember) Take this node out of the rendezvous without closing it (its agent stops): the others go on
        without waiting for its heartbeats to stop."""
        self._stop_heartbeats()
        try:
            self._run(_leave_op, self._settings.timeout.close)
        except RendezvousError as e:
            logger.warning("The node '%s' could not leave the rendezvous '%s': %s", self._this_node,
                           self._settings.run_id, type(e).__name__)
        finally:
            self._release_workers_store()

    def _lost_participants(self):
        state = self._executor().sync()
        return [repr(n) for n in self._round_participants if n not in state.participants]

    def _keep_alive(self):
        try:
            self._run(_keep_alive_op(time.time()), self._settings.timeout.heartbeat)
        except RendezvousError as e:
            msg = f"The node '{self._this_node}' has failed to send a keep-alive heartbeat to the rendezvous " \
                  f"'{self._settings.run_id}' due to an error of type {type(e).__name__}."
            self._record(msg, NodeState.FAILED)
            logger.warning(msg)

    def _stop_heartbeats(self):
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None

    def _release_workers_store(self):
        if self._workers_store is not None:
            self._workers_store._release()
            self._workers_store = None


def _seconds(params, key, default=None):
    """A duration option in seconds (ember also takes fractions: keep_alive_interval=0.5)."""
    value = params.get(key, default)
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"The rendezvous configuration option '{key}' does not represent a valid integer "
                         "value.") from e


def create_handler(store, backend, params):
    """A DynamicRendezvousHandler from RendezvousParameters; options: join_timeout, last_call_timeout,
    close_timeout, heartbeat_timeout, keep_alive_interval, keep_alive_max_attempt (seconds, counts)."""
    try:
        timeouts = [_seconds(params, f"{name}_timeout") for name in ("join", "last_call", "close", "heartbeat")]
        timeout = RendezvousTimeout(*(None if t is None else timedelta(seconds=t) for t in timeouts))
        interval = _seconds(params, "keep_alive_interval", 5)
        if interval is None:
            raise TypeError("You passed 'keep_alive_interval=None' as a rendezvous configuration option")
        attempts = params.get_as_int("keep_alive_max_attempt", 3)
        if attempts is None:
            raise TypeError("You passed 'keep_alive_max_attempt=None' as a rendezvous configuration option")
        return DynamicRendezvousHandler.from_backend(params.run_id, store, backend, params.min_nodes,
                                                     params.max_nodes, params.local_addr, timeout,
                                                     keep_alive_interval=interval, keep_alive_max_attempt=attempts)
    except Exception as e:
        construct_and_record_rdzv_event(message=f"{type(e).__name__}: {e}", run_id=params.run_id,
                                        node_state=NodeState.FAILED)
        raise
