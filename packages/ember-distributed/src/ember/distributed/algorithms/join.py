"""The generic join context manager: processes that run out of inputs early keep "shadowing" the collective calls
of the processes still training (through each Joinable's JoinHook), so nobody hangs on uneven inputs.

Every iteration, the first Joinable of a process still training calls ``Join.notify_join_context``, which
all-reduces a one; a process that has joined all-reduces a zero instead, learns from the sum how many are still
training, and runs its hooks' ``main_hook`` (the collectives of one iteration) until the sum is zero. Then every
process runs its hooks' ``post_hook``.
"""
import abc
import warnings
from typing import NamedTuple

import ember

__all__ = ["JoinHook", "Joinable", "Join"]


class JoinHook:
    """What a joined process does for one Joinable: ``main_hook()`` once per iteration of the others,
    ``post_hook(is_last_joiner)`` once all have joined. Both do nothing by default."""

    def main_hook(self):
        """Shadow the collectives of one training iteration (forward, backward and optimizer step)."""

    def post_hook(self, is_last_joiner):
        """Run once every process has joined; ``is_last_joiner``: whether this process was among the last."""


class Joinable(abc.ABC):
    """A class that takes part in a Join context: provides ``join_hook(**kwargs)``, ``join_device`` and
    ``join_process_group``, and calls ``Join.notify_join_context(self)`` before its per-iteration collectives."""

    @abc.abstractmethod
    def __init__(self):
        super().__init__()
        self._join_config = _JoinConfig.construct_disabled_join_config()

    @abc.abstractmethod
    def join_hook(self, **kwargs):
        """The JoinHook of this Joinable (``kwargs``: those given to the Join context, shared by all Joinables)."""

    @property
    @abc.abstractmethod
    def join_device(self):
        """The device of the join context's own collectives."""

    @property
    @abc.abstractmethod
    def join_process_group(self):
        """The process group of the join context's own collectives."""


class _JoinConfig(NamedTuple):
    enable: bool
    throw_on_early_termination: bool
    is_first_joinable: bool

    @staticmethod
    def construct_disabled_join_config():
        return _JoinConfig(enable=False, throw_on_early_termination=False, is_first_joinable=False)


class Join:
    """``with Join([ddp_model, optimizer, ...]):`` around a training loop with uneven inputs across processes.

    ``enable=False`` turns it into a no-op; ``throw_on_early_termination=True`` makes every process raise
    RuntimeError as soon as one runs out of inputs. Further keyword arguments go to each Joinable's ``join_hook``."""

    def __init__(self, joinables, enable=True, throw_on_early_termination=False, **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables = joinables
        self._join_hooks = [joinable.join_hook(**kwargs) for joinable in self._joinables]
        self._enable = enable
        self._throw_on_early_termination = throw_on_early_termination
        for k, joinable in enumerate(self._joinables):
            joinable._join_config = _JoinConfig(enable=enable, throw_on_early_termination=throw_on_early_termination,
                                                is_first_joinable=k == 0)
        process_group = device = None
        for joinable in self._joinables:
            if process_group is None:
                process_group = joinable.join_process_group
            elif process_group != joinable.join_process_group:
                raise ValueError("Using join context manager with multiple process groups")
            if device is None:
                device = joinable.join_device
        self._process_group, self._device = process_group, device
        self._rank = _dist().get_rank(process_group)

    def __enter__(self):
        pass

    def __exit__(self, type, value, traceback):
        """Shadow the others' iterations until every process has joined, then run the post-hooks; an exception
        raised inside the context propagates as is."""
        if not self._enable or type:
            return
        all_joined, is_last_joiner, i = False, True, 0
        threshold = 1000
        while not all_joined:
            if i > threshold:
                warnings.warn(f"Detected uneven input skew of greater than {threshold}. This means that rank "
                              f"{self._rank} has at least {threshold} fewer inputs than other currently-active "
                              "ranks. This level of skew could lead to performance degradation during training.",
                              stacklevel=2)
            if self._get_num_nonjoined_procs() == 0:
                all_joined = True
            else:
                if self._throw_on_early_termination:
                    self._notify_procs_to_terminate()
                for hook in self._join_hooks:
                    hook.main_hook()
                is_last_joiner = False
                i += 1
        for hook in self._join_hooks:
            hook.post_hook(is_last_joiner)

    def _get_num_nonjoined_procs(self):
        count = ember.zeros(1, device=self._device)
        _dist().all_reduce(count, group=self._process_group)
        return count.item()

    def _notify_procs_to_terminate(self):
        ones = ember.ones(1, device=self._device)
        _dist().all_reduce(ones, group=self._process_group)
        raise RuntimeError(f"Rank {self._rank} exhausted all inputs.")

    @staticmethod
    def notify_join_context(joinable):
        """Called by a Joinable before its per-iteration collectives: tells joined processes that this one still
        trains (an all_reduce of a one; its Work is returned, for the first Joinable of an enabled context, else
        None). With throw_on_early_termination, raises RuntimeError on every process once one has joined."""
        if not hasattr(joinable, "_join_config"):
            raise AssertionError(f"Check that the {type(joinable)} constructor calls the ``Joinable`` constructor")
        config = joinable._join_config
        if not config.is_first_joinable or not config.enable:
            return None
        device, group = joinable.join_device, joinable.join_process_group
        work = _dist().all_reduce(ember.ones(1, device=device), group=group, async_op=True)
        if config.throw_on_early_termination:
            zeros = ember.zeros(1, device=device)
            _dist().all_reduce(zeros, group=group)
            if zeros.item():
                raise RuntimeError("Detected at least one rank that exhausted inputs. Throwing across all ranks.")
        return work


def _dist():
    import ember.distributed as dist
    return dist
