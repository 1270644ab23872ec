"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay."""
import ctypes
import sys

import numpy as np

from ember._tensor import Tensor

from ._common import check, grad_of, lr_of, operand
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
            blas = {dtype: (axpy, real(-lr)) for dtype, (axpy, real) in _AXPY.items()} if lr else {}
            ndarray, address, one = np.ndarray, _data, _ONE
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if g.is_sparse:
                    raise RuntimeError("this optimizer does not support sparse gradients")
                p._version[0] += 1  # p is updated in place below (done(p), inlined)
                d = g._data
                if adjust:
                    d = grad_of(d, p, group)
                if momentum != 0:
                    s = state[p]
                    buf = s.get("momentum_buffer")
                    if buf is None:
                        b = d.copy()
                        s["momentum_buffer"] = Tensor._wrap(b)
                    else:
                        b = buf._data
                        b *= operand(momentum, b, moms)
                        b += d if dampening == 0 else (1 - dampening) * d
                    d = d + momentum * b if nesterov else b
                if lr:  # p -= lr * d: one BLAS axpy pass over dense NumPy arrays (ufuncs take two and a temporary)
                    a = p._data
                    if (type(a) is ndarray and type(d) is ndarray and (axpy := blas.get(a.dtype))  # (not CuPy, scalars)
                            and d.dtype is a.dtype and (n := a.size) == d.size
                            and a.flags.carray and d.flags.carray):  # dense, aligned (and writeable: a)
                        pa, pd = address(id(a) + _DATA), address(id(d) + _DATA)
                        if a.base is None and d.base is None or _apart(pa.value, pd.value, a.nbytes):
                            fn, alpha = axpy
                            fn(sizes.get(n) or sizes.setdefault(n, _INT(n)), alpha, pd, one, pa, one)
                            continue
                    a -= d if lr == 1 else operand(lr, d, lrs) * d
        return loss


def _apart(a, b, nbytes):
    """Whether arrays of ``nbytes`` at addresses ``a`` and ``b`` are the same or disjoint (axpy reads and writes
    elementwise: any other overlap needs the ufuncs' buffering)."""
    return a == b or a >= b + nbytes or b >= a + nbytes


def _numpy_blas():
    """{dtype: (axpy, its real ctype)} from the 64-bit-integer BLAS that NumPy's wheels link, found through NumPy's
    own extension module (dlsym also searches the libraries it loaded) and checked by a test call; {} where none
    is reachable.

    Called without argtypes on ctypes objects (argument conversion costs more than a short axpy); an array's data
    pointer is read from the array object, at the field after the object header, checked here first.
    """
    if sys.implementation.name != "cpython":  # where id() is not the object's address
        return {}
    probe = np.ones(1)
    if _data(id(probe) + _DATA).value != probe.ctypes.data:
        return {}
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # NumPy 1
        from numpy.core import _multiarray_umath as umath
    try:
        lib = ctypes.CDLL(umath.__file__)
    except OSError:
        return {}
    found = {}
    for dtype, real, name in ((np.dtype(np.float32), ctypes.c_float, "saxpy64_"),
                              (np.dtype(np.float64), ctypes.c_double, "daxpy64_")):
        axpy = getattr(lib, "scipy_cblas_" + name, None) or getattr(lib, "cblas_" + name, None)
        if axpy is None:
            continue
        axpy.restype = None
        x, y = np.arange(1, 6, dtype=dtype), np.ones(5, dtype)
        axpy(_INT(4), real(-2.0), _data(id(x) + _DATA), _ONE, _data(id(y) + _DATA), _ONE)
        if y.tolist() == [-1.0, -3.0, -5.0, -7.0, 1.0]:
            found[dtype] = axpy, real
    return found


_data = ctypes.c_size_t.from_address  # _data(id(a) + _DATA): a's data pointer, as a ctypes argument
_DATA = object.__basicsize__
_INT = ctypes.c_int64
_ONE = _INT(1)
_AXPY = _numpy_blas()
