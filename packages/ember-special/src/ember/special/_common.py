"""Shared pieces of ember-special's op blocks: dtype rules, engines (SciPy, numba, cupyx, ember's
CuPy kernels), the registration helper and the wrappers for PyTorch's extra call forms.

Nothing here imports SciPy, numba or CuPy at import time: each engine is loaded on first use, numba by
``ember._jit``'s background thread only (no call waits for a compilation).
"""
import functools
import os
import types

import numpy as np

from ember import _dtype as D
from ember import _jit
from ember._registry import TORCH_NAME, elementwise
from ember._tensor import Tensor

OPS = []  # the ops ember-special registers, in order (installed by _setup.install)
METHODS = {}  # Tensor methods whose call form differs from the function's (x.polygamma(n))
_HALF = (D.float16, D.bfloat16)


def float_rule(kernel, half=True, ints=True):
    """Integers and bool become the default float (unless ``ints=False``: PyTorch's igamma refuses
    them); float16/bfloat16 compute in float32, or are refused where PyTorch's CPU kernel is
    float32/float64 only; complex is refused."""
    def rule(dt, dtypes, **kwargs):  # (kwargs such as mvlgamma's p are the op's own)
        if dt.is_complex or (dt in _HALF and not half) or (dt.category < 2 and not ints):
            raise NotImplementedError(f"\"{kernel}_cpu\" not implemented for '{TORCH_NAME[dt]}'")
        if dt.category < 2:
            dt = D.get_default_dtype()
        return (D.float32 if dt in _HALF else dt), dt
    return rule


def special_op(name, *, public=False, kernel=None, half=True, ints=True, **options):
    """Register an elementwise op of ember.special. Names PyTorch has only under torch.special are
    registered as ``special_<name>`` without a function or method; ``public=True`` for the names
    PyTorch also has as ``torch.<name>``/``Tensor.<name>``."""
    reg = name if public else f"special_{name}"
    if not public:
        options.update(function=False, method=False, inplace=False)

    def register(impl):
        @functools.wraps(impl)
        def quiet(*args, **kwargs):  # NaN/inf results are PyTorch's too: no NumPy warnings
            with np.errstate(all="ignore"):
                return impl(*args, **kwargs)
        o = elementwise(reg, rule=float_rule(kernel or name, half, ints), **options)(quiet)
        OPS.append(o)
        return o
    return register


# ---- engines ----------------------------------------------------------------------------------
def lib(xp):
    """``scipy.special`` for NumPy arrays, ``cupyx.scipy.special`` for CuPy arrays."""
    if xp is np:
        import scipy.special
        return scipy.special
    import cupyx.scipy.special
    return cupyx.scipy.special


_NUMBA = __package__ + "._numba"
# Elements from which a function asks for its loop: the JIT-free paths cost 30 ns to 1 us an element (SciPy's
# digamma 240 ns, gammaincc 900 ns), the loops 1 to 30 ns, so a loop pays from about a thousand elements
LOOP_MIN = 1 << 10
IGAMMA_A_MAX = 1000.0  # the float32 incomplete gamma loops serve a up to this (their term counts grow like sqrt(a))


_SIGNATURES = {}  # (name, number of scalars, dtypes) -> the loop's signature in numba's notation


def loop(name, *arrays, scalars=()):
    """numba loop ``name`` of ``_numba`` over the broadcast ``arrays`` (in blocks, see ``blocks``; ``scalars``, Python
    ints, passed after the arrays; result of the last array's dtype) once ``ember._jit`` has it compiled: for inputs
    of LOOP_MIN elements or more, after its background thread has built it. None until then: the caller takes its
    JIT-free path."""
    size = arrays[0].size if len(arrays) == 1 else np.broadcast(*arrays).size
    if not _jit.wanted(size, LOOP_MIN):
        return None
    key = (name, len(scalars), *(a.dtype for a in arrays))
    signature = _SIGNATURES.get(key)
    if signature is None:
        types = [f"{a.dtype.name}[::1]" for a in arrays] + ["int64"] * len(scalars) + [f"{arrays[-1].dtype.name}[::1]"]
        signature = _SIGNATURES[key] = f"({', '.join(types)})"
    f = _jit.loop(_NUMBA, name, signature, size, LOOP_MIN)
    if f is None:
        return None
    return blocks(lambda *a: f(*a[:-1], *scalars, a[-1]), *arrays)


def rebound(source, wrap=None, **names):
    """The functions of module ``source`` re-made to look their globals up in one new namespace: ``source``'s own
    with ``names`` in place of some (and each function replaced by ``wrap(name, function)`` if given). This is how
    one numba-free source runs on two engines: ``_numba`` binds numba's compiled versions, ``_scalar.evaluate`` math
    functions that give inf and NaN where Python's raise. Returns the namespace."""
    namespace = dict(vars(source), **names)
    for name, f in vars(source).items():
        if isinstance(f, types.FunctionType) and f.__module__ == source.__name__:
            f = types.FunctionType(f.__code__, namespace, name, f.__defaults__, f.__closure__)
            namespace[name] = wrap(name, f) if wrap else f
    return namespace


def cuda_kernel(name, *arrays):
    """ember's CuPy kernel ``name`` (``_cuda``) on CuPy arrays."""
    from . import _cuda
    return _cuda.KERNELS[name](*arrays)


_BLOCK_MIN = 1 << 16  # below this a thread handoff costs more than it saves


def blocks(fn, *arrays, dtype=None):
    """``fn(*blocks, out_block)`` over flat blocks of the broadcast ``arrays``, one block per thread (ember's
    pool) for large inputs, as ``fn`` releases the GIL (NumPy/SciPy ufuncs, numba nogil). Returns ``out``, of
    the broadcast shape and ``dtype`` (default: the last array's)."""
    if len(arrays) > 1:
        arrays = np.broadcast_arrays(*arrays)
    out = np.empty(arrays[0].shape, dtype or arrays[-1].dtype)
    # (writeable and aligned as well: the types a numba loop was compiled for)
    flat = [np.require(a, requirements="CAW").reshape(-1) for a in arrays] + [out.reshape(-1)]
    n = min(_threads(), max(1, out.size // _BLOCK_MIN))
    if n < 2:
        fn(*flat)
        return out
    edges = np.linspace(0, out.size, n + 1).astype(int)
    parts = [[a[lo:hi] for a in flat] for lo, hi in zip(edges[:-1], edges[1:])]
    futures = [_pool(n - 1).submit(fn, *p) for p in parts[:-1]]
    fn(*parts[-1])
    for f in futures:
        f.result()
    return out


_POOL = {}  # the worker pool of ``blocks``, made on first use (importing ember starts no thread)


_THREADS = {}  # ember.get_num_threads() by the last ember.set_num_threads value: asking costs milliseconds


def _threads():
    """Threads ``blocks`` may use: ember.get_num_threads(), asked again after each ember.set_num_threads."""
    from ember import _settings
    key = _settings._state["threads"]
    n = _THREADS.get(key)
    if n is None:
        import ember
        n = _THREADS[key] = max(1, ember.get_num_threads())
    return n


def _pool(workers):
    pool = _POOL.get("pool")
    if pool is None or pool._max_workers < workers:
        import concurrent.futures
        pool = _POOL["pool"] = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="ember-special")
    return pool


os.register_at_fork(after_in_child=_POOL.clear)  # a forked child makes its own threads


# ---- PyTorch's extra call forms -----------------------------------------------------------------
def public(o, function, method=None, inplace=None):
    """Give op ``o`` (registered with a keyword argument such as ``n``) PyTorch's call forms:
    ``function`` becomes its public function, ``method``/``inplace`` its Tensor methods."""
    function.__module__, function.op = "ember", o
    function.__doc__ = o.fn.__doc__
    o.fn = function
    if method:
        METHODS[o.name] = method
    if inplace:
        METHODS[o.name + "_"] = inplace
    return o


def grad_of(ctx, i):
    """Whether the call's ``i``-th argument is a tensor that asked for a gradient. ember-autograd hands
    VJPs detached arguments (unless create_graph), so its record of them is asked first: ``needs_input_grad``
    where its context has one, else its node's record of its inputs."""
    arg = ctx.args[i]
    if not isinstance(arg, Tensor):
        return False
    needs = getattr(ctx, "needs_input_grad", None)
    if needs is not None:
        return needs[i]
    meta = getattr(getattr(ctx, "_node", None), "_in_meta", None)  # one entry per tensor argument
    if meta is not None:
        return meta[sum(isinstance(a, Tensor) for a in ctx.args[:i])] is not None
    return arg._rg


def tensor_only_inplace(o):
    """The in-place method refuses a Python number operand, as PyTorch's tensor-only signatures do."""
    inplace = o.inplace_fn

    def call(self, other):
        if not isinstance(other, Tensor):
            raise TypeError(f"{o.name}_(): argument 'other' (position 1) must be Tensor, not {type(other).__name__}")
        return inplace(self, other)
    o.inplace_fn = call
    return o
