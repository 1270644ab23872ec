"""Moving a tensor between dtypes and devices (``Tensor.to`` and friends run through this op)."""
from .. import _backend
from .. import _dtype as D
from .._registry import op


@op("_to_copy", function=False, method=False)
def _to_copy(xp, input, *, dtype=None, device=None):
    """A copy of ``input`` with the given dtype and/or on the given device."""
    arr = _backend.to_device(input, device) if device is not None else input
    if dtype is not None:
        return arr.astype(D.storage(dtype))
    return arr.copy() if arr is input else arr


@_to_copy.vjp
def _(ctx, g):
    x = ctx.args[0]
    return (g.to(dtype=x.dtype, device=x.device),)
