"""Gradients of ember._grouped_mm, first and second order, against torch.autograd in float32 and bfloat16 (PyTorch
has no float64 kernel, so the op table's float64 check cannot take it)."""
import numpy as np
import pytest
import torch

import ember

# (mat_a shape, mat_b shape, offsets): rows of a 2-d mat_a, columns of a 2-d mat_b, the inner dim of two 2-d
# operands, a batched product; offsets ending at the ragged dim's length (PyTorch leaves what lies past unset)
MODES = [((6, 16), (3, 16, 8), [2, 2, 6]), ((2, 6, 16), (16, 16), [8, 16]), ((6, 32), (32, 8), [16, 32]),
         ((2, 6, 16), (2, 16, 8), None)]


def _grads(lib, dtype, a, b, offs, second):
    a = lib.tensor(a, dtype=dtype, requires_grad=True)
    b = lib.tensor(b, dtype=dtype, requires_grad=True)
    offs = None if offs is None else lib.tensor(offs, dtype=lib.int32)
    out = lib._grouped_mm(a, b, offs)
    rng = np.random.default_rng(1)
    g = lib.tensor(rng.standard_normal(tuple(out.shape)), dtype=dtype)
    ga, gb = lib.autograd.grad(out, (a, b), g, create_graph=second)
    found = [out, ga, gb]
    if second:
        va = lib.tensor(rng.standard_normal(tuple(ga.shape)), dtype=dtype)
        vb = lib.tensor(rng.standard_normal(tuple(gb.shape)), dtype=dtype)
        found += lib.autograd.grad((ga * va).sum() + (gb * vb).sum(), (a, b))
    return [t.detach().float().numpy() for t in found], out.grad_fn.name()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shapes", MODES, ids=["rows", "columns", "inner", "batched"])
def test_gradients_match_torch(shapes, dtype):
    rng = np.random.default_rng(0)
    sa, sb, offs = shapes
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    second = dtype == "float32"
    want, name = _grads(torch, getattr(torch, dtype), a, b, offs, second)
    got, ember_name = _grads(ember, getattr(ember, dtype), a, b, offs, second)
    assert ember_name == name == "GroupedMmBackward0"
    tol = 1e-5 if dtype == "float32" else 1e-2
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * 10, err_msg=f"result {i}")


def test_rows_past_the_last_offset_get_no_gradient():
    """Rows of mat_a that belong to no group: zero gradient (PyTorch gives zero there too)."""
    a = ember.ones(6, 16, requires_grad=True)
    b = ember.ones(2, 16, 8, requires_grad=True)
    out = ember._grouped_mm(a, b, ember.tensor([2, 4], dtype=ember.int32))
    assert not out[4:].any()
    out.backward(ember.ones_like(out))
    assert a.grad[4:].abs().sum().item() == 0 and a.grad[:4].min().item() == 8
    assert b.grad[0].min().item() == b.grad[1].max().item() == 2
