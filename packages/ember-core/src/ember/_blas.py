"""NumPy's own BLAS called through ctypes, for hot paths where NumPy's operators cost passes and temporaries:
``AXPY`` (SGD's update) and ``gemm`` (a product written into, or accumulated into, an existing array).

The functions are the 64-bit-integer CBLAS that NumPy's wheels link (OpenBLAS), found through NumPy's extension
module (dlsym also searches the libraries it loaded) and checked by a test call at import; where none is reachable
(other NumPy builds, non-CPython) the tables are empty and callers use NumPy. They are called without argtypes on
ctypes objects (argument conversion costs more than a short axpy); an array's data pointer is read from the array
object, at the field after the object header (checked first).
"""
import ctypes
import sys

import numpy as np

data = ctypes.c_size_t.from_address  # data(id(a) + DATA): a's data pointer, as a ctypes argument
DATA = object.__basicsize__
INT = ctypes.c_int64
ONE = INT(1)
_ROW, _N, _T = 101, 111, 112  # CblasRowMajor, CblasNoTrans, CblasTrans
_REALS = {np.dtype(np.float32): (ctypes.c_float, "s"), np.dtype(np.float64): (ctypes.c_double, "d")}


def lookup():
    """({dtype: (axpy, its real ctype)}, {dtype: (gemm, real(0), real(1))}) for float32 and float64, each entry
    only if its test call gave the right numbers; both empty where no BLAS is reachable."""
    if sys.implementation.name != "cpython":  # where id() is not the object's address
        return {}, {}
    probe = np.ones(1)
    if data(id(probe) + DATA).value != probe.ctypes.data:
        return {}, {}
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # NumPy 1
        from numpy.core import _multiarray_umath as umath
    try:
        lib = ctypes.CDLL(umath.__file__)
    except OSError:
        return {}, {}

    def symbol(name):
        fn = getattr(lib, "scipy_cblas_" + name, None) or getattr(lib, "cblas_" + name, None)
        if fn is not None:
            fn.restype = None
        return fn

    axpys, gemms = {}, {}
    for dtype, (real, p) in _REALS.items():
        if axpy := symbol(p + "axpy64_"):
            x, y = np.arange(1, 6, dtype=dtype), np.ones(5, dtype)
            axpy(INT(4), real(-2.0), data(id(x) + DATA), ONE, data(id(y) + DATA), ONE)
            if y.tolist() == [-1.0, -3.0, -5.0, -7.0, 1.0]:
                axpys[dtype] = axpy, real
        if fn := symbol(p + "gemm64_"):
            entry = fn, real(0.0), real(1.0)
            a, b = np.arange(6, dtype=dtype).reshape(3, 2), np.arange(1, 7, dtype=dtype).reshape(3, 2)
            c = np.ones((3, 4), dtype)
            # row slices of a wider array, a transposed operand, then a transposed output
            if _call(entry, a, b[:2].T, c[:, 1:3], 1) and _call(entry, a[:2].T, b[:2], c[1:3, :2].T, 0) and \
                    c.tolist() == [[1.0, 3.0, 5.0, 1.0], [6.0, 10.0, 19.0, 1.0], [8.0, 14.0, 33.0, 1.0]]:
                gemms[dtype] = entry
    return axpys, gemms


def _layout(x, s):
    """(transposition, leading dimension) of a 2-D array with unit stride along one axis, for a row-major call;
    None for any other layout."""
    r, k = x.strides
    m, n = x.shape
    if k == s and r % s == 0 and r >= n * s:
        return _N, r // s
    if r == s and k % s == 0 and k >= m * s:
        return _T, k // s
    return None


def _call(entry, a, b, c, beta):
    """``c = a @ b + beta * c`` in one BLAS call (``entry`` from GEMM); False, with nothing done, where the
    operands' layouts do not suit it."""
    s = c.itemsize
    lc = _layout(c, s)
    if lc and lc[0] == _T:  # a column-major c: its transpose is a row-major c^T = b^T a^T
        a, b, c, lc = b.T, a.T, c.T, (_N, lc[1])
    la, lb = _layout(a, s), _layout(b, s)
    if not (la and lb and lc):
        return False
    fn, zero, one = entry
    m, n = c.shape
    fn(_ROW, la[0], lb[0], INT(m), INT(n), INT(a.shape[1]), one, data(id(a) + DATA), INT(la[1]),
       data(id(b) + DATA), INT(lb[1]), one if beta else zero, data(id(c) + DATA), INT(lc[1]))
    return True


def gemm(a, b, c, beta=0):
    """``c = a @ b`` (``beta=0``) or ``c += a @ b`` (``beta=1``) for 2-D arrays, without temporaries: one BLAS call
    for NumPy float32/float64 arrays of one dtype with unit stride along one axis (transposed views and row slices
    of larger arrays included) and an aligned writeable ``c``; NumPy (any ``xp``, and its errors for mismatched
    shapes) otherwise. ``c`` must not overlap ``a`` or ``b``."""
    entry = GEMM.get(c.dtype) if type(a) is type(b) is type(c) is np.ndarray else None
    if not (entry and a.dtype is c.dtype and b.dtype is c.dtype and a.ndim == b.ndim == 2 and c.size and a.shape[1]
            and c.shape == (a.shape[0], b.shape[1]) and a.shape[1] == b.shape[0] and c.flags.writeable
            and c.flags.aligned and a.flags.aligned and b.flags.aligned and _call(entry, a, b, c, beta)):
        if beta:
            c += a @ b
        else:
            c[...] = a @ b
    return c


AXPY, GEMM = lookup()
