"""float16 <-> float32 conversions on NumPy arrays through whole-array integer and float operations: NumPy's
own float16 casts convert one element at a time (about 20 times slower than a copy here), these take a few
vectorised passes. Results are bitwise NumPy's (round to nearest even, overflow to inf, NaN kept NaN).
CuPy arrays and other dtypes go through ``astype``; bfloat16 needs nothing: ml_dtypes' casts are already
as fast as integer passes would be."""
import numpy as np

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_UP = np.float32(2.0 ** 112)  # float16's exponent bias is 112 below float32's
_TO_INF, _TO_ZERO = np.float32(2.0 ** 112), np.float32(2.0 ** -110)


def widen(a):
    """``a`` (any dtype) as float32; float16 NumPy arrays exactly, through bit operations."""
    if type(a) is not np.ndarray or a.dtype != _F16:
        return a.astype(_F32)
    if a.ndim == 0:  # whole-array operations on 0-d arrays give scalars
        return widen(a.reshape(1)).reshape(())
    u = a.view(np.uint16).astype(np.uint32)
    em = u & 0x7FFF
    special = em >= 0x7C00  # inf and NaN: exponent all ones, payload kept
    em <<= 13
    f = em.view(_F32)
    f *= _UP  # exact for normal and subnormal halves (a subnormal float32 times 2**112 is a normal one)
    if special.any():
        em[special] = (u[special] << 13) | 0x7F800000
    u &= 0x8000
    u <<= 16
    em |= u
    return f


def narrow(a, dtype):
    """float32 (or other) array ``a`` as ``dtype``; float32 NumPy arrays to float16 through float and bit
    operations (a float add does the round to nearest even, subnormals and overflow included)."""
    dtype = np.dtype(dtype)
    if type(a) is not np.ndarray or dtype != _F16 or a.dtype != _F32:
        return a.astype(dtype)
    if a.ndim == 0:
        return narrow(a.reshape(1), dtype).reshape(())
    w = a.view(np.uint32)
    base = np.abs(a)
    base *= _TO_INF
    base *= _TO_ZERO  # too large for a half: inf; the rest unchanged
    t = w & 0x7F800000  # adding 2**(exponent + 15) (at least 2**-14's) leaves the bits of the rounded half
    np.maximum(t, 0x38800000, out=t)
    t += 0x07800000
    base += t.view(_F32)
    bits = base.view(np.uint32)
    np.right_shift(bits, 13, out=t)
    t &= 0x7C00
    bits &= 0x0FFF
    t += bits
    np.right_shift(w, 16, out=bits)
    bits &= 0x8000
    h = np.bitwise_or(t, bits, out=np.empty(a.shape, np.uint16), casting="unsafe")
    nan = np.isnan(a)
    if nan.any():  # NumPy keeps the top bits of a NaN's payload (at least one of them set)
        h[nan] = np.maximum((w[nan] >> 13) & 0x3FF, 1) | 0x7C00 | ((w[nan] >> 16) & 0x8000)
    return h.view(_F16)
