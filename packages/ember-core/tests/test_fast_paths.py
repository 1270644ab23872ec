"""Accuracy of the NumPy fast paths whose results depend on the order of operations (the op table checks
their values on samples where the order does not matter)."""
import numpy as np
import pytest
import torch

import ember


@pytest.mark.parametrize("shape", [(4, 1_000_000), (64, 4096), (8, 1500), (3_000_001,), (3, 2_800_001)])
@pytest.mark.parametrize("kind", ["uniform", "normal"])
def test_float32_sums_stay_about_as_accurate_as_torch(shape, kind):
    rng = np.random.default_rng(sum(shape))
    x = (rng.random(shape) if kind == "uniform" else rng.standard_normal(shape)).astype(np.float32)
    ref = x.astype(np.float64).sum(-1)
    scale = np.abs(x).astype(np.float64).sum(-1).max()  # the size of the partial sums
    torch_err = np.abs(torch.from_numpy(x).sum(-1).numpy() - ref).max() / scale
    for e in (ember.tensor(x).sum(-1), ember.tensor(x).mean(-1) * shape[-1]):
        assert e.dtype == ember.float32
        assert np.abs(e.numpy() - ref).max() / scale <= 3 * torch_err + 4 * np.finfo(np.float32).eps


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("dim, keepdim", [((1, 2), True), (-1, False), (None, False)])
def test_sums_split_over_threads_match_torch(dtype, dim, keepdim):
    x = np.random.default_rng(1).standard_normal((4, 3, 700_001))  # beyond the size that splits rows
    e, t = ember.tensor(x).to(getattr(ember, dtype)), torch.tensor(x).to(getattr(torch, dtype))
    for name in ("sum", "mean"):
        args = () if dim is None else (dim, keepdim)
        a, b = getattr(e, name)(*args), getattr(t, name)(*args)
        assert str(a.dtype) == str(b.dtype).replace("torch", "ember") and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.float().numpy(), b.float().numpy(), rtol=1e-3, atol=1e-3 * x.shape[-1] ** 0.5)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_sigmoid_split_over_threads_matches_torch(dtype, layout):
    x = np.random.default_rng(2).standard_normal((700, 801)) * 12  # beyond the size that splits in two
    x[0, :4] = np.nan, np.inf, -np.inf, -200
    e, t = ember.tensor(x).to(getattr(ember, dtype)), torch.tensor(x).to(getattr(torch, dtype))
    if layout == "transposed":
        e, t = e.t(), t.t()
    a, b = ember.sigmoid(e), torch.sigmoid(t)
    assert a.dtype == getattr(ember, dtype) and tuple(a.shape) == tuple(b.shape)
    rtol = {"float32": 4e-7, "float64": 1e-12}.get(dtype, 1e-2)
    np.testing.assert_allclose(a.double().numpy(), b.double().numpy(), rtol=rtol, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(), (7,), (3, 70_001), (2_500_000,)])
def test_two_norm_of_every_element_rounds_once(dtype, shape):
    """The 2-norm over all elements (clip_grad_norm_'s) sums the squares in float64 blocks: within two ulp of
    the exact value, non-contiguous and keepdim inputs included."""
    x = (np.random.default_rng(2).standard_normal(shape[::-1]) * 5 + 3).astype(dtype).T
    exact = np.sqrt(np.sum(x.astype(np.float64) ** 2))
    for kwargs in ({}, {"keepdim": True}):
        e = ember.linalg.vector_norm(ember.tensor(x), **kwargs)
        assert e.dtype == getattr(ember, dtype) and e.shape == torch.linalg.vector_norm(torch.tensor(x), **kwargs).shape
        assert abs(float(e) - exact) <= 2 * np.spacing(np.array(exact, dtype))
    assert float(ember.norm(ember.tensor(x))) == float(ember.linalg.vector_norm(ember.tensor(x)))
