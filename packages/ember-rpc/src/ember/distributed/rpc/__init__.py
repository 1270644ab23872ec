"""ember.distributed.rpc: remote calls, remote references and their agent, as torch.distributed.rpc.

The agent runs on ember-distributed's store (rendezvous) and transport (ZeroMQ, shared memory between workers
of one host); ``BackendType.TENSORPIPE`` names it. ``ember.distributed.autograd`` and ``.optim`` build on it."""
from . import functions  # noqa: F401
from ._agent import WorkerInfo
from ._options import (
    BackendType,
    BackendValue,
    RpcBackendOptions,
    TensorPipeRpcBackendOptions,
    backend_registered,
    construct_rpc_backend_options,
    init_backend,
    register_backend,
)
from ._rref import RRef
from ._version import __version__  # noqa: F401
from .api import (
    AllGatherStates,
    get_worker_info,
    init_rpc,
    method_factory,
    new_method,
    remote,
    rpc_async,
    rpc_sync,
    shutdown,
)

__all__ = ["AllGatherStates", "BackendType", "BackendValue", "RRef", "RpcBackendOptions",
           "TensorPipeRpcBackendOptions", "WorkerInfo", "backend_registered", "construct_rpc_backend_options",
           "functions", "get_worker_info", "init_backend", "init_rpc", "is_available", "method_factory", "new_method",
           "register_backend", "remote", "rpc_async", "rpc_sync", "shutdown"]


def is_available():
    """True: ember's RPC package is installed."""
    return True
