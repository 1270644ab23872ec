"""Paths taken by small graphs (sum's zero-stride gradient, the lean recording path), against PyTorch."""
import numpy as np
import pytest
import torch

import ember

DTYPES = ["float32", "float64", "float16", "bfloat16"]
SHAPES = [(8,), (), (0, 3), (2, 3, 4)]


def _leaves(shape, dtype, transposed=False):
    arr = np.random.default_rng(0).standard_normal(shape)
    t = torch.tensor(arr).to(getattr(torch, dtype))
    e = ember.tensor(arr).to(getattr(ember, dtype))
    if transposed:
        t, e = t.t(), e.t()
    return e.detach().requires_grad_(), t.detach().requires_grad_()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_full_sum_gradient_matches_torch(shape, dtype):
    e, t = _leaves(shape, dtype)
    (e * e).sum().backward()
    (t * t).sum().backward()
    assert e.grad.dtype == getattr(ember, dtype) and tuple(e.grad.shape) == tuple(t.grad.shape)
    np.testing.assert_allclose(e.grad.float().numpy(), t.grad.float().numpy(), rtol=1e-2)


def test_full_sum_gradient_of_non_contiguous_input_and_repeated_backward():
    e, t = _leaves((3, 4), "float64", transposed=True)
    for _ in range(2):  # the second backward accumulates into .grad
        e.sum().backward()
        t.sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())


def test_full_sum_gradient_is_read_only_like_torchs_expanded_gradient():
    e, t = _leaves((3,), "float32")
    ge, gt = ember.autograd.grad(e.sum(), e)[0], torch.autograd.grad(t.sum(), t)[0]
    np.testing.assert_array_equal(ge.numpy(), gt.numpy())
    for g in (ge, gt):
        with pytest.raises(RuntimeError):
            g.add_(1)


def test_full_sum_double_backward():
    e, t = _leaves((4,), "float64")
    for x in (e, t):
        (g,) = (torch if x is t else ember).autograd.grad((x * x).sum(), x, create_graph=True)
        (g * x).sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy())


def test_recording_checks_keep_their_errors():
    e = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        ember.mul(e, e, out=ember.empty(3))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        e.mul_(2)
    with ember.inference_mode():
        inf = ember.ones(3)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        e * inf
