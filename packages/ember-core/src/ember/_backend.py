"""Which array library a tensor's array belongs to, and lazy access to CuPy.

``import ember`` never imports CuPy: the first CUDA tensor does.
"""
import numpy as np

from ._device import CPU, device
from ._meta_array import MetaArray, meta_xp, no_data

META = device("meta")

_cupy = None


def cupy():
    """The cupy module, imported on first use; RuntimeError naming the fix when it is missing."""
    global _cupy
    if _cupy is None:
        try:
            import cupy as cp
        except ImportError as e:
            raise RuntimeError("CUDA is not available: CUDA tensors need CuPy: pip install 'ember-core[cuda12]' "
                               f"(or [cuda13]) ({e})") from None
        _cupy = cp
    return _cupy


def xp_of(arr):
    """NumPy for host arrays, CuPy for device arrays (and meta arrays' few constructors for meta arrays)."""
    if type(arr) is np.ndarray:
        return np
    return meta_xp if type(arr) is MetaArray else cupy()


def is_array(arr):
    """Whether ``arr`` is a NumPy or CuPy array (not a meta array, nor a sparse or quantized tensor's payload)."""
    return type(arr) is np.ndarray or type(arr).__module__.partition(".")[0] == "cupy"


def is_host(arr):
    return type(arr) is np.ndarray


def device_of(arr):
    if type(arr) is np.ndarray:
        return CPU
    if type(arr) is MetaArray:
        return META
    return device("cuda", arr.device.id)


def to_device(arr, dev):
    """Copy ``arr`` to ``dev`` (an ember.device); returns ``arr`` itself if it is there already."""
    if dev.type == "cpu":
        return arr if type(arr) is np.ndarray else arr.get()
    if dev.type == "meta":  # (shape and dtype only: a meta array is a copy that holds no data)
        return arr if type(arr) is MetaArray else MetaArray(arr.shape, arr.dtype)
    if dev.type != "cuda":
        raise RuntimeError(f"ember has no arrays on device type '{dev.type}'")
    if type(arr) is MetaArray:
        no_data()
    from . import cuda
    cuda._lazy_init()
    cp = cupy()
    index = cp.cuda.runtime.getDevice() if dev.index is None else dev.index
    if type(arr) is not np.ndarray and arr.device.id == index:
        return arr
    with cp.cuda.Device(index):
        return cp.asarray(arr)


def shares_memory(a, b):
    """Whether array ``a`` may view ``b``'s memory (a cheap bounds test, no element scan)."""
    if type(a) is np.ndarray:
        return type(b) is np.ndarray and np.may_share_memory(a, b)
    if type(b) is np.ndarray:  # (a stand-in over a host array: a float8 view of b's bytes)
        arr = getattr(a, "arr", None)
        return type(arr) is np.ndarray and np.may_share_memory(arr, b)
    return a.data.mem is b.data.mem
