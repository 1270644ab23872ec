"""The host unscale pass's check (each array's dot product with itself, rechecked exactly where that overflows),
compared with PyTorch's fused check-and-unscale kernel: the flag and the scaled values."""
import numpy as np
import pytest

from ember.amp._unscale import unscale_numpy

torch = pytest.importorskip("torch")


def _torch_unscale(arrays, inv_scale):
    grads = [torch.from_numpy(a.copy()) for a in arrays]
    found = torch.zeros(())
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.tensor(inv_scale))
    return bool(found.item()), [g.numpy() for g in grads]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("inv_scale", [2.0 ** -16, 0.3, 1.0, 0.0, -0.5, 4.0])
@pytest.mark.parametrize("bad", [None, np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("where", [0, 2])
def test_overflowing_squares_match_torch(dtype, inv_scale, bad, where):
    # arrays of huge finite values (their squares overflow), normal arrays, and one non-finite value in the
    # first or the last array
    rng = np.random.default_rng(0)
    big = np.finfo(dtype).max / 4
    arrays = [rng.standard_normal(1000).astype(dtype) * dtype(big), rng.standard_normal((30, 7)).astype(dtype),
              rng.standard_normal(64).astype(dtype)[::-2] * dtype(big)]
    if bad is not None:
        arrays[where].flat[5] = bad
    want_found, want = _torch_unscale(arrays, inv_scale)
    with np.errstate(over="ignore"):
        assert unscale_numpy(arrays, float(np.float32(inv_scale))) == want_found == (bad is not None)
    for a, w in zip(arrays, want):
        np.testing.assert_array_equal(a, w)


def test_large_finite_values_below_overflow_are_not_flagged():
    # every square overflows float32, no value does
    a = np.full(10_000, 3e30, np.float32)
    assert not unscale_numpy([np.ones(3, np.float32), a, np.ones(5, np.float32)], 2.0 ** -10)
    assert (a == np.float32(3e30) * np.float32(2.0 ** -10)).all()


@pytest.mark.parametrize("inv_scale", [2.0 ** -16, 1.0])
@pytest.mark.parametrize("bad", [None, np.inf, np.nan])
@pytest.mark.parametrize("where", [3, 70_000, 200_004])
def test_large_arrays_checked_in_blocks_match_torch(inv_scale, bad, where):
    # contiguous arrays past one block (1-d and 2-d), one with a block of huge finite values, and a strided one
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(200_005).astype(np.float32), rng.standard_normal((700, 300)).astype(np.float32),
              rng.standard_normal((300, 700)).astype(np.float32).T]
    arrays[1][200:300] *= np.float32(3e30)
    if bad is not None:
        arrays[0][where] = bad
        arrays[2].flat[where] = -bad
    want_found, want = _torch_unscale(arrays, inv_scale)
    assert unscale_numpy(arrays, inv_scale) == want_found == (bad is not None)
    for a, w in zip(arrays, want):
        np.testing.assert_array_equal(a, w)
