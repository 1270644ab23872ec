"""``PostLocalSGDOptimizer``: a local optimizer followed, at each step, by a model averager (post-local SGD)."""
import warnings

from ember import optim as _optim

__all__ = ["PostLocalSGDOptimizer"]


class PostLocalSGDOptimizer(_optim.Optimizer):
    """Wraps ``optim`` (any optimizer over this rank's replica): ``step()`` runs it, then
    ``averager.average_parameters`` on its parameter groups (e.g. a ``PeriodicModelAverager(period, warmup_steps)``
    averaging the model every ``period`` steps once the warm-up is over). With DDP's ``post_localSGD_hook``, whose
    ``start_localSGD_iter`` should equal the averager's ``warmup_steps``, gradients are averaged globally during the
    warm-up and within subgroups (or not at all) afterwards."""

    def __init__(self, optim, averager):  # no Optimizer.__init__: groups, state and hooks are the wrapped ones'
        self.optim = optim
        self.param_groups = self.optim.param_groups
        self.averager = averager

    @property
    def state(self):
        return self.optim.state

    def __repr__(self):
        return repr(self.optim)

    def state_dict(self):
        """The wrapped optimizer's state_dict plus ``"step"``: the averager's step, so that a reload does not warm
        up again."""
        state_dict = self.optim.state_dict()
        state_dict["step"] = self.averager.step
        return state_dict

    def load_state_dict(self, state_dict):
        """Load into the wrapped optimizer and restore the averager's step (0, with a warning, if missing)."""
        self.optim.load_state_dict(state_dict)
        if "step" in state_dict:
            self.averager.step = state_dict["step"]
        else:
            warnings.warn("Loaded state dict does not contain a step counter for an averager. Setting step counter "
                          "to 0.", stacklevel=2)
            self.averager.step = 0

    def step(self):
        """One step of the wrapped optimizer, then the averager's (which averages or not by its schedule)."""
        self.optim.step()
        self.averager.average_parameters(params=self.param_groups)

    step._hooked = True  # as torch's: no step hooks of its own (the wrapped optimizer runs its own)

    def zero_grad(self, set_to_none=True):
        self.optim.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group):
        self.optim.add_param_group(param_group)
