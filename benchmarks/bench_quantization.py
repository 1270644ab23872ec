"""Quantized tensors against PyTorch: ``quantize_per_tensor`` of 1M float32 values to quint8 and its dequantization
(compiled loops once ready), ``ember.ops.quantized.add`` of two 1M quint8 tensors, quantized linear layers and
convolutions (ops and modules; the compiled u8 x s8 product where the CPU has AVX-512 VNNI) and a dynamic LSTM."""
import warnings

import numpy as np
from _harness import benchmark, interleaved

N = 1 << 20
warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")


def _inputs(lib, seed=0):
    return lib.tensor(np.random.default_rng(seed).standard_normal(N).astype(np.float32))


def _ready():
    """Both libraries warmed up, ember's compiled loops built (timed once ready): quantize, dequantize, and the
    integer product of linear layers and convolutions where the CPU has it."""
    import torch

    import ember
    from ember import _jit
    with _jit.forced():
        ember.quantize_per_tensor(_inputs(ember), 0.02, 128, ember.quint8).dequantize()
        x, packed = _linear_inputs(ember)
        ember.ops.quantized.linear(x, packed, 0.05, 64)
        x, packed = _conv_inputs(ember)
        ember.ops.quantized.conv2d(x, packed, 0.05, 64)
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


def _linear_inputs(lib, seed=0):
    rng = np.random.default_rng(seed)
    x = lib.quantize_per_tensor(lib.tensor(rng.standard_normal((256, 1024)).astype(np.float32)), 0.03, 120,
                                lib.quint8)
    w = lib.quantize_per_channel(lib.tensor((rng.standard_normal((1024, 1024)) * 0.05).astype(np.float32)),
                                 lib.tensor(np.full(1024, 0.002)), lib.tensor(np.zeros(1024, np.int64)), 0, lib.qint8)
    return x, lib.ops.quantized.linear_prepack(w, lib.tensor(rng.standard_normal(1024).astype(np.float32)))


@benchmark("quantized linear (ops.quantized.linear) 256x1024 -> 1024, per-channel weights", goal=1.5)
def qlinear():
    ember, torch = _ready()
    (xe, pe), (xt, pt) = _linear_inputs(ember), _linear_inputs(torch)
    return interleaved(lambda: ember.ops.quantized.linear(xe, pe, 0.05, 64),
                       lambda: torch.ops.quantized.linear(xt, pt, 0.05, 64))


def _conv_inputs(lib, seed=0):
    rng = np.random.default_rng(seed)
    x = lib.quantize_per_tensor(lib.tensor(rng.standard_normal((32, 16, 32, 32)).astype(np.float32)), 0.03, 120,
                                lib.quint8)
    w = lib.quantize_per_tensor(lib.tensor((rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)), 0.002,
                                0, lib.qint8)
    b = lib.tensor(rng.standard_normal(32).astype(np.float32))
    return x, lib.ops.quantized.conv2d_prepack(w, b, [1, 1], [1, 1], [1, 1], 1)


@benchmark("quantized conv2d (ops.quantized.conv2d) 32x16x32x32 -> 32, 3x3", goal=1.5)
def qconv2d():
    ember, torch = _ready()
    (xe, pe), (xt, pt) = _conv_inputs(ember), _conv_inputs(torch)
    return interleaved(lambda: ember.ops.quantized.conv2d(xe, pe, 0.05, 64),
                       lambda: torch.ops.quantized.conv2d(xt, pt, 0.05, 64))


def _modules(lib):
    """The converted modules a model runs (``ao.nn.quantized`` Linear and Conv2d, the benchmark rows above through
    the modules' own kernels) with the same integers in both libraries."""
    nnq = lib.ao.nn.quantized
    (x_lin, packed_lin), (x_conv, packed_conv) = _linear_inputs(lib), _conv_inputs(lib)
    linear = nnq.Linear(1024, 1024)
    linear.set_weight_bias(*packed_lin.unpack())
    linear.scale, linear.zero_point = 0.05, 64
    conv = nnq.Conv2d(16, 32, 3, padding=1)
    conv.set_weight_bias(*packed_conv.unpack())
    conv.scale, conv.zero_point = 0.05, 64
    return (linear, x_lin), (conv, x_conv)


@benchmark("ao.nn.quantized.Linear 256x1024 -> 1024 (x86 engine), per-channel weights", goal=1.5)
def qlinear_module():
    ember, torch = _ready()
    ((le, xe), _), ((lt, xt), _) = _modules(ember), _modules(torch)
    return interleaved(lambda: le(xe), lambda: lt(xt))


@benchmark("ao.nn.quantized.Conv2d 32x16x32x32 -> 32, 3x3 (x86 engine)", goal=1.5)
def qconv2d_module():
    ember, torch = _ready()
    (_, (ce, xe)), (_, (ct, xt)) = _modules(ember), _modules(torch)
    return interleaved(lambda: ce(xe), lambda: ct(xt))


def _lstm(lib):
    """A dynamically quantized LSTM (2 layers, 256 inputs and hidden units; int8 weights) and a float input of 64
    steps and batch 32, from the same float weights in both libraries."""
    rng = np.random.default_rng(0)
    lstm = lib.nn.LSTM(256, 256, num_layers=2).eval()
    lstm.load_state_dict({k: lib.tensor((rng.standard_normal(tuple(v.shape)) * 0.06).astype(np.float32))
                          for k, v in lstm.state_dict().items()})
    q = lib.ao.quantization.quantize_dynamic(lib.nn.Sequential(lstm), {lib.nn.LSTM}, dtype=lib.qint8)[0]
    x = lib.tensor(rng.standard_normal((64, 32, 256)).astype(np.float32))
    if lib.__name__ == "ember":  # (timed once the compiled loops its cells use, e.g. sigmoid's, are ready)
        from ember import _jit
        with lib.no_grad():
            q(x)
        _jit.wait()
    return q, x


@benchmark("dynamic-quantized LSTM 2x256, seq 64, batch 32, forward (x86 engine)", goal=1.5)
def qlstm_dynamic():
    ember, torch = _ready()
    (le, xe), (lt, xt) = _lstm(ember), _lstm(torch)
    with torch.no_grad(), ember.no_grad():
        return interleaved(lambda: le(xe), lambda: lt(xt))
