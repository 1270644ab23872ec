"""ember.logit_ (torch.logit_, the in-place function form of logit) against torch: values, dtypes, identity,
errors; its gradient through ember-autograd where that is installed."""
import importlib.util

import numpy as np
import pytest
import torch

import ember

SAMPLES = [0.0, 1e-4, 0.1, 0.3, 0.5, 0.75, 0.999, 1.0]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("eps", [None, 0.05, 1e-6, -1.0])
def test_logit_inplace_matches_torch(dtype, eps):
    t = torch.tensor(SAMPLES, dtype=getattr(torch, dtype))
    e = ember.tensor(SAMPLES, dtype=getattr(ember, dtype))
    t_out, e_out = torch.logit_(t, eps), ember.logit_(e, eps)
    assert e_out is e and t_out is t
    assert e.dtype == getattr(ember, dtype)
    # half results within an ulp: ember rounds the float32 result once, PyTorch's half kernel can be an ulp off
    rtol = {"float32": 2e-7, "float64": 1e-12, "float16": 1e-3, "bfloat16": 8e-3}[dtype]
    np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), rtol=rtol, atol=0)
    assert ember.logit_(ember.tensor([0.25]), eps=0.3).item() == pytest.approx(torch.logit_(torch.tensor([0.25]),
                                                                                            eps=0.3).item())


def test_logit_inplace_refuses_integers():
    for lib in (torch, ember):
        with pytest.raises(RuntimeError):
            lib.logit_(lib.tensor([1, 2]))


@pytest.mark.autograd
@pytest.mark.skipif(importlib.util.find_spec("ember.autograd") is None, reason="needs ember-autograd")
def test_logit_inplace_gradient():
    def run(lib):
        x = lib.tensor([0.2, 0.4, 0.9], dtype=lib.float64, requires_grad=True)
        y = x * 1.0
        lib.logit_(y, 0.3)
        (y * lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)).sum().backward()
        return x.grad.numpy()

    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-12)
