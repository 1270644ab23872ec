"""numba loops kept off the call path.

numba costs a fresh process about half a second of CPU before its first compiled call, even when the loop comes
from numba's on-disk cache (importing numba, then setting up its compiler, which imports scipy.linalg), and one
to three seconds when the loop must be compiled. So no call waits for numba: an op that has a numba loop also
has a JIT-free implementation (SciPy, NumPy) and takes it until the loop is ready. ``loop`` hands out a loop only
for inputs of ``JIT_MIN`` elements or more (or the caller's own floor), once it has been compiled in this process.
The first such call queues it on one background thread, which imports numba and compiles the loop (or loads it
from numba's cache: next to the package's sources, else in the user's cache folder, so a later process only loads
it). Smaller inputs always take the JIT-free implementation, never import numba, and give the same results
whatever has been compiled.

Results of an input above the floor may therefore change in the last bit once its loop is ready.
Under ``ember.use_deterministic_algorithms(True)`` such a call compiles the loop itself instead (the first one
is slow), so that results depend on the input alone. Where the JIT-free path is the loop's own source run by NumPy
and gives its very bits (``exact``: ember-core's elementwise loops, ``ember._formulas``), nothing changes when the
loop arrives: a ready loop then serves inputs of any size, and deterministic mode compiles nothing on the call.
"""
import contextlib
import importlib
import os
import sys
import threading
import types

from . import _settings

JIT_MIN = 1 << 13  # elements: the default floor, below which the JIT-free path is fast enough

_ready = {}  # (module, name, signature) -> the numba dispatcher, compiled for that signature in this process
_cpu = {}  # features -> whether the host CPU has them all
_failed = set()  # keys whose compilation raised: their callers keep the JIT-free path
_queue = []
_state = {"worker": None, "busy": None, "broken": False, "forced": False}
_cond = threading.Condition()


def wanted(size, minimum=None):
    """Whether an input of ``size`` elements may take a loop: from ``minimum`` elements on (default JIT_MIN).
    (Callers ask before they describe the loop they want.)"""
    return size >= (JIT_MIN if minimum is None else minimum) or _state["forced"]


def cpu_has(*features):
    """Whether the host CPU has every one of ``features`` (LLVM's names, e.g. "avx512f"), as numba's LLVM sees it
    (False when llvmlite cannot tell: the loops that need them then never run). Imports llvmlite: call it only on
    the way to a compiled loop."""
    if features not in _cpu:
        try:
            from llvmlite import binding
            host = binding.get_host_cpu_features()
            _cpu[features] = all(host.get(f, False) for f in features)
        except Exception:  # noqa: BLE001 - no llvmlite, or it cannot tell
            _cpu[features] = False
    return _cpu[features]


def loop(module, name, signature, size, minimum=None, exact=False):
    """numba loop ``module.name`` compiled for ``signature`` (numba's notation, e.g. ``"(float32[::1],
    float32[::1])"``) when ``size`` is at least ``minimum`` (default JIT_MIN) and the loop is ready; otherwise
    None, and the loop is queued for compilation (for sizes of at least ``minimum``). The caller passes
    C-contiguous, aligned, writeable arrays of the signature's dtypes, so that the call finds the compiled loop and
    compiles nothing. ``exact``: the caller's JIT-free path gives the loop's very results, so a ready loop serves any
    size, and deterministic mode does not compile on the call."""
    key = (module, name, signature)
    if exact and key in _ready:
        return _ready[key]
    if not wanted(size, minimum):
        return None
    f = _ready.get(key)
    if f is not None or key in _failed or _state["broken"]:
        return f
    if (_settings._state["deterministic"] and not exact) or _state["forced"]:
        return _compile(key)
    with _cond:
        if key not in _queue and key != _state["busy"]:
            _queue.append(key)
            if _state["worker"] is None:
                _state["worker"] = threading.Thread(target=_work, name="ember-jit", daemon=True)
                _state["worker"].start()
            _cond.notify()
    return None


def rebound(source, wrap=None, **names):
    """The functions of module ``source`` re-made to look their globals up in one new namespace: ``source``'s own
    with ``names`` in place of some (functions of ``source`` too), each other function replaced by ``wrap(name,
    function)`` if given. This is how one numba-free source runs on two engines: bound to numba's primitives and
    compiled, or as it is with NumPy. Returns the namespace."""
    namespace = dict(vars(source), **names)
    for name, f in vars(source).items():
        if isinstance(f, types.FunctionType) and f.__module__ == source.__name__ and name not in names:
            f = types.FunctionType(f.__code__, namespace, name, f.__defaults__, f.__closure__)
            namespace[name] = wrap(name, f) if wrap else f
    return namespace


def wait(timeout=None):
    """Block until every queued loop is compiled (benchmarks and tests: timings and checks of the compiled
    path). Returns whether the queue ran empty within ``timeout`` seconds."""
    with _cond:
        return _cond.wait_for(lambda: not _queue and _state["busy"] is None, timeout)


@contextlib.contextmanager
def forced():
    """Within it, every call that has a loop takes it, whatever its size, compiled on the call if need be: for tests
    and measurements of the loops themselves."""
    saved, _state["forced"] = _state["forced"], True
    try:
        yield
    finally:
        _state["forced"] = saved


def _import(module):
    """``module`` (which makes numba dispatchers with ``cache=True``). numba caches next to the module's source, else in
    the user's cache folder; where neither can be written it refuses to make them, and they cache under the temporary
    directory instead."""
    try:
        return importlib.import_module(module)
    except RuntimeError as e:
        if "cannot cache" not in str(e):
            raise
        import tempfile

        import numba
        os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(tempfile.gettempdir(), "ember-numba-cache"))
        numba.config.reload_config()
        return importlib.import_module(module)


def _compile(key):
    module, name, signature = key
    try:
        f = getattr(_import(module), name)
        f.compile(signature)  # numba: from its on-disk cache when there, else compiled and saved there
    except Exception:  # noqa: BLE001 - a loop that cannot be built leaves its op on the JIT-free path
        _failed.add(key)
        return None
    _ready[key] = f
    return f


def _work():
    if sys.platform.startswith("linux"):  # compile in idle time: the callers' own work goes first (Linux: per thread)
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        except OSError:
            pass
    while True:
        with _cond:
            _cond.wait_for(lambda: _queue)
            key = _state["busy"] = _queue.pop(0)
        try:
            _compile(key)
        finally:
            with _cond:
                _state["busy"] = None
                _cond.notify_all()


def _after_fork():
    """A forked child has no worker thread. If the parent's was compiling, numba's compiler lock may be held for
    good in the child: it then compiles nothing more and keeps the loops that were ready."""
    global _cond
    _state["broken"] = _state["broken"] or _state["busy"] is not None
    _state["worker"] = _state["busy"] = None
    _queue.clear()
    _cond = threading.Condition()


os.register_at_fork(after_in_child=_after_fork)
