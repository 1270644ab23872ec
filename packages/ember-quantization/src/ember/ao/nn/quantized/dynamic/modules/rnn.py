"""Dynamically quantized LSTM and GRU and the LSTM, GRU and RNN cells: float32 inputs and states, int8 (or
float16) weights. As in PyTorch, a layer's input projection is one dynamic linear over the whole sequence (one
scale for all its steps); the hidden projection quantizes each step's state."""
import numbers
import warnings

import numpy as np

import ember
import ember.nn as nn
from ember import _serialization
from ember.ao.nn.quantized.modules.utils import _quantize_weight
from ember.nn.modules.module import _addindent
from ember.nn.utils.rnn import PackedSequence
from ember.ops import quantized as qops
from ember.ops.quantized import LinearPackedParams, LinearPackedParamsFp16

from .linear import _dynamic_weight_observer

__all__ = ["pack_weight_bias", "PackedParameter", "RNNBase", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell",
           "GRUCell", "apply_permutation"]

_f32 = np.float32


def _apply_permutation(tensor, permutation, dim=1):
    return tensor.index_select(dim, permutation)


def apply_permutation(tensor, permutation, dim=1):
    warnings.warn("`apply_permutation` is deprecated, please use `tensor.index_select(dim, permutation)` instead",
                  FutureWarning, stacklevel=2)
    return _apply_permutation(tensor, permutation, dim)


def pack_weight_bias(qweight, bias, dtype):
    """A packed weight: qint8 (quantized ``qweight``) or float16 (float ``qweight``)."""
    return LinearPackedParams(qweight, bias) if dtype == ember.qint8 else LinearPackedParamsFp16(qweight, bias)


class CellParams:
    """One layer-direction's packed input and hidden weights (PyTorch's CellParamsBase; ``__getstate__`` has its
    layout: kind, the biases, no doubles, reduce_range, the packed weights)."""

    def __init__(self, packed_ih, packed_hh, reduce_range=True):
        self.packed_ih, self.packed_hh, self.reduce_range = packed_ih, packed_hh, reduce_range

    def linear_ih(self, a):
        return qops._linear_dynamic_array(a, self.packed_ih, self.reduce_range)

    def linear_hh(self, a):
        return qops._linear_dynamic_array(a, self.packed_hh, self.reduce_range)

    def __getstate__(self):
        packed = [self.packed_ih, self.packed_hh]
        if isinstance(self.packed_ih, LinearPackedParamsFp16):
            return ("quantized_fp16", [], [], [], packed), None
        return ("quantized_dynamic", [self.packed_ih.bias, self.packed_hh.bias], [], [int(self.reduce_range)],
                packed), None

    def __setstate__(self, state):
        _, _, _, longs, (packed_ih, packed_hh) = state[0]
        self.__init__(packed_ih, packed_hh, bool(longs[0]) if longs else False)


def _cell_params(payload):
    params = CellParams.__new__(CellParams)
    params.__setstate__((payload, None))
    return params


# in checkpoints as PyTorch's TorchScript class (state_dicts of dynamic LSTMs and GRUs hold them)
_serialization.register_script_class("__torch__.torch.classes.rnn.CellParamsBase", (CellParams,), _cell_params)


class PackedParameter(nn.Module):
    """Holds one CellParams; saved as ``param`` (``_all_weight_values.<i>.param``, PyTorch's key)."""

    def __init__(self, param):
        super().__init__()
        self.param = param

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "param"] = self.param

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs):
        self.param = state_dict[prefix + "param"]
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, *args, **kwargs)


# ---- the cells, on float32 arrays ---------------------------------------------------------------------------------
def _sigmoid(v):
    return ember.sigmoid(ember.from_numpy(v))._data


def _lstm_cell(gates, c):
    """(h, c) of an LSTM step from its gate pre-activations (i, f, g, o) and the previous cell state."""
    s = _sigmoid(gates)  # (of all four: one call costs less than three; g's are not used)
    n = gates.shape[-1] // 4
    i, f, g, o = s[..., :n], s[..., n:2 * n], gates[..., 2 * n:3 * n], s[..., 3 * n:]
    c = f * c + i * np.tanh(g)
    return o * np.tanh(c), c


def _gru_cell(gates_x, gates_h, h):
    """The next GRU state: reset r, update z, new n = tanh(x_n + r * h_n), h' = (h - n) * z + n."""
    xr, xz, xn = np.split(gates_x, 3, axis=-1)
    hr, hz, hn = np.split(gates_h, 3, axis=-1)
    r, z = _sigmoid(hr + xr), _sigmoid(hz + xz)
    n = np.tanh(xn + hn * r)
    return (h - n) * z + n


def _run_layer(mode, params, x_proj, batch_sizes, h, c, reverse):
    """One layer-direction over time: ``x_proj`` (steps' rows, gates) the input projection of the packed rows,
    ``batch_sizes`` rows per step (decreasing); returns the outputs (rows, hidden) and the final (h, c)."""
    offsets = np.concatenate([[0], np.cumsum(batch_sizes)])
    out = np.empty((x_proj.shape[0], h.shape[-1]), _f32)
    h, c = h.copy(), None if c is None else c.copy()
    steps = range(len(batch_sizes) - 1, -1, -1) if reverse else range(len(batch_sizes))
    for t in steps:
        b = int(batch_sizes[t])
        rows = slice(offsets[t], offsets[t + 1])
        gates_h = params.linear_hh(h[:b])
        if mode == "LSTM":
            h[:b], c[:b] = _lstm_cell(gates_h + x_proj[rows], c[:b])
        else:
            h[:b] = _gru_cell(x_proj[rows], gates_h, h[:b])
        out[rows] = h[:b]
    return out, h, c


class RNNBase(nn.Module):
    """State of the dynamically quantized LSTM/GRU: one PackedParameter per layer and direction in
    ``_all_weight_values`` (PyTorch's state_dict keys)."""

    _FLOAT_MODULE = nn.RNNBase
    _version = 2

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, dtype=ember.qint8):
        super().__init__()
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.dtype, self.version = bidirectional, dtype, 2
        self.training = False
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                             "being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=2)
        gates = {"LSTM": 4, "GRU": 3}.get(mode)
        if gates is None:
            raise ValueError("Unrecognized RNN mode: " + mode)
        directions = 2 if bidirectional else 1
        values = []
        for layer in range(num_layers):
            for _ in range(directions):
                size = input_size if layer == 0 else hidden_size * directions
                w_ih, w_hh = ember.randn(gates * hidden_size, size), ember.randn(gates * hidden_size, hidden_size)
                b_ih, b_hh = ember.randn(gates * hidden_size), ember.randn(gates * hidden_size)
                if dtype == ember.qint8:
                    w_ih = ember.quantize_per_tensor(w_ih, 0.1, 0, ember.qint8)
                    w_hh = ember.quantize_per_tensor(w_hh, 0.1, 0, ember.qint8)
                values.append(PackedParameter(CellParams(pack_weight_bias(w_ih, b_ih, dtype),
                                                         pack_weight_bias(w_hh, b_hh, dtype))))
        self._all_weight_values = nn.ModuleList(values)

    def _get_name(self):
        return "DynamicQuantizedRNN"

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
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

    def __repr__(self):
        children = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()
                    if not isinstance(m, (PackedParameter, nn.ModuleList))]
        lines = [self.extra_repr()] + children
        if len(lines) == 1:
            return f"{self._get_name()}({lines[0]})"
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def check_input(self, input, batch_sizes):
        expected = 2 if batch_sizes is not None else 3
        if input.dim() != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{input.size(-1)}")

    def get_expected_hidden_size(self, input, batch_sizes):
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        return (self.num_layers * (2 if self.bidirectional else 1), mini_batch, self.hidden_size)

    def check_hidden_size(self, hx, expected_hidden_size, msg="Expected hidden size {}, got {}"):
        if tuple(hx.size()) != expected_hidden_size:
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))

    def permute_hidden(self, hx, permutation):
        return hx if permutation is None else _apply_permutation(hx, permutation)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs):
        self.version = local_metadata.get("version")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, *args, **kwargs)

    def _names(self):
        """(layer, suffix) of each layer-direction, in ``_all_weight_values`` order."""
        return [(layer, "_reverse" if d else "") for layer in range(self.num_layers)
                for d in range(2 if self.bidirectional else 1)]

    def set_weight_bias(self, weight_bias_dict):
        values = []
        for layer, suffix in self._names():
            w_ih, b_ih = weight_bias_dict[f"weight_ih_l{layer}{suffix}"], weight_bias_dict[f"bias_ih_l{layer}{suffix}"]
            w_hh, b_hh = weight_bias_dict[f"weight_hh_l{layer}{suffix}"], weight_bias_dict[f"bias_hh_l{layer}{suffix}"]
            dtype = ember.qint8 if w_ih.dtype == ember.qint8 else ember.float16
            values.append(PackedParameter(CellParams(pack_weight_bias(w_ih, b_ih, dtype),
                                                     pack_weight_bias(w_hh, b_hh, dtype),
                                                     self.version is not None and self.version >= 2)))
        self._all_weight_values = nn.ModuleList(values)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The dynamically quantized LSTM/GRU of a float one: each weight quantized with its own observer."""
        if type(mod) not in (nn.LSTM, nn.GRU):
            raise AssertionError("nn.quantized.dynamic.RNNBase.from_float only works for nn.LSTM and nn.GRU")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        dtype = _dynamic_weight_observer(mod).dtype
        if dtype not in (ember.qint8, ember.float16):
            raise RuntimeError(f"Unsupported dtype for dynamic RNN quantization: {dtype}")
        q = {"LSTM": LSTM, "GRU": GRU}[mod.mode](mod.input_size, mod.hidden_size, mod.num_layers, mod.bias,
                                                 mod.batch_first, mod.dropout, mod.bidirectional, dtype)
        if not mod.bias:
            raise AssertionError("mod.bias must be True")

        def packed(w, b):
            if dtype == ember.float16:
                return LinearPackedParamsFp16(w.float(), b)
            observer = _dynamic_weight_observer(mod)
            observer(w)
            return LinearPackedParams(_quantize_weight(w.float(), observer), b)

        q._all_weight_values = nn.ModuleList([
            PackedParameter(CellParams(packed(getattr(mod, f"weight_ih_l{layer}{suffix}"),
                                              getattr(mod, f"bias_ih_l{layer}{suffix}")),
                                       packed(getattr(mod, f"weight_hh_l{layer}{suffix}"),
                                              getattr(mod, f"bias_hh_l{layer}{suffix}"))))
            for layer, suffix in q._names()])
        return q

    def _weight_bias(self):
        result = {"weight": {}, "bias": {}}
        for (layer, suffix), value in zip(self._names(), self._all_weight_values):
            for name, packed in (("ih", value.param.packed_ih), ("hh", value.param.packed_hh)):
                result["weight"][f"weight_{name}_l{layer}{suffix}"], result["bias"][f"bias_{name}_l{layer}{suffix}"] = \
                    packed.unpack()
        return result

    def get_weight(self):
        return self._weight_bias()["weight"]

    def get_bias(self):
        return self._weight_bias()["bias"]

    def _run(self, data, batch_sizes, states):
        """All layers over packed rows ``data`` (rows, input) with ``batch_sizes`` per step; ``states`` the (h, c)
        (c None for a GRU) arrays (layers * directions, batch, hidden). Returns the last layer's rows and the final
        states."""
        directions = 2 if self.bidirectional else 1
        h0, c0 = states
        hs, cs = np.empty_like(h0), None if c0 is None else np.empty_like(c0)
        layer_input = data
        for layer in range(self.num_layers):
            outputs = []
            for d in range(directions):
                k = layer * directions + d
                params = self._all_weight_values[k].param
                x_proj = params.linear_ih(layer_input)
                out, hs[k], c_final = _run_layer(self.mode, params, x_proj, batch_sizes, h0[k],
                                                 None if c0 is None else c0[k], d == 1)
                if cs is not None:
                    cs[k] = c_final
                outputs.append(out)
            layer_input = outputs[0] if directions == 1 else np.concatenate(outputs, -1)
        return layer_input, (hs, cs)

    def forward(self, input, hx=None):
        packed = isinstance(input, PackedSequence)
        if packed:
            data, batch_sizes, sorted_indices, unsorted_indices = input
            max_batch = int(batch_sizes[0])
            sizes = batch_sizes.numpy()
        else:
            data, sorted_indices, unsorted_indices = input, None, None
            max_batch = input.size(0) if self.batch_first else input.size(1)
        lstm = self.mode == "LSTM"
        if hx is None:
            zeros = ember.zeros(self.num_layers * (2 if self.bidirectional else 1), max_batch, self.hidden_size,
                                dtype=data.dtype)
            hx = (zeros, zeros) if lstm else zeros
        elif lstm:
            hx = tuple(self.permute_hidden(h, sorted_indices) for h in hx)
        else:
            hx = self.permute_hidden(hx, sorted_indices)
        self.check_forward_args(data, hx, batch_sizes if packed else None)
        if not packed:
            seq = data.detach().numpy().astype(_f32)
            if self.batch_first:
                seq = seq.transpose(1, 0, 2)
            sizes = np.full(seq.shape[0], seq.shape[1])
            rows = np.ascontiguousarray(seq).reshape(-1, seq.shape[-1])
        else:
            rows = data.detach().numpy().astype(_f32)
        states = (hx[0].detach().numpy(), hx[1].detach().numpy()) if lstm else (hx.detach().numpy(), None)
        out_rows, (h, c) = self._run(rows, sizes, states)
        hidden = (ember.from_numpy(h), ember.from_numpy(c)) if lstm else ember.from_numpy(h)
        if packed:
            output = PackedSequence(ember.from_numpy(out_rows), batch_sizes, sorted_indices, unsorted_indices)
        else:
            out = out_rows.reshape(len(sizes), -1, out_rows.shape[-1])
            output = ember.from_numpy(np.ascontiguousarray(out.transpose(1, 0, 2) if self.batch_first else out))
        if lstm:
            return output, tuple(self.permute_hidden(h, unsorted_indices) for h in hidden)
        return output, self.permute_hidden(hidden, unsorted_indices)


class LSTM(RNNBase):
    """Dynamically quantized LSTM (``from_float`` of an nn.LSTM): float32 in and out."""

    _FLOAT_MODULE = nn.LSTM

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def _get_name(self):
        return "DynamicQuantizedLSTM"

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        expected = self.get_expected_hidden_size(input, batch_sizes)
        self.check_hidden_size(hidden[0], expected, "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], expected, "Expected hidden[1] size {}, got {}")

    def permute_hidden(self, hx, permutation):
        return hx if permutation is None else _apply_permutation(hx, permutation)


class GRU(RNNBase):
    """Dynamically quantized GRU (``from_float`` of an nn.GRU): float32 in and out."""

    _FLOAT_MODULE = nn.GRU

    def __init__(self, *args, **kwargs):
        super().__init__("GRU", *args, **kwargs)

    def _get_name(self):
        return "DynamicQuantizedGRU"

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden size {}, got {}")


class RNNCellBase(nn.Module):
    """State of the dynamically quantized cells: packed input and hidden weights (``_packed_weight_ih``,
    ``_packed_weight_hh`` in the state_dict) and the float biases."""

    def __init__(self, input_size, hidden_size, bias=True, num_chunks=4, dtype=ember.qint8):
        super().__init__()
        self.input_size, self.hidden_size, self.bias, self.weight_dtype = input_size, hidden_size, bias, dtype
        if bias:
            self.bias_ih = ember.randn(num_chunks * hidden_size)
            self.bias_hh = ember.randn(num_chunks * hidden_size)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        weight_ih = ember.randn(num_chunks * hidden_size, input_size)
        weight_hh = ember.randn(num_chunks * hidden_size, hidden_size)
        if dtype == ember.qint8:
            weight_ih = ember.quantize_per_tensor(weight_ih, 1.0, 0, ember.qint8)
            weight_hh = ember.quantize_per_tensor(weight_hh, 1.0, 0, ember.qint8)
        self._packed_weight_ih = pack_weight_bias(weight_ih, self.bias_ih, dtype)
        self._packed_weight_hh = pack_weight_bias(weight_hh, self.bias_hh, dtype)

    def _get_name(self):
        return "DynamicQuantizedRNNBase"

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def check_forward_input(self, input):
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)}, expected {self.input_size}")

    def check_forward_hidden(self, input, hx, hidden_label=""):
        if input.size(0) != hx.size(0):
            raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{hidden_label} batch size "
                               f"{hx.size(0)}")
        if hx.size(1) != self.hidden_size:
            raise RuntimeError(f"hidden{hidden_label} has inconsistent hidden_size: got {hx.size(1)}, expected "
                               f"{self.hidden_size}")

    def _gates(self, input, h):
        """(input projection, hidden projection) as float32 arrays."""
        x = input.detach().numpy().astype(_f32)
        return (qops._linear_dynamic_array(x, self._packed_weight_ih),
                qops._linear_dynamic_array(h.detach().numpy().astype(_f32), self._packed_weight_hh))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The dynamically quantized cell of an nn.LSTMCell, nn.GRUCell or nn.RNNCell."""
        if type(mod) not in (nn.LSTMCell, nn.GRUCell, nn.RNNCell):
            raise AssertionError("nn.quantized.dynamic.RNNCellBase.from_float only works for nn.LSTMCell, "
                                 "nn.GRUCell and nn.RNNCell")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        dtype = _dynamic_weight_observer(mod).dtype
        if dtype not in (ember.qint8, ember.float16):
            raise RuntimeError(f"Unsupported dtype for dynamic RNN quantization: {dtype}")
        if type(mod) is nn.RNNCell:
            q = RNNCell(mod.input_size, mod.hidden_size, bias=mod.bias, nonlinearity=mod.nonlinearity, dtype=dtype)
        else:
            q = {nn.LSTMCell: LSTMCell, nn.GRUCell: GRUCell}[type(mod)](mod.input_size, mod.hidden_size,
                                                                        bias=mod.bias, dtype=dtype)
        if not mod.bias:
            raise AssertionError("mod.bias must be True")

        def weight(w):
            if dtype != ember.qint8:
                return w.float()
            observer = _dynamic_weight_observer(mod)
            observer(w)
            return _quantize_weight(w.float(), observer)

        q._packed_weight_ih = pack_weight_bias(weight(mod.weight_ih), mod.bias_ih, dtype)
        q._packed_weight_hh = pack_weight_bias(weight(mod.weight_hh), mod.bias_hh, dtype)
        return q

    def _weight_bias(self):
        (w1, b1), (w2, b2) = self._packed_weight_ih.unpack(), self._packed_weight_hh.unpack()
        return {"weight": {"weight_ih": w1, "weight_hh": w2}, "bias": {"bias_ih": b1, "bias_hh": b2}}

    def get_weight(self):
        return self._weight_bias()["weight"]

    def get_bias(self):
        return self._weight_bias()["bias"]

    def set_weight_bias(self, weight_bias_dict):
        w, b = weight_bias_dict["weight"], weight_bias_dict["bias"]
        self._packed_weight_ih = pack_weight_bias(w["weight_ih"], b["bias_ih"], self.weight_dtype)
        self._packed_weight_hh = pack_weight_bias(w["weight_hh"], b["bias_hh"], self.weight_dtype)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "_packed_weight_ih"] = self._packed_weight_ih
        destination[prefix + "_packed_weight_hh"] = self._packed_weight_hh

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs):
        self._packed_weight_ih = state_dict.pop(prefix + "_packed_weight_ih")
        self._packed_weight_hh = state_dict.pop(prefix + "_packed_weight_hh")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, *args, **kwargs)


class RNNCell(RNNCellBase):
    """Dynamically quantized Elman cell: ``tanh`` (or ``relu``) of the two projections' sum."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", dtype=ember.qint8):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, dtype=dtype)
        self.nonlinearity = nonlinearity

    def _get_name(self):
        return "DynamicQuantizedRNNCell"

    def forward(self, input, hx=None):
        self.check_forward_input(input)
        if hx is None:
            hx = ember.zeros(input.size(0), self.hidden_size, dtype=input.dtype)
        self.check_forward_hidden(input, hx, "")
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        gx, gh = self._gates(input, hx)
        s = gx + gh
        return ember.from_numpy(np.tanh(s) if self.nonlinearity == "tanh" else np.maximum(s, 0))


class LSTMCell(RNNCellBase):
    """Dynamically quantized LSTM cell: returns (h, c)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, num_chunks=4, **kwargs)

    def _get_name(self):
        return "DynamicQuantizedLSTMCell"

    def forward(self, input, hx=None):
        self.check_forward_input(input)
        if hx is None:
            zeros = ember.zeros(input.size(0), self.hidden_size, dtype=input.dtype)
            hx = (zeros, zeros)
        self.check_forward_hidden(input, hx[0], "[0]")
        self.check_forward_hidden(input, hx[1], "[1]")
        gx, gh = self._gates(input, hx[0])
        h, c = _lstm_cell(gh + gx, hx[1].detach().numpy().astype(_f32))
        return ember.from_numpy(h), ember.from_numpy(c)


class GRUCell(RNNCellBase):
    """Dynamically quantized GRU cell."""

    def __init__(self, input_size, hidden_size, bias=True, dtype=ember.qint8):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, dtype=dtype)

    def _get_name(self):
        return "DynamicQuantizedGRUCell"

    def forward(self, input, hx=None):
        self.check_forward_input(input)
        if hx is None:
            hx = ember.zeros(input.size(0), self.hidden_size, dtype=input.dtype)
        self.check_forward_hidden(input, hx, "")
        gx, gh = self._gates(input, hx)
        return ember.from_numpy(_gru_cell(gx, gh, hx.detach().numpy().astype(_f32)))
