"""Learning-rate schedulers against PyTorch: the lr (and cycled momentum) sequences over many steps."""
import math
import warnings

import pytest
import torch

import ember
from ember.optim import lr_scheduler as els


def _opt(lib, kind="sgd", groups=2):
    params = [lib.nn.Parameter(lib.zeros(2)) for _ in range(groups)]
    pg = [{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(params)]
    if kind == "sgd":
        return lib.optim.SGD(pg, lr=0.1, momentum=0.9)
    return lib.optim.Adam(pg, lr=0.1)


SCHEDULES = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=7, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[3, 10, 10, 25], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.93),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.25, total_iters=6),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=12),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=20, power=2.0),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=9, eta_min=0.001),
    "WarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2, eta_min=0.01),
    "WarmRestarts1": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=4),
    "LambdaLR": lambda m, o: m.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1 / (1 + e)]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lambda e: 0.95),
    "OneCycleLR": lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=60),
    "OneCycleLR3": lambda m, o: m.OneCycleLR(o, max_lr=0.8, epochs=6, steps_per_epoch=10, three_phase=True,
                                             anneal_strategy="linear", pct_start=0.25),
    "CyclicLR": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4, step_size_down=6),
    "CyclicLR2": lambda m, o: m.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=5, mode="triangular2"),
    "CyclicLRexp": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3, mode="exp_range",
                                           gamma=0.97),
    "SequentialLR": lambda m, o: m.SequentialLR(o, [m.LinearLR(o, start_factor=0.1, total_iters=5),
                                                    m.ExponentialLR(o, gamma=0.9),
                                                    m.CosineAnnealingLR(o, T_max=10)], milestones=[5, 20]),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler([m.ConstantLR(o, factor=0.5, total_iters=4),
                                                         m.ExponentialLR(o, gamma=0.9)]),
}


def _trace(lib, name, kind, steps=60):
    mod = lib.optim.lr_scheduler
    opt = _opt(lib, kind)
    sched = SCHEDULES[name](mod, opt)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(steps):
            out.append(([g["lr"] for g in opt.param_groups], [g.get("momentum") for g in opt.param_groups],
                        [g.get("betas") for g in opt.param_groups], list(sched.get_last_lr())))
            opt.step()
            sched.step()
    return out, sched


def _close(a, b):
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
    elif a is None or b is None:
        assert a is b
    else:
        assert a == pytest.approx(b, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_lr_sequence_matches_torch(name, kind):
    steps = 60 if name.startswith("OneCycle") else 80
    e, _ = _trace(ember, name, kind, steps)
    t, _ = _trace(torch, name, kind, steps)
    assert len({round(x[0][0], 12) for x in e}) >= 2  # the schedule does move the rate
    _close(e, t)


@pytest.mark.parametrize("name", ["StepLR", "ExponentialLR", "CosineAnnealingLR", "OneCycleLR", "CyclicLR",
                                  "SequentialLR", "LambdaLR", "WarmRestarts"])
def test_state_dict_resume_continues_the_sequence(name):
    full, _ = _trace(ember, name, "sgd", 40)
    part, sched = _trace(ember, name, "sgd", 15)
    opt2 = _opt(ember, "sgd")
    sched2 = SCHEDULES[name](els, opt2)  # the usual resume order: build both, then load both
    opt2.load_state_dict(sched.optimizer.state_dict())
    sched2.load_state_dict(sched.state_dict())
    for g in opt2.param_groups:  # the optimizer's groups hold the current rate
        assert "initial_lr" in g
    rest = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(25):
            opt2.step()
            sched2.step()
            rest.append([g["lr"] for g in opt2.param_groups])
    _close(rest[:-1], [x[0] for x in full[16:40]])


def test_closed_form_epochs_match_torch():
    for name in ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR", "ConstantLR",
                 "PolynomialLR", "WarmRestarts"]:
        seqs = []
        for lib in (ember, torch):
            opt = _opt(lib)
            sched = SCHEDULES[name](lib.optim.lr_scheduler, opt)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                seq = []
                for epoch in [3, 7, 8, 15, 2, 30, 4.5 if name == "WarmRestarts" else 4]:
                    sched.step(epoch)
                    seq.append(sched.get_last_lr())
            seqs.append(seq)
        _close(*seqs)


@pytest.mark.parametrize("kw", [dict(), dict(mode="max", patience=2, cooldown=2, threshold_mode="abs",
                                             threshold=0.05, factor=0.5, min_lr=[0.02, 0.01]),
                                dict(patience=0, eps=0.05, factor=0.3)])
def test_reduce_lr_on_plateau_matches_torch(kw):
    metric = [1.0, 0.9, 0.95, 0.95, 0.96, 0.97, 0.89, 0.9, 0.9, 0.9] * 5 + [0.5 + 0.01 * math.sin(i) for i in
                                                                            range(40)]
    seqs = []
    for lib in (ember, torch):
        opt = _opt(lib)
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
        seq = []
        for m in metric:
            sched.step(m)
            seq.append((sched.get_last_lr(), sched.num_bad_epochs, sched.cooldown_counter, sched.best))
        seqs.append(seq)
    _close(*seqs)
    assert seqs[0][-1][0] != seqs[0][0][0]


def test_errors():
    opt = _opt(ember)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        els.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(KeyError, match="initial_lr"):
        els.StepLR(_opt(ember), step_size=2, last_epoch=3)
    with pytest.raises(ValueError, match="total_steps"):
        els.OneCycleLR(opt, max_lr=0.1)
    sched = els.OneCycleLR(_opt(ember), max_lr=0.1, total_steps=3)
    for _ in range(3):
        sched.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        sched.step()
    with pytest.raises(ValueError, match="one more than the number of milestone"):
        els.SequentialLR(opt, [els.StepLR(opt, 2)], milestones=[3])
    with pytest.raises(ValueError, match="momentum or beta1"):
        els.CyclicLR(ember.optim.Adagrad([ember.nn.Parameter(ember.ones(1))]), 0.1, 1.0)
    assert els._LRScheduler is els.LRScheduler
