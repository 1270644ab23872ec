"""Find the layer that quantization hurts most, with the numeric suite, and keep it in float32: the digits CNN of
``train_digits.py`` quantized with low-bit weights (3 bits by default, per tensor: an aggressive setting that
costs accuracy), a per-layer SQNR report of the quantized model against the float one on test images, then the
layer with the worst SQNR left in float32 and the accuracy that buys back.

    python examples/numeric_suite_digits.py [--epochs 3] [--checkpoint digits_checkpoint.pt] [--weight-bits 3]
                                            [--plot report.png]

The recipe is PyTorch's eager-mode one (``torch.ao.quantization``, ``torch.ao.ns._numeric_suite`` names); the last
lines printed are e.g. ``float32: accuracy 98.1%``, ``int8, 3-bit weights: accuracy 96.9%``, ``worst SQNR:
module.3 (14.1 dB)`` and ``module.3 kept in float32: accuracy 97.8%``.
"""
import copy
import time

from quantize_digits import float_model, float_model_parser
from train_digits import evaluate

import ember
import ember.ao.quantization as tq
import ember.nn as nn
from ember.ao.ns.report import default_module_swap_list, numeric_report
from ember.utils.data import DataLoader


def low_bit_qconfig(bits):
    """8-bit activations, ``bits``-bit symmetric per-tensor weights (stored as qint8)."""
    weight = tq.MinMaxObserver.with_args(dtype=ember.qint8, qscheme=ember.per_tensor_symmetric,
                                         quant_min=-2 ** (bits - 1), quant_max=2 ** (bits - 1) - 1)
    return tq.QConfig(activation=tq.MinMaxObserver.with_args(dtype=ember.quint8), weight=weight)


def keep_in_float(model, path):
    """Leave the layer at ``path`` in float32: qconfig None, its input dequantized and its output quantized again
    (eager mode runs quantized tensors only through quantized layers)."""
    parent_path, _, name = path.rpartition(".")
    parent = model.get_submodule(parent_path)
    layer = getattr(parent, name)
    layer.qconfig = None
    setattr(parent, name, nn.Sequential(tq.DeQuantStub(), layer, tq.QuantStub()))


def quantize(fused, qconfig, calibration, keep=None):
    """The quantized copy of ``fused`` (a float model), the layer at ``keep`` left in float32."""
    model = copy.deepcopy(fused)
    model.qconfig = qconfig
    if keep is not None:
        keep_in_float(model, keep)
    tq.prepare(model, inplace=True)
    with ember.no_grad():
        for images in calibration:
            model(images)
    return tq.convert(model, inplace=True)


def main(argv=None):
    parser = float_model_parser(__doc__.splitlines()[0])
    parser.add_argument("--weight-bits", type=int, default=3, choices=range(2, 9))
    parser.add_argument("--plot", help="save the report's chart to this file (needs matplotlib)")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    model, train_set, test_set = float_model(parser, args)
    test_loader = DataLoader(test_set, batch_size=512)

    # the float model as quantization sees it: input quantized and logits dequantized, conv+ReLU fused
    fused = tq.fuse_modules(tq.QuantWrapper(model).eval(), [["module.0", "module.1"], ["module.3", "module.4"]])
    loader = DataLoader(train_set, batch_size=32, shuffle=True, generator=ember.Generator().manual_seed(1))
    calibration = [images for (images, _), _ in zip(loader, range(4))]
    qconfig = low_bit_qconfig(args.weight_bits)
    qmodel = quantize(fused, qconfig, calibration)

    # each quantized layer beside its float twin on the same test images (not the input's QuantStub: it stays)
    sample = next(iter(DataLoader(test_set, batch_size=128)))[0]
    report = numeric_report(fused, qmodel, sample, module_swap_list=default_module_swap_list() - {tq.QuantStub},
                            plot=args.plot or False)
    worst = report.worst("sqnr")
    kept = quantize(fused, qconfig, calibration, keep=worst.layer)

    print(f"time: {time.perf_counter() - start:.1f} s")
    print(f"float32: accuracy {evaluate(model, test_loader):.1%}")
    print(f"int8, {args.weight_bits}-bit weights: accuracy {evaluate(qmodel, test_loader):.1%}")
    print(f"worst SQNR: {worst.layer} ({worst.sqnr:.1f} dB)")
    print(f"{worst.layer} kept in float32: accuracy {evaluate(kept, test_loader):.1%}")


if __name__ == "__main__":
    main()
