"""Logger: the record of a DistributedDataParallel's set-up and training that PyTorch's DDP keeps next to its
Reducer (torch.distributed.Logger): ``Logger(reducer)``, filled by the ``set_*_and_log`` calls and read with
``_get_ddp_logging_data()`` (a DDPLoggingData of string and integer entries, PyTorch's key names)."""
import os

import ember

from . import distributed_c10d as c10d
from ._reducer import Reducer

# the C++ type names PyTorch logs for parameter dtypes
_DTYPE_NAMES = {ember.float32: "float", ember.float64: "double", ember.float16: "c10::Half",
                ember.bfloat16: "c10::BFloat16", ember.complex64: "c10::complex<float>",
                ember.complex128: "c10::complex<double>"}


class DDPLoggingData:
    """``strs_map`` and ``ints_map``: the logged entries by name."""

    def __init__(self):
        self.strs_map = {}
        self.ints_map = {}

    def __repr__(self):
        return f"DDPLoggingData(strs_map={self.strs_map}, ints_map={self.ints_map})"


def _env(name):
    return os.environ.get(name) or "N/A"


class Logger:
    """What a DDP logs about itself and its ``reducer``: entries are added by the ``set_*`` methods (a fresh
    Logger holds none)."""

    def __init__(self, reducer):
        if not isinstance(reducer, Reducer):
            raise TypeError(f"Logger(): expected a Reducer, got {type(reducer).__name__}")
        self._reducer = reducer
        self._data = DDPLoggingData()

    def set_construction_data_and_log(self, module_name, device_ids, output_device, broadcast_buffers, has_sync_bn,
                                      static_graph):
        """Record how the DDP was built (its module, devices and options) and its environment."""
        r, strs, ints = self._reducer, self._data.strs_map, self._data.ints_map
        pg = r._pg
        backend = c10d.get_backend(pg)
        params = r._params
        strs.update(
            module_name=module_name, backend_name=backend, device_ids=", ".join(map(str, device_ids)),
            dtypes=", ".join(sorted({_DTYPE_NAMES.get(p.dtype, str(p.dtype)) for p in params})),
            bucket_sizes=", ".join(str(b.buffer.numel() * b.buffer.element_size()) for b in r._buckets),
            master_addr=_env("MASTER_ADDR"), master_port=_env("MASTER_PORT"),
            cuda_visible_devices=_env("CUDA_VISIBLE_DEVICES"), torch_distributed_debug=_env("TORCH_DISTRIBUTED_DEBUG"),
            gloo_socket_ifname=_env("GLOO_SOCKET_IFNAME"), gloo_device_transport=_env("GLOO_DEVICE_TRANSPORT"))
        ints.update(
            world_size=pg.size(), rank=pg.rank(), iteration=r._iterations, output_device=int(output_device),
            broadcast_buffers=int(broadcast_buffers), has_sync_bn=int(has_sync_bn),
            bucket_cap_bytes=r._bucket_bytes_cap, find_unused_parameters=int(r._find_unused),
            gradient_as_bucket_view=int(r._as_view), is_multi_device_module=0, num_parameter_tensors=len(params),
            total_parameter_size_bytes=sum(p.numel() * p.element_size() for p in params))
        if backend == c10d.Backend.GLOO:
            ints["gloo_num_threads"] = 1  # ember's CPU backend: one communication thread per group

    def set_runtime_stats_and_log(self):
        """Record the training so far: iterations, whether the buckets were rebuilt, the unused parameters'
        size, the buckets reduced per iteration. (No timings: ember's reducer does not time its phases.)"""
        r, ints = self._reducer, self._data.ints_map
        unused = sum(r._params[i].numel() * r._params[i].element_size() for i in r._unused)
        ints.update(iteration=r._iterations, has_rebuilt_buckets=int(r._has_rebuilt),
                    num_buckets_reduced=len(r._buckets), unused_parameter_size=unused)

    def set_error_and_log(self, error):
        self._data.strs_map["error"] = str(error)
        self._data.ints_map["has_error"] = 1

    def _set_comm_hook_name(self, comm_hook):
        self._data.strs_map["comm_hook"] = comm_hook

    def _set_static_graph(self):
        self._data.ints_map["static_graph"] = int(self._reducer._static)

    def _set_uneven_input_join(self):
        self._data.ints_map["join_uneven_inputs"] = 1

    def _get_ddp_logging_data(self):
        data = DDPLoggingData()
        data.strs_map = dict(sorted(self._data.strs_map.items()))  # sorted by name, as PyTorch's
        data.ints_map = dict(sorted(self._data.ints_map.items()))
        return data
