"""Adding rows at repeated indices (index_add, index_put with accumulate=True, and their users' backward passes) in
rounds of distinct indices: np.add.at's sums bit for bit and PyTorch's, for any dim, negative and repeated indices,
broadcast values, integer and float dtypes; errors still PyTorch's."""
import numpy as np
import pytest
import torch

import ember
from ember._ops.selection import _add_rows

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("d", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_sums_match_np_add_at(d, dtype):
    out = (RNG.standard_normal((5, 6, 7)) * 100).astype(dtype)
    n = out.shape[d]
    idx = RNG.integers(-n, n, 40)
    shape = list(out.shape)
    shape[d] = idx.size
    vals = (RNG.standard_normal(shape) * 100).astype(dtype)
    pos = (slice(None),) * d + (idx,)
    expected = out.copy()
    np.add.at(expected, pos, vals)
    assert _add_rows(out, pos, vals)
    np.testing.assert_array_equal(out, expected)


def test_broadcast_values_and_refusals():
    out = np.zeros((4, 3))
    assert _add_rows(out, (np.array([1, 1, -1]),), np.ones(3))  # one row broadcast to every index
    np.testing.assert_array_equal(out.sum(1), [0, 6, 0, 3])
    for pos, vals in [((np.array([4]),), np.ones(3)), ((np.array([0, 1]),), np.ones((3, 3))),
                      ((np.array([0]), np.array([1])), 1.0), ((slice(0, 2), np.array([0])), 1.0),
                      ((np.zeros(65, np.int64),), 1.0)]:
        assert not _add_rows(out, pos, vals)  # (np.add.at reports or handles these; 65 rounds are too many)


@pytest.mark.parametrize("dim", [0, 1])
def test_index_add_and_index_put_match_torch(dim):
    x = RNG.standard_normal((6, 8)).astype(np.float32)
    idx = RNG.integers(0, x.shape[dim], 50)
    src = RNG.standard_normal((50, 8) if dim == 0 else (6, 50)).astype(np.float32)
    got, expected = (lib.tensor(x).index_add(dim, lib.tensor(idx), lib.tensor(src), alpha=0.5).numpy()
                     for lib in (ember, torch))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    rows, values = RNG.integers(-6, 6, 50), RNG.standard_normal((50, 8)).astype(np.float32)
    got, expected = (lib.tensor(x).index_put((lib.tensor(rows),), lib.tensor(values), accumulate=True).numpy()
                     for lib in (ember, torch))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    for lib in (ember, torch):
        with pytest.raises(IndexError, match="out of bounds"):
            lib.tensor(x).index_put((lib.tensor([0, 6]),), lib.ones(2, 8), accumulate=True)
