"""Neural-network primitives against PyTorch: conv2d forward (batch 32, 16->32 channels, 32x32, 3x3, padding 1)."""
import numpy as np
from _harness import benchmark, best


@benchmark("conv2d forward 32x16x32x32, 3x3, 32 out, float32", goal=1.5)
def conv2d_forward():
    import torch

    import ember
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 16, 32, 32)).astype(np.float32)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    ex, ew, eb = ember.tensor(x), ember.tensor(w), ember.tensor(b)
    tx, tw, tb = torch.tensor(x), torch.tensor(w), torch.tensor(b)
    stmt = "m.conv2d(x, w, b, padding=1)"
    return {"ember": best(stmt, m=ember, x=ex, w=ew, b=eb), "torch": best(stmt, m=torch, x=tx, w=tw, b=tb)}
