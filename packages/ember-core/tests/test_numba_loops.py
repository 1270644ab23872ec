"""ember's loops (ember._loops) on both engines, numba's compiled loops and NumPy's run of the same functions
(ember._formulas): float32 results of the error function family, GELU and the logistic family within a few ulp of
float64 values, float64 ones to about 1e-15; tails, subnormals, NaN and the infinities; second derivatives of the VJP
ops; large inputs (the loops' sizes) and the row ops (softmax, log_softmax, layer norm) against torch. The engines
agree bit for bit on elementwise loops (NumPy's exact FMA), to rounding on row loops."""
import math

import numpy as np
import pytest
from optable import needs_autograd

import ember
from ember import _formulas, _jit, _loops
from ember._registry import REGISTRY

_erfc64 = np.vectorize(math.erfc, otypes=[np.float64])
_erf64 = np.vectorize(math.erf, otypes=[np.float64])


@pytest.fixture(params=["numpy", "numba"])
def engine(request, monkeypatch):
    """Every loop runs on this engine: NumPy's (no loop handed out) or numba's (every size, compiled on the call)."""
    if request.param == "numpy":
        monkeypatch.setattr(_jit, "loop", lambda *args, **kwargs: None)
        yield request.param
    else:
        with _jit.forced():
            yield request.param


def _kernels():
    return _jit._import(_loops._KERNELS)


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
def test_float32_within_a_few_ulp(name, engine):
    fn, ref, bound = CASES32[name]
    x, x64 = _sweep32()
    with np.errstate(all="ignore"):
        u = _ulps(fn(x), ref(x64))
    assert u.max() <= bound, f"{name}: {u.max():.2f} ulp at {x[u.argmax()]!r}"


def test_gelu_backward_float32(engine):
    x, x64 = _sweep32()
    d = _cdf64(x64) + x64 * np.exp(-x64 * x64 / 2) / math.sqrt(2 * math.pi)
    got = _loops.gelu_backward(np, np.ones_like(x), x, "none").astype(np.float64)
    # absolute error against the derivative's scale (it has a root near -0.75, where no float32 formula keeps its
    # relative accuracy)
    assert np.abs(got - d).max() <= 4 * 2.0 ** -24


def test_float64(engine):
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
def test_edges(dtype, engine):
    fi = np.finfo(dtype)
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, fi.max, -fi.max, fi.smallest_subnormal], dtype)
    np.testing.assert_array_equal(_loops.erf(np, x), np.array([np.nan, 1, -1, 0, 0, 1, -1, _erf64(x[-1:])[0]], dtype))
    np.testing.assert_array_equal(_loops.erfc(np, x), [np.nan, 0, 2, 1, 1, 0, 2, 1])
    for approximate in ("none", "tanh"):
        g = _loops.gelu(np, x, approximate)
        np.testing.assert_array_equal(g[:7], [np.nan, np.inf, 0, 0, 0, fi.max, 0])
        d = _loops.gelu_backward(np, np.ones_like(x), x, approximate)
        np.testing.assert_array_equal(d[:7], [np.nan, np.nan, np.nan, 0.5, 0.5, 1, 0])  # (NaN at inf: torch's)


# ---- the two engines against each other ------------------------------------------------------------------------
def _hard32():
    """float32 inputs: a dense sweep, subnormals, every binade of both signs, the loops' thresholds, NaN and inf."""
    fi = np.finfo(np.float32)
    rng = np.random.default_rng(0)
    tiny = np.geomspace(float(fi.smallest_subnormal), 1.0, 4000)
    binades = rng.standard_normal(60_000) * np.exp2(rng.integers(-150, 128, 60_000))
    edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, fi.max, -fi.max, fi.tiny, -fi.tiny, 0.8, -0.8, 10.25, -10.25,
             14.5, -14.5, 88.7, -88.7, 106.0, 110.0, -110.0, 1e30, -1e30]
    with np.errstate(over="ignore"):
        return np.concatenate([np.linspace(-16, 16, 160_001), tiny, -tiny, binades, edges]).astype(np.float32)


def _hard64():
    x = _hard32().astype(np.float64)
    return np.concatenate([x, np.linspace(-40, 40, 40_001), np.geomspace(1e-300, 1e300, 4000),
                           -np.geomspace(1e-300, 1e300, 4000), [1e308, -1e308, 5e-324, -5e-324]])


_UNARY = ["erf_f32", "erfc_f32", "ndtr_f32", "gelu_f32", "gelu_tanh_f32", "sigmoid_f32", "silu_f32", "erf_f64",
          "erfc_f64", "gelu_f64", "gelu_tanh_f64", "cube", "inverse", "inverse_square"]
_BINARY = ["gelu_backward_f32", "gelu_tanh_backward_f32", "silu_backward_f32", "gelu_backward_f64",
           "gelu_tanh_backward_f64", "sigmoid_backward", "tanh_backward"]
_SOFTPLUS = [(1.0, 20.0), (2.0, 1.0), (0.5, 1e30), (-1.0, 20.0)]


def _elementwise_cases():
    cases = []
    for name in _UNARY + _BINARY:
        for dtype in ((np.float32,) if name.endswith("_f32") else (np.float64,) if name.endswith("_f64") else
                      (np.float32, np.float64)):
            cases.append(pytest.param(name, dtype, (), id=f"{name}-{np.dtype(dtype).name}"))
    for name in ("softplus_f32", "softplus_backward_f32"):
        for beta, threshold in _SOFTPLUS:
            cases.append(pytest.param(name, np.float32, (np.float32(beta), np.float32(threshold)),
                                      id=f"{name}-{beta}-{threshold}"))
    return cases


@pytest.mark.parametrize("name, dtype, scalars", _elementwise_cases())
def test_engines_agree_bit_for_bit(name, dtype, scalars):
    """NumPy's run of each elementwise loop gives the compiled loop's bits (NaN's payload aside)."""
    x = (_hard32() if dtype == np.float32 else _hard64()).astype(dtype)
    arrays = [x] + ([np.random.default_rng(1).standard_normal(x.size).astype(dtype)] if "backward" in name else [])
    outs = []
    for run in (getattr(_kernels(), name), getattr(_formulas, name)):
        out = np.empty_like(x)
        with np.errstate(all="ignore"):
            run(*arrays, *scalars, out)
        outs.append(out)
    compiled, numpy = outs
    same = (compiled.view(f"u{x.itemsize}") == numpy.view(f"u{x.itemsize}")) | (np.isnan(compiled) & np.isnan(numpy))
    assert same.all(), f"{name} differs at {x[~same][:5]}: {compiled[~same][:5]} vs {numpy[~same][:5]}"


def test_numpy_fma_rounds_once():
    """NumPy's float32 fma against the instruction: random operands across the exponent range, the cases where
    rounding the float64 sum to float32 would round twice, and the special values."""
    rng = np.random.default_rng(3)

    def spread(n, span):
        return (rng.standard_normal(n) * np.exp2(rng.integers(-span, span, n))).astype(np.float32)
    m = np.float32(1 + 2 ** -12)  # m * m = 1 + 2**-11 + 2**-24: a float32 midpoint in float64
    special = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 3e38, 1e-45, -1e-45, 1.0, -1.0], np.float32)
    a, b, c = (np.concatenate(parts) for parts in zip(
        [spread(200_000, 20) for _ in range(3)], [spread(200_000, 120) for _ in range(3)],
        [np.full(4, m), np.full(4, m), np.array([2 ** -60, -2 ** -60, 2 ** -25, 0], np.float32)],
        [a.ravel() for a in np.meshgrid(special, special, special)]))
    with np.errstate(all="ignore"):
        got = _formulas.fma(a, b, c)
    hardware = np.empty_like(a)
    _fma_loop()(a, b, c, hardware)
    np.testing.assert_array_equal(got, hardware)
    assert got[400_000] == np.float32(1 + 2 ** -11 + 2 ** -23) and got[400_001] == np.float32(1 + 2 ** -11)


def _fma_loop():
    import numba
    fma = _kernels()._fma

    @numba.njit
    def loop(a, b, c, out):
        for i in range(out.size):
            out[i] = fma(a[i], b[i], c[i])
    return loop


def _rows(seed=4, shape=(3 * _loops.LOOP_MIN // 64, 64), scale=5):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * scale
    x[0, 3], x[1, :], x[2, 5], x[3, 7], x[4, :], x[5, :4] = np.nan, -np.inf, np.inf, -np.inf, 1e30, 7.0  # edge rows
    return x


def test_row_engines_agree_to_rounding():
    """The row loops differ only in the order of their sums: a few float32 roundings apart (the edge rows of
    softmax and log_softmax too: NaN rows, -inf terms)."""
    x = _rows()
    g = np.random.default_rng(5).standard_normal(x.shape).astype(np.float32)
    finite = np.where(np.isfinite(x) & (np.abs(x) < 1e29), x, g)  # (constant rows: rounding amplified by 1/eps)
    w, b = np.linspace(0.5, 2, 64, dtype=np.float32), np.linspace(-1, 1, 64, dtype=np.float32)
    y, ly = np.empty_like(x), np.empty_like(x)
    _kernels().softmax_rows_f32(finite, y)
    _kernels().log_softmax_rows_f32(finite, ly)
    cases = {"softmax_rows_f32": (x,), "log_softmax_rows_f32": (x,), "softmax_backward_rows_f32": (y, g),
             "log_softmax_backward_rows_f32": (ly, g), "layer_norm_rows_f32": (finite, w, b, 1e-5),
             "layer_norm_backward_rows_f32": (finite, g, w, 1e-5)}
    for name, args in cases.items():
        outs = []
        for run in (getattr(_kernels(), name), getattr(_formulas, name)):
            out, extra = np.empty_like(x), [np.zeros(64, np.float32), np.zeros(64, np.float32)]
            with np.errstate(all="ignore"):
                run(*args, out, *(extra if "layer_norm_backward" in name else ()))
            outs.append([out] + extra)
        for compiled, numpy in zip(*outs):  # (layer norm's accumulators: sums of 384 rows, against their scale)
            scale = max(1, np.abs(np.nan_to_num(compiled, posinf=0, neginf=0)).max())
            np.testing.assert_allclose(numpy, compiled, rtol=2e-6, atol=2e-6 * scale, err_msg=name)
        if name == "log_softmax_rows_f32":
            got = outs[1][0]
            assert np.isnan(got[:3]).all() and got[3, 7] == -np.inf and np.isfinite(got[4:]).all()


def test_split_over_cores_is_bit_identical(engine):
    x = np.random.default_rng(0).standard_normal(3 * _loops.SPLIT_MIN + 123).astype(np.float32) * 4
    whole = np.empty_like(x)
    _kernels().gelu_f32(x, whole)
    np.testing.assert_array_equal(_loops.gelu(np, x, "none"), whole)


def test_read_only_inputs_take_the_compiled_loop():
    """A read-only array is another type to numba: it is copied rather than compiled for."""
    x = np.linspace(-3, 3, 2 * _loops.LOOP_MIN, dtype=np.float32)
    x.flags.writeable = False
    with _jit.forced():
        want = _loops.gelu(np, x.copy(), "none")
        before = len(_kernels().gelu_f32.signatures)
        np.testing.assert_array_equal(_loops.gelu(np, x, "none"), want)
    assert len(_kernels().gelu_f32.signatures) == before


def test_half_types_compute_in_float32():
    x = ember.linspace(-6, 6, 101)
    gelu = REGISTRY["gelu"].fn  # (ember.nn.functional is ember-nn's)
    for dtype in (ember.float16, ember.bfloat16):
        got = gelu(x.to(dtype))
        want = gelu(x.to(dtype).float()).to(dtype)
        assert ember.equal(got, want)


@needs_autograd
@pytest.mark.parametrize("name, kwargs", [("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}),
                                          ("softplus", {"beta": 2.0, "threshold": 1.0})])
@pytest.mark.nn  # (calls ember.nn.functional: ember-nn)
def test_second_derivatives(name, kwargs):
    """The VJP ops' own VJPs (double backward) against finite differences (float64)."""
    x = ember.tensor(np.random.default_rng(1).standard_normal(20) * 2, requires_grad=True)
    fn = getattr(ember.nn.functional, name)
    assert ember.autograd.gradgradcheck(lambda t: fn(t, **kwargs), (x,))


@needs_autograd
@pytest.mark.parametrize("name, kwargs", [("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}),
                                          ("softplus", {"beta": 2.0, "threshold": 1.0}), ("sigmoid", {}),
                                          ("tanh", {})])
@pytest.mark.nn  # (calls ember.nn.functional: ember-nn)
def test_loops_match_torch_on_large_tensors(name, kwargs, engine):
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


@needs_autograd
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_rows_match_torch(name, engine):
    torch = pytest.importorskip("torch")
    x = _rows()
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
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
@pytest.mark.parametrize("width", [128, 1000])
@pytest.mark.nn  # (calls ember.nn.functional: ember-nn)
def test_layer_norm_rows_match_torch(affine, width, engine):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3 * _loops.LOOP_MIN // width, width)).astype(np.float32) * 3 + 1
    g = rng.standard_normal(x.shape).astype(np.float32)
    w, b = rng.standard_normal(width).astype(np.float32), rng.standard_normal(width).astype(np.float32)
    results = []
    for lib in (ember, torch):
        params = [lib.tensor(w, requires_grad=True) if affine in ("both", "weight") else None,
                  lib.tensor(b, requires_grad=True) if affine in ("both", "bias") else None]
        t = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.layer_norm(t, (width,), *params)
        y.backward(lib.tensor(g))
        results.append([y.detach().numpy(), t.grad.numpy()] + [p.grad.numpy() for p in params if p is not None])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@needs_autograd
@pytest.mark.nn  # (calls ember.nn.functional: ember-nn)
def test_row_loops_split_over_threads_bit_identical(monkeypatch, engine):
    """The halves of the rows on two threads give the values of one thread (layer norm's parameter gradients too:
    both halves are summed either way)."""
    x = _rows()
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
