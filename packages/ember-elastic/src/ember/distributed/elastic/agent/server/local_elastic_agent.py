"""LocalElasticAgent: the agent of one host, running its workers as local processes.

Workers get torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, ..., TORCHELASTIC_RESTART_COUNT,
TORCHELASTIC_USE_AGENT_STORE, ...). The agent wakes as soon as a worker process ends, so a failure is seen at once
rather than at the next monitor tick. With TORCHELASTIC_ENABLE_FILE_TIMER=1 it runs the file-timer watchdog
(``FileTimerServer`` on the named pipe TORCHELASTIC_TIMER_FILE, made up when unset): a worker whose expiration
timer runs out is killed with the timer's signal and the group is restarted within the budget (torchelastic's
watchdog kills the agent too, which ends the whole job and orphans the other workers; this one does not).
The agent also serves the workers' in-memory checkpoints (``ember.distributed.elastic.state``): a store that lives
as long as the agent, so that a commit survives the restart of the worker that made it.
"""
import json
import os
import signal
import socket
import tempfile
import uuid
from string import Template

from ember.distributed import TCPStore
from ember.distributed.elastic import events
from ember.distributed.elastic import timer as timer_api
from ember.distributed.elastic.agent.server.api import RunResult, SimpleElasticAgent, WorkerState
from ember.distributed.elastic.metrics import prof
from ember.distributed.elastic.multiprocessing import DefaultLogsSpecs, start_processes
from ember.distributed.elastic.utils.logging import get_logger

__all__ = ["LocalElasticAgent", "TORCHELASTIC_ENABLE_FILE_TIMER", "TORCHELASTIC_TIMER_FILE"]

logger = get_logger(__name__)

TORCHELASTIC_ENABLE_FILE_TIMER = "TORCHELASTIC_ENABLE_FILE_TIMER"
TORCHELASTIC_TIMER_FILE = "TORCHELASTIC_TIMER_FILE"
# where workers find the agent's in-memory checkpoint store ("host:port")
EMBER_ELASTIC_STATE_STORE = "EMBER_ELASTIC_STATE_STORE"


class LocalElasticAgent(SimpleElasticAgent):
    """Runs ``spec.local_world_size`` workers on this host (a function through multiprocessing with
    ``start_method``, or a command), their logs as ``logs_specs`` says (default: DefaultLogsSpecs()).
    ``log_line_prefix_template`` (``${role_name}``, ``${rank}``, ``${local_rank}``) replaces the console header
    of teed lines."""

    def __init__(self, spec, logs_specs=None, start_method="spawn", exit_barrier_timeout=300,
                 log_line_prefix_template=None, shutdown_timeout=30):
        super().__init__(spec, exit_barrier_timeout, shutdown_timeout)
        self._start_method = start_method
        self._pcontext = None
        self._rdzv_handler = spec.rdzv_handler
        self._log_line_prefix_template = log_line_prefix_template
        self._worker_watchdog = None
        self._logs_specs = logs_specs if logs_specs is not None else DefaultLogsSpecs()
        self._state_store = None

    # ------------------------------------------------------------------------------------------- worker set-up

    def _worker_env(self, worker_group, worker, restart_count):
        spec = worker_group.spec
        env = {
            "RANK": str(worker.global_rank),
            "GROUP_RANK": str(worker_group.group_rank),
            "ROLE_RANK": str(worker.role_rank),
            "ROLE_NAME": spec.role,
            "LOCAL_WORLD_SIZE": str(spec.local_world_size),
            "WORLD_SIZE": str(worker.world_size),
            "GROUP_WORLD_SIZE": str(worker_group.group_world_size),
            "ROLE_WORLD_SIZE": str(worker.role_world_size),
            "MASTER_ADDR": worker_group.master_addr,
            "MASTER_PORT": str(worker_group.master_port),
            "TORCHELASTIC_RESTART_COUNT": str(restart_count),
            "TORCHELASTIC_MAX_RESTARTS": str(spec.max_restarts),
            "TORCHELASTIC_RUN_ID": spec.rdzv_handler.get_run_id(),
            "TORCHELASTIC_USE_AGENT_STORE": str(spec.rdzv_handler.use_agent_store),
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": os.getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
        }
        if spec.virtual_local_rank:
            env["LOCAL_RANK"] = "0"
            visible = os.getenv("CUDA_VISIBLE_DEVICES")
            devices = visible.split(",") if visible is not None else None
            if devices is not None and worker.local_rank >= len(devices):
                raise ValueError(f"local_rank {worker.local_rank} exceeds available GPUs in "
                                 f"CUDA_VISIBLE_DEVICES={visible}")
            env["CUDA_VISIBLE_DEVICES"] = devices[worker.local_rank].strip() if devices else str(worker.local_rank)
        else:
            env["LOCAL_RANK"] = str(worker.local_rank)
            if "CUDA_VISIBLE_DEVICES" in os.environ:
                env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
        if "OMP_NUM_THREADS" in os.environ:
            env["OMP_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"]
        if self._state_store is not None:
            env[EMBER_ELASTIC_STATE_STORE] = f"{self._state_store.host}:{self._state_store.port}"
        return env

    def _setup_local_watchdog(self, envs):
        """Start the file-timer watchdog when TORCHELASTIC_ENABLE_FILE_TIMER=1; tell the workers its pipe."""
        path = os.getenv(TORCHELASTIC_TIMER_FILE)
        if os.getenv(TORCHELASTIC_ENABLE_FILE_TIMER) == "1":
            path = path or os.path.join(tempfile.gettempdir(), f"watchdog_timer_{uuid.uuid4()}")
            logger.info("Starting a FileTimerServer with %s ...", path)
            run_id = envs[0]["TORCHELASTIC_RUN_ID"] if envs else ""
            self._worker_watchdog = timer_api.FileTimerServer(file_path=path, run_id=run_id, max_interval=0.1,
                                                              daemon=True, log_event=self._log_watchdog_event)
            self._worker_watchdog.start()
            logger.info("FileTimerServer started")
        else:
            logger.info("Environment variable '%s' not found. Do not start FileTimerServer.",
                        TORCHELASTIC_ENABLE_FILE_TIMER)
        if path is not None:
            for env in envs.values():
                env[TORCHELASTIC_TIMER_FILE] = path

    def _log_watchdog_event(self, name, request):
        group = self._worker_group
        spec = group.spec
        md = {"watchdog_event": name}
        if request is not None:
            md.update(worker_pid=str(request.worker_pid), scope_id=request.scope_id,
                      expiration_time=str(request.expiration_time), signal=str(request.signal))
        metadata = {"run_id": spec.rdzv_handler.get_run_id(), "global_rank": None, "group_rank": group.group_rank,
                    "worker_id": None, "role": spec.role, "hostname": socket.getfqdn(socket.gethostname()),
                    "state": "RUNNING", "total_run_time": self._total_execution_time,
                    "rdzv_backend": spec.rdzv_handler.get_backend(), "raw_error": None, "metadata": json.dumps(md),
                    "agent_restarts": self._restart_count()}
        events.record(events.Event(name=name, source=events.EventSource.AGENT, metadata=metadata),
                      spec.event_log_handler)

    def _serve_state(self):
        """The in-memory checkpoint store of this agent's workers (started once; it outlives restarts)."""
        if self._state_store is None:
            host = self._worker_group.spec.local_addr or "localhost"
            self._state_store = TCPStore(host, 0, is_master=True, wait_for_workers=False)

    # -------------------------------------------------------------------------------------------------- steps

    @prof
    def _start_workers(self, worker_group):
        spec = worker_group.spec
        if worker_group.store is None:
            raise AssertionError("the worker group has no store: rendezvous first")
        self._serve_state()
        restart_count = self._restart_count()
        logger.info("use_agent_store: %s", spec.rdzv_handler.use_agent_store)
        args, envs = {}, {}
        prefixes = {} if self._log_line_prefix_template else None
        for worker in worker_group.workers:
            rank = worker.local_rank
            envs[rank] = self._worker_env(worker_group, worker, restart_count)
            if prefixes is not None:
                prefixes[rank] = Template(self._log_line_prefix_template).safe_substitute(
                    role_name=spec.role, rank=worker.global_rank, local_rank=rank)
            args[rank] = tuple(a.replace("${local_rank}", str(rank)) if isinstance(a, str) else a for a in spec.args)
        self._setup_local_watchdog(envs)
        self._pcontext = start_processes(
            name=spec.role, entrypoint=spec.entrypoint, args=args, envs=envs, logs_specs=self._logs_specs,
            log_line_prefixes=prefixes, start_method=self._start_method,
            duplicate_stdout_filters=spec.duplicate_stdout_filters,
            duplicate_stderr_filters=spec.duplicate_stderr_filters)
        return self._pcontext.pids()

    @prof
    def _stop_workers(self, worker_group):
        self._stop(signal.SIGTERM, self._shutdown_timeout)

    def _stop(self, death_sig, timeout):
        if self._worker_watchdog is not None:
            self._worker_watchdog.stop()
            self._worker_watchdog = None
        if self._pcontext is not None:
            self._pcontext.close(death_sig, timeout)

    def _shutdown(self, death_sig=signal.SIGTERM, timeout=30):
        self._stop(death_sig, timeout)
        if self._state_store is not None:
            self._state_store._release()
            self._state_store = None

    def _wait_workers(self, worker_group, timeout):
        if self._pcontext is None:
            super()._wait_workers(worker_group, timeout)
        else:
            self._pcontext._wait_for_event(timeout)

    @prof
    def _monitor_workers(self, worker_group):
        role = worker_group.spec.role
        expected = {w.id for w in worker_group.workers}
        actual = set(self._pcontext.pids().values())
        if expected != actual:
            logger.error("[%s] worker pids do not match process_context pids. Expected: %s, actual: %s", role,
                         expected, actual)
            return RunResult(state=WorkerState.UNKNOWN)
        result = self._pcontext.wait(0)
        if result is None:
            return RunResult(state=WorkerState.HEALTHY)
        by_global = {w.local_rank: w.global_rank for w in worker_group.workers}
        if result.is_failed():
            return RunResult(state=WorkerState.FAILED,
                             failures={by_global[r]: f for r, f in result.failures.items()})
        return RunResult(state=WorkerState.SUCCEEDED,
                         return_values={by_global[r]: v for r, v in result.return_values.items()})
