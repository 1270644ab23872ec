"""PyTorch's low-level spellings in the ``ember`` namespace of what ember-nn implements: ``ember.ctc_loss``,
``ember.grid_sampler`` (``_2d``/``_3d``) with integer modes, and the RNN functions over flat weight lists
(``ember.lstm``, ``ember.gru``, ``ember.rnn_tanh``, ``ember.rnn_relu``). Each hands on to the functional form or
the module code, so that there is one implementation."""
from ember._ops.losses import _reduction
from ember._tensor import Tensor

from .functional._layers import grid_sample
from .functional._loss import ctc_loss as _ctc_loss
from .modules.module import Module
from .modules.rnn import _GATES, RNNBase
from .utils.rnn import PackedSequence

__all__ = ["ctc_loss", "grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "gru", "lstm", "rnn_relu", "rnn_tanh"]

_REDUCTIONS = {1: "mean", 2: "sum"}  # at::Reduction; any other int is none
_INTERPOLATION = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0, zero_infinity=False):
    """``nn.functional.ctc_loss`` with ``reduction`` as an int (1 mean, 2 sum, else none; none by default, as
    torch 2.13's binding does)."""
    mode = _REDUCTIONS.get(_reduction("ctc_loss", reduction), "none")
    return _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, mode, zero_infinity)


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """``nn.functional.grid_sample`` with integer modes: interpolation 0 bilinear, 1 nearest, 2 bicubic; padding
    0 zeros, 1 border, 2 reflection."""
    if interpolation_mode not in _INTERPOLATION:
        raise RuntimeError(f"grid_sampler(): interpolation_mode must be 0 (bilinear), 1 (nearest) or 2 (bicubic), got "
                           f"{interpolation_mode}")
    if padding_mode not in _PADDING:
        raise RuntimeError(f"grid_sampler(): padding_mode must be 0 (zeros), 1 (border) or 2 (reflection), got "
                           f"{padding_mode}")
    return grid_sample(input, grid, _INTERPOLATION[interpolation_mode], _PADDING[padding_mode], bool(align_corners))


def _grid_sampler_nd(dims):
    def sampler(input, grid, interpolation_mode, padding_mode, align_corners):
        if input.dim() != dims or grid.dim() != dims:
            raise RuntimeError(f"grid_sampler(): expected {dims}D input and grid with same number of dimensions, but "
                               f"got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
        return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)

    sampler.__name__ = sampler.__qualname__ = f"grid_sampler_{dims - 2}d"
    sampler.__doc__ = f"``grid_sampler`` of {dims}-D inputs."
    return sampler


grid_sampler_2d = _grid_sampler_nd(4)
grid_sampler_3d = _grid_sampler_nd(5)


class _FlatWeightsRNN(RNNBase):
    """The forward pass of RNN/LSTM/GRU over a flat list of weights (per layer and direction: w_ih, w_hh, then
    b_ih, b_hh when ``has_biases``, then w_hr for a projected LSTM), as PyTorch's low-level functions take them."""

    def __init__(self, mode, params, has_biases, num_layers, dropout, train, bidirectional, batch_first, proj):
        Module.__init__(self)
        per = 2 + 2 * bool(has_biases) + bool(proj)
        directions = 2 if bidirectional else 1
        if len(params) != per * num_layers * directions:
            raise RuntimeError(f"{mode.lower()}: expected {per * num_layers * directions} weights for {num_layers} "
                               f"layer(s), {directions} direction(s) and has_biases={has_biases}, got {len(params)}")
        self._weights = [list(params[i:i + per]) for i in range(0, len(params), per)]
        self.mode, self.num_layers, self.dropout, self.training = mode, num_layers, float(dropout), bool(train)
        self.bidirectional, self.batch_first, self.bias = bool(bidirectional), bool(batch_first), bool(has_biases)
        self.input_size = params[0].shape[1]
        self.hidden_size = params[1].shape[0] // _GATES[mode]
        self.proj_size = params[per - 1].shape[0] if proj else 0

    def _layer_weights(self, layer, direction):
        ws = self._weights[layer * (2 if self.bidirectional else 1) + direction]
        b_ih, b_hh = (ws[2], ws[3]) if self.bias else (None, None)
        return ws[0], ws[1], b_ih, b_hh, ws[-1] if self.proj_size else None


def _run(mode, args):
    """Both of PyTorch's overloads: (input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
    batch_first) and, for packed data, (data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
    bidirectional)."""
    if len(args) != 9:
        raise TypeError(f"{mode.lower()}() takes 9 positional arguments but {len(args)} were given")
    packed = isinstance(args[1] if mode == "LSTM" else args[2], Tensor)  # a batch_sizes tensor comes second
    if packed:
        data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional = args
        batch_first = False
        x = PackedSequence(data, batch_sizes)
    else:
        x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first = args
        if x.dim() != 3:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{x.dim()}, {x.dim() - 1}], but "
                             "got 2)")
    hx = tuple(hx) if mode == "LSTM" else hx
    proj = mode == "LSTM" and hx[0].shape[-1] != hx[1].shape[-1]
    rnn = _FlatWeightsRNN(mode, params, has_biases, num_layers, dropout, train, bidirectional, batch_first, proj)
    out, hidden = rnn.forward(x, hx)  # (not __call__: module hooks are no business of a function)
    if packed:
        out = out.data
    return (out, *hidden) if mode == "LSTM" else (out, hidden)


def lstm(*args):
    """A multi-layer LSTM over flat weights: returns (output, h_n, c_n); ``hx`` is (h_0, c_0)."""
    return _run("LSTM", args)


def gru(*args):
    """A multi-layer GRU over flat weights: returns (output, h_n)."""
    return _run("GRU", args)


def rnn_tanh(*args):
    """A multi-layer Elman RNN with tanh over flat weights: returns (output, h_n)."""
    return _run("RNN_TANH", args)


def rnn_relu(*args):
    """A multi-layer Elman RNN with ReLU over flat weights: returns (output, h_n)."""
    return _run("RNN_RELU", args)
