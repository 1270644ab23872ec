"""Launch and manage ``n`` copies of a worker: a function (through multiprocessing) or a binary (a subprocess).

    from ember.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std, start_processes

    ctx = start_processes(name="trainer", entrypoint=trainer, args={0: (1, 2), 1: (3, 4)},
                          envs={0: {"LOCAL_RANK": "0"}, 1: {"LOCAL_RANK": "1"}},
                          logs_specs=DefaultLogsSpecs(log_dir="/tmp/logs", redirects=Std.ALL, tee={0: Std.ERR}))
    result = ctx.wait()   # RunProcsResult: return_values / failures by local rank
"""
from .api import (
    DefaultLogsSpecs,
    LogsDest,
    LogsSpecs,
    MultiprocessContext,
    PContext,
    RunProcsResult,
    SignalException,
    Std,
    SubprocessContext,
    _validate_full_rank,
    to_map,
)
from .errors import ProcessFailure

__all__ = ["DefaultLogsSpecs", "LogsDest", "LogsSpecs", "MultiprocessContext", "PContext", "ProcessFailure",
           "RunProcsResult", "SignalException", "Std", "SubprocessContext", "start_processes", "to_map"]


def start_processes(name, entrypoint, args, envs, logs_specs, log_line_prefixes=None, start_method="spawn",
                    numa_options=None, duplicate_stdout_filters=None, duplicate_stderr_filters=None):
    """Start ``len(args)`` copies of ``entrypoint`` (a function, or a command when it is a str) and return their
    PContext. ``args`` and ``envs`` map every local rank 0..n-1 to its arguments and environment variables;
    ``logs_specs`` says where their output goes; ``start_method`` (spawn, fork, forkserver) applies to functions.
    A function's worker runs under ``@record``; a binary writes an error file only if its main uses it.
    ``numa_options`` is accepted for torch's signature and ignored (no NUMA binding in ember)."""
    nprocs = len(args)
    _validate_full_rank(args, nprocs, "args")
    _validate_full_rank(envs, nprocs, "envs")
    common = dict(name=name, entrypoint=entrypoint, args=args, envs=envs, logs_specs=logs_specs,
                  log_line_prefixes=log_line_prefixes, duplicate_stdout_filters=duplicate_stdout_filters,
                  duplicate_stderr_filters=duplicate_stderr_filters)
    if isinstance(entrypoint, str):
        context = SubprocessContext(**common)
    else:
        context = MultiprocessContext(start_method=start_method, **common)
    try:
        context.start()
    except BaseException:
        context.close()
        raise
    return context
