"""F.grouped_mm in the layer it is made for: a mixture-of-experts feed-forward layer (top-2 routing, each expert's
tokens gathered in expert order and multiplied by its weights), run by ember and PyTorch on the same weights and
tokens: output and every gradient agree."""
import numpy as np
import pytest
import torch

import ember

WIDTH, HIDDEN, EXPERTS, TOP_K = 16, 32, 4, 2


def _moe(lib, x, router, w1, w2):
    F = lib.nn.functional
    weights, chosen = F.softmax(x @ router, dim=-1).topk(TOP_K, dim=-1)
    order = chosen.reshape(-1).argsort(stable=True)
    offs = lib.bincount(chosen.reshape(-1), minlength=EXPERTS).cumsum(0).to(lib.int32)
    token = order // TOP_K
    h = F.gelu(F.grouped_mm(x[token], w1, offs=offs))
    y = F.grouped_mm(h, w2, offs=offs) * weights.reshape(-1)[order].unsqueeze(-1)
    return lib.zeros_like(x).index_add(0, token, y)


@pytest.mark.parametrize("tokens", [24, 3])
def test_moe_layer_matches_torch(tokens):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in
              [(tokens, WIDTH), (WIDTH, EXPERTS), (EXPERTS, WIDTH, HIDDEN), (EXPERTS, HIDDEN, WIDTH)]]
    g = rng.standard_normal((tokens, WIDTH)).astype(np.float32)
    results = {}
    for lib in (torch, ember):
        leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = _moe(lib, *leaves)
        out.backward(lib.tensor(g))
        results[lib.__name__] = [out.detach().numpy()] + [t.grad.numpy() for t in leaves]
    for i, (e, t) in enumerate(zip(results["ember"], results["torch"])):
        np.testing.assert_allclose(e, t, rtol=1e-4, atol=1e-4, err_msg=f"result {i}")


def test_grouped_mm_takes_its_arguments_by_keyword():
    a, b = ember.ones(4, 8), ember.ones(2, 8, 4)
    with pytest.raises(TypeError):
        ember.nn.functional.grouped_mm(a, b, ember.tensor([2, 4], dtype=ember.int32))
    out = ember.nn.functional.grouped_mm(a, b, offs=ember.tensor([1, 4], dtype=ember.int32))
    assert out.shape == (4, 4) and out.dtype == ember.float32 and out.sum().item() == 128
