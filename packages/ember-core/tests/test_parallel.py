"""Large elementwise work split over the cores (ember._parallel): bit for bit the values of one call, NumPy's
errstate kept in the workers, in-place/out=/broadcasting calls through the registry's split."""
import inspect
import os
import threading
import time
import warnings

import numpy as np
import pytest
import torch
from optable import needs_autograd

import ember
from ember import _parallel as P
from ember._ops import fft_ops, pointwise, reduction, selection
from ember._registry import REGISTRY

N = P.MIN_SIZE + 12345  # splits, into chunks that are not whole blocks


def _data(n, dtype=np.float32, seed=0):
    """Values with infinities, NaN, subnormals and signed zeros among ordinary ones."""
    x = np.random.default_rng(seed).standard_normal(n).astype(dtype) * 3
    x[:6] = [np.inf, -np.inf, np.nan, 0.0, -0.0, np.finfo(dtype).tiny / 4]
    return x


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))  # bits, NaN included


@pytest.fixture
def runs(monkeypatch):
    """The number of split runs made while the test runs."""
    count = [0]
    run = P._run

    def counted(*args):
        count[0] += 1
        return run(*args)
    monkeypatch.setattr(P, "_run", counted)
    return count


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("f, other", [(np.exp, None), (np.tanh, None), (np.negative, None), (np.multiply, 1.01),
                                      (np.add, "array"), (np.subtract, "array"), (np.true_divide, "array")])
def test_ufunc_bits(runs, f, other, dtype):
    with np.errstate(all="ignore"):
        x = _data(N, dtype)
        args = (x,) if other is None else (x, dtype(other) if other != "array" else _data(N, dtype, seed=1))
        _same(P.ufunc(f, *args), f(*args))
    assert runs[0] == 1


@pytest.mark.parametrize("n, split", [(P.MIN_SIZE - 1, False), (P.MIN_SIZE, True), (3 * P.MIN_SIZE + 7, True)])
def test_threshold(runs, n, split):
    x = _data(n)
    with np.errstate(all="ignore"):
        _same(P.ufunc(np.exp, x), np.exp(x))
    assert runs[0] == split


_SPLIT_OPS = sorted(name for name, op in REGISTRY.items() if getattr(op, "split", None))


def test_split_ops_declared():
    assert {"add", "sub", "mul", "div", "neg", "exp", "tanh"} <= set(_SPLIT_OPS)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", _SPLIT_OPS)
def test_split_ops_bits(name, dtype, monkeypatch, runs):
    """Each op declaring its ufunc gives the same bits split as in one call."""
    op = REGISTRY[name]
    arity = sum(p.kind == p.POSITIONAL_OR_KEYWORD for p in inspect.signature(op.impl).parameters.values()) - 1
    args = [ember.tensor(_data(N, dtype, seed=k)) for k in range(arity)]
    with np.errstate(all="ignore"):
        split = op(*args).numpy()
        assert runs[0] == 1
        monkeypatch.setattr(P, "MIN_SIZE", 1 << 62)
        _same(split, op(*args).numpy())


def test_ufunc_no_split(runs):
    x = _data(2 * N).reshape(2, N)
    with np.errstate(all="ignore"):
        _same(P.ufunc(np.exp, x.T), np.exp(x.T))  # not C-contiguous
        _same(P.ufunc(np.add, x, x[0]), x + x[0])  # broadcast
        _same(P.ufunc(np.add, x[:, 1:], x[:, :-1], out=x[:, 1:].copy()), x[:, 1:] + x[:, :-1])
        flat = x.reshape(-1).copy()
        want = flat[1:N + 1] + flat[:N]
        _same(P.ufunc(np.add, flat[1:N + 1], flat[:N], out=flat[1:N + 1]), want)  # out overlaps an operand, shifted
    assert runs[0] == 0


def test_ufunc_into_operand(runs):
    x = _data(N)
    want = x * np.float32(0.5)
    r = P.ufunc(np.multiply, x, 0.5, out=x)
    assert r is x and runs[0] == 1
    _same(x, want)


def test_expression_bits(runs):
    y, g = np.tanh(_data(N)), _data(N, seed=1)
    with np.errstate(invalid="ignore"):  # (inf * 0)
        want = y * y
        np.subtract(1, want, out=want)
        want *= g
        _same(P.expression(pointwise._tanh_grad, y, g), want)
    assert runs[0] == 1


@pytest.mark.parametrize("n", [P.MIN_SIZE, P.MIN_SIZE + 1, 3 * P.MIN_SIZE + 4099, 2 * P.MIN_SIZE + P._BLOCK - 1])
def test_part_edges_bits(runs, n):
    """Parts and blocks that end anywhere (not at whole blocks or alignment) give the values of one call."""
    x, y = _data(n), _data(n, seed=1)
    with np.errstate(all="ignore"):
        _same(P.ufunc(np.add, x, y), x + y)
        want = x * x
        np.subtract(1, want, out=want)
        want *= y
        _same(P.expression(pointwise._tanh_grad, x, y), want)
    assert runs[0] == 2


@pytest.mark.parametrize("n", [7, 1000, P._ALIGN + 1, P._LEAD + 5])
def test_small_parts(n):
    """Fewer elements than the caller's lead or one alignment: whatever parts there are, the values of one call."""
    x = _data(n)
    with np.errstate(all="ignore"):
        for blocked in (False, True):
            _same(P._run(lambda o, a: np.exp(a, out=o), np.empty_like(x), (x,), blocked), np.exp(x))


def _in_both(step):
    """An expression that calls ``step(in_helper)`` in the calling thread and in a helper, each computing at least
    one part (the caller waits for a helper to start)."""
    caller, started = threading.get_ident(), threading.Event()

    def fn(xp, out, x):
        helper = threading.get_ident() != caller
        if helper:
            started.set()
        else:
            assert started.wait(10)
        step(helper)
        np.copyto(out, x)
    return fn


needs_helpers = pytest.mark.skipif(P.WORKERS < 2, reason="one core: nothing splits")


@needs_helpers
@pytest.mark.parametrize("side", [True, False])
def test_part_error(side):
    """An error in a helper's part or the caller's raises in the caller; the helpers serve the next split."""
    def step(helper):
        if helper is side:
            raise ValueError("from a part")
    x = _data(P.EXPRESSION_MIN)
    with pytest.raises(ValueError, match="from a part"):
        P.expression(_in_both(step), x)
    _same(P.expression(_in_both(lambda helper: None), x), x)


@needs_helpers
def test_errstate_in_helper():
    seen = {}
    x = _data(P.EXPRESSION_MIN)
    with np.errstate(over="raise", under="ignore"):
        P.expression(_in_both(lambda helper: seen.setdefault(helper, np.geterr())), x)
    assert seen[True] == seen[False] and seen[True]["over"] == "raise" and seen[True]["under"] == "ignore"
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        P.expression(_in_both(lambda helper: helper and np.float32(1e30) * np.float32(1e30)), x)


@needs_helpers
def test_nested_and_concurrent_splits():
    """A split inside a split, or in another thread during one, computes in one call: no deadlock, same values."""
    x = _data(N)
    want = np.exp(x)
    inner = []
    P.expression(_in_both(lambda helper: inner.append(P.ufunc(np.exp, x))), _data(P.EXPRESSION_MIN))
    for r in inner:
        _same(r, want)
    results = []
    threads = [threading.Thread(target=lambda: results.extend(P.ufunc(np.exp, x) for _ in range(5))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 15
    for r in results:
        _same(r, want)


@needs_helpers
@pytest.mark.skipif(P._cpu is None, reason="no CPU placement here")
def test_helpers_off_callers_cpu():
    P.ufunc(np.exp, _data(N))
    for *_, tid in P._HELPERS:
        assert P._AVOIDED[0] not in os.sched_getaffinity(tid) or len(os.sched_getaffinity(0)) == 1


@pytest.mark.parametrize("n, split", [(P.EXPRESSION_MIN - 1, False), (P.EXPRESSION_MIN, True)])
def test_expression_threshold(runs, n, split):
    y, g = _data(n), _data(n, seed=1)
    want = (1 - y * y) * g
    _same(P.expression(pointwise._tanh_grad, y, g), want)
    assert runs[0] == split


def test_errstate_in_workers():
    """Split ops run in a copy of the caller's context, where the registry turned NumPy's floating-point warnings
    off (ember._quiet): none escapes from a helper thread either, whatever the caller's own errstate."""
    big = np.full(N, 1e30, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.tensor(np.full(N, -100.0, np.float32)).sigmoid()  # exp overflows silently
        ember.tensor(big).exp()
        assert bool(ember.isinf(ember.tensor(big) * 1e30).all())
        with np.errstate(over="raise"):
            assert bool(ember.isinf(ember.tensor(big) * 1e30).all())


def _pair(shape, dtype=np.float32, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return ember.tensor(x), torch.tensor(x)


def _check(e, t):
    assert str(e.dtype).split(".")[1] == str(t.dtype).split(".")[1] and tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, atol=1e-6)


@needs_autograd
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_calls(op, runs):
    (ea, ta), (eb, tb) = _pair((N,)), _pair((N,), seed=1)
    _check(getattr(ember, op)(ea, eb), getattr(torch, op)(ta, tb))
    _check(getattr(ember, op)(ea, 2.5), getattr(torch, op)(ta, 2.5))
    _check(getattr(ember, op)(2.5, ea), getattr(torch, op)(2.5, ta))
    _check(getattr(ember, op)(ea, ember.tensor(3.0)), getattr(torch, op)(ta, torch.tensor(3.0)))
    (e64, t64) = _pair((N,), np.float64, seed=2)
    _check(getattr(ember, op)(ea, e64), getattr(torch, op)(ta, t64))  # promoted
    (ea.requires_grad_(), ta.requires_grad_())
    _check(getattr(ember, op)(ea, eb).detach(), getattr(torch, op)(ta, tb).detach())  # the dispatcher's path
    assert runs[0] == 6


def test_integer_and_half():
    (ea, ta) = _pair((N,), np.float16)
    _check(ea * 1.5 + ea, ta * 1.5 + ta)
    x = np.random.default_rng(0).integers(-1000, 1000, N)
    ei, ti = ember.tensor(x), torch.tensor(x)
    _check(ei * 3 - ei, ti * 3 - ti)
    _check(ei / 7, ti / 7)
    _check(-ei, -ti)


def test_broadcast_and_layout():
    (ea, ta), (eb, tb) = _pair((512, 1024)), _pair((1024,), seed=1)
    _check(ea + eb, ta + tb)
    _check(ea.t() * 2.0, ta.t() * 2.0)
    _check(ea.t().exp(), ta.t().exp())
    _check(ea[:, ::2].tanh(), ta[:, ::2].tanh())


def test_inplace_and_out():
    (ea, ta), (eb, tb) = _pair((N,)), _pair((N,), seed=1)
    ea.mul_(eb), ta.mul_(tb)
    _check(ea, ta)
    ea += 1.0
    ta += 1.0
    _check(ea, ta)
    ea[1:].add_(eb[:-1]), ta[1:].add_(tb[:-1])  # into a view
    _check(ea, ta)
    ea[::2].sub_(eb[::2]), ta[::2].sub_(tb[::2])
    _check(ea, ta)
    eo, to = ember.empty(N), torch.empty(N)
    ember.exp(ea, out=eo), torch.exp(ta, out=to)
    _check(eo, to)
    eo, to = ember.empty(N, dtype=ember.float64), torch.empty(N, dtype=torch.float64)
    ember.sub(ea, eb, out=eo), torch.sub(ta, tb, out=to)
    _check(eo, to)
    eo, to = ember.empty(3), torch.empty(3)
    with pytest.warns(UserWarning, match="resized"):
        ember.neg(ea, out=eo)
    with pytest.warns(UserWarning, match="resized"):
        torch.neg(ta, out=to)
    _check(eo, to)


def _grads(f, x):
    x = ember.tensor(x, requires_grad=True)
    f(x).backward()
    return x.grad.numpy()


def _chain(y):
    for _ in range(2):
        y = ((y * 1.01 + 0.5).tanh() - 0.1).exp() * 0.5
    return (y.sigmoid() / 3).sum()


def _double_tanh(x):
    g, = ember.autograd.grad(x.tanh().sum(), x, create_graph=True)
    return (g * g).sum()


@needs_autograd
@pytest.mark.parametrize("f", [_chain, _double_tanh])
def test_gradients_bits(f, monkeypatch):
    """Split and unsplit gradients agree bit for bit, and with PyTorch's."""
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    split = _grads(f, x)
    monkeypatch.setattr(P, "MIN_SIZE", 1 << 62)
    _same(split, _grads(f, x))
    t = torch.tensor(x, requires_grad=True)
    (_chain if f is _chain else _torch_double_tanh)(t).backward()
    np.testing.assert_allclose(split, t.grad.numpy(), rtol=1e-5, atol=1e-6)


def _torch_double_tanh(x):
    g, = torch.autograd.grad(x.tanh().sum(), x, create_graph=True)
    return (g * g).sum()


@needs_autograd
@pytest.mark.parametrize("n", [1000, N])
def test_tanh_gradient_in_place(n):
    """tanh's VJP writes into a gradient the engine owns (here the product's, not the sum's broadcast one): the
    values are those of a new array, and PyTorch's."""
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    calls = []
    real = pointwise._tanh_grad_into
    pointwise._tanh_grad_into = lambda *a: calls.append(1) or real(*a)
    try:
        e = ember.tensor(x, requires_grad=True)
        (e.tanh() * 3.0).sum().backward()
    finally:
        pointwise._tanh_grad_into = real
    assert calls
    t = torch.tensor(x, requires_grad=True)
    (t.tanh() * 3.0).sum().backward()
    y = np.tanh(x)
    _same(e.grad.numpy(), (1 - y * y) * np.float32(3.0))
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)  # (tanh's own ulps, then 1 - y*y)


def test_split_keeps_no_reference():
    """A split's helpers drop their job: the result's only owner is the caller (so the engine may reuse it)."""
    import sys
    a = np.ones(N, np.float32)
    r = P.ufunc(np.multiply, a, np.float32(2))
    assert sys.getrefcount(r) == 2


@needs_autograd
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_split_over_threads_matches_torch(dtype, runs):
    """relu and its gradient (a select by the output's zeros) over the cores: torch's bits, NaN and -0.0 included."""
    x = _data(N, dtype)
    x[:5] = [np.nan, -0.0, 0.0, -np.inf, np.inf]
    g = _data(N, dtype, seed=1)
    e, t = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ye, yt = ember.relu(e), torch.relu(t)
    assert runs[0]
    np.testing.assert_array_equal(ye.detach().numpy(), yt.detach().numpy())
    ye.backward(ember.tensor(g)), yt.backward(torch.tensor(g))
    assert e.grad.numpy().tobytes() == t.grad.numpy().tobytes()


def _stalled_helper(monkeypatch):
    """A helper that is handed jobs but runs none until the test runs them (a thread a busy machine left
    without CPU)."""
    go, done = threading.Lock(), threading.Lock()
    go.acquire()
    done.acquire()
    helper = (go, done, [None, False], None)
    monkeypatch.setattr(P, "_helpers", lambda: [helper])
    return helper


@needs_helpers
def test_a_helper_that_has_not_started_is_not_waited_for(monkeypatch):
    """The caller computes the part of a helper that has not started, does not wait for it, and hands it no job
    until it has been through the one it was late for; the late job finds the work done and holds no array."""
    import sys
    go, done, job, _ = _stalled_helper(monkeypatch)
    a = _data(N)
    got = []
    caller = threading.Thread(target=lambda: got.append(P.ufunc(np.multiply, a, np.float32(2))))
    caller.start()
    caller.join(timeout=60)  # (a caller waiting for the helper would never end)
    r = got.pop()
    _same(r, a * np.float32(2))
    assert job[1] and sys.getrefcount(r) == 2
    late = job[0]
    r2 = P.ufunc(np.add, a, a)  # the helper is still busy: no job for it
    _same(r2, a + a)
    assert job[0] is late
    go.acquire()  # the helper runs now, and ends
    late()
    done.release()
    r3 = P.ufunc(np.add, a, a)  # its end is collected: it is handed the next job
    _same(r3, a + a)
    assert job[0] is not late and job[1]


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_halves(n, monkeypatch):
    """Both halves run once each, on the caller and a helper, or both on the caller when the helper is late; or
    all in one call when no helper is free (a helper still late for an earlier job on a busy machine)."""
    seen = []

    def fn(lo, hi):
        seen.append((lo, hi, threading.get_ident()))
        return hi - lo
    first, second = P.halves(fn, n)
    assert sorted(s[:2] for s in seen) == ([(0, n)] if second is None else [(0, n // 2), (n // 2, n)])
    assert first + (second or 0) == n and (second is None or first == n // 2)
    if n > 1 and P.WORKERS > 1:
        seen.clear()
        _stalled_helper(monkeypatch)
        assert P.halves(fn, n) == (n // 2, n - n // 2)
        assert {s[2] for s in seen} == {threading.get_ident()}


def test_halves_raise_the_helpers_error():
    def fn(lo, hi):  # (the second half fails, wherever it runs)
        if hi > 2:
            raise ValueError("second half")
        return 0
    with pytest.raises(ValueError, match="second half"):
        P.halves(fn, 4)


def test_one_pool():
    assert selection.pool is fft_ops.pool is reduction.pool is P.pool


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_pool_after_fork():
    """A forked child (a DataLoader worker) gets a pool of its own: the parent's threads are not in it."""
    x = ember.tensor(_data(N))
    want = x.exp().numpy()
    pid = os.fork()
    if pid == 0:
        fresh = not P._HELPERS and not P._POOL
        same = np.array_equal(x.exp().numpy(), want, equal_nan=True)
        os._exit(0 if fresh and same and len(P._HELPERS) == P.WORKERS - 1 else 1)
    for _ in range(600):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    pytest.fail("the child hung")
