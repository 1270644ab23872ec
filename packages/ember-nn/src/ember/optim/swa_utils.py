"""Weight averaging: an ``AveragedModel`` keeps a running average (SWA, equal weights, or an EMA) of another
model's parameters; ``SWALR`` anneals the learning rate to a constant for the averaging phase; ``update_bn``
recomputes BatchNorm statistics for averaged weights with one pass over the data."""
import itertools
import math
import warnings
from copy import deepcopy

import ember
from ember._tensor import Tensor

from ..nn.modules.module import Module
from ..nn.modules.normalization import _BatchNorm
from .lr_scheduler import LRScheduler, _per_group

__all__ = ["AveragedModel", "SWALR", "get_ema_avg_fn", "get_ema_multi_avg_fn", "get_swa_avg_fn",
           "get_swa_multi_avg_fn", "update_bn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def _inexact(t):
    return t.dtype.is_floating_point or t.dtype.is_complex


def get_ema_multi_avg_fn(decay=0.999):
    """An in-place EMA over lists of tensors: ``ema = decay * ema + (1 - decay) * current``."""
    _check_decay(decay)

    @ember.no_grad()
    def ema_update(ema_param_list, current_param_list, _num_averaged):
        inexact = _inexact(ema_param_list[0])  # (one call has one dtype)
        for p_ema, p_model in zip(ema_param_list, current_param_list):
            if inexact:
                p_ema.lerp_(p_model, 1 - decay)
            else:
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """An in-place equal-weight running mean over lists of tensors (``num_averaged`` models so far)."""

    @ember.no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        if _inexact(averaged_param_list[0]):
            weight = 1 / (num_averaged + 1)
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                p_avg.lerp_(p_model, weight)
            return
        for p_avg, p_model in zip(averaged_param_list, current_param_list):
            diff = p_model - p_avg
            if isinstance(num_averaged, Tensor):
                p_avg.addcdiv_(diff, num_averaged + 1)
            else:
                p_avg.add_(diff, alpha=1.0 / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """The EMA of one tensor, returned: ``decay * ema + (1 - decay) * current``."""
    _check_decay(decay)

    @ember.no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """The equal-weight running mean of one tensor, returned."""

    @ember.no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` (on ``device`` if given) whose parameters ``update_parameters(model)`` averages.

    The first update copies the model's values; later ones apply ``avg_fn(avg, current, n_averaged)`` (which
    returns the new value) to each tensor, or ``multi_avg_fn(avg_list, current_list, n_averaged)`` (in place)
    to each group of tensors of one device and dtype; by default an equal-weight mean (SWA). With
    ``use_buffers`` the buffers are averaged too, otherwise they are copied from ``model``.
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", ember.tensor(0, dtype=ember.long, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _tensors(self, model):
        return itertools.chain(model.parameters(), model.buffers()) if self.use_buffers else model.parameters()

    @ember.no_grad()
    def update_parameters(self, model):
        """Fold ``model``'s current values into the average."""
        pairs = [(p_avg.detach(), p_model.detach().to(p_avg.device))
                 for p_avg, p_model in zip(self._tensors(self.module), self._tensors(model))]
        first = bool(self.n_averaged == 0)
        if first:
            for p_avg, p_model in pairs:
                p_avg.copy_(p_model)
        elif self.multi_avg_fn is not None:
            groups = {}
            for p_avg, p_model in pairs:
                avgs, models = groups.setdefault((p_avg.device, p_avg.dtype), ([], []))
                avgs.append(p_avg)
                models.append(p_model)
            for (device, _), (avgs, models) in groups.items():
                self.multi_avg_fn(avgs, models, self.n_averaged.to(device))
        else:
            avg_fn = self.avg_fn if self.avg_fn is not None else get_swa_avg_fn()
            for p_avg, p_model in pairs:
                p_avg.copy_(avg_fn(p_avg, p_model, self.n_averaged.to(p_avg.device)))
        if not self.use_buffers:
            # the buffers (e.g. BatchNorm statistics) follow the model rather than being averaged
            for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                b_avg.detach().copy_(b_model.detach().to(b_avg.device))
        self.n_averaged += 1


@ember.no_grad()
def update_bn(loader, model, device=None):
    """Recompute the running statistics of ``model``'s BatchNorm layers as plain means over one pass through
    ``loader`` (batches are tensors, or lists/tuples whose first item is the input)."""
    momenta = {m: m.momentum for m in model.modules() if isinstance(m, _BatchNorm)}
    if not momenta:
        return
    for m in momenta:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the batches
    was_training = model.training
    model.train()
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for m, momentum in momenta.items():
        m.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's learning rate from its current value to ``swa_lr`` over ``anneal_epochs`` steps
    ("cos" or "linear"), then holds it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        swa_lrs = [v.clone() if isinstance(v, Tensor) else v for v in _per_group("swa_lr", optimizer, swa_lr)]
        for value, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = value
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        # the rate this schedule started from, recovered from the current one (other schedulers may change it)
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def _fraction(self, step):
        return max(0, min(1, step / max(1, self.anneal_epochs)))

    def get_lr(self):
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=2)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(self._fraction(step - 1))
        alpha = self.anneal_func(self._fraction(step))
        groups = self.optimizer.param_groups
        starts = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, starts)]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
