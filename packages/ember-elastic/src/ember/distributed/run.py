"""emberrun: torchrun for ember. ``emberrun [options] script.py [script args]`` (or ``python -m ember.distributed.run``)
starts this node's elastic agent, which runs ``--nproc-per-node`` copies of the script with torchrun's environment
(RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*, ...), restarts them all when one fails (up
to ``--max-restarts`` times) or when nodes join, and exits 0 when every worker succeeded, else 1 with a report of
the failures (root cause first).

Single node::

    emberrun --standalone --nproc-per-node 4 train.py --epochs 10

Several nodes, elastic between 2 and 4 of them (run the same command on each)::

    emberrun --nnodes 2:4 --nproc-per-node 8 --max-restarts 3 --rdzv-id job1 --rdzv-backend c10d \\
             --rdzv-endpoint node1.example.com:29400 train.py

On a Ray cluster (the same script and worker environment; nodes are placement groups, see docs/elastic.md)::

    emberrun --ray-address auto --nnodes 2:4 --nproc-per-node 8 --max-restarts 3 train.py

Every option may also come from an environment variable ``PET_<OPTION>`` (``PET_NPROC_PER_NODE=4``); the command
line wins. A signal sent to emberrun (SIGTERM, SIGINT, SIGHUP, SIGQUIT) is passed on to every worker.
"""
import argparse
import os
import sys
import uuid

from ember.distributed.elastic.multiprocessing import DefaultLogsSpecs, SignalException, Std
from ember.distributed.elastic.multiprocessing.errors import ChildFailedError, record
from ember.distributed.elastic.rendezvous.utils import _parse_rendezvous_config
from ember.distributed.elastic.utils.logging import configure_launcher_logging, get_logger
from ember.distributed.launcher.api import LaunchConfig, elastic_launch

__all__ = ["config_from_args", "determine_local_world_size", "get_args_parser", "main", "parse_args",
           "parse_min_max_nnodes", "run", "run_script_path"]

logger = get_logger(__name__)


class _Env(argparse.Action):
    """An option whose default comes from PET_<DEST> when that variable is set."""

    def __init__(self, dest, default=None, required=False, **kwargs):
        default = os.environ.get(f"PET_{dest.upper()}", default)
        super().__init__(dest=dest, default=default, required=required and not default, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


class _EnvFlag(argparse.Action):
    """A flag that PET_<DEST>=1 turns on."""

    def __init__(self, dest, default=False, **kwargs):
        default = bool(int(os.environ.get(f"PET_{dest.upper()}", "1" if default else "0")))
        super().__init__(dest=dest, const=True, default=default, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const)


def _comma_separated_list(value):
    """"a,b" -> ["a", "b"]; a doubled comma stands for a comma."""
    return [item.replace("\0", ",") for item in value.replace(",,", "\0").split(",")]


def _option(parser, *names, **kwargs):
    """Add an option under its dashed name and its underscored alias (--nproc-per-node, --nproc_per_node)."""
    aliases = [n.replace("-", "_").replace("__", "--", 1) for n in names if n.startswith("--") and "-" in n[2:]]
    parser.add_argument(*names, *aliases, **kwargs)


def get_args_parser():
    """The launcher's options: torchrun's, with torchrun's defaults."""
    parser = argparse.ArgumentParser(description="ember distributed elastic training launcher (torchrun's options)")
    _option(parser, "--nnodes", action=_Env, type=str, default="1:1",
            help="Number of nodes, or a range MIN:MAX for an elastic job.")
    _option(parser, "--nproc-per-node", action=_Env, type=str, default="1",
            help="Workers per node: a number, or auto (one per GPU, else per CPU), cpu, gpu.")
    _option(parser, "--rdzv-backend", action=_Env, type=str, default="static",
            help="Rendezvous backend: static or c10d.")
    _option(parser, "--rdzv-endpoint", action=_Env, type=str, default="",
            help="Rendezvous endpoint, usually <host>:<port>.")
    _option(parser, "--rdzv-id", action=_Env, type=str, default="none", help="The job's id (same on every node).")
    _option(parser, "--rdzv-conf", action=_Env, type=str, default="",
            help="More rendezvous options: <key1>=<value1>,<key2>=<value2>,... (e.g. join_timeout=60,"
                 "last_call_timeout=5,keep_alive_interval=1).")
    parser.add_argument("--standalone", action=_EnvFlag,
                        help="Single-node job: serve a c10d rendezvous on a free port of this host; "
                             "--rdzv-backend, --rdzv-endpoint and --rdzv-id are set automatically (given values are "
                             "ignored).")
    _option(parser, "--max-restarts", action=_Env, type=int, default=0,
            help="How many times the worker group may be restarted after failures before the job fails.")
    _option(parser, "--monitor-interval", action=_Env, type=float, default=0.1,
            help="Seconds between checks of the workers (a worker's exit is seen at once regardless).")
    _option(parser, "--start-method", action=_Env, type=str, default="spawn", choices=["spawn", "fork", "forkserver"],
            help="Multiprocessing start method of function workers (--run-path).")
    _option(parser, "--event-log-handler", action=_Env, type=str, default="null",
            help="Where the agent's events go: null or console.")
    parser.add_argument("--role", action=_Env, type=str, default="default", help="The workers' role name.")
    parser.add_argument("-m", "--module", action=_EnvFlag,
                        help="Run the training script as a module, as 'python -m' does.")
    _option(parser, "--no-python", action=_EnvFlag,
            help="Run the training script as a command, without 'python' before it.")
    _option(parser, "--run-path", action=_EnvFlag,
            help="Run the training script (an absolute path) with runpy.run_path in worker processes started with "
                 "--start-method; takes precedence over --no-python.")
    _option(parser, "--log-dir", action=_Env, type=str, default=None,
            help="Base folder of log files; each run gets a sub-folder named after its rdzv id.")
    parser.add_argument("-r", "--redirects", action=_Env, type=str, default="0",
                        help="Send std streams to log files: 1 stdout, 2 stderr, 3 both, for all local ranks (-r 3) "
                             "or per rank (-r 0:1,1:2).")
    parser.add_argument("-t", "--tee", action=_Env, type=str, default="0",
                        help="Like --redirects, and copy the lines to the console behind a rank prefix.")
    _option(parser, "--local-ranks-filter", action=_Env, type=str, default="",
            help="Show on the console only these local ranks' output (e.g. 0,1); log files keep all.")
    _option(parser, "--duplicate-stdout-filters", action=_Env, type=_comma_separated_list, default=[],
            help="Also copy teed stdout lines containing any of these strings (comma separated; ',,' for a comma) "
                 "to filtered_stdout.log.")
    _option(parser, "--duplicate-stderr-filters", action=_Env, type=_comma_separated_list, default=[],
            help="Same for stderr (filtered_stderr.log).")
    _option(parser, "--node-rank", type=int, action=_Env, default=0,
            help="This node's rank (static rendezvous only).")
    _option(parser, "--master-addr", default="127.0.0.1", type=str, action=_Env,
            help="Address of node 0 (static rendezvous only); IPv6 as [::1].")
    _option(parser, "--master-port", default=None, type=int, action=_Env,
            help="Port on node 0 for the job's store (static rendezvous only; default 29500).")
    _option(parser, "--local-addr", default=None, type=str, action=_Env,
            help="This node's address (default: its fully qualified host name).")
    _option(parser, "--logs-specs", default=None, type=str,
            help="Name of an entry point of group emberrun.logs_specs: a LogsSpecs class to use instead of the "
                 "default log layout.")
    _option(parser, "--numa-binding", type=str, default=None, choices=["node", "socket", "exclusive", "core-complex"],
            help="Accepted for torchrun compatibility; ember binds no CPUs (a warning says so).")
    _option(parser, "--signals-to-handle", action=_Env, type=str, default="SIGTERM,SIGINT,SIGHUP,SIGQUIT",
            help="Signals passed on to the workers (comma separated), e.g. add SIGUSR1,SIGUSR2 under SLURM.")
    _option(parser, "--shutdown-timeout", action=_Env, type=int, default=None,
            help="Seconds workers get to stop after a signal before SIGKILL (default: TORCH_ELASTIC_SHUTDOWN_TIMEOUT "
                 "or 30).")
    _option(parser, "--virtual-local-rank", action=_EnvFlag,
            help="LOCAL_RANK=0 for every worker, each seeing only its own GPU (CUDA_VISIBLE_DEVICES).")
    _option(parser, "--ray-address", action=_Env, type=str, default=None,
            help="Run the job on a Ray cluster: 'auto' (the cluster of this machine), 'ray://<head>:10001' (Ray "
                 "Client), '<head>:6379', or 'local' (start Ray on this machine). Each node of --nnodes MIN:MAX is a "
                 "placement group of --nproc-per-node CPUs; --max-restarts counts for the whole job; the rendezvous "
                 "options are not used.")
    _option(parser, "--ray-placement", action=_Env, type=str, default="spread", choices=["spread", "pack"],
            help="With --ray-address: put the job's nodes on distinct Ray nodes where possible (spread) or "
                 "anywhere (pack).")
    _option(parser, "--ray-gpus", action=_EnvFlag,
            help="With --ray-address: each node's bundle is --nproc-per-node GPUs (else CPUs).")
    parser.add_argument("training_script", type=str,
                        help="The training program (a Python script unless --no-python or -m), followed by its "
                             "arguments.")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return parser


def parse_args(args):
    return get_args_parser().parse_args(args)


def parse_min_max_nnodes(nnodes):
    """"4" -> (4, 4); "2:4" -> (2, 4)."""
    parts = nnodes.split(":")
    if len(parts) == 1:
        return int(parts[0]), int(parts[0])
    if len(parts) == 2:
        return int(parts[0]), int(parts[1])
    raise RuntimeError(f'nnodes={nnodes} is not in "MIN:MAX" format')


def _cpu_count():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def determine_local_world_size(nproc_per_node):
    """Workers per node from --nproc-per-node: a number, "cpu" (usable CPUs), "gpu" (CUDA devices), "auto"
    (GPUs if any, else CPUs)."""
    try:
        logger.info("Using nproc_per_node=%s.", nproc_per_node)
        return int(nproc_per_node)
    except ValueError:
        pass
    if nproc_per_node == "cpu":
        count, kind = _cpu_count(), "cpu"
    elif nproc_per_node in ("gpu", "auto"):
        import ember.cuda
        if ember.cuda.is_available():
            count, kind = ember.cuda.device_count(), "gpu"
        elif nproc_per_node == "gpu":
            raise ValueError("Cuda is not available.")
        else:
            count, kind = _cpu_count(), "cpu"
    else:
        raise ValueError(f"Unsupported nproc_per_node value: {nproc_per_node}")
    logger.info("Using nproc_per_node=%s, setting nproc_per_node to %s since the instance has %s %s",
                nproc_per_node, count, count, kind)
    return count


def _logs_specs_class(name):
    if name is None:
        return DefaultLogsSpecs
    import importlib

    from ember._extensions import entry_points
    for entry, value in entry_points("emberrun.logs_specs"):
        if entry == name:
            module, _, attr = value.partition(":")
            return getattr(importlib.import_module(module.strip()), attr.strip())
    raise ValueError(f"Could not find entrypoint under 'emberrun.logs_specs[{name}]' key")


def config_from_args(args):
    """(LaunchConfig, entrypoint, entrypoint args) from the parsed options."""
    min_nodes, max_nodes = parse_min_max_nnodes(args.nnodes)
    if not 0 < min_nodes <= max_nodes:
        raise AssertionError(f"min_nodes must be > 0 and <= max_nodes, got min_nodes={min_nodes}, "
                             f"max_nodes={max_nodes}")
    if args.max_restarts < 0:
        raise AssertionError("max_restarts must be >= 0")
    if args.rdzv_backend != "static" and not args.rdzv_endpoint:
        logger.warning("master_addr is only used for static rdzv_backend and when rdzv_endpoint is not specified.")
    if args.node_rank != 0 and args.rdzv_backend != "static":
        logger.warning("node_rank is only used for static rdzv_backend. It will be ignored for rdzv_backend=%s.",
                       args.rdzv_backend)
    if args.numa_binding is not None:
        logger.warning("--numa-binding=%s is ignored: ember binds no CPUs to workers.", args.numa_binding)
    nproc_per_node = determine_local_world_size(args.nproc_per_node)
    if "OMP_NUM_THREADS" not in os.environ and nproc_per_node > 1:
        logger.warning("\n*****************************************\n"
                       "Setting OMP_NUM_THREADS environment variable for each process to be %s in default, to avoid "
                       "your system being overloaded, please further tune the variable for optimal performance in "
                       "your application as needed. \n*****************************************", 1)
        os.environ["OMP_NUM_THREADS"] = "1"  # the workers inherit it
    rdzv_configs = _parse_rendezvous_config(args.rdzv_conf)
    if args.rdzv_backend == "static":
        rdzv_configs["rank"] = args.node_rank
    endpoint = args.rdzv_endpoint
    if args.rdzv_backend == "static" and not endpoint:
        endpoint = f"{args.master_addr}:{args.master_port}"
    ranks = None
    if args.local_ranks_filter:
        try:
            ranks = set(map(int, args.local_ranks_filter.split(",")))
        except ValueError as e:
            raise ValueError("--local_ranks_filter must be a comma-separated list of integers e.g. "
                             "--local_ranks_filter=0,1,2") from e
    logs_specs = _logs_specs_class(args.logs_specs)(log_dir=args.log_dir, redirects=Std.from_str(args.redirects),
                                                    tee=Std.from_str(args.tee), local_ranks_filter=ranks)
    config = LaunchConfig(
        min_nodes=min_nodes, max_nodes=max_nodes, nproc_per_node=nproc_per_node, run_id=args.rdzv_id,
        role=args.role, rdzv_endpoint=endpoint, rdzv_backend=args.rdzv_backend, rdzv_configs=rdzv_configs,
        max_restarts=args.max_restarts, monitor_interval=args.monitor_interval, start_method=args.start_method,
        log_line_prefix_template=os.getenv("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"), local_addr=args.local_addr,
        logs_specs=logs_specs, event_log_handler=args.event_log_handler, signals_to_handle=args.signals_to_handle,
        duplicate_stdout_filters=args.duplicate_stdout_filters, duplicate_stderr_filters=args.duplicate_stderr_filters,
        virtual_local_rank=args.virtual_local_rank, shutdown_timeout=args.shutdown_timeout)
    if args.run_path:
        return config, run_script_path, [args.training_script, *args.training_script_args]
    if args.no_python:
        if args.module:
            raise ValueError("Don't use both the '--no-python' flag and the '--module' flag at the same time.")
        return config, args.training_script, list(args.training_script_args)
    cmd_args = ["-u", *(["-m"] if args.module else []), args.training_script, *args.training_script_args]
    return config, os.getenv("PYTHON_EXEC", sys.executable), cmd_args


def run_script_path(training_script, *training_script_args):
    """Run ``training_script`` as ``__main__`` in this interpreter, with ``sys.argv`` set (--run-path)."""
    import runpy
    sys.argv = [training_script, *training_script_args]
    runpy.run_path(training_script, run_name="__main__")


def _run_on_ray(args):
    from ember.distributed.elastic.ray import ray_launch  # imports Ray: only on this path
    if args.rdzv_id == "none":
        args.rdzv_id = str(uuid.uuid4())
    config, cmd, cmd_args = config_from_args(args)
    return ray_launch(config, cmd, address=args.ray_address, placement=args.ray_placement,
                      gpus=args.ray_gpus)(*cmd_args)


def run(args):
    """Launch with parsed options (as ``main`` does after parsing)."""
    if args.ray_address:
        return _run_on_ray(args)
    if args.standalone:
        args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", str(uuid.uuid4())
        logger.info("\n**************************************\nRendezvous info:\n--rdzv-backend=%s --rdzv-endpoint=%s "
                    "--rdzv-id=%s\n**************************************\n", args.rdzv_backend,
                    args.rdzv_endpoint, args.rdzv_id)
    elif args.rdzv_backend == "static" and not args.rdzv_endpoint and args.master_port is None \
            and parse_min_max_nnodes(args.nnodes)[1] == 1:
        # one node and no port given: a rendezvous on a free port rather than on 29500, which may be taken
        args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", str(uuid.uuid4())
    if args.master_port is None:
        args.master_port = 29500
    config, cmd, cmd_args = config_from_args(args)
    return elastic_launch(config=config, entrypoint=cmd)(*cmd_args)


@record
def _main(args=None):
    configure_launcher_logging()
    run(parse_args(args))


def main(args=None):
    """The emberrun command. Exits 1 (as torchrun) when workers failed, printing the failure report, or when a
    termination signal stopped the launcher (after passing it on to the workers)."""
    code = 0
    try:
        _main(args)
    except (ChildFailedError, SignalException) as e:
        print(f"{type(e).__module__}.{type(e).__qualname__}: {e}", file=sys.stderr, flush=True)
        code = 1
    ray = sys.modules.get("ray")
    if args is None and ray is not None and ray.is_initialized():
        # the emberrun command after a job on Ray: the job's actors and placement groups are released already, and
        # Ray frees what a finished driver owned; its orderly disconnect would add a second or more to every launch
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if code:
        sys.exit(code)


if __name__ == "__main__":
    # run the module under its own name (its loggers, and --run-path's function as workers unpickle it)
    from ember.distributed.run import main as _run_main
    _run_main()
