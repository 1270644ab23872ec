"""The elementwise and row ops of real models against PyTorch (CPU, same thread count): forward and backward.

    python benchmarks/bench_model_ops.py [SUBSTRING]   # rows whose name contains SUBSTRING (default: all)

Shapes: 1M float32 elements, a transformer activation 12x64x512 and attention 12x4x64x64 (batch, heads,
tokens, head dim). A backward row times ``autograd.grad(y, x, g, retain_graph=True)`` alone (the forward's
graph made once). Each row alternates ember and torch calls over several repeats and reports the medians, so
that load from other processes on the machine touches both sides alike.
"""
import sys

import numpy as np
from _harness import benchmark, interleaved

GOAL = 1.5
SHAPES = {"1M": (1_000_000,), "12x64x512": (12, 64, 512)}
ATTENTION = (12, 4, 64, 64)


def _data(shape, kind, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    if kind == "positive":
        x = np.abs(x) + np.float32(0.1)
    elif kind == "wide":
        x *= 3
    return x


def _pair(x, requires_grad=False):
    import torch

    import ember
    return ember.tensor(x, requires_grad=requires_grad), torch.tensor(x, requires_grad=requires_grad)


def _compare(fe, ft):
    fe(), ft()  # warm-up: caches, lazily built kernels (numba's: waited for by interleaved), helper threads
    return interleaved(fe, ft)


def _forward(fn, shape, kind):
    def run():
        import torch

        import ember
        e, t = _pair(_data(shape, kind))
        return _compare(lambda: fn(ember, e), lambda: fn(torch, t))
    return run


def _backward(fn, shape, kind):
    def run():
        import torch

        import ember
        e, t = _pair(_data(shape, kind), requires_grad=True)
        ye, yt = fn(ember, e), fn(torch, t)
        ge, gt = _pair(_data(tuple(yt.shape), "normal", seed=1))
        return _compare(lambda: ember.autograd.grad(ye, e, ge, retain_graph=True),
                        lambda: torch.autograd.grad(yt, t, gt, retain_graph=True))
    return run


# name -> (function of (lib, x), input kind, differentiable)
POINTWISE = {
    "erf": (lambda lib, x: lib.special.erf(x), "wide", True),  # (ember.erf is this op)
    "erfc": (lambda lib, x: lib.special.erfc(x), "wide", True),
    "gelu": (lambda lib, x: lib.nn.functional.gelu(x), "wide", True),
    "gelu tanh": (lambda lib, x: lib.nn.functional.gelu(x, approximate="tanh"), "wide", True),
    "silu": (lambda lib, x: lib.nn.functional.silu(x), "wide", True),
    "softplus": (lambda lib, x: lib.nn.functional.softplus(x), "wide", True),
    "tanh": (lambda lib, x: lib.tanh(x), "wide", True),
    "sigmoid": (lambda lib, x: lib.sigmoid(x), "wide", True),
    "exp": (lambda lib, x: lib.exp(x), "normal", True),
    "log": (lambda lib, x: lib.log(x), "positive", True),
    **{f"pow {p}": ((lambda lib, x, p=p: lib.pow(x, p)), "positive", True)
       for p in (2, 3, 2.0, 3.0, 0.5, -1, -2.0, 1.5, 2.7)},
    "softmax(-1)": (lambda lib, x: lib.softmax(x, -1), "wide", True),
    "log_softmax(-1)": (lambda lib, x: lib.log_softmax(x, -1), "wide", True),
}


def _layer_norm_rows(shape):
    import torch

    import ember
    w, b = _data(shape[-1:], "positive", 2), _data(shape[-1:], "normal", 3)
    params = {}

    def fn(lib, x):
        if lib not in params:
            params[lib] = (lib.tensor(w, requires_grad=True), lib.tensor(b, requires_grad=True))
        return lib.nn.functional.layer_norm(x, shape[-1:], *params[lib])
    label = "x".join(map(str, shape))
    benchmark(f"layer_norm forward, {label} float32", goal=GOAL)(_forward(fn, shape, "normal"))
    benchmark(f"layer_norm backward, {label} float32", goal=GOAL)(_backward(fn, shape, "normal"))
    del torch, ember


def _attention_rows():
    mask = np.random.default_rng(4).random(ATTENTION[-2:]) < 0.8
    mask[:, 0] = True  # every query attends somewhere

    def causal(lib, q):
        return lib.nn.functional.scaled_dot_product_attention(q, q * 0.5, q * 2, is_causal=True)

    def masked(lib, q):
        return lib.nn.functional.scaled_dot_product_attention(q, q * 0.5, q * 2, attn_mask=lib.tensor(mask))
    for name, fn in (("is_causal", causal), ("bool attn_mask", masked)):
        label = "x".join(map(str, ATTENTION))
        benchmark(f"sdpa {name} forward, {label} float32", goal=GOAL)(_forward(fn, ATTENTION, "normal"))
        benchmark(f"sdpa {name} backward, {label} float32", goal=GOAL)(_backward(fn, ATTENTION, "normal"))


def _register():
    for name, (fn, kind, differentiable) in POINTWISE.items():
        for label, shape in SHAPES.items():
            benchmark(f"{name} forward, {label} float32", goal=GOAL)(_forward(fn, shape, kind))
            if differentiable:
                benchmark(f"{name} backward, {label} float32", goal=GOAL)(_backward(fn, shape, kind))
    _layer_norm_rows((12, 64, 512))
    _attention_rows()


_register()


def main(argv):
    import torch
    from _harness import BENCHMARKS, blas_threads

    import ember  # noqa: F401
    import ember.special  # noqa: F401
    torch.set_num_threads(blas_threads()[0])
    pattern = argv[0] if argv else ""
    print(f"threads: torch {torch.get_num_threads()}")
    for b in BENCHMARKS:
        if pattern in b["name"]:
            t = b["fn"]()
            r = t["ember"] / t["torch"]
            print(f"{b['name']:<48} ember {t['ember'] * 1e3:8.3f} ms  torch {t['torch'] * 1e3:8.3f} ms  ratio "
                  f"{r:6.2f}" + ("  (over goal)" if r > b["goal"] else ""), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
