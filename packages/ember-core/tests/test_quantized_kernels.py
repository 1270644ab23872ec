"""Quantized kernels (``ember.ops.quantized`` and the top-level ops PyTorch runs on quantized tensors) against
PyTorch's x86 kernels. Sizes are multiples of 64 elements: PyTorch computes a tail shorter than its vector width
with scalar code whose roundings differ (AVX-512 here, 32 elements on AVX2 builds)."""
import warnings

import numpy as np
import pytest
import torch

import ember
from ember._registry import REGISTRY

warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
EQ, TQ = ember.ops.quantized, torch.ops.quantized


def floats(shape, scale=2.0, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def qpair(shape=(4, 256), scale=0.031, zp=3, dtype="quint8", seed=0, spread=2.0):
    arr = floats(shape, spread, seed)
    return (ember.quantize_per_tensor(ember.tensor(arr), scale, zp, getattr(ember, dtype)),
            torch.quantize_per_tensor(torch.tensor(arr), scale, zp, getattr(torch, dtype)))


def assert_same_q(e, t, exact=True):
    assert str(e.dtype)[6:] == str(t.dtype)[6:] and tuple(e.shape) == tuple(t.shape)
    assert e.q_scale() == pytest.approx(t.q_scale(), rel=1e-15, abs=0) and e.q_zero_point() == t.q_zero_point()
    a, b = e.int_repr().numpy().astype(np.int64), t.int_repr().numpy().astype(np.int64)
    if exact:
        np.testing.assert_array_equal(a, b)
    else:  # float kernels (exp, tanh) may differ in their last bit from PyTorch's SIMD ones: one step at most
        assert np.abs(a - b).max() <= 1 and (a == b).mean() >= 0.999, (np.abs(a - b).max(), (a == b).mean())


DTYPES = [("quint8", 3, 7, 11), ("qint8", -3, 5, 2)]


@pytest.mark.parametrize("dtype,za,zb,zo", DTYPES)
@pytest.mark.parametrize("name", ["add", "add_relu", "mul", "mul_relu"])
def test_binary(dtype, za, zb, zo, name):
    ae, at = qpair(scale=0.031, zp=za, dtype=dtype, seed=1)
    be, bt = qpair(scale=0.047, zp=zb, dtype=dtype, seed=2, spread=3.0)
    for scale in (0.05, 0.2, 0.013):
        assert_same_q(getattr(EQ, name)(ae, be, scale, zo), getattr(TQ, name)(at, bt, scale, zo))


def test_binary_broadcasts():
    ae, at = qpair(shape=(4, 64), seed=1)
    be, bt = qpair(shape=(1, 64), seed=2)
    assert_same_q(EQ.add(ae, be, 0.05, 4), TQ.add(at, bt, 0.05, 4))


@pytest.mark.parametrize("dtype,za,zb,zo", DTYPES)
@pytest.mark.parametrize("name", ["add_scalar", "add_scalar_relu", "mul_scalar", "mul_scalar_relu"])
@pytest.mark.parametrize("b", [0.7, -0.7, 3.0, -40.0, 40.0, 0.0])
def test_scalar(dtype, za, zb, zo, name, b):
    if name.startswith("add") and b == 0.0:
        b = 0.01
    qe, qt = qpair(zp=za, dtype=dtype)
    assert_same_q(getattr(EQ, name)(qe, b), getattr(TQ, name)(qt, b))


@pytest.mark.parametrize("dtype,za,zb,zo", DTYPES)
def test_cat(dtype, za, zb, zo):
    ae, at = qpair(shape=(2, 64), zp=za, dtype=dtype, seed=1)
    be, bt = qpair(shape=(3, 64), scale=0.047, zp=zb, dtype=dtype, seed=2)
    assert_same_q(EQ.cat([ae, be], 0, 0.05, zo), TQ.cat([at, bt], 0, 0.05, zo))
    assert_same_q(EQ.cat([ae, ae], 1, None, None), TQ.cat([at, at], 1, None, None))
    assert_same_q(EQ.cat_relu([ae, be], 0, 0.05, zo), TQ.cat_relu([at, bt], 0, 0.05, zo))


@pytest.mark.parametrize("dtype,za,zb,zo", DTYPES)
def test_activations(dtype, za, zb, zo):
    qe, qt = qpair(zp=za, dtype=dtype, spread=3.0)
    assert_same_q(EQ.relu6(qe), TQ.relu6(qt))
    assert_same_q(EQ.clamp(qe, -0.5, 1.5), TQ.clamp(qt, -0.5, 1.5))
    assert_same_q(EQ.threshold(qe, 0.5, -1.0), TQ.threshold(qt, 0.5, -1.0))
    assert_same_q(EQ.leaky_relu(qe, 0.1, False, 0.02, zo), TQ.leaky_relu(qt, 0.1, False, 0.02, zo))
    assert_same_q(EQ.hardswish(qe, 0.03, zo), TQ.hardswish(qt, 0.03, zo))
    assert_same_q(EQ.sigmoid(qe, 1 / 256, zo), TQ.sigmoid(qt, 1 / 256, zo), exact=False)
    assert_same_q(EQ.elu(qe, 0.03, zo, 0.8), TQ.elu(qt, 0.03, zo, 0.8), exact=False)
    assert_same_q(EQ.celu(qe, 0.03, zo, 1.5), TQ.celu(qt, 0.03, zo, 1.5), exact=False)
    assert_same_q(EQ.softmax(qe, 1, 1 / 256, zo), TQ.softmax(qt, 1, 1 / 256, zo), exact=False)


TOP_LEVEL = [
    ("relu", lambda m, q: m.relu(q), True), ("relu method", lambda m, q: q.relu(), True),
    ("relu_", lambda m, q: q.clone().relu_(), True), ("hardtanh", lambda m, q: m._C._nn.hardtanh(q, -0.5, 2.0)
                                                      if m is torch else REGISTRY['hardtanh'].fn(q, -0.5, 2.0), True),
    ("clamp", lambda m, q: m.clamp(q, -1.0, 1.0), True), ("clamp_min", lambda m, q: q.clamp(min=0.2), True),
    ("sigmoid", lambda m, q: m.sigmoid(q), False), ("tanh", lambda m, q: m.tanh(q), False),
    ("hardsigmoid", lambda m, q: m._C._nn.hardsigmoid(q) if m is torch else REGISTRY['hardsigmoid'].fn(q), False),
    ("leaky_relu", lambda m, q: m._C._nn.leaky_relu(q, 0.2) if m is torch else REGISTRY['leaky_relu'].fn(q, 0.2), True),
    ("mean", lambda m, q: q.mean(), True), ("mean dim", lambda m, q: q.mean(1), True),
    ("max", lambda m, q: q.max(), True), ("min", lambda m, q: q.min(), True),
    ("max dim", lambda m, q: q.max(1)[0], True), ("topk", lambda m, q: q.topk(3)[0], True),
    ("sort", lambda m, q: q.sort(1)[0], True),
    ("max_pool2d", lambda m, q: m.max_pool2d(q.reshape(2, 2, 16, 16), 2), True),
    ("avg_pool2d", lambda m, q: m._C._nn.avg_pool2d(q.reshape(2, 2, 16, 16), 2) if m is torch
     else REGISTRY['avg_pool2d'].fn(q.reshape(2, 2, 16, 16), 2), True),
    ("adaptive_avg_pool2d", lambda m, q: m._C._nn.adaptive_avg_pool2d(q.reshape(2, 2, 16, 16), 4) if m is torch
     else REGISTRY['adaptive_avg_pool2d'].fn(q.reshape(2, 2, 16, 16), 4), True),
]


@pytest.mark.parametrize("dtype,za,zb,zo", DTYPES)
@pytest.mark.parametrize("name,f,exact", TOP_LEVEL, ids=[c[0] for c in TOP_LEVEL])
def test_top_level(dtype, za, zb, zo, name, f, exact):
    qe, qt = qpair(zp=za, dtype=dtype, spread=3.0)
    assert_same_q(f(ember, qe), f(torch, qt), exact)


def test_indices_of_sorting_ops():
    """(The integers tie: indices are checked by what they point at.)"""
    qe, _ = qpair()
    ints = qe.int_repr().numpy()
    for values, indices in (qe.topk(5), qe.max(1, keepdim=True), qe.sort(1)):
        np.testing.assert_array_equal(np.take_along_axis(ints, indices.numpy(), 1), values.int_repr().numpy())


def test_kernels_refuse_float_and_per_channel():
    f = ember.randn(4)
    with pytest.raises(NotImplementedError, match="'CPU' backend"):
        EQ.add(f, f, 0.1, 0)
    pc = ember.quantize_per_channel(ember.randn(2, 3), ember.tensor([0.1, 0.2]), ember.tensor([0, 0]), 0,
                                    ember.qint8)
    with pytest.raises(RuntimeError, match="per-tensor"):
        EQ.relu6(pc)


def _linear_case(m, x, w, b, per_channel):
    if per_channel:
        m_out = w.shape[0]
        qw = m.quantize_per_channel(m.tensor(w), m.tensor(np.linspace(0.001, 0.004, m_out)),
                                    m.tensor(np.arange(m_out) % 5 - 2), 0, m.qint8)
    else:
        qw = m.quantize_per_tensor(m.tensor(w), 0.002, 3, m.qint8)
    return m.ops.quantized.linear_prepack(qw, None if b is None else m.tensor(b))


@pytest.mark.parametrize("shape", [(64, 256, 128), (3, 1000, 64), (2, 7, 3), ((2, 5), 16, 8)])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(shape, per_channel, bias):
    lead, k, n = shape
    lead = lead if isinstance(lead, tuple) else (lead,)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(lead + (k,)).astype(np.float32)
    w = (rng.standard_normal((n, k)) * 0.1).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    pe, pt = _linear_case(ember, x, w, b, per_channel), _linear_case(torch, x, w, b, per_channel)
    qe = ember.quantize_per_tensor(ember.tensor(x), 0.03, 120, ember.quint8)
    qt = torch.quantize_per_tensor(torch.tensor(x), 0.03, 120, torch.quint8)
    for name in ("linear", "linear_relu"):
        assert_same_q(getattr(EQ, name)(qe, pe, 0.05, 64), getattr(TQ, name)(qt, pt, 0.05, 64))
    for rr in (False, True):
        for name in ("linear_dynamic", "linear_relu_dynamic"):
            np.testing.assert_array_equal(getattr(EQ, name)(ember.tensor(x), pe, rr).numpy(),
                                          getattr(TQ, name)(torch.tensor(x), pt, rr).numpy())
    we, be = pe.unpack()
    assert we.dtype is ember.qint8 and (be is None) == (b is None)


def test_linear_errors():
    w = np.ones((4, 3), np.float32)
    for f in (lambda m: m.ops.quantized.linear_prepack(m.quantize_per_tensor(m.tensor(w), 0.1, 0, m.quint8)),
              lambda m: m.ops.quantized.linear(m.quantize_per_tensor(m.tensor(w), 0.1, 0, m.qint8),
                                               m.ops.quantized.linear_prepack(
                                                   m.quantize_per_tensor(m.tensor(w), 0.1, 0, m.qint8)), 0.1, 0),
              lambda m: m.ops.quantized.linear(m.quantize_per_tensor(m.tensor(w.T), 0.1, 0, m.quint8),
                                               m.ops.quantized.linear_prepack(
                                                   m.quantize_per_tensor(m.tensor(w), 0.1, 0, m.qint8)), 0.1, 0)):
        with pytest.raises(RuntimeError) as te:
            f(torch)
        with pytest.raises(RuntimeError) as ee:
            f(ember)
        assert str(ee.value) == str(te.value)


CONVS = [  # dims, (N, C, spatial), O, kernel, stride, padding, dilation, groups
    (2, (2, 16, (12, 12)), 32, 3, 1, 1, 1, 1), (2, (2, 16, (12, 11)), 32, 3, 2, 0, 1, 1),
    (2, (2, 16, (12, 12)), 32, 3, 1, 2, 2, 4), (2, (2, 8, (9, 9)), 8, 1, 1, 0, 1, 1),
    (1, (2, 8, (20,)), 12, 5, 2, 1, 1, 2), (3, (1, 4, (6, 5, 7)), 6, 3, 1, 1, 1, 1),
    (2, (1, 64, (8, 8)), 16, 3, 1, 1, 1, 1),
]


@pytest.mark.parametrize("dims,inp,o,k,stride,pad,dil,groups", CONVS)
@pytest.mark.parametrize("per_channel", [False, True])
def test_conv(dims, inp, o, k, stride, pad, dil, groups, per_channel):
    n, c, spatial = inp
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, c) + spatial).astype(np.float32)
    w = (rng.standard_normal((o, c // groups) + (k,) * dims) * 0.1).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    out = {}
    for m in (ember, torch):
        if per_channel:
            qw = m.quantize_per_channel(m.tensor(w), m.tensor(np.linspace(0.001, 0.004, o)),
                                        m.tensor(np.zeros(o, np.int64)), 0, m.qint8)
        else:
            qw = m.quantize_per_tensor(m.tensor(w), 0.002, 0, m.qint8)
        qx = m.quantize_per_tensor(m.tensor(x), 0.03, 120, m.quint8)
        for bias in (m.tensor(b), None):
            for suffix in ("", "_relu"):  # (a fresh packing each: torch's oneDNN path reuses the first call's relu)
                p = getattr(m.ops.quantized, f"conv{dims}d_prepack")(qw, bias, [stride] * dims, [pad] * dims,
                                                                      [dil] * dims, groups)
                out.setdefault(m.__name__, []).append(
                    getattr(m.ops.quantized, f"conv{dims}d{suffix}")(qx, p, 0.05, 64))
            out.setdefault(m.__name__ + " geometry", []).append(
                (p.stride(), p.padding(), p.dilation(), p.groups(), tuple(p.unpack()[0].shape)))
    for i, (e, t) in enumerate(zip(out["ember"], out["torch"])):
        # without a bias torch's x86 path (oneDNN) rounds exact ties of the requantized value its own way (a few
        # elements in ten thousand); with one, fbgemm's and oneDNN's formula agree bit for bit
        assert_same_q(e, t, exact=i < 2)
    assert out["ember geometry"] == out["torch geometry"]


@pytest.mark.parametrize("dtype,za,zb,zo", DTYPES)
def test_add_compiled_loop(dtype, za, zb, zo):
    from ember import _jit
    ae, at = qpair(shape=(4, 4096), scale=0.031, zp=za, dtype=dtype, seed=1)
    be, bt = qpair(shape=(4, 4096), scale=0.047, zp=zb, dtype=dtype, seed=2, spread=3.0)
    with _jit.forced():
        for name in ("add", "add_relu"):
            assert_same_q(getattr(EQ, name)(ae, be, 0.05, zo), getattr(TQ, name)(at, bt, 0.05, zo))


@pytest.mark.parametrize("dtype,za,zb,zo", DTYPES)
def test_normalization(dtype, za, zb, zo):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 8, 6, 6)) * 2).astype(np.float32)
    params = [rng.uniform(0.5, 1.5, 8), rng.standard_normal(8), rng.standard_normal(8) * 0.1, rng.uniform(0.5, 2, 8)]
    ln = [rng.uniform(0.5, 1.5, 36), rng.standard_normal(36)]
    outs = {}
    for m in (ember, torch):
        qx = m.quantize_per_tensor(m.tensor(x), 0.03, za, getattr(m, dtype))
        w, b, mean, var = (m.tensor(p.astype(np.float32)) for p in params)
        lw, lb = (m.tensor(p.astype(np.float32).reshape(6, 6)) for p in ln)
        Qm = m.ops.quantized
        outs[m.__name__] = [Qm.batch_norm2d(qx, w, b, mean, var, 1e-5, 0.05, zo),
                            Qm.batch_norm2d_relu(qx, w, b, mean, var, 1e-5, 0.05, zo),
                            Qm.layer_norm(qx, [6, 6], lw, lb, 1e-5, 0.05, zo),
                            Qm.group_norm(qx, 4, w, b, 1e-5, 0.05, zo),
                            Qm.instance_norm(qx, w, b, 1e-5, 0.05, zo)]
    for e, t in zip(outs["ember"], outs["torch"]):
        assert_same_q(e, t, exact=False)  # (float statistics: PyTorch's SIMD sums may differ in the last bit)
