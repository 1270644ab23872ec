"""ember-core's loops on NumPy arrays: the error function family and GELU (CUDA's erf/erfc through cupyx on CuPy
arrays; ember.special's erf, erfc and ndtr use these too, so each function has one implementation per device), small
powers, the float32 logistic family (sigmoid, SiLU, softplus) with the one-pass VJPs of sigmoid and tanh, and the row
ops of float32 matrices (softmax, log_softmax, layer norm and their gradients along the last dim).

Each loop is a function of ``ember._formulas``, run by one of two engines: numba's compiled loop
(``ember._numba_kernels``) once ``ember._jit`` hands it out, else NumPy, block by block. A loop is asked for by inputs
of its floor or more, and compiled on ``_jit``'s background thread: no call waits for numba, and ``import ember``
never loads it. Elementwise loops give the same bits on both engines, so any input takes a loop that is ready
(results do not depend on it; one exception: the float32 tanh GELU's exp, computed in float64 with FMAs that NumPy
rounds twice, might move a result lying within 1e-16 of a float32 rounding boundary). Row loops may differ in the
last bits (the order of their sums), so they follow ``_jit``'s rule: below the floor never, and under deterministic
algorithms compiled on the call. From ``_parallel.SPIN_MIN`` elements, a loop runs by its C-callable parts (compiled
after it in the background) on ``_parallel``'s spinning helpers, each part computing what one call would.
"""
import math

import numpy as np

from . import _formulas, _jit, _parallel

_KERNELS = __package__ + "._numba_kernels"
# Elements from which the logistic family, the gradients from outputs, the powers and the row ops ask for a loop:
# below, their callers' NumPy passes over a small array cost less than a call into numba
LOOP_MIN = _jit.JIT_MIN
# Elements from which the error function family and GELU, which have no other small path, ask for their loop: NumPy's
# engine costs them 30-250 ns an element (float64: the C library's erf one element at a time) and 20-200 us a call, the
# loop under 1 ns and 1 us. Smaller inputs ask for it too once NumPy's engine has run it on that many elements in all,
# a call counting as CALL_COST at least (so a process that keeps calling GELU on small tensors gets its loop too)
FORMULA_MIN = 1 << 10
CALL_COST = 1 << 8
_TALLY = {}  # loop name -> elements NumPy's engine has computed of it (FORMULA_MIN's ops)
# Elements from which a loop splits over the cores: the exact GELU's costs about 0.3 ns an element, so a split
# (tens of microseconds to wake a helper) pays from here
SPLIT_MIN = 1 << 17
# Elements NumPy's engine computes at a time, its temporaries in L2 (1M float32 erf in blocks of 2K/4K/16K/64K: 105/68/
# 43/42 ms). It runs on the calling thread alone: meanwhile _jit's thread compiles on the other core (and two threads
# of NumPy calls on 16K elements gained nothing under load: the GIL)
BLOCK = 1 << 14

_SIGNATURES = {}  # argument types -> the loop's signature in numba's notation


def _signature(args):
    """numba's signature of a loop called with ``args`` (C-contiguous arrays, NumPy scalars, floats)."""
    key = tuple([(a.dtype, a.ndim) if type(a) is np.ndarray else type(a) for a in args])
    s = _SIGNATURES.get(key)
    if s is None:
        types = [f"{a.dtype.name}[{':, ' * (a.ndim - 1)}::1]" if type(a) is np.ndarray else
                 (a.dtype.name if isinstance(a, np.generic) else "float64") for a in args]
        s = _SIGNATURES[key] = f"({', '.join(types)})"
    return s


def _quiet(f):
    """``f`` with NumPy's warnings off (the formulas pass infinities and NaN through, as the compiled loops do)."""
    def run(*args):
        with np.errstate(all="ignore"):
            f(*args)
    return run


def _numpy(name):
    """Loop ``name`` of ``_formulas`` run by NumPy over blocks of BLOCK elements of its flat arrays."""
    f = getattr(_formulas, name)

    def run(*args):
        with np.errstate(all="ignore"):
            for s in range(0, args[-1].size, BLOCK):
                f(*[a[s:s + BLOCK] if type(a) is np.ndarray else a for a in args])
    return run


def _writable(a, dtype=None):
    """``a`` as a compiled loop takes it: C-contiguous, aligned, writeable (a read-only array is another type to
    numba, which would compile the loop again for it)."""
    if type(a) is np.ndarray and a.flags.carray and (dtype is None or a.dtype == dtype):
        return a  # (the common case, without np.require's cost)
    return np.require(a, dtype, "CAW")


def _elementwise(name, x, *more, scalars=(), minimum=FORMULA_MIN, tally=True, split=SPLIT_MIN):
    """Loop ``name`` on NumPy ``x`` (and ``more`` arrays broadcast to it, then ``scalars``) into a new array; asked
    for from ``minimum`` elements (``tally``: in all, see FORMULA_MIN)."""
    x = _writable(x)
    out = np.empty(x.shape, x.dtype)
    if not x.size:
        return out
    arrays = [x.reshape(-1), *[_writable(m if m.shape == x.shape else np.broadcast_to(m, x.shape), x.dtype).reshape(-1)
                               for m in more], out.reshape(-1)]
    signature = _signature((*arrays[:-1], *scalars, arrays[-1]))
    if _spun(name + signature, (*arrays, *scalars, _parallel.SPIN_CHUNK), x.size):
        return out
    f = _jit.loop(_KERNELS, name, signature, x.size + _TALLY.get(name, 0) if tally else x.size, minimum, exact=True)
    if f is None:
        _numpy(name)(*arrays[:-1], *scalars, arrays[-1])
        if tally:
            _TALLY[name] = _TALLY.get(name, 0) + max(x.size, CALL_COST)
        return out
    if scalars:
        f = (lambda loop: lambda *a: loop(*a[:-1], *scalars, a[-1]))(f)
    _parallel.loop(f, *arrays[:-1], out=arrays[-1], minimum=split)
    return out


def _spun(key, args, size, exact=True):
    """Whether the loop of ``key`` (its name and signature) ran by its C-callable parts on ``_parallel``'s spinning
    helpers, ``args`` its runner's (see ember._numba_kernels._Parts): from SPIN_MIN elements, once the parts are
    compiled (asked for here, and compiled after the loop itself when that is queued too)."""
    if size < _parallel.SPIN_MIN or not _parallel.SPINS or _parallel.WORKERS < 2:
        return False
    parts = _jit.loop(_KERNELS, "parts", key, size, _parallel.SPIN_MIN, exact=exact)
    return parts is not None and _parallel.spun(parts, parts.runners[key], parts.address[key], *args)


def _typed(name, x, *more, **kwargs):
    """Loop ``name``_f32/_f64 for float32/float64 ``x``."""
    return _elementwise(f"{name}_{'f32' if x.dtype == np.float32 else 'f64'}", x, *more, **kwargs)


def power(x, name):
    """``x ** 2``, ``x ** 3``, ``1 / x``, ``1 / x ** 2``, ``sqrt(x)`` or ``1 / sqrt(x)`` (``name`` square/cube/inverse/
    inverse_square/root/inverse_root) of a float32/float64 NumPy array in one pass."""
    return _elementwise(name, x, minimum=LOOP_MIN, tally=False, split=_parallel.MIN_SIZE)


def _cupyx(xp):
    import cupyx.scipy.special
    return cupyx.scipy.special


def erf(xp, x):
    """erf of a float32/float64 array."""
    return _typed("erf", x) if xp is np else _cupyx(xp).erf(x)


def erfc(xp, x):
    """erfc of a float32/float64 array."""
    return _typed("erfc", x) if xp is np else _cupyx(xp).erfc(x)


def ndtr(xp, x):
    """The standard normal CDF of a float32 array (float64: ember.special's own)."""
    return _elementwise("ndtr_f32", x) if xp is np else _cupyx(xp).ndtr(x)


_SQRT1_2 = math.sqrt(0.5)


def _finite(xp, x):
    """``x`` with the infinities replaced by the largest finite values (NaN kept): the CuPy formulas then reach
    the limits of ``x * F(x)`` at the infinities (``-inf * 0`` would be NaN)."""
    f = np.finfo(x.dtype)
    return xp.clip(x, float(f.min), float(f.max))


def gelu(xp, x, approximate):
    """GELU of a float32/float64 array: ``x Phi(x)`` (``approximate='none'``) or its tanh approximation."""
    if xp is np:
        return _typed("gelu" if approximate == "none" else "gelu_tanh", x)
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
        return _typed("gelu_backward" if approximate == "none" else "gelu_tanh_backward", x, grad)
    if approximate == "none":  # (NaN at the infinities, as PyTorch's gradient)
        d = 0.5 * _cupyx(xp).erfc(-x * _SQRT1_2) + x * xp.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    else:
        k = math.sqrt(2 / math.pi)
        t = xp.tanh(k * (x + 0.044715 * x ** 3))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)
    return grad * d


def float32_loop(name, x, *more, **scalars):
    """Loop ``name`` on a float32 NumPy ``x`` (and ``more`` arrays broadcast to it), ``scalars`` as float32 (the
    logistic family: its callers take their own path below LOOP_MIN)."""
    return _elementwise(name, x, *more, scalars=tuple(np.float32(v) for v in scalars.values()), minimum=LOOP_MIN,
                        tally=False)


def derivative_times(name, output, grad, out=None):
    """``grad`` times an activation's derivative from its (float32/float64, n-d) ``output`` (or pow's and log's
    from their input) by loop ``name``, in one pass (into ``out``, C-contiguous and writeable, which may be
    ``grad``)."""
    out = np.empty(output.shape, output.dtype) if out is None else out
    flat = [_writable(a).reshape(-1) for a in (output, grad)] + [out.reshape(-1)]
    signature = _signature(flat)
    if _spun(name + signature, (*flat, _parallel.SPIN_CHUNK), output.size):
        return out
    f = _jit.loop(_KERNELS, name, signature, output.size, LOOP_MIN, exact=True)
    if f is None:
        _numpy(name)(*flat)
    else:
        _parallel.loop(f, *flat[:2], out=flat[2], minimum=_parallel.MIN_SIZE)
    return out


# Elements from which row loops run over two halves of the rows on two threads (ember's pool). A transformer's
# 12x64x512 stays on one: at 256K a hand-off to the pool cost more than it saved (softmax's VJP 0.069 -> 0.128 ms)
ROWS_SPLIT_MIN = 1 << 20


def rows(name, x, *more, out, scalars=(), halves=None):
    """Row loop ``name`` over the rows of float32 C-contiguous ``x`` and ``more`` (same leading shape), writing
    ``out``: ``name(x, *more, *scalars, out, *extra)``, ``extra`` from ``halves(k)`` for half k of the rows (per-half
    accumulators; both halves always, so results do not depend on threads). Large inputs run their halves on two
    threads, the caller taking back a half the pool has not started by the time it ends its own."""
    n = x.shape[0]
    x, more = _writable(x), [_writable(m) for m in more]
    scalars = tuple(_writable(s) if type(s) is np.ndarray else np.float64(s) if type(s) is float else s
                    for s in scalars)  # (float64 for NumPy's engine too)
    extras = (halves(0), halves(1)) if halves else ((), ())
    args = (x, *more, *scalars, out, *extras[0])
    signature = _signature(args)
    f = _jit.loop(_KERNELS, name, signature, x.size, LOOP_MIN)
    # by parts: the rows in chunks, or (with accumulators) the two halves
    if n > 1 and _spun(name + signature, (*args, *extras[1]) if halves else (
            *args, max(1, _parallel.SPIN_CHUNK // x.shape[1])), x.size, exact=False):
        return out
    step = n or 1  # rows at a time: all of a part for a compiled loop, cache-sized blocks for NumPy's engine
    if f is None:
        f, step = _quiet(getattr(_formulas, name)), max(1, BLOCK // max(1, x.shape[1]))

    def part(lo, hi, extra):
        for s in range(lo, hi, step):
            e = min(s + step, hi)
            f(x[s:e], *[m[s:e] for m in more], *scalars, out[s:e], *extra)

    if halves is None and (x.size < ROWS_SPLIT_MIN or n < 2 or _parallel.WORKERS < 2):
        part(0, n, ())
        return out
    spans = [(0, n // 2, extras[0]), (n // 2, n, extras[1])]
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
