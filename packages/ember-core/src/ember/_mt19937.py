"""PyTorch's CPU random streams, reproduced with NumPy: the state of a CPU generator (``std::mt19937`` and the
second normal value Box-Muller keeps for the next call) and the transforms PyTorch's kernels apply to its 32-
and 64-bit draws, so that a seed gives PyTorch's numbers. Every transform returns the values of one call in the
order PyTorch's kernel fills its output (the caller places them).

What PyTorch computes depends in places on the kernels its dispatcher picks for the CPU: on x86 with AVX2 and
FMA3 (and on ARM) its kernels fuse ``a * b + c`` into one multiply-add, and float normals of 16+ elements use
its AVX2 polynomial log and sincos. ``AVX2`` and ``FUSED`` say which build this machine runs (the environment
variable ATEN_CPU_CAPABILITY=default selects the plain one, as it does for PyTorch). Functions of libm in
double precision (log, log1p, cos, sin, tan, exp) are libm's own for calls of at most ``_EXACT`` values and
NumPy's, which can differ from libm's in the last bit, for larger ones.
"""
import math
import os

import numpy as np

_N = 624  # words of Mersenne Twister state
_THRESHOLD = 16  # normal_: contiguous outputs of this many values take the vectorised Box-Muller fill
_ROWS = 4096  # blocks of 16 transformed at a time
_EXACT = 16  # at most this many libm calls go through libm itself (one Python call each)
_RANDPERM_WIDE = (2 ** 32 - 1) // 20  # randperm from this n: 64-bit draws and the inside-out shuffle
_F32 = np.float32


def _capability():
    """(AVX2 fill kernels, fused multiply-adds) of the PyTorch build the dispatcher picks here."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # NumPy 1.x
        from numpy.core._multiarray_umath import __cpu_features__ as features
    if features.get("ASIMD"):  # 64-bit ARM: every build fuses
        return False, True
    avx2 = bool(features.get("AVX2") and features.get("FMA3"))
    if os.environ.get("ATEN_CPU_CAPABILITY", "").lower() == "default":
        avx2 = False
    return avx2, avx2


AVX2, FUSED = _capability()


# ---- the generator state -------------------------------------------------------------------------------
# PyTorch's CPUGeneratorImplState, byte for byte (torch.get_rng_state() is these 5056 bytes)
STATE = np.dtype([("seed", "<u8"), ("left", "<i4"), ("seeded", "<i4"), ("next", "<u8"), ("state", "<u8", (_N,)),
                  ("normal_x", "<f8"), ("normal_y", "<f8"), ("normal_rho", "<f8"), ("normal_valid", "<i4"),
                  ("pad", "V4"), ("normal32", "<f4"), ("normal32_valid", "u1"), ("pad2", "V3")])


class Stream:
    """``std::mt19937`` as PyTorch's CPU generator runs it, with the Box-Muller normals it keeps for the next
    call (``normal`` in double, ``normal32`` in float; None when there is none)."""

    __slots__ = ("bits", "numpy", "seed", "fresh", "normal", "normal32")

    def __init__(self, seed):
        self.bits = np.random.MT19937()
        self.numpy = np.random.Generator(self.bits)
        self.reseed(seed)

    def reseed(self, seed):
        self.bits._legacy_seeding(seed & 0xFFFFFFFF)  # std::mt19937 keeps the low 32 bits of the seed
        self.seed, self.fresh, self.normal, self.normal32 = seed, True, None, None

    def u32(self, n):
        """The next ``n`` 32-bit draws (uint32 array; NumPy's full-range integers are the raw draws)."""
        if n:
            self.fresh = False
        return self.numpy.integers(0, 1 << 32, n, dtype=np.uint32)

    def u64(self, n):
        """The next ``n`` 64-bit draws, each two 32-bit ones, the first the high half."""
        w = self.u32(2 * n).view(np.uint64)  # little-endian: the first draw is the low half here
        return (w << 32) | (w >> 32)

    def to_bytes(self):
        s = np.zeros((), STATE)
        st = self.bits.state["state"]
        pos = int(st["pos"])
        s["seed"], s["seeded"], s["state"] = self.seed, 1, st["key"]
        # PyTorch counts down `left` to the next twist and up `next`, which seeding sets to 0
        s["left"], s["next"] = _N + 1 - pos, 0 if self.fresh and pos == _N else pos
        if self.normal is not None:
            s["normal_valid"], s["normal_y"] = 1, self.normal
        if self.normal32 is not None:
            s["normal32_valid"], s["normal32"] = 1, self.normal32
        return np.frombuffer(s.tobytes(), np.uint8).copy()

    def load(self, raw):
        """Take a state from PyTorch's bytes; False if the bytes do not hold a valid Mersenne Twister state."""
        s = np.frombuffer(raw, STATE)[0]
        left, nxt = int(s["left"]), int(s["next"])
        if not (s["seeded"] and 0 < left <= _N and nxt <= _N):
            return False
        self.bits.state = {"bit_generator": "MT19937",
                           "state": {"key": s["state"].astype(np.uint32), "pos": _N + 1 - left}}
        self.seed, self.fresh = int(s["seed"]), nxt == 0 and left == 1
        self.normal = float(s["normal_y"]) if s["normal_valid"] else None
        self.normal32 = float(s["normal32"]) if s["normal32_valid"] else None
        return True


# ---- draws as numbers ----------------------------------------------------------------------------------
def unit24(s, n):
    """float uniforms on [0, 1): the low 24 bits of 32-bit draws."""
    r = s.u32(n)
    v = np.bitwise_and(r, 0xFFFFFF, out=r).astype(_F32)
    v *= _F32(2.0 ** -24)
    return v


def unit53(s, n):
    """double uniforms on [0, 1): the low 53 bits of 64-bit draws (21 of the first draw, then the second)."""
    r = s.u32(2 * n).reshape(n, 2)
    v = np.bitwise_and(r[:, 0], 0x1FFFFF).astype(np.float64)
    v *= 2.0 ** 32
    v += r[:, 1]
    v *= 2.0 ** -53
    return v


def _libm(name, x):
    """libm's ``name`` of the float64 array ``x`` (NumPy's for large arrays, see the module note)."""
    if x.size <= _EXACT:
        return np.frompyfunc(getattr(math, name), 1, 1)(x).astype(np.float64)
    return getattr(np, name)(x)


def cast(v, dtype):
    """C++'s static_cast of double or int64 values to ``dtype``: half types go through float, as c10's do."""
    dtype = np.dtype(dtype)
    if dtype.itemsize == 2 and dtype.kind in "fV":
        v = v.astype(_F32)
    return v.astype(dtype, copy=False)


# ---- fused multiply-add --------------------------------------------------------------------------------
def fma32(a, b, c, exact=True):
    """``a * b + c`` in float32 with one rounding (float32 arrays, or numbers float32 holds). The product of
    two floats is exact in double; the sum can round in double and then again to float, which differs from one
    rounding only when the double lands on the midpoint between two floats: those few (found by their bits;
    most midpoints are exact sums) are moved off it towards the exact sum. ``exact=False`` skips that test, for
    steps where it cannot happen."""
    s = np.multiply(a, b, dtype=np.float64)
    s += c
    if exact and (hit := (s.view(np.uint64) & 0x1FFFFFFF) == 0x10000000).any():
        mid = np.flatnonzero(hit)
        a, b, c = (np.broadcast_to(v, s.shape).ravel()[mid] for v in (a, b, c))
        p, sm = np.multiply(a, b, dtype=np.float64), s.ravel()[mid]
        t = sm - p
        err = (p - (sm - t)) + (c - t)  # p + c - s, exactly
        s.ravel()[mid] = np.where(err == 0, sm, np.nextafter(sm, np.where(err > 0, np.inf, -np.inf)))
    return s.astype(_F32)


def _split(a):
    """Veltkamp's split of doubles into two halves of 26 bits whose sum is ``a``."""
    t = a * 134217729.0
    hi = t - (t - a)
    return hi, a - hi


def _two_sum(a, b):
    s = a + b
    z = s - a
    return s, (a - (s - z)) + (b - z)


def fma64(a, b, c):
    """``a * b + c`` in double with one rounding (finite arguments away from overflow): the exact product as
    two doubles (Dekker), the exact sum as a rounded value plus a remainder, and a last step that rounds the
    remainder past half an ulp, or a tie by the sign of what is left, as one rounding would."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, c)))
    p = a * b
    (ah, al), (bh, bl) = _split(a), _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # a * b - p, exactly
    s, t = _two_sum(p, c)
    w, v = _two_sum(t, e)
    r, d = _two_sum(s, w)  # exact: r + d + v
    q, qe = _two_sum(d, v)
    up, down = np.nextafter(r, np.inf), np.nextafter(r, -np.inf)
    half_up, half_down = (up - r) / 2, (r - down) / 2
    even = (r.view(np.int64) & 1) == 0
    go_up = (q > half_up) | ((q == half_up) & ((qe > 0) | ((qe == 0) & ~even)))
    go_down = (q < -half_down) | ((q == -half_down) & ((qe < 0) | ((qe == 0) & ~even)))
    return np.where(go_up, up, np.where(go_down, down, r))


def _madd(a, b, c, fused):
    """``a * b + c`` as PyTorch's kernel computes it (fused or not), in the precision of ``a``."""
    if fused:
        return (fma32 if np.asarray(a).dtype == _F32 else fma64)(a, b, c)
    return a * b + c


# ---- AVX2 log and sincos of PyTorch's float normal fill (polynomials after Cephes) ----------------------
def _f32s(*values):
    return tuple(float(_F32(v)) for v in values)  # the kernel's float constants, as exact Python floats


_LOG_P = _f32s(7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
               -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
_COS_P = _f32s(2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)
_SIN_P = _f32s(-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
_DP = _f32s(-0.78515625, -2.4187564849853515625e-4, -3.77489497744594108e-8)  # -pi/4 in three parts


# No fused step of the two kernels below meets the midpoint case (a sum inexact in double that lands on a
# float midpoint) for any input the normal fill gives them (1 - u and 2pi u for the 2**24 float uniforms u):
# checked over all of them, so they skip fma32's test.
def _log_avx2(x):
    """Natural log of positive floats (contiguous), as PyTorch's AVX2 kernel computes it (its mul-adds fused;
    products by the constants of few bits below are exact, so those need no fusing)."""
    bits = x.view(np.int32)
    e = ((bits >> 23) - 0x7E).astype(_F32)  # the exponent, plus one
    m = ((bits & ~0x7F800000) | 0x3F000000).view(_F32)  # the mantissa scaled to [0.5, 1)
    low = m < _F32(0.707106781186547524)
    m = (m - _F32(1)) + m * low
    e -= low
    z = m * m
    y = fma32(m, _LOG_P[0], _LOG_P[1], exact=False)
    for c in _LOG_P[2:]:
        y = fma32(y, m, c, exact=False)
    y = fma32(y * m, z, e * _F32(-2.12194440e-4), exact=False)
    y -= z * _F32(0.5)
    y += m
    return y + e * _F32(0.693359375)


def _sincos_avx2(x):
    """(sin, cos) of floats in [0, 2pi) (contiguous), as PyTorch's AVX2 kernel computes them (its mul-adds
    fused; the octant times the first two parts of pi/4 is exact)."""
    j = (x * _F32(1.27323954473516)).astype(np.int32)
    j += 1
    j &= ~1  # the octant, rounded up to even
    y = j.astype(_F32)
    x = x + y * _F32(_DP[0])
    x += y * _F32(_DP[1])
    x = fma32(y, _DP[2], x, exact=False)
    z = x * x
    pc = fma32(z, _COS_P[0], _COS_P[1], exact=False)
    pc = fma32(pc, z, _COS_P[2], exact=False)
    pc *= z
    pc = fma32(pc, z, -(z * _F32(0.5)), exact=False)
    pc += _F32(1)
    ps = fma32(z, _SIN_P[0], _SIN_P[1], exact=False)
    ps = fma32(ps, z, _SIN_P[2], exact=False)
    ps *= z
    ps = fma32(ps, x, x, exact=False)
    # as the kernel: the polynomials swap places by masks, the signs flip by xor, on the bits
    pc, ps = pc.view(np.int32), ps.view(np.int32)
    first = ((j & 2) >> 1) - 1  # all ones where sin takes the sine polynomial
    sin = ((ps & first) | (pc & ~first)) ^ ((j & 4) << 29)
    cos = ((pc & first) | (ps & ~first)) ^ ((~(j - 2) & 4) << 29)
    return sin.view(_F32), cos.view(_F32)


def _fill16(u, mean, std):
    """Box-Muller on rows of 16 uniforms, as PyTorch's normal fill: the first 8 give the radii, the last 8 the
    angles; the cosines go to the first 8 places, the sines to the last 8."""
    u1, u2 = np.ascontiguousarray(u[:, :8]), np.ascontiguousarray(u[:, 8:])
    if u.dtype == np.float64:
        radius = np.sqrt(-2 * _libm("log", 1 - u1))
        theta = 2 * math.pi * u2
        sin, cos = _libm("sin", theta), _libm("cos", theta)
        scale = fma64
    else:
        one = _F32(1)
        if AVX2:
            radius = np.sqrt(_F32(-2) * _log_avx2(one - u1))
            sin, cos = _sincos_avx2(_F32(2 * math.pi) * u2)
        else:  # libm's float functions, within an ulp of the exact value: here the correctly rounded one
            radius = np.sqrt(_F32(-2) * np.log((one - u1).astype(np.float64)).astype(_F32))
            theta = (2 * math.pi * u2.astype(np.float64)).astype(_F32).astype(np.float64)
            sin, cos = np.sin(theta).astype(_F32), np.cos(theta).astype(_F32)
        mean, std = float(_F32(mean)), float(_F32(std))
        scale = fma32
    out = np.empty(u.shape, u.dtype)
    for half, trig in ((out[:, :8], cos), (out[:, 8:], sin)):
        n = radius * trig
        if mean != 0:
            n = scale(n, std, mean)
        elif std != 1:
            n *= u.dtype.type(std)  # fma(n, std, 0) is the product
        half[...] = n
    return out


def _normal_fill(s, n, dtype, mean, std):
    """The vectorised fill (n >= 16, contiguous): n uniforms (the half types draw only whole blocks of 16),
    Box-Muller on each block of 16, and when n is not a multiple of 16 the last 16 places redone from 16 fresh
    uniforms."""
    unit = unit53 if dtype == np.float64 else unit24
    k = n // 16
    u = unit(s, 16 * k if dtype.itemsize == 2 else n)[:16 * k].reshape(k, 16)
    out = np.empty(n, u.dtype)
    blocks = out[:16 * k].reshape(k, 16)
    if not _fill_compiled(u, mean, std, blocks):
        for i in range(0, k, _ROWS):  # in pieces that stay in cache
            blocks[i:i + _ROWS] = _fill16(u[i:i + _ROWS], mean, std)
    if n % 16:
        out[n - 16:] = _fill16(unit(s, 16).reshape(1, 16), mean, std).ravel()
    return out.astype(dtype, copy=False)


def _fill_compiled(u, mean, std, out):
    """``_fill16`` of float32 uniforms (AVX2 kernels) by ``ember._rngloops``' loop once it is ready (the same bits, a
    single pass): False, with nothing done, when it is not."""
    if u.dtype != _F32 or not AVX2 or not u.size:
        return False
    from . import _jit, _parallel
    fn = _jit.loop("ember._rngloops", "normal_fill16", "(float32[::1], float32, float32, float32[::1])", u.size,
                   exact=True)
    if fn is None:
        return False
    mean, std = _F32(mean), _F32(std)
    _parallel.loop(lambda a, o: fn(a, mean, std, o), u.reshape(-1), out=out.reshape(-1), minimum=_parallel.MIN_SIZE)
    return True


def normals(s, n, mean=0.0, std=1.0):
    """``n`` values of PyTorch's scalar normal sampler (double): Box-Muller on pairs of double uniforms gives
    the cosine value now and keeps the sine one for the next value, also across calls."""
    out = np.empty(n)
    first = 0
    if n and s.normal is not None:
        out[0], s.normal, first = s.normal, None, 1
    pairs = (n - first + 1) // 2
    u = unit53(s, 2 * pairs).reshape(pairs, 2)
    r = np.sqrt(-2.0 * _libm("log1p", -u[:, 1]))
    theta = 2.0 * math.pi * u[:, 0]
    both = np.stack([r * _libm("cos", theta), r * _libm("sin", theta)], axis=1).ravel()
    out[first:] = both[:n - first]
    if (n - first) % 2:
        s.normal = float(both[-1])
    return out if (mean, std) == (0.0, 1.0) else _madd(out, std, mean, FUSED)


def normal(s, n, dtype, mean, std, dense):
    """``normal_(mean, std)`` of ``n`` values of ``dtype`` (a real NumPy dtype); ``dense``: the output is
    contiguous (large contiguous outputs take the vectorised fill, the others one value at a time)."""
    if dense and n >= _THRESHOLD:
        return _normal_fill(s, n, np.dtype(dtype), mean, std)
    return cast(normals(s, n, mean, std), dtype)


# ---- uniform, integers, bernoulli ------------------------------------------------------------------------
def uniform(s, n, dtype, low, high):
    """``uniform_(low, high)`` of ``n`` values of ``dtype``: double uniforms for float64, float ones for the
    others (rounded to the half types), and a value that rounds up to ``high`` becomes ``low``."""
    dtype, unit = np.dtype(dtype), (low, high) == (0.0, 1.0)
    if dtype == np.float64:
        v = unit53(s, n)
        if unit:
            return v
        v = _madd(v, high - low, low, FUSED)
        return np.where(v == high, low, v)
    lo, hi = _F32(low), _F32(high)
    v = unit24(s, n)
    if unit and dtype == _F32:  # below 1 as they are
        return v
    if not unit and FUSED:
        # u (24 bits below 1) times the width plus low: exact in double when all its bits fit in 53
        width = hi - lo
        grain = min(_lowest_bit(float(lo)), _lowest_bit(float(width)) * 2.0 ** -24)
        v = fma32(v, width, lo, exact=abs(float(width)) + abs(float(lo)) >= 2.0 ** 53 * grain)
    elif not unit:
        v = v * (hi - lo) + lo
    v = v.astype(dtype, copy=False)
    top = np.asarray(hi).astype(dtype)
    return np.where(v == top, np.asarray(lo).astype(dtype), v)


def _lowest_bit(x):
    """The value of the lowest set bit of the float ``x`` (inf for 0)."""
    if x == 0:
        return math.inf
    m, e = math.frexp(abs(x))
    i = int(m * 2 ** 53)
    return (i & -i) * 2.0 ** (e - 53)


def integers(s, n, dtype, low, span, wide=None):
    """``random_(low, low + span)``: draws modulo ``span`` plus ``low`` (wrapping around 2**64), 64-bit draws
    from spans of 2**28 (PyTorch's wheels; its internal builds switch at 2**32) unless ``wide`` says. A span
    of 2**64 (the whole int64 range) takes the draws as they are, as signed values."""
    if wide is None:
        wide = span >= 1 << 28
    if not wide:  # 32-bit draws: the sum stays in int64
        r = s.u32(n)
        v = np.remainder(r, np.uint32(span), out=r).astype(np.int64)
        v += low
        return cast(v, dtype)
    r = s.u64(n)
    if span < 1 << 64:
        r = r % np.uint64(span) + np.uint64(low % (1 << 64))
    return cast(r.view(np.int64), dtype)


def bernoulli(s, p, n=None):
    """True with probability ``p``: a number (``n`` draws of double uniforms), or an array of probabilities in
    drawing order, double uniforms for float64 ones and float uniforms for the others."""
    if n is not None:
        return unit53(s, n) < p
    if p.dtype == np.float64:
        return unit53(s, p.size) < p
    return unit24(s, p.size) < p.astype(_F32)


# ---- distributions of double uniforms ---------------------------------------------------------------------
def exponential(s, n, lambd):
    return (-1.0 / lambd) * _libm("log1p", -unit53(s, n))


def geometric(s, n, p):
    return np.ceil(_libm("log", unit53(s, n)) / math.log1p(-p))


def cauchy(s, n, median, sigma):
    return _madd(_libm("tan", math.pi * (unit53(s, n) - 0.5)), sigma, median, FUSED)


def log_normal(s, n, mean, std):
    return _libm("exp", normals(s, n, mean, std))


# ---- permutations and categorical draws -----------------------------------------------------------------
def _roots(parent):
    """Follow ``parent`` links (each to a smaller index, or to itself at a root) to the roots, doubling."""
    while True:
        up = parent[parent]
        if np.array_equal(up, parent):
            return parent
        parent = up


def _earlier(key):
    """For each step i, the latest step j < i with key[j] == key[i] (-1 if none), and the steps sorted by
    (key, step) with their keys."""
    n = key.size
    bits = max(n - 1, 1).bit_length()
    packed = np.sort((key << bits) | np.arange(n))  # (key, step) in one int64: a plain sort orders them
    order, sk = packed & ((1 << bits) - 1), packed >> bits
    prev = np.full(n, -1)
    same = sk[1:] == sk[:-1]
    prev[order[1:][same]] = order[:-1][same]
    return prev, order, sk


def randperm(s, n):
    """PyTorch's shuffle of 0..n-1. Below ``_RANDPERM_WIDE`` it swaps place i with i + r % (n - i) for i in
    0..n-2: the value left at place i is the one the latest earlier step sent to the place i's step reads from,
    and what a step sends is what its own place held, so the values follow chains of earlier steps, resolved
    all at once by pointer doubling. From there it is the inside-out shuffle with 64-bit draws."""
    if n < 2:
        return np.arange(n)
    if n >= _RANDPERM_WIDE:
        return _randperm_inside_out(s, n)
    steps = np.arange(n - 1)
    target = steps + (s.u32(n - 1) % (n - steps).astype(np.uint32)).astype(np.int64)
    prev, order, sk = _earlier(target)
    # what place k holds when step k runs (place n - 1 at the end) comes from the latest step j < k sending to k
    last = np.full(n, -1)
    ends = np.r_[sk[1:] != sk[:-1], True]
    last[sk[ends]] = order[ends]
    own = target == steps  # a step swapping its place with itself: its predecessor then sends to its place
    last[:-1][own] = prev[own]
    held = _roots(np.where(last >= 0, last, np.arange(n)))
    out = np.empty(n, np.int64)
    out[:-1] = np.where(prev >= 0, held[np.maximum(prev, 0)], target)
    out[-1] = held[-1]
    return out


def _randperm_inside_out(s, n):
    """r[i] = r[z]; r[z] = i with z = draw % (i + 1) for i = 0..n-1: place p ends with the latest later step
    that sent to it, else with what step p wrote there: its own index, or what place z held then (the latest
    step between z and p that sent to z, else what step z wrote: a chain, resolved by pointer doubling)."""
    steps = np.arange(n)
    z = (s.u64(n) % (steps + 1).astype(np.uint64)).astype(np.int64)
    prev, order, sk = _earlier(z)
    written = np.where(z == steps, steps, np.where(prev >= 0, prev, -1))  # -1: what step z wrote
    root = _roots(np.where(written >= 0, steps, z))
    written = written[root]
    last = np.full(n, -1)
    ends = np.r_[sk[1:] != sk[:-1], True]
    last[sk[ends]] = order[ends]
    return np.where(last > steps, last, written)


def multinomial(s, p, k):
    """``k`` draws with replacement from each row of ``p`` (2-d, rows in order): the row's cumulative sums (in
    its dtype, float for the half types) over their total, and for each double uniform the first category
    whose cumulative value is not below it (PyTorch's binary search, run on all draws at once)."""
    if p.dtype.itemsize == 2:
        p = p.astype(_F32)
    cum = np.cumsum(p, axis=1)
    cum /= cum[:, -1:]
    cum[:, -1] = 1
    rows, cats = p.shape
    u = unit53(s, rows * k).reshape(rows, k)
    lo, hi = np.zeros((rows, k), np.int64), np.full((rows, k), cats)
    row = np.arange(rows)[:, None]
    while (active := lo < hi).any():
        mid = (lo + hi) // 2
        below = cum[row, np.minimum(mid, cats - 1)] < u
        lo = np.where(active & below, mid + 1, lo)
        hi = np.where(active & ~below, mid, hi)
    return lo
