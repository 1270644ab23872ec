"""fake_quantize_per_tensor_affine / _per_channel_affine and the learnable form against PyTorch: values, the
straight-through gradients, the gradients of a learnable scale and zero point, bad input."""
import numpy as np
import pytest
import torch
from optable import needs_autograd

import ember

X = np.array([0.15, -1.0, 0.25, 2.5, 300.0, 0.05, -0.35, 0.45], np.float32)


def both(arr, grad=False):
    e, t = ember.tensor(arr), torch.tensor(arr)
    if grad:
        e.requires_grad_(), t.requires_grad_()
    return e, t


@pytest.mark.parametrize("qparams", [(0.1, 3, 0, 255), (0.25, -2, -128, 127), (0.1, 0, -10, 10)])
def test_per_tensor_values(qparams):
    for dtype in ("float32", "float64"):
        e, t = both(X.astype(dtype))
        np.testing.assert_array_equal(ember.fake_quantize_per_tensor_affine(e, *qparams).numpy(),
                                      torch.fake_quantize_per_tensor_affine(t, *qparams).numpy())
        s, z = qparams[:2]
        np.testing.assert_array_equal(
            ember.fake_quantize_per_tensor_affine(e, ember.tensor(s), ember.tensor(z), *qparams[2:]).numpy(),
            torch.fake_quantize_per_tensor_affine(t, torch.tensor(s), torch.tensor(z), *qparams[2:]).numpy())


@needs_autograd
def test_straight_through_gradients():
    e, t = both(X, grad=True)
    ember.fake_quantize_per_tensor_affine(e, 0.1, 3, 0, 255).sum().backward()
    torch.fake_quantize_per_tensor_affine(t, 0.1, 3, 0, 255).sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())
    w = np.arange(-12, 12, dtype=np.float32).reshape(3, 8) / 7
    e, t = both(w, grad=True)
    s, z = np.array([0.1, 0.05, 0.2], np.float32), np.array([3, -1, 0], np.int32)
    ye = ember.fake_quantize_per_channel_affine(e, ember.tensor(s), ember.tensor(z), 0, -10, 10)
    yt = torch.fake_quantize_per_channel_affine(t, torch.tensor(s), torch.tensor(z), 0, -10, 10)
    np.testing.assert_array_equal(ye.detach().numpy(), yt.detach().numpy())
    assert ye.grad_fn.name() == yt.grad_fn.name()
    ye.sum().backward(), yt.sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())


@needs_autograd
@pytest.mark.parametrize("scale,zp,lo,hi,factor", [(0.1, 3.0, 0, 255, 1.0), (0.25, -1.4, -8, 7, 0.5)])
def test_learnable_gradients(scale, zp, lo, hi, factor):
    e, t = both(X, grad=True)
    se, st = both(np.array([scale], np.float32), grad=True)
    ze, zt = both(np.array([zp], np.float32), grad=True)
    ye = ember._fake_quantize_learnable_per_tensor_affine(e, se, ze, lo, hi, factor)
    yt = torch._fake_quantize_learnable_per_tensor_affine(t, st, zt, lo, hi, factor)
    np.testing.assert_array_equal(ye.detach().numpy(), yt.detach().numpy())
    g = np.linspace(-1, 1, X.size).astype(np.float32)
    ye.backward(ember.tensor(g)), yt.backward(torch.tensor(g))
    for a, b in ((e, t), (se, st), (ze, zt)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_bad_input():
    e, t = both(X)
    cases = [lambda m, x: m.fake_quantize_per_tensor_affine(x, 0.1, 300, 0, 255),
             lambda m, x: m.fake_quantize_per_tensor_affine(x, 0.1, 3, 9, 5),
             lambda m, x: m.fake_quantize_per_tensor_affine(x.long(), 0.1, 3, 0, 255),
             lambda m, x: m.fake_quantize_per_channel_affine(x, m.tensor([0.1]), m.tensor([1]), 0, 0, 255),
             lambda m, x: m.fake_quantize_per_channel_affine(x, m.tensor([0.1], dtype=m.float64),
                                                             m.tensor([1], dtype=m.int32), 0, 0, 255),
             lambda m, x: m.fake_quantize_per_channel_affine(x, m.tensor([0.1] * 8),
                                                             m.tensor([1] * 8, dtype=m.int32), 1, 0, 255),
             lambda m, x: m.fake_quantize_per_channel_affine(x, m.tensor([0.1] * 7),
                                                             m.tensor([1] * 7, dtype=m.int32), 0, 0, 255)]
    for case in cases:
        with pytest.raises(Exception) as te:
            case(torch, t)
        with pytest.raises(type(te.value)) as ee:
            case(ember, e)
        assert str(ee.value) == str(te.value), (ee.value, te.value)
