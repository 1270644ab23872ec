"""Post-training static quantization of the digits CNN of ``train_digits.py``: train it briefly in float32 (or
load its checkpoint), fuse each convolution with its ReLU, calibrate the observers on training images, convert to
int8 and compare the test accuracy and the size of the saved state_dict.

    python examples/quantize_digits.py [--epochs 3] [--checkpoint digits_checkpoint.pt] [--engine x86]

The recipe is PyTorch's eager-mode one (``torch.ao.quantization`` names); the last two lines printed are e.g.
``float32: accuracy 98.1%, 86.1 KB`` and ``int8: accuracy 98.3%, 29.0 KB``.
"""
import argparse
import io
import os
import time
import warnings

from train_digits import evaluate, load_data, make_model

import ember
import ember.ao.quantization as tq
import ember.nn as nn
from ember.utils.data import DataLoader


def train(model, train_set, epochs, seed):
    """A short float32 training run (Adam, the schedule of train_digits.py)."""
    optimizer = ember.optim.Adam(model.parameters(), lr=5e-3)
    scheduler = ember.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.85)
    loader = DataLoader(train_set, batch_size=32, shuffle=True, generator=ember.Generator().manual_seed(seed))
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(epochs):
        for images, labels in loader:
            optimizer.zero_grad()
            loss_fn(model(images), labels).backward()
            optimizer.step()
        scheduler.step()


def size_kb(model):
    """The size of the model's state_dict as saved (PyTorch's checkpoint format)."""
    buf = io.BytesIO()
    ember.save(model.state_dict(), buf)
    return len(buf.getvalue()) / 1024


def quantize(model, calibration, engine):
    """The int8 model: QuantWrapper (quantize the input, dequantize the logits), conv+ReLU fused, observers
    calibrated on ``calibration`` batches, then converted."""
    ember.backends.quantized.engine = engine
    q = tq.QuantWrapper(model).eval()
    # make_model's Sequential: conv, relu, pool, conv, relu, pool, flatten, linear
    q = tq.fuse_modules(q, [["module.0", "module.1"], ["module.3", "module.4"]])
    q.qconfig = tq.get_default_qconfig(engine)
    tq.prepare(q, inplace=True)
    with ember.no_grad():
        for images, _ in calibration:
            q(images)
    return tq.convert(q, inplace=True)


def float_model_parser(description):
    """The options of the float32 model the digits quantization examples start from."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--epochs", type=int, default=3, help="float32 training epochs (without --checkpoint)")
    parser.add_argument("--checkpoint", help="a checkpoint of train_digits.py to use instead of training")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def float_model(parser, args):
    """(model, train set, test set): the float32 digits CNN, trained for ``--epochs`` or read from ``--checkpoint``."""
    # (PyTorch's notice that its quantized tensor factories are deprecated, which ember repeats)
    warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
    ember.manual_seed(args.seed)
    train_set, test_set = load_data(args.seed)
    model = make_model()
    if args.checkpoint:
        if not os.path.exists(args.checkpoint):
            parser.error(f"--checkpoint: no file at {args.checkpoint}")
        model.load_state_dict(ember.load(args.checkpoint)["model"])
    else:
        train(model, train_set, args.epochs, args.seed)
    return model, train_set, test_set


def main(argv=None):
    parser = float_model_parser(__doc__.splitlines()[0])
    parser.add_argument("--engine", default="x86", choices=ember.backends.quantized.supported_engines)
    parser.add_argument("--calibration-batches", type=int, default=8, help="batches of 32 training images")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    model, train_set, test_set = float_model(parser, args)
    test_loader = DataLoader(test_set, batch_size=256)
    float_accuracy, float_size = evaluate(model, test_loader), size_kb(model)

    calibration = DataLoader(train_set, batch_size=32, shuffle=True, generator=ember.Generator().manual_seed(1))
    calibration = [batch for batch, _ in zip(calibration, range(args.calibration_batches))]
    qmodel = quantize(model, calibration, args.engine)
    int8_accuracy, int8_size = evaluate(qmodel, test_loader), size_kb(qmodel)

    print(f"time: {time.perf_counter() - start:.1f} s")
    print(f"float32: accuracy {float_accuracy:.1%}, {float_size:.1f} KB")
    print(f"int8: accuracy {int8_accuracy:.1%}, {int8_size:.1f} KB")


if __name__ == "__main__":
    main()
