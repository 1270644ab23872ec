"""nn.functional.interpolate, its deprecated spellings and the Upsample modules against PyTorch: values for every mode,
size and scale-factor forms, dtypes and layouts, PyTorch's errors, and gradients (against torch.autograd, and
gradcheck/gradgradcheck in float64)."""
import pickle
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember
import ember.nn as nn
import ember.nn.functional as F

pytestmark = pytest.mark.autograd

TOL = {torch.float64: (1e-12, 1e-12), torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3),
       torch.bfloat16: (1.6e-2, 1e-2)}


def to_ember(t):
    """``t`` as an ember tensor, channels-last when ``t`` is."""
    e = ember.from_numpy(t.detach().double().numpy().copy()).to(getattr(ember, str(t.dtype)[6:]))
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous():
        e = e.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    return e


def same(e, t, dtype=torch.float64):
    assert tuple(e.shape) == tuple(t.shape)
    assert str(e.dtype)[6:] == str(t.dtype)[6:]
    rtol, atol = TOL[dtype]
    e = e.detach()
    np.testing.assert_allclose(e.float().numpy() if e.dtype == ember.bfloat16 else e.numpy(),
                               t.detach().float().numpy() if t.dtype == torch.bfloat16 else t.detach().numpy(),
                               rtol=rtol, atol=atol)


# (input shape, interpolate keywords)
CASES = [
    ((2, 3, 5), {"size": 9}), ((2, 3, 5), {"scale_factor": 2}), ((2, 3, 5), {"scale_factor": 1.7}),
    ((2, 3, 5, 4), {"size": (7, 9)}), ((2, 3, 5, 4), {"scale_factor": (2, 1.5)}),
    ((2, 3, 5, 4), {"scale_factor": 0.6}), ((2, 3, 5, 4), {"scale_factor": 2.3, "recompute_scale_factor": True}),
    ((2, 3, 3, 4, 5), {"size": (5, 3, 7)}), ((2, 3, 3, 4, 5), {"scale_factor": (1.5, 2, 0.7)}),
    ((2, 3, 3, 4, 5), {"scale_factor": 1.4, "recompute_scale_factor": False}),
]
MODES = {3: ["nearest", "nearest-exact", "linear", "area"], 4: ["nearest", "nearest-exact", "bilinear", "bicubic",
                                                              "area"],
         5: ["nearest", "nearest-exact", "trilinear", "area"]}
INTERPOLATING = ("linear", "bilinear", "bicubic", "trilinear")


def _cases():
    for shape, kw in CASES:
        for mode in MODES[len(shape)]:
            for ac in ((None,) if mode not in INTERPOLATING else (False, True)):
                yield pytest.param(shape, mode, dict(kw, align_corners=ac) if ac is not None else kw,
                                   id=f"{mode}-{shape}-{kw}-ac{ac}")


@pytest.mark.parametrize("shape,mode,kw", list(_cases()))
def test_matches_torch_float64_with_gradients(shape, mode, kw):
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    t = TF.interpolate(x, mode=mode, **kw)
    e_x = to_ember(x).requires_grad_()
    e = F.interpolate(e_x, mode=mode, **kw)
    same(e, t)
    g = torch.randn(t.shape, dtype=torch.float64)
    t.backward(g)
    e.backward(ember.from_numpy(g.numpy()))
    same(e_x.grad, x.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mode,shape", [("nearest", (2, 3, 5, 4)), ("nearest-exact", (2, 3, 5)),
                                        ("bilinear", (2, 3, 5, 4)), ("bicubic", (2, 3, 5, 4)),
                                        ("trilinear", (1, 2, 3, 4, 5)), ("area", (2, 3, 6, 4))])
def test_float_dtypes(dtype, mode, shape):
    x = torch.randn(*shape).to(dtype)
    for kw in ({"scale_factor": 1.7}, {"size": tuple(range(3, 3 + len(shape) - 2))}):
        same(F.interpolate(to_ember(x), mode=mode, **kw), TF.interpolate(x, mode=mode, **kw), dtype)


@pytest.mark.parametrize("mode,kw", [("bilinear", {}), ("bicubic", {}), ("bilinear", {"align_corners": True}),
                                     ("bicubic", {"align_corners": True}), ("lanczos", {})])
@pytest.mark.parametrize("size", [(4, 3), (3, 11), (17, 6)])
def test_antialias(mode, kw, size):
    x = torch.randn(2, 3, 9, 8, dtype=torch.float64, requires_grad=True)
    t = TF.interpolate(x, size=size, mode=mode, antialias=True, **kw)
    e_x = to_ember(x).requires_grad_()
    e = F.interpolate(e_x, size=size, mode=mode, antialias=True, **kw)
    same(e, t)
    g = torch.randn(t.shape, dtype=torch.float64)
    t.backward(g)
    e.backward(ember.from_numpy(g.numpy()))
    same(e_x.grad, x.grad)
    x32 = x.detach().float()
    same(F.interpolate(to_ember(x32), size=size, mode=mode, antialias=True, **kw),
         TF.interpolate(x32, size=size, mode=mode, antialias=True, **kw), torch.float32)


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic", "nearest-exact"])
def test_channels_last_keeps_its_layout(mode):
    x = torch.randn(2, 5, 6, 7).to(memory_format=torch.channels_last)
    e_x = to_ember(x)
    assert e_x.stride() == x.stride()
    t = TF.interpolate(x, size=(9, 4), mode=mode)
    e = F.interpolate(e_x, size=(9, 4), mode=mode)
    same(e, t, torch.float32)
    assert e.stride() == t.stride()


def test_channels_last_3d_and_gradient():
    x = torch.randn(2, 3, 3, 4, 5, dtype=torch.float64).to(memory_format=torch.channels_last_3d).requires_grad_()
    e_x = ember.from_numpy(x.detach().permute(0, 2, 3, 4, 1).numpy().copy()).permute(0, 4, 1, 2, 3).requires_grad_()
    t = TF.interpolate(x, scale_factor=(2, 1.5, 0.8), mode="trilinear")
    e = F.interpolate(e_x, scale_factor=(2, 1.5, 0.8), mode="trilinear")
    same(e, t)
    assert e.stride() == t.stride()
    g = torch.randn(t.shape, dtype=torch.float64)
    t.backward(g)
    e.backward(ember.from_numpy(g.numpy()))
    same(e_x.grad, x.grad)


def test_non_contiguous_input():
    x = torch.randn(2, 3, 7, 5)
    for view in (lambda a: a.transpose(2, 3), lambda a: a[:, :, ::2], lambda a: a.transpose(0, 1)):
        same(F.interpolate(view(to_ember(x)), size=(6, 4), mode="bilinear"),
             TF.interpolate(view(x), size=(6, 4), mode="bilinear"), torch.float32)


def test_non_finite_values_stay_local():
    """A product with the dense map would spread NaN/inf over whole rows; ember keeps them where PyTorch does."""
    x = torch.randn(1, 2, 4, 6)
    x[0, 0, 1, 2], x[0, 1, 3, 0] = float("inf"), float("nan")
    for mode in ("bilinear", "bicubic"):
        t = TF.interpolate(x, scale_factor=2, mode=mode)
        e = F.interpolate(to_ember(x), scale_factor=2, mode=mode)
        np.testing.assert_array_equal(np.isnan(e.numpy()), np.isnan(t.numpy()))
        np.testing.assert_array_equal(np.isinf(e.numpy()), np.isinf(t.numpy()))


def test_large_input_split_over_threads():
    """Large inputs are computed in two halves of the batch at once; the result is the same."""
    x = torch.randn(4, 8, 64, 128)
    for mode in ("bilinear", "nearest", "bicubic"):
        same(F.interpolate(to_ember(x), scale_factor=2, mode=mode), TF.interpolate(x, scale_factor=2, mode=mode),
             torch.float32)
    x = torch.randn(1, 4, 300, 400)  # one batch item: the channels split
    same(F.interpolate(to_ember(x), size=(512, 640), mode="bilinear", align_corners=True),
         TF.interpolate(x, size=(512, 640), mode="bilinear", align_corners=True), torch.float32)


def test_uint8_nearest_and_refused_integer_modes():
    x = torch.randint(0, 256, (2, 3, 5, 4), dtype=torch.uint8)
    e = F.interpolate(ember.from_numpy(x.numpy()), size=(7, 9))
    assert e.dtype == ember.uint8
    np.testing.assert_array_equal(e.numpy(), TF.interpolate(x, size=(7, 9)).numpy())
    for dtype in (torch.int64, torch.bool):
        with pytest.raises(NotImplementedError):
            TF.interpolate(x.to(dtype), size=(7, 9))
        with pytest.raises(NotImplementedError, match="not implemented for"):
            F.interpolate(ember.from_numpy(x.to(dtype).numpy()), size=(7, 9))


@pytest.mark.parametrize("mode,kw", [("bilinear", {}), ("bilinear", {"align_corners": True}), ("bicubic", {}),
                                     ("bicubic", {"align_corners": True}), ("nearest", {}), ("nearest-exact", {}),
                                     ("area", {})])
def test_gradcheck_and_gradgradcheck(mode, kw):
    x = ember.randn(1, 2, 3, 4, dtype=ember.float64, requires_grad=True)
    for size in ((5, 7), (2, 3)):
        fn = lambda a, size=size: F.interpolate(a, size=size, mode=mode, **kw)  # noqa: E731
        assert ember.autograd.gradcheck(fn, (x,))
        assert ember.autograd.gradgradcheck(fn, (x,))


def test_gradient_of_a_dim_kept_by_a_scale_factor():
    """A dim whose size the factor keeps (3 * 1.3 -> 3) still maps by the factor in PyTorch's forward, but its
    backward kernels copy such a dim's gradient (or, antialiased, the reverse): their gradient is not the forward's.
    ember's is, whatever the mode."""
    x = ember.randn(1, 2, 3, 5, dtype=ember.float64, requires_grad=True)
    for mode, kw in (("nearest", {}), ("bicubic", {}), ("bilinear", {"antialias": True})):
        t = TF.interpolate(torch.from_numpy(x.detach().numpy()), scale_factor=1.3, mode=mode, **kw)
        e = F.interpolate(x, scale_factor=1.3, mode=mode, **kw)
        same(e, t)
        assert ember.autograd.gradcheck(lambda a, m=mode, k=kw: F.interpolate(a, scale_factor=1.3, mode=m, **k), (x,))


def test_gradcheck_antialias_and_1d_3d():
    x = ember.randn(1, 2, 7, 6, dtype=ember.float64, requires_grad=True)
    for mode in ("bilinear", "bicubic", "lanczos"):
        fn = lambda a, mode=mode: F.interpolate(a, size=(3, 4), mode=mode, antialias=True)  # noqa: E731
        assert ember.autograd.gradcheck(fn, (x,))
        assert ember.autograd.gradgradcheck(fn, (x,))
    x1 = ember.randn(2, 2, 5, dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradgradcheck(lambda a: F.interpolate(a, scale_factor=1.6, mode="linear"), (x1,))
    x3 = ember.randn(1, 1, 2, 3, 4, dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradgradcheck(lambda a: F.interpolate(a, size=(3, 2, 5), mode="trilinear",
                                                                align_corners=True), (x3,))


# ---- errors -------------------------------------------------------------------------------------------------------
x4 = (2, 3, 4, 5)
ERRORS = [
    (x4, {"size": 3, "scale_factor": 2}), (x4, {}), (x4, {"size": 3, "align_corners": True}),
    (x4, {"size": 3, "mode": "area", "align_corners": False}), (x4, {"size": 3, "mode": "nearest-exact",
                                                                     "align_corners": True}),
    (x4, {"size": (3, 3, 3)}), (x4, {"scale_factor": (2, 2, 2)}), (x4, {"size": (3.0, 3)}), (x4, {"size": 3.5}),
    (x4, {"size": (None, 3)}), (x4, {"size": 3, "recompute_scale_factor": True}), (x4, {"size": 3, "mode": "foo"}),
    ((1, 2, 3), {"size": 3, "mode": "bilinear"}), ((1, 2, 3), {"size": 3, "mode": "bicubic"}),
    ((1, 2, 3, 3, 3), {"size": 3, "mode": "bicubic"}), ((1, 2, 3, 3), {"size": 3, "mode": "linear"}),
    ((1, 2, 3, 3), {"size": 3, "mode": "trilinear"}), ((1, 2, 3, 3, 3), {"size": 3, "mode": "bilinear"}),
    (x4, {"size": 3, "antialias": True}), ((1, 2, 3), {"size": 3, "mode": "linear", "antialias": True}),
    (x4, {"size": 3, "mode": "lanczos"}), (x4, {"size": 3, "mode": "lanczos", "antialias": True,
                                                "align_corners": True}),
    ((3, 4), {"scale_factor": 2}), ((1, 1, 1, 1, 1, 1), {"scale_factor": 2}),
    (x4, {"size": (0, 3)}), (x4, {"size": (-1, 3)}), (x4, {"scale_factor": 0.0}), (x4, {"scale_factor": -2.0}),
    (x4, {"scale_factor": 0.1, "mode": "bilinear"}), ((2, 0, 4, 5), {"scale_factor": 2}),
    ((2, 3, 0, 5), {"size": (3, 3), "mode": "bilinear"}), (x4, {"scale_factor": float("nan")}),
    (x4, {"scale_factor": float("inf")}), (x4, {"scale_factor": 1e20}), ((2, 3, 5), {"size": 0}),
    ((1, 1, 2, 2, 2), {"size": (2, 0, 2)}), (x4, {"size": 3, "mode": "bilinear", "align_corners": 1}),
]


@pytest.mark.parametrize("shape,kw", ERRORS, ids=[f"{s}-{k}" for s, k in ERRORS])
def test_errors_match_torch(shape, kw):
    with pytest.raises(Exception) as expected:
        TF.interpolate(torch.randn(*shape), **kw)
    with pytest.raises(type(expected.value)) as got:
        F.interpolate(ember.randn(*shape), **kw)
    if type(expected.value) is not TypeError:  # (PyTorch's argument parser words its TypeErrors its own way)
        assert str(got.value) == str(expected.value)


def test_empty_batch():
    for mode in ("nearest", "bilinear", "bicubic"):
        t = TF.interpolate(torch.randn(0, 3, 4, 5), scale_factor=2, mode=mode)
        e = F.interpolate(ember.randn(0, 3, 4, 5), scale_factor=2, mode=mode)
        assert tuple(e.shape) == tuple(t.shape)


def test_size_given_as_integer_tensors_and_numpy_ints():
    x = torch.randn(2, 3, 4, 5)
    for size in ((np.int64(3), 7), (ember.tensor(3), 7)):
        tsize = tuple(torch.tensor(int(s)) if isinstance(s, ember.Tensor) else s for s in size)
        same(F.interpolate(to_ember(x), size=size), TF.interpolate(x, size=tsize), torch.float32)


# ---- deprecated spellings and modules ----------------------------------------------------------------------------
@pytest.mark.parametrize("name,kw", [("upsample", {"scale_factor": 2, "mode": "bilinear"}),
                                     ("upsample_nearest", {"size": (7, 3)}),
                                     ("upsample_bilinear", {"scale_factor": 1.5})])
def test_deprecated_functions_warn_and_match(name, kw):
    x = torch.randn(2, 3, 4, 5)
    with warnings.catch_warnings(record=True) as tw:
        warnings.simplefilter("always")
        t = getattr(TF, name)(x, **kw)
    with warnings.catch_warnings(record=True) as ew:
        warnings.simplefilter("always")
        e = getattr(F, name)(to_ember(x), **kw)
    same(e, t, torch.float32)
    assert [str(w.message) for w in ew] == [str(w.message) for w in tw]
    assert ew[0].filename == __file__


@pytest.mark.parametrize("make", [
    lambda m: m.Upsample(scale_factor=2), lambda m: m.Upsample(size=(7, 3), mode="bilinear"),
    lambda m: m.Upsample(scale_factor=(2, 1.5), mode="bicubic", align_corners=True),
    lambda m: m.Upsample(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True),
    lambda m: m.Upsample(size=3, mode="area"), lambda m: m.Upsample(scale_factor=0.5, mode="nearest-exact"),
    lambda m: m.UpsamplingNearest2d(scale_factor=3), lambda m: m.UpsamplingNearest2d(size=(5, 7)),
    lambda m: m.UpsamplingBilinear2d(scale_factor=2), lambda m: m.UpsamplingBilinear2d(size=(3, 8))])
def test_modules_match_torch(make):
    t_mod, e_mod = make(torch.nn), make(nn)
    assert repr(e_mod) == repr(t_mod)
    for attr in ("size", "scale_factor", "mode", "align_corners", "recompute_scale_factor", "name"):
        assert getattr(e_mod, attr) == getattr(t_mod, attr)
    x = torch.randn(2, 3, 4, 5, dtype=torch.float64, requires_grad=True)
    e_x = to_ember(x).requires_grad_()
    t, e = t_mod(x), e_mod(e_x)
    same(e, t)
    t.sum().backward()
    e.sum().backward()
    same(e_x.grad, x.grad)


def test_upsample_scale_factor_forms():
    assert nn.Upsample(scale_factor=0).scale_factor is None
    assert nn.Upsample(scale_factor=(2, 3)).scale_factor == (2.0, 3.0)
    with pytest.raises(TypeError):
        torch.nn.Upsample(scale_factor=[2, 3])
    with pytest.raises(TypeError):
        nn.Upsample(scale_factor=[2, 3])


def test_upsample_pickles_and_old_state_gets_recompute_flag():
    m = nn.Upsample(scale_factor=2, mode="bilinear")
    m2 = pickle.loads(pickle.dumps(m))
    assert (m2.scale_factor, m2.mode, m2.recompute_scale_factor) == (2.0, "bilinear", None)
    state = dict(m.__dict__)
    del state["recompute_scale_factor"]
    m3 = nn.Upsample.__new__(nn.Upsample)
    m3.__setstate__(state)
    assert m3.recompute_scale_factor is True
