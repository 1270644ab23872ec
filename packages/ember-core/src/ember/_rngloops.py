"""numba loop of PyTorch's float normal fill (loaded through ``ember._jit`` only, never by ``import ember``).

``normal_fill16`` is ``_mt19937._fill16`` on float32 uniforms in one pass: Box-Muller on blocks of 16 with the
AVX2 kernel's polynomial log and sincos, its multiply-adds fused by LLVM's fma. NumPy's path emulates those fused
steps, and none of them meets a case where the emulation could differ (``_mt19937``'s note): both give the same
bits, so the loop serves any size once compiled.
"""
import numba
import numpy as np

from ._mt19937 import _COS_P, _DP, _LOG_P, _SIN_P
from ._numba_kernels import _bits, _fma, _from_bits

_F = np.float32
# the kernels' constants as float32 values (numba keeps float32 arithmetic only among float32 operands)
_LP0, _LP1, _LP2, _LP3, _LP4, _LP5, _LP6, _LP7, _LP8 = (_F(c) for c in _LOG_P)
_CP0, _CP1, _CP2 = (_F(c) for c in _COS_P)
_SP0, _SP1, _SP2 = (_F(c) for c in _SIN_P)
_DP0, _DP1, _DP2 = (_F(c) for c in _DP)
_SQRT_HALF, _LOG_LO, _LOG_HI = _F(0.707106781186547524), _F(-2.12194440e-4), _F(0.693359375)
_FOUR_OVER_PI, _TWO_PI = _F(1.27323954473516), _F(2 * np.pi)
_ZERO, _HALF, _ONE, _MINUS_TWO = _F(0), _F(0.5), _F(1), _F(-2)

_inline = numba.njit(inline="always", error_model="numpy")


@_inline
def _log(x):
    bits = _bits(x)
    e = _F((bits >> 23) - 0x7E)
    m = _from_bits(np.int32((bits & ~0x7F800000) | 0x3F000000))
    if m < _SQRT_HALF:
        m = (m - _ONE) + m
        e -= _ONE
    else:
        m = m - _ONE
    z = m * m
    y = _fma(m, _LP0, _LP1)
    for c in (_LP2, _LP3, _LP4, _LP5, _LP6, _LP7, _LP8):
        y = _fma(y, m, c)
    y = _fma(y * m, z, e * _LOG_LO)
    y -= z * _HALF
    y += m
    return y + e * _LOG_HI


@_inline
def _sincos(x):
    j = np.int32(x * _FOUR_OVER_PI)
    j = (j + 1) & ~1
    y = _F(j)
    x = x + y * _DP0
    x += y * _DP1
    x = _fma(y, _DP2, x)
    z = x * x
    pc = _fma(z, _CP0, _CP1)
    pc = _fma(pc, z, _CP2)
    pc *= z
    pc = _fma(pc, z, -(z * _HALF))
    pc += _ONE
    ps = _fma(z, _SP0, _SP1)
    ps = _fma(ps, z, _SP2)
    ps *= z
    ps = _fma(ps, x, x)
    ci, si = np.int64(_bits(pc)), np.int64(_bits(ps))
    first = ((j & 2) >> 1) - 1
    sin = ((si & first) | (ci & ~first)) ^ ((j & 4) << 29)
    cos = ((ci & first) | (si & ~first)) ^ ((~(j - 2) & 4) << 29)
    return _from_bits(np.int32(sin & 0xFFFFFFFF)), _from_bits(np.int32(cos & 0xFFFFFFFF))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def normal_fill16(u, mean, std, out):
    """``out`` from the float32 uniforms ``u`` (flat, whole blocks of 16): per block the radii of its first 8, the
    angles of its last 8; cosines to the first 8 places, sines to the last 8; then ``fma(n, std, mean)`` (a product
    alone when ``mean`` is 0)."""
    for b in range(0, u.size, 16):
        for i in range(8):
            radius = np.sqrt(_MINUS_TWO * _log(_ONE - u[b + i]))
            sin, cos = _sincos(_TWO_PI * u[b + 8 + i])
            lo, hi = radius * cos, radius * sin
            if mean != _ZERO:
                lo, hi = _fma(lo, std, mean), _fma(hi, std, mean)
            elif std != _ONE:
                lo, hi = lo * std, hi * std
            out[b + i], out[b + 8 + i] = lo, hi
    return out
