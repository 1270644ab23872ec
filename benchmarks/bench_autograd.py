"""ember-autograd against PyTorch: graph overhead on tiny tensors, a long elementwise chain, double backward."""
import numpy as np
from _harness import benchmark, best


def _leaf(n, seed=0):
    import torch

    import ember
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    return ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)


@benchmark("(x*x).sum().backward(), 8 elements", goal=1.5)
def tiny_backward():
    e, t = _leaf(8)
    stmt = "(x * x).sum().backward()"
    return {"ember": best(stmt, x=e), "torch": best(stmt, x=t)}


def _chain(x):
    # 20 elementwise ops
    y = x
    for _ in range(4):
        y = ((y * 1.01 + 0.5).tanh() - 0.1).exp() * 0.5
    return y.sum()


@benchmark("backward of 20-op chain, 1M elements", goal=1.3)
def chain_backward():
    e, t = _leaf(1_000_000)
    stmt = "_chain(x).backward()"
    return {"ember": best(stmt, repeat=5, x=e, _chain=_chain), "torch": best(stmt, repeat=5, x=t, _chain=_chain)}


@benchmark("double backward of tanh, 1M elements", goal=1.5)
def double_backward_tanh():
    import torch

    import ember
    e, t = _leaf(1_000_000)
    stmt = "g, = lib.autograd.grad(x.tanh().sum(), x, create_graph=True); g.sum().backward()"
    return {"ember": best(stmt, repeat=5, x=e, lib=ember), "torch": best(stmt, repeat=5, x=t, lib=torch)}
