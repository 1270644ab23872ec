"""Linear algebra and FFT against PyTorch: half-precision and float32 matrix products, a batched solve,
an SVD and an FFT."""
import numpy as np
from _harness import benchmark, best


def _pair(*shape, seed=0, dtype="float32"):
    import torch

    import ember
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return ember.tensor(x).to(getattr(ember, dtype)), torch.tensor(x).to(getattr(torch, dtype))


def _both(stmt, repeat=7, **pairs):
    return {lib: best(stmt, repeat=repeat, **{k: v[i] for k, v in pairs.items()})
            for i, lib in enumerate(("ember", "torch"))}


@benchmark("mm 512x512 bfloat16", goal=1.5)
def mm_bf16():
    return _both("m.mm(a, b)", a=_pair(512, 512, dtype="bfloat16"), b=_pair(512, 512, seed=1, dtype="bfloat16"),
                 m=_libs())


@benchmark("mm 512x512 float16", goal=1.5)
def mm_f16():
    return _both("m.mm(a, b)", a=_pair(512, 512, dtype="float16"), b=_pair(512, 512, seed=1, dtype="float16"),
                 m=_libs())


@benchmark("mm 1024x1024 float32", goal=1.1)
def mm_f32():
    return _both("m.mm(a, b)", repeat=5, a=_pair(1024, 1024), b=_pair(1024, 1024, seed=1), m=_libs())


@benchmark("addmm 256x512 @ 512x512 + bias bfloat16", goal=1.5)
def addmm_bias_bf16():
    # autocast's linear: the bias is converted before it broadcasts over the product
    return _both("m.addmm(c, a, b)", c=_pair(512, seed=2, dtype="bfloat16"), a=_pair(256, 512, dtype="bfloat16"),
                 b=_pair(512, 512, seed=1, dtype="bfloat16"), m=_libs())


@benchmark("mm 512x512 float32 backward, one operand requiring grad", goal=1.5)
def mm_backward_one():
    a, b = _pair(512, 512), _pair(512, 512, seed=1)
    for t in b:
        t.requires_grad_()
    return _both("m.mm(a, b).backward(g)", a=a, b=b, g=_pair(512, 512, seed=2), m=_libs())


@benchmark("linalg.solve 64 x (32x32) float64", goal=1.5)
def solve_batched():
    a, b = _pair(64, 32, 32, dtype="float64"), _pair(64, 32, 4, seed=1, dtype="float64")
    return _both("m.linalg.solve(a, b)", a=a, b=b, m=_libs())


@benchmark("linalg.svd 256x256 float32", goal=1.5)
def svd():
    return _both("m.linalg.svd(a)", repeat=3, a=_pair(256, 256), m=_libs())


@benchmark("fft.rfft 64 x 4096 float32", goal=1.5)
def rfft():
    return _both("m.fft.rfft(a)", a=_pair(64, 4096), m=_libs())


def _libs():
    import torch

    import ember
    return ember, torch
