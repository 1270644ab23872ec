from .linear import Linear
from .rnn import GRU, LSTM, GRUCell, LSTMCell, RNNCell

__all__ = ["Linear", "LSTM", "GRU", "LSTMCell", "RNNCell", "GRUCell"]
