"""GradScaler: API, per-optimizer state machine, inf/NaN step skipping, and a 30-step scripted sequence
compared with PyTorch 2.13's GradScaler("cpu")."""
import pickle
import warnings

import numpy as np
import pytest

import ember
from ember.amp._unscale import unscale_numpy


def _model(dtype=ember.float32):
    p = ember.nn.Parameter(ember.ones(4, dtype=dtype))
    return p, ember.optim.SGD([p], lr=0.1)


def test_disabled_scaler_and_cuda_without_gpu():
    s = ember.amp.GradScaler("cpu", enabled=False)
    x = ember.ones(2)
    assert s.scale(x) is x and s.get_scale() == 1.0 and s.state_dict() == {} and not s.is_enabled()
    s.load_state_dict({"scale": 3.0})  # a no-op
    p, opt = _model()
    p.grad = ember.ones(4)
    assert s.step(opt) is None and np.allclose(p.detach().numpy(), 0.9)
    if not ember.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available.  Disabling."):
            assert not ember.amp.GradScaler("cuda").is_enabled()
        with pytest.warns(FutureWarning, match="ember.cuda.amp.GradScaler"), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            ember.cuda.amp.GradScaler()
    with pytest.warns(FutureWarning, match="ember.cpu.amp.GradScaler"):
        assert ember.cpu.amp.GradScaler(init_scale=8.0).get_scale() == 8.0


def test_getters_setters_and_state_dict():
    s = ember.amp.GradScaler("cpu", init_scale=4.0, growth_factor=3.0, backoff_factor=0.25, growth_interval=7)
    assert (s.get_scale(), s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval()) == (4.0, 3.0,
                                                                                                         0.25, 7)
    assert s._scale is None  # made lazily
    s.set_growth_factor(5.0)
    s.set_backoff_factor(0.5)
    s.set_growth_interval(2)
    assert s.state_dict() == {"scale": 4.0, "growth_factor": 5.0, "backoff_factor": 0.5, "growth_interval": 2,
                              "_growth_tracker": 0}
    t = ember.amp.GradScaler("cpu")
    t.load_state_dict(s.state_dict())
    assert t.state_dict() == s.state_dict()
    with pytest.raises(RuntimeError, match="The source state dict is empty"):
        t.load_state_dict({})
    with pytest.raises(AssertionError, match="The growth factor must be > 1.0."):
        ember.amp.GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(AssertionError, match="The backoff factor must be < 1.0."):
        ember.amp.GradScaler("cpu", backoff_factor=1.0)


def test_scale_is_lazy_and_nested():
    s = ember.amp.GradScaler("cpu", init_scale=8.0)
    out = s.scale([ember.ones(2), (ember.full((1,), 2.0), ember.ones(1, dtype=ember.bfloat16))])
    assert isinstance(out, list) and isinstance(out[1], tuple)
    assert out[0].tolist() == [8.0, 8.0] and out[1][0].tolist() == [16.0] and out[1][1].dtype is ember.bfloat16
    assert s._scale.dtype is ember.float32 and s._scale.device.type == "cpu" and s._scale.dim() == 0
    assert s._growth_tracker.dtype is ember.int32
    with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
        s.scale(3.0)


def test_state_machine():
    s = ember.amp.GradScaler("cpu")
    p, opt = _model()
    for call in (lambda: s.step(opt), lambda: s.unscale_(opt), lambda: s.update()):
        with pytest.raises(AssertionError, match="but _scale is None.  This may indicate"):
            call()
    loss = s.scale((p * 2).sum())
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        s.step(opt, closure=lambda: loss)
    loss.backward()
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called on this optimizer"):
        s.unscale_(opt)
    s.step(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) is being called after step\\(\\)."):
        s.unscale_(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called since the last update\\(\\)."):
        s.step(opt)
    s.update()
    np.testing.assert_allclose(p.detach().numpy(), 0.8)  # gradient 2, unscaled, lr 0.1
    _, empty = _model()
    with pytest.raises(AssertionError, match="No inf checks were recorded for this optimizer."):
        s.step(empty)
    s.update(8.0)
    assert s.get_scale() == 8.0
    s.update(ember.tensor([2.0]))
    assert s.get_scale() == 2.0
    with pytest.raises(AssertionError, match="new_scale should be a float"):
        s.update(ember.tensor([1.0, 2.0]))
    with pytest.raises(AssertionError, match="No inf checks were recorded prior to update."):
        s.update()


def test_inf_and_nan_gradients_skip_the_step_and_back_off():
    s = ember.amp.GradScaler("cpu", init_scale=1024.0)
    p, opt = _model()
    for bad in (float("inf"), float("nan")):
        opt.zero_grad()
        s.scale((p * 3).sum()).backward()
        p.grad[2] = bad
        assert s.step(opt) is None
        s.update()
        np.testing.assert_array_equal(p.detach().numpy(), 1.0)
    assert s.get_scale() == 256.0


def test_float16_gradients_are_refused():
    s = ember.amp.GradScaler("cpu")
    p, opt = _model(ember.float16)
    s.scale(ember.ones(1))
    p.grad = ember.ones(4, dtype=ember.float16)
    with pytest.raises(ValueError, match="^Attempting to unscale FP16 gradients.$"):
        s.unscale_(opt)


def test_unscale_pass_finds_every_non_finite_value():
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        for bad in (np.inf, -np.inf, np.nan):
            for where in (0, 17, 999):
                arrays = [rng.standard_normal(n).astype(dtype) for n in (5, 1000, 3)]
                arrays.append(rng.standard_normal((6, 4)).astype(dtype)[:, ::2])  # not contiguous
                arrays.append(rng.standard_normal(40).astype(dtype)[::-3])  # 1-d, strided backwards
                want = [a * dtype(0.25) for a in arrays]
                arrays[1][where] = bad
                assert unscale_numpy(arrays, 0.25)
                np.testing.assert_array_equal(arrays[0], want[0])
                np.testing.assert_array_equal(arrays[3], want[3])
                np.testing.assert_array_equal(arrays[4], want[4])
                for i, j in ((3, (5, 1)), (4, where % 13)):  # a non-finite value in each strided array alone
                    clean = [a.copy() for a in want]
                    clean[i][j] = bad
                    assert unscale_numpy(clean, 1.0)
        clean = [rng.standard_normal(100).astype(dtype) * 1e30]
        assert not unscale_numpy(clean, 1e-30)


def test_pickle_between_iterations():
    s = ember.amp.GradScaler("cpu", init_scale=16.0)
    s.scale(ember.ones(1))
    t = pickle.loads(pickle.dumps(s))
    assert t.get_scale() == 16.0 and t._scale is None


def _scripted(lib, scaler, opt, p, inf_steps, explicit_unscale):
    seq = []
    for i in range(30):
        opt.zero_grad()
        scaler.scale((p * (i + 1)).sum()).backward()
        if i in inf_steps:
            p.grad[i % 3] = float("inf") if i % 2 else float("nan")
        if i in explicit_unscale:
            scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        seq.append((scaler.get_scale(), scaler._get_growth_tracker()))
    return seq, p.detach().tolist()


def test_scale_sequence_matches_torch():
    torch = pytest.importorskip("torch")
    inf_steps, explicit = {2, 3, 9, 17, 18, 19, 26}, {4, 9, 20}
    kw = dict(init_scale=2.0 ** 10, growth_factor=3.0, backoff_factor=0.25, growth_interval=3)
    results = []
    for lib in (torch, ember):
        p = lib.nn.Parameter(lib.ones(3))
        opt = lib.optim.SGD([p], lr=1e-3)
        results.append(_scripted(lib, lib.amp.GradScaler("cpu", **kw), opt, p, inf_steps, explicit))
    (want_seq, want_p), (got_seq, got_p) = results
    assert got_seq == want_seq
    assert len({s for s, _ in want_seq}) > 5  # the script both grows and backs off
    np.testing.assert_allclose(got_p, want_p, rtol=1e-6)


def test_growth_stops_at_float32_overflow():
    s = ember.amp.GradScaler("cpu", init_scale=2.0 ** 127, growth_interval=1)
    p, opt = _model()
    s.scale(p.sum()).backward()
    s.step(opt)
    s.update()
    assert s.get_scale() == 2.0 ** 127 and s._get_growth_tracker() == 0


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16, ember.float32, ember.float64])
def test_unscale_pass_half_and_full_precision_arrays(dtype):
    # half precision takes the boolean pass, float32/64 the dot-product one; scaled values are rounded
    # in the array's own dtype; a 2-d, a transposed, an empty and a 0-d array ride along
    rng = np.random.default_rng(1)
    np_dtype = ember.zeros(1, dtype=dtype).numpy().dtype
    shapes = [(7,), (3, 5), (0,), ()]
    for bad in (None, np.inf, -np.inf, np.nan):
        arrays = [rng.standard_normal(s).astype(np_dtype) for s in shapes]
        arrays.append(rng.standard_normal((4, 6)).astype(np_dtype).T)
        if bad is not None:
            arrays[1][2, 3] = bad
        want = [a * np_dtype.type(0.125) for a in arrays]
        assert unscale_numpy(arrays, 0.125) == (bad is not None)
        for a, w in zip(arrays, want):
            np.testing.assert_array_equal(a.astype(np.float64), w.astype(np.float64))  # NaN == NaN in float64
    assert not unscale_numpy([np.full(3, ember.finfo(dtype).max, np_dtype)], 1.0)


def test_mixed_dtypes_found_inf_and_check_match_torch():
    torch = pytest.importorskip("torch")
    results = []
    for lib in (torch, ember):
        p = lib.nn.Parameter(lib.ones(3, dtype=lib.bfloat16))
        q = lib.nn.Parameter(lib.ones(2, dtype=lib.float64))
        r = lib.nn.Parameter(lib.ones(2))  # no gradient: left out
        opt = lib.optim.SGD([p, q, r], lr=0.1)
        s = lib.amp.GradScaler("cpu", init_scale=4.0)
        s.scale(lib.ones(1))
        p.grad = lib.tensor([4.0, 8.0, float("inf")], dtype=lib.bfloat16)
        q.grad = lib.tensor([4.0, 2.0], dtype=lib.float64)
        counters = [t._vc for t in (p.grad, q.grad)] if lib is ember else []
        before = [c[0] for c in counters]
        s.unscale_(opt)
        # ember counts the in-place scaling (PyTorch's fused kernel leaves the counters)
        assert all(c[0] > b for c, b in zip(counters, before))
        found = s._found_inf_per_device(opt)
        (dev, f), = found.items()
        checked = s._check_inf_per_device(opt)
        assert s.step(opt) is None
        s.update()
        results.append((str(dev), f.dtype is lib.float32, f.dim(), f.item(), checked[dev].item(),
                        p.grad.float().tolist(), q.grad.tolist(), s.get_scale(), s._get_growth_tracker(),
                        p.float().tolist(), q.tolist()))
    assert results[0] == results[1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unscale_pass_checks_the_values_before_scaling(dtype):
    # like PyTorch's kernel: finite values that overflow once scaled are not flagged; zeros keep their sign,
    # subnormals and the largest finite values are finite
    info = np.finfo(dtype)
    a = np.array([info.max, -info.max, -0.0, 0.0, info.smallest_subnormal, 1.0], dtype)
    assert not unscale_numpy([a], 4.0)
    np.testing.assert_array_equal(a[:2], [np.inf, -np.inf])
    assert np.signbit(a[2]) and not np.signbit(a[3]) and a[4] > 0
