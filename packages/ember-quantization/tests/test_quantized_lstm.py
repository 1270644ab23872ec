"""Static quantization of an nn.LSTM against torch: prepare puts the quantizable LSTM in its place (the default
custom module mapping), convert makes it ao.nn.quantized.LSTM; outputs and states equal torch's for the same
observer statistics (layers, directions, batch_first), reprs, state_dict keys and a checkpoint saved by torch;
the QAT flow; errors."""
import io
import re

import numpy as np
import pytest
import torch
import torch.ao.quantization as tq
from _torch_compare import copy_float_model, numpy, to_ember

import ember
import ember.ao.nn.quantizable as nnqa
import ember.ao.nn.quantized as nnq
import ember.ao.quantization as eq

# (torch's quantizable LSTM concatenates the directions' outputs of different qparams, as ember's does)
pytestmark = pytest.mark.filterwarnings("ignore:All inputs of this cat operator must share")


def _model(nn, q, **kwargs):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = q.QuantStub(), q.DeQuantStub()
            self.lstm = nn.LSTM(4, 6, **kwargs)

        def forward(self, x):
            y, (h, c) = self.lstm(self.quant(x))
            return self.dequant(y), self.dequant(h), self.dequant(c)
    return Net().eval()


def _converted(**kwargs):
    torch.manual_seed(0)
    t = _model(torch.nn, tq, **kwargs)
    e = copy_float_model(t, _model(ember.nn, eq, **kwargs))
    for model, q in ((t, tq), (e, eq)):
        model.qconfig = q.get_default_qconfig("x86")
        q.prepare(model, inplace=True)
    assert type(e.lstm) is nnqa.LSTM and e.lstm._get_name() == t.lstm._get_name() == "QuantizableLSTM"
    calib = np.random.default_rng(0).standard_normal((5, 3, 4)).astype(np.float32)
    t(torch.tensor(calib))
    e(ember.tensor(calib))
    # (the same statistics in both: the float products of the calibration differ in their last bits)
    eq.load_observer_state_dict(e, to_ember(dict(tq.get_observer_state_dict(t))))
    tq.convert(t, inplace=True)
    eq.convert(e, inplace=True)
    return t, e


@pytest.mark.parametrize("kwargs", [{}, {"num_layers": 2}, {"num_layers": 2, "bidirectional": True,
                                                             "batch_first": True}],
                         ids=["one-layer", "two-layers", "bidirectional-batch-first"])
def test_static_quantized_lstm(kwargs):
    t, e = _converted(**kwargs)
    assert type(e.lstm) is nnq.LSTM and e.lstm._get_name() == "QuantizedLSTM"

    def strip(s):  # (the qparams agree to the last digit only where the statistics do: compared below)
        return re.sub(r"scale=[\d.e-]+, zero_point=\d+", "", s).replace("torch.", "ember.")
    assert strip(repr(e.lstm)) == strip(repr(t.lstm))
    assert list(e.state_dict()) == list(t.state_dict())
    x = np.random.default_rng(1).standard_normal((5, 3, 4)).astype(np.float32)
    for got, expected in zip(e(ember.tensor(x)), t(torch.tensor(x))):
        np.testing.assert_array_equal(numpy(got), numpy(expected))


def test_checkpoint_from_torch():
    t, e = _converted()
    for m in e.modules():  # (another state: the loaded one must replace it)
        if isinstance(m, (nnq.QFunctional, nnq.Linear)):
            m.scale = 1.0
    buf = io.BytesIO()
    torch.save(t.state_dict(), buf)
    e.load_state_dict(ember.load(io.BytesIO(buf.getvalue())))
    x = np.random.default_rng(2).standard_normal((4, 2, 4)).astype(np.float32)
    np.testing.assert_array_equal(numpy(e(ember.tensor(x))[0]), numpy(t(torch.tensor(x))[0]))


def test_qat_flow():
    outputs = []
    for nn, q, lib in ((torch.nn, tq, torch), (ember.nn, eq, ember)):
        lib.manual_seed(0)
        model = _model(nn, q).train()
        model.qconfig = q.get_default_qat_qconfig("x86")
        q.prepare_qat(model, inplace=True)
        assert model.lstm._get_name() == "QuantizableLSTM" and model.lstm.training
        assert type(model.lstm.layers[0].layer_fw.cell.igates).__name__ == "Linear"  # (the QAT Linear)
        model(lib.randn(5, 3, 4))
        q.convert(model.eval(), inplace=True)
        outputs.append(model.lstm._get_name())
    assert outputs == ["QuantizedLSTM", "QuantizedLSTM"]


def test_quantizable_modules_and_errors():
    cell = ember.nn.LSTMCell(3, 5)
    with pytest.raises(AssertionError, match="The float module must have 'qconfig'"):
        nnqa.LSTMCell.from_float(cell)
    cell.qconfig = eq.default_qconfig
    for split in (False, True):
        q = nnqa.LSTMCell.from_float(cell, split_gates=split)
        x, h = ember.randn(2, 3), ember.randn(2, 5)
        hy, cy = q(x, (h, ember.zeros(2, 5)))
        ref_h, ref_c = cell(x, (h, ember.zeros(2, 5)))
        np.testing.assert_allclose(numpy(hy), numpy(ref_h), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(numpy(cy), numpy(ref_c), rtol=1e-5, atol=1e-6)
    with pytest.raises(NotImplementedError, match="non-observed LSTM"):
        nnq.LSTM.from_float(ember.nn.LSTM(3, 5))
    with pytest.raises(NotImplementedError, match="non-quantizable LSTM"):
        nnqa.LSTM.from_observed(ember.nn.LSTM(3, 5))
    with pytest.raises(AssertionError, match="Expected module type"):
        nnq.LSTM.from_observed(ember.nn.LSTM(3, 5))
    with pytest.warns(UserWarning, match="dropout option for quantizable LSTM is ignored"):
        nnqa.LSTM(3, 5, num_layers=2, dropout=0.5)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nnqa.LSTM(3, 5, dropout=2)
