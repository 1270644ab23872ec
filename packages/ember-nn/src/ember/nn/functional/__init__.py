"""ember.nn.functional: the functional form of every layer, activation and loss."""
from ember import Tensor  # noqa: F401  (PyTorch re-exports it here)

from ._activation import *  # noqa: F403
from ._attention import *  # noqa: F403
from ._layers import *  # noqa: F403
from ._loss import *  # noqa: F403
from ._resample import *  # noqa: F403
