"""Thread-local autocast state and the torch-namespace functions that read and write it.

Each thread has its own enabled flags and lower-precision dtypes per device type, nesting depth, cache
switch and weight-cast cache. A thread with any device type enabled counts once in ``ACTIVE``: while
that count is above zero the autocast layer is registered and every op call takes the dispatcher's
layered path (``force_slow``); at zero the layer is gone and the fast path does no autocast work.
"""
import threading

from ember import _dispatch
from ember import _dtype as D
from ember._device import device as _device

DEVICE_TYPES = ("cpu", "cuda")
# ember has no IPU or XLA tensors: their flags and dtypes are kept, as PyTorch keeps them, but change nothing
DEFAULT_DTYPE = {"cpu": D.bfloat16, "cuda": D.float16, "ipu": D.float16, "xla": D.bfloat16}
ACTIVE = [0]  # threads with an enabled autocast device type
_lock = threading.Lock()
_layer = []  # the layer handler, set by _layer.py (avoids an import cycle)


class _State(threading.local):
    def __init__(self):
        self.enabled = dict.fromkeys(DEFAULT_DTYPE, False)
        self.dtype = dict(DEFAULT_DTYPE)
        self.nesting = 0
        self.cache_enabled = True
        self.cache = {}  # id(float32 leaf) -> (leaf, its lower-precision cast)
        self.excluded = 0  # > 0 inside an autocast op made of other ops: those run as called
        self.on = False  # this thread counts in ACTIVE


STATE = _State()


def _device_type(device_type):
    """The device type named by ``device_type`` (a string), checked as ``ember.device`` checks it."""
    return device_type if device_type in DEFAULT_DTYPE else _device(device_type).type


def _sync(st):
    on = st.enabled["cpu"] or st.enabled["cuda"]
    if on == st.on:
        return
    st.on = on
    with _lock:
        ACTIVE[0] += 1 if on else -1
        if on and ACTIVE[0] == 1:
            _dispatch.register_layer("autocast", 100, _layer[0])
        elif not on and ACTIVE[0] == 0:
            _dispatch.unregister_layer("autocast")
    _dispatch.force_slow(on)


def is_autocast_enabled(device_type=None):
    """Whether autocast is on for ``device_type`` in this thread (without an argument: for CUDA)."""
    return STATE.enabled.get(_device_type(device_type or "cuda"), False)


def set_autocast_enabled(device_type, enabled=None):
    """``set_autocast_enabled(device_type, enabled)``; the old form ``set_autocast_enabled(enabled)`` means CUDA."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    dev = _device_type(device_type)
    if dev not in DEVICE_TYPES:
        raise RuntimeError(f"User specified an unsupported autocast device_type '{dev}'")
    STATE.enabled[dev] = bool(enabled)
    _sync(STATE)


def get_autocast_dtype(device_type):
    """The lower-precision dtype autocast uses on ``device_type`` in this thread."""
    dev = _device_type(device_type)
    return STATE.dtype.get(dev, D.float16)


def set_autocast_dtype(device_type, dtype):
    STATE.dtype[_device_type(device_type)] = dtype


def is_autocast_cpu_enabled():
    return STATE.enabled["cpu"]


def set_autocast_cpu_enabled(enabled):
    set_autocast_enabled("cpu", enabled)


def get_autocast_cpu_dtype():
    return STATE.dtype["cpu"]


def set_autocast_cpu_dtype(dtype):
    STATE.dtype["cpu"] = dtype


def get_autocast_gpu_dtype():
    return STATE.dtype["cuda"]


def set_autocast_gpu_dtype(dtype):
    STATE.dtype["cuda"] = dtype


def autocast_increment_nesting():
    STATE.nesting += 1
    return STATE.nesting


def autocast_decrement_nesting():
    STATE.nesting -= 1
    return STATE.nesting


def is_autocast_cache_enabled():
    return STATE.cache_enabled


def set_autocast_cache_enabled(enabled):
    STATE.cache_enabled = bool(enabled)


def clear_autocast_cache():
    """Drop this thread's cached casts of weights (done when the outermost autocast region exits)."""
    STATE.cache.clear()


def _legacy(device_type):
    """The deprecated per-device spellings (``is_autocast_xla_enabled``, ``set_autocast_ipu_dtype``, ...)."""
    def is_enabled():
        return STATE.enabled[device_type]

    def set_enabled(enabled):
        STATE.enabled[device_type] = bool(enabled)
        _sync(STATE)

    def get_dtype():
        return STATE.dtype[device_type]

    def set_dtype(dtype):
        STATE.dtype[device_type] = dtype

    return {f"is_autocast_{device_type}_enabled": is_enabled, f"set_autocast_{device_type}_enabled": set_enabled,
            f"get_autocast_{device_type}_dtype": get_dtype, f"set_autocast_{device_type}_dtype": set_dtype}


LEGACY = {**_legacy("ipu"), **_legacy("xla")}

TORCH_FUNCTIONS = ("is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype",
                   "is_autocast_cpu_enabled", "set_autocast_cpu_enabled", "get_autocast_cpu_dtype",
                   "set_autocast_cpu_dtype", "get_autocast_gpu_dtype", "set_autocast_gpu_dtype",
                   "autocast_increment_nesting", "autocast_decrement_nesting", "is_autocast_cache_enabled",
                   "set_autocast_cache_enabled", "clear_autocast_cache")
