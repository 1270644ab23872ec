"""Convolutions against PyTorch, float32: conv2d forward, and forward plus backward (gradients of input, weight and
bias), at the shapes of ResNet-18 on 32x32 images (batch 32: 3x3 stride 1 and 2, the 1x1 stride-2 downsamples,
the 3x3 and 7x7 stems; the 7x7 stem also on 224x224, batch 8), of the digits demo's CNN and the first rows here
(16 -> 32 channels on 32x32)."""
import numpy as np
from _harness import benchmark, best, interleaved

# (label, batch, in channels, out channels, image size, kernel, stride, padding)
SHAPES = [
    ("3x3 64->64 on 32x32", 32, 64, 64, 32, 3, 1, 1),
    ("3x3 128->128 on 16x16", 32, 128, 128, 16, 3, 1, 1),
    ("3x3 256->256 on 8x8", 32, 256, 256, 8, 3, 1, 1),
    ("3x3 512->512 on 4x4", 32, 512, 512, 4, 3, 1, 1),
    ("3x3 stride 2 64->128 on 32x32", 32, 64, 128, 32, 3, 2, 1),
    ("3x3 stride 2 128->256 on 16x16", 32, 128, 256, 16, 3, 2, 1),
    ("3x3 stride 2 256->512 on 8x8", 32, 256, 512, 8, 3, 2, 1),
    ("1x1 stride 2 64->128 on 32x32", 32, 64, 128, 32, 1, 2, 0),
    ("1x1 stride 2 128->256 on 16x16", 32, 128, 256, 16, 1, 2, 0),
    ("1x1 stride 2 256->512 on 8x8", 32, 256, 512, 8, 1, 2, 0),
    ("7x7 stride 2 stem 3->64 on 32x32", 32, 3, 64, 32, 7, 2, 3),
    ("7x7 stride 2 stem 3->64 on 224x224", 8, 3, 64, 224, 7, 2, 3),
    ("3x3 stem 3->64 on 32x32", 32, 3, 64, 32, 3, 1, 1),
    ("digits CNN 3x3 1->32 on 8x8", 32, 1, 32, 8, 3, 1, 1),
    ("digits CNN 3x3 32->64 on 4x4", 32, 32, 64, 4, 3, 1, 1),
]


def _operands(lib, N, C, O, H, k, requires_grad, out):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, C, H, H)).astype(np.float32)
    w = (rng.standard_normal((O, C, k, k)) / np.sqrt(C * k * k)).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    return {"x": lib.tensor(x, requires_grad=requires_grad), "w": lib.tensor(w, requires_grad=requires_grad),
            "b": lib.tensor(b, requires_grad=requires_grad), "g": lib.ones(N, O, out, out), "m": lib}


def _declare(label, N, C, O, H, k, stride, padding, backward):
    out = (H + 2 * padding - k) // stride + 1
    stmt = f"m.conv2d(x, w, b, stride={stride}, padding={padding})" + (".backward(g)" if backward else "")

    @benchmark(f"conv2d {'forward+backward' if backward else 'forward'} {label}, batch {N}, float32", goal=2.0)
    def run():
        import torch

        import ember
        # timed alternately (load from other processes touches both sides alike)
        fe, ft = (_call(stmt, _operands(lib, N, C, O, H, k, backward, out)) for lib in (ember, torch))
        fe(), ft()  # warm-up: caches, the parallel path's helper threads
        return interleaved(fe, ft, budget=0.05)
    return run


def _call(stmt, namespace):
    code = compile(stmt, "<conv>", "eval")
    return lambda: eval(code, namespace)  # noqa: S307 - the benchmark's own statement


@benchmark("conv2d forward 32x16x32x32, 3x3, 32 out, float32", goal=1.5)
def conv2d_forward():
    import torch

    import ember
    stmt = "m.conv2d(x, w, b, padding=1)"
    return {name: best(stmt, **_operands(lib, 32, 16, 32, 32, 3, False, 32)) for name, lib in (("ember", ember),
                                                                                               ("torch", torch))}


@benchmark("conv2d forward+backward 32x16x32x32, 3x3, 32 out, float32", goal=1.5)
def conv2d_forward_backward():
    import torch

    import ember
    stmt = "m.conv2d(x, w, b, padding=1).backward(g)"
    return {name: best(stmt, **_operands(lib, 32, 16, 32, 32, 3, True, 32)) for name, lib in (("ember", ember),
                                                                                              ("torch", torch))}


for _shape in SHAPES:
    for _backward in (False, True):
        _declare(*_shape, _backward)
