"""Dynamically quantized modules against torch's: Linear (int8 per tensor and per channel, float16), LSTM and GRU
(layers, directions, batch_first, packed sequences), the cells; float outputs, on every engine that has them."""
import numpy as np
import pytest
import torch
import torch.ao.nn.quantized.dynamic as tnnqd
import torch.ao.quantization as tq
from _torch_compare import copy_float_model, numpy, to_ember

import ember
import ember.ao.nn.quantized.dynamic as nnqd
import ember.ao.quantization as eq


def _engine(name):
    torch.backends.quantized.engine = ember.backends.quantized.engine = name


def _close(e, t, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(numpy(e), numpy(t), rtol=rtol, atol=atol)


@pytest.mark.parametrize("engine", ["x86", "fbgemm", "qnnpack", "onednn"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_dynamic_linear(engine, per_channel):
    _engine(engine)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(30, 100, generator=g) * 0.1
    if per_channel:
        wq = torch.quantize_per_channel(w, w.abs().amax(1).double() / 127, torch.zeros(30, dtype=torch.long), 0,
                                        torch.qint8)
    else:
        wq = torch.quantize_per_tensor(w, float(w.abs().max()) / 127, 0, torch.qint8)
    bias = torch.randn(30, generator=g)
    t, e = tnnqd.Linear(100, 30), nnqd.Linear(100, 30)
    t.set_weight_bias(wq, bias)
    e.set_weight_bias(to_ember(wq), to_ember(bias))
    x = torch.randn(5, 8, 100, generator=g)
    _close(e(to_ember(x)), t(x))


def test_dynamic_linear_float16():
    g = torch.Generator().manual_seed(1)
    w, bias, x = torch.randn(20, 50, generator=g), torch.randn(20, generator=g), torch.randn(7, 50, generator=g)
    t, e = tnnqd.Linear(50, 20, dtype=torch.float16), nnqd.Linear(50, 20, dtype=ember.float16)
    t.set_weight_bias(w, bias)
    e.set_weight_bias(to_ember(w), to_ember(bias))
    _close(e(to_ember(x)), t(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(numpy(e.weight()), numpy(t.weight()))  # (rounded through float16)
    _engine("qnnpack")
    with pytest.raises(RuntimeError, match="linear_prepack_fp16 is currently not supported by QNNPACK"):
        nnqd.Linear(50, 20, dtype=ember.float16)


def _holder(nn):
    class Holder(nn.Module):
        """quantize_dynamic swaps children, never the model itself: the layer goes in a holder."""

        def __init__(self, layer):
            super().__init__()
            self.layer = layer
    return Holder


def _rnn_pair(kind, seed, dtype=torch.qint8, **kwargs):
    """(torch's, ember's) dynamically quantized ``kind`` layer from the same float weights."""
    torch.manual_seed(seed)
    t_float = _holder(torch.nn)(getattr(torch.nn, kind)(**kwargs))
    e_float = copy_float_model(t_float, _holder(ember.nn)(getattr(ember.nn, kind)(**kwargs)))
    edtype = ember.qint8 if dtype == torch.qint8 else ember.float16
    t = tq.quantize_dynamic(t_float, {getattr(torch.nn, kind)}, dtype=dtype).layer
    e = eq.quantize_dynamic(e_float, {getattr(ember.nn, kind)}, dtype=edtype).layer
    assert type(e).__name__ == type(t).__name__ and type(e).__module__.startswith("ember.ao.nn.quantized.dynamic")
    return t, e


RNNS = [("LSTM", {"input_size": 12, "hidden_size": 16, "num_layers": 2}),
        ("LSTM", {"input_size": 12, "hidden_size": 8, "bidirectional": True, "batch_first": True}),
        ("GRU", {"input_size": 12, "hidden_size": 16, "num_layers": 2, "bidirectional": True})]


@pytest.mark.parametrize("engine", ["x86", "qnnpack"])
@pytest.mark.parametrize("kind, kwargs", RNNS)
def test_dynamic_rnn(engine, kind, kwargs):
    _engine(engine)
    t, e = _rnn_pair(kind, 2, **kwargs)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(9, 4, 12, generator=g)
    (to, th), (eo, eh) = t(x), e(to_ember(x))
    _close(eo, to, rtol=1e-4, atol=1e-5)
    for a, b in zip(eh if kind == "LSTM" else (eh,), th if kind == "LSTM" else (th,)):
        _close(a, b, rtol=1e-4, atol=1e-5)


def test_dynamic_lstm_float16_and_state():
    t, e = _rnn_pair("LSTM", 4, dtype=torch.float16, input_size=6, hidden_size=5)
    g = torch.Generator().manual_seed(5)
    x, h0, c0 = torch.randn(7, 3, 6, generator=g), torch.randn(1, 3, 5, generator=g), torch.randn(1, 3, 5, generator=g)
    (to, (th, tc)), (eo, (eh, ec)) = t(x, (h0, c0)), e(to_ember(x), (to_ember(h0), to_ember(c0)))
    for a, b in ((eo, to), (eh, th), (ec, tc)):
        _close(a, b, rtol=1e-4, atol=1e-5)


def test_dynamic_lstm_packed_sequence():
    t, e = _rnn_pair("LSTM", 6, input_size=4, hidden_size=6, bidirectional=True)
    g = torch.Generator().manual_seed(7)
    x, lengths = torch.randn(5, 3, 4, generator=g), torch.tensor([5, 3, 2])
    tp = torch.nn.utils.rnn.pack_padded_sequence(x, lengths)
    ep = ember.nn.utils.rnn.pack_padded_sequence(to_ember(x), to_ember(lengths))
    (to, (th, _)), (eo, (eh, _)) = t(tp), e(ep)
    _close(eo.data, to.data, rtol=1e-4, atol=1e-5)
    _close(eh, th, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell", "RNNCell"])
def test_dynamic_cells(kind):
    t, e = _rnn_pair(kind, 8, input_size=10, hidden_size=7)
    g = torch.Generator().manual_seed(9)
    x, h = torch.randn(4, 10, generator=g), torch.randn(4, 7, generator=g)
    if kind == "LSTMCell":
        c = torch.randn(4, 7, generator=g)
        for a, b in zip(e(to_ember(x), (to_ember(h), to_ember(c))), t(x, (h, c))):
            _close(a, b)
    else:
        _close(e(to_ember(x), to_ember(h)), t(x, h))
    _close(e(to_ember(x)) if kind != "LSTMCell" else e(to_ember(x))[0],
           t(x) if kind != "LSTMCell" else t(x)[0])


def test_state_dict_keys():
    t, e = _rnn_pair("LSTM", 10, input_size=3, hidden_size=4, num_layers=2)
    assert list(e.state_dict()) == list(t.state_dict()) == ["_all_weight_values.0.param", "_all_weight_values.1.param"]
    for kind in ("GRUCell", "LSTMCell"):
        t, e = _rnn_pair(kind, 11, input_size=3, hidden_size=4)
        assert list(e.state_dict()) == list(t.state_dict())
    weights = e.get_weight()
    assert set(weights) == {"weight_ih", "weight_hh"} and weights["weight_ih"].dtype == ember.qint8
    t_lin, e_lin = tnnqd.Linear(3, 2), nnqd.Linear(3, 2)
    assert list(e_lin.state_dict()) == list(t_lin.state_dict())
    assert e_lin.state_dict()._metadata[""]["version"] == 4
