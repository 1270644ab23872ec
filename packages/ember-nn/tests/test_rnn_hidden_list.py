"""LSTM and LSTMCell take their (h, c) state as a list as well as a tuple, as PyTorch's do; GRU and RNN, whose
state is one tensor, refuse a list alike."""
import pytest
import torch
from _torch_compare import assert_same, check_grads, to_ember

import ember.nn as nn

D = torch.float64


def _pair(t_cls, e_cls, *args, **kwargs):
    torch.manual_seed(0)
    t = t_cls(*args, dtype=D, **kwargs)
    e = e_cls(*args, **kwargs).double()
    e.load_state_dict(to_ember(dict(t.state_dict())))
    return t, e


@pytest.mark.parametrize("container", [list, tuple])
@pytest.mark.parametrize("kwargs", [{"num_layers": 2}, {"bidirectional": True, "batch_first": True},
                                    {"proj_size": 3}])
def test_lstm_state_as_list_or_tuple(container, kwargs):
    t, e = _pair(torch.nn.LSTM, nn.LSTM, 4, 5, **kwargs)
    layers = t.num_layers * (2 if t.bidirectional else 1)
    x = torch.randn(3, 6, 4, dtype=D, requires_grad=True)
    h = torch.randn(layers, 3 if t.batch_first else 6, t.proj_size or 5, dtype=D, requires_grad=True)
    c = torch.randn(layers, h.shape[1], 5, dtype=D, requires_grad=True)
    t_out = t(x, container([h, c]))
    e_x, e_h, e_c = to_ember([x, h, c])
    e_out = e(e_x, container([e_h, e_c]))
    assert type(e_out[1]) is tuple
    assert_same(e_out[0], t_out[0])
    assert_same(e_out[1], t_out[1])
    check_grads(e_out[0], t_out[0], [e_x, e_h, e_c], [x, h, c])


def test_lstm_unbatched_and_packed_with_a_list():
    t, e = _pair(torch.nn.LSTM, nn.LSTM, 4, 5)
    x, h, c = torch.randn(6, 4, dtype=D), torch.randn(1, 5, dtype=D), torch.randn(1, 5, dtype=D)
    assert_same(e(*to_ember([x, [h, c]])), t(x, [h, c]))
    xs = torch.randn(5, 3, 4, dtype=D)
    h, c = torch.randn(1, 3, 5, dtype=D), torch.randn(1, 3, 5, dtype=D)
    t_packed = torch.nn.utils.rnn.pack_padded_sequence(xs, [5, 3, 2], enforce_sorted=False)
    e_packed = nn.utils.rnn.pack_padded_sequence(to_ember(xs), [5, 3, 2], enforce_sorted=False)
    t_out, t_state = t(t_packed, [h, c])
    e_out, e_state = e(e_packed, to_ember([h, c]))
    assert_same(e_out.data, t_out.data)
    assert_same(e_state, t_state)


@pytest.mark.parametrize("container", [list, tuple])
def test_lstm_cell_state_as_list_or_tuple(container):
    t, e = _pair(torch.nn.LSTMCell, nn.LSTMCell, 4, 5)
    x, h, c = (torch.randn(3, n, dtype=D, requires_grad=True) for n in (4, 5, 5))
    t_out = t(x, container([h, c]))
    e_x, e_h, e_c = to_ember([x, h, c])
    e_out = e(e_x, container([e_h, e_c]))
    assert_same(e_out, t_out)
    check_grads(e_out[1], t_out[1], [e_x, e_h, e_c], [x, h, c])
    assert_same(e(e_x[0], container([e_h[0], e_c[0]])), t(x[0], container([h[0], c[0]])))  # unbatched


@pytest.mark.parametrize("name", ["GRU", "RNN", "GRUCell", "RNNCell"])
def test_single_state_modules_refuse_a_list_alike(name):
    t, e = _pair(getattr(torch.nn, name), getattr(nn, name), 4, 5)
    cell = name.endswith("Cell")
    x = torch.randn(*((3, 4) if cell else (2, 3, 4)), dtype=D)
    h = torch.randn(*((3, 5) if cell else (1, 3, 5)), dtype=D)
    with pytest.raises(Exception) as expected:
        t(x, [h])
    with pytest.raises(type(expected.value)):
        e(*to_ember([x, [h]]))
