"""ember.func against torch.func: per-sample gradients with vmap(grad) (PyTorch's per-sample-gradients recipe),
a batched Jacobian with vmap(jacrev)."""
import numpy as np
from _harness import benchmark, interleaved


def _mlp(lib):
    lib.manual_seed(0)
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def _per_sample(lib, func, model, x, y):
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(params, sample, target):
        out = func.functional_call(model, params, (sample.unsqueeze(0),))
        return lib.nn.functional.cross_entropy(out, target.unsqueeze(0))

    step = func.vmap(func.grad(loss), in_dims=(None, 0, 0))
    return lambda: step(params, x, y)


@benchmark("per-sample gradients, vmap(grad), MLP 784-128-10, batch 64", goal=1.5)
def per_sample_grads():
    import torch
    import torch.func as tf

    import ember
    import ember.func as ef
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((64, 784)).astype(np.float32), rng.integers(0, 10, 64)
    me, mt = _mlp(ember), _mlp(torch)
    me.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()})
    fe = _per_sample(ember, ef, me, ember.tensor(x), ember.tensor(y))
    ft = _per_sample(torch, tf, mt, torch.tensor(x), torch.tensor(y))
    fe(), ft()
    return interleaved(fe, ft, repeats=5, budget=0.1)


@benchmark("vmap(jacrev) of a 16-16 tanh layer, batch 64", goal=2.0)
def batched_jacobian():
    import torch
    import torch.func as tf

    import ember
    import ember.func as ef
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((16, 16)).astype(np.float32), rng.standard_normal((64, 16)).astype(np.float32)
    sides = {}
    for name, lib, func in (("ember", ember, ef), ("torch", torch, tf)):
        W, X = lib.tensor(w), lib.tensor(x)
        jac = func.vmap(func.jacrev(lambda v, W=W: (W @ v).tanh()))
        sides[name] = (lambda jac=jac, X=X: jac(X))
    sides["ember"](), sides["torch"]()
    return interleaved(sides["ember"], sides["torch"], repeats=5, budget=0.05)
