"""Quantized Linear and convolutions against torch's, on every engine: for the same quantized weights, bias and
input, the output integers agree on at least 99.9% of the elements and by one step everywhere."""
import numpy as np
import pytest
import torch
import torch.ao.nn.intrinsic.quantized as tnniq
import torch.ao.nn.quantized as tnnq
from _torch_compare import assert_agrees, ints, numpy, to_ember

import ember
import ember.ao.nn.intrinsic.quantized as nniq
import ember.ao.nn.quantized as nnq

ENGINES = ["x86", "fbgemm", "qnnpack", "onednn"]


def _engine(name):
    torch.backends.quantized.engine = name
    ember.backends.quantized.engine = name


def _weight(shape, per_channel, seed, axis=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(shape, generator=g) * 0.2
    if per_channel:
        scales = w.abs().flatten(1).amax(1).double() / 127 if axis == 0 else \
            w.abs().transpose(0, 1).flatten(1).amax(1).double() / 127
        return torch.quantize_per_channel(w, scales, torch.zeros(w.shape[axis], dtype=torch.long), axis, torch.qint8)
    return torch.quantize_per_tensor(w, float(w.abs().max()) / 127, 0, torch.qint8)


def _input(shape, seed, zero_point):
    g = torch.Generator().manual_seed(seed + 100)
    return torch.quantize_per_tensor(torch.randn(shape, generator=g) * 2, 0.03, zero_point, torch.quint8)


def _pair(t_cls, e_cls, args, weight, bias, scale, zero_point, **kwargs):
    t, e = t_cls(*args, **kwargs), e_cls(*args, **kwargs)
    t.set_weight_bias(weight, bias)
    e.set_weight_bias(to_ember(weight), None if bias is None else to_ember(bias))
    t.scale, t.zero_point = e.scale, e.zero_point = scale, zero_point
    return t, e


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("cls", ["Linear", "LinearReLU"])
def test_linear(engine, per_channel, cls):
    _engine(engine)
    mods = (tnnq, nnq) if cls == "Linear" else (tnniq, nniq)
    w = _weight((48, 200), per_channel, 1)
    bias = torch.randn(48, generator=torch.Generator().manual_seed(2))
    t, e = _pair(getattr(mods[0], cls), getattr(mods[1], cls), (200, 48), w, bias, 0.05, 70)
    x = _input((3, 40, 200), 3, 0 if engine == "onednn" else 64)
    assert_agrees(e(to_ember(x)), t(x))


def test_linear_without_bias_and_exactness_fallback():
    """A weight whose rows' absolute sums exceed what float32 sums keep exact takes float64 products."""
    w = torch.quantize_per_tensor(torch.full((8, 4096), 0.127), 0.001, 0, torch.qint8)  # 127 everywhere
    t, e = _pair(tnnq.Linear, nnq.Linear, (4096, 8), w, None, 50.0, 10)
    x = torch.quantize_per_tensor(torch.full((2, 4096), 2.55), 0.01, 0, torch.quint8)  # 255 everywhere
    got = e(to_ember(x))
    assert_agrees(got, t(x), at_least=1.0)
    np.testing.assert_array_equal(ints(got), np.clip(np.rint(4096 * 255 * 127 * 0.01 * 0.001 / 50) + 10, 0, 255))


CONVS = [("Conv1d", (2, 8, 19), {"stride": 2, "padding": 1}),
         ("Conv2d", (2, 8, 11, 9), {"padding": 1, "dilation": 2}),
         ("Conv2d", (2, 8, 9, 9), {"groups": 2, "stride": (2, 1)}),
         ("Conv3d", (1, 4, 5, 6, 5), {"padding": 1})]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("name, shape, kwargs", CONVS)
@pytest.mark.parametrize("relu", [False, True])
def test_conv(engine, per_channel, name, shape, kwargs, relu):
    _engine(engine)
    cls_name = name.replace("Conv", "ConvReLU") if relu else name
    t_cls, e_cls = (getattr(tnniq, cls_name), getattr(nniq, cls_name)) if relu else (getattr(tnnq, name),
                                                                                     getattr(nnq, name))
    cin, groups, k = shape[1], kwargs.get("groups", 1), 3
    w = _weight((6, cin // groups) + (k,) * (len(shape) - 2), per_channel, 4)
    bias = torch.randn(6, generator=torch.Generator().manual_seed(5))
    t, e = _pair(t_cls, e_cls, (cin, 6, k), w, bias, 0.08, 60, **kwargs)
    x = _input(shape, 6, 0 if engine == "onednn" else 90)
    assert_agrees(e(to_ember(x)), t(x))


@pytest.mark.parametrize("engine", ["x86", "fbgemm", "qnnpack"])
@pytest.mark.parametrize("name, shape, kwargs", [("ConvTranspose1d", (2, 6, 7), {"stride": 2, "padding": 1,
                                                                                  "output_padding": 1}),
                                                  ("ConvTranspose2d", (2, 6, 5, 4), {"stride": 2, "groups": 2}),
                                                  ("ConvTranspose2d", (1, 6, 5, 5), {"padding": 1, "dilation": 2})])
def test_conv_transpose(engine, name, shape, kwargs):
    """Weights of as many output as input channels: torch's x86/onednn paths transpose non-square ones wrongly
    (the reference for those is fbgemm, below)."""
    _engine(engine)
    groups = kwargs.get("groups", 1)
    w = _weight((6, 6 // groups) + (3,) * (len(shape) - 2), False, 7)
    bias = torch.randn(6, generator=torch.Generator().manual_seed(8))
    t, e = _pair(getattr(tnnq, name), getattr(nnq, name), (6, 6, 3), w, bias, 0.1, 64, **kwargs)
    x = _input(shape, 9, 70)
    assert_agrees(e(to_ember(x)), t(x))


@pytest.mark.parametrize("engine", ["x86", "onednn"])
def test_conv_transpose_non_square_is_the_mathematical_result(engine):
    """torch's x86 (AVX512-VNNI, no output padding) and onednn paths scramble a non-square transposed-convolution
    weight; ember gives what fbgemm gives (the transposed convolution of the weight as stored)."""
    w = _weight((4, 8, 3, 3), False, 10)
    bias = torch.randn(8, generator=torch.Generator().manual_seed(11))
    _engine("fbgemm")
    t, _ = _pair(tnnq.ConvTranspose2d, nnq.ConvTranspose2d, (4, 8, 3), w, bias, 0.1, 64, stride=2, padding=1)
    x = _input((2, 4, 5, 5), 12, 70)
    reference = t(x)
    _engine(engine)
    _, e = _pair(tnnq.ConvTranspose2d, nnq.ConvTranspose2d, (4, 8, 3), w, bias,
                 0.1, 64, stride=2, padding=1)
    assert_agrees(e(to_ember(x)), reference, at_least=1.0)
    dequantized = torch.nn.functional.conv_transpose2d(x.dequantize(), w.dequantize(), bias, 2, 1)
    np.testing.assert_allclose(numpy(e(to_ember(x)).dequantize()), dequantized.numpy(), atol=0.1 / 2 + 1e-6)


def test_conv_reflect_padding():
    w = _weight((6, 4, 3, 3), True, 13)
    t, e = _pair(tnnq.Conv2d, nnq.Conv2d, (4, 6, 3), w, None, 0.05, 64, padding=1, padding_mode="reflect")
    x = _input((1, 4, 6, 6), 14, 80)
    assert_agrees(e(to_ember(x)), t(x))


def test_functional_linear_and_conv():
    import torch.ao.nn.quantized.functional as tF

    import ember.ao.nn.quantized.functional as eF
    w, x = _weight((5, 7), False, 15), _input((4, 7), 16, 30)
    assert_agrees(eF.linear(to_ember(x), to_ember(w), None, 0.02, 40), tF.linear(x, w, None, 0.02, 40))
    assert_agrees(eF.linear(to_ember(x), to_ember(w)), tF.linear(x, w))
    w, x = _weight((3, 2, 3, 3), True, 17), _input((1, 2, 6, 6), 18, 30)
    assert_agrees(eF.conv2d(to_ember(x), to_ember(w), None, padding=1, scale=0.05, zero_point=10),
                  tF.conv2d(x, w, None, padding=1, scale=0.05, zero_point=10))
    with pytest.raises(NotImplementedError, match="Only torch.quint8 is supported for activation tensor"):
        eF.conv2d(to_ember(torch.quantize_per_tensor(torch.randn(1, 2, 4, 4), 0.1, 0, torch.qint8)), to_ember(w),
                  None)
