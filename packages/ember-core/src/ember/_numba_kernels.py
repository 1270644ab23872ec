"""numba's engine of ember-core's loops: the functions of ``ember._formulas`` (the error function family and GELU
with its gradient, exact and tanh-approximated; small powers; the float32 logistic family; the gradients of sigmoid
and tanh from their outputs; the rows of softmax, log_softmax and layer norm) compiled with numba's primitives in
place of NumPy's: LLVM's fused multiply-add and bit casts, the C library's math, row reductions that LLVM
vectorises. A loop makes one pass through memory where a chain of NumPy calls makes one per step (the old 70-term erf
series took 150 ms for 1M elements).

Imported by ``ember._jit`` only, which compiles a loop on its background thread (or on the call in deterministic
mode): ``import ember`` never loads numba, and no call waits for it. Each loop writes ``out`` from C-contiguous arrays
and releases the GIL, so ``ember._parallel`` splits large inputs over the cores; ``parts`` makes C-callable parts of
the loops, which ``ember._parallel``'s spinning helpers run without the GIL (see ``run``). numba caches the compiled
loops next to ``_formulas.py`` (their source), and finds them stale when that file changes (not when this one does:
after editing a primitive here, delete ``__pycache__/_formulas.*.nb*``).
"""
import math
import re

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from . import _formulas
from ._jit import rebound

# no contraction into FMAs (fastmath "contract"): the loops make the operations _formulas writes, as NumPy does
_loop = numba.njit(cache=True, nogil=True, error_model="numpy")  # x / 0 is inf, as in a ufunc
_inline = numba.njit(inline="always", error_model="numpy")


@intrinsic
def _bits(typingctx, x):
    return types.int32(types.float32), lambda context, builder, sig, args: builder.bitcast(args[0], ir.IntType(32))


@intrinsic
def _from_bits(typingctx, i):
    return types.float32(types.int32), lambda context, builder, sig, args: builder.bitcast(args[0], ir.FloatType())


@intrinsic
def _bits64(typingctx, x):
    return types.int64(types.float64), lambda context, builder, sig, args: builder.bitcast(args[0], ir.IntType(64))


@intrinsic
def _from_bits64(typingctx, i):
    return types.float64(types.int64), lambda context, builder, sig, args: builder.bitcast(args[0], ir.DoubleType())


@intrinsic
def _fma(typingctx, a, b, c):
    """``a * b + c`` with one rounding (LLVM's fma: the instruction where there is one)."""
    return a(a, b, c), lambda context, builder, sig, args: builder.fma(*args)


@intrinsic
def _maximum(typingctx, a, b):
    """The larger of ``a`` and ``b``, NaN if either is (LLVM's maximum)."""
    def codegen(context, builder, sig, args):
        t = args[0].type
        return builder.call(builder.module.declare_intrinsic("llvm.maximum", [t], ir.FunctionType(t, [t, t])), args)
    return a(a, b), codegen


# ---- row reductions: vectorised only where LLVM may reassociate them (kept out of the loops around them, whose
# exp's rounding tricks must not be reassociated). The order of additions is fixed by the compiled code, so results
# do not depend on threads. The maxima by LLVM's NaN-propagating ``maximum`` (a compare and select, as Python's max
# compiles, is no reduction LLVM vectorises).
_sums = numba.njit(nogil=True, error_model="numpy", fastmath={"reassoc", "nsz", "contract"})


@_sums
def _sum(x):
    s = np.float32(0)
    for j in range(x.size):
        s += x[j]
    return s


@_sums
def _max(x):
    m = x[0]
    for j in range(x.size):
        m = _maximum(m, x[j])
    return m


@_sums
def _count(x, m):
    c = 0
    for j in range(x.size):
        c += x[j] == m
    return c


@_sums
def _dot(x, y):
    s = np.float32(0)
    for j in range(x.size):
        s += x[j] * y[j]
    return s


@_sums
def _dot_about(v, x, m):
    s = np.float32(0)
    for j in range(x.size):
        s += v[j] * (x[j] - m)
    return s


@_sums
def _squares_about(x, m):
    s = np.float32(0)
    for j in range(x.size):
        d = x[j] - m
        s += d * d
    return s


PRIMITIVES = {
    "each": range, "where": _inline(lambda c, a, b: a if c else b), "copysign": math.copysign, "fma": _fma,
    "fma64": _fma,
    "product_error": _inline(lambda a, b, p: _fma(a, b, -p)), "bits": _bits, "from_bits": _from_bits,
    "bits64": _bits64, "from_bits64": _from_bits64, "erf64": math.erf, "erfc64": math.erfc, "exp64": math.exp,
    "row_max": _max, "row_sum": _sum, "row_count": _count, "row_dot": _dot, "row_dot_about": _dot_about,
    "row_squares_about": _squares_about, "down": _inline(lambda v: v),
}
globals().update({name: f for name, f in rebound(
    _formulas, lambda name, f: _loop(f) if name in _formulas.LOOPS else _inline(f), **PRIMITIVES).items()
    if name in _formulas.LOOPS})


# ---- split runs without the GIL: a part of a loop is a C function ``part(block, lo, hi)`` computing elements [lo, hi)
# of the arrays whose addresses (then the scalars' float64 bits) ``block`` holds. ``run`` hands out the parts of one
# run through ``ctl`` (int64 words, below) to helper threads spinning in ``serve``: the helpers take no GIL, so a
# helper that is spinning starts within a microsecond (a blocked one takes 20-40 us to wake on a VM whose idle vCPUs
# halt, and a Python helper waits for the GIL besides).
STATE, INSIDE, FN, BLOCK, PARTS, CHUNK, SIZE, NEXT, QUIT = (8 * k for k in range(9))  # byte offsets of ctl's words
# STATE: 2 * (runs so far) + 1 while a run is open; INSIDE: helpers within a run; NEXT: the next part to claim; QUIT:
# nonzero when the helpers are to stop spinning (``ember._parallel``'s other splits want their core)


def _at(builder, address):
    return builder.inttoptr(address, ir.PointerType(ir.IntType(64)))


@intrinsic
def _load(typingctx, address):
    """The int64 at ``address`` (sequentially consistent: another thread's stores are seen in order)."""
    return types.int64(types.intp), lambda context, builder, sig, args: builder.load_atomic(
        _at(builder, args[0]), "seq_cst", 8)


@intrinsic
def _store(typingctx, address, value):
    def codegen(context, builder, sig, args):
        builder.store_atomic(args[1], _at(builder, args[0]), "seq_cst", 8)
        return context.get_dummy_value()
    return types.void(types.intp, types.int64), codegen


@intrinsic
def _add(typingctx, address, value):
    """Adds ``value`` to the int64 at ``address`` atomically; returns the value before."""
    return types.int64(types.intp, types.int64), lambda context, builder, sig, args: builder.atomic_rmw(
        "add", _at(builder, args[0]), args[1], "seq_cst")


@intrinsic
def _pause(typingctx):
    """The spin-wait hint (x86 ``pause``): a spinning core yields its pipeline and memory bandwidth."""
    def codegen(context, builder, sig, args):
        f = builder.module.declare_intrinsic("llvm.x86.sse2.pause", (), ir.FunctionType(ir.VoidType(), ()))
        builder.call(f, ())
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def _ticks(typingctx):
    """The time-stamp counter."""
    def codegen(context, builder, sig, args):
        f = builder.module.declare_intrinsic("llvm.readcyclecounter", (), ir.FunctionType(ir.IntType(64), ()))
        return builder.call(f, ())
    return types.int64(), codegen


@intrinsic
def _call_part(typingctx, fn, block, lo, hi):
    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        builder.call(builder.inttoptr(args[0], ir.PointerType(ir.FunctionType(ir.VoidType(), (i64, i64, i64)))),
                     args[1:])
        return context.get_dummy_value()
    return types.void(types.intp, types.intp, types.intp, types.intp), codegen


def _pointer_to(dtype):
    @intrinsic
    def pointer(typingctx, address):
        return types.CPointer(dtype)(types.intp), lambda context, builder, sig, args: builder.inttoptr(
            args[0], context.get_value_type(types.CPointer(dtype)))
    return pointer


_POINTERS = {"float32": (_pointer_to(types.float32), 4), "float64": (_pointer_to(types.float64), 8)}


@_inline
def _claim(fn, block, parts, chunk, size, base):
    """Runs the parts of the open run as long as there are some left to claim."""
    while True:
        k = _add(base + NEXT, 1)
        if k >= parts:
            return
        _call_part(fn, block, k * chunk, min(size, (k + 1) * chunk))


@numba.njit(nogil=True, cache=True)
def serve(ctl, ticks):
    """A helper's wait: spins for runs and takes their parts until ``ticks`` of the time-stamp counter pass without
    one (or QUIT is set), then returns (to block)."""
    base = ctl.ctypes.data
    last = -1
    start = _ticks()
    while True:
        state = _load(base + STATE)
        if state & 1 and state != last:
            _add(base + INSIDE, 1)
            if _load(base + STATE) == state:  # (still open: its fields are this run's)
                _claim(_load(base + FN), _load(base + BLOCK), _load(base + PARTS), _load(base + CHUNK),
                       _load(base + SIZE), base)
            _add(base + INSIDE, -1)
            last = state
            start = _ticks()
        elif _ticks() - start > ticks or _load(base + QUIT):
            return
        _pause()


@_inline
def _run(ctl, fn, block, size, chunk):
    base = ctl.ctypes.data
    parts = (size + chunk - 1) // chunk
    state = _load(base + STATE)
    _store(base + FN, fn)
    _store(base + BLOCK, block.ctypes.data)
    _store(base + PARTS, parts)
    _store(base + CHUNK, chunk)
    _store(base + SIZE, size)
    _store(base + NEXT, 0)
    _store(base + STATE, state + 3)  # open
    _claim(fn, block.ctypes.data, parts, chunk, size, base)
    _store(base + STATE, state + 2)  # closed: no helper joins any more; those inside end their parts
    start = _ticks()
    while _load(base + INSIDE):
        _pause()
    block[0] = 0  # (the block lives until here)
    return _ticks() - start


@numba.njit(nogil=True, cache=True)
def run(ctl, fn, block, size, chunk):
    """``fn``'s parts of ``chunk`` elements (or rows) over ``size``, claimed in order by the calling thread and the
    helpers spinning in ``serve``; ``block`` (int64) the parts' entries. Returns once every part is done, with the
    ticks it waited at the end for the helpers' last parts. One caller at a time. (``run1``/``run2``, and ``*s`` with
    two scalars: elementwise loops' runs, the block filled here.)"""
    return _run(ctl, fn, block, size, chunk)


@numba.njit(nogil=True, cache=True)
def run1(ctl, fn, a, out, chunk):
    block = np.empty(2, np.int64)
    block[0], block[1] = a.ctypes.data, out.ctypes.data
    return _run(ctl, fn, block, out.size, chunk)


@numba.njit(nogil=True, cache=True)
def run2(ctl, fn, a, b, out, chunk):
    block = np.empty(3, np.int64)
    block[0], block[1], block[2] = a.ctypes.data, b.ctypes.data, out.ctypes.data
    return _run(ctl, fn, block, out.size, chunk)


@numba.njit(nogil=True, cache=True)
def run1s(ctl, fn, a, out, s0, s1, chunk):
    block = np.empty(4, np.int64)
    block[0], block[1] = a.ctypes.data, out.ctypes.data
    block[2], block[3] = _bits64(np.float64(s0)), _bits64(np.float64(s1))
    return _run(ctl, fn, block, out.size, chunk)


@numba.njit(nogil=True, cache=True)
def run2s(ctl, fn, a, b, out, s0, s1, chunk):
    block = np.empty(5, np.int64)
    block[0], block[1], block[2] = a.ctypes.data, b.ctypes.data, out.ctypes.data
    block[3], block[4] = _bits64(np.float64(s0)), _bits64(np.float64(s1))
    return _run(ctl, fn, block, out.size, chunk)


@_inline
def _rows_block(x, k):
    """A row loop's block of ``k`` entries, its first three filled (see ``_rows_part``)."""
    block = np.empty(k, np.int64)
    block[0], block[1], block[2] = x.shape[0], x.shape[1], x.shape[0] // 2
    return block


@numba.njit(nogil=True, cache=True)
def run_rows1(ctl, fn, x, out, chunk):
    block = _rows_block(x, 5)
    block[3], block[4] = x.ctypes.data, out.ctypes.data
    return _run(ctl, fn, block, x.shape[0], chunk)


@numba.njit(nogil=True, cache=True)
def run_rows2(ctl, fn, x, g, out, chunk):
    block = _rows_block(x, 6)
    block[3], block[4], block[5] = x.ctypes.data, g.ctypes.data, out.ctypes.data
    return _run(ctl, fn, block, x.shape[0], chunk)


@numba.njit(nogil=True, cache=True)
def run_layer_norm(ctl, fn, x, w, b, eps, out, chunk):
    block = _rows_block(x, 10)
    block[3], block[4], block[5], block[6], block[7] = x.ctypes.data, w.ctypes.data, w.size, b.ctypes.data, b.size
    block[8], block[9] = _bits64(eps), out.ctypes.data
    return _run(ctl, fn, block, x.shape[0], chunk)


@numba.njit(nogil=True, cache=True)
def run_layer_norm_backward(ctl, fn, x, g, w, eps, gx, gw, gb, gw1, gb1):
    """(Its parts: the two halves of the rows, ``gw``/``gb`` then ``gw1``/``gb1`` their accumulators.)"""
    block = _rows_block(x, 17)
    block[3], block[4], block[5], block[6] = x.ctypes.data, g.ctypes.data, w.ctypes.data, w.size
    block[7], block[8] = _bits64(eps), gx.ctypes.data
    block[9], block[10], block[11], block[12] = gw.ctypes.data, gw.size, gb.ctypes.data, gb.size
    block[13], block[14], block[15], block[16] = gw1.ctypes.data, gw1.size, gb1.ctypes.data, gb1.size
    return _run(ctl, fn, block, 2, 1)


_ROW_RUNNERS = {"softmax_rows_f32": run_rows1, "log_softmax_rows_f32": run_rows1,
                "softmax_backward_rows_f32": run_rows2, "log_softmax_backward_rows_f32": run_rows2,
                "layer_norm_rows_f32": run_layer_norm, "layer_norm_backward_rows_f32": run_layer_norm_backward}


@_inline
def _array(block, k, lo, n, pointer, itemsize):
    return numba.carray(pointer(_load(block + 8 * k) + lo * itemsize), n)


@_inline
def _scalar(block, k, scalar):
    return scalar(_from_bits64(_load(block + 8 * k)))


_f32 = _POINTERS["float32"][0]


@_inline
def _rows_of(block, k, lo, hi):
    """Rows [lo, hi) of the float32 matrix at entry ``k`` of a row loop's block (entry 1: the row length)."""
    n = _load(block + 8)
    return numba.carray(_f32(_load(block + 8 * k) + lo * n * 4), (hi - lo, n))


@_inline
def _vector(block, k):
    """The float32 vector of entries ``k`` (address) and ``k + 1`` (length)."""
    return numba.carray(_f32(_load(block + 8 * k)), _load(block + 8 * k + 8))


def _elementwise_part(loop, arrays, scalars, pointer, itemsize, s):
    def view(block, k, lo, n):
        return _array(block, k, lo, n, pointer, itemsize)
    view = _inline(view)
    if (arrays, scalars) == (1, 0):
        def part(block, lo, hi):
            loop(view(block, 0, lo, hi - lo), view(block, 1, lo, hi - lo))
    elif (arrays, scalars) == (2, 0):
        def part(block, lo, hi):
            loop(view(block, 0, lo, hi - lo), view(block, 1, lo, hi - lo), view(block, 2, lo, hi - lo))
    elif (arrays, scalars) == (1, 2):
        def part(block, lo, hi):
            loop(view(block, 0, lo, hi - lo), _scalar(block, 2, s), _scalar(block, 3, s), view(block, 1, lo, hi - lo))
    elif (arrays, scalars) == (2, 2):
        def part(block, lo, hi):
            loop(view(block, 0, lo, hi - lo), view(block, 1, lo, hi - lo), _scalar(block, 3, s),
                 _scalar(block, 4, s), view(block, 2, lo, hi - lo))
    else:
        raise NotImplementedError
    return part


def _rows_part(loop, name):
    """A row loop's part over rows [lo, hi) (layer norm's gradient: ``lo`` is the half, 0 or 1, of the rows that
    entry 2 splits, with that half's accumulators). Blocks: the rows, their length, the half's split, then the
    loop's arguments: a matrix as its address, a vector as address and length, a float as its bits."""
    if name in ("softmax_rows_f32", "log_softmax_rows_f32"):
        def part(block, lo, hi):
            loop(_rows_of(block, 3, lo, hi), _rows_of(block, 4, lo, hi))
    elif name in ("softmax_backward_rows_f32", "log_softmax_backward_rows_f32"):
        def part(block, lo, hi):
            loop(_rows_of(block, 3, lo, hi), _rows_of(block, 4, lo, hi), _rows_of(block, 5, lo, hi))
    elif name == "layer_norm_rows_f32":
        def part(block, lo, hi):
            loop(_rows_of(block, 3, lo, hi), _vector(block, 4), _vector(block, 6), _scalar(block, 8, np.float64),
                 _rows_of(block, 9, lo, hi))
    elif name == "layer_norm_backward_rows_f32":
        def part(block, lo, hi):
            split = _load(block + 16)
            a, b = (0, split) if lo == 0 else (split, _load(block))
            loop(_rows_of(block, 3, a, b), _rows_of(block, 4, a, b), _vector(block, 5), _scalar(block, 7, np.float64),
                 _rows_of(block, 8, a, b), _vector(block, 9 + 4 * lo), _vector(block, 11 + 4 * lo))
    else:
        raise NotImplementedError
    return part


class _Parts:
    """The C-callable parts of the loops, compiled by ``compile(key)``, ``key`` the loop's name and its signature
    (elementwise: 1 or 2 arrays, 0 or 2 scalars, then ``out``: ``"silu_f32(float32[::1], float32[::1])"``; the row
    loops of ``_rows_part``); their addresses in ``address``, and in ``runners`` the ``run*`` that fills their block
    from the loop's arguments (elementwise: the arrays, then the scalars, then the chunk). (The parts call the loops
    compiled for that signature: no second compilation of them.)"""

    def __init__(self):
        self.address, self.runners, self._made = {}, {}, []  # runners: the elementwise loops' run1/run2/...
        self.run, self.serve = run, serve

    def compile(self, key):
        name, signature = key.split("(", 1)
        loop = globals()[name]
        loop.compile(f"({signature}")
        kinds = [k.strip() for k in signature.rstrip(")").split(",")]
        if "_rows_" in name:
            part = _rows_part(loop, name)
            runner = _ROW_RUNNERS[name]  # (arguments: the loop's, then the second half's accumulators, or the chunk)
            tail = kinds[-2:] if name == "layer_norm_backward_rows_f32" else ["int64"]
            runner.compile(f"(int64[::1], int64, {', '.join(kinds + tail)})")
        else:
            arrays = sum(k.endswith("[::1]") for k in kinds) - 1
            pointer, itemsize = _POINTERS[re.sub(r"\[.*", "", kinds[0])]
            part = _elementwise_part(loop, arrays, len(kinds) - arrays - 1, pointer, itemsize,
                                     getattr(np, kinds[arrays]) if len(kinds) > arrays + 1 else None)
            kinds = [k for k in kinds if k.endswith("]")] + [k for k in kinds if not k.endswith("]")]  # (scalars last)
            runner = globals()[f"run{arrays}{'s' if len(kinds) > arrays + 1 else ''}"]
            runner.compile(f"(int64[::1], int64, {', '.join(kinds)}, int64)")
        self.runners[key] = runner
        made = numba.cfunc(types.void(types.intp, types.intp, types.intp), nogil=True, error_model="numpy")(part)
        run.compile("(int64[::1], int64, int64[::1], int64, int64)")
        serve.compile("(int64[::1], int64)")
        self._made.append(made)
        self.address[key] = made.address


parts = _Parts()
