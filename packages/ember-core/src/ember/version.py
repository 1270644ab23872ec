"""``ember.version``: what programs read from ``torch.version`` to describe the build they run on.

``cuda`` is the CUDA runtime version of the installed CuPy as PyTorch spells it ("12.4"), or None without CuPy
(as for a CPU-only PyTorch build); ember has no ROCm build, so ``hip`` is None.
"""
import importlib.util

from ._version import __version__  # noqa: F401

hip = None
debug = False


def __getattr__(name):
    if name == "cuda":  # read on first use: finding it loads CuPy's runtime bindings
        return _cuda_version()
    raise AttributeError(f"module 'ember.version' has no attribute '{name}'")


def _cuda_version():
    if importlib.util.find_spec("cupy") is None:
        return None
    try:
        from cupy.cuda import runtime
        v = runtime.runtimeGetVersion()
    except Exception:  # noqa: BLE001 (CuPy without its CUDA libraries: no usable runtime)
        return None
    return f"{v // 1000}.{v % 1000 // 10}"
