"""Large host arrays computed over the cores: NumPy releases the GIL in its ufunc loops.

Elementwise work on C-contiguous operands of one shape splits into one flat chunk per worker: the calling
thread computes one, the pool's threads the others, each into its part of one output. Chunks start at multiples
of ``_ALIGN`` elements, so NumPy's SIMD loops meet every element as in one call over the whole array: the values
are bit for bit those of one call. (Reductions must not split like this: the order of float additions would
change.) Workers run in a copy of the caller's context, so NumPy's errstate (a context variable) holds there too.
"""
import contextvars
import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

from . import _backend

WORKERS = min(4, os.cpu_count() or 1)
# Elements. Waking a pool thread costs some 30-100 us on a 2-core VM, and the split must also beat what one core
# gets from its caches: float32 mul/add-scalar/exp/tanh on a quiet Intel 2-core VM, one call -> split, in us:
# 512K 246/144/236/241 -> 305/223/358/290, 1M 519/301/527/397 -> 511/332/532/321 (a 20-op chain of such ops
# was 4% slower split), 2M 980/683/1202/972 -> 810/555/837/722, 4M 2681/1326/2432/2558 -> 1385/930/1514/1411.
MIN_SIZE = 1 << 21
# Elements from which a multi-step expression splits: its blocks also save passes through memory (tanh's VJP on 1M
# float32: 712 us as one call, 430 us split in blocks)
EXPRESSION_MIN = 1 << 19
_ALIGN = 1024  # elements
# Elements an expression computes at a time, its operands and temporary staying in L2. Smaller blocks cost more
# GIL hand-offs between the threads than they save (tanh's VJP on 1M float32: 712 us unsplit; split in blocks of
# 32K/64K/128K/all 734/526/430/462 us).
_BLOCK = 1 << 17

_POOL = []
os.register_at_fork(after_in_child=_POOL.clear)  # (a forked child has none of the parent's threads)


def pool():
    """The thread pool of ops that split large NumPy work over the cores."""
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(WORKERS))
    return _POOL[0]


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


def _run(fn, out, operands, blocked):
    """``fn(out, *operands)`` chunk by chunk over the workers (block by block within a chunk when ``blocked``)."""
    n = out.size
    step = -(-n // (WORKERS * _ALIGN)) * _ALIGN
    flat = out.reshape(-1), *[a.reshape(-1) if type(a) is np.ndarray and a.ndim else a for a in operands]
    task = _blocks if blocked else _chunk
    jobs = [pool().submit(contextvars.copy_context().run, task, fn, flat, s, min(s + step, n))
            for s in range(step, n, step)]
    try:
        task(fn, flat, 0, step)
    finally:
        wait(jobs)  # (no worker writes on after an error here)
    for j in jobs:
        j.result()
    return out


def _chunk(fn, flat, a, b):
    fn(*[x[a:b] if type(x) is np.ndarray and x.ndim else x for x in flat])


def _blocks(fn, flat, a, b):
    for s in range(a, b, _BLOCK):
        _chunk(fn, flat, s, min(s + _BLOCK, b))


def ufunc(f, *operands, out=None):
    """``f(*operands, out=out)`` for the NumPy ufunc ``f``, over the cores when the operands split (else one call)."""
    shape = _shape(operands, out)
    if shape is None:
        return f(*operands, out=out)
    if out is None:
        dtypes = [a.dtype if isinstance(a, (np.ndarray, np.generic)) else type(a) for a in operands]
        out = np.empty(shape, f.resolve_dtypes((*dtypes, None))[-1])
    return _run(lambda o, *a: f(*a, out=o), out, operands, False)


def expression(fn, *operands):
    """``fn(xp, out, *operands)`` for an elementwise ``fn`` that writes its result into ``out``, a new array like
    the first operand, each step in place (``out`` is its one temporary): over the cores when the operands split,
    and in cache-sized blocks, so that all its steps make one pass through memory. Returns ``out``."""
    xp = _backend.xp_of(operands[0])
    out = xp.empty_like(operands[0])
    if _shape(operands, out, EXPRESSION_MIN) is None:
        fn(xp, out, *operands)
        return out
    return _run(functools.partial(fn, np), out, operands, True)
