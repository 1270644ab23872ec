"""The autocast dispatcher layer, and the wrappers that give composed functions the same treatment.

Registry ops reach the layer by name. Functions that ember composes from other ops (``linear``,
``mse_loss``, ``linalg.cond``, ...) while PyTorch has them as single ops are wrapped at their module
attribute: the wrapper casts the arguments by the function's policy and runs its body with autocast
excluded, so the ops inside run in the types they were given, as inside one PyTorch op.
"""
import functools
import importlib.abc
import importlib.util
import sys

import numpy as np

from ember import _dtype as D
from ember._ops.conversion import _to_copy
from ember._registry import REGISTRY
from ember._tensor import Tensor

from . import _state
from ._policy import CONDITIONS, POLICY
from ._state import ACTIVE, STATE

BCE_MESSAGE = ("torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
               "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
               "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
               "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
               "safe to autocast.")
_ndarray = np.ndarray
_F32, _F64 = D.float32, D.float64
_KEYS = set(POLICY["cpu"]) | set(POLICY["cuda"])  # every name some device's policy covers


def device_type(t):
    return "cpu" if type(t._data) is _ndarray else "cuda"


def _first_tensor(args, kwargs):
    for a in args:
        if isinstance(a, Tensor):
            return a
        if type(a) in (list, tuple):
            for x in a:
                if isinstance(x, Tensor):
                    return x
    for v in kwargs.values():
        if isinstance(v, Tensor):
            return v
    return None


def _eligible(t, dev):
    d = t.dtype
    return d.is_floating_point and d is not _F64 and device_type(t) == dev


def _widest(args, kwargs, dev, lower):
    """The promote policy's dtype: float32 if any eligible input is float32, else the region's dtype."""
    for a in (*args, *kwargs.values()):
        for t in (a if type(a) in (list, tuple) else (a,)):
            if isinstance(t, Tensor) and _eligible(t, dev):
                if t.dtype is _F32:
                    return _F32
                if t.dtype is not lower:
                    raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
    return lower


def _cast(t, dtype, dev, st):
    if not isinstance(t, Tensor) or t.dtype is dtype or not _eligible(t, dev):
        return t
    if (st.cache_enabled and dtype is st.dtype[dev] and t.dtype is _F32 and t._rg and t.grad_fn is None
            and t._base is None):
        hit = st.cache.get(id(t))
        if hit is None or hit[0] is not t:
            hit = st.cache[id(t)] = (t, _to_copy(t, dtype=dtype))
        return hit[1]
    return _to_copy(t, dtype=dtype)  # what t.to(dtype) runs, without its argument parsing


def _cast_all(a, dtype, dev, st):
    if type(a) in (list, tuple):
        return type(a)(_cast(x, dtype, dev, st) for x in a)
    return _cast(a, dtype, dev, st)


def autocast_arguments(name, args, kwargs, st):
    """(args, kwargs) cast by the policy of op ``name``, or None when autocast leaves the call alone."""
    first = _first_tensor(args, kwargs)
    if first is None:
        return None
    dev = device_type(first)
    if not st.enabled[dev]:
        return None
    kind = POLICY[dev].get(name)
    if kind is None or kwargs.get("dtype") is not None:
        return None
    cond = CONDITIONS.get((dev, name))
    if cond is not None and not cond(args, kwargs):
        return None
    lower = st.dtype[dev]
    if kind == "lower":
        dtype = lower
    elif kind == "fp32":
        dtype = _F32
    elif kind == "promote":
        dtype = _widest(args, kwargs, dev, lower)
    else:
        raise RuntimeError(BCE_MESSAGE)
    return (tuple(_cast_all(a, dtype, dev, st) for a in args),
            {k: _cast_all(v, dtype, dev, st) for k, v in kwargs.items()})


def autocast_layer(call, call_next):
    """Dispatcher layer (order 100): casts the arguments of eligible calls by the device's policy table."""
    st = STATE
    name = call.op.name
    if st.excluded or call.mode is not None or not st.on or name not in _KEYS:  # most ops have no policy
        return call_next(call)
    cast = autocast_arguments(name, call.args, call.kwargs, st)
    if cast is not None:
        call.args, call.kwargs = cast
    return call_next(call)


_state._layer.append(autocast_layer)


def composite(name, fn):
    """``fn`` (a function composed of ops) autocast as the single op ``name``."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not ACTIVE[0]:
            return fn(*args, **kwargs)
        st = STATE
        if not st.on or st.excluded:
            return fn(*args, **kwargs)
        cast = autocast_arguments(name, args, kwargs, st)
        if cast is None:
            return fn(*args, **kwargs)
        st.excluded += 1
        try:
            return fn(*cast[0], **cast[1])
        finally:
            st.excluded -= 1

    wrapper.__ember_autocast__ = fn
    return wrapper


# module -> prefix of its functions' keys; the functional module's private files are patched too, so that
# functions calling each other by their module-level names see the wrappers
COMPOSITE_MODULES = {"ember": "", "ember.linalg": "linalg_", "ember.fft": "fft_", "ember.nn.functional": ""}


def wrap_module(module, prefix):
    """Wrap the functions of ``module`` whose key is in a policy table and is not a registry op."""
    wrapped = {}
    for attr, fn in list(vars(module).items()):
        key = prefix + attr
        if (key in _KEYS and key not in REGISTRY and callable(fn) and getattr(fn, "op", None) is None
                and not hasattr(fn, "__ember_autocast__") and not isinstance(fn, type)):
            wrapped[fn] = composite(key, fn)
            setattr(module, attr, wrapped[fn])
    if module.__name__ == "ember.nn.functional":
        for name, sub in list(sys.modules.items()):
            if name.startswith("ember.nn.functional.") and sub is not None:
                for attr, fn in list(vars(sub).items()):
                    if callable(fn) and fn in wrapped:
                        setattr(sub, attr, wrapped[fn])


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps a module of ``COMPOSITE_MODULES`` right after it is first imported (they load lazily)."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in COMPOSITE_MODULES:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_wrap(module):
            exec_module(module)
            wrap_module(module, COMPOSITE_MODULES[fullname])

        spec.loader = _Loader(loader, exec_and_wrap)
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, exec_module):
        self._inner, self.exec_module = inner, exec_module

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def install_wrappers():
    for name, prefix in COMPOSITE_MODULES.items():
        module = sys.modules.get(name)
        if module is not None:
            wrap_module(module, prefix)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
