"""SGD's update through NumPy's BLAS axpy: the cases it takes and the ones it leaves to the ufuncs, against
PyTorch (and against NumPy where PyTorch refuses overlapping operands), and the same steps without BLAS."""
import numpy as np
import pytest
import torch

import ember
from ember import _blas
from ember.optim import sgd


@pytest.fixture
def axpy_calls(monkeypatch):
    """Counts the BLAS axpy calls per dtype name (the real functions still do the work)."""
    calls = {}

    def counting(dtype, fn):
        def call(*args):
            calls[dtype.name] = calls.get(dtype.name, 0) + 1
            return fn(*args)
        return call

    monkeypatch.setattr(sgd, "_AXPY", {dt: (counting(dt, fn), real) for dt, (fn, real) in sgd._AXPY.items()})
    return calls


def _layouts(lib, dtype, rng):
    """(param, grad) pairs: dense 1-d/2-d/0-d/empty, a transposed param, a strided grad, a grad that is a
    disjoint view, and a grad sharing the param's memory."""
    t = getattr(lib, dtype)
    data = [rng.standard_normal(s) for s in ((7,), (3, 4), (), (0,), (4, 3), (5,), (6,), (4,))]
    ps = [lib.nn.Parameter(lib.tensor(d, dtype=t)) for d in data[:4]]
    ps.append(lib.nn.Parameter(lib.tensor(data[4], dtype=t).t()))
    ps += [lib.nn.Parameter(lib.tensor(d, dtype=t)) for d in data[5:]]
    grads = [lib.tensor(rng.standard_normal(p.shape), dtype=t) for p in ps[:5]]
    grads.append(lib.tensor(rng.standard_normal(10), dtype=t)[::2])  # strided
    grads.append(lib.tensor(rng.standard_normal(12), dtype=t)[3:9])  # a view, dense
    grads.append(ps[7].detach())  # the param's own memory
    return ps, grads


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kwargs", [dict(lr=0.1), dict(lr=1.0), dict(lr=0.0), dict(lr=0.05, momentum=0.9),
                                    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1, maximize=True)])
def test_axpy_update_matches_torch(dtype, kwargs, axpy_calls):
    results = []
    for lib in (torch, ember):
        ps, grads = _layouts(lib, dtype, np.random.default_rng(0))
        opt = lib.optim.SGD(ps, **kwargs)
        for _ in range(3):
            for p, g in zip(ps, grads):
                p.grad = g if p is not ps[7] else p.detach()
            opt.step()
        results.append([p.detach().double().numpy().copy() for p in ps])
    rtol = 1e-6 if dtype == "float32" else 1e-13
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    if kwargs["lr"] and sgd._AXPY:  # dense pairs took the BLAS pass, the rest the ufuncs
        assert axpy_calls == {dtype: 3 * 6} if len(kwargs) == 1 else axpy_calls[dtype] >= 3 * 6


def test_overlapping_param_and_grad_take_the_ufuncs(axpy_calls):
    # PyTorch refuses partially overlapping operands; the update must equal NumPy's buffered one
    base = np.arange(12, dtype=np.float32)
    p = ember.nn.Parameter(ember.tensor(base.copy()))
    buf = p.detach()
    q = ember.nn.Parameter(buf[0:8])
    q.grad = buf[2:10]
    want = base.copy()
    want[0:8] -= np.float32(0.5) * base[2:10]
    ember.optim.SGD([q], lr=0.5).step()
    np.testing.assert_array_equal(p.detach().numpy(), want)
    assert not axpy_calls


def test_read_only_and_unaligned_arrays_take_the_ufuncs(axpy_calls):
    p = ember.nn.Parameter(ember.ones(4))
    p.grad = ember.ones(4)
    p._data.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ember.optim.SGD([p], lr=0.5).step()
    raw = np.zeros(4 * 4 + 1, np.uint8)
    q = ember.nn.Parameter(ember.ones(4))
    q.grad = ember.Tensor._wrap(raw[1:].view(np.float32))  # misaligned
    q.grad._data[:] = 2.0
    ember.optim.SGD([q], lr=0.5).step()
    np.testing.assert_array_equal(q.detach().numpy(), 0.0)
    assert not axpy_calls


def test_without_blas_the_ufuncs_give_the_same_steps(monkeypatch):
    results = []
    for table in (sgd._AXPY, {}):
        monkeypatch.setattr(sgd, "_AXPY", table)
        ps, grads = _layouts(ember, "float32", np.random.default_rng(1))
        opt = ember.optim.SGD(ps, lr=0.01, momentum=0.5)
        for _ in range(2):
            for p, g in zip(ps, grads):
                p.grad = g if p is not ps[7] else p.detach()
            opt.step()
        results.append([p.detach().numpy().copy() for p in ps])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)  # one rounding (axpy) or two (ufuncs)


def test_sgd_uses_the_shared_blas_table():
    assert sgd._AXPY is _blas.AXPY  # the lookup itself is tested in ember-core (test_blas.py)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("dampening", [0.0, 0.3])
def test_momentum_buffer_update_is_blas_and_within_an_ulp_per_step(dtype, dampening, axpy_calls):
    # b = momentum * b + (1 - dampening) * d: NumPy's product, then an axpy (the roundings of PyTorch's mul_ and
    # add_ with alpha). Within one ulp, not bit for bit: whether PyTorch's add_ (and the BLAS axpy) fuse the
    # multiply-add depends on the CPU and on the element's place (vectorised body or scalar tail); seen on an
    # AVX-512 Intel Xeon: the 33rd element of a float64 row drifted by one ulp a step.
    rng = np.random.default_rng(3)
    data = [rng.standard_normal(s) for s in ((64, 33), (33,))]
    grads = [[rng.standard_normal(d.shape) for d in data] for _ in range(4)]
    results = []
    for lib in (torch, ember):
        ps = [lib.nn.Parameter(lib.tensor(d, dtype=getattr(lib, dtype))) for d in data]
        opt = lib.optim.SGD(ps, lr=0.05, momentum=0.9, dampening=dampening)
        for gs in grads:
            for p, g in zip(ps, gs):
                p.grad = lib.tensor(g, dtype=getattr(lib, dtype))
            opt.step()
        results.append([p.detach().numpy().copy() for p in ps] + [opt.state[p]["momentum_buffer"].numpy() for p in ps])
    for got, want in zip(results[1], results[0]):
        np.testing.assert_array_max_ulp(got, want, maxulp=len(grads))
    if sgd._AXPY:  # per step and parameter: the update, and from the second step the buffer
        assert axpy_calls == {dtype: 4 * 2 + 3 * 2}


def test_channels_last_parameters_take_blas_and_match_torch(axpy_calls):
    """A channels-last weight and gradient are dense in one same layout: BLAS updates them as flat memory, and the
    momentum buffer keeps their layout, as PyTorch's does."""
    rng = np.random.default_rng(4)
    w, grads = rng.standard_normal((8, 3, 3, 3)), [rng.standard_normal((8, 3, 3, 3)) for _ in range(3)]
    results = []
    for lib in (torch, ember):
        p = lib.nn.Parameter(lib.tensor(w, dtype=lib.float32).to(memory_format=lib.channels_last))
        opt = lib.optim.SGD([p], lr=0.05, momentum=0.9, weight_decay=0.01)
        for g in grads:
            p.grad = lib.tensor(g, dtype=lib.float32).to(memory_format=lib.channels_last)
            opt.step()
        buf = opt.state[p]["momentum_buffer"]
        assert buf.is_contiguous(memory_format=lib.channels_last) and p.is_contiguous(memory_format=lib.channels_last)
        results.append((p.detach().numpy().copy(), buf.numpy().copy()))
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert axpy_calls == {"float32": 2 * len(grads) - 1}  # (the first step copies the gradient into the buffer)
