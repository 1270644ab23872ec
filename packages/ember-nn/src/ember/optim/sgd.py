"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay; sparse gradients
(sparse embeddings') without weight decay, as in PyTorch."""
import numpy as np

from ember._blas import AXPY as _AXPY
from ember._blas import DATA as _DATA
from ember._blas import INT as _INT
from ember._blas import ONE as _ONE
from ember._blas import data as _data
from ember._tensor import Tensor

from ._common import check, grad_of, lr_of, operand, sparse_entries
from .optimizer import Optimizer, _value

__all__ = ["SGD"]


class SGD(Optimizer):
    """``p -= lr * d`` where ``d`` is the gradient (plus ``weight_decay * p``), optionally passed through a
    momentum buffer ``b = momentum * b + (1 - dampening) * d`` (Nesterov: ``d + momentum * b``)."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False,
                 foreach=None, differentiable=False, fused=None):
        check(_value(lr) >= 0.0, "learning rate", lr)
        check(momentum >= 0.0, "momentum value", momentum)
        check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        state = self.state
        for group in self.param_groups:
            lr, momentum, dampening, nesterov = lr_of(group), group["momentum"], group["dampening"], group["nesterov"]
            adjust = group["maximize"] or group["weight_decay"]
            lrs, moms, sizes = {}, {}, {}  # the numbers as ufunc operands per dtype; sizes as BLAS integers
            # per dtype: axpy and its factors for the update (-lr) and the momentum buffer (1 - dampening)
            blas = {dtype: (axpy, real(-lr), real(1 - dampening)) for dtype, (axpy, real) in _AXPY.items()}
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                p._vc[0] += 1  # p is updated in place below (done(p), inlined)
                if g.is_sparse:
                    if group["weight_decay"]:
                        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
                    if momentum == 0:  # only the rows the gradient names move
                        at, values = sparse_entries(g, group)
                        p._data[at] -= lr * values
                        continue
                    # (PyTorch's momentum buffer is sparse, holding every row touched so far; the same values kept
                    # dense here)
                    d = g.to_dense()._data
                    d = -d if group["maximize"] else d
                else:
                    d = g._data
                    if adjust:
                        d = grad_of(d, p, group)
                if momentum != 0:
                    s = state[p]
                    buf = s.get("momentum_buffer")
                    if buf is None:
                        b = d.copy(order="K")  # (in the gradient's layout: a channels-last one too)
                        s["momentum_buffer"] = Tensor._wrap(b)
                    else:
                        b = buf._data
                        b *= operand(momentum, b, moms)
                        # b += (1 - dampening) * d: a BLAS axpy (threaded, unlike the ufuncs) where it may
                        if not _axpy(blas, 2, d, b, sizes):
                            b += d if dampening == 0 else (1 - dampening) * d
                    d = d + momentum * b if nesterov else b
                if lr and not _axpy(blas, 1, d, p._data, sizes):  # p -= lr * d: one pass (the ufuncs take two)
                    a = p._data
                    a -= d if lr == 1 else operand(lr, d, lrs) * d
        return loss


def _axpy(blas, k, x, y, sizes):
    """``y += alpha * x`` in one BLAS call (alpha: entry ``k`` of ``y``'s dtype in ``blas``) for aligned, writeable
    NumPy arrays (not CuPy, not NumPy scalars) of one dtype and size, row-major or dense in one same layout
    (channels-last parameters and their gradients), the same or disjoint; False, with nothing done, otherwise."""
    if not (type(y) is np.ndarray and type(x) is np.ndarray and (entry := blas.get(y.dtype)) and x.dtype is y.dtype
            and (n := y.size) == x.size and y.flags.aligned and y.flags.writeable and x.flags.aligned and (
                y.flags.c_contiguous and x.flags.c_contiguous or x.strides == y.strides and _dense(y))):
        return False
    px, py = _data(id(x) + _DATA), _data(id(y) + _DATA)
    if not (x.base is None and y.base is None or _apart(px.value, py.value, y.nbytes)):
        return False
    entry[0](sizes.get(n) or sizes.setdefault(n, _INT(n)), entry[k], px, _ONE, py, _ONE)
    return True


def _dense(a):
    """Whether ``a``'s elements fill its memory without gaps in some order of its axes (positive strides)."""
    step = a.itemsize
    for stride, size in sorted(zip(a.strides, a.shape)):
        if size > 1 and stride != step:
            return False
        step *= size
    return True


def _apart(a, b, nbytes):
    """Whether arrays of ``nbytes`` at addresses ``a`` and ``b`` are the same or disjoint (axpy reads and writes
    elementwise: any other overlap needs the ufuncs' buffering)."""
    return a == b or a >= b + nbytes or b >= a + nbytes
