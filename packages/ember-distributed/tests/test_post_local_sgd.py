"""Post-local SGD on 2 real ranks, the same job under torch (gloo) and ember: DDP with the post_localSGD hook and a
PostLocalSGDOptimizer whose model averager (periodic or hierarchical) averages the replicas now and then; the
parameters after each step, the averager's step in state_dict, and average_parameters itself must be torch's."""
import importlib
import warnings

import numpy as np
import pytest
from oracle import HAS_TORCH, needs_torch

STEPS = 7
BATCH = 4


def _np(t):
    return t.detach().numpy().copy()


def _model(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(6, 8), lib.nn.Tanh(), lib.nn.Linear(8, 3))


def _batch(lib, step, rank):
    g = lib.Generator().manual_seed(10 * step + rank)  # each rank its own data: the replicas drift apart
    return lib.randn(BATCH, 6, generator=g), lib.randint(0, 3, (BATCH,), generator=g)


def _train(lib, rank, averager, subgroup, start, allreduce=True):
    """DDP + post_localSGD_hook + PostLocalSGDOptimizer(SGD); the parameters after every step."""
    hooks = importlib.import_module(f"{lib.__name__}.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook")
    optim = importlib.import_module(f"{lib.__name__}.distributed.optim")
    model = lib.nn.parallel.DistributedDataParallel(_model(lib))
    state = hooks.PostLocalSGDState(process_group=None, subgroup=subgroup, start_localSGD_iter=start,
                                    post_local_gradient_allreduce=allreduce)
    model.register_comm_hook(state, hooks.post_localSGD_hook)
    opt = optim.PostLocalSGDOptimizer(lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), averager)
    seen = []
    for step in range(STEPS):
        x, y = _batch(lib, step, rank)
        opt.zero_grad()
        lib.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        seen.append([_np(p) for p in model.parameters()])
    return {"params": seen, "hook iter": state.iter, "averager step": averager.step,
            "state_dict step": opt.state_dict()["step"]}


def post_local_sgd_job(rank, world, libname):
    lib = importlib.import_module(libname)
    lib.set_num_threads(1)
    dist = lib.distributed
    dist.init_process_group("gloo")
    averagers = importlib.import_module(f"{libname}.distributed.algorithms.model_averaging.averagers")
    hierarchical = importlib.import_module(
        f"{libname}.distributed.algorithms.model_averaging.hierarchical_model_averager")
    utils = importlib.import_module(f"{libname}.distributed.algorithms.model_averaging.utils")
    out = {}
    alone, _ = dist.new_subgroups(group_size=1)  # after the warm-up, each rank averages its gradients with itself
    out["local SGD"] = _train(lib, rank, averagers.PeriodicModelAverager(period=2, warmup_steps=2), alone, 2)
    out["no gradient allreduce"] = _train(lib, rank, averagers.PeriodicModelAverager(period=3, warmup_steps=1),
                                          None, 1, allreduce=False)
    out["hierarchical"] = _train(lib, rank, hierarchical.HierarchicalModelAverager({1: 1, 3: 2}, warmup_steps=2),
                                 None, 2, allreduce=False)

    # average_parameters: the mean over the ranks, of parameters and of optimizer groups (those with a gradient)
    a, b = lib.nn.Parameter(lib.full((2, 3), float(rank + 1))), lib.nn.Parameter(lib.arange(4.0) * (rank + 1))
    utils.average_parameters(iter([a, b]), None)
    c, d = lib.nn.Parameter(lib.full((2,), 4.0 * rank)), lib.nn.Parameter(lib.full((2,), 4.0 * rank))
    c.grad = lib.ones(2)
    utils.average_parameters_or_parameter_groups([{"params": [c, d]}], dist.group.WORLD)
    out["averaged"] = [_np(t) for t in (a, b, c, d)]

    # the averager's step in the optimizer's state_dict; a dict without it resets the step, with a warning
    model = _model(lib)
    opt = importlib.import_module(f"{libname}.distributed.optim").PostLocalSGDOptimizer(
        lib.optim.SGD(model.parameters(), lr=0.1), averagers.PeriodicModelAverager(period=2, warmup_steps=5))
    opt.averager.step = 4
    sd = opt.state_dict()
    out["state_dict keys"] = sorted(sd)
    opt.averager.step = 9
    opt.load_state_dict(sd)
    out["reloaded step"] = opt.averager.step
    del sd["step"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.load_state_dict(sd)
    out["reset"] = (opt.averager.step, [str(w.message) for w in caught])

    errors = {}
    for name, args in {"period 0": (0,), "negative warm-up": (2, -1)}.items():
        try:
            averagers.PeriodicModelAverager(*args)
        except ValueError as e:
            errors[name] = str(e)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        averagers.PeriodicModelAverager(1)
    errors["period 1"] = [type(w.message).__name__ for w in caught]
    try:
        hierarchical.HierarchicalModelAverager({2: 1})
    except ValueError as e:
        errors["hierarchy too small"] = str(e)
    out["errors"] = errors
    return out


@pytest.fixture(scope="module")
def results(ranks):
    return {lib: ranks(2).run(post_local_sgd_job, lib) for lib in (("torch", "ember") if HAS_TORCH else ("ember",))}


@needs_torch
@pytest.mark.parametrize("case", ["local SGD", "no gradient allreduce", "hierarchical"])
def test_training_matches_torch(results, case):
    for rank in range(2):
        mine, theirs = results["ember"][rank][case], results["torch"][rank][case]
        for key in ("hook iter", "averager step", "state_dict step"):
            assert mine[key] == theirs[key], (case, key)
        for step, (got, want) in enumerate(zip(mine["params"], theirs["params"])):
            for k, (g, w) in enumerate(zip(got, want)):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{case}, rank {rank}, step {step}, "
                                                                                f"parameter {k}")


def test_replicas_drift_and_meet(results):
    """Local SGD indeed: the replicas differ between averagings and agree right after one (warm-up 2, period 2:
    averaged after steps 3, 5 and 7, i.e. at indices 2, 4, 6)."""
    r0, r1 = (results["ember"][rank]["local SGD"]["params"] for rank in range(2))
    for step in range(STEPS):
        same = all(np.allclose(a, b, rtol=1e-6, atol=1e-7) for a, b in zip(r0[step], r1[step]))
        assert same == (step in (0, 1, 2, 4, 6)), step  # steps 1-2: DDP's global averaging of the gradients


def test_average_parameters(results):
    if HAS_TORCH:
        for rank in range(2):
            for got, want in zip(results["ember"][rank]["averaged"], results["torch"][rank]["averaged"]):
                np.testing.assert_array_equal(got, want)
    a, b, c, d = results["ember"][0]["averaged"]
    np.testing.assert_array_equal(a, np.full((2, 3), 1.5))
    np.testing.assert_array_equal(c, [2.0, 2.0])  # averaged (it has a gradient)
    np.testing.assert_array_equal(d, [0.0, 0.0])  # left alone (no gradient)


@needs_torch
@pytest.mark.parametrize("key", ["state_dict keys", "reloaded step", "reset", "errors"])
def test_state_dict_and_errors_match_torch(results, key):
    assert results["ember"][0][key] == results["torch"][0][key]
    mine = results["ember"][0]
    assert mine["reloaded step"] == 4 and mine["reset"][0] == 0 and len(mine["reset"][1]) == 1
    assert len(mine["errors"]) == 4 and mine["errors"]["period 1"] == ["UserWarning"]
