"""Small pieces the algorithms share: argument checks, state creation, gradient preprocessing."""
import numpy as np

from ember import _backend
from ember._tensor import Tensor

from .optimizer import _value, scalar_tensor, zeros_state

__all__ = ["check", "check_betas", "next_step", "grad_of", "scalar_tensor", "zeros_state", "xp", "lr_of", "done",
           "operand", "sparse_entries"]


def check(cond, what, value):
    if not cond:
        raise ValueError(f"Invalid {what}: {value}")


def check_betas(betas):
    for i, b in enumerate(betas[:2]):
        check(0.0 <= _value(b) < 1.0, f"beta parameter at index {i}", b)


def next_step(state, p):
    """Increment the state's step counter (a 0-d tensor, as in PyTorch) and return it as a float."""
    st = state.get("step")
    if not isinstance(st, Tensor):
        st = state["step"] = scalar_tensor(float(st or 0), p)
    st._data += 1
    return float(st._data)


def grad_of(g, p, group, weight_decay=None):
    """The gradient array negated under ``maximize`` and with L2 weight decay added (a new array when
    changed: ``p.grad`` itself is never modified)."""
    if group.get("maximize"):
        g = -g
    wd = group.get("weight_decay", 0) if weight_decay is None else weight_decay
    if wd:
        g = g + wd * p._data
    return np.asarray(g) if isinstance(g, np.generic) else g  # (ufuncs make NumPy scalars of 0-d arrays)


def sparse_entries(g, group):
    """(where, values) of a sparse COO gradient, coalesced: an index tuple into the parameter naming each position
    once, and the gradient there (negated under ``maximize``)."""
    g = g.coalesce()
    values = g._values()._data
    return tuple(g._indices()._data), -values if group.get("maximize") else values


def operand(x, arr, cache):
    """``x`` as a ufunc operand for ``arr``: on NumPy a 0-d array of its dtype (the same rounding as the Python
    number, and cheaper per call), cached in ``cache`` by dtype; on CuPy the number itself."""
    if type(arr) is not np.ndarray:
        return x
    a = cache.get(arr.dtype)
    if a is None:
        a = cache[arr.dtype] = np.array(x, arr.dtype)
    return a


def xp(arr):
    return _backend.xp_of(arr)


def lr_of(group):
    return _value(group["lr"])


done = Tensor._bump  # done(p) marks an in-place update of p for autograd's saved-tensor checks
