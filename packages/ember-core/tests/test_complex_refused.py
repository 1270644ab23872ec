"""Ops that order or clamp elements, and losses without complex kernels, refuse complex inputs as PyTorch does
(same exception type and message), where NumPy would order complex numbers by real part, then imaginary, and return
a value PyTorch never gives."""
import numpy as np
import pytest
import torch

import ember
from ember._registry import REGISTRY

Z = np.array([1 + 1j, 2j, -1 - 0.5j, 3 + 0j], dtype=np.complex64)
R = np.array([-1.0, 0.5, 2.0], dtype=np.float32)

CASES = {
    "sign": lambda m, z, r: m.sign(z),
    "sign_": lambda m, z, r: z.clone().sign_(),
    "hardtanh": lambda m, z, r: m.nn.functional.hardtanh(z) if m is torch else REGISTRY["hardtanh"].fn(z),
    "relu6": lambda m, z, r: m.nn.functional.relu6(z) if m is torch else REGISTRY["hardtanh"].fn(z, 0.0, 6.0),
    "unique": lambda m, z, r: m.unique(z),
    "unique(dim)": lambda m, z, r: m.unique(z, dim=0),
    "unique_consecutive": lambda m, z, r: m.unique_consecutive(z),
    "searchsorted(values)": lambda m, z, r: m.searchsorted(r, z),
    "searchsorted(sequence)": lambda m, z, r: m.searchsorted(z, r),
    "bucketize": lambda m, z, r: m.bucketize(z, r),
    "aminmax": lambda m, z, r: m.aminmax(z),
    "isin": lambda m, z, r: m.isin(z, r),
    "abs_": lambda m, z, r: z.clone().abs_(),
    "absolute_": lambda m, z, r: z.clone().absolute_(),
    "abs_(function)": lambda m, z, r: m.abs_(z.clone()),
    "binary_cross_entropy": lambda m, z, r: _loss(m, "binary_cross_entropy")(z, z),
    "kl_div": lambda m, z, r: _loss(m, "kl_div")(z, z, reduction="sum" if m is torch else 2),
    "hinge_embedding_loss": lambda m, z, r: _loss(m, "hinge_embedding_loss")(z, m.ones(4)),
    "margin_ranking_loss": lambda m, z, r: _loss(m, "margin_ranking_loss")(z, z, m.ones(4)),
    "normal(complex std)": lambda m, z, r: m.normal(z, z),
}


def _loss(m, name):
    return getattr(m.nn.functional, name) if m is torch else REGISTRY[name].fn


@pytest.mark.parametrize("name", CASES)
def test_complex_input_refused_like_torch(name):
    call = CASES[name]
    with pytest.raises(Exception) as expected:
        call(torch, torch.from_numpy(Z), torch.from_numpy(R))
    with pytest.raises(type(expected.value)) as got:
        call(ember, ember.from_numpy(Z), ember.from_numpy(R))
    assert str(got.value) == str(expected.value)
