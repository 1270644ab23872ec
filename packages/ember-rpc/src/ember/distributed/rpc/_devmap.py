"""Device maps (``TensorPipeRpcBackendOptions.device_maps``): where a CUDA tensor sent to another worker lands.

A request's tensors move by the caller's map for the callee ({caller device: callee device}); the response's move
back by the inverse of that map, which every worker builds at ``init_rpc`` from the maps all workers published. A
CUDA tensor whose device has no entry is refused, with PyTorch's message; CPU tensors stay on the CPU unless the
map names "cpu". Mapped tensors travel as host copies (out-of-band buffers, like any CPU tensor) and are copied to
their device when the receiver unpickles them: the pickling path that does this is taken only when a tensor may
need it (CuPy imported, or a map naming "cpu"), so CPU-only calls pay nothing.
"""
import io
import pickle
import sys

__all__ = ["check_all", "reverse_maps", "device_list", "target", "dumps", "DeviceMapError"]

_NO_MAP = ("TensorPipe RPC backend only supports CPU tensors by default, please move your tensors to CPU before "
           "sending them over RPC, or call `set_device_map` on `TensorPipeRpcBackendOptions` to explicitly configure "
           "device mapping. ")


class DeviceMapError(RuntimeError):
    """A tensor on a device that the map toward its destination does not name (PyTorch raises RuntimeError)."""


def _device(d):
    import ember

    return ember.device(d)


def _valid(devices, count):
    return all(d.type == "cpu" or (d.type == "cuda" and d.index is not None and 0 <= d.index < count)
               for d in devices)


def check_all(names, counts, maps, devices):
    """Validate every worker's ``devices`` and ``device_maps`` against the others' (ValueError naming the worker
    and the problem, as PyTorch's init_rpc). ``counts``, ``maps``, ``devices``: by worker name."""
    for name in names:
        mine = devices[name]
        if len(set(mine)) != len(mine):
            raise ValueError(f"Node {name} has duplicated devices\ndevices = {mine}")
        if not _valid(mine, counts[name]):
            raise ValueError(f"Node {name} has devices with invalid indices\ndevices = {mine}\n"
                             f"device count = {counts[name]}")
    for src in names:
        if not set(maps[src]).issubset(names):
            raise ValueError(f"Node {src} has invalid target node names in its device maps\n"
                             f"device maps = {maps[src].keys()}\nnode names = {names}")
        for dst, map_ in maps[src].items():
            if len(set(map_.values())) != len(map_):
                raise ValueError(f"Node {src} has duplicated target devices in its device map for {dst}\n"
                                 f"device map = {map_}")
            if devices[src]:
                if not set(map_).issubset(devices[src]):
                    raise ValueError(f"Node {src} has unexpected source devices in its device map for {dst}\n"
                                     f"device map = {map_}\ndevices = {devices[src]}")
            elif not _valid(map_, counts[src]):
                raise ValueError(f"Node {src} has source devices with invalid indices in its device map for {dst}\n"
                                 f"device map = {map_}\ndevice count = {counts[src]}")
            if devices[dst]:
                if not set(map_.values()).issubset(devices[dst]):
                    raise ValueError(f"Node {src} has unexpected target devices in its device map for {dst}\n"
                                     f"device map = {map_}\ndevices = {devices[dst]}")
            elif not _valid(map_.values(), counts[dst]):
                raise ValueError(f"Node {src} has target devices with invalid indices in its device map for {dst}\n"
                                 f"device map = {map_}\ndevice count = {counts[dst]}")


def reverse_maps(my_name, maps):
    """For each worker whose map sends tensors to ``my_name``: {my device: its device} (how responses go back)."""
    return {src: {v: k for k, v in map_[my_name].items()} for src, map_ in maps.items()
            if src != my_name and my_name in map_}


def device_list(devices, my_maps, reverse):
    """The CUDA devices this worker uses: ``devices`` if given, else every device its maps name on its side."""
    if not devices:
        found = {d for map_ in (*my_maps.values(), *reverse.values()) for d in map_}
        devices = [d for d in found if d.type != "cpu"]
    return sorted(devices, key=lambda d: d.index)


def target(device, device_map, dst_name, response=False):
    """The device a tensor on ``device`` lands on at ``dst_name`` (None: it stays on the CPU); RuntimeError for a
    CUDA tensor whose device the map (``None``: no map toward ``dst_name``) does not name."""
    if device_map is not None and device in device_map:
        return device_map[device]
    if device.type == "cpu":
        return None
    if not response:
        raise DeviceMapError(f"{_NO_MAP}Request device mapping is not available for destination {dst_name} for "
                           f"device {device} but received a tensor on that device.")
    if device_map is None:
        raise DeviceMapError(f"{_NO_MAP}Response device mapping is not available for destination {dst_name}, but "
                           f"found tensor on device: {device}")
    raise DeviceMapError(f"TensorPipe RPC backend only supports CPU tensors by default. Response device mapping is not "
                       f"available for destination {dst_name} for device {device} but received a tensor on that "
                       "device.")


def needed(device_map):
    """Whether pickling for a destination with ``device_map`` must look at tensors' devices: CUDA tensors exist
    only once CuPy is imported; CPU tensors move only when the map names the CPU."""
    return "cupy" in sys.modules or (device_map is not None and any(d.type == "cpu" for d in device_map))


class _Pickler(pickle.Pickler):
    def __init__(self, file, buffer_callback, device_map, dst_name, response):
        super().__init__(file, protocol=5, buffer_callback=buffer_callback)
        self._map, self._dst, self._response = device_map, dst_name, response

    def reducer_override(self, obj):
        from ember import Tensor

        if not isinstance(obj, Tensor) or obj.device.type not in ("cpu", "cuda"):
            return NotImplemented
        to = target(obj.device, self._map, self._dst, self._response)
        if to is None:
            return NotImplemented
        host = obj.detach().cpu() if obj.device.type == "cuda" else obj.detach()
        fn, args = host.__reduce_ex__(5)[:2]
        return _rebuild_on, (fn, args, str(to), obj.requires_grad)


def dumps(obj, buffer_callback, device_map, dst_name, response):
    """``pickle.dumps(obj, 5, buffer_callback=...)`` moving tensors by ``device_map`` (see ``target``)."""
    f = io.BytesIO()
    _Pickler(f, buffer_callback, device_map, dst_name, response).dump(obj)
    return f.getvalue()


def _rebuild_on(fn, args, device, requires_grad):
    t = fn(*args).to(device)
    if requires_grad and not t.requires_grad:
        t.requires_grad_(True)
    return t
