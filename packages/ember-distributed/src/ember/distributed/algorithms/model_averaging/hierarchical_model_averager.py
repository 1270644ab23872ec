"""Hierarchical model averaging: small subgroups average often, larger ones (up to the whole group) less often."""
import warnings
from collections import OrderedDict

import ember.distributed as dist

from . import averagers, utils

__all__ = ["HierarchicalModelAverager"]


class HierarchicalModelAverager(averagers.ModelAverager):
    """``period_group_size_dict``: ``{period: group_size}`` in increasing period order, the last size that of
    ``process_group``; at a step past ``warmup_steps``, the largest period dividing the step picks the subgroups
    (of ``dist.new_subgroups(group_size)``) that average."""

    def __init__(self, period_group_size_dict=None, warmup_steps=0, process_group=None):
        super().__init__(process_group)
        if not period_group_size_dict:
            raise ValueError("Arg ``period_group_size_dict`` must not be empty.")
        self._periods = list(period_group_size_dict.keys())
        if self._periods[0] <= 0:
            raise ValueError("The minimum period in arg ``period_group_size_dict`` must be a positive value.")
        if self._periods[-1] == 1:
            warnings.warn("When the maximum period in arg ``period_group_size_dict`` is 1, no need to use model "
                          "averaging because the communication cost of all-reducing parameters will be no less "
                          "than the cost of all-reducing gradients by DistributedDataParallel in the backward "
                          "pass. Therefore, only DistributedDataParallel should be used for this case.", stacklevel=2)
        overall = dist.get_world_size(group=self.process_group)
        last = list(period_group_size_dict.values())[-1]
        if last != overall:
            raise ValueError(f"The last value in arg ``period_group_size_dict`` {last} must be equal to the size "
                             f"of arg ``process_group`` {overall}.")
        self.period_process_group_dict = OrderedDict()
        for period, group_size in period_group_size_dict.items():
            if group_size != overall:
                self.period_process_group_dict[period], _ = dist.new_subgroups(group_size=group_size,
                                                                                group=self.process_group)
            else:
                self.period_process_group_dict[period] = self.process_group
        if warmup_steps < 0:
            raise ValueError("Arg ``warmup_steps`` must be a non-negative number.")
        self.warmup_steps = warmup_steps

    def _find_process_group(self):
        """The group of the largest period dividing ``step`` (None: no averaging at this step)."""
        for period in reversed(self._periods):
            if self.step % period == 0:
                return self.period_process_group_dict[period]
        return None

    def average_parameters(self, params):
        """Average ``params`` in the subgroups of this step's period (if any, past the warm-up); count the step."""
        if self.step >= self.warmup_steps:
            group = self._find_process_group()
            if group is not None:
                utils.average_parameters_or_parameter_groups(params, group)
        self.step += 1
