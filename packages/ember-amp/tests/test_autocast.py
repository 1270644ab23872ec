"""autocast: the context manager and decorator, its thread-local state, the eligibility rules, the
weight-cast cache, custom_fwd/custom_bwd and the CUDA table (run on NumPy arrays, see ``fake_cuda``)."""
import threading
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import _dispatch
from ember.amp import _layer, _state

bf16, f16, f32, f64 = ember.bfloat16, ember.float16, ember.float32, ember.float64


def _x(*shape, dtype=f32):
    return ember.randn(*shape).to(dtype)


# ---- the context manager, the decorator and the state functions -----------------------------------
def test_defaults_and_torch_namespace_functions():
    assert ember.get_autocast_dtype("cpu") is bf16 and ember.get_autocast_dtype("cuda") is f16
    assert ember.get_autocast_cpu_dtype() is bf16 and ember.get_autocast_gpu_dtype() is f16
    assert not ember.is_autocast_enabled() and not ember.is_autocast_cpu_enabled()
    assert ember.is_autocast_cache_enabled()
    assert ember.amp.is_autocast_available("cpu") and ember.amp.is_autocast_available("cuda")
    assert not ember.amp.is_autocast_available("meta")
    with ember.autocast("cpu"):
        assert ember.is_autocast_enabled("cpu") and ember.is_autocast_cpu_enabled()
        assert not ember.is_autocast_enabled()  # no argument: CUDA
        assert ember.autocast_increment_nesting() == 2 and ember.autocast_decrement_nesting() == 1
    ember.set_autocast_cpu_enabled(True)
    try:
        assert ember.mm(_x(2, 2), _x(2, 2)).dtype is bf16
    finally:
        ember.set_autocast_cpu_enabled(False)
    assert ember.mm(_x(2, 2), _x(2, 2)).dtype is f32
    assert not ember.is_autocast_xla_enabled() and ember.get_autocast_ipu_dtype() is f16
    with pytest.raises(RuntimeError, match="device type at start of device string"):
        ember.get_autocast_dtype("xyz")


def test_context_manager_decorator_and_cpu_module():
    x, w = _x(3, 4), _x(4, 2)

    @ember.autocast("cpu")
    def f(a, b):
        return a @ b

    assert f(x, w).dtype is bf16 and (x @ w).dtype is f32
    with pytest.warns(FutureWarning, match="ember.cpu.amp.autocast"):
        region = ember.cpu.amp.autocast()
    with region:
        assert ember.mm(x, w).dtype is bf16
    with ember.amp.autocast("cpu", dtype=f16):
        assert ember.mm(x, w).dtype is f16
    with pytest.raises(TypeError, match="requires a callable"):
        ember.autocast("cpu")(3)


def test_nesting_and_enabled_false():
    x = _x(2, 2)
    with ember.autocast("cpu"):
        assert ember.mm(x, x).dtype is bf16
        with ember.autocast("cpu", enabled=False):
            assert ember.mm(x, x).dtype is f32 and not ember.is_autocast_enabled("cpu")
            with ember.autocast("cpu", dtype=f16):
                assert ember.mm(x, x).dtype is f16
            assert ember.get_autocast_dtype("cpu") is bf16
        assert ember.mm(x, x).dtype is bf16
    assert ember.mm(x, x).dtype is f32


def test_state_is_thread_local():
    x = _x(2, 2)
    seen, inside, release = {}, threading.Event(), threading.Event()

    def other():
        seen["other"] = ember.mm(x, x).dtype, ember.is_autocast_enabled("cpu")
        with ember.autocast("cpu"):
            inside.set()
            release.wait(5)
            seen["other_inside"] = ember.mm(x, x).dtype

    with ember.autocast("cpu"):
        t = threading.Thread(target=other)
        t.start()
        inside.wait(5)
        assert ember.mm(x, x).dtype is bf16
    # the other thread is still in its region: this one is not
    assert ember.mm(x, x).dtype is f32 and _dispatch.FORCED[0] == 1
    release.set()
    t.join()
    assert seen == {"other": (f32, False), "other_inside": bf16}


def test_cpu_float32_warns_and_disables_and_bad_device_raises():
    with pytest.warns(UserWarning, match="In CPU autocast, but the target dtype is not supported"):
        region = ember.autocast("cpu", dtype=f32)
    with region:
        assert not ember.is_autocast_enabled("cpu") and ember.mm(_x(2, 2), _x(2, 2)).dtype is f32
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'meta'"):
        ember.autocast("meta")
    with pytest.raises(RuntimeError, match="device type at start of device string"):
        ember.autocast("tpu")
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        ember.autocast(ember.device("cpu"))


@pytest.mark.skipif(ember.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_cuda_without_gpu_warns_and_disables():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        region = ember.autocast("cuda")
    with region:
        assert not ember.is_autocast_enabled("cuda") and "autocast" not in _dispatch.layers()


def test_layer_and_slow_path_only_inside_enabled_regions():
    assert "autocast" not in _dispatch.layers()
    with ember.autocast("cpu"):
        assert "autocast" in _dispatch.layers() and _dispatch.FORCED[0] == 1
        with ember.autocast("cpu", enabled=False):
            assert "autocast" not in _dispatch.layers() and _dispatch.FORCED[0] == 0
        assert _dispatch.FORCED[0] == 1
    with pytest.raises(ZeroDivisionError), ember.autocast("cpu"):
        raise ZeroDivisionError
    assert "autocast" not in _dispatch.layers() and _dispatch.FORCED[0] == 0


# ---- eligibility -----------------------------------------------------------------------------------
def test_float64_and_integer_inputs_are_untouched():
    with ember.autocast("cpu"):
        assert ember.mm(_x(2, 3, dtype=f64), _x(3, 2, dtype=f64)).dtype is f64
        assert ember.mm(ember.ones(2, 2, dtype=ember.int64), ember.ones(2, 2, dtype=ember.int64)).dtype is ember.int64
        assert ember.prod(ember.ones(3, dtype=ember.int32)).dtype is ember.int64
        # mixed: float64 stays, float32 is cast; the op then promotes as usual
        assert ember.cat([_x(2, dtype=f64), _x(2, dtype=bf16)]).dtype is f64


def test_inplace_out_and_explicit_dtype_are_not_autocast():
    a, b, c = _x(2, 2), _x(2, 2), _x(2, 2)
    with ember.autocast("cpu"):
        assert a.addmm(b, c).dtype is bf16
        assert a.clone().addmm_(b, c).dtype is f32
        out = ember.empty(2, 2)
        ember.mm(b, c, out=out)
        assert out.dtype is f32
        assert ember.prod(_x(3, dtype=bf16)).dtype is f32
        assert ember.prod(_x(3, dtype=bf16), dtype=bf16).dtype is bf16


def test_unlisted_ops_run_in_their_input_types():
    with ember.autocast("cpu"):
        x = _x(3, 4, dtype=bf16)
        for y in (ember.softmax(x, 1), F.layer_norm(x, (4,)), ember.exp(x), ember.sum(x), x + 1, ember.relu(x)):
            assert y.dtype is bf16
        assert (x + _x(3, 4)).dtype is f32  # ordinary promotion, no autocast
        assert ember.softmax(_x(3, 4), 1).dtype is f32


def test_gradients_flow_back_in_float32():
    x = _x(4, 3)
    w = ember.randn(5, 3, requires_grad=True)
    b = ember.randn(5, requires_grad=True)
    with ember.autocast("cpu"):
        y = F.linear(x, w, b)
        loss = F.mse_loss(y, ember.zeros(4, 5))
    assert y.dtype is bf16 and loss.dtype is f32
    loss.backward()
    assert w.grad.dtype is f32 and b.grad.dtype is f32
    xb, wb = x.to(bf16).double(), w.detach().to(bf16).double()
    yb = (xb @ wb.t() + b.detach().to(bf16).double()).to(bf16).double()
    want = (2 * yb / yb.numel()).t() @ xb  # dL/dw computed from the bfloat16-rounded forward
    np.testing.assert_allclose(w.grad.numpy(), want.numpy(), rtol=3e-2, atol=3e-2)


def test_modules_and_methods_go_through_autocast():
    lin = ember.nn.Linear(4, 3)
    x = _x(2, 4)
    with ember.autocast("cpu"):
        assert lin(x).dtype is bf16
        assert x.matmul(lin.weight.t()).dtype is bf16 and (x @ lin.weight.t()).dtype is bf16
        assert ember.nn.MSELoss()(_x(2, 3, dtype=bf16), _x(2, 3, dtype=bf16)).dtype is f32


def test_cpu_binary_cross_entropy_runs_in_float32():
    with ember.autocast("cpu"):
        p = _x(4, dtype=bf16).sigmoid()
        assert F.binary_cross_entropy(p, ember.ones(4, dtype=bf16)).dtype is f32


# ---- the CUDA table, on NumPy arrays ------------------------------------------------------------------
def test_cuda_policies(fake_cuda):
    x = _x(3, 3)
    h = x.to(f16)
    with ember.autocast("cuda"):
        assert ember.mm(x, x).dtype is f16 and ember.mv(x, x[0]).dtype is f16
        assert ember.exp(h).dtype is f32 and ember.softmax(h, 1).dtype is f32 and ember.sum(h).dtype is f32
        assert (2.0 / h).dtype is f32 and (h / 2.0).dtype is f16  # only __rtruediv__ is listed
        assert (h ** 2).dtype is f32
        assert ember.addcmul(h, h, x).dtype is f32 and ember.addcmul(h, h, h).dtype is f16
        assert F.layer_norm(h, (3,)).dtype is f32
        assert F.binary_cross_entropy_with_logits(h, ember.ones(3, 3, dtype=f16)).dtype is f32
        with pytest.raises(RuntimeError) as err:
            F.binary_cross_entropy(h.sigmoid(), ember.ones(3, 3, dtype=f16))
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            ember.nn.BCELoss()(h.sigmoid(), ember.ones(3, 3, dtype=f16))
    assert str(err.value) == _layer.BCE_MESSAGE
    assert err.value.args[0].startswith("torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe")
    assert F.binary_cross_entropy(h.float().sigmoid(), ember.ones(3, 3)).dtype is f32  # fine outside


def test_cuda_and_cpu_regions_are_separate(fake_cuda):
    with ember.autocast("cuda"):
        assert ember.is_autocast_enabled("cuda") and not ember.is_autocast_enabled("cpu")
        assert ember.mm(_x(2, 2), _x(2, 2)).dtype is f16


def test_cuda_module_forms_warn(fake_cuda):
    with pytest.warns(FutureWarning, match="ember.cuda.amp.autocast"):
        region = ember.cuda.amp.autocast()
    with region:
        assert ember.mm(_x(2, 2), _x(2, 2)).dtype is f16


# ---- the weight-cast cache -------------------------------------------------------------------------
def _casts(monkeypatch):
    """Count calls of the cast op inside autocast."""
    calls = []
    real = _layer._to_copy

    def counting(self, *args, **kwargs):
        calls.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(_layer, "_to_copy", counting)
    return calls


def test_weight_used_twice_is_cast_once(monkeypatch):
    w = ember.randn(4, 4, requires_grad=True)
    x1, x2 = _x(2, 4), _x(3, 4)
    calls = _casts(monkeypatch)
    with ember.autocast("cpu"):
        y1, y2 = ember.mm(x1, w), ember.mm(x2, w)
        assert len(_state.STATE.cache) == 1
    assert sum(c is w for c in calls) == 1 and sum(c is x1 for c in calls) == 1
    assert not _state.STATE.cache  # cleared when the outermost region exits
    assert y1.grad_fn.next_functions[1][0] is y2.grad_fn.next_functions[1][0]  # one cast node, shared
    (y1.float().sum() + y2.float().sum()).backward()
    np.testing.assert_allclose(w.grad.numpy(), np.repeat((x1.to(bf16).float().sum(0) + x2.to(bf16).float().sum(0))
                                                         .numpy()[:, None], 4, 1), rtol=1e-2, atol=0.05)
    calls.clear()
    with ember.autocast("cpu"):
        ember.mm(x1, w)
        with ember.autocast("cpu"):
            ember.mm(x1, w)
        assert len(_state.STATE.cache) == 1  # the inner region's exit keeps the outer region's cache
        ember.mm(x1, w)
    assert sum(c is w for c in calls) == 1


def test_cache_only_for_float32_leaves_that_require_grad(monkeypatch):
    w = ember.randn(4, 4, requires_grad=True)
    plain = ember.randn(4, 4)
    calls = _casts(monkeypatch)
    with ember.autocast("cpu"):
        v = w * 1  # not a leaf
        for _ in range(2):
            ember.mm(plain, plain)
            ember.mm(v, v)
        assert not _state.STATE.cache
    with ember.autocast("cpu", cache_enabled=False):
        ember.mm(w, w)
        ember.mm(w, w)
        assert not _state.STATE.cache
    assert sum(c is plain for c in calls) == 4 and sum(c is w for c in calls) == 4


# ---- custom_fwd / custom_bwd ------------------------------------------------------------------------
_backward_states = []


class _MyMM(ember.autograd.Function):
    @staticmethod
    @ember.amp.custom_fwd(device_type="cpu")
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a.mm(b)

    @staticmethod
    @ember.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        _backward_states.append((ember.is_autocast_enabled("cpu"), ember.get_autocast_dtype("cpu")))
        return g.mm(b.t()), a.t().mm(g)


class _Float32MM(ember.autograd.Function):
    @staticmethod
    @ember.amp.custom_fwd(device_type="cpu", cast_inputs=ember.float32)
    def forward(ctx, a, b):
        ctx.inside = ember.is_autocast_enabled("cpu"), a.dtype, b.dtype
        return a.mm(b)

    @staticmethod
    @ember.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        return g, g


def test_custom_fwd_runs_forward_in_the_region_and_backward_with_its_state():
    a = ember.randn(2, 3, requires_grad=True)
    b = ember.randn(3, 2, requires_grad=True)
    with ember.autocast("cpu"):
        y = _MyMM.apply(a, b)
    assert y.dtype is bf16
    y.float().sum().backward()
    assert y.grad_fn is not None and a.grad.dtype is f32
    out = _MyMM.apply(a, b)  # outside: a no-op
    assert out.dtype is f32


def test_custom_fwd_cast_inputs_runs_forward_without_autocast():
    a, b = _x(2, 3, dtype=bf16), _x(3, 2)
    with ember.autocast("cpu"):
        y = _Float32MM.apply(a, b)
    assert y.dtype is f32
    ctx_seen = []

    class Probe(_Float32MM):
        @staticmethod
        @ember.amp.custom_fwd(device_type="cpu", cast_inputs=ember.float32)
        def forward(ctx, a, b):
            ctx_seen.append((ember.is_autocast_enabled("cpu"), a.dtype, b.dtype))
            return a.clone()

    with ember.autocast("cpu"):
        Probe.apply(a, ember.ones(3, 2, dtype=ember.int64).float().to(f64))
    Probe.apply(a, b)  # outside a region: no casts
    assert ctx_seen == [(False, f32, f64), (False, bf16, f32)]


def test_custom_bwd_restores_forward_state():
    a = ember.randn(2, 3, requires_grad=True)
    with ember.autocast("cpu", dtype=f16):
        y = _MyMM.apply(a, ember.randn(3, 2))
    z = _MyMM.apply(a, ember.randn(3, 2))
    _backward_states.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y.float().sum().backward()
        z.sum().backward()
    assert _backward_states == [(True, f16), (False, bf16)]
    assert a.grad.dtype is f32 and not ember.is_autocast_enabled("cpu")


def test_cuda_custom_decorators_warn():
    with pytest.warns(FutureWarning, match="custom_fwd"):
        ember.cuda.amp.custom_fwd(lambda ctx, x: x)
    with pytest.warns(FutureWarning, match="custom_bwd"):
        ember.cuda.amp.custom_bwd(lambda ctx, g: g)
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        ember.amp.custom_fwd(device_type=None)
