"""Reductions against PyTorch: row and column sums of a 4096x4096 float32 matrix
(``python benchmarks/run.py -k sum``)."""
import numpy as np
from _harness import benchmark, best


def _pair(*shape, seed=0):
    import torch

    import ember
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return ember.tensor(x), torch.tensor(x)


@benchmark("x.sum(dim=1) 4096x4096 float32", goal=1.2)
def row_sum_4096():
    e, t = _pair(4096, 4096)
    return {"ember": best("x.sum(dim=1)", repeat=7, x=e), "torch": best("x.sum(dim=1)", repeat=7, x=t)}


@benchmark("x.sum(dim=0) 4096x4096 float32", goal=1.2)
def col_sum_4096():
    e, t = _pair(4096, 4096)
    return {"ember": best("x.sum(dim=0)", repeat=7, x=e), "torch": best("x.sum(dim=0)", repeat=7, x=t)}

