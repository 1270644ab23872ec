"""A backward pass and optimizer steps over inf and overflowing gradients raise no NumPy floating-point warning
(ember._quiet): under a GradScaler an inf gradient is routine, and PyTorch computes it silently."""
import warnings

import pytest

import ember
import ember.nn as nn

OPTIMIZERS = [ember.optim.SGD, ember.optim.Adam, ember.optim.AdamW, ember.optim.RMSprop, ember.optim.Adagrad,
              ember.optim.Adadelta, ember.optim.NAdam, ember.optim.RAdam, ember.optim.Adamax, ember.optim.ASGD,
              ember.optim.Rprop]


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("opt_cls", OPTIMIZERS, ids=lambda c: c.__name__)
def test_backward_and_step_over_infs_are_quiet(opt_cls, foreach):
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    opt = opt_cls(model.parameters(), lr=0.1, foreach=foreach)
    x = ember.full((16, 4), 1e38)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        overflowed = False
        for _ in range(2):
            (model(x) * 3e38).sum().backward()  # (gradients summed over the batch overflow to inf)
            overflowed |= not all(bool(ember.isfinite(p.grad).all()) for p in model.parameters())
            opt.step()
            opt.zero_grad()
    assert overflowed
