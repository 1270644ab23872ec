"""Recurrent layers: RNN, LSTM, GRU (multi-layer, bidirectional, batch_first, packed sequences) and their cells.
An LSTM layer without projection or packed lengths is ember-core's ``_lstm_layer`` op (the whole sequence in
one graph node); otherwise each time step is ember-core's cell op (vectorised over the batch), looping over time."""
import math
import numbers
import warnings

import numpy as np

import ember

from .. import functional as F
from .. import init
from ..functional._common import core
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from ._utils import factory
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
_CELLS = {"LSTM": "lstm_cell", "GRU": "gru_cell", "RNN_TANH": "rnn_tanh_cell", "RNN_RELU": "rnn_relu_cell"}


def _step(mode, x, state, w_ih, w_hh, b_ih, b_hh, w_hr=None):
    """One time step on a (batch, features) input: ember-core's cell of ``mode``; returns the new state."""
    if w_hr is None:
        return core(_CELLS[mode])(x, state, w_ih, w_hh, b_ih, b_hh)
    # a projected LSTM (hidden state of w_hr's size, cell state of the gates'), which the cells do not take
    h, c = state
    i, f, g, o = (F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return F.linear(o.sigmoid() * c.tanh(), w_hr), c


def _where_state(keep, new, old):
    """``new`` where ``keep`` (B, 1), else ``old`` (sequences that ended keep their last state)."""
    if isinstance(new, tuple):
        return tuple(ember.where(keep, n, o) for n, o in zip(new, old))
    return ember.where(keep, new, old)


class RNNBase(Module):
    """Parameters and the forward pass shared by RNN, LSTM and GRU."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                             "being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                          stacklevel=2)
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        gate_size = _GATES[mode] * hidden_size
        fk = factory(device, dtype)
        self._flat_weights_names, self._all_weights = [], []
        for layer in range(num_layers):
            for direction in range(directions):
                layer_input = input_size if layer == 0 else real_hidden * directions
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for stem, shape in shapes:
                    setattr(self, stem + suffix, Parameter(ember.empty(shape, **fk)))
                    names.append(stem + suffix)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self):
        """Kept for API compatibility: ember's weights need no flattening."""

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ---- forward ------------------------------------------------------------------------------------------
    def _layer_weights(self, layer, direction):
        names = self._all_weights[layer * (2 if self.bidirectional else 1) + direction]
        w = dict(zip([n.split("_l")[0] for n in names], [getattr(self, n) for n in names]))
        return w["weight_ih"], w["weight_hh"], w.get("bias_ih"), w.get("bias_hh"), w.get("weight_hr")

    def _run_direction(self, x, state, layer, direction, lengths, reverse_index):
        """Run one layer in one direction over time-major ``x`` (T, B, F); returns outputs (T, B, H) and the
        final state. With ``lengths``, steps past each sequence's end leave its state unchanged."""
        w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_weights(layer, direction)
        if self.mode == "LSTM" and w_hr is None and lengths is None:  # the whole layer in one op
            out, h, c, _, _ = core("_lstm_layer")(x.flip(0) if direction else x, *state, w_ih, w_hh, b_ih, b_hh)
            return (out.flip(0) if direction else out), (h, c)
        if direction and reverse_index is not None:
            x = x.gather(0, reverse_index.expand(-1, -1, x.shape[2]))
        elif direction:
            x = x.flip(0)
        outputs = []
        for t in range(x.shape[0]):
            new = _step(self.mode, x[t], state, w_ih, w_hh, b_ih, b_hh, w_hr)
            state = new if lengths is None else _where_state((t < lengths).unsqueeze(1), new, state)
            outputs.append(state[0] if isinstance(state, tuple) else state)
        out = ember.stack(outputs) if outputs else x.new_zeros((0, x.shape[1], w_hh.shape[1]))
        if direction and reverse_index is not None:
            out = out.gather(0, reverse_index.expand(-1, -1, out.shape[2]))
        elif direction:
            out = out.flip(0)
        return out, state

    def _check(self, input, hx, batched):
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{input.shape[-1]}")
        for h in hx if isinstance(hx, tuple) else (hx,):
            if h is None:
                continue
            if batched and h.dim() != 3:
                raise RuntimeError(f"For batched 3-D input, hx{' and cx' if self.mode == 'LSTM' else ''} should also "
                                   f"be 3-D but got {h.dim()}-D tensor")
            if not batched and h.dim() != 2:
                raise RuntimeError(f"For unbatched 2-D input, hx{' and cx' if self.mode == 'LSTM' else ''} should "
                                   f"also be 2-D but got {h.dim()}-D tensor")

    def _expected_hidden(self, batch, cell=False):
        size = self.hidden_size if cell or self.proj_size == 0 else self.proj_size
        return (self.num_layers * (2 if self.bidirectional else 1), batch, size)

    def forward(self, input, hx=None):
        if isinstance(hx, list) and self.mode == "LSTM":  # (h_0, c_0) may come as a list, as PyTorch allows
            hx = tuple(hx)
        packed = isinstance(input, PackedSequence)
        if packed:
            from ..utils.rnn import pad_packed_sequence
            sorted_indices, unsorted_indices = input.sorted_indices, input.unsorted_indices
            x, lengths = pad_packed_sequence(PackedSequence(input.data, input.batch_sizes))
            lengths = lengths.to(x.device)
            batched = True
        else:
            if input.dim() not in (2, 3):
                raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.dim()}D instead")
            batched = input.dim() == 3
            x = input if batched else input.unsqueeze(1)
            if batched and self.batch_first:
                x = x.transpose(0, 1)
            lengths, sorted_indices, unsorted_indices = None, None, None
        is_lstm = self.mode == "LSTM"
        self._check(x if batched else input, hx, batched)
        if hx is not None and not batched:
            hx = tuple(h.unsqueeze(1) for h in hx) if is_lstm else hx.unsqueeze(1)
        T, B = x.shape[0], x.shape[1]
        if T == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        if hx is None:
            h0 = x.new_zeros(self._expected_hidden(B))
            hx = (h0, x.new_zeros(self._expected_hidden(B, cell=True))) if is_lstm else h0
        elif sorted_indices is not None:  # hidden states come in the caller's order; packed data is sorted
            hx = tuple(h.index_select(1, sorted_indices) for h in hx) if is_lstm else \
                hx.index_select(1, sorted_indices)
        for i, h in enumerate(hx if is_lstm else (hx,)):
            expected = self._expected_hidden(B, cell=i == 1)
            if tuple(h.shape) != expected:
                which = f"hidden[{i}] " if is_lstm else "hidden "
                raise RuntimeError(f"Expected {which}size {expected}, got {list(h.shape)}")
        reverse_index = None
        if self.bidirectional and lengths is not None:
            # per sequence, step t of the reversed pass reads step len - 1 - t (padding steps stay in place)
            lens = lengths.cpu().numpy()
            t = np.arange(T)[:, None]
            src = np.where(t < lens[None, :], lens[None, :] - 1 - t, t)
            reverse_index = ember.from_numpy(src[:, :, None]).to(x.device)
        directions = 2 if self.bidirectional else 1
        h_n, c_n = [], []
        layer_input = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(directions):
                k = layer * directions + d
                state = (hx[0][k], hx[1][k]) if is_lstm else hx[k]
                out, state = self._run_direction(layer_input, state, layer, d, lengths, reverse_index)
                outs.append(out)
                h_n.append(state[0] if is_lstm else state)
                if is_lstm:
                    c_n.append(state[1])
            layer_input = ember.cat(outs, 2) if directions == 2 else outs[0]
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        output = layer_input
        hidden = (ember.stack(h_n), ember.stack(c_n)) if is_lstm else ember.stack(h_n)
        if packed:
            valid = ember.from_numpy(np.arange(T)[:, None] < lengths.cpu().numpy()[None, :]).to(x.device)
            output = PackedSequence(output[valid], input.batch_sizes, sorted_indices, unsorted_indices)
            if unsorted_indices is not None:
                hidden = tuple(h.index_select(1, unsorted_indices) for h in hidden) if is_lstm else \
                    hidden.index_select(1, unsorted_indices)
            return output, hidden
        if not batched:
            return output.squeeze(1), tuple(h.squeeze(1) for h in hidden) if is_lstm else hidden.squeeze(1)
        return (output.transpose(0, 1) if self.batch_first else output), hidden


def _no_projection(kwargs):
    if "proj_size" in kwargs:
        raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
    if kwargs:
        raise TypeError(f"unexpected keyword argument '{next(iter(kwargs))}'")


class RNN(RNNBase):
    """Elman RNN with tanh or ReLU: ``h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None, **kwargs):
        _no_projection(kwargs)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o), optionally with projected hidden states (``proj_size``)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None, **kwargs):
        _no_projection(kwargs)
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)


class RNNCellBase(Module):
    """Parameters shared by the single-step cells."""

    mode = None

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        fk = factory(device, dtype)
        self.weight_ih = Parameter(ember.empty((num_chunks * hidden_size, input_size), **fk))
        self.weight_hh = Parameter(ember.empty((num_chunks * hidden_size, hidden_size), **fk))
        if bias:
            self.bias_ih = Parameter(ember.empty(num_chunks * hidden_size, **fk))
            self.bias_hh = Parameter(ember.empty(num_chunks * hidden_size, **fk))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def forward(self, input, hx=None):
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if isinstance(hx, list) and self.mode == "LSTM":  # (h, c) may come as a list, as PyTorch allows
            hx = tuple(hx)
        states = hx if isinstance(hx, tuple) else (hx,)
        for h in states:
            if h is not None and h.dim() not in (1, 2):
                raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {h.dim()}D instead")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]} expected {self.input_size}")
        if hx is None:
            zeros = x.new_zeros((x.shape[0], self.hidden_size))
            state = (zeros, zeros) if self.mode == "LSTM" else zeros
        else:
            state = tuple(h if batched else h.unsqueeze(0) for h in states)
            state = state if self.mode == "LSTM" else state[0]
        out = _step(self.mode, x, state, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        if batched:
            return out
        return tuple(o.squeeze(0) for o in out) if self.mode == "LSTM" else out.squeeze(0)


class RNNCell(RNNCellBase):
    """One Elman RNN step."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {nonlinearity}")
        self.mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity


class LSTMCell(RNNCellBase):
    """One LSTM step; returns (h, c)."""

    mode = "LSTM"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)


class GRUCell(RNNCellBase):
    """One GRU step."""

    mode = "GRU"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)
