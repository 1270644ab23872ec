"""The numba loops of the error function family and GELU (ember._erf) on dense sweeps: float32 results within a few
ulp of the float64 (C library) values, float64 ones to about 1e-15; tails, subnormals, NaN and the infinities."""
import math

import numpy as np
import pytest

import ember
from ember import _erf

_erfc64 = np.vectorize(math.erfc, otypes=[np.float64])
_erf64 = np.vectorize(math.erf, otypes=[np.float64])


def _cdf64(x):
    return 0.5 * _erfc64(-x / math.sqrt(2))


def _sweep32():
    tiny = np.geomspace(float(np.finfo(np.float32).smallest_subnormal), 1.0, 4000)
    x = np.concatenate([np.linspace(-16, 16, 320_001), tiny, -tiny]).astype(np.float32)
    return x, x.astype(np.float64)


def _ulps(got, want):
    """|got - want| in units of the float32 spacing at the correctly rounded value (the subnormal spacing at least)."""
    spacing = np.maximum(np.spacing(np.abs(want.astype(np.float32))).astype(np.float64), 2.0 ** -149)
    return np.abs(got.astype(np.float64) - want) / spacing


CASES32 = {
    "erf": (lambda x: _erf.erf(np, x), _erf64, 2),
    "erfc": (lambda x: _erf.erfc(np, x), _erfc64, 5),
    "ndtr": (lambda x: _erf.ndtr(np, x), _cdf64, 5),
    "gelu": (lambda x: _erf.gelu(np, x, "none"), lambda x: x * _cdf64(x), 5),
    "gelu tanh": (lambda x: _erf.gelu(np, x, "tanh"),
                  lambda x: x / (1 + np.exp(-2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), 2),
}


@pytest.mark.parametrize("name", list(CASES32))
def test_float32_within_a_few_ulp(name):
    fn, ref, bound = CASES32[name]
    x, x64 = _sweep32()
    with np.errstate(all="ignore"):
        u = _ulps(fn(x), ref(x64))
    assert u.max() <= bound, f"{name}: {u.max():.2f} ulp at {x[u.argmax()]!r}"


def test_gelu_backward_float32():
    x, x64 = _sweep32()
    d = _cdf64(x64) + x64 * np.exp(-x64 * x64 / 2) / math.sqrt(2 * math.pi)
    got = _erf.gelu_backward(np, np.ones_like(x), x, "none").astype(np.float64)
    # absolute error against the derivative's scale (it has a root near -0.75, where no float32 formula keeps its
    # relative accuracy)
    assert np.abs(got - d).max() <= 4 * 2.0 ** -24


def test_float64():
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    x = np.concatenate([np.linspace(-30, 30, 1201), np.geomspace(1e-300, 1, 60), -np.geomspace(1e-300, 1, 60)])
    m = [mp.mpf(float(v)) for v in x]
    want = {"erf": [mp.erf(v) for v in m], "erfc": [mp.erfc(v) for v in m], "gelu": [v * mp.ncdf(v) for v in m],
            "gelu'": [mp.ncdf(v) + v * mp.npdf(v) for v in m]}
    got = {"erf": _erf.erf(np, x), "erfc": _erf.erfc(np, x), "gelu": _erf.gelu(np, x, "none"),
           "gelu'": _erf.gelu_backward(np, np.ones_like(x), x, "none")}
    for name, w in want.items():
        w = np.array([float(v) for v in w])
        keep = (np.abs(w) > 1e-300) & (np.abs(x + 0.7518) > 0.05)  # (gelu' has a root there)
        err = np.max(np.abs(got[name][keep] - w[keep]) / np.abs(w[keep]))
        assert err < 4e-15, f"{name}: relative error {err:.2g}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_edges(dtype):
    fi = np.finfo(dtype)
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, fi.max, -fi.max, fi.smallest_subnormal], dtype)
    np.testing.assert_array_equal(_erf.erf(np, x), np.array([np.nan, 1, -1, 0, 0, 1, -1, _erf64(x[-1:])[0]], dtype))
    np.testing.assert_array_equal(_erf.erfc(np, x), [np.nan, 0, 2, 1, 1, 0, 2, 1])
    for approximate in ("none", "tanh"):
        g = _erf.gelu(np, x, approximate)
        np.testing.assert_array_equal(g[:7], [np.nan, np.inf, 0, 0, 0, fi.max, 0])
        d = _erf.gelu_backward(np, np.ones_like(x), x, approximate)
        np.testing.assert_array_equal(d[:7], [np.nan, np.nan, np.nan, 0.5, 0.5, 1, 0])  # (NaN at inf: torch's)


def test_split_over_cores_is_bit_identical():
    x = np.random.default_rng(0).standard_normal(3 * _erf.SPLIT_MIN + 123).astype(np.float32) * 4
    whole = np.empty_like(x)
    _erf.loops().gelu_f32(x, whole)
    np.testing.assert_array_equal(_erf.gelu(np, x, "none"), whole)


def test_half_types_compute_in_float32():
    x = ember.linspace(-6, 6, 101)
    for dtype in (ember.float16, ember.bfloat16):
        got = ember.nn.functional.gelu(x.to(dtype))
        want = ember.nn.functional.gelu(x.to(dtype).float()).to(dtype)
        assert ember.equal(got, want)
