"""ember._rngloops: the compiled float normal fill gives the bits of NumPy's path (over uniforms spread across the
whole 24-bit grid, as radii and as angles) and so PyTorch's numbers, for any size and mean/std."""
import numpy as np
import pytest
import torch

import ember
from ember import _jit
from ember import _mt19937 as MT

pytest.importorskip("numba")
pytestmark = pytest.mark.skipif(not MT.AVX2, reason="the loop stands for PyTorch's AVX2 fill only")
SIG = "(float32[::1], float32, float32, float32[::1])"


def _loop():
    with _jit.forced():
        return _jit.loop("ember._rngloops", "normal_fill16", SIG, 1, exact=True)


@pytest.mark.parametrize("mean,std", [(0.0, 1.0), (0.5, 2.0), (0.0, 0.3), (-1.25, 0.1)])
def test_loop_gives_numpy_bits(mean, std):
    # (checked once over all 2**24 uniforms in both places; here a spread of 2**18 of them)
    k = np.random.default_rng(0).integers(0, 1 << 24, 1 << 18)
    v = (k * 2.0 ** -24).astype(np.float32).reshape(-1, 8)
    u = np.concatenate([v, v[::-1]], axis=1)
    u[0, :8] = 0  # the ends of the grid: radius of 1 - 0 and angle 0
    u[1, 8:] = np.float32(1 - 2.0 ** -24)
    want = MT._fill16(u, mean, std)
    got = _loop()(u.reshape(-1), np.float32(mean), np.float32(std), np.empty(u.size, np.float32))
    np.testing.assert_array_equal(got.view(np.int32), want.reshape(-1).view(np.int32))


@pytest.mark.parametrize("n", [16, 1000, 4099, 200_003])
def test_compiled_normals_are_torch_numbers(n):
    _loop()
    with _jit.forced():
        for seed, args in [(1, ()), (2, (1.5, 0.25))]:
            ember.manual_seed(seed)
            torch.manual_seed(seed)
            if args:
                got, want = ember.normal(*args, size=(n,)), torch.normal(*args, size=(n,))
            else:
                got, want = ember.randn(n), torch.randn(n)
            np.testing.assert_array_equal(got.numpy().view(np.int32), want.numpy().view(np.int32))
        ember.manual_seed(3)
        torch.manual_seed(3)
        loc, scale = np.linspace(-1, 1, n, dtype=np.float32), np.linspace(0.1, 2, n, dtype=np.float32)
        got = ember.normal(ember.tensor(loc), ember.tensor(scale))
        want = torch.normal(torch.tensor(loc), torch.tensor(scale))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
