"""The error metrics against their formulas, the per-layer report on ember-quantized models (no torch needed: these
tests also run where PyTorch is not installed), and its chart."""
import copy
import math
import sys

import numpy as np
import pytest
from _models import dynamic_model, quantize_dynamic, quantize_static, static_model

import ember
import ember.ao.ns._numeric_suite as ns
from ember.ao.ns.metrics import compute_cosine_similarity, compute_normalized_l2_error, compute_sqnr
from ember.ao.ns.report import LayerError, NumericReport, default_module_swap_list, layer_errors, numeric_report


def test_metrics_formulas():
    x, y = ember.tensor([3.0, 4.0]), ember.tensor([3.0, 4.5])
    assert compute_sqnr(x, y).item() == pytest.approx(20.0, rel=1e-6)  # 20 log10(5 / 0.5)
    assert compute_normalized_l2_error(x, y).item() == pytest.approx(0.1, rel=1e-6)  # sqrt(0.25 / 25)
    cosine = compute_cosine_similarity(x, y)
    assert tuple(cosine.shape) == (1,)
    assert cosine.item() == pytest.approx(27.0 / (5.0 * math.sqrt(29.25)), rel=1e-6)
    assert math.isinf(compute_sqnr(x, x).item()) and compute_normalized_l2_error(x, x).item() == 0
    # shapes may differ when the element counts agree (a weight against its reshaped copy)
    assert compute_cosine_similarity(x.reshape(2, 1), y).item() == pytest.approx(cosine.item())


def test_metrics_dequantize_and_pair_tuples():
    x = ember.tensor([0.5, -1.0, 2.0])
    q = ember.quantize_per_tensor(x + 0.04, 0.1, 10, ember.quint8)
    assert compute_sqnr(x, q).item() == pytest.approx(compute_sqnr(x, q.dequantize()).item())
    pair = compute_normalized_l2_error((x, [x, x * 2]), (q, [x, x]))
    assert isinstance(pair, list) and isinstance(pair[1], list) and pair[1][0].item() == 0
    assert pair[1][1].item() == pytest.approx(0.5)
    assert compute_sqnr(x.double(), x.double()) is None  # (float32 only, as PyTorch's)


def test_layer_errors_of_results():
    a, b = ember.tensor([[1.0, 2.0], [3.0, 4.0]]), ember.tensor([[1.0, 2.0], [3.0, 4.5]])
    rows = layer_errors({
        "conv.stats": {"float": [a, a], "quantized": [b, a]},  # two calls: metrics over both together
        "lstm.stats": {"float": [(a, (a, a))], "quantized": [(b, (a, a))]},  # an LSTM's output of the tuple
        "fused.stats": {"float": [a, a], "quantized": [b]},  # a fused module's float logger runs twice a call
        "fc._packed_params._packed_params": {"float": a, "quantized": b},  # compare_weights: one tensor
        "stats": {"float": [], "quantized": []},  # a logger that saw nothing
    })
    assert [(r.key, r.layer, r.calls, r.shape) for r in rows] == [
        ("conv.stats", "conv", 2, (2, 2)), ("lstm.stats", "lstm", 1, (2, 2)), ("fused.stats", "fused", 1, (2, 2)),
        ("fc._packed_params._packed_params", "fc", 1, (2, 2))]
    noise = math.sqrt(0.25 / 60.0)  # (the float values twice over: 2 * 30)
    assert rows[0].normalized_l2_error == pytest.approx(noise, rel=1e-5)
    assert rows[0].sqnr == pytest.approx(-20 * math.log10(noise), rel=1e-5)
    assert rows[1].sqnr == rows[2].sqnr == rows[3].sqnr == pytest.approx(20 * math.log10(math.sqrt(30) / 0.5))
    with pytest.raises(ValueError, match="3 float results for 2 quantized"):
        layer_errors({"x.stats": {"float": [a, a, a], "quantized": [a, a]}})


def test_numeric_report_table_and_worst():
    rows = [LayerError("a.stats", "a", 30.0, 0.03, 0.999, (2, 3), 1),
            LayerError("b.stats", "b", 12.5, 0.2, 0.98, (2, 5), 1),
            LayerError("c.stats", "c", math.inf, 0.0, 1.0, (2, 5), 1),
            LayerError("d.stats", "d", None, None, None, (2,), 1)]
    report = NumericReport(rows, "stub")
    assert report.worst() is rows[1] and report.worst("normalized_l2_error") is rows[1]
    assert report.worst("cosine_similarity") is rows[1]
    assert report["c"] is rows[2] and report[0] is rows[0] and len(report) == 4 and list(report) == rows
    with pytest.raises(KeyError):
        report["e"]
    with pytest.raises(ValueError, match="metric must be one of"):
        report.worst("snr")
    with pytest.raises(ValueError, match="no layer"):
        NumericReport(rows[3:], "stub").worst()
    lines = str(report).splitlines()
    assert lines[0] == "quantization error per layer (stub)"
    assert lines[1].split() == ["layer", "SQNR", "(dB)", "norm.", "L2", "error", "cosine", "sim.", "shape"]
    assert lines[3].split() == ["b", "12.50", "0.20000", "0.98000", "(2,", "5)"]
    assert lines[4].split()[:2] == ["c", "inf"] and lines[5].split()[:4] == ["d", "-", "-", "-"]


@pytest.fixture(scope="module")
def static_models():
    ember.manual_seed(0)
    rng = np.random.default_rng(0)
    fused, q_model = quantize_static(ember, static_model(ember), ember.tensor(
        rng.standard_normal((16, 2, 6, 6)).astype(np.float32)))
    return fused, q_model, ember.tensor(rng.standard_normal((3, 2, 6, 6)).astype(np.float32))


def _structure(model):
    return [(name, type(m).__name__) for name, m in model.named_modules()]


def test_numeric_report_modes(static_models, capsys):
    fused, q_model, data = static_models
    before = (_structure(fused), _structure(q_model))
    stub = numeric_report(fused, q_model, data, plot=False)
    assert [r.layer for r in stub] == ["quant", "conv", "fc1", "fc2", "ff"]
    # whole batches (ShadowLogger would keep the first item); ff: add, add_scalar and cat over one call
    assert [r.shape for r in stub] == [(3, 2, 6, 6), (3, 4, 4, 4), (3, 5), (3, 5), (3, 5)]
    assert stub["ff"].calls == 3 and all(r.sqnr > 15 for r in stub) and stub.figure is None
    assert capsys.readouterr().out.startswith("quantization error per layer (stub)\nlayer")
    outputs = numeric_report(fused, q_model, data, mode="outputs", show=False, plot=False)
    assert [r.layer for r in outputs] == ["quant", "conv", "fc1", "fc2", "ff"] and capsys.readouterr().out == ""
    assert outputs["ff"].calls == 2  # (add and cat are observed, add_scalar is not)
    # the error grows along the model: the quantized input of fc1 is not the float one, as in stub mode
    assert outputs["conv"].sqnr == pytest.approx(stub["conv"].sqnr, abs=6) and outputs["conv"].sqnr != stub[
        "conv"].sqnr
    weights = numeric_report(fused, q_model, mode="weights", show=False, plot=False)
    assert [(r.key, r.layer) for r in weights] == [
        ("conv.weight", "conv"), ("fc1._packed_params._packed_params", "fc1"),
        ("fc2._packed_params._packed_params", "fc2")]
    assert all(r.sqnr > 35 for r in weights)  # (8-bit per-channel weights)
    assert (_structure(fused), _structure(q_model)) == before  # (the report works on copies)
    only_fc = numeric_report(fused, q_model, data, module_swap_list={ember.nn.Linear}, show=False, plot=False)
    assert [r.layer for r in only_fc] == ["fc1", "fc2"]


def test_numeric_report_bad_arguments(static_models):
    fused, q_model, data = static_models
    with pytest.raises(ValueError, match="mode must be one of"):
        numeric_report(fused, q_model, data, mode="shadow")
    with pytest.raises(TypeError, match="takes no data"):
        numeric_report(fused, q_model, data, mode="weights")
    with pytest.raises(TypeError, match="needs sample data"):
        numeric_report(fused, q_model)


def test_numeric_report_dynamic_lstm():
    ember.manual_seed(1)
    model = dynamic_model(ember)
    q_model = quantize_dynamic(ember, model)
    x = ember.randn(5, 2, 4)
    stub = numeric_report(model, q_model, x, show=False, plot=False)
    assert [(r.layer, r.shape) for r in stub] == [("lstm", (5, 2, 6)), ("fc", (5, 2, 3))]
    outputs = numeric_report(model, q_model, x, mode="outputs", show=False, plot=False)
    assert [(r.layer, r.shape) for r in outputs] == [("lstm", (5, 2, 6)), ("fc", (5, 2, 3))]
    assert all(r.sqnr > 20 for r in (*stub, *outputs))
    weights = numeric_report(model, q_model, mode="weights", show=False, plot=False)
    assert [r.layer for r in weights] == ["lstm", "lstm", "fc"]


def test_api_on_ember_models(static_models):
    """The suite's own functions where torch is absent: stubs at the fused conv, the Linears and the
    FloatFunctional; the outputs of both models' modules."""
    fused, q_model, data = static_models
    swap = {ember.ao.nn.intrinsic.ConvReLU2d, ember.nn.Linear, ember.ao.nn.quantized.FloatFunctional}
    stub = ns.compare_model_stub(copy.deepcopy(fused), copy.deepcopy(q_model), swap, data)
    assert {k: len(v["quantized"]) for k, v in stub.items()} == {"conv.stats": 1, "fc1.stats": 1, "fc2.stats": 1,
                                                                  "ff.stats": 3}
    assert tuple(stub["conv.stats"]["float"][0].shape) == (4, 4, 4)  # (ShadowLogger: the batch's first item)
    outputs = ns.compare_model_outputs(copy.deepcopy(fused), copy.deepcopy(q_model), data)
    assert list(outputs) == ["quant.stats", "conv.stats", "fc1.stats", "fc2.stats", "ff.stats"]
    assert outputs["ff.stats"]["quantized"][0].is_quantized and not outputs["ff.stats"]["float"][0].is_quantized
    assert ember.ao.nn.quantized.DeQuantize in ns.get_default_compare_output_module_list()
    assert ember.ao.quantization.QuantStub in default_module_swap_list()


def test_plot(static_models, tmp_path):
    pytest.importorskip("matplotlib")
    fused, q_model, data = static_models
    report = numeric_report(fused, q_model, data, show=False)
    assert report.figure is not None
    bars = report.figure.axes[0].patches
    assert len(bars) == 5 and sum(bar.get_facecolor() != bars[0].get_facecolor() for bar in bars) >= 1
    path = tmp_path / "report.png"
    numeric_report(fused, q_model, data, show=False, plot=path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib(static_models, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    fused, q_model, data = static_models
    assert numeric_report(fused, q_model, data, show=False).figure is None  # (the default: when installed)
    with pytest.raises(ImportError, match=r"ember-numeric-suite\[plot\]"):
        numeric_report(fused, q_model, data, show=False, plot=True)
