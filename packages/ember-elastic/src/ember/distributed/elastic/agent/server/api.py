"""The elastic agent: the process that runs a node's workers, keeps them healthy and restarts them together.

``SimpleElasticAgent`` runs one worker group through separate steps that subclasses fill in:

* ``_rendezvous``: meet the other agents (the spec's rendezvous handler), get this node's rank, assign the
  workers' global and role ranks;
* ``_start_workers`` / ``_stop_workers``: start or stop the group's processes;
* ``_wait_workers`` then ``_monitor_workers``: wait (at most the monitor interval) and report the group's state;
* ``_shutdown``: release everything.

and two policies, each replaceable alone: ``_should_restart(run_result)`` (failures: the restart budget) and
``_membership_changed(worker_group)`` (nodes waiting to join, or participants lost). ``run()`` only applies their
decisions: succeeded -> exit barrier and return; failed -> restart or give up; healthy but the membership changed
-> restart.
"""
import abc
import json
import os
import signal
import socket
import time
import traceback
import warnings
from collections import defaultdict
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ember.distributed.elastic.events import Event, EventSource, record
from ember.distributed.elastic.metrics import prof, put_metric
from ember.distributed.elastic.multiprocessing import SignalException
from ember.distributed.elastic.rendezvous import RendezvousError, RendezvousGracefulExitError, RendezvousHandler
from ember.distributed.elastic.utils import store as store_util
from ember.distributed.elastic.utils.logging import get_logger

__all__ = ["WorkerSpec", "Worker", "WorkerState", "WorkerGroup", "RunResult", "ElasticAgent", "SimpleElasticAgent"]

_TERMINAL_STATE_SYNC_ID = "torchelastic/agent/terminal_state"
DEFAULT_ROLE = "default"

logger = get_logger(__name__)


@dataclass
class WorkerSpec:
    """The blueprint of one role's workers, the same on every node: how many per node (``local_world_size``),
    what they run (``entrypoint``: a function or a command, with ``args``), how agents meet (``rdzv_handler``),
    the restart budget (``max_restarts``), how often they are checked (``monitor_interval``, seconds), and a
    fixed ``master_addr``/``master_port`` for the workers' store (default: chosen by the rendezvous)."""
    role: str
    local_world_size: int
    rdzv_handler: RendezvousHandler
    fn: Callable | None = None
    entrypoint: Callable | str | None = None
    args: tuple = ()
    max_restarts: int = 3
    monitor_interval: float = 0.1
    master_port: int | None = None
    master_addr: str | None = None
    local_addr: str | None = None
    event_log_handler: str = "null"
    numa_options: Any = None
    duplicate_stdout_filters: list | None = None
    duplicate_stderr_filters: list | None = None
    virtual_local_rank: bool = False

    def __post_init__(self):
        if self.local_world_size <= 0:
            raise AssertionError(f"local_world_size must be positive, got {self.local_world_size}")
        if self.monitor_interval <= 0:
            raise AssertionError(f"monitor_interval must be positive, got {self.monitor_interval}")
        if self.fn:
            warnings.warn("WorkerSpec.fn will be deprecated, please use WorkerSpec.entrypoint instead",
                          DeprecationWarning, stacklevel=2)
            self.entrypoint = self.fn
        if not self.entrypoint:
            raise AssertionError("WorkerSpec needs an entrypoint")

    def get_entrypoint_name(self):
        """The command's file name, or the function's qualified name."""
        if isinstance(self.entrypoint, str):
            return os.path.basename(self.entrypoint)
        return self.entrypoint.__qualname__


class Worker:
    """One worker of a WorkerSpec: its ranks and world sizes; ``id`` is what the agent knows it by (a pid for the
    local agent)."""
    __slots__ = ["id", "local_rank", "global_rank", "role_rank", "world_size", "role_world_size"]

    def __init__(self, local_rank, global_rank=-1, role_rank=-1, world_size=-1, role_world_size=-1):
        self.id = None
        self.local_rank, self.global_rank, self.role_rank = local_rank, global_rank, role_rank
        self.world_size, self.role_world_size = world_size, role_world_size

    def __str__(self):
        return (f"local_rank={self.local_rank},global_rank={self.global_rank},role_rank={self.role_rank},"
                f"world_size={self.world_size},role_world_size={self.role_world_size}")

    __repr__ = __str__


class WorkerState(str, Enum):  # noqa: UP042  (torch's str() and format())
    """The state of a worker group (its workers change state together): INIT, HEALTHY, UNHEALTHY (running),
    STOPPED (by the agent, to be restarted), SUCCEEDED, FAILED, UNKNOWN (lost track: unrecoverable)."""
    UNKNOWN = "UNKNOWN"
    INIT = "INIT"
    HEALTHY = "HEALTHY"
    UNHEALTHY = "UNHEALTHY"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @staticmethod
    def is_running(state):
        return state in (WorkerState.HEALTHY, WorkerState.UNHEALTHY)


class WorkerGroup:
    """The workers of one spec on this node, with the round's store, node rank and size, the workers' store
    address, and the group's state."""
    __slots__ = ["spec", "workers", "store", "group_rank", "group_world_size", "state", "master_addr",
                 "master_port"]

    def __init__(self, spec):
        self.spec = spec
        self.workers = [Worker(local_rank=i) for i in range(spec.local_world_size)]
        self.store = self.group_rank = self.group_world_size = None
        self.master_addr = self.master_port = None
        self.state = WorkerState.INIT


@dataclass
class RunResult:
    """The end of a run: ``state``, and by global rank the workers' ``return_values`` (all succeeded) or
    ``failures`` (ProcessFailure). Workers the agent stopped itself appear in neither."""
    state: WorkerState
    return_values: dict = field(default_factory=dict)
    failures: dict = field(default_factory=dict)

    def is_failed(self):
        return self.state == WorkerState.FAILED


def _lost(handler):
    """The nodes of the round that are gone, for the exit barrier (the rendezvous itself gone counts)."""
    try:
        return handler._lost_participants()
    except RendezvousError as e:
        return [f"<the rendezvous: {type(e).__name__}>"]


def _get_fq_hostname():
    return socket.getfqdn(socket.gethostname())


class ElasticAgent(abc.ABC):
    """An agent managing worker processes (see LocalElasticAgent)."""

    @abc.abstractmethod
    def run(self, role=DEFAULT_ROLE):
        """Run the workers until they succeed or the restarts are used up; a RunResult."""

    @abc.abstractmethod
    def get_worker_group(self, role=DEFAULT_ROLE):
        """The WorkerGroup of ``role``."""


def _assigned_ranks(infos):
    """Per node (sorted by node rank): [base global rank, global size, base role rank, role size], torchelastic's
    assignment: global ranks follow node ranks, role ranks follow node ranks among the nodes of the role."""
    role_sizes, total = defaultdict(int), 0
    for info in infos:
        role_sizes[info["role"]] += info["local_world_size"]
        total += info["local_world_size"]
    base, role_bases, out = 0, defaultdict(int), []
    for info in infos:
        out.append([base, total, role_bases[info["role"]], role_sizes[info["role"]]])
        base += info["local_world_size"]
        role_bases[info["role"]] += info["local_world_size"]
    return out


class SimpleElasticAgent(ElasticAgent):
    """An agent of one WorkerSpec, leaving how workers start, stop and are watched to its subclass."""

    def __init__(self, spec, exit_barrier_timeout=300, shutdown_timeout=30):
        self._worker_group = WorkerGroup(spec)
        self._remaining_restarts = spec.max_restarts
        self._store = None
        self._exit_barrier_timeout = exit_barrier_timeout
        self._shutdown_timeout = shutdown_timeout
        self._total_execution_time = 0
        self._in_exit_barrier = False

    def get_worker_group(self, role=DEFAULT_ROLE):
        return self._worker_group

    # ------------------------------------------------------------------------------------- steps (subclasses)

    @abc.abstractmethod
    def _start_workers(self, worker_group):
        """Start ``local_world_size`` workers; {local rank: worker id}."""

    @abc.abstractmethod
    def _stop_workers(self, worker_group):
        """Stop every worker of the group, whatever its state (absent, stuck, ...)."""

    @abc.abstractmethod
    def _monitor_workers(self, worker_group):
        """The group's state now, as a RunResult."""

    @abc.abstractmethod
    def _shutdown(self, death_sig=signal.SIGTERM, timeout=30):
        """Release everything the agent holds, stopping workers with ``death_sig``."""

    def _wait_workers(self, worker_group, timeout):
        """Wait up to ``timeout`` seconds before the next look at the workers; an agent that can tell when a
        worker ended returns then (the local agent does)."""
        time.sleep(timeout)

    # -------------------------------------------------------------------------------------------------- policies

    def _restart_count(self):
        """How many restarts the failures used so far (TORCHELASTIC_RESTART_COUNT)."""
        return self._worker_group.spec.max_restarts - self._remaining_restarts

    def _should_restart(self, run_result):
        """Failure policy: restart while the budget lasts (and use one restart)."""
        if self._remaining_restarts > 0:
            self._remaining_restarts -= 1
            return True
        return False

    def _membership_changed(self, worker_group):
        """Scaling policy: restart healthy workers when nodes wait to join (scale-up) or when a node of the round is
        gone (scale-down: its peers may be blocked waiting for its workers, which will never come). No restart of
        the budget is used."""
        handler = worker_group.spec.rdzv_handler
        waiting = handler.num_nodes_waiting()
        lost = handler._lost_participants() if worker_group.group_world_size > 1 else []
        if waiting or lost:
            logger.info("[%s] Nodes waiting: %s, nodes lost: %s; will restart worker group",
                        worker_group.spec.role, waiting, lost)
        return bool(waiting or lost)

    # --------------------------------------------------------------------------------------------------- steps

    @prof
    def _rendezvous(self, worker_group):
        """Join the next round, then give every worker its ranks and the workers' store address."""
        spec = worker_group.spec
        with self.record_duration("RENDEZVOUS"):
            info = spec.rdzv_handler.next_rendezvous()
        store, group_rank, group_world_size = info.store, info.rank, info.world_size
        master_addr = spec.master_addr or info.bootstrap_store_info.master_addr
        master_port = spec.master_port or info.bootstrap_store_info.master_port
        self._store = store
        with self.record_duration("ASSIGN_WORKER_RANKS"):
            workers = self._assign_worker_ranks(store, group_rank, group_world_size, spec)
        worker_group.workers, worker_group.store = workers, store
        worker_group.group_rank, worker_group.group_world_size = group_rank, group_world_size
        worker_group.master_addr, worker_group.master_port = master_addr, master_port
        logger.info(
            "[%s] Rendezvous complete for workers. Result:\n  restart_count=%s\n  master_addr=%s\n  master_port=%s\n"
            "  group_rank=%s\n  group_world_size=%s\n  local_ranks=%s\n  role_ranks=%s\n  global_ranks=%s\n"
            "  role_world_sizes=%s\n  global_world_sizes=%s\n  event_log_handler=%s\n", spec.role,
            self._restart_count(), master_addr, master_port, group_rank, group_world_size,
            [w.local_rank for w in workers], [w.role_rank for w in workers], [w.global_rank for w in workers],
            [w.role_world_size for w in workers], [w.world_size for w in workers], spec.event_log_handler)

    @prof
    def _assign_worker_ranks(self, store, group_rank, group_world_size, spec):
        """Each agent publishes (role, node rank, local world size) in the round's store; node 0 computes every
        node's base ranks; each agent reads its own. With TORCH_ELASTIC_WORKER_IDENTICAL=1 (same spec everywhere)
        the ranks follow from the node rank alone."""
        if os.environ.get("TORCH_ELASTIC_WORKER_IDENTICAL", "0") == "1":
            world = group_world_size * spec.local_world_size
            base = role_base = group_rank * spec.local_world_size
            role_world = world
        else:
            info = {"role": spec.role, "rank": group_rank, "local_world_size": spec.local_world_size}
            store.set(f"torchelastic/role_info/{group_rank}", json.dumps(info))
            if group_rank == 0:
                infos = [json.loads(v) for v in
                         store.multi_get([f"torchelastic/role_info/{i}" for i in range(group_world_size)])]
                store.multi_set([f"torchelastic/assigned_ranks/{i}" for i in range(group_world_size)],
                                [json.dumps(r) for r in _assigned_ranks(infos)])
            base, world, role_base, role_world = json.loads(store.get(f"torchelastic/assigned_ranks/{group_rank}"))
        return [Worker(local_rank=i, global_rank=base + i, role_rank=role_base + i, world_size=world,
                       role_world_size=role_world) for i in range(spec.local_world_size)]

    @prof
    def _initialize_workers(self, worker_group):
        """Rendezvous, then start the workers (stop the previous ones first)."""
        role = worker_group.spec.role
        logger.info("[%s] Rendezvous'ing worker group", role)
        self._rendezvous(worker_group)
        logger.info("[%s] Starting worker group", role)
        for local_rank, worker_id in self._start_workers(worker_group).items():
            worker = worker_group.workers[local_rank]
            worker.id = worker_id
            record(self._construct_event("START", EventSource.WORKER, worker), worker_group.spec.event_log_handler)
        worker_group.state = WorkerState.HEALTHY

    @prof
    def _restart_workers(self, worker_group):
        """Stop, rendezvous, start."""
        logger.info("[%s] Stopping worker group", worker_group.spec.role)
        self._stop_workers(worker_group)
        worker_group.state = WorkerState.STOPPED
        self._initialize_workers(worker_group)

    @prof
    def run(self, role=DEFAULT_ROLE):
        start = time.monotonic()
        shut_down = False
        try:
            result = self._invoke_run(role)
            self._total_execution_time = int(time.monotonic() - start)
            self._record_metrics(result)
            self._record_worker_events(result)
            return result
        except RendezvousGracefulExitError as e:
            logger.info("Rendezvous gracefully exited: %s", e)
            return RunResult(state=WorkerState.SUCCEEDED)
        except SignalException as e:
            logger.warning("Received %s death signal, shutting down workers", e.sigval)
            self._shutdown(e.sigval, timeout=self._shutdown_timeout)
            shut_down = True
            raise
        finally:
            if not shut_down:
                self._shutdown(timeout=self._shutdown_timeout)
            self._total_execution_time = int(time.monotonic() - start)

    def _invoke_run(self, role=DEFAULT_ROLE):
        group = self._worker_group
        spec = group.spec
        role = spec.role
        logger.info("[%s] starting workers for entrypoint: %s", role, spec.get_entrypoint_name())
        self._initialize_workers(group)
        while True:
            if group.state == WorkerState.INIT:
                raise AssertionError("the worker group was not started")
            self._wait_workers(group, spec.monitor_interval)
            result = self._monitor_workers(group)
            state = group.state = result.state
            put_metric(f"workers.{role}.remaining_restarts", self._remaining_restarts)
            put_metric(f"workers.{role}.{state.name.lower()}", 1)
            if state == WorkerState.SUCCEEDED:
                logger.info("[%s] worker group successfully finished. Waiting %s seconds for other agents to finish.",
                            role, self._exit_barrier_timeout)
                self._exit_barrier()
                return result
            if state in (WorkerState.UNHEALTHY, WorkerState.FAILED):
                left = self._remaining_restarts
                if self._should_restart(result):
                    logger.info("[%s] Worker group %s. %s/%s attempts left; will restart worker group", role,
                                state.name, left, spec.max_restarts)
                    self._restart_workers(group)
                else:
                    self._stop_workers(group)
                    group.state = WorkerState.FAILED
                    return result
            elif state == WorkerState.HEALTHY:
                if self._membership_changed(group):
                    self._restart_workers(group)
            else:
                raise Exception(f"[{role}] Worker group in {state.name} state")  # noqa: TRY002

    def _exit_barrier(self):
        """Wait (up to the exit barrier timeout) until every agent's workers finished, so that an agent done
        early is not taken for a lost node. Unlike torchelastic, the wait ends as soon as an agent of the round is
        gone (left, or no heartbeat), and a signal still stops it."""
        spec = self._worker_group.spec
        logger.info("Local worker group finished (%s). Waiting %s seconds for other agents to finish",
                    self._worker_group.state, self._exit_barrier_timeout)
        start = time.time()
        self._in_exit_barrier = True
        try:
            store_util.barrier(self._store, self._worker_group.group_world_size, _TERMINAL_STATE_SYNC_ID,
                               self._exit_barrier_timeout, give_up=lambda: _lost(spec.rdzv_handler),
                               poll_interval=min(1.0, max(spec.monitor_interval, 0.05)))
            logger.info("Done waiting for other agents. Elapsed: %s seconds", time.time() - start)
        except SignalException as e:
            logger.warning("Got termination signal: %s", e.sigval)
            raise
        except Exception:
            logger.exception("Error waiting on exit barrier. Elapsed: %s seconds", time.time() - start)
        finally:
            self._in_exit_barrier = False

    # ------------------------------------------------------------------------------------- events and metrics

    def get_event_failed(self):
        return self._construct_event(state="FAILED", source=EventSource.AGENT, raw_error=traceback.format_exc())

    def get_event_succeeded(self):
        return self._construct_event(state="SUCCEEDED", source=EventSource.AGENT)

    def _record_worker_events(self, result):
        for worker in self._worker_group.workers:
            failure = result.failures.get(worker.global_rank)
            record(self._construct_event(
                state=self._get_worker_state(worker, result), source=EventSource.WORKER, worker=worker,
                raw_error=json.dumps(failure.error_file_data) if failure else None,
                exit_code=failure.exitcode if failure else None, worker_pid=failure.pid if failure else None),
                self._worker_group.spec.event_log_handler)

    def _get_worker_state(self, worker, result):
        failure = result.failures.get(worker.global_rank)
        if result.state in (WorkerState.UNHEALTHY, WorkerState.FAILED) and not failure:
            return "TERMINATED"
        if failure or worker.global_rank in result.return_values:
            return result.state.value
        raise ValueError(f"Unknown worker: {worker.global_rank}")

    @contextmanager
    def record_duration(self, state):
        start = time.perf_counter()
        try:
            yield
        finally:
            record(self._construct_event(state=state, source=EventSource.AGENT,
                                         duration_ms=(time.perf_counter() - start) * 1000),
                   self._worker_group.spec.event_log_handler)

    def _construct_event(self, state, source, worker=None, raw_error=None, duration_ms=None, exit_code=None,
                         worker_pid=None):
        group = self._worker_group
        spec = group.spec
        md = {"group_world_size": group.group_world_size, "entry_point": spec.get_entrypoint_name()}
        if worker is not None:
            md.update(local_rank=(worker.local_rank,), role_rank=(worker.role_rank,),
                      role_world_size=(worker.role_world_size,), exit_code=(exit_code,), worker_pid=(worker_pid,))
        metadata = {"run_id": spec.rdzv_handler.get_run_id(),
                    "global_rank": worker.global_rank if worker is not None else None,
                    "group_rank": group.group_rank, "worker_id": str(worker.id) if worker is not None else None,
                    "role": spec.role, "hostname": _get_fq_hostname(), "state": state,
                    "total_run_time": self._total_execution_time, "rdzv_backend": spec.rdzv_handler.get_backend(),
                    "raw_error": raw_error, "metadata": json.dumps(md), "agent_restarts": self._restart_count(),
                    "duration_ms": duration_ms}
        return Event(f"torchelastic.worker.status.{state}", source=source, metadata=metadata)

    def _record_metrics(self, result):
        spec = self._worker_group.spec
        failed, restarted = result.is_failed(), self._remaining_restarts != spec.max_restarts
        flakiness = 100.0 if failed else 100.0 - 100.0 * (self._remaining_restarts + 1) / (spec.max_restarts + 1)
        put_metric(f"workers.{spec.role}.flakiness", int(flakiness))
        put_metric(f"workers.{spec.role}.run_total", 1)
        for name, condition in (("run_success_with_retries", not failed and restarted),
                                ("run_success_no_retries", not failed and not restarted),
                                ("run_failed_with_retries", failed and restarted),
                                ("run_failed_no_retries", failed and not restarted)):
            put_metric(f"workers.{spec.role}.{name}", int(condition))
