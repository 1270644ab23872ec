"""The integer product of quantized layers (ember._qgemm): the compiled u8 x s8 loop (only where the CPU has AVX-512
VNNI) equals the int64 product for every input, and the ops give the same integers on it and on the float path."""
import numpy as np
import pytest

import ember
from ember import _jit, _qgemm

vnni = pytest.mark.skipif(not _jit.cpu_has("avx512f", "avx512bw", "avx512vnni"),
                          reason="the compiled u8 x s8 product needs AVX-512 VNNI")
rng = np.random.default_rng(19)


def _reference(a, za, w, zb):
    return (a.astype(np.int64) - za) @ (w.astype(np.int64) - np.asarray(zb, np.int64).reshape(-1, 1)).T


@vnni
@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (7, 13, 70), (6, 4, 64), (13, 5, 65), (300, 37, 130), (2, 1024, 257),
                                     (3, 4096, 2050),
                                     (256, 1024, 1024)])
@pytest.mark.parametrize("zero_points", ["none", "per_row"])
def test_product_is_exact(m, k, n, zero_points):
    a = rng.integers(0, 256, (m, k), dtype=np.uint8)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    zb = rng.integers(-128, 128, n) if zero_points == "per_row" else np.zeros(n, np.int64)
    za = int(rng.integers(0, 256))
    with _jit.forced():
        c = _qgemm.product(a, za, _qgemm.Int8Weight(w, zb))
    assert c is not None and c.dtype == np.int32
    np.testing.assert_array_equal(c, _reference(a, za, w, zb))


@vnni
@pytest.mark.parametrize("a_value, w_value, za, zb", [(255, -128, 0, 127), (255, -128, 255, -128), (0, 127, 255, -128),
                                                      (255, 127, 0, 0)])
def test_product_extremes(a_value, w_value, za, zb):
    """The longest product the loop takes, of the largest magnitudes, with the largest zero-point terms."""
    k = _qgemm.K_MAX
    a = np.full((3, k), a_value, np.uint8)
    w = np.full((17, k), w_value, np.int8)
    with _jit.forced():
        c = _qgemm.product(a, za, _qgemm.Int8Weight(w, zb))
    np.testing.assert_array_equal(c, _reference(a, za, w, np.full(17, zb)))
    longer = _qgemm.Int8Weight(np.zeros((1, k + 1), np.int8), 0)
    assert _qgemm.product(np.zeros((1, k + 1), np.uint8), 0, longer) is None  # (the float path's)


@vnni
@pytest.mark.parametrize("shape, weight, stride, padding, dilation, groups", [
    ((2, 6, 9, 7), (8, 3, 3, 2), (1, 2), (1, 0), (1, 1), 2),
    ((1, 3, 5, 5), (5, 3, 2, 2), (2, 1), (2, 2), (2, 1), 1),
    ((3, 4, 6, 8), (8, 1, 3, 3), (1, 1), (1, 1), (1, 1), 4),
    ((2, 5, 4, 3, 5), (7, 5, 2, 1, 3), (1, 1, 2), (0, 1, 1), (1, 2, 1), 1),
    ((2, 16, 11, 13), (33, 16, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((3, 5, 10, 17), (70, 5, 3, 2), (2, 3), (2, 1), (2, 1), 1),
    ((1, 1, 7, 9), (3, 1, 1, 1), (1, 1), (0, 0), (1, 1), 1),
    ((8, 16, 24, 24), (40, 16, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # (split over the threads by images)
])
@pytest.mark.parametrize("symmetric", [False, True])
def test_conv_is_exact(shape, weight, stride, padding, dilation, groups, symmetric):
    """Windows copied (groups, weight zero points, 3-d) or read in place (2-d, one group, symmetric weights)."""
    torch = pytest.importorskip("torch")
    x = rng.integers(0, 256, shape, dtype=np.uint8)
    w = rng.integers(-128, 128, weight, dtype=np.int8)
    zb, za = np.zeros(weight[0], np.int64) if symmetric else rng.integers(-3, 3, weight[0]), 77
    with _jit.forced():
        r = _qgemm.conv(x, za, _qgemm.Int8ConvWeight(w, zb, groups), weight[2:], stride, padding, dilation)
    f = torch.nn.functional.conv2d if len(shape) == 4 else torch.nn.functional.conv3d
    zb_shape = (-1,) + (1,) * (len(shape) - 1)
    ref = f(torch.tensor(x.astype(np.float64) - za), torch.tensor(w.astype(np.float64) - zb.reshape(zb_shape)), None,
            stride, padding, dilation, groups).numpy()
    assert r.shape == ref.shape
    np.testing.assert_array_equal(r, ref)


def _without_vnni(monkeypatch):
    """As on a CPU without VNNI, where the loops' module refuses to load and ember._jit serves none of its loops."""
    real_import = _jit._import

    def refuse(module):
        if module == "ember._qgemm_loops":
            raise ImportError("ember._qgemm_loops needs AVX-512 VNNI")
        return real_import(module)
    monkeypatch.setattr(_jit, "_import", refuse)
    monkeypatch.setattr(_jit, "_ready", {k: f for k, f in _jit._ready.items() if k[0] != "ember._qgemm_loops"})
    monkeypatch.setattr(_jit, "_failed", set())


def test_without_vnni_the_float_path_serves(monkeypatch):
    _without_vnni(monkeypatch)
    with _jit.forced():
        assert _qgemm.product(np.ones((8, 8), np.uint8), 0, _qgemm.Int8Weight(np.ones((8, 8), np.int8), 0)) is None
        w = _qgemm.Int8ConvWeight(np.ones((1, 1, 1, 1), np.int8), 0, 1)
        assert _qgemm.conv(np.ones((1, 1, 3, 3), np.uint8), 0, w, (1, 1), (1, 1), (0, 0), (1, 1)) is None


def _linear_and_conv(engine_path):
    """ops.quantized linear, dynamic linear and conv2d outputs (odd sizes, per-channel weights with zero points)."""
    r = np.random.default_rng(3)
    x = ember.quantize_per_tensor(ember.tensor(r.standard_normal((5, 37)).astype(np.float32)), 0.05, 117,
                                  ember.quint8)
    w = ember.quantize_per_channel(ember.tensor(r.standard_normal((19, 37)).astype(np.float32)),
                                   ember.tensor(r.uniform(0.01, 0.03, 19)), ember.tensor(r.integers(-4, 4, 19)), 0,
                                   ember.qint8)
    packed = ember.ops.quantized.linear_prepack(w, ember.tensor(r.standard_normal(19).astype(np.float32)))
    xc = ember.quantize_per_tensor(ember.tensor(r.standard_normal((2, 6, 9, 7)).astype(np.float32)), 0.05, 117,
                                   ember.quint8)
    wc = ember.quantize_per_tensor(ember.tensor(r.standard_normal((8, 3, 3, 2)).astype(np.float32)), 0.02, 0,
                                   ember.qint8)
    pc = ember.ops.quantized.conv2d_prepack(wc, None, [1, 2], [1, 0], [1, 1], 2)
    # one group, symmetric weights: windows read in place, requantized in the product's tiles
    w1 = ember.quantize_per_channel(ember.tensor(r.standard_normal((70, 6, 3, 3)).astype(np.float32)),
                                    ember.tensor(r.uniform(0.01, 0.03, 70)), ember.tensor(np.zeros(70, np.int64)), 0,
                                    ember.qint8)
    p1 = ember.ops.quantized.conv2d_prepack(w1, ember.tensor(r.standard_normal(70).astype(np.float32)), [2, 1],
                                            [1, 2], [1, 2], 1)
    with engine_path():
        return (ember.ops.quantized.linear(x, packed, 0.3, 64).int_repr().numpy(),
                ember.ops.quantized.linear_dynamic(x.dequantize(), packed).numpy(),
                ember.ops.quantized.conv2d(xc, pc, 0.2, 50).int_repr().numpy(),
                ember.ops.quantized.conv2d(xc, p1, 0.4, 50).int_repr().numpy(),
                ember.ops.quantized.conv2d_relu(xc, p1, 0.4, 50).int_repr().numpy())


@vnni
def test_ops_agree_on_both_paths(monkeypatch):
    compiled = _linear_and_conv(_jit.forced)
    _without_vnni(monkeypatch)
    floats = _linear_and_conv(_jit.forced)
    for a, b in zip(compiled, floats):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype, zero_point", [("quint8", 131), ("qint8", -7)])
@pytest.mark.parametrize("n", [15000, 300001])
def test_quantize_and_dequantize_loops(dtype, zero_point, n, monkeypatch):
    """The compiled (de)quantizing loops (from 128K elements in parts over ember._parallel's spinning helpers) give
    the NumPy path's values, and PyTorch's."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(5).standard_normal(n).astype(np.float32) * 4
    with monkeypatch.context() as m:
        m.setattr(_jit, "loop", lambda *args, **kwargs: None)
        q = ember.quantize_per_tensor(ember.tensor(x), 0.037, zero_point, getattr(ember, dtype))
        plain = q.int_repr().numpy(), q.dequantize().numpy()
    with _jit.forced():
        q = ember.quantize_per_tensor(ember.tensor(x), 0.037, zero_point, getattr(ember, dtype))
        compiled = q.int_repr().numpy(), q.dequantize().numpy()
    qt = torch.quantize_per_tensor(torch.tensor(x), 0.037, zero_point, getattr(torch, dtype))
    for a, b, t in zip(compiled, plain, (qt.int_repr().numpy(), qt.dequantize().numpy())):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, t)


def test_more_ops_match_torch():
    """conv3d, conv_transpose2d (fbgemm: PyTorch's x86 path reorders non-square transposed weights on VNNI CPUs) and
    the float16 dynamic linear layer, against PyTorch."""
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(11)
    x3, w3 = r.standard_normal((2, 4, 5, 6, 7)).astype(np.float32), r.standard_normal((6, 4, 2, 3, 2)) * 0.1
    xt, wt = r.standard_normal((2, 4, 5, 6)).astype(np.float32), r.standard_normal((4, 4, 3, 3)) * 0.1
    xl, wl = r.standard_normal((3, 9)).astype(np.float32), r.standard_normal((5, 9)).astype(np.float32)
    bias = r.standard_normal(6).astype(np.float32)
    out = {}
    for m in (ember, torch):
        saved, m.backends.quantized.engine = m.backends.quantized.engine, "fbgemm"
        try:
            Qm, q = m.ops.quantized, lambda a, s, z, d, m=m: m.quantize_per_tensor(m.tensor(a), s, z, d)
            p3 = Qm.conv3d_prepack(q(w3.astype(np.float32), 0.01, 0, m.qint8), m.tensor(bias), [1, 2, 1], [1, 0, 1],
                                   [1, 1, 2], 1)
            pt = Qm.conv_transpose2d_prepack(q(wt.astype(np.float32), 0.01, 0, m.qint8), m.tensor(bias[:4]), [2, 1],
                                             [1, 0], [1, 0], [1, 1], 1)
            p16 = Qm.linear_prepack_fp16(m.tensor(wl), m.tensor(bias[:5]))
            out[m.__name__] = [Qm.conv3d(q(x3, 0.05, 120, m.quint8), p3, 0.1, 60).int_repr().numpy(),
                               Qm.conv_transpose2d(q(xt, 0.05, 120, m.quint8), pt, 0.1, 60).int_repr().numpy(),
                               Qm.linear_dynamic_fp16(m.tensor(xl), p16).numpy()]
        finally:
            m.backends.quantized.engine = saved
    for e, t in zip(out["ember"], out["torch"]):
        np.testing.assert_array_equal(e, t)


@vnni
def test_conv_requantized_in_tiles():
    """Sums requantized in the product's tiles equal the sums requantized by ember._qloops.requantize's formula (a
    convolution large enough to split over the threads)."""
    x = rng.integers(0, 256, (8, 16, 24, 24), dtype=np.uint8)
    weight = _qgemm.Int8ConvWeight(rng.integers(-128, 128, (40, 16, 3, 3), dtype=np.int8), 0, 1)
    add = rng.standard_normal(40).astype(np.float32) * 100
    multiplier = rng.uniform(1e-4, 1e-3, 40).astype(np.float32)
    geometry = (3, 3), (1, 1), (1, 1), (1, 1)
    with _jit.forced():
        sums = _qgemm.conv(x, 120, weight, *geometry)
        for lo in (0, 64):
            q = _qgemm.conv_requantized(x, 120, weight, *geometry, add, multiplier, 64, lo, 255)
            shape = (1, -1, 1, 1)
            ref = np.rint((sums.astype(np.float32) + add.reshape(shape)) * multiplier.reshape(shape)) + np.float32(64)
            np.testing.assert_array_equal(q, np.clip(ref, lo, 255).astype(np.uint8))
