"""``RemoteModule``: a module made and run on another RPC worker, with local ``forward``/``forward_async``."""
import ember
import ember.distributed.rpc as rpc
from ember import nn

__all__ = ["RemoteModule"]


def _parse_remote_device(remote_device):
    """(worker name or rank, device) of ``"<workername>/<device>"``, ``"rank:<rank>/<device>"``, ``"<workername>"``."""
    error = ValueError(f"Could not parse remote_device: {remote_device}. The valid format is '<workername>/<device>' "
                       "or 'rank:<rank>/<device>' or '<device>'")
    if not isinstance(remote_device, str):
        raise TypeError(f"Invalid type for remote_device: {type(remote_device)}")
    fields = remote_device.split("/")
    if len(fields) > 2 or not fields[0]:
        raise error
    worker, device = fields[0], fields[1] if len(fields) == 2 else "cpu"
    device = ember.device(device)
    parts = worker.split(":")
    if len(parts) == 2:
        if parts[0] != "rank" or not parts[1].isdigit():
            raise error
        worker = int(parts[1])
    elif len(parts) > 2:
        raise error
    return worker, device


def _instantiate(module_cls, args, kwargs, device):
    return module_cls(*args, **kwargs).to(device)


def _forward(module_rref, *args, **kwargs):
    return module_rref.local_value().forward(*args, **kwargs)


def _parameter_rrefs(module_rref, recurse):
    return [rpc.RRef(p) for p in module_rref.local_value().parameters(recurse)]


class RemoteModule(nn.Module):
    """``RemoteModule(remote_device, module_cls, args=None, kwargs=None)``: ``module_cls(*args, **kwargs)`` made on
    the worker of ``remote_device`` (``"worker1/cpu"``, ``"worker1"``, ``"rank:1/cpu"``). ``forward`` runs there
    (recorded by distributed autograd inside a context); ``forward_async`` returns a Future."""

    def __init__(self, remote_device, module_cls, args=None, kwargs=None):
        super().__init__()
        rpc.api._require_agent()
        self.on, device = _parse_remote_device(remote_device)
        self.device = str(device)
        self.is_device_map_set = False
        self.module_rref = rpc.remote(self.on, _instantiate,
                                      args=(module_cls, tuple(args or ()), dict(kwargs or {}), self.device))
        self.module_rref._get_future().wait()  # made (its constructor's error raised here)

    def forward(self, *args, **kwargs):
        return rpc.rpc_sync(self.on, _forward, args=(self.module_rref, *args), kwargs=kwargs)

    def forward_async(self, *args, **kwargs):
        return rpc.rpc_async(self.on, _forward, args=(self.module_rref, *args), kwargs=kwargs)

    def remote_parameters(self, recurse=True):
        """RRefs of the remote module's parameters (for ``DistributedOptimizer``)."""
        return rpc.rpc_sync(self.on, _parameter_rrefs, args=(self.module_rref, recurse))

    def get_module_rref(self):
        """The RRef of the remote module."""
        return self.module_rref

    def extra_repr(self):
        return f"on={self.on}, device={self.device}"
