"""The quantizable LSTM: an LSTM written with modules that eager-mode quantization can observe and swap (input and
hidden projections as ``nn.Linear``, the gate sums and products as ``FloatFunctional``, the activations as
modules), so that after ``convert`` every step runs on quantized tensors. ``prepare`` puts it in place of an
``nn.LSTM`` that has a qconfig (the default custom module mapping); ``ao.nn.quantized.LSTM`` is its converted
form."""
import numbers
import warnings

import ember
import ember.nn as nn

__all__ = ["LSTMCell", "LSTM"]

_GATES = ("input", "forget", "cell", "output")


class LSTMCell(nn.Module):
    """One LSTM step of observable parts: ``igates``/``hgates`` project the input and the hidden state (one
    Linear each, or one per gate with ``split_gates``), ``gates`` adds them, then the gate activations and the
    cell update ``c' = f * c + i * g``, ``h' = o * tanh(c')`` through FloatFunctionals."""

    _FLOAT_MODULE = nn.LSTMCell

    def __init__(self, input_dim, hidden_dim, bias=True, device=None, dtype=None, *, split_gates=False):
        # (imported here: ao.nn.quantized's LSTM subclasses this module's, so its package imports this one)
        from ember.ao.nn.quantized import FloatFunctional
        super().__init__()
        self.input_size, self.hidden_size, self.bias, self.split_gates = input_dim, hidden_dim, bias, split_gates
        kw = {"bias": bias, "device": device, "dtype": dtype}
        if split_gates:
            self.igates = nn.ModuleDict({g: nn.Linear(input_dim, hidden_dim, **kw) for g in _GATES})
            self.hgates = nn.ModuleDict({g: nn.Linear(hidden_dim, hidden_dim, **kw) for g in _GATES})
            self.gates = nn.ModuleDict({g: FloatFunctional() for g in _GATES})
        else:
            self.igates = nn.Linear(input_dim, 4 * hidden_dim, **kw)
            self.hgates = nn.Linear(hidden_dim, 4 * hidden_dim, **kw)
            self.gates = FloatFunctional()
        self.input_gate, self.forget_gate = nn.Sigmoid(), nn.Sigmoid()
        self.cell_gate, self.output_gate = nn.Tanh(), nn.Sigmoid()
        self.fgate_cx, self.igate_cgate = FloatFunctional(), FloatFunctional()
        self.fgate_cx_igate_cgate, self.ogate_cy = FloatFunctional(), FloatFunctional()
        self.initial_hidden_state_qparams = (1.0, 0)
        self.initial_cell_state_qparams = (1.0, 0)
        self.hidden_state_dtype = ember.quint8
        self.cell_state_dtype = ember.quint8

    def forward(self, x, hidden=None):
        if hidden is None or hidden[0] is None or hidden[1] is None:
            hidden = self.initialize_hidden(x.shape[0], x.is_quantized)
        hx, cx = hidden
        if self.split_gates:
            i, f, g, o = (self.gates[k].add(self.igates[k](x), self.hgates[k](hx)) for k in _GATES)
        else:
            i, f, g, o = self.gates.add(self.igates(x), self.hgates(hx)).chunk(4, 1)
        i, f, g, o = self.input_gate(i), self.forget_gate(f), self.cell_gate(g), self.output_gate(o)
        cy = self.fgate_cx_igate_cgate.add(self.fgate_cx.mul(f, cx), self.igate_cgate.mul(i, g))
        hy = self.ogate_cy.mul(o, ember.tanh(cy))
        return hy, cy

    def initialize_hidden(self, batch_size, is_quantized=False):
        """Zero (h, c) of ``batch_size`` rows; quantized with the initial states' qparams for quantized inputs."""
        h, c = ember.zeros(batch_size, self.hidden_size), ember.zeros(batch_size, self.hidden_size)
        if is_quantized:
            h = ember.quantize_per_tensor(h, *self.initial_hidden_state_qparams, self.hidden_state_dtype)
            c = ember.quantize_per_tensor(c, *self.initial_cell_state_qparams, self.cell_state_dtype)
        return h, c

    def _get_name(self):
        return "QuantizableLSTMCell"

    @classmethod
    def from_params(cls, wi, wh, bi=None, bh=None, split_gates=False):
        """A cell with input weight ``wi`` (4 * hidden, input), hidden weight ``wh`` and their biases."""
        if (bi is None) != (bh is None):
            raise AssertionError("bi and bh must both be None or both have values")
        cell = cls(wi.shape[1], wh.shape[1], bias=bi is not None, split_gates=split_gates)
        for w, b, gates in ((wi, bi, cell.igates), (wh, bh, cell.hgates)):
            if not split_gates:
                gates.weight = nn.Parameter(w)
                if b is not None:
                    gates.bias = nn.Parameter(b)
                continue
            for k, layer in enumerate(gates.values()):
                layer.weight = nn.Parameter(w.chunk(4, 0)[k])
                if b is not None:
                    layer.bias = nn.Parameter(b.chunk(4, 0)[k])
        return cell

    @classmethod
    def from_float(cls, other, use_precomputed_fake_quant=False, split_gates=False):
        if type(other) is not cls._FLOAT_MODULE:
            raise AssertionError(f"Expected module type {cls._FLOAT_MODULE}, got {type(other)}")
        if not hasattr(other, "qconfig"):
            raise AssertionError("The float module must have 'qconfig'")
        observed = cls.from_params(other.weight_ih, other.weight_hh, other.bias_ih, other.bias_hh,
                                   split_gates=split_gates)
        observed.qconfig = other.qconfig
        for gates in (observed.igates, observed.hgates):
            for layer in (gates.values() if split_gates else (gates,)):
                layer.qconfig = other.qconfig
        return observed


class _LSTMSingleLayer(nn.Module):
    """One direction of one layer: the cell over the steps of a (steps, batch, features) input."""

    def __init__(self, input_dim, hidden_dim, bias=True, device=None, dtype=None, *, split_gates=False):
        super().__init__()
        self.cell = LSTMCell(input_dim, hidden_dim, bias, device, dtype, split_gates=split_gates)

    def forward(self, x, hidden=None):
        outputs = []
        for step in range(x.shape[0]):
            hidden = self.cell(x[step], hidden)
            outputs.append(hidden[0])
        return ember.stack(outputs, 0), hidden

    @classmethod
    def from_params(cls, *args, **kwargs):
        cell = LSTMCell.from_params(*args, **kwargs)
        layer = cls(cell.input_size, cell.hidden_size, cell.bias, split_gates=cell.split_gates)
        layer.cell = cell
        return layer


class _LSTMLayer(nn.Module):
    """One layer, both directions if ``bidirectional`` (``layer_fw``, ``layer_bw``); the hidden state (h, c) has
    a leading direction dim when bidirectional."""

    def __init__(self, input_dim, hidden_dim, bias=True, batch_first=False, bidirectional=False, device=None,
                 dtype=None, *, split_gates=False):
        super().__init__()
        self.batch_first, self.bidirectional = batch_first, bidirectional
        self.layer_fw = _LSTMSingleLayer(input_dim, hidden_dim, bias, device, dtype, split_gates=split_gates)
        if bidirectional:
            self.layer_bw = _LSTMSingleLayer(input_dim, hidden_dim, bias, device, dtype, split_gates=split_gates)

    def forward(self, x, hidden=None):
        if self.batch_first:
            x = x.transpose(0, 1)
        hx, cx = (None, None) if hidden is None else hidden
        hidden_bw = None
        if self.bidirectional:
            hx, hx_bw = (None, None) if hx is None else (hx[0], hx[1])
            cx, cx_bw = (None, None) if cx is None else (cx[0], cx[1])
            if hx_bw is not None and cx_bw is not None:
                hidden_bw = hx_bw, cx_bw
        hidden_fw = None if hx is None and cx is None else (hx, cx)
        result, hidden_fw = self.layer_fw(x, hidden_fw)
        h, c = hidden_fw
        if self.bidirectional:
            result_bw, hidden_bw = self.layer_bw(x.flip(0), hidden_bw)
            result = ember.cat([result, result_bw.flip(0)], result.dim() - 1)
            h, c = ember.stack([hidden_fw[0], hidden_bw[0]], 0), ember.stack([hidden_fw[1], hidden_bw[1]], 0)
        if self.batch_first:
            result = result.transpose(0, 1)
        return result, (h, c)

    @classmethod
    def from_float(cls, other, layer_idx=0, qconfig=None, **kwargs):
        """Layer ``layer_idx`` of float ``nn.LSTM`` ``other`` (its weights shared), for ``prepare``."""
        if not hasattr(other, "qconfig") and qconfig is None:
            raise AssertionError("other must have qconfig or qconfig must be provided")
        split_gates = kwargs.get("split_gates", False)
        layer = cls(kwargs.get("input_size", other.input_size), kwargs.get("hidden_size", other.hidden_size),
                    kwargs.get("bias", other.bias), kwargs.get("batch_first", other.batch_first),
                    kwargs.get("bidirectional", other.bidirectional), split_gates=split_gates)
        layer.qconfig = getattr(other, "qconfig", qconfig)
        for suffix, name in (("", "layer_fw"), ("_reverse", "layer_bw")):
            if suffix and not other.bidirectional:
                break
            params = [getattr(other, f"{p}_l{layer_idx}{suffix}", None)
                      for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            setattr(layer, name, _LSTMSingleLayer.from_params(*params, split_gates=split_gates))
        return layer


class LSTM(nn.Module):
    """A quantizable LSTM (``nn.LSTM``'s arguments; dropout is ignored): ``layers``, one ``_LSTMLayer`` each.
    Weights are per layer: ``layers[i].layer_fw.cell.igates.weight``."""

    _FLOAT_MODULE = nn.LSTM

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None, *, split_gates=False):
        super().__init__()
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional = bidirectional
        self.training = False  # (eval mode unless asked: prepare_qat sets training)
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                             "being zeroed")
        if dropout > 0:
            warnings.warn("dropout option for quantizable LSTM is ignored. If you are training, please, use nn.LSTM "
                          "version followed by `prepare` step.", stacklevel=2)
            if num_layers == 1:
                warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                              f"expects num_layers greater than 1, but got dropout={dropout} and "
                              f"num_layers={num_layers}", stacklevel=2)
        self.layers = nn.ModuleList([
            _LSTMLayer(input_size if i == 0 else hidden_size, hidden_size, bias, batch_first=False,
                       bidirectional=bidirectional, device=device, dtype=dtype, split_gates=split_gates)
            for i in range(num_layers)])

    def forward(self, x, hidden=None):
        if self.batch_first:
            x = x.transpose(0, 1)
        batch = x.size(1)
        directions = 2 if self.bidirectional else 1
        if hidden is None:
            zeros = ember.zeros(directions, batch, self.hidden_size)
            if directions == 1:
                zeros = zeros[0]
            if x.is_quantized:
                zeros = ember.quantize_per_tensor(zeros, 1.0, 0, x.dtype)
            states = [(zeros, zeros)] * self.num_layers
        elif isinstance(hidden[0], ember.Tensor):
            hx = hidden[0].reshape(self.num_layers, directions, batch, self.hidden_size)
            cx = hidden[1].reshape(self.num_layers, directions, batch, self.hidden_size)
            states = [(hx[i].squeeze(0), cx[i].squeeze(0)) for i in range(self.num_layers)]
        else:
            states = hidden
        hs, cs = [], []
        for layer, state in zip(self.layers, states):
            x, (h, c) = layer(x, state)
            hs.append(h)
            cs.append(c)
        h, c = ember.stack(hs), ember.stack(cs)
        h, c = h.reshape(-1, h.shape[-2], h.shape[-1]), c.reshape(-1, c.shape[-2], c.shape[-1])
        if self.batch_first:
            x = x.transpose(0, 1)
        return x, (h, c)

    def _get_name(self):
        return "QuantizableLSTM"

    @classmethod
    def from_float(cls, other, qconfig=None, split_gates=False):
        """The observed quantizable LSTM of float ``nn.LSTM`` ``other`` (prepared, or prepared for QAT when
        ``other`` is training)."""
        from ember.ao.quantization import prepare, prepare_qat
        if not isinstance(other, cls._FLOAT_MODULE):
            raise AssertionError(f"Expected module type {cls._FLOAT_MODULE}, got {type(other)}")
        if not hasattr(other, "qconfig") and not qconfig:
            raise AssertionError("other must have qconfig or qconfig must be provided")
        observed = cls(other.input_size, other.hidden_size, other.num_layers, other.bias, other.batch_first,
                       other.dropout, other.bidirectional, split_gates=split_gates)
        observed.qconfig = getattr(other, "qconfig", qconfig)
        for i in range(other.num_layers):
            observed.layers[i] = _LSTMLayer.from_float(other, i, qconfig, batch_first=False,
                                                       split_gates=split_gates)
        if other.training:
            return prepare_qat(observed.train(), inplace=True)
        return prepare(observed.eval(), inplace=True)

    @classmethod
    def from_observed(cls, other):
        raise NotImplementedError("It looks like you are trying to convert a non-quantizable LSTM module. Please, "
                                  "see the examples on quantizable LSTMs.")
