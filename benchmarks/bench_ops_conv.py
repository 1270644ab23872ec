"""Neural-network primitives against PyTorch: conv2d (batch 32, 16->32 channels, 32x32, 3x3, padding 1) forward,
and forward plus backward (gradients of input, weight and bias)."""
import numpy as np
from _harness import benchmark, best


def _operands(lib, requires_grad=False):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 16, 32, 32)).astype(np.float32)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    return {"x": lib.tensor(x, requires_grad=requires_grad), "w": lib.tensor(w, requires_grad=requires_grad),
            "b": lib.tensor(b, requires_grad=requires_grad), "g": lib.ones(32, 32, 32, 32), "m": lib}


@benchmark("conv2d forward 32x16x32x32, 3x3, 32 out, float32", goal=1.5)
def conv2d_forward():
    import torch

    import ember
    stmt = "m.conv2d(x, w, b, padding=1)"
    return {name: best(stmt, **_operands(lib)) for name, lib in (("ember", ember), ("torch", torch))}


@benchmark("conv2d forward+backward 32x16x32x32, 3x3, 32 out, float32", goal=1.5)
def conv2d_forward_backward():
    import torch

    import ember
    stmt = "m.conv2d(x, w, b, padding=1).backward(g)"
    return {name: best(stmt, **_operands(lib, True)) for name, lib in (("ember", ember), ("torch", torch))}
