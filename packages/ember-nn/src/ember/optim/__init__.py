"""ember.optim: optimisers (SGD, the Adam family, Adagrad, RMSprop, ...) and ``lr_scheduler``."""
from ember._extensions import lazy_submodule

from .adam import Adam, Adamax, AdamW, NAdam, RAdam
from .algorithms import ASGD, Adadelta, Adafactor, Adagrad, RMSprop, Rprop
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = ["ASGD", "Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "Adamax", "LBFGS", "NAdam", "Optimizer",
           "RAdam", "RMSprop", "Rprop", "SGD", "SparseAdam", "lr_scheduler"]


def __getattr__(name):
    """``lr_scheduler`` and ``swa_utils`` load on first access."""
    return lazy_submodule(__name__, name)
