"""Process-wide settings of the torch namespace (thread counts, deterministic algorithms, the float32 matmul
precision, the deprecated default tensor type) and the torch-namespace function forms of Tensor methods that
are not ops of their own (``torch.detach``, ``torch.fill_``, ``torch.is_signed``, ...).

Threads. ember computes through NumPy (CPU) and CuPy (CUDA); the only CPU thread pool it uses is that of the
BLAS library NumPy links (OpenBLAS, MKL, ...), which runs matmuls, convolutions and linear algebra.
``set_num_threads`` sets that pool's size through ``threadpoolctl`` when it is installed (it is imported on
first use). Without it the number is only recorded (``get_num_threads`` reports it) and a warning says so:
the BLAS pool's size can then only be chosen before Python starts, with ``OMP_NUM_THREADS`` or
``OPENBLAS_NUM_THREADS``. ember has no inter-op thread pool; the inter-op count is recorded, settable once,
as in PyTorch.

Determinism. ember's NumPy implementations are deterministic (no atomics, fixed reduction orders), so the
flags of ``use_deterministic_algorithms`` are kept for code that reads them back and change no result on
the CPU. On CUDA the scatter-add style kernels accumulate with atomics, whose float rounding order varies
from run to run; ember does not refuse them in deterministic mode.
"""
import os
import warnings

from . import _dtype as D
from . import _factory, _legacy_types
from ._tensor import Tensor
from .backends.cuda import get_float32_matmul_precision, set_float32_matmul_precision

__all__ = ["set_num_threads", "get_num_threads", "set_num_interop_threads", "get_num_interop_threads",
           "init_num_threads", "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
           "get_deterministic_debug_mode", "get_float32_matmul_precision", "set_float32_matmul_precision",
           "set_default_tensor_type", "detach", "detach_", "fill_", "zero_", "resize_as_", "as_strided_", "get_device",
           "is_same_size", "is_signed", "is_inference", "is_distributed"]

_state = {"threads": None, "interop": None, "deterministic": False, "warn_only": False}


def _cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _blas_pools(fresh=False):
    """threadpoolctl's controller of the loaded BLAS libraries, or None when threadpoolctl is missing.

    Building a controller scans every loaded library (~2 ms), so readers share one; setters rescan, to
    reach BLAS libraries loaded since (the shared one reads live thread counts either way)."""
    if fresh or "pools" not in _state:
        try:
            import threadpoolctl
        except ImportError:
            _state["pools"] = None
        else:
            _state["pools"] = threadpoolctl.ThreadpoolController().select(user_api="blas")
    return _state["pools"]


def _positive(name, n):
    if isinstance(n, bool) or not isinstance(n, int):
        raise RuntimeError(f"{name} expects an int, but got {type(n).__name__}")
    if n <= 0:
        raise RuntimeError(f"{name} expects a positive integer")


def set_num_threads(int):  # noqa: A002 - PyTorch's parameter name
    """Set the number of threads NumPy's BLAS uses (recorded only when threadpoolctl is not installed)."""
    _positive("set_num_threads", int)
    _state["threads"] = int
    pools = _blas_pools(fresh=True)
    if pools is None:
        warnings.warn("set_num_threads: threadpoolctl is not installed, so the thread count of NumPy's BLAS is "
                      "unchanged; set OMP_NUM_THREADS or OPENBLAS_NUM_THREADS before starting Python instead",
                      UserWarning, stacklevel=2)
    else:
        pools.limit(limits=int)


def get_num_threads():
    """The number of threads NumPy's BLAS uses (or the number last set, without threadpoolctl)."""
    pools = _blas_pools()
    if pools is not None and pools.info():
        return max(p["num_threads"] for p in pools.info())
    return _state["threads"] or _cpu_count()


def set_num_interop_threads(int):  # noqa: A002
    """Record the inter-op thread count (ember runs ops one after another); allowed once, as in PyTorch."""
    _positive("set_num_interop_threads", int)
    if _state["interop"] is not None:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work has started or "
                           "set_num_interop_threads called")
    _state["interop"] = int


def get_num_interop_threads():
    """The recorded inter-op thread count (by default the number of usable CPUs)."""
    return _state["interop"] or _cpu_count()


def init_num_threads():
    """Nothing to do: the BLAS thread count is process-wide, not per thread (PyTorch sets up OpenMP here)."""


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Record whether deterministic algorithms are required (ember's CPU ops always are)."""
    if not isinstance(mode, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'mode' (position 1) must be bool, not "
                        f"{type(mode).__name__}")
    _state["deterministic"], _state["warn_only"] = mode, bool(warn_only)


def are_deterministic_algorithms_enabled():
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _state["deterministic"] and _state["warn_only"]


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode):
    """The determinism flags as one setting: 0/"default" off, 1/"warn" warn only, 2/"error" required."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got "
                               f"{debug_mode}")
        debug_mode = _DEBUG_MODES[debug_mode]
    elif isinstance(debug_mode, int) and not isinstance(debug_mode, bool):
        if debug_mode not in (0, 1, 2):
            raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    else:
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    if not _state["deterministic"]:
        return 0
    return 1 if _state["warn_only"] else 2


def set_default_tensor_type(t):
    """Deprecated: set the default dtype (and for CUDA types the default device) from a legacy tensor type,
    ``ember.DoubleTensor`` or a name such as ``"torch.DoubleTensor"``."""
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.", UserWarning,
                  stacklevel=2)
    if isinstance(t, _legacy_types.LegacyTensorType):
        dtype, device_type = t.dtype, t._device_type
    elif isinstance(t, str):
        try:
            dtype, device_type = _legacy_types.parse(t)
        except ValueError:
            raise TypeError(f"invalid type: '{t}'") from None
    else:
        raise TypeError("invalid type object: only floating-point types are supported as the default type")
    if not dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    D.set_default_dtype(dtype)
    _factory.set_default_device("cuda" if device_type == "cuda" else None)


# ---- function forms of Tensor methods -----------------------------------------------------------
def detach(input):
    return input.detach()


def detach_(input):
    return input.detach_()


def fill_(input, value):
    return input.fill_(value)


def zero_(input):
    if not isinstance(input, Tensor):
        raise TypeError(f"zero_(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    return input.zero_()


def resize_as_(input, the_template, *, memory_format=None):
    return input.resize_as_(the_template)


def as_strided_(input, size, stride, storage_offset=None):
    return input.as_strided_(size, stride, storage_offset)


def get_device(input):
    return input.get_device()


def is_same_size(input, other):
    return tuple(input.shape) == tuple(other.shape)


def is_signed(input):
    return input.is_signed()


def is_inference(input):
    """Whether ``input`` was made in inference mode (ember-autograd's flag; False without it)."""
    method = getattr(input, "is_inference", None)
    return bool(method()) if method is not None else False


def is_distributed(input):
    return False
