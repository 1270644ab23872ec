"""ember-amp against PyTorch: the MLP training step of bench_nn under CPU bfloat16 autocast, and a
GradScaler's unscale_ + step + update over 100 parameters of 10k elements."""
import numpy as np
from _harness import benchmark, best
from bench_nn import _mlp


def _amp_step(lib, seed=0, enabled=True):
    """One MLP training step (784-512-512-10, batch 256, SGD with momentum) with the forward pass and the
    loss under ``autocast("cpu", dtype=bfloat16)`` (or, with ``enabled=False``, in float32)."""
    lib.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = _mlp(lib)
    x = lib.tensor(rng.standard_normal((256, 784)).astype(np.float32))
    y = lib.tensor(rng.integers(0, 10, 256))
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = lib.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        with lib.autocast("cpu", dtype=lib.bfloat16, enabled=enabled):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    step()
    return step


@benchmark("MLP 784-512-512-10 SGD step under CPU bfloat16 autocast, batch 256", goal=1.5)
def mlp_autocast_step():
    import torch

    import ember
    return {name: best("step()", step=_amp_step(lib)) for name, lib in (("ember", ember), ("torch", torch))}


@benchmark("floor of the row above: ember's float32 MLP step against torch's bfloat16 autocast step", goal=1.5)
def mlp_autocast_floor():
    """NumPy has no bfloat16 GEMM (its OpenBLAS exports no sbgemm), so ember computes bfloat16 products in
    float32 on the rounded inputs; torch uses the CPU's AVX512-BF16 GEMMs where it has them. The float32 step
    is what ember's autocast step cannot go below: this row is the best ratio the row above can reach here."""
    import torch

    import ember
    return {"ember": best("step()", step=_amp_step(ember, enabled=False)),
            "torch": best("step()", step=_amp_step(torch))}


def _scaler_step(lib, n=100, size=10_000, seed=0):
    """``unscale_`` + ``step`` + ``update`` of a GradScaler("cpu") over ``n`` parameters of ``size`` elements
    (plain SGD); the gradients are re-filled with scaled values before each call, outside the timing's
    interest but inside its loop, identically for both libraries."""
    rng = np.random.default_rng(seed)
    params = [lib.nn.Parameter(lib.tensor(rng.standard_normal(size).astype(np.float32))) for _ in range(n)]
    grads = [lib.tensor(rng.standard_normal(size).astype(np.float32) * 1024) for _ in range(n)]
    opt = lib.optim.SGD(params, lr=1e-6)
    scaler = lib.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=10 ** 9)
    scaler.scale(lib.ones(1))

    def step():
        for p, g in zip(params, grads):
            p.grad = g.clone()
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
    step()
    return step


def _refill_only(lib, n=100, size=10_000, seed=0):
    rng = np.random.default_rng(seed)
    params = [lib.nn.Parameter(lib.tensor(rng.standard_normal(size).astype(np.float32))) for _ in range(n)]
    grads = [lib.tensor(rng.standard_normal(size).astype(np.float32)) for _ in range(n)]

    def step():
        for p, g in zip(params, grads):
            p.grad = g.clone()
    return step


@benchmark("GradScaler unscale_ + step + update, 100 params x 10k (SGD)", goal=1.0)
def grad_scaler_step():
    import torch

    import ember
    # the gradient refill is timed alone and subtracted, so that the figure is the scaler's (and SGD's) work
    return {name: best("step()", step=_scaler_step(lib)) - best("step()", step=_refill_only(lib))
            for name, lib in (("ember", ember), ("torch", torch))}
