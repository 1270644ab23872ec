"""Quantized models' state_dicts in PyTorch's checkpoint format, both ways: torch.save -> ember.load into ember's
quantized model and ember.save -> torch.load into torch's, compared by the outputs of the loaded models. Static
models hold quantized tensors and (weight, bias) tuples; dynamic RNNs and cells hold TorchScript class objects
(torch.ScriptObject: LinearPackedParamsBase, CellParamsBase), which weights_only loading refuses in both."""
import io
import pickle

import numpy as np
import pytest
import torch
import torch.ao.nn.quantized.dynamic as tnnqd
import torch.ao.quantization as tq
from _torch_compare import numpy, to_ember

import ember
import ember.ao.nn.quantized.dynamic as nnqd
import ember.ao.quantization as eq


def _static(nn, q, seed):
    """A converted static model (conv, fused conv-relu, linear, functional add, embedding-free), calibrated on
    the library's own random data: both sides' states differ until loaded."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = q.QuantStub(), q.DeQuantStub()
            self.conv = nn.Conv2d(2, 4, 3)
            self.relu = nn.ReLU()
            self.fc = nn.Linear(4 * 4 * 4, 5)
            self.skip = nn.Linear(4 * 4 * 4, 5)
            self.add = nn.quantized.FloatFunctional() if nn is torch.nn else ember.ao.nn.quantized.FloatFunctional()

        def forward(self, x):
            x = self.relu(self.conv(self.quant(x))).flatten(1)
            return self.dequant(self.add.add(self.fc(x), self.skip(x)))

    lib = torch if nn is torch.nn else ember
    lib.manual_seed(seed)
    m = q.fuse_modules(Net().eval(), [["conv", "relu"]])
    m.qconfig = q.get_default_qconfig("x86")
    q.prepare(m, inplace=True)
    m(lib.randn(16, 2, 6, 6) * 2)
    return q.convert(m)


def _dynamic(nn, q, seed, dtype):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(3, 5, num_layers=2, bidirectional=True)
            self.gru = nn.GRU(10, 4)
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            y, _ = self.gru(self.lstm(x)[0])
            return self.fc(y)

    lib = torch if nn is torch.nn else ember
    lib.manual_seed(seed)
    return q.quantize_dynamic(Net().eval(), dtype=getattr(lib, dtype))


X_STATIC = np.random.default_rng(0).standard_normal((3, 2, 6, 6)).astype(np.float32)
X_SEQ = np.random.default_rng(1).standard_normal((7, 2, 3)).astype(np.float32)


def _round_trip_torch_to_ember(t_model, e_model, weights_only):
    buf = io.BytesIO()
    torch.save(t_model.state_dict(), buf)
    state = ember.load(io.BytesIO(buf.getvalue()), weights_only=weights_only)
    assert list(state) == list(t_model.state_dict())
    e_model.load_state_dict(state)


def _round_trip_ember_to_torch(e_model, t_model, weights_only, legacy=False):
    buf = io.BytesIO()
    ember.save(e_model.state_dict(), buf, _use_new_zipfile_serialization=not legacy)
    state = torch.load(io.BytesIO(buf.getvalue()), weights_only=weights_only)
    assert list(state) == list(e_model.state_dict())
    t_model.load_state_dict(state)


@pytest.mark.parametrize("weights_only", [True, False])
def test_static_model_torch_to_ember(weights_only):
    t, e = _static(torch.nn, tq, 0), _static(ember.nn, eq, 1)
    _round_trip_torch_to_ember(t, e, weights_only)
    np.testing.assert_array_equal(numpy(e(ember.tensor(X_STATIC))), numpy(t(torch.tensor(X_STATIC))))
    assert e.fc.scale == t.fc.scale and e.add.zero_point == t.add.zero_point


@pytest.mark.parametrize("legacy", [False, True])
def test_static_model_ember_to_torch(legacy):
    e, t = _static(ember.nn, eq, 2), _static(torch.nn, tq, 3)
    _round_trip_ember_to_torch(e, t, True, legacy)
    np.testing.assert_array_equal(numpy(t(torch.tensor(X_STATIC))), numpy(e(ember.tensor(X_STATIC))))


@pytest.mark.parametrize("dtype", ["qint8", "float16"])
def test_dynamic_model_both_ways(dtype):
    t, e = _dynamic(torch.nn, tq, 0, dtype), _dynamic(ember.nn, eq, 1, dtype)
    _round_trip_torch_to_ember(t, e, weights_only=False)
    x_t, x_e = torch.tensor(X_SEQ), ember.tensor(X_SEQ)
    np.testing.assert_allclose(numpy(e(x_e)), numpy(t(x_t)), rtol=1e-5, atol=1e-5)
    t2 = _dynamic(torch.nn, tq, 4, dtype)
    _round_trip_ember_to_torch(e, t2, weights_only=False)
    np.testing.assert_array_equal(numpy(t2(x_t)), numpy(t(x_t)))
    params = e.lstm._all_weight_values[0].param
    assert params.reduce_range == (dtype == "qint8")  # (PyTorch saves it for int8 weights alone)
    assert type(params.packed_ih).__name__ == ("LinearPackedParams" if dtype == "qint8" else "LinearPackedParamsFp16")


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell", "RNNCell"])
def test_dynamic_cells_both_ways(kind):
    torch.manual_seed(0)
    t = getattr(tnnqd, kind).from_float(_with_qconfig(getattr(torch.nn, kind)(3, 4)))
    e = getattr(nnqd, kind)(3, 4)
    _round_trip_torch_to_ember(t, e, weights_only=False)
    x = torch.randn(2, 3)
    out_t, out_e = t(x), e(to_ember(x))
    out_t, out_e = (out_t[0], out_e[0]) if kind == "LSTMCell" else (out_t, out_e)
    np.testing.assert_allclose(numpy(out_e), numpy(out_t), rtol=1e-5, atol=1e-6)
    t2 = getattr(tnnqd, kind)(3, 4)
    _round_trip_ember_to_torch(e, t2, weights_only=False)
    out_t2 = t2(x)
    np.testing.assert_array_equal(numpy(out_t2[0] if kind == "LSTMCell" else out_t2), numpy(out_t))


def _with_qconfig(m):
    m.qconfig = tq.default_dynamic_qconfig
    return m


def test_script_objects_refused_under_weights_only():
    """Both libraries refuse the TorchScript objects of a dynamic RNN's state under weights_only=True."""
    buf = io.BytesIO()
    torch.save(tnnqd.GRUCell(2, 1).state_dict(), buf)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
    with pytest.raises(pickle.UnpicklingError, match="ScriptObject"):
        ember.load(io.BytesIO(buf.getvalue()), weights_only=True)
    mine = io.BytesIO()
    ember.save(nnqd.GRUCell(2, 1).state_dict(), mine)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(io.BytesIO(mine.getvalue()), weights_only=True)


def test_unknown_script_class_is_refused():
    from ember import _serialization
    obj = _serialization._ScriptObject()
    with pytest.raises(pickle.UnpicklingError, match="no ember counterpart"):
        obj.__setstate__(((), "__torch__.torch.classes.quantized.Nonexistent"))
