"""Advanced indexing against PyTorch: ``x[idx]`` picking 1M of 4M float32 (the op-coverage issue's figure)
and ``gather`` along dim 1 of a (1000, 4000) float32 tensor picking (1000, 1000)."""
import numpy as np
from _harness import benchmark, best


def _tensors(*arrays):
    import torch

    import ember
    return [ember.tensor(a) for a in arrays], [torch.from_numpy(a) for a in arrays]


@benchmark("x[idx] 1M of 4M float32", goal=1.5)
def getitem_1m():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(4_000_000).astype(np.float32)
    idx = rng.integers(0, x.size, 1_000_000)
    (ex, ei), (tx, ti) = _tensors(x, idx)
    return {"ember": best("x[i]", x=ex, i=ei), "torch": best("x[i]", x=tx, i=ti)}


@benchmark("gather dim 1 (1000,4000)->(1000,1000)", goal=1.5)
def gather_1m():
    import torch

    import ember
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1000, 4000)).astype(np.float32)
    idx = rng.integers(0, 4000, (1000, 1000))
    (ex, ei), (tx, ti) = _tensors(x, idx)
    return {"ember": best("g(x, 1, i)", g=ember.gather, x=ex, i=ei),
            "torch": best("g(x, 1, i)", g=torch.gather, x=tx, i=ti)}
