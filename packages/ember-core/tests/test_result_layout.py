"""Results PyTorch makes new tensors are row-major whatever their inputs' layout, so that a script may view() them:
reductions always, joins unless channels-last (then they stay so, as PyTorch's do)."""
import numpy as np
import pytest
import torch

import ember

REDUCTIONS = {
    "sum": lambda a: a.sum(1), "sum(keepdim)": lambda a: a.sum(1, keepdim=True), "nansum": lambda a: a.nansum(1),
    "mean": lambda a: a.mean(1), "nanmean": lambda a: a.nanmean(1), "prod": lambda a: a.prod(1),
    "std": lambda a: a.std(1), "var": lambda a: a.var(1), "amax": lambda a: a.amax(1), "amin": lambda a: a.amin(1),
    "aminmax": lambda a: a.aminmax(dim=1)[0], "logsumexp": lambda a: a.logsumexp(1), "norm": lambda a: a.norm(dim=1),
    "all": lambda a: (a > 0).all(1), "any": lambda a: (a > 0).any(1), "count_nonzero": lambda a: a.count_nonzero(1),
    "median": lambda a: a.median(1)[0], "nanmedian": lambda a: a.nanmedian(1)[0],
    "quantile": lambda a: a.quantile(0.5, dim=1), "nanquantile": lambda a: a.nanquantile(0.5, dim=1),
    "var_mean": lambda a: _lib(a).var_mean(a, 1)[1], "std_mean": lambda a: _lib(a).std_mean(a, 1)[0],
    "linalg.vector_norm": lambda a: _lib(a).linalg.vector_norm(a, dim=1),
    "linalg.norm": lambda a: _lib(a).linalg.norm(a, dim=1),
    "linalg.matrix_norm": lambda a: _lib(a).linalg.matrix_norm(a.unsqueeze(-1).expand(7, 6, 5, 2), dim=(1, 3)),
    "cat": lambda a: _lib(a).cat([a, a], 1), "concat": lambda a: _lib(a).concat([a, a], 1),
    "concatenate": lambda a: _lib(a).concatenate([a, a], 1), "stack": lambda a: _lib(a).stack([a, a], 1),
    "hstack": lambda a: _lib(a).hstack([a, a]), "vstack": lambda a: _lib(a).vstack([a, a]),
    "dstack": lambda a: _lib(a).dstack([a, a]),
}


def _lib(t):
    return torch if isinstance(t, torch.Tensor) else ember


@pytest.mark.parametrize("name", REDUCTIONS)
def test_results_of_transposed_inputs_are_row_major(name):
    x = np.random.default_rng(0).standard_normal((5, 6, 7)).astype(np.float32)
    results = [REDUCTIONS[name](lib.tensor(x).transpose(0, 2)) for lib in (torch, ember)]
    assert results[0].is_contiguous() and results[1].is_contiguous(), name
    np.testing.assert_allclose(results[1].numpy(), results[0].numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["cat", "sum", "amax"])
def test_channels_last_inputs(name):
    """Joins of channels-last tensors stay channels-last; reductions of them are row-major, as PyTorch's."""
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    call = {"cat": lambda a: _lib(a).cat([a, a], 0), "sum": lambda a: a.sum(0, keepdim=True),
            "amax": lambda a: a.amax(0, keepdim=True)}[name]
    results = [call(lib.tensor(x).to(memory_format=lib.channels_last)) for lib in (torch, ember)]
    for memory_format in ("contiguous_format", "channels_last"):
        assert len({r.is_contiguous(memory_format=getattr(_lib(r), memory_format)) for r in results}) == 1
