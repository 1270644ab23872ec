"""Launch an elastic agent from Python: ``elastic_launch(config, entrypoint)(*args)`` runs the agent of this node
and returns the workers' return values by global rank (raising ChildFailedError when they failed)."""
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ember.distributed.elastic import events, metrics
from ember.distributed.elastic.agent.server.api import WorkerSpec
from ember.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
from ember.distributed.elastic.multiprocessing import DefaultLogsSpecs, SignalException
from ember.distributed.elastic.multiprocessing.errors import ChildFailedError
from ember.distributed.elastic.rendezvous import RendezvousParameters
from ember.distributed.elastic.rendezvous import registry as rdzv_registry
from ember.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint
from ember.distributed.elastic.utils.logging import get_logger

__all__ = ["LaunchConfig", "elastic_launch", "launch_agent"]

logger = get_logger(__name__)


@dataclass
class LaunchConfig:
    """What the agent of this node runs: ``min_nodes``..``max_nodes`` nodes of ``nproc_per_node`` workers, the
    rendezvous (``rdzv_backend``, ``rdzv_endpoint``, ``rdzv_configs``, ``run_id``), the restart budget
    (``max_restarts``), how often workers are checked (``monitor_interval``), the start method of function
    workers, the logs (``logs_specs``), and the worker role's name. ``rdzv_timeout`` (legacy) sets
    ``rdzv_configs["timeout"]`` (default 900 s); ``shutdown_timeout`` (seconds before SIGKILL follows SIGTERM)
    defaults to TORCH_ELASTIC_SHUTDOWN_TIMEOUT or 30."""
    min_nodes: int
    max_nodes: int
    nproc_per_node: int
    logs_specs: Any = None
    run_id: str = ""
    role: str = "default_role"
    rdzv_endpoint: str = ""
    rdzv_backend: str = "etcd"
    rdzv_configs: dict = field(default_factory=dict)
    rdzv_timeout: int = -1
    max_restarts: int = 3
    monitor_interval: float = 0.1
    start_method: str = "spawn"
    log_line_prefix_template: str | None = None
    metrics_cfg: dict = field(default_factory=dict)
    local_addr: str | None = None
    event_log_handler: str = "null"
    numa_options: Any = None
    signals_to_handle: str = "SIGTERM,SIGINT,SIGHUP,SIGQUIT"
    duplicate_stdout_filters: list | None = None
    duplicate_stderr_filters: list | None = None
    virtual_local_rank: bool = False
    shutdown_timeout: int | None = None

    def __post_init__(self):
        if self.rdzv_timeout != -1:
            self.rdzv_configs["timeout"] = self.rdzv_timeout
        elif "timeout" not in self.rdzv_configs:
            self.rdzv_configs["timeout"] = 900
        if self.logs_specs is None:
            self.logs_specs = DefaultLogsSpecs()
        if self.shutdown_timeout is None:
            self.shutdown_timeout = int(os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "30"))
        elif self.shutdown_timeout < 0:
            raise ValueError(f"shutdown_timeout must be non-negative, got {self.shutdown_timeout}")


class elastic_launch:
    """``elastic_launch(config, entrypoint)(*args)``: run ``entrypoint`` (a function, or a command such as
    ``sys.executable`` with the script in ``args``) under this node's agent; {global rank: return value}."""

    def __init__(self, config, entrypoint):
        self._config, self._entrypoint = config, entrypoint

    def __call__(self, *args):
        return launch_agent(self._config, self._entrypoint, list(args))


def _get_entrypoint_name(entrypoint, args):
    """A function's name; for the Python interpreter, the script (the first argument not starting with "-")."""
    if callable(entrypoint):
        return entrypoint.__name__
    if isinstance(entrypoint, str):
        if entrypoint == sys.executable:
            return next((a for a in args if a[0] != "-"), "")
        return entrypoint
    return ""


def _get_addr_and_port(params):
    """The static rendezvous's master address and port (where the workers' store is), else (None, None)."""
    if params.backend != "static":
        return None, None
    endpoint = params.endpoint.strip()
    if not endpoint:
        raise ValueError("Endpoint is missing in endpoint. Try to add --master-addr and --master-port")
    addr, port = parse_rendezvous_endpoint(endpoint, default_port=-1)
    if port == -1:
        raise ValueError(f"port is missing in endpoint: {endpoint}. Try to specify --master-port")
    return addr, port


def launch_agent(config, entrypoint, args, agent_class: Callable = LocalElasticAgent):
    """Run this node's agent for ``config`` until the workers are done; {global rank: return value}.
    ``agent_class`` (ember) builds the agent from ``(spec, logs_specs=..., start_method=...,
    log_line_prefix_template=..., shutdown_timeout=...)``: the seam for agents that run workers elsewhere."""
    if not config.run_id:
        config.run_id = str(uuid.uuid4().int)
        logger.warning("config has no run_id, generated a random run_id: %s", config.run_id)
    name = _get_entrypoint_name(entrypoint, args)
    logger.info("Starting elastic_operator with launch configs:\n  entrypoint       : %s\n  min_nodes        : %s\n"
                "  max_nodes        : %s\n  nproc_per_node   : %s\n  run_id           : %s\n"
                "  rdzv_backend     : %s\n  rdzv_endpoint    : %s\n  rdzv_configs     : %s\n"
                "  max_restarts     : %s\n  monitor_interval : %s\n  log_dir          : %s\n"
                "  metrics_cfg      : %s\n", name, config.min_nodes, config.max_nodes, config.nproc_per_node,
                config.run_id, config.rdzv_backend, config.rdzv_endpoint, config.rdzv_configs, config.max_restarts,
                config.monitor_interval, config.logs_specs.root_log_dir, config.metrics_cfg)
    params = RendezvousParameters(backend=config.rdzv_backend, endpoint=config.rdzv_endpoint, run_id=config.run_id,
                                  min_nodes=config.min_nodes, max_nodes=config.max_nodes,
                                  local_addr=config.local_addr, **config.rdzv_configs)
    master_addr, master_port = _get_addr_and_port(params)
    os.environ["TORCHELASTIC_SIGNALS_TO_HANDLE"] = config.signals_to_handle
    spec = WorkerSpec(role=config.role, local_world_size=config.nproc_per_node, entrypoint=entrypoint,
                      args=tuple(args), rdzv_handler=rdzv_registry.get_rendezvous_handler(params),
                      max_restarts=config.max_restarts, monitor_interval=config.monitor_interval,
                      master_addr=master_addr, master_port=master_port, local_addr=config.local_addr,
                      event_log_handler=config.event_log_handler,
                      duplicate_stdout_filters=config.duplicate_stdout_filters,
                      duplicate_stderr_filters=config.duplicate_stderr_filters,
                      virtual_local_rank=config.virtual_local_rank)
    agent = agent_class(spec, logs_specs=config.logs_specs, start_method=config.start_method,
                        log_line_prefix_template=config.log_line_prefix_template,
                        shutdown_timeout=config.shutdown_timeout)
    shutdown_rdzv = True
    try:
        metrics.initialize_metrics(metrics.MetricsConfig(config.metrics_cfg))
        result = agent.run()
        events.record(agent.get_event_succeeded(), config.event_log_handler)
        if result.is_failed():
            # @record (on the caller) copies the root cause's error file to the launcher's
            raise ChildFailedError(name=name, failures=result.failures)
        return result.return_values
    except ChildFailedError:
        raise
    except SignalException:
        # the node stops, the job need not: leave the rendezvous without closing it (the others go on at once)
        shutdown_rdzv = False
        spec.rdzv_handler._leave()
        events.record(agent.get_event_failed(), config.event_log_handler)
        raise
    except Exception:
        events.record(agent.get_event_failed(), config.event_log_handler)
        raise
    finally:
        if shutdown_rdzv:
            spec.rdzv_handler.shutdown()
