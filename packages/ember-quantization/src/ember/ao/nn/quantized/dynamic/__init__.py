"""ember.ao.nn.quantized.dynamic: dynamically quantized Linear, LSTM, GRU, the RNN cells and convolutions (float32 in
and out)."""
from .modules import *  # noqa: F401,F403
from .modules import __all__  # noqa: F401
