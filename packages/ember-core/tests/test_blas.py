"""ember._blas: the lookup of NumPy's BLAS and its fallbacks, and ``gemm`` (written or accumulated products) on
the layouts it passes to BLAS and the ones it leaves to NumPy, against PyTorch."""
import ctypes

import numpy as np
import pytest
import torch
from optable import needs_autograd

import ember
from ember import _blas
from ember._registry import REGISTRY


@pytest.fixture
def gemm_calls(monkeypatch):
    """Counts the BLAS gemm calls (the real functions still do the work)."""
    calls = []

    def counting(fn):
        def call(*args):
            calls.append(args)
            return fn(*args)
        return call

    monkeypatch.setattr(_blas, "GEMM", {dt: (counting(fn), *rest) for dt, (fn, *rest) in _blas.GEMM.items()})
    return calls


def _operand(rng, shape, dtype, layout):
    """A 2-D array of ``shape`` laid out as asked: dense, a transposed view, rows of a wider array, a view with a
    step along its rows (no unit stride: not BLAS's)."""
    if layout == "dense":
        return rng.standard_normal(shape).astype(dtype)
    if layout == "transposed":
        return rng.standard_normal(shape[::-1]).astype(dtype).T
    if layout == "wide":
        return rng.standard_normal((shape[0], shape[1] + 3)).astype(dtype)[:, 1:shape[1] + 1]
    return rng.standard_normal((shape[0], 2 * shape[1])).astype(dtype)[:, ::2]


LAYOUTS = ["dense", "transposed", "wide", "stepped"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("la", LAYOUTS)
@pytest.mark.parametrize("lb", LAYOUTS)
@pytest.mark.parametrize("lc", LAYOUTS)
@pytest.mark.parametrize("beta", [0, 1])
def test_gemm_matches_torch(dtype, la, lb, lc, beta, gemm_calls):
    rng = np.random.default_rng(0)
    a, b, c = _operand(rng, (5, 7), dtype, la), _operand(rng, (7, 4), dtype, lb), _operand(rng, (5, 4), dtype, lc)
    want = torch.from_numpy(a.copy()) @ torch.from_numpy(b.copy()) + beta * torch.from_numpy(c.copy())
    assert _blas.gemm(a, b, c, beta) is c
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(c, want.numpy(), rtol=tol, atol=tol)
    assert len(gemm_calls) == (bool(_blas.GEMM) and "stepped" not in (la, lb, lc))


@pytest.mark.parametrize("case", ["float16", "mixed", "int64", "empty_k", "empty_m", "readonly", "broadcast",
                                  "mismatch"])
def test_gemm_leaves_the_rest_to_numpy(case, gemm_calls):
    rng = np.random.default_rng(1)
    a, b, c = rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), np.ones((3, 2))
    if case in ("float16", "int64"):
        a, b, c = (v.astype(case) for v in (a, b, c))
    elif case == "mixed":
        b = b.astype(np.float32)
    elif case == "empty_k":
        a, b = a[:, :0], b[:0]
    elif case == "empty_m":
        a, c = a[:0], c[:0]
    elif case == "broadcast":
        b = np.broadcast_to(b[:1], b.shape)
    want = torch.from_numpy(a.copy()) @ torch.from_numpy(b.copy()).to(torch.from_numpy(a).dtype) + \
        torch.from_numpy(c.copy())
    if case in ("readonly", "mismatch"):
        c.flags.writeable = case != "readonly"
        with pytest.raises(ValueError, match="read-only" if case == "readonly" else "mismatch|broadcast"):
            _blas.gemm(a, b[:3] if case == "mismatch" else b, c, 1)
    else:
        np.testing.assert_allclose(_blas.gemm(a, b, c, 1), want.numpy().astype(c.dtype), rtol=1e-3)
    assert not gemm_calls


def test_gemm_without_blas_gives_the_same_products(monkeypatch):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32).T
    results = []
    for table in (_blas.GEMM, {}):
        monkeypatch.setattr(_blas, "GEMM", table)
        c = np.ones((4, 6), np.float32).T
        results.append((_blas.gemm(a, b, c, 1).copy(), _blas.gemm(a, b, np.empty((6, 4), np.float32))))
    for x, y in zip(*results):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)


def test_lookup_checks_and_falls_back(monkeypatch):
    axpys, gemms, omats, threads = _blas.lookup()
    assert set(axpys) | set(gemms) | set(omats) <= {np.dtype(np.float32), np.dtype(np.float64)}
    assert axpys.keys() == _blas.AXPY.keys() and gemms.keys() == _blas.GEMM.keys()
    assert omats.keys() == _blas.OMATCOPY.keys() and (threads is None) == (_blas.THREADS is None)
    monkeypatch.setattr(_blas, "DATA", 8)  # a wrong offset for the data pointer: no BLAS
    assert _blas.lookup() == ({}, {}, {}, None)
    monkeypatch.undo()

    def no_library(path):
        raise OSError(path)
    monkeypatch.setattr(ctypes, "CDLL", no_library)
    assert _blas.lookup() == ({}, {}, {}, None)


def test_lstm_layer_without_blas_matches(monkeypatch):
    """The LSTM layer ops (their step products go through gemm) give the same values through NumPy's matmul."""
    rng = np.random.default_rng(3)
    T, B, F, H = 11, 3, 4, 6  # (more steps than a chunk)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((T, B, F), (B, H), (B, H), (4 * H, F), (4 * H, H),
                                                               (4 * H,), (4 * H,))]
    grads = [rng.standard_normal(s).astype(np.float32) for s in ((T, B, H), (B, H), (B, H))]
    results = []
    for table in (_blas.GEMM, {}):
        monkeypatch.setattr(_blas, "GEMM", table)
        out = [a.numpy() for a in REGISTRY["_lstm_layer"].fn(*map(ember.tensor, args))]
        back = REGISTRY["_lstm_layer_backward"].fn(*map(ember.tensor, args[:5]), ember.tensor(args[5] + args[6]),
                                                   ember.tensor(out[0]), *map(ember.tensor, grads),
                                                   ember.tensor(out[3]), ember.tensor(out[4]))
        results.append(out + [a.numpy() for a in back])
    for x, y in zip(*results):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("T", [1, 8, 9, 19])
@needs_autograd
def test_lstm_layer_step_chunks_match_torch(T):
    """The LSTM layer ops run the input's products over chunks of steps: sequences shorter than, equal to and
    longer than a chunk, against torch's layer and its autograd."""
    rng = np.random.default_rng(T)
    B, F, H = 3, 4, 5
    arrays = [rng.standard_normal(s) for s in ((T, B, F), (B, H), (B, H), (4 * H, F), (4 * H, H), (4 * H,), (4 * H,))]
    cots = [rng.standard_normal(s) for s in ((T, B, H), (B, H), (B, H))]
    t = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, h, c = torch._VF.lstm(t[0], (t[1][None], t[2][None]), t[3:], True, 1, 0.0, False, False, False)
    want = [out, h[0], c[0]]
    want_grads = torch.autograd.grad(want, t, [torch.tensor(v) for v in cots])
    e = [ember.tensor(a, requires_grad=True) for a in arrays]
    got = REGISTRY["_lstm_layer"].fn(*e)[:3]
    got_grads = ember.autograd.grad(list(got), e, [ember.tensor(v) for v in cots])
    for x, y in zip(list(got) + list(got_grads), want + list(want_grads)):
        np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=1e-10, atol=1e-12)
