"""ember.special is at least as accurate as PyTorch 2.13's torch.special: for every function and for
float32 and float64, ember's maximum relative error against mpmath on the function's grid
(accuracy.py) is no larger than PyTorch's, on both of ember's paths: the numba loops of large inputs
and the JIT-free path of small ones (and of large ones until their loop is compiled)."""
import numpy as np
import pytest

pytest.importorskip("mpmath")
import accuracy  # noqa: E402

CASES = [pytest.param(name, dtype, id=f"{name}-{dtype}")
         for name in accuracy.CASES for dtype in ("float32", "float64")]


@pytest.mark.parametrize("path", ["jit-free", "compiled"])
@pytest.mark.parametrize("name,dtype", CASES)
def test_no_less_accurate_than_torch(name, dtype, path, request):
    if path == "compiled":
        request.getfixturevalue("compiled_loops")
    ours, theirs = accuracy.errors(name, dtype)
    # where both are within 4 eps (2 ulp) of the exact value the difference is the last bit of two
    # correctly working evaluations (different libm exp/log), not a loss of accuracy
    rounding = 4 * np.finfo(dtype).eps
    assert ours <= theirs or (ours <= rounding and theirs <= rounding), (
        f"{name} {dtype}: ember {ours:.3g} > torch {theirs:.3g}")
