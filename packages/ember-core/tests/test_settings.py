"""The process-wide settings of the torch namespace (threads, determinism, default tensor type, matmul
precision), against PyTorch where it has the same behaviour."""
import pytest
import torch

import ember
from ember import _settings


@pytest.fixture
def restore():
    state = dict(_settings._state)
    threads = ember.get_num_threads()
    yield
    _settings._state.update(state)
    if _settings._blas_pools() is not None:
        _settings._blas_pools().limit(limits=threads)
    ember.set_default_dtype(ember.float32)
    ember.set_default_device(None)


def _same_error(f, *args, **kwargs):
    """Call ``f`` in torch and ember: the same exception type, or both succeed."""
    try:
        getattr(torch, f)(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the oracle's exception type is what we compare
        with pytest.raises(type(exc)):
            getattr(ember, f)(*args, **kwargs)
        return False
    getattr(ember, f)(*args, **kwargs)
    return True


def test_num_threads_sets_the_blas_pool(restore):
    ember.set_num_threads(1)
    assert ember.get_num_threads() == 1
    if _settings._blas_pools() is not None:
        assert all(p["num_threads"] == 1 for p in _settings._blas_pools().info())
    for bad in (0, -1, 1.5):
        _same_error("set_num_threads", bad)


def test_num_threads_without_threadpoolctl_records_and_warns(restore, monkeypatch):
    monkeypatch.setattr(_settings, "_blas_pools", lambda fresh=False: None)
    with pytest.warns(UserWarning, match="threadpoolctl"):
        ember.set_num_threads(3)
    assert ember.get_num_threads() == 3


def test_interop_threads_settable_once(restore):
    _settings._state["interop"] = None
    assert ember.get_num_interop_threads() >= 1
    with pytest.raises(RuntimeError):
        ember.set_num_interop_threads(0)
    ember.set_num_interop_threads(3)
    assert ember.get_num_interop_threads() == 3
    with pytest.raises(RuntimeError, match="cannot set number of interop threads"):
        ember.set_num_interop_threads(4)
    assert ember.init_num_threads() is None


@pytest.mark.parametrize("mode", ["default", "warn", "error", 0, 1, 2, 3, "x", 1.0])
def test_deterministic_debug_mode_matches_torch(restore, mode):
    before = torch.get_deterministic_debug_mode()
    try:
        if _same_error("set_deterministic_debug_mode", mode):
            assert ember.get_deterministic_debug_mode() == torch.get_deterministic_debug_mode()
            assert ember.are_deterministic_algorithms_enabled() == torch.are_deterministic_algorithms_enabled()
            assert (ember.is_deterministic_algorithms_warn_only_enabled()
                    == torch.is_deterministic_algorithms_warn_only_enabled())
    finally:
        torch.set_deterministic_debug_mode(before)


@pytest.mark.parametrize("args,kwargs", [((True,), {}), ((True,), {"warn_only": True}), ((False,), {}), ((1,), {})])
def test_use_deterministic_algorithms_matches_torch(restore, args, kwargs):
    before = torch.get_deterministic_debug_mode()
    try:
        if _same_error("use_deterministic_algorithms", *args, **kwargs):
            assert ember.get_deterministic_debug_mode() == torch.get_deterministic_debug_mode()
    finally:
        torch.set_deterministic_debug_mode(before)


@pytest.mark.parametrize("name", ["torch.DoubleTensor", "torch.HalfTensor", "torch.BFloat16Tensor",
                                  "torch.FloatTensor", "torch.LongTensor", 3])
def test_set_default_tensor_type_matches_torch(restore, name):
    try:
        with pytest.warns(UserWarning, match="deprecated"):
            if _same_error("set_default_tensor_type", name):
                assert str(ember.get_default_dtype()) == "ember." + str(torch.get_default_dtype()).split(".")[1]
                assert ember.tensor([1.5]).dtype == ember.get_default_dtype()
    finally:
        torch.set_default_dtype(torch.float32)


def test_cuda_tensor_type_sets_the_default_device(restore):
    with pytest.warns(UserWarning):
        ember.set_default_tensor_type("torch.cuda.DoubleTensor")
    assert ember.get_default_device().type == "cuda" and ember.get_default_dtype() == ember.float64


def test_float32_matmul_precision(restore):
    before = ember.get_float32_matmul_precision()
    try:
        ember.set_float32_matmul_precision("high")
        assert ember.get_float32_matmul_precision() == "high"
        with pytest.warns(UserWarning):
            ember.set_float32_matmul_precision("bad")
        assert ember.get_float32_matmul_precision() == "high"
    finally:
        ember.set_float32_matmul_precision(before)


# ---- function forms of Tensor methods and legacy Tensor methods ----------------------------------------
def _pair(values, dtype="float32"):
    return torch.tensor(values, dtype=getattr(torch, dtype)), ember.tensor(values, dtype=getattr(ember, dtype))


def test_function_forms_match_torch():
    t, e = _pair([[1.0, 2.0], [3.0, 4.0]])
    for name in ("get_device", "is_signed", "is_inference", "is_distributed"):
        assert getattr(ember, name)(e) == getattr(torch, name)(t), name
    assert ember.is_same_size(e, e[0:1]) == torch.is_same_size(t, t[0:1])
    assert ember.is_same_size(e, e.clone()) and ember.is_signed(ember.tensor([1], dtype=ember.uint8)) is False
    assert ember.detach(e)._data is e._data and ember.detach_(e) is e
    for f, args in (("fill_", (2.5,)), ("zero_", ())):
        tt, ee = t.clone(), e.clone()
        assert getattr(ember, f)(ee, *args) is ee
        getattr(torch, f)(tt, *args)
        assert ee.tolist() == tt.tolist()
    ee = ember.zeros(1)
    assert ember.resize_as_(ee, e) is ee and ee.shape == (2, 2)
    assert ember.as_strided_(ee, (3,), (1,)) is ee and ee.shape == (3,)


def test_is_nonzero_and_is_same_size_methods():
    for values in ([1.5], [0.0], [[True]]):
        t, e = _pair(values, "float32")
        assert e.is_nonzero() == t.is_nonzero()
    for values in ([], [1.0, 2.0]):
        t, e = _pair(values)
        with pytest.raises(RuntimeError):
            t.is_nonzero()
        with pytest.raises(RuntimeError):
            e.is_nonzero()
    assert ember.ones(2, 3).is_same_size(ember.zeros(2, 3)) and not ember.ones(2).is_same_size(ember.ones(3))


def test_legacy_new():
    t, e = _pair([1.0, 2.0], "float64")
    for args in ((2, 3), (ember.Size([4]),), ((5, 6),), ([1, 2],), ()):
        targs = tuple(torch.Size(a) if isinstance(a, ember.Size) else a for a in args)
        r, x = e.new(*args), t.new(*targs)
        assert tuple(r.shape) == tuple(x.shape) and r.dtype == ember.float64
        if args and isinstance(args[0], (tuple, list)) and not isinstance(args[0], ember.Size):
            assert r.tolist() == x.tolist()


def test_map_and_apply_match_torch():
    t, e = _pair([[1.0, 2.0], [3.0, 4.0]])
    to, eo = _pair([10.0, 20.0])
    assert e.clone().apply_(lambda v: v * v + 1).tolist() == t.clone().apply_(lambda v: v * v + 1).tolist()
    assert e.clone().map_(eo, lambda a, b: a - b).tolist() == t.clone().map_(to, lambda a, b: a - b).tolist()
    ti, ei = _pair([1, 2, 3], "int64")
    assert ei.apply_(lambda v: v * 3).tolist() == ti.apply_(lambda v: v * 3).tolist()
    with pytest.raises(RuntimeError):
        e.clone().map_(ember.ones(3), lambda a, b: a)


def test_shared_and_pinned_memory_are_honest():
    e = ember.ones(3)
    assert not e.is_shared() and e.share_memory_() is e and e.is_shared() is True and e.is_pinned() is False
    try:
        p = e.pin_memory()
    except RuntimeError:  # no CUDA driver here: PyTorch refuses the same way without a GPU
        return
    assert p.is_pinned() and p.tolist() == e.tolist()


def test_adjoint_properties_on_complex():
    t = torch.tensor([[1 + 2j, 3 - 1j], [0.5j, 2]])
    e = ember.tensor(t.numpy())
    assert e.H.numpy().tolist() == t.H.resolve_conj().numpy().tolist()
    assert e.mH.numpy().tolist() == t.mH.resolve_conj().numpy().tolist()
    with pytest.raises(RuntimeError):
        _ = ember.ones(2, 2, 2).H
