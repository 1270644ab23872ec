"""ember's numba loops (ember._loops) on dense sweeps: float32 results of the error function family, GELU and the
logistic family within a few ulp of float64 values, float64 ones to about 1e-15; tails, subnormals, NaN and the
infinities; second derivatives of the VJP ops; large inputs (the loops' sizes) and the row ops (softmax, log_softmax,
layer norm) against torch."""
import math

import numpy as np
import pytest
from optable import needs_autograd

import ember
from ember import _loops

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
    "erf": (lambda x: _loops.erf(np, x), _erf64, 2),
    "erfc": (lambda x: _loops.erfc(np, x), _erfc64, 5),
    "ndtr": (lambda x: _loops.ndtr(np, x), _cdf64, 5),
    "gelu": (lambda x: _loops.gelu(np, x, "none"), lambda x: x * _cdf64(x), 5),
    "gelu tanh": (lambda x: _loops.gelu(np, x, "tanh"),
                  lambda x: x / (1 + np.exp(-2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), 2),
    "sigmoid": (lambda x: _loops.float32_loop("sigmoid_f32", x), lambda x: 1 / (1 + np.exp(-x)), 3),
    "silu": (lambda x: _loops.float32_loop("silu_f32", x), lambda x: x / (1 + np.exp(-x)), 3),
    "softplus": (lambda x: _loops.float32_loop("softplus_f32", x, beta=1.0, threshold=1e30),
                 lambda x: np.logaddexp(0, x), 4),
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
    got = _loops.gelu_backward(np, np.ones_like(x), x, "none").astype(np.float64)
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
    got = {"erf": _loops.erf(np, x), "erfc": _loops.erfc(np, x), "gelu": _loops.gelu(np, x, "none"),
           "gelu'": _loops.gelu_backward(np, np.ones_like(x), x, "none")}
    for name, w in want.items():
        w = np.array([float(v) for v in w])
        keep = (np.abs(w) > 1e-300) & (np.abs(x + 0.7518) > 0.05)  # (gelu' has a root there)
        err = np.max(np.abs(got[name][keep] - w[keep]) / np.abs(w[keep]))
        assert err < 4e-15, f"{name}: relative error {err:.2g}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_edges(dtype):
    fi = np.finfo(dtype)
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, fi.max, -fi.max, fi.smallest_subnormal], dtype)
    np.testing.assert_array_equal(_loops.erf(np, x), np.array([np.nan, 1, -1, 0, 0, 1, -1, _erf64(x[-1:])[0]], dtype))
    np.testing.assert_array_equal(_loops.erfc(np, x), [np.nan, 0, 2, 1, 1, 0, 2, 1])
    for approximate in ("none", "tanh"):
        g = _loops.gelu(np, x, approximate)
        np.testing.assert_array_equal(g[:7], [np.nan, np.inf, 0, 0, 0, fi.max, 0])
        d = _loops.gelu_backward(np, np.ones_like(x), x, approximate)
        np.testing.assert_array_equal(d[:7], [np.nan, np.nan, np.nan, 0.5, 0.5, 1, 0])  # (NaN at inf: torch's)


def test_split_over_cores_is_bit_identical():
    x = np.random.default_rng(0).standard_normal(3 * _loops.SPLIT_MIN + 123).astype(np.float32) * 4
    whole = np.empty_like(x)
    _loops.loops().gelu_f32(x, whole)
    np.testing.assert_array_equal(_loops.gelu(np, x, "none"), whole)


def test_half_types_compute_in_float32():
    x = ember.linspace(-6, 6, 101)
    for dtype in (ember.float16, ember.bfloat16):
        got = ember.nn.functional.gelu(x.to(dtype))
        want = ember.nn.functional.gelu(x.to(dtype).float()).to(dtype)
        assert ember.equal(got, want)


@needs_autograd
@pytest.mark.parametrize("name, kwargs", [("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}),
                                          ("softplus", {"beta": 2.0, "threshold": 1.0})])
def test_second_derivatives(name, kwargs):
    """The VJP ops' own VJPs (double backward) against finite differences (float64)."""
    x = ember.tensor(np.random.default_rng(1).standard_normal(20) * 2, requires_grad=True)
    fn = getattr(ember.nn.functional, name)
    assert ember.autograd.gradgradcheck(lambda t: fn(t, **kwargs), (x,))


@needs_autograd
@pytest.mark.parametrize("name, kwargs", [("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}),
                                          ("softplus", {"beta": 2.0, "threshold": 1.0}), ("sigmoid", {}),
                                          ("tanh", {})])
def test_loops_match_torch_on_large_tensors(name, kwargs):
    """Forward and backward through the loops (tensors above LOOP_MIN) against torch (float32)."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal(3 * _loops.LOOP_MIN).astype(np.float32) * 4
    g = np.random.default_rng(3).standard_normal(x.size).astype(np.float32)
    results = []
    for lib in (ember, torch):
        t = lib.tensor(x, requires_grad=True)
        fn = getattr(lib, name, None) if name in ("sigmoid", "tanh") else getattr(lib.nn.functional, name)
        y = fn(t, **kwargs)
        y.backward(lib.tensor(g))
        results.append((y.detach().numpy(), t.grad.numpy()))
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # (torch's GELU tails: absolute errors ~2e-6)


def _rows_input(seed=4):
    x = np.random.default_rng(seed).standard_normal((3 * _loops.LOOP_MIN // 64, 64)).astype(np.float32) * 5
    x[0, 3], x[1, :], x[2, 5], x[3, 7], x[4, :] = np.nan, -np.inf, np.inf, -np.inf, 1e30  # edge rows
    return x


@needs_autograd
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_rows_match_torch(name):
    torch = pytest.importorskip("torch")
    x = _rows_input()
    g = np.random.default_rng(5).standard_normal(x.shape).astype(np.float32)
    results = []
    for lib in (ember, torch):
        t = lib.tensor(x, requires_grad=True)
        y = getattr(lib, name)(t, -1)
        y.backward(lib.tensor(g))
        results.append((y.detach().numpy(), t.grad.numpy()))
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@needs_autograd
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm_rows_match_torch(affine):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3 * _loops.LOOP_MIN // 128, 128)).astype(np.float32) * 3 + 1
    g = rng.standard_normal(x.shape).astype(np.float32)
    w, b = rng.standard_normal(128).astype(np.float32), rng.standard_normal(128).astype(np.float32)
    results = []
    for lib in (ember, torch):
        params = [lib.tensor(w, requires_grad=True) if affine != "none" else None,
                  lib.tensor(b, requires_grad=True) if affine == "both" else None]
        t = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.layer_norm(t, (128,), *params)
        y.backward(lib.tensor(g))
        results.append([y.detach().numpy(), t.grad.numpy()] + [p.grad.numpy() for p in params if p is not None])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@needs_autograd
def test_row_loops_split_over_threads_bit_identical(monkeypatch):
    """The halves of the rows on two threads give the values of one thread (layer norm's parameter gradients too:
    both halves are summed either way)."""
    x = _rows_input()
    w = np.linspace(0.5, 2, 64, dtype=np.float32)

    def run():
        out = []
        for fn in (lambda t: ember.softmax(t, -1), lambda t: ember.log_softmax(t, -1),
                   lambda t, p=ember.tensor(w, requires_grad=True): ember.nn.functional.layer_norm(t, (64,), p, p)):
            t = ember.tensor(np.nan_to_num(x), requires_grad=True)
            y = fn(t)
            y.backward(ember.ones_like(y))
            out += [y.detach().numpy(), t.grad.numpy()]
        return out
    monkeypatch.setattr(_loops, "ROWS_SPLIT_MIN", 1 << 40)
    whole = run()
    monkeypatch.setattr(_loops, "ROWS_SPLIT_MIN", 1)
    for a, b in zip(whole, run()):
        np.testing.assert_array_equal(a, b)
