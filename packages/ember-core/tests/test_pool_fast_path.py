"""Max pooling's NumPy fast path (windows wholly inside the input: a maximum over strided views) against PyTorch
and against the general window-copying path: values, flat indices and gradients, with ties, NaN (PyTorch's index
is a window's last NaN) and -inf."""
import ml_dtypes
import numpy as np
import pytest
import torch
from optable import needs_autograd

import ember
from ember._ops import pooling
from ember._registry import REGISTRY

# (input shape, kernel, stride, dilation, ceil_mode); each has every window inside the input
CASES = [((4, 3, 8, 8), (2, 2), (2, 2), (1, 1), False),
         ((3, 16, 6), (2, 2), (2, 2), (1, 1), False),  # unbatched
         ((2, 3, 9, 8), (3, 2), (3, 2), (1, 1), True),
         ((2, 3, 7, 9), (3, 3), (1, 2), (1, 1), False),  # overlapping windows
         ((2, 2, 9, 8), (2, 2), (2, 3), (2, 1), False),  # dilated
         ((0, 2, 4, 4), (2, 2), (2, 2), (1, 1), False),  # empty batch
         ((2, 3, 5, 5), (1, 1), (2, 2), (1, 1), False),  # one-element windows
         ((2, 3, 9), (3,), (3,), (1,), False),
         ((2, 2, 4, 6, 4), (2, 2, 2), (2, 2, 2), (1, 1, 1), False)]
DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int64, np.int32]


def _input(shape, dtype, seed):
    """Integer-valued data (many ties), with NaN (several per window) and -inf in the float dtypes."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 3, shape).astype(np.float64)
    if np.issubdtype(dtype, np.floating) or dtype == ml_dtypes.bfloat16:
        flat = x.reshape(-1)
        flat[rng.random(flat.size) < 0.08] = np.nan
        flat[rng.random(flat.size) < 0.08] = -np.inf
    return x.astype(dtype)


def _torch(a):
    return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16) if a.dtype == ml_dtypes.bfloat16 \
        else torch.from_numpy(a)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("noncontiguous", [False, True])
def test_values_and_indices_match_torch(case, dtype, noncontiguous, monkeypatch):
    monkeypatch.setattr(pooling, "_max_windows", None)  # the fast path must serve every case
    shape, k, s, d, ceil = case
    n = len(k)
    a = _input(shape, dtype, len(shape) + sum(k))
    if noncontiguous:
        a = np.swapaxes(np.swapaxes(a, -1, -2).copy(), -1, -2)
    tv, ti = getattr(torch.nn.functional, f"max_pool{n}d")(_torch(a), k, s, 0, d, ceil, return_indices=True)
    ev, ei = REGISTRY[f"max_pool{n}d_with_indices"].fn(ember.tensor(a), k, s, 0, d, ceil)
    np.testing.assert_array_equal(ev.numpy().astype(np.float64), tv.double().numpy())
    np.testing.assert_array_equal(ei.numpy(), ti.numpy())
    assert ev.dtype == ember.tensor(a).dtype and ei.numpy().dtype == np.int64
    if n > 1 or a.dtype.kind == "f":  # max_pool1d without indices is float-only in PyTorch
        pv = REGISTRY[f"max_pool{n}d"].fn(ember.tensor(a), k, s, 0, d, ceil)
        np.testing.assert_array_equal(pv.numpy().astype(np.float64), tv.double().numpy())


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_matches_general_path_without_nan(case, dtype):
    shape, k, s, d, ceil = case
    n = len(k)
    a = _input(shape, dtype, 3)
    a[a != a] = 1  # the general path takes a window's first NaN, PyTorch its last
    ev, ei = REGISTRY[f"max_pool{n}d_with_indices"].fn(ember.tensor(a), k, s, 0, d, ceil)
    xb = a if a.ndim == n + 2 else a[None]
    out = [pooling._out_size("", L, ki, si, 0, di, ceil) for L, ki, si, di in zip(xb.shape[2:], k, s, d)]
    gv, gi = pooling._max_windows(np, xb, pooling._pool_grids(k, s, (0,) * n, d, out), "")
    np.testing.assert_array_equal(ev.numpy().reshape(gv.shape), gv)
    np.testing.assert_array_equal(ei.numpy().reshape(gi.shape), gi)


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("indices", [False, True])
@needs_autograd
def test_gradients_match_torch(case, indices, monkeypatch):
    monkeypatch.setattr(pooling, "_max_windows", None)
    shape, k, s, d, ceil = case
    n = len(k)
    a = _input(shape, np.float64, 7)
    g = np.random.default_rng(1).standard_normal(
        getattr(torch.nn.functional, f"max_pool{n}d")(torch.from_numpy(a), k, s, 0, d, ceil).shape)
    t = torch.from_numpy(a).requires_grad_()
    getattr(torch.nn.functional, f"max_pool{n}d")(t, k, s, 0, d, ceil).backward(torch.from_numpy(g))
    e = ember.tensor(a, requires_grad=True)
    name = f"max_pool{n}d_with_indices" if indices else f"max_pool{n}d"
    out = REGISTRY[name].fn(e, k, s, 0, d, ceil)
    (out[0] if indices else out).backward(ember.tensor(g))
    np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())


def test_bool_and_complex_refused():
    for a in (np.zeros((1, 1, 4, 4), bool), np.zeros((1, 1, 4, 4), np.complex64)):
        with pytest.raises(NotImplementedError):
            REGISTRY["max_pool2d"].fn(ember.tensor(a), 2)


# (input shape, kernel, stride, padding, dilation, ceil_mode): windows past the input (the general path)
PADDED = [((2, 3, 7, 6), (3, 2), (2, 2), (1, 1), (1, 1), True),
          ((2, 3, 7, 6), (3, 3), (1, 1), (1, 1), (1, 2), False),  # overlapping
          ((3, 9), (4,), (3,), (2,), (1,), True),                  # unbatched
          ((1, 2, 4, 5, 3), (2, 3, 2), (2, 1, 2), (1, 1, 0), (1, 1, 1), True)]


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", PADDED, ids=str)
@needs_autograd
def test_array_gradients_of_general_path_match_torch(case, dtype):
    """The gradients computed on the arrays (a backward without create_graph) where windows leave the input, with
    and without indices, in every float dtype, against PyTorch (ties, NaN, -inf)."""
    shape, k, s, p, d, ceil = case
    n = len(k)
    a = _input(shape, np.float64, 11)
    fn = getattr(torch.nn.functional, f"max_pool{n}d")
    rng, gshape = np.random.default_rng(2), fn(torch.from_numpy(a), k, s, p, d, ceil).shape
    # float64: overlapping windows must sum in PyTorch's order; halves: exact sums of small integers
    g = rng.standard_normal(gshape) if dtype == "float64" else rng.integers(-3, 4, gshape).astype(np.float64)
    t = torch.from_numpy(a).to(getattr(torch, dtype)).requires_grad_()
    fn(t, k, s, p, d, ceil).backward(torch.from_numpy(g).to(t.dtype))
    for name in (f"max_pool{n}d", f"max_pool{n}d_with_indices"):
        e = ember.tensor(a).to(getattr(ember, dtype)).requires_grad_()
        out = REGISTRY[name].fn(e, k, s, p, d, ceil)
        (out[0] if "indices" in name else out).backward(ember.tensor(g).to(e.dtype))
        assert e.grad.dtype == e.dtype
        np.testing.assert_array_equal(e.grad.float().numpy(), t.grad.float().numpy())


@pytest.mark.parametrize("n", [1, 2, 3])
@needs_autograd
def test_array_gradients_of_adaptive_max_pool_match_torch(n):
    a = _input((2, 3) + (7, 6, 5)[:n], np.float64, n)
    size = (3, 4, 2)[:n]
    t = torch.from_numpy(a).requires_grad_()
    getattr(torch.nn.functional, f"adaptive_max_pool{n}d")(t, size).sum().backward()
    e = ember.tensor(a, requires_grad=True)
    REGISTRY[f"adaptive_max_pool{n}d"].fn(e, size)[0].sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())
