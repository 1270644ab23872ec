"""examples/numeric_suite_digits.py runs: the report names the worst layer of the digits CNN quantized with 3-bit
weights, and keeping that layer in float32 gives back accuracy."""
import importlib.util
import pathlib
import re

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples"


def test_numeric_suite_digits(monkeypatch, capsys):
    pytest.importorskip("sklearn")
    path = EXAMPLES / "numeric_suite_digits.py"
    if not path.exists():
        pytest.skip("examples/numeric_suite_digits.py is not in this checkout")
    monkeypatch.syspath_prepend(str(EXAMPLES))  # (it imports quantize_digits and train_digits beside it)
    spec = importlib.util.spec_from_file_location("numeric_suite_digits", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--epochs", "2"])
    out = capsys.readouterr().out
    table = {m[0]: float(m[1]) for m in re.findall(r"^(module\.\d)\s+([\d.]+)\s", out, re.M)}
    assert list(table) == ["module.0", "module.3", "module.7"], out  # (the two fused convs and the Linear)
    (f_acc,) = re.findall(r"^float32: accuracy ([\d.]+)%$", out, re.M)
    (q_acc,) = re.findall(r"^int8, 3-bit weights: accuracy ([\d.]+)%$", out, re.M)
    ((worst, sqnr),) = re.findall(r"^worst SQNR: (\S+) \(([\d.]+) dB\)$", out, re.M)
    ((kept, k_acc),) = re.findall(r"^(\S+) kept in float32: accuracy ([\d.]+)%$", out, re.M)
    assert worst == kept == min(table, key=table.get) and float(sqnr) == pytest.approx(table[worst], abs=0.051)
    assert float(f_acc) > 90 and float(q_acc) < float(f_acc), out  # (3-bit weights cost accuracy)
    assert float(k_acc) > float(q_acc), out
