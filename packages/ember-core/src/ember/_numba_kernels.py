"""numba's engine of ember-core's loops: the functions of ``ember._formulas`` (the error function family and GELU
with its gradient, exact and tanh-approximated; small powers; the float32 logistic family; the gradients of sigmoid
and tanh from their outputs; the rows of softmax, log_softmax and layer norm) compiled with numba's primitives in
place of NumPy's: LLVM's fused multiply-add and bit casts, the C library's math, row reductions that LLVM
vectorises. A loop makes one pass through memory where a chain of NumPy calls makes one per step (the old 70-term erf
series took 150 ms for 1M elements).

Imported by ``ember._jit`` only, which compiles a loop on its background thread (or on the call in deterministic
mode): ``import ember`` never loads numba, and no call waits for it. Each loop writes ``out`` from C-contiguous arrays
and releases the GIL, so ``ember._parallel`` splits large inputs over the cores. numba caches the compiled loops
next to ``_formulas.py`` (its source), and finds them stale when that file changes (not when this one does: after
editing a primitive here, delete ``__pycache__/_formulas.*.nb*``).
"""
import math

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
