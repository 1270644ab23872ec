"""SVD-based ops on matrices holding infinities or NaN: NumPy's gesdd never returns on infinities (a hang), so ember
checks first. As PyTorch: NaN raises its LinAlgError naming the batch element; a matrix with infinities gets NaN
singular values (a zero pseudo-inverse and rank, NaN norms), the other matrices of the batch their own."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import ember

CALLS = {
    "svd": lambda L, t: L.linalg.svd(t)[1], "svd(reduced)": lambda L, t: L.linalg.svd(t, full_matrices=False)[1],
    "torch.svd": lambda L, t: L.svd(t)[1], "svdvals": lambda L, t: L.linalg.svdvals(t),
    "pinv": lambda L, t: L.linalg.pinv(t), "matrix_rank": lambda L, t: L.linalg.matrix_rank(t),
    "matrix_norm(2)": lambda L, t: L.linalg.matrix_norm(t, 2), "matrix_norm(nuc)": lambda L, t: L.linalg.matrix_norm(
        t, "nuc"), "norm(nuc)": lambda L, t: L.norm(t, p="nuc", dim=(1, 2)), "cond": lambda L, t: L.linalg.cond(t),
}


def _batch(value, dtype):
    x = np.random.default_rng(0).standard_normal((3, 4, 6)).astype(dtype)
    x[1, 0, 0] = value
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("name", CALLS)
def test_infinities_give_nan_singular_values_like_torch(name, dtype):
    x = _batch(np.inf, dtype)
    if name == "cond":
        x = x[..., :4]
    got, want = (np.asarray(CALLS[name](lib, lib.tensor(x)).numpy()) for lib in (ember, torch))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("name", CALLS)
def test_nan_raises_torchs_error(name):
    x = _batch(np.nan, "float64")
    if name == "cond":
        x = x[..., :4]
    messages = []
    for lib in (torch, ember):
        with pytest.raises(lib.linalg.LinAlgError) as info:
            CALLS[name](lib, lib.tensor(x))
        messages.append(str(info.value))
    assert messages[0] == messages[1] == ("linalg.svd: (Batch element 1): The algorithm failed to converge because "
                                          "the input matrix contained non-finite values.")


def test_lstsq_of_a_matrix_with_infinities_has_no_solution():
    x = _batch(np.inf, "float64")
    solution = ember.linalg.lstsq(ember.tensor(x), ember.ones(3, 4, 1, dtype=ember.float64),
                                  driver="gelsd").solution.numpy()
    assert np.isnan(solution[1]).all() and np.isfinite(solution[[0, 2]]).all()


def test_an_infinite_svd_returns_in_a_fresh_process():
    """The hang itself, guarded: a process of its own, given a minute."""
    code = ("import numpy as np, ember; x = np.ones((4, 6)); x[0, 0] = np.inf; "
            "print(ember.linalg.svd(ember.tensor(x))[1].isnan().all().item())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "True", out.stderr
