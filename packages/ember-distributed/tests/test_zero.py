"""ZeroRedundancyOptimizer on 2 real ranks, the same job under torch (gloo) and ember: the partition of the
parameters, training with DDP (plain, bucket views, two parameter groups, uneven inputs under Join), the consolidated
state_dict and its round trip, and the errors. ember must match torch, and a plain optimizer in one process."""
import copy
import importlib

import numpy as np
import pytest
from oracle import HAS_TORCH, needs_torch

import ember

STEPS = 4
BATCH = 4  # per rank


def _np(t):
    return t.detach().numpy().copy()


def _model(lib):
    lib.manual_seed(0)
    nn = lib.nn
    return nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 5), nn.Tanh(), nn.Linear(5, 3))


def _batch(lib, step, world):
    g = lib.Generator().manual_seed(100 + step)
    return lib.randn(world * BATCH, 12, generator=g), lib.randint(0, 3, (world * BATCH,), generator=g)


def _step(lib, model, opt, x, y):
    opt.zero_grad()
    lib.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


def _params(model):
    return [_np(p) for p in model.parameters()]


def _state(sd):
    """A state_dict with NumPy arrays for tensors (picklable across the process boundary, comparable)."""
    def conv(v):
        if hasattr(v, "detach"):
            return _np(v)
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(conv(x) for x in v)
        return v
    return conv(sd)


def _train(lib, zero_cls, rank, world, steps=STEPS, groups=False, **kwargs):
    model = _model(lib)
    ddp = lib.nn.parallel.DistributedDataParallel(model)
    if groups:  # the last layer joins later with a learning rate of its own
        params = [p for m in list(model)[:3] for p in m.parameters()]
        opt = zero_cls(params, lib.optim.Adam, lr=0.01, **kwargs)
        opt.add_param_group({"params": list(model[4].parameters()), "lr": 0.03})
    else:
        opt = zero_cls(ddp.parameters(), lib.optim.Adam, lr=0.01, **kwargs)
    for step in range(steps):
        x, y = _batch(lib, step, world)
        _step(lib, ddp, opt, x[rank * BATCH:(rank + 1) * BATCH], y[rank * BATCH:(rank + 1) * BATCH])
    return model, ddp, opt


def _errors(lib, zero_cls):
    out = {}
    p = lib.nn.Parameter(lib.zeros(3))
    for name, make in {"empty": lambda: zero_cls([], lib.optim.SGD, lr=0.1),
                       "tensor": lambda: zero_cls(p, lib.optim.SGD, lr=0.1),
                       "not iterable": lambda: zero_cls(5, lib.optim.SGD, lr=0.1),
                       "mixed dtypes": lambda: zero_cls([p, lib.nn.Parameter(lib.zeros(3, dtype=lib.float64))],
                                                        lib.optim.SGD, lr=0.1),
                       "group without params": lambda: zero_cls([{"lr": 0.1}], lib.optim.SGD, lr=0.1)}.items():
        try:
            make()
            out[name] = "no error"
        except Exception as e:  # noqa: BLE001 - the type and message are what is compared
            out[name] = (type(e).__name__, str(e))
    try:
        zero_cls([p], lib.optim.SGD, lr=0.1).state_dict()
    except RuntimeError as e:
        out["state_dict before consolidation"] = str(e)
    return out


def zero_job(rank, world, libname):
    lib = importlib.import_module(libname)
    lib.set_num_threads(1)
    lib.distributed.init_process_group("gloo")
    zero_cls = importlib.import_module(f"{libname}.distributed.optim").ZeroRedundancyOptimizer
    out = {}

    model, ddp, opt = _train(lib, zero_cls, rank, world)
    out["partition"] = [[tuple(p.shape) for p in g["params"]] for g in opt.optim.param_groups]
    out["local state"] = {i: sorted(s) for i, s in opt.optim.state_dict()["state"].items()}
    out["plain"] = _params(model)
    opt.consolidate_state_dict(to=0)
    sd = opt.state_dict() if rank == 0 else None
    out["state_dict"] = _state(sd)
    # round trip: rank 0's consolidated dict, loaded on every rank into a new optimizer over a copy of the model,
    # which then trains on exactly as the original
    box = [sd]
    lib.distributed.broadcast_object_list(box, src=0)
    twin = _model(lib)
    twin.load_state_dict(model.state_dict())
    twin_ddp = lib.nn.parallel.DistributedDataParallel(twin)
    twin_opt = zero_cls(twin_ddp.parameters(), lib.optim.Adam, lr=0.5)
    # a copy: rank 0's dict holds its own shard's live state tensors (torch's too), which the twin would share
    twin_opt.load_state_dict(copy.deepcopy(box[0]))
    out["loaded lr"] = [g["lr"] for g in twin_opt.optim.param_groups]
    for step in range(STEPS, STEPS + 2):
        x, y = _batch(lib, step, world)
        for m, o in ((ddp, opt), (twin_ddp, twin_opt)):
            _step(lib, m, o, x[rank * BATCH:(rank + 1) * BATCH], y[rank * BATCH:(rank + 1) * BATCH])
    out["continued"], out["twin"] = _params(model), _params(twin)
    twin_opt.consolidate_state_dict(to=1)
    out["twin state_dict on rank 1"] = _state(twin_opt.state_dict()) if rank == 1 else None

    model, _, opt = _train(lib, zero_cls, rank, world, parameters_as_bucket_view=True)
    out["bucket view"] = _params(model)
    # no DDP (every rank computes the whole batch); the last layer's weight freezes after two steps, so the buckets
    # are rebuilt without it
    model = _model(lib)
    opt = zero_cls(model.parameters(), lib.optim.SGD, lr=0.1, momentum=0.9, parameters_as_bucket_view=True)
    for step in range(STEPS):
        if step == 2:
            model[4].weight.requires_grad_(False)
        _step(lib, model, opt, *_batch(lib, step, world))
    out["frozen later"] = _params(model)
    # a learning-rate scheduler changes the wrapper's groups; the local optimizer steps with them
    model = _model(lib)
    opt = zero_cls(model.parameters(), lib.optim.SGD, lr=0.1)
    sched = lib.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for step in range(STEPS):
        _step(lib, model, opt, *_batch(lib, step, world))
        sched.step()
    out["scheduled"] = _params(model) + [np.array([g["lr"] for g in opt.optim.param_groups])]
    model, _, opt = _train(lib, zero_cls, rank, world, groups=True)
    out["two groups"] = _params(model)
    out["two groups partition"] = [[tuple(p.shape) for p in g["params"]] for g in opt.optim.param_groups]

    # uneven inputs: rank r has 2 + r batches; the joined rank keeps stepping its share for the other
    model = _model(lib)
    ddp = lib.nn.parallel.DistributedDataParallel(model)
    opt = zero_cls(ddp.parameters(), lib.optim.SGD, lr=0.1, momentum=0.9)
    join = importlib.import_module(f"{libname}.distributed.algorithms.join").Join
    with join([ddp, opt]):
        for step in range(2 + rank):
            x, y = _batch(lib, step, 1)
            _step(lib, ddp, opt, x, y)
    out["join"] = _params(model)
    # a group of one per rank (on rank 1, group rank 0 is global rank 1): each rank trains alone on its own data
    alone, _ = lib.distributed.new_subgroups(group_size=1)
    model = _model(lib)
    opt = zero_cls(model.parameters(), lib.optim.Adam, process_group=alone, lr=0.01)
    for step in range(STEPS):
        x, y = _batch(lib, step, world)
        _step(lib, model, opt, x[rank * BATCH:(rank + 1) * BATCH], y[rank * BATCH:(rank + 1) * BATCH])
    opt.consolidate_state_dict(to=0)
    out["alone"] = _params(model) + [np.array([opt.world_size, opt.rank, opt.global_rank])]
    out["alone state"] = _state(opt.state_dict())
    out["errors"] = _errors(lib, zero_cls)
    return out


@pytest.fixture(scope="module")
def results(ranks):
    return {lib: ranks(2).run(zero_job, lib) for lib in (("torch", "ember") if HAS_TORCH else ("ember",))}


def _close(got, want, what):
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{what}: parameter {k}")


def _one_process(steps, opt_cls=ember.optim.Adam, groups=False, rank=None):
    """The model trained by a plain optimizer on the whole batches of both ranks (or on those of ``rank``)."""
    model = _model(ember)
    if groups:
        opt = opt_cls([{"params": [p for m in list(model)[:3] for p in m.parameters()]},
                       {"params": list(model[4].parameters()), "lr": 0.03}], lr=0.01)
    else:
        opt = opt_cls(model.parameters(), lr=0.01)
    for step in range(steps):
        x, y = _batch(ember, step, 2)
        if rank is not None:
            x, y = x[rank * BATCH:(rank + 1) * BATCH], y[rank * BATCH:(rank + 1) * BATCH]
        _step(ember, model, opt, x, y)
    return _params(model)


@needs_torch
def test_partition_matches_torch(results):
    for rank in range(2):
        mine, theirs = results["ember"][rank], results["torch"][rank]
        for key in ("partition", "local state", "two groups partition"):
            assert mine[key] == theirs[key], (key, rank)
    # torch's greedy split by size: the 12x16 weight alone on rank 0
    assert results["ember"][0]["partition"] == [[(16, 12)]]


@needs_torch
@pytest.mark.parametrize("case", ["plain", "bucket view", "frozen later", "scheduled", "two groups", "continued",
                                  "twin", "join"])
def test_training_matches_torch(results, case):
    for rank in range(2):
        _close(results["ember"][rank][case], results["torch"][rank][case], f"{case}, rank {rank}")
    _close(results["ember"][0][case], results["ember"][1][case], f"{case}: replicas agree")


@needs_torch
def test_group_of_one_matches_torch(results):
    for rank in range(2):
        _close(results["ember"][rank]["alone"], results["torch"][rank]["alone"], f"alone, rank {rank}")
        _same_state(results["ember"][rank]["alone state"], results["torch"][rank]["alone state"], f"alone, {rank}")


def test_training_matches_one_process(results):
    _close(results["ember"][0]["plain"], _one_process(STEPS), "ZeRO vs one process")
    _close(results["ember"][0]["bucket view"], _one_process(STEPS), "bucket views vs one process")
    _close(results["ember"][0]["two groups"], _one_process(STEPS, groups=True), "two groups vs one process")
    _close(results["ember"][0]["continued"], _one_process(STEPS + 2), "continued vs one process")
    for rank in range(2):
        *params, ranks_seen = results["ember"][rank]["alone"]
        assert ranks_seen.tolist() == [1, 0, rank]
        _close(params, _one_process(STEPS, rank=rank), f"alone on rank {rank} vs one process on its data")


def _same_state(got, want, what):
    assert got["param_groups"] == want["param_groups"], what
    assert got["state"].keys() == want["state"].keys(), what
    for i in want["state"]:
        assert got["state"][i].keys() == want["state"][i].keys(), (what, i)
        for k in want["state"][i]:
            np.testing.assert_allclose(got["state"][i][k], want["state"][i][k], rtol=1e-5, atol=1e-7,
                                       err_msg=f"{what}: state {i} {k}")


@needs_torch
def test_consolidated_state_dict_matches_torch(results):
    mine, theirs = results["ember"], results["torch"]
    assert mine[1]["state_dict"] is None
    _same_state(mine[0]["state_dict"], theirs[0]["state_dict"], "consolidated on rank 0")
    _same_state(mine[1]["twin state_dict on rank 1"], theirs[1]["twin state_dict on rank 1"], "twin, rank 1")
    # the whole optimizer's layout: every parameter's state, indexed as a plain Adam over the model would be
    model = _model(ember)
    plain = ember.optim.Adam(model.parameters(), lr=0.01)
    _step(ember, model, plain, *_batch(ember, 0, 2))
    assert sorted(mine[0]["state_dict"]["state"]) == sorted(plain.state_dict()["state"])
    assert mine[0]["loaded lr"] == [0.01] == theirs[0]["loaded lr"]


@needs_torch
def test_errors_match_torch(results):
    assert results["ember"][0]["errors"] == results["torch"][0]["errors"]


def overlap_job(rank, world):
    import ember.distributed as dist
    from ember.distributed.optim import ZeroRedundancyOptimizer

    dist.init_process_group("gloo")
    try:
        ZeroRedundancyOptimizer([ember.nn.Parameter(ember.zeros(2))], ember.optim.SGD, overlap_with_ddp=True, lr=1)
    except NotImplementedError as e:
        return str(e)


def test_overlap_with_ddp_is_not_implemented(ranks):
    assert all("overlap_with_ddp=True" in msg for msg in ranks(2).run(overlap_job))


# ---- as_functional_optim ----------------------------------------------------------------------------------------
FUNCTIONAL = {"SGD": {"lr": 0.1, "momentum": 0.9}, "Adam": {"lr": 0.01, "amsgrad": True}, "AdamW": {},
              "Adagrad": {"lr": 0.1}, "Adadelta": {}, "RMSprop": {"momentum": 0.5, "centered": True},
              "Rprop": {}, "Adamax": {"weight_decay": 0.1}}


def functional_job(rank, world, libname):
    """No process group: each functional optimiser's attributes and three step_param updates of one parameter."""
    lib = importlib.import_module(libname)
    as_functional_optim = importlib.import_module(f"{libname}.distributed.optim").as_functional_optim
    out = {}
    for name, kwargs in FUNCTIONAL.items():
        f = as_functional_optim(getattr(lib.optim, name), **kwargs)
        flags = {k: v for k, v in vars(f).items() if k not in ("defaults", "state", "param_group")
                 and not k.startswith("_")}
        attrs = (type(f).__name__, f.defaults, flags, repr(f.param_group), hasattr(f, "step_param"))
        p, q = lib.nn.Parameter(lib.linspace(-1.0, 1.0, 5)), lib.nn.Parameter(lib.linspace(1.0, 2.0, 3))
        if name != "Adagrad":  # (torch's makes the state of its parameters at construction only)
            f.param_group["params"].append(p)
            for k in range(3):
                f.step([lib.linspace(0.5, -0.3 * k, 5) ** (k + 1)])
        if hasattr(f, "step_param"):
            for k in range(3):
                f.step_param(q, lib.linspace(0.2, -0.1 * k, 3) ** (k + 1))
        out[name] = (*attrs, sorted(f.state.get(p, {})), sorted(f.state.get(q, {})), _np(p), _np(q))
    try:
        as_functional_optim(lib.optim.LBFGS)
    except ValueError as e:
        out["LBFGS"] = str(e).replace(libname, "LIB")
    try:
        as_functional_optim(lib.optim.SGD).step([lib.ones(1)])
    except ValueError as e:
        out["step"] = str(e)
    return out


@needs_torch
def test_functional_optimizers_match_torch(ranks):
    theirs, mine = (ranks(2).run(functional_job, lib)[0] for lib in ("torch", "ember"))
    assert mine.keys() == theirs.keys()
    for name in FUNCTIONAL:
        *attrs, p, q = mine[name]
        *want_attrs, want_p, want_q = theirs[name]
        assert attrs == want_attrs, name
        np.testing.assert_allclose(p, want_p, rtol=1e-5, atol=1e-7, err_msg=name)
        np.testing.assert_allclose(q, want_q, rtol=1e-5, atol=1e-7, err_msg=name)
    assert mine["LBFGS"] == theirs["LBFGS"] and mine["step"] == theirs["step"]
