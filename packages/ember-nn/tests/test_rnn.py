"""RNN, LSTM and GRU (multi-layer, bidirectional, batch_first, projections, packed sequences with total_length)
and their cells against PyTorch: outputs, final states and gradients."""
import pytest
import torch
import torch.nn.utils.rnn as trnn
from _torch_compare import assert_same, check_grads, to_ember

import ember
import ember.nn as nn
import ember.nn.utils.rnn as ernn

D = torch.float64
CONFIGS = [("RNN", {}), ("RNN", {"nonlinearity": "relu", "num_layers": 2, "bias": False}),
           ("LSTM", {"num_layers": 2, "bidirectional": True}), ("LSTM", {"proj_size": 3, "batch_first": True}),
           ("LSTM", {"num_layers": 2, "bidirectional": True, "proj_size": 2}),
           ("GRU", {"num_layers": 3, "bidirectional": True, "batch_first": True}), ("GRU", {})]


def pair(cls, kwargs):
    torch.manual_seed(0)
    t = getattr(torch.nn, cls)(4, 5, dtype=D, **kwargs)
    e = getattr(nn, cls)(4, 5, dtype=ember.float64, **kwargs)
    assert repr(e) == repr(t)
    assert [(k, tuple(v.shape)) for k, v in e.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in t.state_dict().items()]
    e.load_state_dict(to_ember(dict(t.state_dict())))
    return t, e


def initial_state(t, batch, cls):
    h = torch.randn(t.num_layers * (2 if t.bidirectional else 1), batch, t.proj_size or t.hidden_size, dtype=D,
                    requires_grad=True)
    if cls != "LSTM":
        return h
    return h, torch.randn(h.shape[0], batch, t.hidden_size, dtype=D, requires_grad=True)


@pytest.mark.parametrize("cls,kwargs", CONFIGS, ids=[f"{c}-{k}" for c, k in CONFIGS])
def test_padded_batches_match_torch(cls, kwargs):
    t, e = pair(cls, kwargs)
    x = torch.randn(3, 6, 4, dtype=D, requires_grad=True)  # (T, B) or, batch_first, (B, T)
    hx = initial_state(t, 6 if not kwargs.get("batch_first") else 3, cls)
    e_x, e_hx = to_ember(x), to_ember(hx)
    t_out, e_out = t(x, hx), e(e_x, e_hx)
    assert_same(e_out, t_out)
    check_grads(e_out, t_out, [e_x, e_hx] + list(e.parameters()), [x, hx] + list(t.parameters()))
    assert_same(e(e_x), t(x))  # zero initial state


@pytest.mark.parametrize("cls,kwargs", CONFIGS[:4], ids=[f"{c}-{k}" for c, k in CONFIGS[:4]])
def test_unbatched_input(cls, kwargs):
    t, e = pair(cls, kwargs)
    x = torch.randn(5, 4, dtype=D)
    assert_same(e(to_ember(x)), t(x))


@pytest.mark.parametrize("cls,kwargs", CONFIGS, ids=[f"{c}-{k}" for c, k in CONFIGS])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_sequences_match_torch(cls, kwargs, enforce_sorted):
    t, e = pair(cls, kwargs)
    batch_first = kwargs.get("batch_first", False)
    lengths = [6, 4, 4, 1] if enforce_sorted else [2, 6, 1, 4]
    x = torch.randn(4, 6, 4, dtype=D, requires_grad=True)
    x_in = x if batch_first else x.transpose(0, 1)
    e_x = to_ember(x)
    e_in = e_x if batch_first else e_x.transpose(0, 1)
    t_packed = trnn.pack_padded_sequence(x_in, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    e_packed = ernn.pack_padded_sequence(e_in, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    assert_same(e_packed.data, t_packed.data)
    assert e_packed.batch_sizes.tolist() == t_packed.batch_sizes.tolist()
    hx = initial_state(t, 4, cls)
    t_out, t_h = t(t_packed, hx)
    e_out, e_h = e(e_packed, to_ember(hx))
    assert isinstance(e_out, ernn.PackedSequence)
    assert_same(e_out.data, t_out.data)
    assert_same(e_h, t_h)
    # unpack with total_length (as a DataParallel module would) and differentiate through everything
    t_pad, t_len = trnn.pad_packed_sequence(t_out, batch_first=True, total_length=8)
    e_pad, e_len = ernn.pad_packed_sequence(e_out, batch_first=True, total_length=8)
    assert tuple(e_pad.shape)[:2] == (4, 8) and e_len.tolist() == t_len.tolist()
    assert_same(e_pad, t_pad)
    check_grads(e_pad, t_pad, [e_x] + list(e.parameters()), [x] + list(t.parameters()))


@pytest.mark.parametrize("cls,kwargs", [("RNNCell", {"nonlinearity": "relu"}), ("RNNCell", {"bias": False}),
                                        ("LSTMCell", {}), ("GRUCell", {})])
def test_cells_match_torch(cls, kwargs):
    torch.manual_seed(0)
    t = getattr(torch.nn, cls)(4, 5, dtype=D, **kwargs)
    e = getattr(nn, cls)(4, 5, dtype=ember.float64, **kwargs)
    assert repr(e) == repr(t)
    e.load_state_dict(to_ember(dict(t.state_dict())))
    x = torch.randn(3, 4, dtype=D, requires_grad=True)
    h = torch.randn(3, 5, dtype=D, requires_grad=True)
    hx = (h, torch.randn(3, 5, dtype=D)) if cls == "LSTMCell" else h
    e_x, e_hx = to_ember(x), to_ember(hx)
    t_out, e_out = t(x, hx), e(e_x, e_hx)
    assert_same(e_out, t_out)
    check_grads(e_out, t_out, [e_x, e_hx] + list(e.parameters()), [x, hx] + list(t.parameters()))
    assert_same(e(to_ember(x[0])), t(x[0]))  # unbatched, zero state


def test_errors():
    lstm = nn.LSTM(4, 5, num_layers=2)
    with pytest.raises(RuntimeError, match="input_size"):
        lstm(ember.randn(3, 2, 3))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size"):
        lstm(ember.randn(3, 2, 4), (ember.zeros(1, 2, 5), ember.zeros(2, 2, 5)))
    with pytest.raises(ValueError, match="2D or 3D"):
        lstm(ember.randn(3, 2, 4, 1))
    with pytest.raises(ValueError):
        nn.GRU(4, 5, proj_size=2)
    with pytest.raises(ValueError):
        nn.RNN(4, 5, dropout=2.0)
    with pytest.warns(UserWarning, match="dropout"):
        nn.RNN(4, 5, dropout=0.5)
    with pytest.raises(RuntimeError, match="decreasing"):
        ernn.pack_padded_sequence(ember.randn(4, 2, 3), [2, 4])
    packed = ernn.pack_sequence([ember.randn(3, 2), ember.randn(2, 2)])
    with pytest.raises(ValueError, match="total_length"):
        ernn.pad_packed_sequence(packed, total_length=2)


def test_multilayer_dropout_only_in_training():
    gru = nn.GRU(4, 5, num_layers=2, dropout=0.5).eval()
    x = ember.randn(3, 2, 4)
    assert gru(x)[0].tolist() == gru(x)[0].tolist()
    gru.train()
    ember.manual_seed(0)
    a = gru(x)[0]
    ember.manual_seed(1)
    assert a.tolist() != gru(x)[0].tolist()


@pytest.mark.parametrize("kwargs", [{}, {"num_layers": 3, "bidirectional": True, "dropout": 0.0},
                                    {"batch_first": True, "bias": False}, {"bidirectional": True, "batch_first": True}])
@pytest.mark.parametrize("data_grad", [True, False])
def test_lstm_layer_op_matches_torch(kwargs, data_grad):
    """The whole-layer LSTM op: outputs and the gradients arriving through output, h_n and c_n, also when the
    data needs no gradient (the op then skips the input's); an empty sequence is an error."""
    t, e = pair("LSTM", kwargs)
    x = torch.randn(4, 7, 4, dtype=D, requires_grad=data_grad)
    hx = initial_state(t, 4 if kwargs.get("batch_first") else 7, "LSTM")
    e_x, e_hx = to_ember(x), to_ember(hx)
    t_out, e_out = t(x, hx), e(e_x, e_hx)
    assert_same(e_out, t_out)
    cots = [torch.randn(o.shape, dtype=D) for o in (t_out[0], *t_out[1])]
    t_leaves, e_leaves = [x] * data_grad + list(hx) + list(t.parameters()), [e_x] * data_grad + list(e_hx) + \
        list(e.parameters())
    t_grads = torch.autograd.grad([t_out[0], *t_out[1]], t_leaves, cots)
    ember.autograd.backward([e_out[0], *e_out[1]], [to_ember(c) for c in cots])
    for eg, tg in zip([v.grad for v in e_leaves], t_grads):
        assert_same(eg, tg)
    assert data_grad or e_x.grad is None
    empty = torch.zeros((0, 7, 4) if not kwargs.get("batch_first") else (4, 0, 4), dtype=D)
    with pytest.raises(RuntimeError, match="sequence length"):
        t(empty, hx)
    with pytest.raises(RuntimeError, match="sequence length"):
        e(to_ember(empty), e_hx)


def test_lstm_layer_op_float32_and_double_backward():
    torch.manual_seed(0)
    t = torch.nn.LSTM(6, 8, num_layers=2)
    e = nn.LSTM(6, 8, num_layers=2)
    e.load_state_dict(to_ember(dict(t.state_dict())))
    x = torch.randn(9, 3, 6)
    assert_same(e(to_ember(x)), t(x), rtol=1e-5, atol=1e-6)
    t(x)[0].sum().backward()
    e(to_ember(x))[0].sum().backward()
    for ep, tp in zip(e.parameters(), t.parameters()):
        assert_same(ep.grad, tp.grad, rtol=1e-4, atol=1e-5)
    # create_graph: the backward is built from differentiable ops, so a gradient of a gradient matches torch's
    t, e = pair("LSTM", {"bidirectional": True})
    x = torch.randn(3, 2, 4, dtype=D, requires_grad=True)
    e_x = to_ember(x)
    tg = torch.autograd.grad((t(x)[0] ** 2).sum(), t.weight_hh_l0, create_graph=True)[0]
    eg = ember.autograd.grad((e(e_x)[0] ** 2).sum(), e.weight_hh_l0, create_graph=True)[0]
    assert_same(eg, tg)
    assert_same(ember.autograd.grad((eg ** 2).sum(), e_x)[0], torch.autograd.grad((tg ** 2).sum(), x)[0])
