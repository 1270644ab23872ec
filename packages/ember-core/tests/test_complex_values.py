"""Ops PyTorch computes on complex inputs with formulas of their own: silu, rms_norm (the root of the mean of z * z,
not of |z|^2) and logcumsumexp (one element at a time, which leaves its imaginary parts on a branch of their own)."""
import numpy as np
import pytest
import torch

import ember
from ember._registry import REGISTRY

RNG = np.random.default_rng(3)
Z = RNG.standard_normal((6, 40)) * 3 + 1j * RNG.standard_normal((6, 40)) * 4


def _both(call, z, dtype="complex128"):
    return [call(lib, lib.tensor(z, dtype=getattr(lib, dtype))).numpy() for lib in (ember, torch)]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_silu_and_rms_norm_match_torch(dtype):
    tol = 1e-5 if dtype == "complex64" else 1e-12
    # (silu: the registry's op on ember's side; this package's session has no ember-nn)
    for call in (lambda m, z: m.nn.functional.silu(z) if m is torch else REGISTRY["silu"].fn(z),
                 lambda m, z: m.rms_norm(z, (40,)),
                 lambda m, z: m.rms_norm(z, (6, 40), m.ones(6, 40, dtype=m.float64 if dtype == "complex128" else
                                                            m.float32) * 2, 0.5)):
        got, expected = _both(call, Z, dtype)
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp_matches_torch_branch_and_all(dim):
    """Long runs of large imaginary parts: the branch PyTorch's sequential sums land on, not the principal one."""
    got, expected = _both(lambda m, z: m.logcumsumexp(z, dim), Z)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
    assert np.abs(expected.imag).max() > np.pi  # (the branches differ from the principal one here)


def test_logcumsumexp_edges_match_torch():
    """A -inf real part gives -inf with a zero imaginary part, after which sums start again; a NaN spreads to both
    parts of what follows."""
    z = np.array([complex(-np.inf, 1), complex(-np.inf, 2), 2 + 1j, -1 + 3j, np.nan, 1])
    got, expected = _both(lambda m, z: m.logcumsumexp(z, 0), z)
    np.testing.assert_array_equal(got, expected)
