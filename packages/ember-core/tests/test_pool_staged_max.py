"""Max pooling's maximum taken one spatial dim at a time (runs of the later dims picked by one strided copy) against
PyTorch, values and gradients: tiling, overlapping, dilated and one-element windows, rows left over past the last
window, and the result never sharing memory with the input."""
import numpy as np
import pytest
import torch
from optable import needs_autograd

import ember

# (spatial dims, input shape, kernel, stride, dilation)
CASES = [(2, (4, 3, 8, 8), 2, None, 1), (2, (4, 3, 9, 7), 2, None, 1), (2, (2, 3, 9, 9), 3, 1, 1),
         (2, (2, 3, 9, 9), (3, 2), (1, 2), (2, 1)), (2, (2, 3, 8, 8), (1, 2), None, 1), (2, (2, 3, 8, 8), 1, 1, 1),
         (1, (2, 3, 12), 2, None, 1), (3, (2, 2, 7, 7, 7), (2, 3, 2), (1, 2, 3), 1), (2, (3, 8, 8), 2, None, 1)]


@needs_autograd
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_values_and_gradients_match_torch(case, ties):
    n, shape, k, s, d = case
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    if ties:
        x = np.maximum(np.round(x), 0)
    g = rng.standard_normal(x.shape).astype(np.float32)  # (cut to the output's shape below)
    out = []
    for lib in (torch, ember):
        t = lib.tensor(x, requires_grad=True)
        y = getattr(lib, f"max_pool{n}d")(t, k, s, 0, d)
        y.backward(lib.tensor(np.ascontiguousarray(g[tuple(slice(0, e) for e in y.shape)])))
        out.append((y.detach().numpy(), t.grad.numpy()))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


def test_result_owns_its_memory():
    x = ember.tensor(np.arange(32.0, dtype=np.float32).reshape(1, 2, 4, 4))
    y = ember.max_pool2d(x, 1, 1)
    assert not np.shares_memory(y.numpy(), x.numpy())
    np.testing.assert_array_equal(y.numpy(), x.numpy())
