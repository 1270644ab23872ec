"""Quantized tensors against PyTorch: ``quantize_per_tensor`` of 1M float32 values to quint8 (the compiled loop
once ready, split over the cores), its dequantization, and ``ember.ops.quantized.add`` of two 1M quint8 tensors."""
import warnings

import numpy as np
from _harness import benchmark, interleaved

N = 1 << 20
warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")


def _inputs(lib, seed=0):
    return lib.tensor(np.random.default_rng(seed).standard_normal(N).astype(np.float32))


def _ready():
    """Both libraries warmed up, ember's compiled quantize loop built (timed once ready)."""
    import torch

    import ember
    from ember import _jit
    with _jit.forced():
        ember.quantize_per_tensor(_inputs(ember), 0.02, 128, ember.quint8)
    _jit.wait()
    return ember, torch


@benchmark("quantize_per_tensor, 1M float32 -> quint8", goal=1.5)
def quantize_1m():
    ember, torch = _ready()
    e, t = _inputs(ember), _inputs(torch)
    return interleaved(lambda: ember.quantize_per_tensor(e, 0.02, 128, ember.quint8),
                       lambda: torch.quantize_per_tensor(t, 0.02, 128, torch.quint8))


@benchmark("dequantize, 1M quint8 -> float32", goal=1.5)
def dequantize_1m():
    ember, torch = _ready()
    qe = ember.quantize_per_tensor(_inputs(ember), 0.02, 128, ember.quint8)
    qt = torch.quantize_per_tensor(_inputs(torch), 0.02, 128, torch.quint8)
    return interleaved(qe.dequantize, qt.dequantize)


@benchmark("quantized add (ops.quantized.add), 1M quint8", goal=1.5)
def qadd_1m():
    ember, torch = _ready()
    qe = ember.quantize_per_tensor(_inputs(ember), 0.02, 128, ember.quint8)
    qt = torch.quantize_per_tensor(_inputs(torch), 0.02, 128, torch.quint8)
    return interleaved(lambda: ember.ops.quantized.add(qe, qe, 0.04, 128),
                       lambda: torch.ops.quantized.add(qt, qt, 0.04, 128))
