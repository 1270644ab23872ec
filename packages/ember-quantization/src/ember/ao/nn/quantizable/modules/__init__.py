from .rnn import LSTM, LSTMCell

__all__ = ["LSTM", "LSTMCell"]
