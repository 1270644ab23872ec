"""Model averagers: run after the optimizer step, they average the parameters over the ranks now and then."""
import abc
import warnings

import ember.distributed as dist

from . import utils

__all__ = ["ModelAverager", "PeriodicModelAverager"]


class ModelAverager(abc.ABC):
    """Base class: ``process_group`` (None: the default group) to average over; ``step`` counts the calls of
    ``average_parameters``."""

    def __init__(self, process_group=None):
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.step = 0

    @abc.abstractmethod
    def average_parameters(self, params):
        raise NotImplementedError


class PeriodicModelAverager(ModelAverager):
    """Average every ``period`` steps once ``warmup_steps`` steps are done (post-local SGD: DDP averages the
    gradients in small subgroups, or not at all, and the model is averaged over the whole group from time to
    time)."""

    def __init__(self, period, warmup_steps=0, process_group=None):
        super().__init__(process_group)
        if warmup_steps < 0:
            raise ValueError("Arg ``warmup_steps`` must be a non-negative number.")
        self.warmup_steps = warmup_steps
        if period < 1:
            raise ValueError("Arg ``period`` must be a positive value.")
        if period == 1:
            warnings.warn("When period is 1, no need to use model averaging because the communication cost of "
                          "all-reducing parameters will be no less than the cost of all-reducing gradients by "
                          "DistributedDataParallel in the backward pass. Therefore, only DistributedDataParallel "
                          "should be used for this case.", stacklevel=2)
        self.period = period

    def average_parameters(self, params):
        """Average ``params`` (a model's parameters or an optimizer's groups; those with a gradient) if this step
        is past the warm-up and a multiple of ``period`` from its end; count the step."""
        if self.step >= self.warmup_steps and (self.step - self.warmup_steps) % self.period == 0:
            utils.average_parameters_or_parameter_groups(params, self.process_group)
        self.step += 1
