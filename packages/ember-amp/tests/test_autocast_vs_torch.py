"""Differential tests against PyTorch 2.13 (CPU): every op of ember's CPU autocast tables gives, under
``ember.autocast("cpu")``, the output dtypes torch gives under ``torch.autocast("cpu")``, for float32,
float64 and bfloat16 inputs, and the same values within bfloat16 tolerance."""
import warnings

import numpy as np
import pytest

import ember
from ember.amp._policy import CPU

torch = pytest.importorskip("torch")

from autocast_cases import CPU_CASES, Inputs  # noqa: E402

# outputs that are not unique (signs of singular and eigen vectors, Householder forms): their dtype is
# compared, their values are not
_NOT_UNIQUE = {"svd", "linalg_svd", "qr", "linalg_qr", "geqrf", "linalg_eig", "linalg_eigh", "orgqr", "ormqr",
               "linalg_householder_product", "linalg_lstsq", "lu", "fractional_max_pool2d", "fractional_max_pool3d"}
# ops of the tables that ember does not have yet: no case
_NO_CASE = {"fake_quantize_per_tensor_affine"}


def _flat(r):
    if hasattr(r, "dtype") and hasattr(r, "shape"):
        return [r]
    return [x for y in r for x in _flat(y)]


def _run(L, key, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with L.autocast("cpu"):
            return _flat(CPU_CASES[key](L, Inputs(L, getattr(L, dtype))))


def _to_numpy(t):
    L = ember if isinstance(t, ember.Tensor) else torch
    if t.dtype.is_complex:
        return t.resolve_conj().to(L.complex128).numpy()
    return t.to(L.float64).numpy() if t.dtype.is_floating_point else t.numpy()


def test_every_table_op_has_a_case():
    keys = {k for names in CPU.values() for k in names}
    assert keys - _NO_CASE <= set(CPU_CASES), sorted(keys - _NO_CASE - set(CPU_CASES))


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("key", sorted(CPU_CASES))
def test_dtype_and_values_match_torch(key, dtype):
    try:
        want = _run(torch, key, dtype)
    except Exception as e:  # torch refuses: ember must refuse with the same exception type
        with pytest.raises(type(e)):
            _run(ember, key, dtype)
        return
    got = _run(ember, key, dtype)
    assert [str(t.dtype).split(".")[-1] for t in got] == [str(t.dtype).split(".")[-1] for t in want]
    if key in _NOT_UNIQUE:
        return
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape)
        # a bfloat16 rounding of inputs or outputs, propagated through a few ops
        np.testing.assert_allclose(_to_numpy(g), _to_numpy(w), rtol=3e-2, atol=3e-2)
