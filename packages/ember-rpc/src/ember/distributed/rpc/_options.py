"""Backends of the RPC agent and their options, as torch.distributed.rpc: ``BackendType`` (TENSORPIPE selects
ember's agent on ember-distributed's transport), ``RpcBackendOptions``, ``TensorPipeRpcBackendOptions`` and the
registry (``register_backend``, ``backend_registered``, ``construct_rpc_backend_options``, ``init_backend``)."""
import collections
import enum
import numbers

__all__ = ["BackendType", "BackendValue", "RpcBackendOptions", "TensorPipeRpcBackendOptions", "register_backend",
           "backend_registered", "construct_rpc_backend_options", "init_backend"]

DEFAULT_RPC_TIMEOUT_SEC = 60.0
DEFAULT_INIT_METHOD = "env://"
DEFAULT_NUM_WORKER_THREADS = 16
UNSET_RPC_TIMEOUT = -1.0

BackendValue = collections.namedtuple("BackendValue", ["construct_rpc_backend_options_handler", "init_backend_handler"])


def _backend_type_repr(self):
    return "BackendType." + self.name


BackendType = enum.Enum(value="BackendType", names={})
BackendType.__repr__ = _backend_type_repr


def backend_registered(backend_name):
    """Whether a backend of that name is registered."""
    return backend_name in BackendType.__members__


def register_backend(backend_name, construct_rpc_backend_options_handler, init_backend_handler):
    """Add ``backend_name`` to ``BackendType`` with its options constructor and agent constructor; the member."""
    global BackendType
    if backend_registered(backend_name):
        raise RuntimeError(f"RPC backend {backend_name}: already registered")
    members = {m.name: m.value for m in BackendType}
    members[backend_name] = BackendValue(construct_rpc_backend_options_handler, init_backend_handler)
    BackendType = enum.Enum(value="BackendType", names=members)
    BackendType.__repr__ = _backend_type_repr
    import ember.distributed.rpc as rpc  # the package's name follows the new enum

    rpc.BackendType = BackendType
    return BackendType[backend_name]


def construct_rpc_backend_options(backend, rpc_timeout=DEFAULT_RPC_TIMEOUT_SEC, init_method=DEFAULT_INIT_METHOD,
                                  **kwargs):
    """Options of ``backend`` built by its registered handler."""
    return backend.value.construct_rpc_backend_options_handler(rpc_timeout, init_method, **kwargs)


def init_backend(backend, *args, **kwargs):
    """The agent of ``backend`` (its registered init handler called with the arguments)."""
    return backend.value.init_backend_handler(*args, **kwargs)


class RpcBackendOptions:
    """Options every backend takes: ``rpc_timeout`` (seconds) and ``init_method`` (a rendezvous URL)."""

    def __init__(self, rpc_timeout=DEFAULT_RPC_TIMEOUT_SEC, init_method=DEFAULT_INIT_METHOD):
        self.rpc_timeout = rpc_timeout
        self.init_method = init_method

    @property
    def rpc_timeout(self):
        return self._rpc_timeout

    @rpc_timeout.setter
    def rpc_timeout(self, value):
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise TypeError(f"rpc_timeout must be a float, got {type(value).__name__}")
        self._rpc_timeout = float(value)

    @property
    def init_method(self):
        return self._init_method

    @init_method.setter
    def init_method(self, value):
        if not isinstance(value, str):
            raise TypeError(f"init_method must be a str, got {type(value).__name__}")
        self._init_method = value


def _device(d):
    import ember

    return ember.device(d)


def _to_device(d):
    device = _device(d)
    if device.type != "cuda":
        raise ValueError(f"`set_devices` expect a list of CUDA devices, but got device type {device.type}.")
    return device


def _to_device_map(device_map):
    full, reverse = {}, {}
    for k, v in device_map.items():
        k, v = _device(k), _device(v)
        if v in reverse:
            raise ValueError(f"`device_map` only supports 1-to-1 mapping, trying to map {k} and {reverse[v]} to {v}")
        full[k] = v
        reverse[v] = k
    return full


class TensorPipeRpcBackendOptions(RpcBackendOptions):
    """The options of the default agent: ``num_worker_threads`` (threads running requests), ``rpc_timeout``,
    ``init_method``, ``device_maps`` ({callee name: {local device: callee device}}) and ``devices``."""

    def __init__(self, *, num_worker_threads=DEFAULT_NUM_WORKER_THREADS, rpc_timeout=DEFAULT_RPC_TIMEOUT_SEC,
                 init_method=DEFAULT_INIT_METHOD, device_maps=None, devices=None, _transports=None, _channels=None):
        super().__init__(rpc_timeout, init_method)
        if not isinstance(num_worker_threads, numbers.Integral) or isinstance(num_worker_threads, bool):
            raise TypeError(f"num_worker_threads must be an int, got {type(num_worker_threads).__name__}")
        if num_worker_threads < 1:
            raise ValueError(f"num_worker_threads must be positive, got {num_worker_threads}")
        self.num_worker_threads = int(num_worker_threads)
        self.device_maps = {} if device_maps is None else {k: _to_device_map(v) for k, v in device_maps.items()}
        self.devices = [] if devices is None else [_to_device(d) for d in devices]
        self._transports, self._channels = _transports, _channels

    def set_device_map(self, to, device_map):
        """Add ``device_map`` (local device -> device of worker ``to``) to the maps toward ``to``."""
        full = _to_device_map(device_map)
        current = self.device_maps.get(to, {})
        for k, v in full.items():
            if k in current and v != current[k]:
                raise ValueError(f"`set_device_map` only supports 1-to-1 mapping, trying to map {k} to {v} and "
                                 f"{current[k]}")
        merged = {**current, **full}
        _to_device_map(merged)  # still invertible
        self.device_maps[to] = merged

    def set_devices(self, devices):
        """The local (CUDA) devices the agent uses."""
        self.devices = [_to_device(d) for d in devices]


def _tensorpipe_options(rpc_timeout=DEFAULT_RPC_TIMEOUT_SEC, init_method=DEFAULT_INIT_METHOD,
                        num_worker_threads=DEFAULT_NUM_WORKER_THREADS, _transports=None, _channels=None, **kwargs):
    return TensorPipeRpcBackendOptions(rpc_timeout=rpc_timeout, init_method=init_method,
                                       num_worker_threads=num_worker_threads, _transports=_transports,
                                       _channels=_channels, **kwargs)


def _init_agent(store, name, rank, world_size, rpc_backend_options):
    from ._agent import Agent

    if not isinstance(rpc_backend_options, TensorPipeRpcBackendOptions):
        raise TypeError(f"TENSORPIPE backend expects TensorPipeRpcBackendOptions, got "
                        f"{type(rpc_backend_options).__name__}")
    return Agent(store, name, rank, world_size, rpc_backend_options)


register_backend("TENSORPIPE", _tensorpipe_options, _init_agent)
