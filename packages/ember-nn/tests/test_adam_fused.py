"""Adam's step over all parameters at once (moments in two flat arrays, the state tensors views into them)
against PyTorch: through a state_dict reload mid-run, parameters that miss a gradient for a step (their step
counts then differ: the step per parameter), mixed dtypes, and 0-d parameters."""
import numpy as np
import pytest
import torch

import ember

SHAPES = [(3, 4), (5,), (), (2, 2, 2)]


def _run(lib, steps, reload_at=None, skip=None, dtypes=None):
    rng = np.random.default_rng(0)
    dtypes = dtypes or [np.float32] * len(SHAPES)
    ps = [lib.tensor(rng.standard_normal(s).astype(d), requires_grad=True) for s, d in zip(SHAPES, dtypes)]
    opt = lib.optim.Adam(ps, lr=0.05)
    for i in range(steps):
        opt.zero_grad()
        used = [p for j, p in enumerate(ps) if (i, j) != skip]
        sum(((p * p).sum() * (j + 1)).double() for j, p in enumerate(used)).backward()
        opt.step()
        if i == reload_at:
            sd = opt.state_dict()
            opt = lib.optim.Adam(ps, lr=0.05)
            opt.load_state_dict(sd)
    return [p.detach().numpy() for p in ps], opt


@pytest.mark.parametrize("reload_at, skip, dtypes", [
    (None, None, None),
    (2, None, None),
    (None, (1, 2), None),
    (None, None, [np.float32, np.float64, np.float32, np.float32]),
], ids=["plain", "reload", "skip", "mixed"])
def test_trajectory_matches_torch(reload_at, skip, dtypes):
    theirs, _ = _run(torch, 6, reload_at, skip, dtypes)
    ours, _ = _run(ember, 6, reload_at, skip, dtypes)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_state_tensors_are_live_views():
    _, opt = _run(ember, 3)
    moments = [opt.state[p]["exp_avg"] for p in opt.param_groups[0]["params"]]
    assert all(m._data.base is moments[0]._data.base for m in moments)
    before = [m.numpy().copy() for m in moments]
    for p in opt.param_groups[0]["params"]:
        p.grad = ember.ones_like(p)
    opt.step()
    assert all(not np.array_equal(m.numpy(), b) for m, b in zip(moments, before))
