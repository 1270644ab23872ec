"""No call of an ember.special function, nor of ember-core's functions that have numba loops, waits for numba
(``ember._jit``): in a fresh process, first calls on small inputs never load numba, first calls on large inputs leave
their loops to ember's background thread and take the JIT-free path meanwhile, later calls find the loops compiled;
and each loop agrees with its op's JIT-free path. (The same check runs on environments made from the wheels:
integration_tests/test_install.py.)"""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from first_call_check import CORE_LOOPS

import ember
import ember.special as S

CHECK = pathlib.Path(__file__).with_name("first_call_check.py")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = subprocess.run([sys.executable, str(CHECK)], capture_output=True, text=True, check=True,
                         cwd=tmp_path_factory.mktemp("cwd"))
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_small_first_calls_never_load_numba(report):
    assert report["small"] == []


def test_large_first_calls_build_their_loops_off_the_call_path(report):
    assert report["first"] == {}


def test_later_calls_find_their_loops_compiled(report):
    assert report["waited"] and report["failed"] == [] and report["ready"] > 0
    assert report["warm"] == {} and report["jit_free"] == []


def test_core_loops_keep_off_the_call_path_too(report):
    """ember-core's loops (ember._loops) too: each of their calls was checked, and asked for its loop."""
    assert CORE_LOOPS <= set(report["asked"])
    assert not CORE_LOOPS & (set(report["small"]) | set(report["first"]))


# ---- each loop against its op's JIT-free path, on inputs with NaN, infinities, signed zeros, poles, huge values
EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, -3.0, 1e-30, -1e-30, 1e-5, 11.0, -15.0,
         29.5, 31.0, 100.0, 700.0, -700.0, 999.0, 1e5, 1e10, -1e10, 1e30, -1e30, 3e38]
DEGREES = [-3.0, -0.5, 0.0, 1.0, 2.0, 3.0, 4.7, 7.0, 9.0, 12.0, 25.0, np.nan, np.inf]


def _unary(rng):
    return [np.concatenate([EDGES, rng.uniform(-20, 20, 64), rng.uniform(-1.2, 1.2, 64), rng.uniform(0, 1, 32)])]


def _pairs(first, second):
    return [np.repeat(first, len(second)), np.tile(second, len(first))]


GAMMA_A = [np.nan, -1.0, 0.0, 1e-6, 0.5, 1.0, 7.5, 30.0, 500.0, 1000.0]  # (a above 1000: SciPy's range, not the loops')


def _polynomial(rng):
    return _pairs(np.concatenate([EDGES, rng.uniform(-1.2, 1.2, 40)]), DEGREES)


UNARY = ["airy_ai", "digamma", "gammaln", "i0", "i1", "i0e", "i1e", "modified_bessel_i0", "modified_bessel_i1", "erfcx",
         "erfinv", "log_ndtr", "entr", "logit", "sinc"]
CASES = {name: (getattr(S, name), _unary) for name in UNARY}
CASES.update({
    "multigammaln": (lambda x: S.multigammaln(x, 3), _unary),
    **{f"polygamma n={n}": (lambda x, n=n: S.polygamma(n, x), _unary) for n in (0, 1, 2, 5)},
    "gammainc": (S.gammainc, lambda rng: _pairs(GAMMA_A, EDGES)),
    "gammaincc": (S.gammaincc, lambda rng: _pairs(GAMMA_A, EDGES)),
    "zeta": (S.zeta, lambda rng: _pairs(EDGES, EDGES)),
    **{name: (getattr(S, name), _polynomial) for name in S.__all__ if "polynomial" in name},
})
# largest relative difference of finite values: float32 results round float64 values good to 1e-10 or better (one
# unit of rounding apart at most); float64 results: SciPy's algorithms against ember's kernels
TOL = {"float32": 1.2e-7, "float64": 1e-11}
# the float64 loops (the other functions compute float64 with SciPy either way); the polynomials' JIT-free path runs
# their loops' own code, gammaln's the C library's lgamma, as its loop: both give the same bits
F64_LOOPS = {"airy_ai", "digamma", "gammaln", "zeta", *(n for n in CASES if "polygamma" in n or "polynomial" in n)}
SAME_BITS = {("gammaln", "float64"), *((n, d) for n in CASES if "polynomial" in n for d in ("float32", "float64"))}


def _run(f, args, dtype):
    with np.errstate(all="ignore"):
        return f(*[ember.from_numpy(a.astype(dtype)) for a in args]).numpy().astype(np.float64)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_loop_agrees_with_jit_free_path(name, dtype, request, monkeypatch):
    from ember import _jit
    f, inputs = CASES[name]
    args = inputs(np.random.default_rng(0))
    jit_free = _run(f, args, dtype)
    request.getfixturevalue("compiled_loops")
    loops, loop = [], _jit.loop
    monkeypatch.setattr(_jit, "loop", lambda *a: loops.append(loop(*a)) or loops[-1])
    compiled = _run(f, args, dtype)
    if dtype == "float32" or name in F64_LOOPS:
        assert loops and all(loops), f"{name} did not run its loop"
    same = (jit_free == compiled) | (np.isnan(jit_free) & np.isnan(compiled))
    finite = np.isfinite(jit_free) & np.isfinite(compiled)
    assert (same | finite).all(), f"{name}: NaN/infinity differs at {[a[~(same | finite)][:4] for a in args]}"
    tol = 0.0 if (name, dtype) in SAME_BITS or (dtype == "float64" and name not in F64_LOOPS) else TOL[dtype]
    np.testing.assert_allclose(jit_free, compiled, rtol=tol, atol=0, equal_nan=True, err_msg=name)
