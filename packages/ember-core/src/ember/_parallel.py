"""Large host arrays computed over the cores: NumPy releases the GIL in its ufunc loops.

Elementwise work on C-contiguous operands of one shape splits into one flat part per thread: the calling thread
and helper threads (one per other core, each blocked on a lock until handed a job) claim the parts in order, each
writing its part into one output; a helper that has not started by the time the caller ends its part leaves its
part to the caller, which then does not wait for it either (on a busy machine a woken helper may get no CPU for
milliseconds): a later split hands it no job until it has been through the one it was late for. Parts start at
multiples of ``_ALIGN`` elements, so NumPy's SIMD loops meet every element as in one call over the whole array:
the values are bit for bit those of one call. (Reductions must not split like this: the order of float additions
would change.) Helpers run in a copy of the caller's context, so NumPy's errstate (a context variable) holds there
too, and their errors raise in the caller. Idle helpers block: they burn no CPU.

ember's compiled loops split another way (``spun``): their parts are C functions that other threads run without the
GIL, so helpers that spin for a while after a run take the next one within a microsecond.
"""
import contextlib
import contextvars
import ctypes
import functools
import itertools
import math
import os
import platform
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import _backend

WORKERS = min(4, os.cpu_count() or 1)
# Elements. Waking a helper costs the caller some 15 us (an idle vCPU halts: the wake is an interrupt through the
# hypervisor) and the helper starts 20-40 us after; below this one core in its caches wins. float32 mul/add-scalar/
# exp/tanh on a 2-core Intel VM, one call -> split, in us: 256K 49/45/116/86 -> 101/98/122/122, 512K 146/134/230/
# 173 -> 109/108/181/143, 1M 289/276/447/335 -> 203/204/298/235, 2M 584/578/923/693 -> 398/392/553/477 (memory
# bound: torch on 2 threads, 317/322/304/375); the 20-op chain of bench_autograd, forward and backward, at 256K/
# 512K/1M: 3.68/8.48/16.7 -> 4.91/8.05/13.4 ms.
MIN_SIZE = 1 << 19
# Elements from which a multi-step expression splits: its blocks also save passes through memory (tanh's VJP on
# float32, one call -> split: 256K 147 -> 148 us, 512K 396 -> 264, 1M 807 -> 415)
EXPRESSION_MIN = 1 << 19
_ALIGN = 1024  # elements
# Elements an expression computes at a time, its operands and temporary staying in L2. Smaller blocks cost more
# GIL hand-offs between the threads than they save (tanh's VJP on 1M float32 split in blocks of 64K/128K/256K:
# 545/425/419 us; a waiter for the GIL sleeps, and its vCPU takes 30 us to wake).
_BLOCK = 1 << 17
# Elements the caller takes beyond an even share: it starts its part ~20 us before a helper does, and a caller that
# ends first blocks and waits ~30 us for its vCPU to wake, while a helper that ends first costs nothing (1M float32
# mul/tanh with a lead of 32K/48K/64K: 207/203/208, 264/235/236 us; 512K: 113/109/115, 175/143/149 us).
_LEAD = 48 << 10

_POOL = []
# Helper threads, each waiting on its ``go`` lock for a job and releasing its ``done`` lock after it
_HELPERS = []
_BUSY = [threading.Lock()]  # held by the thread splitting work (another thread, or a nested split, computes alone)
_AVOIDED = [None]  # the CPU the helpers are kept off
# Spinning helpers (``spun``): [ctl, [(wake, asleep, native id) per helper]] once started
_SPIN = []


def _forget():
    """(A forked child has none of the parent's threads: it makes its own.)"""
    _POOL.clear()
    _HELPERS.clear()
    _BUSY[0] = threading.Lock()
    _AVOIDED[0] = None
    _SPIN.clear()


os.register_at_fork(after_in_child=_forget)

try:  # the CPU the calling thread runs on
    _cpu = ctypes.PyDLL(None).sched_getcpu if hasattr(os, "sched_setaffinity") else None
except (OSError, AttributeError, TypeError):
    _cpu = None


def pool():
    """The thread pool of ops that split large NumPy work over the cores."""
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(WORKERS))
    return _POOL[0]


def _helpers():
    if not _HELPERS:
        for _ in range(WORKERS - 1):
            go, done = threading.Lock(), threading.Lock()
            go.acquire()
            done.acquire()
            job = [None, False]  # [the job, whether its end is still to be collected (``done`` not yet acquired)]
            thread = threading.Thread(target=_serve, args=(go, done, job), daemon=True, name="ember-split")
            thread.start()
            _HELPERS.append((go, done, job, thread.native_id))
        _AVOIDED[0] = None
    _stay_off()
    return _HELPERS


def _stay_off():
    cpu = _cpu() if _cpu is not None else None
    if cpu != _AVOIDED[0]:
        _keep_off(cpu)


def _keep_off(cpu):
    """Keep the helpers off ``cpu``, the caller's: left to itself, Linux mostly woke the helper on its waker's CPU
    (2-core VM, the other core idle), where it waits for the caller to block or preempts it, and a split took as
    long as one call (1M float32 mul: median 300 us, 195 with the helper kept off)."""
    _AVOIDED[0] = cpu
    others = os.sched_getaffinity(0) - {cpu}
    for *_, tid in [*_HELPERS, *(_SPIN[1] if _SPIN else ())] if others else ():
        with contextlib.suppress(OSError):  # (the thread is gone, or the CPUs are not ours)
            os.sched_setaffinity(tid, others)


def _serve(go, done, job):
    while True:
        go.acquire()
        job[0]()
        job[0] = None  # (the job holds views of its arrays: kept, they would keep the engine from reusing them)
        done.release()


def _shape(operands, out=None, minimum=None):
    """The common shape of ``operands`` (NumPy arrays, 0-d arrays and scalars) and ``out`` when they may be split
    (the arrays with dims are host, C-contiguous and of one shape of ``minimum`` (default ``MIN_SIZE``) elements or
    more, ``out`` too, overlapping none of them except exactly); None otherwise."""
    shape = None
    for a in operands:
        if type(a) is np.ndarray:
            if not a.ndim:
                continue
            if shape is None:
                shape = a.shape
            if a.shape != shape or not a.flags.c_contiguous:
                return None
        elif not isinstance(a, (np.generic, int, float, complex)):  # (CuPy arrays)
            return None
    if shape is None or math.prod(shape) < (MIN_SIZE if minimum is None else minimum):
        return None
    if out is not None:
        if type(out) is not np.ndarray or out.shape != shape or not out.flags.c_contiguous:
            return None
        at = out.ctypes.data
        for a in operands:  # an operand sharing memory with ``out`` must be ``out`` itself (chunks then agree)
            if type(a) is np.ndarray and a.ndim and np.may_share_memory(a, out) and a.ctypes.data != at:
                return None
    return shape


def _idle(helper):
    """Whether ``helper`` may take a job: it has been through the last one it was handed (collected here if so)."""
    _, done, job, _ = helper
    if job[1] and done.acquire(blocking=False):
        job[1] = False
    return not job[1]


def _parts(part, cuts):
    """``[part(a, b) for each consecutive pair (a, b) of cuts]``, the parts claimed in order by the calling thread
    and the idle helpers; None, with nothing done, when no helper is free (or another split is running)."""
    if WORKERS < 2 or not _BUSY[0].acquire(blocking=False):
        return None
    results, errors = [None] * (len(cuts) - 1), []
    if _SPIN:
        _SPIN[0][_QUIT] = 1  # (a spinning helper would hold the core a helper here is woken on)
    try:
        helpers = [h for h in _helpers() if _idle(h)]
        if not helpers:
            return None
        claim = itertools.count()  # (``next`` on it is atomic under the GIL)
        # the work (and so its arrays), dropped when the caller is done: a job a late helper has yet to run keeps
        # no reference to them (the engine reuses arrays only it refers to)
        entry, started, box = threading.Lock(), [], [part]

        def work(me=None):  # parts in order, as long as there are some and nobody failed
            if me is not None:
                with entry:  # a helper starts only while the caller has not finished (else the caller ran its part)
                    if box[0] is None:
                        return
                    started.append(me)
            run = box[0]
            try:
                for k in claim:
                    if k >= len(results) or errors:
                        return
                    results[k] = run(cuts[k], cuts[k + 1])
            except BaseException as e:
                errors.append(e)

        for i, (go, _, job, _) in enumerate(helpers):
            job[0], job[1] = functools.partial(contextvars.copy_context().run, work, i), True
            go.release()
        work()
        with entry:
            box[0] = part = None
        for i in started:  # (the others will find the work done; their end is collected by a later split)
            _, done, job, _ = helpers[i]
            done.acquire()
            job[1] = False
    except BaseException:  # (interrupted while waiting: a helper may run on; later splits get new helpers)
        _HELPERS.clear()
        raise
    finally:
        _BUSY[0].release()
    if errors:
        raise errors[0]
    return results


def halves(fn, n):
    """``(fn(0, n // 2), fn(n // 2, n))``, the halves over the calling thread and a helper (for work on rows that
    splits no other way, as per-channel passes over a batch); ``(fn(0, n), None)`` when nothing splits."""
    results = _parts(fn, (0, n // 2, n)) if n > 1 else None
    return (fn(0, n), None) if results is None else tuple(results)


def _run(fn, out, operands, blocked):
    """``fn(out, *operands)`` part by part over the calling thread and the idle helpers (block by block within a
    part when ``blocked``)."""
    flat = out.reshape(-1), *[a.reshape(-1) if type(a) is np.ndarray and a.ndim else a for a in operands]
    n, workers = out.size, len(_HELPERS) or WORKERS - 1
    first = min(n, n // (workers + 1) + _LEAD) // _ALIGN * _ALIGN
    rest = max(_ALIGN, -(-(n - first) // (workers * _ALIGN)) * _ALIGN) if workers else n

    def part(a, b):
        for s in range(a, b, _BLOCK if blocked else b - a):
            stop = min(s + _BLOCK, b) if blocked else b
            fn(*[x[s:stop] if type(x) is np.ndarray and x.ndim else x for x in flat])
    if n and _parts(part, sorted({0, *range(first, n, rest), n})) is None:
        fn(*flat)
    return out


def ufunc(f, *operands, out=None):
    """``f(*operands, out=out)`` for the NumPy ufunc ``f``, over the cores when the operands split (else one call)."""
    first = operands[0]
    if type(first) is np.ndarray and first.ndim and first.size < MIN_SIZE:  # (small: no split to look into)
        return f(*operands, out=out)
    shape = _shape(operands, out)
    if shape is None:
        return f(*operands, out=out)
    if out is None:
        dtypes = [a.dtype if isinstance(a, (np.ndarray, np.generic)) else type(a) for a in operands]
        out = np.empty(shape, f.resolve_dtypes((*dtypes, None))[-1])
    return _run(lambda o, *a: f(*a, out=o), out, operands, False)


def expression(fn, *operands, out=None):
    """``fn(xp, out, *operands)`` for an elementwise ``fn`` that writes its result into ``out``, a new array like
    the first operand (or the given ``out``, which ``fn`` may also read), each step in place (``out`` is its one
    temporary): over the cores when the operands split, and in cache-sized blocks, so that all its steps make one
    pass through memory. Returns ``out``."""
    xp = _backend.xp_of(operands[0])
    if out is None:
        out = xp.empty_like(operands[0])
    if _shape(operands, out, EXPRESSION_MIN) is None:
        fn(xp, out, *operands)
        return out
    return _run(functools.partial(fn, np), out, operands, True)


def loop(fn, *operands, out, minimum):
    """``fn(*operands, out)`` for a compiled elementwise loop over flat C-contiguous arrays that releases the GIL
    (ember's numba loops): over the cores when the operands have ``minimum`` elements or more and split. Such a
    loop costs more per element than a NumPy ufunc, so it splits from smaller sizes. Returns ``out``."""
    if _shape(operands, out, minimum) is None:
        fn(*operands, out)
        return out
    return _run(lambda o, *a: fn(*a, o), out, operands, False)


# Time-stamp counter ticks a spinning helper waits for the next run before it blocks (about 0.2 ms at 2.6 GHz): the
# ops of a model's step follow each other closer than that. (PyTorch's OpenMP threads spin likewise.)
SPIN_TICKS = 1 << 19
SPIN_MIN = 1 << 17  # elements from which a loop's parts are run by ``spun``
# Whether helpers may spin: x86 (the loops' spin-wait hint and time-stamp counter), and two CPUs or more for this
# process (a helper spinning on the caller's only CPU would take its time)
SPINS = platform.machine().lower() in ("x86_64", "amd64") and len(
    os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)) > 1
SPIN_CHUNK = 1 << 16  # elements of a part (its arrays fit in L2 alongside another's)
# A run whose caller waited longer than this (ticks, some 50 us) for a helper's last part met a helper that lost its
# CPU to another process within its part (the caller then waits for the rest of a scheduler slice): the next
# BACKOFF_RUNS runs compute on the calling thread
LATE_TICKS = 1 << 17
BACKOFF_RUNS = 64
_BACKOFF = [0]


def spun(parts, run, *args):
    """``run(ctl, *args)``, a run of a loop's C-callable parts (``parts.run`` or one of ``parts.runners``, see
    ember._numba_kernels), whose parts are claimed by the calling thread and helper threads spinning without the GIL
    (each spins SPIN_TICKS for work after its last part, then blocks until a later run wakes it). Returns whether it
    ran: not when another split is running, or helpers may not spin here (the caller then computes alone)."""
    if _BACKOFF[0]:
        _BACKOFF[0] -= 1
        return False
    if not SPINS or WORKERS < 2 or not _BUSY[0].acquire(blocking=False):
        return False
    try:
        ctl, helpers = _spinners(parts)
        ctl[_QUIT] = 0
        woken = False
        for wake, asleep, _ in helpers:
            if asleep[0]:  # (it joins this run if it wakes in time, and spins for the next)
                asleep[0] = False
                wake.release()
                woken = True
        if run(ctl, *args) > LATE_TICKS and not woken:  # (a woken helper starts late anyway)
            _BACKOFF[0] = BACKOFF_RUNS
    finally:
        _BUSY[0].release()
    return True


_QUIT = 8  # the word of a run's control array (ember._numba_kernels.QUIT) that stops the spinning


def _spinners(parts):
    if not _SPIN:
        ctl = np.zeros(9, np.int64)
        helpers = []
        for _ in range(WORKERS - 1):
            wake, asleep = threading.Lock(), [True]
            wake.acquire()
            thread = threading.Thread(target=_spin, args=(parts.serve, ctl, wake, asleep), daemon=True,
                                      name="ember-spin")
            thread.start()
            helpers.append((wake, asleep, thread.native_id))
        _SPIN[:] = ctl, helpers
        _AVOIDED[0] = None
    _stay_off()
    return _SPIN


def _spin(serve, ctl, wake, asleep):
    while True:
        wake.acquire()
        serve(ctl, SPIN_TICKS)
        asleep[0] = True
