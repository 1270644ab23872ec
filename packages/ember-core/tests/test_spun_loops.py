"""Loops run by their C-callable parts on ember._parallel's spinning helpers (``_parallel.spun``): the same bits as the
JIT-free path (elementwise loops) and as the compiled loop on one thread (row loops); the helpers sleep, wake, stop
spinning for the other splits and start again after a fork; and the one-pass gradients of pow and log and x ** 2
against torch and the JIT-free path (non-contiguous, float64, half, empty, inf/nan)."""
import os
import time

import numpy as np
import pytest
from optable import needs_autograd

import ember
from ember import _jit, _loops
from ember import _parallel as P

pytest.importorskip("numba")
needs_helpers = pytest.mark.skipif(P.WORKERS < 2 or not P.SPINS, reason="one core, or not x86: nothing spins")
N = 3 * P.SPIN_CHUNK + 1234  # (parts of unequal length: the last one short)


@pytest.fixture(autouse=True)
def _no_back_off(monkeypatch):
    """Runs split whatever the load of the machine (a helper preempted by another process would make ``spun`` back
    off for a while)."""
    monkeypatch.setattr(P, "LATE_TICKS", 1 << 62)
    monkeypatch.setattr(P, "_BACKOFF", [0])


def _data(n=N, dtype=np.float32, seed=0, positive=False):
    x = np.random.default_rng(seed).standard_normal(n) * 3
    x[::997], x[1::997], x[2::997], x[3::997] = np.inf, -np.inf, np.nan, 0.0
    return (np.abs(x) + 0.1 if positive else x).astype(dtype)


def _same(a, b):
    """Equal bit for bit (NaN payloads aside: NumPy and the loops may quiet them differently)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    nan = np.isnan(a)
    np.testing.assert_array_equal(nan, np.isnan(b))
    np.testing.assert_array_equal(a[~nan].view(np.uint8 if a.itemsize == 1 else f"u{a.itemsize}"),
                                  b[~nan].view(np.uint8 if a.itemsize == 1 else f"u{a.itemsize}"))


def _jit_free(monkeypatch, fn):
    with monkeypatch.context() as m:
        m.setattr(_jit, "loop", lambda *args, **kwargs: None)
        return fn()


def _spun_calls(monkeypatch):
    calls = []
    spun = P.spun
    monkeypatch.setattr(P, "spun", lambda *a: calls.append(a[1]) or spun(*a))
    return calls


ELEMENTWISE = [
    ("gelu_f32", 1, ()), ("gelu_backward_f64", 2, ()), ("silu_backward_f32", 2, ()),
    ("softplus_f32", 1, (np.float32(2.0), np.float32(5.0))), ("softplus_backward_f32", 2, (np.float32(1.0),
                                                                                            np.float32(20.0))),
    ("square", 1, ()), ("cube_backward", 2, ()), ("sqrt_backward", 2, ()), ("log_backward", 2, ()),
    ("tanh_backward", 2, ()),
]


@needs_helpers
@pytest.mark.parametrize("name, arrays, scalars", ELEMENTWISE)
def test_elementwise_parts_match_the_jit_free_path(name, arrays, scalars, monkeypatch):
    dtype = np.float64 if name.endswith("f64") else np.float32
    xs = [_data(dtype=dtype, seed=k) for k in range(arrays)]
    want = _jit_free(monkeypatch, lambda: _loops._elementwise(name, *xs, scalars=scalars, minimum=1, tally=False))
    calls = _spun_calls(monkeypatch)
    with _jit.forced():
        got = _loops._elementwise(name, *xs, scalars=scalars, minimum=1, tally=False)
    assert calls, "the parts ran"
    _same(got, want)


@needs_helpers
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_powers_and_their_gradients_by_parts(dtype, monkeypatch):
    x = _data(dtype=dtype)
    g = _data(dtype=dtype, seed=1)
    for name in ("square", "cube", "inverse", "inverse_square", "root", "inverse_root"):
        want = _jit_free(monkeypatch, lambda name=name: _loops.power(x, name))
        with _jit.forced():
            _same(_loops.power(x, name), want)
    for name in ("square_backward", "cube_backward", "inverse_backward", "sqrt_backward", "log_backward"):
        want = _jit_free(monkeypatch, lambda name=name: _loops.derivative_times(name, x, g))
        with _jit.forced():
            _same(_loops.derivative_times(name, x, g), want)


ROWS = 3 * P.SPIN_MIN // 500 + 1


def _rows_run():
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((ROWS, 500)) * 3).astype(np.float32)
    x[0, 3], x[1, :] = np.inf, np.nan
    g = rng.standard_normal(x.shape).astype(np.float32)
    w = np.linspace(0.5, 2, 500, dtype=np.float32)
    out = []
    for fn in (lambda t: ember.softmax(t, -1), lambda t: ember.log_softmax(t, -1),
               lambda t, p=ember.tensor(w, requires_grad=True): ember.nn.functional.layer_norm(t, (500,), p, p)):
        t = ember.tensor(x, requires_grad=True)
        y = fn(t)
        grads = ember.autograd.grad(y, [t] + ([] if len(out) < 4 else [fn.__defaults__[0]]), ember.tensor(g))
        out += [y.detach().numpy()] + [a.numpy() for a in grads]
    return out


@needs_helpers
@needs_autograd
@pytest.mark.nn  # (calls ember.nn.functional: ember-nn)
def test_row_parts_match_one_thread(monkeypatch):
    """Row loops by parts (their rows claimed by both threads; layer norm's gradient by its two halves with their
    accumulators) give the compiled loop's values on one thread, bit for bit."""
    with _jit.forced():
        with monkeypatch.context() as m:
            m.setattr(P, "SPIN_MIN", 1 << 40)
            m.setattr(_loops, "ROWS_SPLIT_MIN", 1 << 40)
            whole = _rows_run()
        calls = _spun_calls(monkeypatch)
        parts = _rows_run()
    assert len(calls) == 6
    for a, b in zip(whole, parts):
        _same(a, b)


@needs_helpers
def test_helpers_sleep_wake_and_yield(monkeypatch):
    """A helper blocks once it has spun SPIN_TICKS without work, and the next run wakes it; another split stops
    its spinning; a run while another split holds the helpers computes alone."""
    x = _data(positive=True)
    with _jit.forced():
        want = _loops.power(x, "cube")
    ctl, helpers = P._SPIN
    deadline = time.monotonic() + 10
    while not all(asleep[0] for _, asleep, _ in helpers) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(asleep[0] for _, asleep, _ in helpers)
    _same(_loops.power(x, "cube"), want)  # (wakes them)
    big = np.ones(P.MIN_SIZE, np.float32)
    P.ufunc(np.multiply, big, big)  # another split: QUIT
    assert ctl[P._QUIT] == 1
    _same(_loops.power(x, "cube"), want)
    assert ctl[P._QUIT] == 0
    with P._BUSY[0]:  # (a split in progress elsewhere)
        assert not P.spun(None, None)
        _same(_loops.power(x, "cube"), want)


@needs_helpers
def test_late_helpers_back_off(monkeypatch):
    """A run that waited too long for a helper's last part makes the next BACKOFF_RUNS runs compute alone (same
    values)."""
    x = _data(positive=True)
    with _jit.forced():
        want = _loops.power(x, "cube")
        monkeypatch.setattr(P, "LATE_TICKS", -1)
        monkeypatch.setattr(P, "_BACKOFF", [0])
        for _ in range(20):  # (a run that had to wake its helper does not count its lateness)
            _same(_loops.power(x, "cube"), want)
            if P._BACKOFF[0]:
                break
        assert P._BACKOFF[0] == P.BACKOFF_RUNS
        _same(_loops.power(x, "cube"), want)
        assert P._BACKOFF[0] == P.BACKOFF_RUNS - 1 and not P.spun(None, None)


@needs_helpers
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_parts_after_fork():
    x = _data(positive=True)
    with _jit.forced():
        want = _loops.power(x, "square")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # (the child: new helpers, the loops that were ready)
        try:
            ok = np.array_equal(_loops.power(x, "square"), want, equal_nan=True) and P._SPIN[1][0][2] != 0
            os.write(w, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(w)
    assert os.read(r, 1) == b"1"
    os.waitpid(pid, 0)


def _inputs(lib, dtype, layout, positive):
    x = _data(dtype=np.float64, positive=positive)
    if layout == "strided":
        x = np.repeat(x, 2)
    t = lib.tensor(x).to(getattr(lib, dtype))
    return t[::2] if layout == "strided" else t


POW_AND_LOG = [(lambda lib, t: lib.pow(t, 2), False), (lambda lib, t: lib.pow(t, 3), False),
               (lambda lib, t: lib.pow(t, -1), False), (lambda lib, t: lib.pow(t, 0.5), True),
               (lambda lib, t: lib.pow(t, -0.5), True), (lambda lib, t: lib.pow(t, -2.0), False),
               (lambda lib, t: lib.log(t), True)]


def _values_and_gradient(lib, fn, t, g):
    t.requires_grad_()
    y = fn(lib, t)
    return [y.detach(), lib.autograd.grad(y, t, g)[0]]


@needs_autograd
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
@pytest.mark.parametrize("fn, positive", POW_AND_LOG)
def test_pow_and_log_gradients_match_torch(fn, positive, dtype, layout):
    torch = pytest.importorskip("torch")
    results = [[r.numpy() for r in _values_and_gradient(lib, fn, _inputs(lib, dtype, layout, positive),
                                                        _inputs(lib, dtype, layout, False))] for lib in (ember, torch)]
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-12, atol=0)


@needs_autograd
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("fn, positive", POW_AND_LOG)
def test_pow_and_log_gradients_of_half_types(fn, positive, dtype):
    """(Not the loops' types: the ops' own steps, each rounded to the type) within an ulp or two of the float32
    values of the same inputs."""
    rng = np.random.default_rng(8)  # (magnitudes whose powers and gradients stay in float16's normal range)
    x = rng.uniform(0.5, 3, N) * (1 if positive else rng.choice([-1, 1], N))
    t, g = ember.tensor(x).to(getattr(ember, dtype)), ember.tensor(rng.uniform(-2, 2, N)).to(getattr(ember, dtype))
    half = dtype == "float16"
    got = _values_and_gradient(ember, fn, t, g)
    want = _values_and_gradient(ember, fn, t.float(), g.float())
    for a, b in zip(got, want):
        assert a.dtype == getattr(ember, dtype)
        np.testing.assert_allclose(a.float().numpy(), b.to(a.dtype).float().numpy(), rtol=2e-3 if half else 1.6e-2,
                                   atol=2.0 ** -23 if half else 0)  # (float16's subnormals: ulps of 2**-24)


@needs_autograd
@pytest.mark.parametrize("fn", [lambda lib, t: lib.pow(t, 3), lambda lib, t: lib.pow(t, 0.5),
                                lambda lib, t: lib.log(t)])
def test_empty_and_graph_gradients(fn):
    """Empty inputs; and a gradient being recorded (create_graph) takes the ops, not the loop: second derivatives."""
    torch = pytest.importorskip("torch")
    e = ember.zeros(0, requires_grad=True)
    assert ember.autograd.grad(fn(ember, e), e, ember.zeros(0))[0].shape == (0,)
    x = _data(n=2 * _loops.LOOP_MIN, dtype=np.float64, positive=True)
    results = []
    for lib in (ember, torch):
        t = lib.tensor(x, requires_grad=True)
        (d,) = lib.autograd.grad(fn(lib, t).sum(), t, create_graph=True)
        results.append(lib.autograd.grad(d.sum(), t)[0].numpy())
    np.testing.assert_allclose(*results, rtol=1e-12)
