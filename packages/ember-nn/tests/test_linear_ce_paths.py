"""The size-dependent paths of linear (bias added after a small product or accumulated into a large one; the bias
gradient as a reduction over few rows or a matrix-vector product over many) and cross entropy's shortcut for
targets that all count once, against PyTorch."""
import itertools

import numpy as np
import pytest
import torch

import ember
from ember._ops import nn_misc


def _run_linear(lib, x, w, b, g):
    xs, ws, bs = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
    out = lib.nn.functional.linear(xs, ws, bs)
    out.backward(lib.tensor(g))
    return [a.detach().numpy() for a in (out, xs.grad, ws.grad, bs.grad)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lead", [(nn_misc._FEW_ROWS,), (nn_misc._FEW_ROWS + 1,), (2, 3), (130,)])
@pytest.mark.parametrize("out_features", [5, 40])
def test_linear_paths_match_torch(dtype, lead, out_features):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(lead + (33,)).astype(dtype)
    w = rng.standard_normal((out_features, 33)).astype(dtype)
    b = rng.standard_normal(out_features).astype(dtype)
    g = rng.standard_normal(lead + (out_features,)).astype(dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for got, want in zip(_run_linear(ember, x, w, b, g), _run_linear(torch, x, w, b, g)):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_linear_sizes_cover_both_bias_paths():
    assert 130 * 40 > nn_misc._SMALL_OUT >= 2 * 3 * 40  # (the cases above)


def _run_ce(lib, x, t, weight, **kw):
    xs = lib.tensor(x, requires_grad=True)
    loss = lib.nn.functional.cross_entropy(xs, lib.tensor(t), None if weight is None else lib.tensor(weight), **kw)
    (loss.sum() if loss.dim() else loss).backward()
    return loss.detach().numpy(), xs.grad.numpy()


@pytest.mark.parametrize("reduction, ignore_index, weighted, targets", itertools.product(
    ["mean", "sum", "none"], [-100, 2, 7], [False, True], [[0, 1, 2, 3, 1], [0, 2, 2, 3, 1], [0, 7, 3, 7, 1]]))
def test_cross_entropy_targets_match_torch(reduction, ignore_index, weighted, targets):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    weight = rng.random(4).astype(np.float32) if weighted else None
    if 7 in targets and ignore_index != 7:
        for lib in (ember, torch):
            with pytest.raises(IndexError, match="Target 7 is out of bounds"):
                _run_ce(lib, x, np.array(targets), weight, reduction=reduction, ignore_index=ignore_index)
        return
    got, want = (_run_ce(lib, x, np.array(targets), weight, reduction=reduction, ignore_index=ignore_index)
                 for lib in (ember, torch))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bad", [-1, 4])
def test_cross_entropy_out_of_range_target(bad):
    for lib in (ember, torch):
        with pytest.raises(IndexError, match=f"Target {bad} is out of bounds"):
            _run_ce(lib, np.zeros((3, 4), np.float32), np.array([0, bad, 1]), None)


def test_cross_entropy_byte_targets_match_torch():
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    got, want = (_run_ce(lib, x, np.array([3, 0, 1], np.uint8), None) for lib in (ember, torch))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
