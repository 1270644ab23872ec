"""ember-core against PyTorch: eager overhead of a tiny add, a large matmul, and import time."""
import numpy as np
from _harness import benchmark, best, import_time


def _pair(*shape, seed=0):
    import torch

    import ember
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return ember.tensor(x), torch.tensor(x)


@benchmark("eager a + b, 8 float32", goal=1.5)
def add_small():
    (ea, ta), (eb, tb) = _pair(8, seed=0), _pair(8, seed=1)
    return {"ember": best("a + b", a=ea, b=eb), "torch": best("a + b", a=ta, b=tb)}


@benchmark("matmul 1024x1024 float32", goal=1.1)
def matmul_1024():
    (ea, ta), (eb, tb) = _pair(1024, 1024, seed=0), _pair(1024, 1024, seed=1)
    return {"ember": best("a @ b", repeat=5, a=ea, b=eb), "torch": best("a @ b", repeat=5, a=ta, b=tb)}


@benchmark("import time (fresh process)", goal=0.5)
def import_wall_time():
    return {"ember": import_time("ember"), "torch": import_time("torch")}
