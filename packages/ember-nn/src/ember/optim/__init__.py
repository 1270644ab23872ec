"""ember.optim: optimisers (SGD, the Adam family, Adagrad, RMSprop, ...) and ``lr_scheduler``."""
from ember._extensions import lazy_submodule

from .adam import Adam, Adamax, AdamW, NAdam, RAdam
from .algorithms import ASGD, Adadelta, Adafactor, Adagrad, RMSprop, Rprop
from .lbfgs import LBFGS
from .muon import Muon
from .optimizer import Optimizer
from .sgd import SGD
from .sparse_adam import SparseAdam
from .swap_in import swap_in_optimizer_params_and_state

__all__ = ["ASGD", "Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "Adamax", "LBFGS", "Muon", "NAdam",
           "Optimizer", "RAdam", "RMSprop", "Rprop", "SGD", "SparseAdam", "lr_scheduler",
           "swap_in_optimizer_params_and_state"]


def __getattr__(name):
    """``lr_scheduler`` and ``swa_utils`` load on first access."""
    return lazy_submodule(__name__, name)
