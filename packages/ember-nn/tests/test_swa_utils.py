"""ember.optim.swa_utils against PyTorch: averaging functions, AveragedModel, SWALR, update_bn, a SWA loop."""
import math
import warnings

import numpy as np
import pytest
import torch
from _torch_compare import assert_same

import ember


def _net(lib):
    return lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.BatchNorm1d(8), lib.nn.ReLU(), lib.nn.Linear(8, 2))


def _pair():
    torch.manual_seed(0)
    t = _net(torch)
    e = _net(ember)
    e.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t.state_dict().items()})
    return e, t


def _same_state(e_mod, t_mod, rtol=1e-6, atol=1e-7):
    es, ts = e_mod.state_dict(), t_mod.state_dict()
    assert list(es) == list(ts)
    for k in ts:
        assert_same(es[k], ts[k], rtol, atol)


def _data(n=6):
    rng = np.random.default_rng(1)
    return [(rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((5, 2)).astype(np.float32))
            for _ in range(n)]


@pytest.mark.parametrize("anneal", ["cos", "linear"])
def test_swa_training_loop_matches_torch(anneal):
    e_model, t_model = _pair()
    runs = {}
    for lib, model in ((ember, e_model), (torch, t_model)):
        swa = lib.optim.swa_utils
        opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
        swa_model = swa.AveragedModel(model)
        swa_sched = swa.SWALR(opt, swa_lr=0.05, anneal_epochs=3, anneal_strategy=anneal)
        lrs = []
        for epoch in range(8):
            for x, y in _data():
                opt.zero_grad()
                lib.nn.functional.mse_loss(model(lib.tensor(x)), lib.tensor(y)).backward()
                opt.step()
            if epoch >= 3:
                swa_model.update_parameters(model)
                swa_sched.step()
            else:
                sched.step()
            lrs.append(opt.param_groups[0]["lr"])
        swa.update_bn([lib.tensor(x) for x, _ in _data()], swa_model)
        swa_model.eval()
        runs[lib.__name__] = swa_model, lrs, swa_model(lib.tensor(_data(1)[0][0]))
    (e_swa, e_lrs, e_out), (t_swa, t_lrs, t_out) = runs["ember"], runs["torch"]
    np.testing.assert_allclose(e_lrs, t_lrs, rtol=1e-12)
    assert int(e_swa.n_averaged) == int(t_swa.n_averaged) == 5
    _same_state(e_swa, t_swa, rtol=2e-5, atol=2e-6)
    assert_same(e_out, t_out, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("kind", ["swa", "ema", "swa_multi", "ema_multi", "custom"])
@pytest.mark.parametrize("use_buffers", [False, True])
def test_averaged_model_updates(kind, use_buffers):
    e_model, t_model = _pair()
    made = {}
    for lib, model in ((ember, e_model), (torch, t_model)):
        swa = lib.optim.swa_utils
        kwargs = {"swa": {}, "ema": {"avg_fn": swa.get_ema_avg_fn(0.9)},
                  "swa_multi": {"multi_avg_fn": swa.get_swa_multi_avg_fn()},
                  "ema_multi": {"multi_avg_fn": swa.get_ema_multi_avg_fn(0.8)},
                  "custom": {"avg_fn": lambda a, c, n: 0.5 * a + 0.25 * c * n}}[kind]
        avg = swa.AveragedModel(model, use_buffers=use_buffers, **kwargs)
        assert avg.n_averaged.dtype == lib.long
        try:
            for step in range(4):
                with lib.no_grad():
                    for p in model.parameters():
                        p.mul_(0.7).add_(0.1 * (step + 1))
                model.train()
                model(lib.tensor(_data(1)[0][0]))  # moves BatchNorm's running statistics
                avg.update_parameters(model)
        except RuntimeError as error:  # the SWA multi-tensor mean refuses integer buffers (addcdiv)
            made[lib.__name__] = error
        else:
            made[lib.__name__] = avg
    if kind == "swa_multi" and use_buffers:
        assert isinstance(made["ember"], RuntimeError) and isinstance(made["torch"], RuntimeError)
        return
    _same_state(made["ember"], made["torch"])
    assert not any(p.requires_grad is False for p in made["ember"].parameters())


def test_averaged_model_state_dict_forward_and_device():
    e_model, t_model = _pair()
    e_avg, t_avg = ember.optim.swa_utils.AveragedModel(e_model, device="cpu"), \
        torch.optim.swa_utils.AveragedModel(t_model, device="cpu")
    assert list(e_avg.state_dict()) == list(t_avg.state_dict())
    assert e_avg.module is not e_model and e_avg.module[0].weight is not e_model[0].weight
    x = _data(1)[0][0]
    e_avg.eval()
    t_avg.eval()
    assert_same(e_avg(ember.tensor(x)), t_avg(torch.tensor(x)), rtol=1e-5, atol=1e-6)
    with pytest.raises(AssertionError):
        ember.optim.swa_utils.AveragedModel(e_model, avg_fn=lambda *a: a[0], multi_avg_fn=lambda *a: None)


def test_avg_fns_values_and_errors():
    swa = ember.optim.swa_utils
    tswa = torch.optim.swa_utils
    a, c = np.arange(6, dtype=np.float64).reshape(2, 3), np.full((2, 3), 4.0)
    for n in (3, torch.tensor(3)):
        en = ember.tensor(3) if isinstance(n, torch.Tensor) else n
        assert_same(swa.get_swa_avg_fn()(ember.tensor(a), ember.tensor(c), en),
                     tswa.get_swa_avg_fn()(torch.tensor(a), torch.tensor(c), n))
        ea, ta = [ember.tensor(a)], [torch.tensor(a)]
        swa.get_swa_multi_avg_fn()(ea, [ember.tensor(c)], en)
        tswa.get_swa_multi_avg_fn()(ta, [torch.tensor(c)], n)
        assert_same(ea[0], ta[0])
    assert_same(swa.get_ema_avg_fn(0.75)(ember.tensor(a), ember.tensor(c), 1),
                tswa.get_ema_avg_fn(0.75)(torch.tensor(a), torch.tensor(c), 1))
    ea, ta = [ember.tensor(a), ember.tensor(c)], [torch.tensor(a), torch.tensor(c)]
    swa.get_ema_multi_avg_fn(0.75)(ea, [ember.tensor(c), ember.tensor(a)], 1)
    tswa.get_ema_multi_avg_fn(0.75)(ta, [torch.tensor(c), torch.tensor(a)], 1)
    assert_same(ea, ta)
    # integer tensors take the non-lerp branch
    ei, ti = [ember.tensor([10, 20])], [torch.tensor([10, 20])]
    swa.get_ema_multi_avg_fn(0.5)(ei, [ember.tensor([0, 4])], 1)
    tswa.get_ema_multi_avg_fn(0.5)(ti, [torch.tensor([0, 4])], 1)
    assert_same(ei, ti)
    for bad in (-0.1, 1.5):
        for make in ("get_ema_avg_fn", "get_ema_multi_avg_fn"):
            with pytest.raises(ValueError, match="decay"):
                getattr(swa, make)(bad)
            with pytest.raises(ValueError):
                getattr(tswa, make)(bad)


def _lr_trace(lib, steps=12, **kwargs):
    p = lib.nn.Parameter(lib.zeros(2))
    opt = lib.optim.SGD([{"params": [p], "lr": 0.5}, {"params": [lib.nn.Parameter(lib.zeros(1))], "lr": 0.2}])
    sched = lib.optim.swa_utils.SWALR(opt, **kwargs)
    out = [sched.get_last_lr()]
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr())
    return out, sched


@pytest.mark.parametrize("kwargs", [dict(swa_lr=0.05), dict(swa_lr=[0.05, 0.01], anneal_epochs=4),
                                    dict(swa_lr=0.1, anneal_epochs=0), dict(swa_lr=0.3, anneal_strategy="linear",
                                                                            anneal_epochs=5)])
def test_swalr_schedule(kwargs):
    e, e_sched = _lr_trace(ember, **kwargs)
    t, t_sched = _lr_trace(torch, **kwargs)
    np.testing.assert_allclose(e, t, rtol=1e-13)
    state = e_sched.state_dict()
    assert "anneal_func" not in state and "optimizer" not in state
    assert {"_anneal_strategy", "anneal_epochs", "base_lrs", "last_epoch"} <= set(state) & set(t_sched.state_dict())
    e_sched.load_state_dict(state)
    assert e_sched.anneal_func(0.5) == pytest.approx(0.5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        e_sched.get_lr()
    assert any("get_last_lr" in str(w.message) for w in caught)


def test_swalr_errors():
    for lib in (ember, torch):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.zeros(1))], lr=0.1)
        with pytest.raises(ValueError, match="anneal_strategy"):
            lib.optim.swa_utils.SWALR(opt, swa_lr=0.1, anneal_strategy="exp")
        with pytest.raises(ValueError, match="anneal_epochs"):
            lib.optim.swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=-1)
        with pytest.raises(ValueError, match="anneal_epochs"):
            lib.optim.swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=2.5)
        with pytest.raises(ValueError, match="same length"):
            lib.optim.swa_utils.SWALR(opt, swa_lr=[0.1, 0.2])
    assert ember.optim.swa_utils.SWALR._cosine_anneal(1.0) == (1 - math.cos(math.pi)) / 2


def test_update_bn_matches_torch_and_keeps_mode():
    e_model, t_model = _pair()
    batches = [x for x, _ in _data()]
    e_model.eval()
    t_model.eval()
    ember.optim.swa_utils.update_bn([(ember.tensor(x), 0) for x in batches], e_model, device="cpu")
    torch.optim.swa_utils.update_bn([(torch.tensor(x), 0) for x in batches], t_model, device="cpu")
    assert not e_model.training and e_model[1].momentum == 0.1
    _same_state(e_model, t_model, rtol=1e-5, atol=1e-6)
    # a model without BatchNorm is left alone, and the loader is not even iterated
    lin = ember.nn.Linear(2, 2)
    ember.optim.swa_utils.update_bn(iter(()), lin)


def test_swalr_after_a_milestone_of_sequential_lr():
    # the usual schedule: cosine annealing, then SWALR from its milestone (restarted there without a step count)
    out = []
    for lib in (ember, torch):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.zeros(2))], lr=0.5)
        sched = lib.optim.lr_scheduler.SequentialLR(
            opt, [lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5),
                  lib.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=3)], milestones=[5])
        lrs = []
        for _ in range(12):
            opt.step()
            sched.step()
            lrs.append(opt.param_groups[0]["lr"])
        out.append(lrs)
    np.testing.assert_allclose(out[0], out[1], rtol=1e-13)
