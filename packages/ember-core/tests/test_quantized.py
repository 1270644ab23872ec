"""Quantized tensors against PyTorch: dtypes, qschemes, quantize/dequantize bit for bit, views and copies, reprs,
errors."""
import copy
import pickle
import warnings

import numpy as np
import pytest
import torch

import ember

warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")


def E(name):
    return getattr(ember, name)


def T(name):
    return getattr(torch, name)


def floats(shape, scale=3.0, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def both(arr):
    return ember.tensor(arr), torch.tensor(arr)


def assert_same_q(e, t):
    """Same quantized tensor: dtype, scheme, shape, integers, parameters."""
    assert e.is_quantized and t.is_quantized
    assert str(e.dtype).replace("ember.", "torch.") == str(t.dtype)
    assert str(e.qscheme()).replace("ember.", "torch.") == str(t.qscheme())
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_array_equal(e.int_repr().numpy(), t.int_repr().numpy())
    np.testing.assert_array_equal(ember.int_repr(e).numpy(), t.int_repr().numpy())  # (the function form)
    if t.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        assert e.q_scale() == t.q_scale() and e.q_zero_point() == t.q_zero_point()
    else:
        np.testing.assert_array_equal(e.q_per_channel_scales().numpy(), t.q_per_channel_scales().numpy())
        np.testing.assert_array_equal(e.q_per_channel_zero_points().numpy(), t.q_per_channel_zero_points().numpy())
        assert e.q_per_channel_scales().dtype.name == str(t.q_per_channel_scales().dtype)[6:]
        assert e.q_per_channel_zero_points().dtype.name == str(t.q_per_channel_zero_points().dtype)[6:]
        assert e.q_per_channel_axis() == t.q_per_channel_axis()


def same_error(fe, ft):
    with pytest.raises(Exception) as te:
        ft()
    with pytest.raises(type(te.value)) as ee:
        fe()
    return str(ee.value), str(te.value).split("  (Could this error message be improved?")[0]


# ---- dtypes and schemes ---------------------------------------------------------------------------------------
QDTYPES = ["qint8", "quint8", "qint32", "quint4x2", "quint2x4"]
QSCHEMES = ["per_tensor_affine", "per_channel_affine", "per_tensor_symmetric", "per_channel_symmetric",
            "per_channel_affine_float_qparams"]


@pytest.mark.parametrize("name", QDTYPES)
def test_quantized_dtypes(name):
    e, t = E(name), T(name)
    assert repr(e) == repr(t).replace("torch.", "ember.") and str(e) == str(t).replace("torch.", "ember.")
    assert isinstance(e, ember.dtype)
    for attr in ("is_floating_point", "is_complex", "itemsize"):
        assert getattr(e, attr) == getattr(t, attr)
    assert e.to_real() is e
    for fe, ft in ((lambda: e.is_signed, lambda: t.is_signed), (e.to_complex, t.to_complex)):
        me, mt = same_error(fe, ft)
        assert me == mt
    assert pickle.loads(pickle.dumps(e)) is e


@pytest.mark.parametrize("name", QSCHEMES)
def test_qschemes(name):
    e, t = E(name), T(name)
    assert repr(e) == repr(t).replace("torch.", "ember.")
    assert isinstance(e, ember.qscheme)
    assert pickle.loads(pickle.dumps(e)) is e
    assert copy.deepcopy(e) is e


def test_backends_quantized():
    b, tb = ember.backends.quantized, torch.backends.quantized
    assert b.supported_engines == tb.supported_engines
    assert b.engine == tb.engine
    try:
        for engine in tb.supported_engines:
            b.engine = engine
            assert b.engine == engine
        for bad in ("none", "bogus", None):
            def set_e(bad=bad):
                b.engine = bad

            def set_t(bad=bad):
                tb.engine = bad
            me, mt = same_error(set_e, set_t)
            assert me == mt.replace("torch", "ember")
    finally:
        b.engine = tb.engine = "x86"


# ---- quantizing ---------------------------------------------------------------------------------------------
PER_TENSOR = [("quint8", 0.1, 3), ("quint8", 0.0371, 0), ("quint8", 1e-3, 255), ("qint8", 0.1, -1),
              ("qint8", 0.0123, 17), ("qint32", 0.1, 3), ("qint32", 1e-4, -1000), ("quint4x2", 0.3, 2),
              ("quint2x4", 0.5, 1)]


@pytest.mark.parametrize("dtype,scale,zp", PER_TENSOR)
def test_quantize_per_tensor(dtype, scale, zp):
    arr = floats((7, 9))
    arr[0, :5] = [0.15, 0.05, 0.25, -0.35, 1e6 if dtype != "qint32" else 2e3]  # halves, ties, saturation
    e, t = both(arr)
    qe, qt = ember.quantize_per_tensor(e, scale, zp, E(dtype)), torch.quantize_per_tensor(t, scale, zp, T(dtype))
    assert_same_q(qe, qt)
    np.testing.assert_array_equal(qe.dequantize().numpy(), qt.dequantize().numpy())
    np.testing.assert_array_equal(ember.dequantize(qe).numpy(), torch.dequantize(qt).numpy())
    assert repr(qe) == repr(qt).replace("torch.", "ember.")


def test_quantize_rounds_fused():
    """0.15 with scale 0.1 and zero point -1: x * inv + zp rounded once gives 1 (separate roundings give 0)."""
    e = ember.quantize_per_tensor(ember.tensor([0.15, 0.05, 0.25]), 0.1, -1, ember.qint8)
    t = torch.quantize_per_tensor(torch.tensor([0.15, 0.05, 0.25]), 0.1, -1, torch.qint8)
    assert_same_q(e, t)


@pytest.mark.parametrize("n", [1 << 13, (1 << 20) + 37])
def test_quantize_large_compiled_loop(n):
    from ember import _jit
    arr = floats(n, 4.0, seed=3)
    with _jit.forced():
        for dtype, zp in (("quint8", 128), ("qint8", -5)):
            qe = ember.quantize_per_tensor(ember.tensor(arr), 0.0173, zp, E(dtype))
            qt = torch.quantize_per_tensor(torch.tensor(arr), 0.0173, zp, T(dtype))
            np.testing.assert_array_equal(qe.int_repr().numpy(), qt.int_repr().numpy())


def test_quantize_per_tensor_tensor_qparams_and_lists():
    arr = floats((3, 4))
    e, t = both(arr)
    for s, z in ((ember.tensor(0.1), ember.tensor(3)), (ember.tensor(0.1, dtype=ember.float64), ember.tensor(3))):
        ts, tz = torch.tensor(s.item(), dtype=T(s.dtype.name)), torch.tensor(z.item())
        assert_same_q(ember.quantize_per_tensor(e, s, z, ember.quint8), torch.quantize_per_tensor(t, ts, tz,
                                                                                                  torch.quint8))
    le = ember.quantize_per_tensor([e, e * 2], ember.tensor([0.1, 0.2]), ember.tensor([3, 4]), ember.quint8)
    lt = torch.quantize_per_tensor([t, t * 2], torch.tensor([0.1, 0.2]), torch.tensor([3, 4]), torch.quint8)
    assert len(le) == len(lt) == 2
    for a, b in zip(le, lt):
        assert_same_q(a, b)
    de, dt = ember.dequantize(le), torch.dequantize(lt)
    for a, b in zip(de, dt):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("dtype", ["quint8", "qint8"])
@pytest.mark.parametrize("reduce_range", [False, True])
@pytest.mark.parametrize("shift", [0.0, 5.0, -5.0])
def test_quantize_per_tensor_dynamic(dtype, reduce_range, shift):
    arr = floats((5, 6), seed=4) + shift
    e, t = both(arr)
    assert_same_q(ember.quantize_per_tensor_dynamic(e, E(dtype), reduce_range),
                  torch.quantize_per_tensor_dynamic(t, T(dtype), reduce_range))


PER_CHANNEL = [("qint8", 0, "int64"), ("quint8", 1, "int64"), ("qint32", 1, "int64"), ("qint8", 2, "int32"),
               ("quint8", 0, "float32")]


@pytest.mark.parametrize("dtype,axis,zp_dtype", PER_CHANNEL)
def test_quantize_per_channel(dtype, axis, zp_dtype):
    arr = floats((4, 5, 6), seed=1)
    e, t = both(arr)
    n = arr.shape[axis]
    scales = np.random.default_rng(2).uniform(0.01, 0.1, n)
    zps = np.random.default_rng(3).integers(0 if dtype == "quint8" else -10, 10, n).astype(zp_dtype)
    if zp_dtype == "float32":
        zps += 0.5
    qe = ember.quantize_per_channel(e, ember.tensor(scales), ember.tensor(zps), axis, E(dtype))
    qt = torch.quantize_per_channel(t, torch.tensor(scales), torch.tensor(zps), axis, T(dtype))
    assert_same_q(qe, qt)
    np.testing.assert_array_equal(qe.dequantize().numpy(), qt.dequantize().numpy())
    assert repr(qe) == repr(qt).replace("torch.", "ember.")


def test_make_quantized_tensors():
    for np_dtype in (np.int8, np.uint8, np.int32):
        ints = np.random.default_rng(0).integers(0, 100, (3, 4)).astype(np_dtype)
        e, t = both(ints)
        assert_same_q(ember._make_per_tensor_quantized_tensor(e, 0.5, 7),
                      torch._make_per_tensor_quantized_tensor(t, 0.5, 7))
        for sdt in ("float64", "float32"):
            s, z = np.array([0.5, 0.25, 0.125, 1.0], sdt), np.array([1, 2, 3, 4])
            assert_same_q(ember._make_per_channel_quantized_tensor(e, ember.tensor(s), ember.tensor(z), 1),
                          torch._make_per_channel_quantized_tensor(t, torch.tensor(s), torch.tensor(z), 1))


def test_quantize_errors():
    x = floats((2, 3))
    e, t = both(x)
    cases = [
        (lambda m, a: m.quantize_per_tensor(a, 0.1, 300, m.quint8)),
        (lambda m, a: m.quantize_per_tensor(a, 0.1, -1, m.quint8)),
        (lambda m, a: m.quantize_per_tensor(a, 0.1, 128, m.qint8)),
        (lambda m, a: m.quantize_per_tensor(a, 0.1, 3, m.float32)),
        (lambda m, a: m.quantize_per_tensor(a.double(), 0.1, 3, m.quint8)),
        (lambda m, a: m.quantize_per_tensor(a.long(), 0.1, 3, m.quint8)),
        (lambda m, a: m.quantize_per_tensor_dynamic(a, m.qint32, False)),
        (lambda m, a: m.quantize_per_channel(a, m.tensor([0.1, 0.2]), m.tensor([1, 2]), 2, m.qint8)),
        (lambda m, a: m.quantize_per_channel(a, m.tensor([0.1, 0.2, 0.3]), m.tensor([1, 2, 3]), 0, m.qint8)),
        (lambda m, a: m.quantize_per_channel(a, m.tensor([0.1, 0.2]), m.tensor([1, 2, 3]), 0, m.qint8)),
        (lambda m, a: m.quantize_per_channel(a, m.tensor([1, 2]), m.tensor([1, 2]), 0, m.qint8)),
        (lambda m, a: m.quantize_per_channel(a, m.tensor([[0.1, 0.2]]), m.tensor([1, 2]), 0, m.qint8)),
        (lambda m, a: m.quantize_per_channel(a, m.tensor([0.1, 0.2]), m.tensor([1, 200]), 0, m.qint8)),
        (lambda m, a: m.quantize_per_channel(a, m.tensor([0.1, 0.2]), m.tensor([1, 2]), 0, m.float32)),
        (lambda m, a: m.quantize_per_channel(a, m.tensor([0.1, 0.2]), m.tensor([1, 2]), 0, m.quint4x2)),
        (lambda m, a: m._make_per_tensor_quantized_tensor(a.long(), 0.5, 1)),
        (lambda m, a: m._make_per_tensor_quantized_tensor(a, 0.5, 1)),
    ]
    for case in cases:
        me, mt = same_error(lambda case=case: case(ember, e), lambda case=case: case(torch, t))
        assert me == mt.replace("torch", "ember"), (me, mt)


def test_float_tensor_refuses_quantized_methods():
    e, t = both(floats(3))
    for name in ("int_repr", "q_scale", "q_zero_point", "qscheme"):
        me, mt = same_error(getattr(e, name), getattr(t, name))
        assert me.startswith(f"Could not run 'aten::{name}' with arguments from the 'CPU' backend")
    same_error(lambda: ember.int_repr(e), lambda: torch.int_repr(t))
    assert not e.is_quantized
    np.testing.assert_array_equal(e.dequantize().numpy(), t.dequantize().numpy())


def pair(dtype="quint8", shape=(3, 4), scale=0.1, zp=3, seed=0):
    arr = floats(shape, seed=seed)
    e, t = both(arr)
    return ember.quantize_per_tensor(e, scale, zp, E(dtype)), torch.quantize_per_tensor(t, scale, zp, T(dtype))


def channel_pair(shape=(3, 4), axis=0, dtype="qint8"):
    arr = floats(shape, seed=5)
    e, t = both(arr)
    n = shape[axis]
    s, z = np.linspace(0.05, 0.2, n), np.arange(n) - 1
    return (ember.quantize_per_channel(e, ember.tensor(s), ember.tensor(z), axis, E(dtype)),
            torch.quantize_per_channel(t, torch.tensor(s), torch.tensor(z), axis, T(dtype)))


def test_metadata():
    qe, qt = pair()
    assert qe.is_quantized and qt.is_quantized
    assert qe.element_size() == qt.element_size() and qe.itemsize == qt.itemsize and qe.nbytes == qt.nbytes
    assert qe.stride() == qt.stride() and qe.is_contiguous() == qt.is_contiguous()
    assert str(qe.device) == str(qt.device) and qe.layout is ember.strided
    assert qe.is_floating_point() == qt.is_floating_point()
    assert qe[1, 2].item() == qt[1, 2].item() and float(qe[0, 0]) == float(qt[0, 0])
    assert qe.t().stride() == qt.t().stride() and qe.t().storage_offset() == qt.t().storage_offset()
    assert qe[1:, 1:].storage_offset() == qt[1:, 1:].storage_offset()
    for name in ("q_per_channel_scales", "q_per_channel_axis"):
        me, mt = same_error(getattr(qe, name), getattr(qt, name))
        assert me == mt
    ce, ct = channel_pair()
    me, mt = same_error(ce.q_scale, ct.q_scale)


VIEWS = [
    ("t", lambda q: q.t()), ("transpose", lambda q: q.transpose(0, 1)), ("permute", lambda q: q.permute(1, 0)),
    ("view", lambda q: q.view(2, 6)), ("view -1", lambda q: q.view(-1)), ("reshape", lambda q: q.reshape(4, 3)),
    ("t reshape", lambda q: q.t().reshape(12)), ("t contiguous", lambda q: q.t().contiguous()),
    ("flatten", lambda q: q.flatten()), ("unsqueeze", lambda q: q.unsqueeze(1)),
    ("squeeze", lambda q: q.unsqueeze(0).squeeze(0)), ("select", lambda q: q[1]), ("select dim1", lambda q: q[:, 2]),
    ("slice", lambda q: q[1:]), ("step", lambda q: q[::2, 1::2]), ("narrow", lambda q: q.narrow(1, 1, 2)),
    ("expand", lambda q: q[0:1].expand(3, 4)), ("index list", lambda q: q[[0, 2]]),
    ("index_select", lambda q: q.index_select(1, T_or_E(q).tensor([3, 0]))), ("flip", lambda q: q.flip(0)),
    ("repeat", lambda q: q.repeat(2, 1)), ("clone", lambda q: q.clone()), ("detach", lambda q: q.detach()),
    ("unfold", lambda q: q.unfold(0, 2, 1)), ("cpu", lambda q: q.cpu()), ("contiguous", lambda q: q.contiguous()),
]


def T_or_E(q):
    return ember if isinstance(q, ember.Tensor) else torch


@pytest.mark.parametrize("name,f", VIEWS, ids=[v[0] for v in VIEWS])
def test_views_and_copies_per_tensor(name, f):
    qe, qt = pair()
    re_, rt = f(qe), f(qt)
    assert_same_q(re_, rt)
    assert re_.stride() == rt.stride() or name in ("index list", "index_select", "flip", "repeat")
    assert repr(re_) == repr(rt).replace("torch.", "ember.")


def test_splits_per_tensor():
    qe, qt = pair()
    for f in (lambda q: q.chunk(2, 1), lambda q: q.split(2), lambda q: q.unbind(0), lambda q: list(q)):
        re_, rt = f(qe), f(qt)
        assert len(re_) == len(rt)
        for a, b in zip(re_, rt):
            assert_same_q(a, b)


def test_views_share_memory():
    qe, _ = pair()
    v = qe[1]
    v.copy_(ember.ones(4))
    np.testing.assert_array_equal(qe.int_repr().numpy()[1], v.int_repr().numpy())
    assert qe.t()._vc is qe._vc


CHANNEL_VIEWS = [("view", lambda q: q.view(3, 2, 2)), ("select axis", lambda q: q[1]),
                 ("slice axis", lambda q: q[1:]), ("unsqueeze0", lambda q: q.unsqueeze(0)),
                 ("unsqueeze1", lambda q: q.unsqueeze(1)), ("narrow", lambda q: q.narrow(1, 1, 2)),
                 ("clone", lambda q: q.clone()), ("chunk", lambda q: q.chunk(2, 1)[1]),
                 ("unbind", lambda q: q.unbind(0)[2])]


@pytest.mark.parametrize("name,f", CHANNEL_VIEWS, ids=[v[0] for v in CHANNEL_VIEWS])
def test_views_per_channel(name, f):
    ce, ct = channel_pair()
    assert_same_q(f(ce), f(ct))


@pytest.mark.parametrize("f", [lambda q: q.t(), lambda q: q.transpose(0, 1), lambda q: q.permute(1, 0),
                               lambda q: q.view(12), lambda q: q.flatten(),
                               lambda q: q.unsqueeze(0).expand(2, 3, 4)])
def test_views_per_channel_refused(f):
    """(PyTorch makes some of these and fails when they are used: ember refuses them at once.)"""
    ce, ct = channel_pair()
    me, mt = same_error(lambda: repr(f(ce)), lambda: repr(f(ct)))
    assert me == mt


def test_cat_stack():
    qe, qt = pair()
    qe2, qt2 = pair(scale=0.2, zp=5, seed=1)
    for f in (lambda m, a, b: m.cat([a, b]), lambda m, a, b: m.cat([a, b], 1), lambda m, a, b: m.stack([a, b]),
              lambda m, a, b: m.stack([a, a], 2), lambda m, a, b: m.cat([a, a], dim=-1)):
        assert_same_q(f(ember, qe, qe2), f(torch, qt, qt2))


def test_comparisons():
    qe, qt = pair()
    qe2, qt2 = pair(scale=0.2)
    qe3, qt3 = pair("qint8", zp=3)
    fe, ft = both(floats((3, 4)))
    for f in (lambda a, b: a == b, lambda a, b: a != b, lambda a, b: a < b, lambda a, b: a.eq(b),
              lambda a, b: a == 1, lambda a, b: a >= 0.3):
        for (a, b), (c, d) in (((qe, qe2), (qt, qt2)), ((qe, qe3), (qt, qt3)), ((qe, fe), (qt, ft)),
                               ((qe, qe), (qt, qt))):
            np.testing.assert_array_equal(f(a, b).numpy(), f(c, d).numpy())
    assert ember.equal(qe, qe) == torch.equal(qt, qt)
    assert ember.equal(qe, qe2) == torch.equal(qt, qt2)
    assert ember.equal(qe, fe) == torch.equal(qt, ft)


def test_copy_and_fill():
    qe, qt = pair()
    fe, ft = both(floats((3, 4), seed=9))
    assert_same_q(qe.clone().copy_(fe), qt.clone().copy_(ft))
    qe2, qt2 = pair(scale=0.2, seed=2)
    assert_same_q(qe.clone().copy_(qe2), qt.clone().copy_(qt2))
    assert_same_q(qe.clone().fill_(1.0), qt.clone().fill_(1.0))
    me, mt = same_error(lambda: fe.clone().copy_(qe), lambda: ft.clone().copy_(qt))
    assert me == mt
    mask_e, mask_t = qe.int_repr() > 10, qt.int_repr() > 10
    assert_same_q(qe.masked_fill(mask_e, 0.5), qt.masked_fill(mask_t, 0.5))


def test_float_ops_refused():
    qe, qt = pair()
    fe, ft = both(floats((3, 4)))
    for f in (lambda q, f: q.exp(), lambda q, f: q + q, lambda q, f: q.sum(), lambda q, f: q.abs(),
              lambda q, f: -q, lambda q, f: q @ q.t(), lambda q, f: q.argmax(), lambda q, f: q.zero_(),
              lambda q, f: q.roll(1)):
        me, mt = same_error(lambda f=f: f(qe, fe), lambda f=f: f(qt, ft))
        assert me.startswith("Could not run 'aten::") and "'QuantizedCPU' backend" in me, (me, mt)
    for f in (lambda q, f: q + f, lambda q, f: f * q):
        me, mt = same_error(lambda f=f: f(qe, fe), lambda f=f: f(qt, ft))
        assert me == mt


def test_conversions_refused():
    qe, qt = pair()
    for f in (lambda q: q.float(), lambda q: q.to(T_or_E(q).float32), lambda q: q.double(), lambda q: q.int(),
              lambda q: q.to(T_or_E(q).qint8), lambda q: q.numpy(), lambda q: q.tolist(),
              lambda q: q.requires_grad_(), lambda q: q.is_signed()):
        me, mt = same_error(lambda f=f: f(qe), lambda f=f: f(qt))
        assert me == mt.replace("torch.", "ember."), (me, mt)


def test_quantized_cuda_refused():
    qe, _ = pair()
    with pytest.raises(RuntimeError, match="quantized CUDA"):
        qe.to("cuda")


def test_pickle_and_deepcopy():
    for qe, _ in (pair(), channel_pair(), pair("qint32")):
        for r in (pickle.loads(pickle.dumps(qe)), copy.deepcopy(qe)):
            assert r.dtype is qe.dtype and r.qscheme() is qe.qscheme()
            np.testing.assert_array_equal(r.int_repr().numpy(), qe.int_repr().numpy())
            assert repr(r) == repr(qe)


REPRS = [((), "quint8"), ((0, 3), "quint8"), ((2000,), "quint8"), ((3, 30), "qint8"), ((2, 3), "qint32")]


@pytest.mark.parametrize("shape,dtype", REPRS)
def test_repr(shape, dtype):
    arr = floats(shape, seed=7)
    e, t = both(arr)
    for scale, zp in ((0.1, 3), (1 / 3, 0)):
        assert repr(ember.quantize_per_tensor(e, scale, zp, E(dtype))) == \
            repr(torch.quantize_per_tensor(t, scale, zp, T(dtype))).replace("torch.", "ember.")


def test_setitem_empty_and_choose_qparams():
    qe, qt = pair()
    for f in (lambda m, q: q.__setitem__(0, 1.0), lambda m, q: q.__setitem__((1, slice(1, 3)), m.tensor([0.5, -0.2])),
              lambda m, q: q.__setitem__(2, q[0])):
        f(ember, qe), f(torch, qt)
        assert_same_q(qe, qt)
    ee = ember._empty_affine_quantized([2, 3], scale=0.5, zero_point=2, dtype=ember.quint8)
    et = torch._empty_affine_quantized([2, 3], scale=0.5, zero_point=2, dtype=torch.quint8)
    assert (ee.shape, ee.q_scale(), ee.q_zero_point()) == (et.shape, et.q_scale(), et.q_zero_point())
    pe = ember._empty_per_channel_affine_quantized([2, 3], scales=ember.tensor([0.1, 0.2]),
                                                   zero_points=ember.tensor([1, 2]), axis=0, dtype=ember.qint8)
    pt = torch._empty_per_channel_affine_quantized([2, 3], scales=torch.tensor([0.1, 0.2]),
                                                   zero_points=torch.tensor([1, 2]), axis=0, dtype=torch.qint8)
    np.testing.assert_array_equal(pe.q_per_channel_scales().numpy(), pt.q_per_channel_scales().numpy())
    assert str(pe.q_per_channel_zero_points().dtype)[6:] == str(pt.q_per_channel_zero_points().dtype)[6:]
    le = ember.empty_like(qe)
    assert le.is_quantized and le.q_scale() == qe.q_scale() and le.dtype is qe.dtype
    x = floats((5, 7), seed=11)
    for rr in (False, True):
        assert ember._choose_qparams_per_tensor(ember.tensor(x), rr) == torch._choose_qparams_per_tensor(
            torch.tensor(x), rr)
    me, mt = same_error(lambda: qe * 2, lambda: qt * 2)
    assert me.startswith(mt.split(" see ")[0])
