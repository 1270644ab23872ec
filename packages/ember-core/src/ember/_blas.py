"""NumPy's own BLAS called through ctypes, for hot paths where NumPy's operators cost passes and temporaries:
``AXPY`` (SGD's update), ``gemm`` (a product written into, or accumulated into, an existing array) and
``transpose`` (OpenBLAS's omatcopy: a blocked transposed copy, some 3x faster than NumPy's), and
``single_threaded`` for callers that spread small products over the cores themselves.

The functions are the 64-bit-integer CBLAS that NumPy's wheels link (OpenBLAS), found through NumPy's extension
module (dlsym also searches the libraries it loaded) and checked by a test call at import; where none is reachable
(other NumPy builds, non-CPython) the tables are empty and callers use NumPy. They are called without argtypes on
ctypes objects (argument conversion costs more than a short axpy); an array's data pointer is read from the array
object, at the field after the object header (checked first).
"""
import contextlib
import ctypes
import sys
import threading

import numpy as np

data = ctypes.c_size_t.from_address  # data(id(a) + DATA): a's data pointer, as a ctypes argument
DATA = object.__basicsize__
INT = ctypes.c_int64
ONE = INT(1)
_ROW, _N, _T = 101, 111, 112  # CblasRowMajor, CblasNoTrans, CblasTrans
_REALS = {np.dtype(np.float32): (ctypes.c_float, "s"), np.dtype(np.float64): (ctypes.c_double, "d")}


def lookup():
    """({dtype: (axpy, its real ctype)}, {dtype: (gemm, real(0), real(1))}, {dtype: (omatcopy, real(1))}) for
    float32 and float64, each entry only if its test call gave the right numbers, and OpenBLAS's (get, set) of its
    thread count (None if absent); all empty where no BLAS is reachable."""
    if sys.implementation.name != "cpython":  # where id() is not the object's address
        return {}, {}, {}, None
    probe = np.ones(1)
    if data(id(probe) + DATA).value != probe.ctypes.data:
        return {}, {}, {}, None
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # NumPy 1
        from numpy.core import _multiarray_umath as umath
    try:
        lib = ctypes.CDLL(umath.__file__)
    except OSError:
        return {}, {}, {}, None

    def symbol(name):
        fn = getattr(lib, "scipy_cblas_" + name, None) or getattr(lib, "cblas_" + name, None)
        if fn is not None:
            fn.restype = None
        return fn

    axpys, gemms, omats = {}, {}, {}
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
        if omat := symbol(p + "omatcopy64_"):
            a, b = np.arange(6, dtype=dtype).reshape(2, 3), np.zeros((3, 4), dtype)
            omat(_ROW, _T, INT(2), INT(3), real(1.0), data(id(a) + DATA), INT(3), data(id(b) + DATA), INT(4))
            if b.tolist() == [[0.0, 3.0, 0.0, 0.0], [1.0, 4.0, 0.0, 0.0], [2.0, 5.0, 0.0, 0.0]]:
                omats[dtype] = omat, real(1.0)
    get, put = (getattr(lib, f"scipy_openblas_{v}_num_threads64_", None) for v in ("get", "set"))
    threads = None
    if get is not None and put is not None:
        get.restype, put.restype = ctypes.c_int, None
        threads = (get, put) if get() >= 1 else None
    return axpys, gemms, omats, threads


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


def transpose(a, out):
    """``out[i] = a[i].T`` for 3-D arrays of one dtype, each matrix with unit stride along its rows (row stride
    free, item stride free): OpenBLAS's omatcopy per matrix for float32/float64, a NumPy copy otherwise. ``out``
    must not overlap ``a``."""
    entry = OMATCOPY.get(out.dtype) if type(a) is type(out) is np.ndarray and a.dtype is out.dtype else None
    s = out.itemsize
    if not (entry and a.ndim == out.ndim == 3 and out.shape == (a.shape[0], a.shape[2], a.shape[1])
            and a.strides[2] == s == out.strides[2] and a.strides[1] % s == 0 and out.strides[1] % s == 0
            and a.strides[1] >= a.shape[2] * s and out.strides[1] >= out.shape[2] * s and min(a.shape)
            and a.flags.aligned and out.flags.aligned and out.flags.writeable):
        np.copyto(out, a.swapaxes(1, 2))
        return out
    fn, one = entry
    rows, cols, lda, ldb = INT(a.shape[1]), INT(a.shape[2]), INT(a.strides[1] // s), INT(out.strides[1] // s)
    pa, pb, sa, sb = a.ctypes.data, out.ctypes.data, a.strides[0], out.strides[0]
    for i in range(a.shape[0]):
        fn(_ROW, _T, rows, cols, one, ctypes.c_size_t(pa + i * sa), lda, ctypes.c_size_t(pb + i * sb), ldb)
    return out


_SINGLE = [threading.Lock(), 0, 0]  # (guard, callers inside single_threaded, the thread count to restore)


def threads():
    """The number of threads NumPy's BLAS computes a product with (1 where that is unknown)."""
    return THREADS[0]() if THREADS else 1


@contextlib.contextmanager
def single_threaded():
    """OpenBLAS computes every product on the calling thread within (its thread count is process-wide: callers in
    several threads nest, the last one out restores it)."""
    if THREADS is None:
        yield
        return
    guard = _SINGLE[0]
    with guard:
        if not _SINGLE[1]:
            _SINGLE[2] = THREADS[0]()
            THREADS[1](1)
        _SINGLE[1] += 1
    try:
        yield
    finally:
        with guard:
            _SINGLE[1] -= 1
            if not _SINGLE[1]:
                THREADS[1](_SINGLE[2])


AXPY, GEMM, OMATCOPY, THREADS = lookup()
