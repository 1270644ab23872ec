"""The orthogonal polynomials of ember.special, written once for two engines: ``_numba`` compiles these functions
into the CPU loops (one element at a time, the degree per element), and ``evaluate`` runs the very same functions
with NumPy on whole arrays, one degree at a time (the path of small inputs, and of large ones until their loop is
compiled). Per-element choices go through ``where`` (NumPy's; numba's build binds a conditional expression), so
both engines make the same operations and give the same results, bit for bit.

Three-term recurrences in double-double arithmetic (about 32 digits), so that float64 results, rounded once, are
accurate also near the polynomials' zeros; in double for float32 results, which that gives to within rounding. The
degree is truncated to an integer, as PyTorch does; a negative or non-finite degree gives 0.

Families (``kind``): 0..3 Chebyshev T, U, V, W; 4 Hermite H; 5 Hermite He; 6 Laguerre; 7 Legendre.
"""
import math

import numpy as np

where = np.where
isfinite = np.isfinite
KINDS = {"chebyshev_t": 0, "chebyshev_u": 1, "chebyshev_v": 2, "chebyshev_w": 3, "hermite_h": 4, "hermite_he": 5,
         "laguerre_l": 6, "legendre_p": 7}


def _two_sum(a, b):
    s = a + b
    t = s - a
    return s, (a - (s - t)) + (b - t)


def _split(a):
    t = 134217729.0 * a  # 2^27 + 1: Dekker's splitting into two 26-bit halves
    hi = t - (t - a)
    return hi, a - hi


def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _dd_mul(ah, al, bh, bl):
    p, e = _two_prod(ah, bh)
    return _two_sum(p, e + (ah * bl + al * bh))


def _dd_add(ah, al, bh, bl):
    s, e = _two_sum(ah, bh)
    return _two_sum(s, e + al + bl)


def _dd_div(ah, al, b):
    q = ah / b
    p, e = _two_prod(q, b)
    return _two_sum(q, ((ah - p) - e + al) / b)


def _plain(kind, x, n):
    """P_n(x) (n >= 1) by the recurrence in double: for float32 results, and at infinite x."""
    a = 2.0 * x if kind <= 4 else x
    p = 1.0
    q = (a if kind in (1, 4) else (a - 1.0 if kind == 2 else (a + 1.0 if kind == 3 else (1.0 - x if kind == 6 else x))))
    for k in range(1, n):
        if kind <= 3:
            r = a * q - p
        elif kind == 4:
            r = a * q - 2.0 * k * p
        elif kind == 5:
            r = a * q - k * p
        elif kind == 6:
            r = ((2.0 * k + 1.0 - x) * q - k * p) / (k + 1.0)
        else:
            r = ((2.0 * k + 1.0) * x * q - k * p) / (k + 1.0)
        p, q = q, r
    return q


def _double_double(kind, xh, xl, n):
    """P_n(x) (n >= 1) for finite x = xh + xl by the family's recurrence, in double-double."""
    if kind <= 4:
        ah, al = 2.0 * xh, 2.0 * xl
    else:
        ah, al = xh, xl
    ph, pl = 1.0, 0.0
    if kind == 1 or kind == 4:
        qh, ql = ah, al
    elif kind == 2:
        qh, ql = _dd_add(ah, al, -1.0, 0.0)
    elif kind == 3:
        qh, ql = _dd_add(ah, al, 1.0, 0.0)
    elif kind == 6:
        qh, ql = _dd_add(1.0, 0.0, -xh, -xl)
    else:
        qh, ql = xh, xl
    for k in range(1, n):
        if kind <= 3:  # q' = 2x q - p
            th, tl = _dd_mul(ah, al, qh, ql)
            rh, rl = _dd_add(th, tl, -ph, -pl)
        elif kind == 4 or kind == 5:  # q' = 2x q - 2k p  /  x q - k p
            th, tl = _dd_mul(ah, al, qh, ql)
            uh, ul = _dd_mul(ph, pl, (2.0 if kind == 4 else 1.0) * k, 0.0)
            rh, rl = _dd_add(th, tl, -uh, -ul)
        else:  # Laguerre ((2k + 1 - x) q - k p) / (k + 1); Legendre ((2k + 1) x q - k p) / (k + 1)
            if kind == 6:
                ch, cl = _dd_add(2.0 * k + 1.0, 0.0, -xh, -xl)
            else:
                ch, cl = _dd_mul(xh, xl, 2.0 * k + 1.0, 0.0)
            th, tl = _dd_mul(ch, cl, qh, ql)
            uh, ul = _dd_mul(ph, pl, float(k), 0.0)
            rh, rl = _dd_add(th, tl, -uh, -ul)
            rh, rl = _dd_div(rh, rl, k + 1.0)
        ph, pl, qh, ql = qh, ql, rh, rl
    return qh + ql


def _at_one(kind, xh, n):
    """Chebyshev T, U, V, W at x = ±1 (the sign of ``xh``), PyTorch's closed forms."""
    odd = n % 2 == 1
    if kind == 0:
        return where(xh < 0.0, -1.0 if odd else 1.0, 1.0)
    if kind == 1:
        return where(xh < 0.0, -(n + 1.0) if odd else n + 1.0, n + 1.0)
    if kind == 2:
        return where(xh > 0.0, 1.0, -(2.0 * n + 1.0) if odd else 2.0 * n + 1.0)
    return where(xh > 0.0, 2.0 * n + 1.0, -1.0 if odd else 1.0)


def polynomial(kind, shifted, exact, x, degree):
    """P_n of family ``kind`` at ``x`` (at 2x - 1 if ``shifted``), n = ``degree`` truncated; ``exact``: in
    double-double (float64 results), else in double. ``x``: float64 (or an array of them); ``degree``: a float."""
    n = int(degree) if math.isfinite(degree) else -1
    if n < 0:
        return 0.0
    if n == 0:
        return 1.0
    xl = 0.0
    if not shifted:
        xh = x
    elif exact:
        xh, xl = _two_sum(2.0 * x, -1.0)  # 2x - 1 kept exactly
    else:
        xh = 2.0 * x - 1.0
    r = where(isfinite(xh), _double_double(kind, xh, xl, n), _plain(kind, xh, n)) if exact else _plain(kind, xh, n)
    if kind <= 3:
        return where((xl == 0.0) & (abs(xh) == 1.0), _at_one(kind, xh, n), r)
    if kind == 6:
        return where(xh == 0.0, 1.0, r)
    if kind == 7:
        return where(abs(xh) == 1.0, where(xh < 0.0, -1.0 if n % 2 == 1 else 1.0, 1.0), r)
    return r


def loop(kind, shifted, exact):
    """The elementwise loop of one family, for numba (``_numba`` compiles it with this module's functions)."""
    def run(x, n, out):
        for i in range(out.size):
            out[i] = polynomial(kind, shifted, exact, np.float64(x[i]), np.float64(n[i]))
    return run


def evaluate(name, x, n, exact):
    """Family ``name`` (``chebyshev_t``, ``shifted_chebyshev_t``, ...) with NumPy on float64 arrays ``x`` and
    ``n`` of one shape, one pass per distinct degree."""
    kind, shifted = KINDS[name.removeprefix("shifted_")], name.startswith("shifted_")
    out = np.empty(x.shape)
    for degree in np.unique(n):
        at = (n == degree) | (np.isnan(n) & np.isnan(degree))
        # a degree beyond int64 gives 0, as the compiled loop's conversion (x86's) does
        out[at] = polynomial(kind, shifted, exact, x[at], float(degree) if abs(degree) < 2.0 ** 63 else math.nan)
    return out
