"""The host's 2-d convolution paths against PyTorch: Winograd's F(4x4, 3x3) (its maps, its float32 error at
ResNet's sizes, NaN and infinity), the channels-last columns (strides, dilation, uneven padding, 1x1 kernels, few
channels), the chunks spread over the cores, and the BLAS helpers they use (omatcopy transposes, the
single-threaded scope)."""
import threading

import numpy as np
import pytest
import torch
from optable import needs_autograd

import ember
from ember import _blas, _channels_last, _parallel, _winograd
from ember._ops import conv


def _pads(padding, kernel=(3, 3), dilation=(1, 1)):
    """``padding`` as conv.py's (lo, hi) pairs."""
    if padding == "same":
        total = [d * (k - 1) for d, k in zip(dilation, kernel)]
        return tuple((t // 2, t - t // 2) for t in total)
    p = (padding, padding) if isinstance(padding, int) else padding
    return tuple((v, v) for v in p)


def _case(rng, N, C, O, H, W, kernel, dtype=np.float32):
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = (rng.standard_normal((O, C) + kernel) / np.sqrt(C * kernel[0] * kernel[1])).astype(dtype)
    return x, w, rng.standard_normal(O).astype(dtype)


def _torch(x, w, b, g, **kw):
    """torch's float64 (output, input gradient, weight gradient); ``g`` None: the output gradient is drawn here."""
    xs, ws = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w))
    y = torch.nn.functional.conv2d(xs, ws, None if b is None else torch.tensor(b, dtype=torch.float64), **kw)
    if g is None:
        g = np.random.default_rng(7).standard_normal(tuple(y.shape)).astype(x.dtype)
    y.backward(torch.tensor(g, dtype=torch.float64))
    return y.detach().numpy(), xs.grad.numpy(), ws.grad.numpy(), g


def _assert_close(got, want, tol):
    """Within ``tol`` of ``want``'s scale (largest magnitude), as the transforms' error grows with it."""
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= tol * np.abs(want).max()


# ---- Winograd --------------------------------------------------------------------------------------
def test_winograd_maps_compute_the_correlation():
    """A (G g * B d) is the correlation of 6 inputs d with 3 taps g at 4 outputs (the 1-d maps, float64)."""
    at, g, bt = (np.array(m, dtype=np.float64) for m in (_winograd._AT, _winograd._G, _winograd._BT))
    rng = np.random.default_rng(0)
    for _ in range(5):
        taps, d = rng.standard_normal(3), rng.standard_normal(6)
        np.testing.assert_allclose(at @ ((g @ taps) * (bt @ d)), np.correlate(d, taps, "valid"), rtol=0, atol=1e-13)
    assert (at[:, _winograd._BIAS // 6] == 1).all() and _winograd._BIAS % 7 == 0  # the bias plane reaches all


# (N, C, O, H, W, padding): products by image chunks (many tiles) and by blocks of output channels (few tiles,
# many channels), outputs that are no multiple of 4 (cropped tiles), paddings 0, 1, 2 and "same"
WINOGRAD = [(8, 64, 64, 32, 32, 1), (32, 128, 128, 16, 16, 1), (16, 256, 128, 8, 8, 1), (8, 512, 512, 4, 4, 1),
            (3, 16, 24, 7, 9, 1), (2, 32, 16, 11, 6, 0), (2, 16, 32, 5, 5, 2), (3, 24, 16, 6, 7, "same")]


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-13)], ids=["float32", "float64"])
@pytest.mark.parametrize("case", WINOGRAD, ids=str)
def test_winograd_matches_float64_torch(case, dtype, tol):
    """Output, input and weight gradients within ``tol`` of the results' scale (float32 measured: 2-4e-6 at
    ResNet's sizes, a direct sum 3-6e-7; the points 0, +-1, +-2 gave 1e-5)."""
    N, C, O, H, W, padding = case
    rng = np.random.default_rng(N * C + H)
    x, w, b = _case(rng, N, C, O, H, W, (3, 3), dtype)
    y, gx, gw, g = _torch(x, w, b, None, padding=padding)
    pads = _pads(padding)
    got = _winograd.conv(x, w, b, pads)
    assert got.dtype == dtype
    _assert_close(got, y, tol)
    got_x, got_w = _winograd.grads(g, x, w, pads, True, True)
    _assert_close(got_x, gx, tol)
    _assert_close(got_w, gw, tol)
    assert _winograd.grads(g, x, w, pads, False, True)[0] is None and _winograd.grads(g, x, w, pads, True, False)[1] \
        is None


@needs_autograd
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.nn  # (calls ember.nn.functional: ember-nn)
def test_winograd_through_conv2d_matches_torch(dtype, monkeypatch):
    """conv2d and its backward take the Winograd path for 3x3 kernels with stride 1 and 32 channels or more."""
    monkeypatch.setattr(_winograd, "MIN_WORK", 0)
    rng = np.random.default_rng(3)
    x, w, b = _case(rng, 4, 32, 48, 9, 8, (3, 3), np.float64)
    assert conv._host_paths(np, x.astype(np.float32), w.astype(np.float32), (1, 1), (1, 1), 1)[0]
    results = []
    for lib in (torch, ember):
        dt = getattr(lib, dtype)
        leaves = [lib.tensor(a, dtype=dt, requires_grad=True) for a in (x, w, b)]
        y = lib.nn.functional.conv2d(*leaves, padding=1)
        y.backward(lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)), dtype=dt))
        results.append([t.detach().double().numpy() for t in [y] + [t.grad for t in leaves]])
    tol = {"float32": 1e-5, "float16": 4e-3, "bfloat16": 3e-2}[dtype]
    for got, want in zip(*results[::-1]):
        _assert_close(got, want, tol)


def _conv_results(lib, x, w, b):
    leaves = [lib.tensor(a, dtype=lib.float32, requires_grad=True) for a in (x, w, b)]
    y = lib.nn.functional.conv2d(*leaves, padding=1)
    y.backward(lib.ones(tuple(y.shape)))
    return [t.detach().double().numpy() for t in [y] + [t.grad for t in leaves]]


@needs_autograd
@pytest.mark.parametrize("where", ["input", "weight", "bias"])
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
@pytest.mark.nn  # (calls ember.nn.functional: ember-nn)
def test_non_finite_values_stay_where_direct_sums_leave_them(where, value, monkeypatch):
    """The transforms would spread a NaN or infinity over whole tiles: such results are computed again directly,
    so NaN and infinity land where the direct product puts them, and where torch does (but for a weight that is
    not finite: the product counts the zero padding, 0 x inf is NaN at the borders, torch's kernel leaves it out)."""
    monkeypatch.setattr(_winograd, "MIN_WORK", 0)
    rng = np.random.default_rng(5)
    x, w, b = _case(rng, 2, 32, 32, 12, 12, (3, 3), np.float64)
    {"input": x[1, 3], "weight": w[2, 5], "bias": b[4:]}[where].reshape(-1)[:1] = value
    got = _conv_results(ember, x, w, b)
    monkeypatch.setattr(_winograd, "usable", lambda *args: False)
    wants = [_conv_results(ember, x, w, b)] + ([_conv_results(torch, x, w, b)] if where != "weight" else [])
    for want_all in wants:
        for g, want in zip(got, want_all):
            np.testing.assert_array_equal(np.isnan(g), np.isnan(want))
            np.testing.assert_array_equal(np.isposinf(g), np.isposinf(want))
            np.testing.assert_array_equal(np.isneginf(g), np.isneginf(want))
            finite = np.isfinite(want)
            np.testing.assert_allclose(g[finite], want[finite], rtol=1e-4, atol=1e-4)


# ---- channels-last columns -------------------------------------------------------------------------
# (N, C, O, H, W, kernel, stride, padding, dilation)
CHANNELS_LAST = [
    (4, 16, 24, 16, 16, (3, 3), (2, 2), 1, (1, 1)),
    (3, 20, 8, 9, 7, (3, 2), (2, 1), (1, 0), (1, 2)),   # rectangular kernel, mixed strides, dilation
    (5, 32, 16, 8, 8, (1, 1), (2, 2), 0, (1, 1)),       # a ResNet downsample (batch-first in conv2d)
    (2, 16, 8, 7, 6, (1, 1), (3, 3), 1, (1, 1)),        # 1x1 with padding
    (3, 3, 16, 20, 18, (7, 7), (2, 2), 3, (1, 1)),      # a stem: few channels (input gradient by col2im)
    (2, 16, 8, 6, 5, (2, 2), (1, 1), "same", (1, 1)),   # uneven padding
    (2, 16, 12, 9, 9, (5, 5), (1, 1), 2, (1, 1)),
    (2, 18, 12, 9, 9, (3, 3), (1, 1), 2, (2, 2)),       # dilated 3x3: not Winograd
]


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-13)], ids=["float32", "float64"])
@pytest.mark.parametrize("case", CHANNELS_LAST, ids=str)
def test_channels_last_matches_torch(case, dtype, tol, monkeypatch):
    """Forward, input gradient (by the flipped kernels at stride 1, else by col2im, here for any channel count)
    and weight gradient (from window rows at stride 1 down the rows, else from whole windows)."""
    monkeypatch.setattr(_channels_last, "MIN_SCATTER", 1)
    N, C, O, H, W, kernel, stride, padding, dilation = case
    rng = np.random.default_rng(N + C + H)
    x, w, b = _case(rng, N, C, O, H, W, kernel, dtype)
    y, gx, gw, g = _torch(x, w, b, None, stride=stride, padding=padding, dilation=dilation)
    pads = _pads(padding, kernel, dilation)
    _assert_close(_channels_last.conv(x, w, b, stride, pads, dilation), y, tol)
    _assert_close(_channels_last.conv(x, w, None, stride, pads, dilation), y - b[:, None, None], tol)
    got_x, got_w = _channels_last.grads(g, x, w, stride, pads, dilation, True, True)
    _assert_close(got_x, gx, tol)
    _assert_close(got_w, gw, tol)
    _assert_close(_channels_last.grads(g, x, w, stride, pads, dilation, False, True)[1], gw, tol)


def test_channels_last_input_gradient_left_to_col2im_batch_first():
    """Strided with few channels, or stride 1 with infinite kernels: no input gradient (conv2d's batch-first
    col2im computes it)."""
    rng = np.random.default_rng(4)
    x, w, _ = _case(rng, 2, 16, 8, 9, 9, (3, 3), np.float64)
    g = rng.standard_normal((2, 8, 5, 5))
    assert _channels_last.grads(g, x, w, (2, 2), ((1, 1), (1, 1)), (1, 1), True, False) == (None, None)
    w[0, 0, 0, 0] = np.inf
    g = rng.standard_normal((2, 8, 9, 9))
    assert _channels_last.grads(g, x, w, (1, 1), ((1, 1), (1, 1)), (1, 1), True, False) == (None, None)


@pytest.mark.parametrize("shape, kernel, stride, groups, want", [
    ((32, 64, 16, 16), (3, 3), (1, 1), 1, (True, True)),
    ((32, 16, 32, 32), (3, 3), (1, 1), 1, (False, True)),  # few channels for Winograd's maps to pay
    ((16, 32, 8, 8), (3, 3), (1, 1), 1, (False, True)),   # too little work for Winograd's fixed costs
    ((64, 64, 8, 8), (3, 3), (2, 2), 1, (False, True)),
    ((8, 64, 8, 8), (3, 3), (2, 2), 1, (False, False)),   # too few rows for channels-last
    ((32, 8, 8, 8), (3, 3), (1, 1), 1, (False, False)),   # few channels, stride 1: batch-first columns
    ((8, 3, 32, 32), (7, 7), (2, 2), 1, (False, True)),
    ((64, 64, 8, 8), (1, 1), (2, 2), 1, (False, False)),  # 1x1: batch-first
    ((2, 64, 8, 8), (3, 3), (1, 1), 2, (False, False)),   # groups
    ((2, 64, 8), (3,), (1,), 1, (False, False)),          # 1-d
])
def test_host_paths_chosen(shape, kernel, stride, groups, want):
    x, w = np.zeros(shape, np.float32), np.zeros((64, shape[1] // groups) + kernel, np.float32)
    assert conv._host_paths(np, x, w, stride, (1,) * len(kernel), groups) == want
    assert conv._host_paths(np, x.astype(np.int64), w.astype(np.int64), stride, (1,) * len(kernel), groups) == \
        (False, False)


@needs_autograd
@pytest.mark.parametrize("grads", [(True, False), (False, True), (True, True)], ids=["input", "weight", "both"])
@pytest.mark.parametrize("kernel, stride", [((3, 3), 1), ((3, 3), 2), ((7, 7), 2)])
@pytest.mark.nn  # (calls ember.nn.functional: ember-nn)
def test_conv2d_through_channels_last_matches_torch(grads, kernel, stride):
    """conv2d and its backward on the channels-last path (the stem's input gradient, of 3 channels, by col2im
    batch-first), only the gradients asked for."""
    rng = np.random.default_rng(2)
    C = 3 if kernel == (7, 7) else 32
    x, w, b = _case(rng, 8, C, 16, 24, 24, kernel, np.float32)
    assert conv._host_paths(np, x, w, (stride, stride), (1, 1), 1) == (False, True)
    results = []
    for lib in (torch, ember):
        xs, ws = lib.tensor(x, requires_grad=grads[0]), lib.tensor(w, requires_grad=grads[1])
        y = lib.nn.functional.conv2d(xs, ws, lib.tensor(b), stride=stride, padding=kernel[0] // 2)
        y.backward(lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)).astype(np.float32)))
        results.append((y.detach(), xs.grad, ws.grad))
    for got, want in zip(*results[::-1]):
        assert (got is None) == (want is None)
        if want is not None:
            _assert_close(got.numpy().astype(np.float64), want.numpy().astype(np.float64), 1e-5)


# ---- chunks over the cores ------------------------------------------------------------------------
@pytest.mark.parametrize("n, k", [(23, 4), (3, 1), (5, 100)])
@pytest.mark.parametrize("workers", [1, 2])
def test_chunks_cover_the_batch_once(n, k, workers, monkeypatch):
    monkeypatch.setattr(_parallel, "WORKERS", workers)
    monkeypatch.setattr(_blas, "threads", lambda: 2)
    seen, threads, inside = [], set(), []

    def work(a, b):
        assert b > a
        seen.extend(range(a, b))
        threads.add(threading.get_ident())
        inside.append(_blas.THREADS[0]() if _blas.THREADS else None)

    before = _blas.THREADS[0]() if _blas.THREADS else None
    _channels_last.chunks(work, n, k, _channels_last.SPLIT_MIN)
    assert sorted(seen) == list(range(n)) and len(threads) <= workers
    assert set(inside) == ({1} if workers == 2 and _blas.THREADS else {before})  # (BLAS single-threaded in a split)
    if _blas.THREADS:
        assert _blas.THREADS[0]() == before


def test_chunks_raise_a_workers_error():
    def work(a, b):
        if a >= 2:
            raise MemoryError("chunk")

    before = _blas.THREADS[0]() if _blas.THREADS else None
    with pytest.raises(MemoryError, match="chunk"):
        _channels_last.chunks(work, 8, 1, _channels_last.SPLIT_MIN)
    if _blas.THREADS:
        assert _blas.THREADS[0]() == before


@pytest.mark.parametrize("chunk_bytes", [1, 1 << 30], ids=["one image per chunk", "one chunk per worker"])
@pytest.mark.parametrize("workers", [1, 2])
def test_results_do_not_depend_on_chunks(chunk_bytes, workers, monkeypatch):
    monkeypatch.setattr(_parallel, "WORKERS", workers)
    monkeypatch.setattr(_channels_last, "SPLIT_MIN", 0)
    monkeypatch.setattr(_channels_last, "MIN_SCATTER", 1)
    monkeypatch.setattr(_channels_last, "CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(9)
    for O, H in ((16, 16), (64, 4)):  # Winograd by image chunks, then by blocks of output channels
        x, w, b = _case(rng, 5, 16, O, H, H, (3, 3), np.float64)
        y, gx, gw, g = _torch(x, w, b, None, padding=1)
        _assert_close(_winograd.conv(x, w, b, ((1, 1), (1, 1))), y, 1e-13)
        for got, want in zip(_winograd.grads(g, x, w, ((1, 1), (1, 1)), True, True), (gx, gw)):
            _assert_close(got, want, 1e-13)
    x, w, b = _case(rng, 5, 16, 8, 10, 10, (3, 3), np.float64)
    y, gx, gw, g = _torch(x, w, b, None, stride=2, padding=1)
    _assert_close(_channels_last.conv(x, w, b, (2, 2), ((1, 1), (1, 1)), (1, 1)), y, 1e-13)
    for got, want in zip(_channels_last.grads(g, x, w, (2, 2), ((1, 1), (1, 1)), (1, 1), True, True), (gx, gw)):
        _assert_close(got, want, 1e-13)


# ---- BLAS helpers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.float16])
@pytest.mark.parametrize("layout", ["dense", "wide rows", "stepped"])
def test_transpose_matches_numpy(dtype, layout):
    a = np.arange(3 * 5 * 9).reshape(3, 5, 9).astype(dtype)
    a = {"dense": a[:, :, :7], "wide rows": a[:, :, 1:8], "stepped": a[:, :, ::2]}[layout]
    a = np.ascontiguousarray(a) if layout == "dense" else a
    out = np.full((3, a.shape[2], 6), -1, dtype)[:, :, :5]
    assert _blas.transpose(a, out) is out
    np.testing.assert_array_equal(out, a.transpose(0, 2, 1))


def test_single_threaded_nests_across_threads():
    if not _blas.THREADS:
        pytest.skip("no OpenBLAS thread control")
    before = _blas.threads()
    barrier, seen = threading.Barrier(2), []

    def inside():
        with _blas.single_threaded():
            barrier.wait()
            seen.append(_blas.threads())
            barrier.wait()

    other = threading.Thread(target=inside)
    other.start()
    with _blas.single_threaded():
        barrier.wait()
        with _blas.single_threaded():
            seen.append(_blas.threads())
        barrier.wait()
    other.join()
    assert seen == [1, 1] and _blas.threads() == before
