__path__ = __import__("pkgutil").extend_path(__path__, __name__)
__doc__ = """``ember.cuda``: CUDA devices, streams, events and memory statistics, over CuPy.

Importing this module imports nothing from CuPy: ``is_available()`` asks the CUDA driver library
directly (through ctypes), and CuPy is imported by ``_lazy_init()``, on the first call that needs a
GPU. Functions that need a GPU raise ``RuntimeError("CUDA is not available: <cause>")`` without one;
the memory statistics, ``empty_cache``, ``is_bf16_supported``, seeding and the no-op forms of the context
managers (``device(-1)``, ``stream(None)``, ``device_of(cpu_tensor)``) work without a GPU, as in
PyTorch.
"""
import ctypes
import importlib.util
import os
import threading

from .. import _backend, _random
from .. import _device as _dev

has_half = True
has_magma = False

_initialized = False
_in_bad_fork = False
_init_lock = threading.Lock()
_probe = None  # (number of GPUs, why there are none) once the driver was asked


class OutOfMemoryError(RuntimeError):
    """CUDA ran out of memory while ember allocated a device array."""


def _ask_driver():
    if importlib.util.find_spec("cupy") is None:
        return 0, "CuPy is not installed: pip install 'ember-core[cuda12]' (or [cuda13])"
    try:
        lib = ctypes.CDLL("nvcuda.dll" if os.name == "nt" else "libcuda.so.1")
    except OSError:
        return 0, "no NVIDIA driver found (the CUDA driver library libcuda cannot be loaded)"
    count = ctypes.c_int(0)
    err = lib.cuInit(0)
    if err == 0:
        err = lib.cuDeviceGetCount(ctypes.byref(count))
    if err == 100:  # CUDA_ERROR_NO_DEVICE
        return 0, f"no CUDA GPU found (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
    if err != 0:
        name = ctypes.c_char_p()
        lib.cuGetErrorName(err, ctypes.byref(name))
        return 0, f"the CUDA driver failed to initialise ({(name.value or b'error').decode()} {err})"
    return count.value, "no CUDA GPU found"


def _driver_probe():
    global _probe
    if _probe is None:
        try:
            _probe = _ask_driver()
        except Exception as e:  # a broken driver install must not make is_available() raise
            _probe = 0, f"probing the CUDA driver failed: {type(e).__name__}: {e}"
    return _probe


def is_available():
    """True when CuPy is installed and the driver reports at least one GPU (cheap: CuPy is not imported)."""
    return _driver_probe()[0] > 0


def device_count():
    return _driver_probe()[0]


def is_initialized():
    return _initialized


def _after_fork_in_child():
    global _in_bad_fork
    _in_bad_fork = _in_bad_fork or _initialized


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _lazy_init():
    """Import CuPy and set up ember's memory pool; RuntimeError naming the cause when CUDA is unusable."""
    global _initialized, _probe
    if _initialized:
        return
    with _init_lock:
        if _initialized:
            return
        if _in_bad_fork:
            raise RuntimeError("Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
                               "multiprocessing, you must use the 'spawn' start method")
        count, why = _driver_probe()
        if not count:
            raise RuntimeError(f"CUDA is not available: {why}")
        cp = _backend.cupy()
        try:
            cp.cuda.runtime.getDeviceCount()
        except cp.cuda.runtime.CUDARuntimeError as e:  # e.g. the driver is older than CuPy's CUDA runtime
            _probe = 0, f"CuPy cannot use the CUDA driver ({e})"
            raise RuntimeError(f"CUDA is not available: {_probe[1]}") from None
        from . import memory
        memory._install(cp)
        _initialized = True
    from ..backends import cuda as backends_cuda
    backends_cuda._apply()
    random._run_queued()


def init():
    """Initialise CUDA now rather than on first use."""
    _lazy_init()


def _cupy():
    _lazy_init()
    return _backend.cupy()


def current_device():
    return _cupy().cuda.runtime.getDevice()


def _parse(device):
    """The index named by an int, 'cuda:1' or an ember.device (None: no index), without touching CUDA."""
    if isinstance(device, str):
        device = _dev.device(device)
    if isinstance(device, _dev.device):
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        return device.index
    if device is not None and (not isinstance(device, int) or isinstance(device, bool)):
        raise ValueError(f"Expected a cuda device, but got: {device!r}")
    return device


def _index(device):
    """The index of a GPU that exists, for ``device`` as ``_parse`` takes it; None is the current device."""
    idx = _parse(device)
    if idx is None:
        return current_device()
    _lazy_init()
    if not 0 <= idx < device_count():
        raise RuntimeError(f"CUDA error: invalid device ordinal {idx} (ember sees {device_count()} GPU(s))")
    return idx


def set_device(device):
    """Make ``device`` the current GPU; a negative index does nothing."""
    idx = _parse(device)
    if idx is not None and idx >= 0:
        idx = _index(idx)
        _backend.cupy().cuda.runtime.setDevice(idx)


class device:
    """Context manager that makes ``device`` the current GPU (``None`` or a negative index: no change)."""

    def __init__(self, device):
        idx = _parse(device)
        self.idx = -1 if idx is None else idx
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            runtime = _cupy().cuda.runtime
            self.prev_idx = runtime.getDevice()
            if self.prev_idx != _index(self.idx):
                runtime.setDevice(self.idx)
        return self

    def __exit__(self, *exc):
        if self.prev_idx >= 0 and self.prev_idx != self.idx:
            _backend.cupy().cuda.runtime.setDevice(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the GPU of tensor ``obj`` current (no change for a CPU tensor)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else -1)


_on = device  # for functions whose ``device`` argument hides the class


def synchronize(device=None):
    """Wait for all work queued on ``device`` to finish."""
    with _on(_index(device)):
        _backend.cupy().cuda.runtime.deviceSynchronize()


class _CudaDeviceProperties:
    __slots__ = ("name", "major", "minor", "total_memory", "multi_processor_count", "L2_cache_size",
                 "warp_size", "max_threads_per_multi_processor", "regs_per_multiprocessor", "uuid")

    def __init__(self, p):
        uuid = p.get("uuid", b"")
        self.name = p["name"].decode() if isinstance(p["name"], bytes) else p["name"]
        self.major, self.minor = p["major"], p["minor"]
        self.total_memory = p["totalGlobalMem"]
        self.multi_processor_count = p["multiProcessorCount"]
        self.L2_cache_size = p.get("l2CacheSize", 0)
        self.warp_size = p.get("warpSize", 32)
        self.max_threads_per_multi_processor = p.get("maxThreadsPerMultiProcessor", 0)
        self.regs_per_multiprocessor = p.get("regsPerMultiprocessor", 0)
        self.uuid = uuid.hex() if isinstance(uuid, bytes) else str(uuid)

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // 2**20}MB, multi_processor_count={self.multi_processor_count}, "
                f"uuid={self.uuid}, L2_cache_size={self.L2_cache_size // 2**20}MB)")


_properties = {}


def get_device_properties(device=None):
    idx = _index(device)
    if idx not in _properties:
        _properties[idx] = _CudaDeviceProperties(_backend.cupy().cuda.runtime.getDeviceProperties(idx))
    return _properties[idx]


def get_device_name(device=None):
    return get_device_properties(device).name


def get_device_capability(device=None):
    p = get_device_properties(device)
    return p.major, p.minor


def is_bf16_supported(including_emulation=True):
    """True on GPUs of compute capability 8.0 and newer (ember does not emulate bfloat16 on older ones)."""
    return is_available() and get_device_capability()[0] >= 8


def is_tf32_supported():
    return is_available() and get_device_capability()[0] >= 8


def can_device_access_peer(device, peer_device):
    return bool(_backend.cupy().cuda.runtime.deviceCanAccessPeer(_index(device), _index(peer_device)))


def mem_get_info(device=None):
    """(free, total) bytes of ``device`` as the driver reports them."""
    with _on(_index(device)):
        return _backend.cupy().cuda.runtime.memGetInfo()


def current_blas_handle():
    """The cuBLAS handle of the current device and thread, with ember's math mode applied."""
    from ..backends import cuda as backends_cuda
    return backends_cuda._prepare_matmul(None)


def current_solver_handle():
    """The cuSOLVER handle of the current device and thread."""
    return _cupy().cuda.device.get_cusolver_handle()


from .._legacy_types import CUDA_TYPES as _legacy_types  # noqa: E402
from . import random  # noqa: E402
from .memory import *  # noqa: E402,F401,F403
from .random import *  # noqa: E402,F401,F403
from .streams import *  # noqa: E402,F401,F403

globals().update(_legacy_types)  # ember.cuda.FloatTensor, ... (constructing one needs a GPU)


def __getattr__(name):
    if name == "default_generators":  # one per GPU, made on first use (none without a GPU)
        return tuple(_random.cuda_default_generator(i) for i in range(device_count()))
    from .._extensions import lazy_submodule
    return lazy_submodule(__name__, name)  # subpackages of other distributions (ember.cuda.amp)
