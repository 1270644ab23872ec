"""``GradScaler``: loss scaling for mixed-precision training, with PyTorch's API and per-optimizer state machine."""
import math
import warnings
from collections import abc, defaultdict
from enum import Enum

import numpy as np

import ember
from ember import _dtype as D
from ember._tensor import Tensor

from ._unscale import unscale_cupy, unscale_numpy

__all__ = ["GradScaler", "OptState"]
_CPU = ember.device("cpu")
_F16 = np.dtype(np.float16)
_HOST = {np.ndarray}


def _host_flag(found):
    """A found-inf flag as PyTorch keeps it: a 0-d float32 tensor, 1 or 0."""
    return Tensor._wrap(np.array(float(found), np.float32))


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _update_scale_(scale, tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    """Back off the scale after an inf/NaN step, grow it after ``growth_interval`` clean steps in a row.

    Works on the 0-dim arrays in place with their own array module, so CUDA needs no host sync; the
    products are taken in float64 and rounded to float32 once.
    """
    s, t, f = scale._data, tracker._data, found_inf._data
    xp = np if type(s) is np.ndarray else __import__("cupy")
    found = f > 0
    successful = t + 1
    grow = ~found & (successful == growth_interval)
    with np.errstate(over="ignore"):  # a grown scale past float32's range is inf, and is then not taken
        grown = (s.astype(np.float64) * growth_factor).astype(np.float32)
        backed = (s.astype(np.float64) * backoff_factor).astype(np.float32)
    s[...] = xp.where(found, backed, xp.where(grow & xp.isfinite(grown), grown, s))
    t[...] = xp.where(found | grow, 0, successful)
    scale._vc[0] += 1
    tracker._vc[0] += 1


def _update_scale_host(scale, tracker, found, growth_factor, backoff_factor, growth_interval):
    """``_update_scale_`` for NumPy scalars, with ``found`` a bool."""
    s, t = scale._data, tracker._data
    if found:
        s[...] = np.float32(float(s) * backoff_factor)
        t[...] = 0
    elif t + 1 == growth_interval:
        with np.errstate(over="ignore"):
            grown = np.float32(float(s) * growth_factor)
        if math.isfinite(grown):
            s[...] = grown
        t[...] = 0
    else:
        t[...] = t + 1
    scale._vc[0] += 1
    tracker._vc[0] += 1


class GradScaler:
    """Scales losses so that float16 gradients don't underflow, unscales gradients before the optimizer
    step, skips steps whose gradients hold inf/NaN and adapts the scale (see the seed page amp)."""

    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled and not ember.cuda.is_available():
            warnings.warn("ember.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.", stacklevel=2)
            self._enabled = False
        if self._enabled:
            if not growth_factor > 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if not backoff_factor < 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale = None
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._per_optimizer_states = defaultdict(_fresh_state)

    # ---- the scale, made lazily on the device of the first scaled output ---------------------------
    def _lazy_init_scale_growth_tracker(self, dev):
        self._scale = ember.full((), self._init_scale, dtype=D.float32, device=dev)
        self._growth_tracker = ember.full((), self._init_growth_tracker, dtype=D.int32, device=dev)

    def _check_scale_growth_tracker(self, funcname):
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)
        return self._scale, self._growth_tracker

    def scale(self, outputs):
        """``outputs`` (a tensor, or an iterable of them, nested) multiplied by the scale factor."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale.to(device=outputs.device)
        copies = {}  # the scale on each device met in this call

        def apply(value):
            if isinstance(value, Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(value.device)
                dev = value.device
                if dev not in copies:
                    copies[dev] = self._scale.to(device=dev)
                return value * copies[dev]
            if isinstance(value, abc.Iterable):
                scaled = map(apply, value)
                return type(value)(scaled) if isinstance(value, (list, tuple)) else scaled
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply(outputs)

    # ---- unscaling --------------------------------------------------------------------------------
    def _unscale_grads_(self, optimizer, inv_scale, allow_fp16):
        """Multiply every gradient of ``optimizer`` by ``inv_scale`` (a 0-d float32 array on the scale's device)
        in place, one pass per device and dtype; {device: found_inf, a 0-d float32 tensor}."""
        grads = [g for group in optimizer.param_groups for p in group["params"] if (g := p.grad) is not None]
        arrays = [g._data for g in grads]
        dtypes = {a.dtype for a in arrays}
        if not allow_fp16 and _F16 in dtypes:
            raise ValueError("Attempting to unscale FP16 gradients.")
        for g in grads:
            g._vc[0] += 1  # the arrays are scaled in place below
        if len(dtypes) == 1 and set(map(type, arrays)) == _HOST:  # the common case: no grouping needed
            return {_CPU: _host_flag(unscale_numpy(arrays, float(inv_scale)))}
        per_key = {}  # CPU: numpy dtype; CUDA: (device, dtype) -> the gradients' arrays
        for g, a in zip(grads, arrays):
            per_key.setdefault(a.dtype if type(a) is np.ndarray else (g.device, a.dtype), []).append(a)
        found_per_device = {}
        cpu_found = None
        for key, arrays in per_key.items():
            if type(key) is not tuple:
                cpu_found = unscale_numpy(arrays, float(inv_scale)) or bool(cpu_found)
            else:
                dev = key[0]
                f = found_per_device.get(dev)
                if f is None:
                    f = found_per_device[dev] = ember.zeros((), dtype=D.float32, device=dev)
                unscale_cupy(arrays, Tensor._wrap(inv_scale).to(device=dev)._data, f._data)
        if cpu_found is not None:
            found_per_device[_CPU] = _host_flag(cpu_found)
        return found_per_device

    def unscale_(self, optimizer):
        """Divide the gradients of ``optimizer`` by the scale, recording whether any holds an inf or NaN.

        At most once per optimizer between ``update()`` calls, and before ``step()``.
        """
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        s = self._scale._data  # the reciprocal is taken in float64 and rounded to float32 once
        inv_scale = (1.0 / s.astype(np.float64)).astype(np.float32)
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, False)
        state["stage"] = OptState.UNSCALED

    def _check_inf_per_device(self, optimizer):
        scale, _ = self._check_scale_growth_tracker("_check_inf_per_device")
        one = ember.ones((), dtype=D.float32, device=scale.device)._data
        state = self._per_optimizer_states[id(optimizer)]
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, one, True)
        return state["found_inf_per_device"]

    def _found_inf_per_device(self, optimizer):
        return self._per_optimizer_states[id(optimizer)]["found_inf_per_device"]

    # ---- stepping and updating ---------------------------------------------------------------------
    def step(self, optimizer, *args, **kwargs):
        """Unscale (unless ``unscale_`` ran this iteration), then ``optimizer.step(*args, **kwargs)`` unless a
        gradient held an inf or NaN. Returns what ``optimizer.step`` returned (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if not state["found_inf_per_device"]:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not sum(float(v._data) for v in state["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None):
        """Set the next iteration's scale: ``new_scale`` if given, else backed off after a skipped step or
        grown after ``growth_interval`` clean steps. Call once per iteration, after every ``step``."""
        if not self._enabled:
            return
        scale, tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                scale.fill_(new_scale)
            else:
                reason = ("new_scale should be a float or a 1-element ember.cuda.FloatTensor or ember.FloatTensor "
                          "with requires_grad=False.")
                if not (isinstance(new_scale, Tensor) and new_scale.device.type == self._device
                        and new_scale.numel() == 1 and new_scale.requires_grad is False):
                    raise AssertionError(reason)
                scale.copy_(new_scale.reshape(()))
        else:
            found = [f for state in self._per_optimizer_states.values() for f in state["found_inf_per_device"].values()]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            if type(scale._data) is np.ndarray:  # on the host: no array ops for a handful of scalars
                _update_scale_host(scale, tracker, any(float(f._data) for f in found), self._growth_factor,
                                   self._backoff_factor, self._growth_interval)
            else:
                total = found[0].to(device=scale.device)
                for f in found[1:]:
                    total = total + f.to(device=scale.device)
                _update_scale_(scale, tracker, total, self._growth_factor, self._backoff_factor,
                               self._growth_interval)
        self._per_optimizer_states = defaultdict(_fresh_state)

    # ---- getters, setters, state --------------------------------------------------------------------
    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled); syncs with the GPU on CUDA."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """The five entries scale, growth_factor, backoff_factor, growth_interval, _growth_tracker; {} if disabled."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        """Restore a ``state_dict()``; a no-op when this scaler is disabled."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

    def __getstate__(self):
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError("A GradScaler instance may only be pickled at the beginning of an iteration, "
                                     "or at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
