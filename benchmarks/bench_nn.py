"""ember-nn against PyTorch: training steps of an MLP and of the digits demo's CNN, an LSTM's forward and
backward, bilinear upsampling forward and backward, and the peak resident memory of an MLP training loop."""
import os
import subprocess
import sys

import numpy as np
from _harness import benchmark, best, blas_threads


def _mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def _cnn(lib):  # the model of examples/train_digits.py
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 2 * 2, 10))


def _train_step(lib, make, x_shape, classes, optimizer, seed=0):
    """A closure running one training step (zero_grad, forward, cross entropy, backward, step)."""
    lib.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = make(lib)
    x = lib.tensor(rng.standard_normal(x_shape).astype(np.float32))
    y = lib.tensor(rng.integers(0, classes, x_shape[0]))
    opt = optimizer(lib, model.parameters())
    loss_fn = lib.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    step()  # warm up: state, caches
    return step


@benchmark("MLP 784-512-512-10 SGD training step, batch 256", goal=1.1)
def mlp_step():
    import torch

    import ember
    sgd = lambda lib, ps: lib.optim.SGD(ps, lr=0.01, momentum=0.9)  # noqa: E731
    return {name: best("step()", step=_train_step(lib, _mlp, (256, 784), 10, sgd))
            for name, lib in (("ember", ember), ("torch", torch))}


def _mlp_products(lib, batch=256, sizes=(784, 512, 512, 10), seed=0):
    """A closure running the eight matrix products of one MLP training step, in the layouts ember's linear
    computes them (forward x W^T per layer; backward g W for the inputs of the two upper layers, g^T x for
    every weight): NumPy's matmul for ember (what its linear calls), torch's for torch."""
    rng = np.random.default_rng(seed)
    arr = (lambda a: a) if lib == "numpy" else lib.from_numpy
    mm = np.matmul if lib == "numpy" else lib.matmul
    xs = [arr(rng.standard_normal((batch, n)).astype(np.float32)) for n in sizes[:-1]]
    ws = [arr(rng.standard_normal((o, i)).astype(np.float32)) for i, o in zip(sizes, sizes[1:])]
    gs = [arr(rng.standard_normal((batch, o)).astype(np.float32)) for o in sizes[1:]]

    def products():
        for x, w, g in zip(xs, ws, gs):
            mm(x, w.T)
            mm(g.T, x)
        for w, g in zip(ws[1:], gs[1:]):
            mm(g, w)
    return products


@benchmark("floor of the MLP row: its eight matrix products alone, NumPy's OpenBLAS against torch's BLAS",
           goal=1.1)
def mlp_products_floor():
    """The MLP step is mostly its matrix products, which ember leaves to the BLAS NumPy ships (OpenBLAS) and
    torch to its own (MKL on x86): this row is about the best ratio the MLP row can reach on this machine."""
    import torch
    return {"ember": best("products()", products=_mlp_products("numpy")),
            "torch": best("products()", products=_mlp_products(torch))}


@benchmark("digits CNN Adam training step, batch 32", goal=1.5)
def cnn_step():
    import torch

    import ember
    adam = lambda lib, ps: lib.optim.Adam(ps, lr=5e-3)  # noqa: E731
    return {name: best("step()", step=_train_step(lib, _cnn, (32, 1, 8, 8), 10, adam))
            for name, lib in (("ember", ember), ("torch", torch))}


@benchmark("LSTM 2 layers, hidden 256, seq 64, batch 32: forward+backward", goal=2.0)
def lstm_forward_backward():
    import torch

    import ember
    out = {}
    x = np.random.default_rng(0).standard_normal((64, 32, 128)).astype(np.float32)
    for name, lib in (("ember", ember), ("torch", torch)):
        lib.manual_seed(0)
        lstm = lib.nn.LSTM(128, 256, num_layers=2)
        inp = lib.tensor(x)
        out[name] = best("lstm(inp)[0].sum().backward()", repeat=3, lstm=lstm, inp=inp)
    return out


@benchmark("bilinear 2x upsampling of (8, 64, 64, 64) float32: forward+backward", goal=1.5)
def interpolate_forward_backward():
    import torch

    import ember
    out = {}
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 64, 64, 64)).astype(np.float32)
    g = rng.standard_normal((8, 64, 128, 128)).astype(np.float32)
    for name, lib in (("ember", ember), ("torch", torch)):
        inp, grad = lib.tensor(x).requires_grad_(), lib.tensor(g)
        interpolate = lib.nn.functional.interpolate
        out[name] = best("interpolate(inp, scale_factor=2, mode='bilinear').backward(grad); inp.grad = None",
                         interpolate=interpolate, inp=inp, grad=grad)
    return out


_RSS_LOOP = """
import resource, sys
import numpy as np
lib = __import__(sys.argv[1])
if sys.argv[1] == "torch":
    lib.set_num_threads(int(sys.argv[2]))
nn = lib.nn
lib.manual_seed(0)
model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
rng = np.random.default_rng(0)
x = lib.tensor(rng.standard_normal((256, 784)).astype(np.float32))
y = lib.tensor(rng.integers(0, 10, 256))
for _ in range(50):
    opt.zero_grad()
    loss_fn(model(x), y).backward()
    opt.step()
# VmHWM: the peak of this process image. (ru_maxrss would not do: Linux carries it over exec from the
# parent when subprocess starts the child with vfork, so it reported the benchmark runner's own peak.)
try:
    with open("/proc/self/status") as f:
        print(next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")))
except OSError:
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


@benchmark("peak RSS of the MLP training loop (reported in MB, not seconds)", goal=1.2)
def mlp_peak_rss():
    threads = str(blas_threads()[0])
    root = os.path.dirname(os.path.abspath(__file__)) + "/.."
    out = {}
    for name in ("ember", "torch"):
        res = subprocess.run([sys.executable, "-c", _RSS_LOOP, name, threads], capture_output=True, text=True,
                             check=True, cwd=root, env=dict(os.environ))
        out[name] = int(res.stdout.strip().splitlines()[-1]) / 1024  # KiB
    return out
