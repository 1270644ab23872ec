"""ember's numba loops on arrays (``ember._numba_kernels``, loaded with numba on first use: ``import ember`` never
imports numba): the error function family and GELU (CUDA's erf/erfc through cupyx on CuPy arrays; ember.special's
erf, erfc and ndtr use these too, so each function has one implementation per device), small powers, and the
float32 logistic family (sigmoid, SiLU, softplus) with the one-pass VJPs of sigmoid and tanh, and the row ops of
float32 matrices (softmax, log_softmax, layer norm and their gradients along the last dim)."""
import math
import os

import numpy as np

from . import _parallel

_LOOPS = []
# Elements from which the logistic family and the gradients from outputs use a loop: below, NumPy's few passes over
# a small array cost less than a call into numba (and tiny graphs never load numba)
LOOP_MIN = 1 << 13
# Elements from which a loop splits over the cores: the exact GELU's costs about 0.3 ns an element, so a split
# (tens of microseconds to wake a helper) pays from here
SPLIT_MIN = 1 << 17


def loops():
    """``ember._numba_kernels``, imported on first use. numba caches the compiled loops next to that module,
    else in its user-wide cache folder; where neither is writable, in a folder under the temporary directory."""
    if not _LOOPS:
        try:
            from . import _numba_kernels
        except RuntimeError as e:
            if "cannot cache" not in str(e):
                raise
            import tempfile

            import numba
            os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(tempfile.gettempdir(), "ember-numba-cache"))
            numba.config.reload_config()
            from . import _numba_kernels
        _LOOPS.append(_numba_kernels)
    return _LOOPS[0]


def _run(name, x, *more, minimum=SPLIT_MIN):
    """Loop ``name``_f32/_f64 on float32/float64 NumPy ``x`` (and ``more`` arrays of its shape), into a new array
    (over the cores from ``minimum`` elements)."""
    x = np.asarray(x, order="C")
    more = [np.asarray(np.broadcast_to(m, x.shape), x.dtype, order="C") for m in more]
    fn = getattr(loops(), f"{name}_{'f32' if x.dtype == np.float32 else 'f64'}", None) or getattr(loops(), name)
    out = np.empty(x.shape, x.dtype)
    if x.size:
        _parallel.loop(fn, *[a.reshape(-1) for a in (x, *more)], out=out.reshape(-1), minimum=minimum)
    return out


def power(x, name):
    """``x ** 3``, ``1 / x`` or ``1 / x ** 2`` (``name`` cube/inverse/inverse_square) of a float32/float64 NumPy
    array in one pass (memory-bound: split over the cores from the ufuncs' size)."""
    return _run(name, x, minimum=_parallel.MIN_SIZE)


def _cupyx(xp):
    import cupyx.scipy.special
    return cupyx.scipy.special


def erf(xp, x):
    """erf of a float32/float64 array."""
    return _run("erf", x) if xp is np else _cupyx(xp).erf(x)


def erfc(xp, x):
    """erfc of a float32/float64 array."""
    return _run("erfc", x) if xp is np else _cupyx(xp).erfc(x)


def ndtr(xp, x):
    """The standard normal CDF of a float32 array (float64: ember.special's own)."""
    return _run("ndtr", x) if xp is np else _cupyx(xp).ndtr(x)


_SQRT1_2 = math.sqrt(0.5)


def _finite(xp, x):
    """``x`` with the infinities replaced by the largest finite values (NaN kept): the CuPy formulas then reach
    the limits of ``x * F(x)`` at the infinities (``-inf * 0`` would be NaN)."""
    f = np.finfo(x.dtype)
    return xp.clip(x, float(f.min), float(f.max))


def gelu(xp, x, approximate):
    """GELU of a float32/float64 array: ``x Phi(x)`` (``approximate='none'``) or its tanh approximation."""
    if xp is np:
        return _run("gelu" if approximate == "none" else "gelu_tanh", x)
    y = _finite(xp, x)
    if approximate == "none":
        r = 0.5 * y * _cupyx(xp).erfc(-y * _SQRT1_2)
    else:
        r = 0.5 * y * (1 + xp.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y ** 3)))
    return xp.where(xp.isinf(x), xp.maximum(x, 0), r)


def gelu_backward(xp, grad, x, approximate):
    """``grad`` times GELU's derivative at ``x`` (float32/float64 arrays of one dtype, grad broadcast to x); NaN at
    the infinities, as PyTorch's (its limits 0 and 1 would hide an overflow upstream)."""
    if xp is np:
        return _run("gelu_backward" if approximate == "none" else "gelu_tanh_backward", x, grad)
    if approximate == "none":  # (NaN at the infinities, as PyTorch's gradient)
        d = 0.5 * _cupyx(xp).erfc(-x * _SQRT1_2) + x * xp.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    else:
        k = math.sqrt(2 / math.pi)
        t = xp.tanh(k * (x + 0.044715 * x ** 3))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)
    return grad * d


def float32_loop(name, x, *more, **scalars):
    """Loop ``name`` on a float32 NumPy ``x`` (and ``more`` arrays broadcast to it), ``scalars`` as float32."""
    x = np.asarray(x, order="C")
    more = [np.asarray(np.broadcast_to(m, x.shape), x.dtype, order="C") for m in more]
    fn = getattr(loops(), name)
    args = [np.float32(v) for v in scalars.values()]
    out = np.empty(x.shape, x.dtype)
    if x.size:
        _parallel.loop(lambda *a: fn(*a[:-1], *args, a[-1]), *[a.reshape(-1) for a in (x, *more)],
                       out=out.reshape(-1), minimum=SPLIT_MIN)
    return out


def derivative_times(name, output, grad, out=None):
    """``grad`` times an activation's derivative from its (float32/float64, n-d) ``output`` by loop ``name``, in one
    pass (into ``out``, which may be ``grad``)."""
    out = np.empty(output.shape, output.dtype) if out is None else out
    _parallel.loop(getattr(loops(), name), output.reshape(-1), grad.reshape(-1), out=out.reshape(-1),
                   minimum=_parallel.MIN_SIZE)
    return out


# Elements from which row loops run over two halves of the rows on two threads (ember's pool). A transformer's
# 12x64x512 stays on one: at 256K a hand-off to the pool cost more than it saved (softmax's VJP 0.069 -> 0.128 ms)
ROWS_SPLIT_MIN = 1 << 20


def rows(name, x, *more, out, scalars=(), halves=None):
    """Row loop ``name`` over the rows of float32 C-contiguous ``x`` and ``more`` (same leading shape), writing
    ``out``: ``name(x, *more, *scalars, out, *extra)``, ``extra`` from ``halves(k)`` for half k of the rows (per-half
    accumulators; both halves always, so results do not depend on threads). Large inputs run their halves on two
    threads, the caller taking back a half the pool has not started by the time it ends its own."""
    fn = getattr(loops(), name)
    n = x.shape[0]

    def part(lo, hi, extra):
        fn(x[lo:hi], *[m[lo:hi] for m in more], *scalars, out[lo:hi], *extra)

    if halves is None and (x.size < ROWS_SPLIT_MIN or n < 2 or _parallel.WORKERS < 2):
        part(0, n, ())
        return out
    spans = [(0, n // 2, halves(0) if halves else ()), (n // 2, n, halves(1) if halves else ())]
    if x.size < ROWS_SPLIT_MIN or _parallel.WORKERS < 2:
        for span in spans:
            part(*span)
    else:
        job = _parallel.pool().submit(part, *spans[0])
        part(*spans[1])
        if job.cancel():  # not started: on a busy machine the pool's thread may get no CPU for milliseconds
            part(*spans[0])
        else:
            job.result()
    return out
