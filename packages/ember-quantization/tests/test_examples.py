"""The quantization examples run: examples/quantize_digits.py (post-training static quantization of the digits
CNN: int8 accuracy within one point of float32, a smaller saved model) and examples/quantize_lstm.py
(quantize_dynamic of an LSTM model: the quantized model's error close to the float one's, smaller with int8
weights)."""
import importlib.util
import pathlib
import re

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples"


def _example(name, monkeypatch):
    path = EXAMPLES / f"{name}.py"
    if not path.exists():
        pytest.skip(f"examples/{name}.py is not in this checkout")
    monkeypatch.syspath_prepend(str(EXAMPLES))  # (quantize_digits imports train_digits beside it)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quantize_digits(monkeypatch, capsys):
    pytest.importorskip("sklearn")
    # (two epochs instead of three: 93.6% in float32, 98.1% with the default)
    _example("quantize_digits", monkeypatch).main(["--epochs", "2", "--calibration-batches", "4"])
    out = capsys.readouterr().out
    (f_acc, f_kb), = re.findall(r"^float32: accuracy ([\d.]+)%, ([\d.]+) KB$", out, re.M)
    (q_acc, q_kb), = re.findall(r"^int8: accuracy ([\d.]+)%, ([\d.]+) KB$", out, re.M)
    assert float(f_acc) > 90, out
    assert float(q_acc) >= float(f_acc) - 1.0, out
    assert float(q_kb) < float(f_kb) / 2, out


def test_quantize_lstm(monkeypatch, capsys):
    dtype = "qint8"  # (float16 weights: test_dynamic.py and test_serialization.py)
    _example("quantize_lstm", monkeypatch).main(["--steps", "15", "--dtype", dtype])
    out = capsys.readouterr().out
    assert "DynamicQuantizedLSTM(1, 32, num_layers=2)" in out and "DynamicQuantizedLinear" in out, out
    (f_mse, f_kb), = re.findall(r"^float32: test MSE ([\d.]+), ([\d.]+) KB", out, re.M)
    (q_mse, q_kb), = re.findall(rf"^{dtype}: test MSE ([\d.]+), ([\d.]+) KB", out, re.M)
    assert float(f_mse) < 0.05, out  # (it learned: a sine's variance is 0.5)
    assert float(q_mse) <= float(f_mse) * 1.1 + 1e-3, out
    assert float(q_kb) < float(f_kb) / 2.5, out  # (the biases stay float32)
