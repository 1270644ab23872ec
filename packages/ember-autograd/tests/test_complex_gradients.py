"""Gradients of activations, rms_norm and logcumsumexp on complex inputs against torch.autograd (PyTorch's conjugate
Wirtinger convention); silu's, which PyTorch refuses."""
import numpy as np
import pytest
import torch

import ember
from ember._registry import REGISTRY
from ember.autograd import gradcheck

Z = np.array([[1 + 2j, 3 - 1j, 0j, -0.5 + 0.25j], [2j, -1.5, 0.1 - 3j, -2 - 2j]])
G = np.array([[1 + 0.5j, 2 - 1j, 0.5 + 1j, -1j], [1, -0.5 + 2j, 3j, 1 - 1j]])


def _call(lib, name, z):
    """The op on ``z``: softsign, tanhshrink and silu are functionals (the registry's op here: this package's tests
    run without ember-nn)."""
    if name in ("softsign", "tanhshrink", "silu"):
        return getattr(torch.nn.functional, name)(z) if lib is torch else REGISTRY[name].fn(z)
    if name == "rms_norm":
        return lib.rms_norm(z, (4,), lib.tensor([1.0, -2.0, 0.5, 3.0], dtype=lib.float64), 0.1)
    if name == "logcumsumexp":
        return lib.logcumsumexp(z, 1)
    return getattr(lib, name)(z)


@pytest.mark.parametrize("name", ["softsign", "tanhshrink", "tanh", "sigmoid", "exp", "rms_norm", "logcumsumexp"])
def test_complex_gradient_matches_torch(name):
    got, expected = [], []
    for lib, out in ((ember, got), (torch, expected)):
        z = lib.tensor(Z, dtype=lib.complex128).requires_grad_()
        y = _call(lib, name, z)
        (dz,) = lib.autograd.grad(y, z, lib.tensor(G, dtype=lib.complex128))
        out += [y.detach().numpy(), dz.resolve_conj().numpy()]
    assert got[0].dtype == np.complex128
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12, err_msg=f"{name} value")
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-12, atol=1e-15, err_msg=f"{name} gradient")


@pytest.mark.parametrize("name", ["softsign", "tanhshrink", "rms_norm", "logcumsumexp"])
def test_complex_gradient_is_the_numerical_one(name):
    z = ember.tensor(Z[:, 1:], dtype=ember.complex128).requires_grad_()  # (|z| is not differentiable at 0)
    if name == "rms_norm":
        z = ember.tensor(Z, dtype=ember.complex128).requires_grad_()
    assert gradcheck(lambda z: _call(ember, name, z), (z,))


def test_complex_silu_gradient_refused_like_torch():
    for lib in (ember, torch):
        with pytest.raises(RuntimeError, match="silu does not support automatic differentiation for outputs with "
                                               "complex dtype"):
            _call(lib, "silu", lib.tensor(Z, dtype=lib.complex128).requires_grad_())
