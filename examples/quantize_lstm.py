"""Dynamic quantization of an LSTM model: a two-layer LSTM trained briefly to continue sine waves, then
``quantize_dynamic`` stores its LSTM and Linear weights as int8 (or float16) and quantizes the activations on the
fly. Prints the float32 and quantized models' prediction errors, their sizes and their forward times.

    python examples/quantize_lstm.py [--steps 30] [--dtype qint8|float16] [--engine x86]

The last two lines printed are e.g. ``float32: test MSE 0.0073, 54.0 KB, 6.6 ms`` and
``qint8: test MSE 0.0074, 18.6 KB, 21.9 ms`` (the quantized LSTM runs its steps in Python).
"""
import argparse
import io
import math
import time
import warnings

import ember
import ember.ao.quantization as tq
import ember.nn as nn


class SineLSTM(nn.Module):
    """Reads a sequence of values and predicts, at each step, the next one."""

    def __init__(self, hidden=32):
        super().__init__()
        self.lstm = nn.LSTM(1, hidden, num_layers=2)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):  # (steps, batch, 1)
        return self.head(self.lstm(x)[0])


def waves(batch, steps, generator):
    """``batch`` sine waves of random phase and period (16 to 32 steps), with noise: (steps + 1, batch, 1)."""
    t = ember.arange(steps + 1, dtype=ember.float32)[:, None]
    phase = ember.rand(batch, generator=generator) * 2 * math.pi
    period = 16 + 16 * ember.rand(batch, generator=generator)
    noise = 0.02 * ember.randn(steps + 1, batch, generator=generator)
    return (ember.sin(2 * math.pi * t / period + phase) + noise)[..., None]


def mse(model, seq):
    with ember.no_grad():
        return nn.functional.mse_loss(model(seq[:-1]), seq[1:]).item()


def size_kb(model):
    buf = io.BytesIO()
    ember.save(model.state_dict(), buf)
    return len(buf.getvalue()) / 1024


def forward_ms(model, seq, repeat=5):
    with ember.no_grad():
        model(seq[:-1])  # (warm-up)
        start = time.perf_counter()
        for _ in range(repeat):
            model(seq[:-1])
    return (time.perf_counter() - start) / repeat * 1e3


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="float32 training steps (batches of 16 waves)")
    parser.add_argument("--dtype", default="qint8", choices=["qint8", "float16"], help="the weights' type")
    parser.add_argument("--engine", default="x86", choices=ember.backends.quantized.supported_engines)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    # (PyTorch's notice that its quantized tensor factories are deprecated, which ember repeats)
    warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")

    ember.manual_seed(args.seed)
    data = ember.Generator().manual_seed(args.seed)
    model = SineLSTM()
    optimizer = ember.optim.Adam(model.parameters(), lr=3e-2)
    for _ in range(args.steps):
        seq = waves(16, 32, data)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(seq[:-1]), seq[1:]).backward()
        optimizer.step()
    model.eval()

    ember.backends.quantized.engine = args.engine
    qmodel = tq.quantize_dynamic(model, {nn.LSTM, nn.Linear}, dtype=getattr(ember, args.dtype))
    print(qmodel)
    test = waves(64, 64, ember.Generator().manual_seed(args.seed + 1))
    for name, m in (("float32", model), (args.dtype, qmodel)):
        print(f"{name}: test MSE {mse(m, test):.4f}, {size_kb(m):.1f} KB, {forward_ms(m, test):.1f} ms")


if __name__ == "__main__":
    main()
