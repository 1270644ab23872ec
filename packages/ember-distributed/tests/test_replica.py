"""ember.distributed.replica (torch_xla's xla_model API) against values computed by hand: the collectives, groups,
point-to-point, rendezvous, gradient averaging and the launcher on 2 and 4 real ranks; device helpers, step
closures, RNG state, saving and the trackers in this process (a world of one)."""
import io
import os

import numpy as np
import pytest

import ember
import ember.distributed.replica as xm
from ember.multiprocessing import ProcessRaisedException

WORLDS = (2, 4)


def _np(t):
    return t.detach().numpy().copy()


# ---- collectives on every replica ------------------------------------------------------------------------------------
def _collectives(rank, world):
    out = {"ordinal": (xm.get_ordinal(), xm.get_local_ordinal(), xm.xrt_world_size(), xm.is_master_ordinal(),
                       xm.is_master_ordinal(local=False))}
    t = ember.tensor([rank + 1.0, 2.0 * (rank + 1)])
    reduced = xm.all_reduce(xm.REDUCE_SUM, t, scale=0.5)
    out["all_reduce"] = (_np(reduced), _np(t), reduced is t)
    # a list is reduced in place, one call per dtype: a non-contiguous view and an int tensor among floats
    base = ember.arange(6.0).reshape(2, 3) + rank
    items = [ember.full((2, 2), rank + 1.0), ember.tensor([rank, 1]), base.t(), ember.tensor(float(rank))]
    returned = xm.all_reduce(xm.REDUCE_SUM, items)
    out["all_reduce_list"] = ([_np(x) for x in items], returned is items)
    out["ops"] = {name: _np(xm.all_reduce(op, ember.tensor([rank + 1.0, 3.0 - rank])))
                  for name, op in (("mul", xm.REDUCE_MUL), ("min", xm.REDUCE_MIN), ("max", xm.REDUCE_MAX))}
    out["bits"] = (_np(xm.all_reduce(xm.REDUCE_AND, ember.tensor([rank + 1, 7]))),
                   _np(xm.all_reduce(xm.REDUCE_OR, ember.tensor([1 << rank, 0]))),
                   _np(xm.all_reduce(xm.REDUCE_AND, ember.tensor([True, rank == 0]))))
    value = ember.full((2, 3), float(rank)) + ember.arange(3.0)
    out["all_gather"] = (_np(xm.all_gather(value)), _np(xm.all_gather(value, dim=1)),
                         _np(xm.all_gather(value, dim=-1)))
    into = ember.empty(2 * world, 3)
    got = xm.all_gather(value, output=into)
    listed = xm.all_gather([value, ember.tensor([rank])], pin_layout=False)
    out["all_gather_more"] = (got is into, _np(into), [_np(x) for x in listed])
    x = ember.arange(2.0 * world) + rank
    y = ember.arange(3.0 * world).reshape(3, world) * (rank + 1)
    out["reduce_scatter"] = (_np(xm.reduce_scatter(xm.REDUCE_SUM, x, 2.0, 0, world)),
                             _np(xm.reduce_scatter(xm.REDUCE_MAX, y, 1.0, 1, world)))
    blocks = ember.stack([ember.tensor([rank * 10.0 + j, -(rank * 10.0 + j)]) for j in range(world)])
    out["all_to_all"] = _np(xm.all_to_all(blocks, 0, 1, world))
    shared = [ember.full((2,), float(rank)), ember.tensor([rank, rank])]
    xm.collective_broadcast(shared, root_ordinal=1)
    out["broadcast"] = [_np(s) for s in shared]
    ring = [[i, (i + 1) % world] for i in range(world)]
    out["permute"] = (_np(xm.collective_permute(ember.tensor([rank * 1.0]), ring)),
                      _np(xm.collective_permute(ember.tensor([rank + 5.0]), [[0, 1]])))
    if rank == 0:
        sent = ember.tensor([7.0, 8.0])
        out["p2p"] = xm.send(sent, 1) is sent
    elif rank == 1:
        into = ember.zeros(2)
        out["p2p"] = (xm.recv(into, 0) is into, _np(into))
    return out


@pytest.mark.parametrize("world", WORLDS)
def test_collectives(ranks, world):
    results = ranks(world).run(_collectives)
    total = world * (world + 1) / 2
    for rank, out in enumerate(results):
        assert out["ordinal"] == (rank, rank, world, rank == 0, rank == 0)
        reduced, original, same = out["all_reduce"]
        np.testing.assert_array_equal(reduced, [total / 2, total])
        np.testing.assert_array_equal(original, [rank + 1, 2 * (rank + 1)])  # a tensor's input is unchanged
        assert not same
        items, same = out["all_reduce_list"]
        assert same
        np.testing.assert_array_equal(items[0], np.full((2, 2), total))
        np.testing.assert_array_equal(items[1], [world * (world - 1) / 2, world])
        assert items[1].dtype == np.int64
        np.testing.assert_array_equal(items[2], (np.arange(6.0).reshape(2, 3) * world + world * (world - 1) / 2).T)
        np.testing.assert_array_equal(items[3], world * (world - 1) / 2)
        ops = out["ops"]
        np.testing.assert_array_equal(ops["mul"], [np.prod(np.arange(1, world + 1)), np.prod(3.0 - np.arange(world))])
        np.testing.assert_array_equal(ops["min"], [1, 3 - (world - 1)])
        np.testing.assert_array_equal(ops["max"], [world, 3])
        band, bor, land = out["bits"]
        np.testing.assert_array_equal(band, [np.bitwise_and.reduce(np.arange(1, world + 1)), 7])
        np.testing.assert_array_equal(bor, [(1 << world) - 1, 0])
        np.testing.assert_array_equal(land, [True, False])
        pieces = [np.full((2, 3), float(q)) + np.arange(3.0) for q in range(world)]
        dim0, dim1, dim_last = out["all_gather"]
        np.testing.assert_array_equal(dim0, np.concatenate(pieces, 0))
        np.testing.assert_array_equal(dim1, np.concatenate(pieces, 1))
        np.testing.assert_array_equal(dim_last, np.concatenate(pieces, 1))
        same, into, listed = out["all_gather_more"]
        assert same
        np.testing.assert_array_equal(into, np.concatenate(pieces, 0))
        np.testing.assert_array_equal(listed[0], np.concatenate(pieces, 0))
        np.testing.assert_array_equal(listed[1], np.arange(world))
        rs0, rs1 = out["reduce_scatter"]
        summed = sum(np.arange(2.0 * world) + q for q in range(world)) * 2.0
        np.testing.assert_array_equal(rs0, summed[2 * rank:2 * rank + 2])
        np.testing.assert_array_equal(rs1, (np.arange(3.0 * world).reshape(3, world) * world)[:, rank:rank + 1])
        np.testing.assert_array_equal(out["all_to_all"],
                                      [sum(([q * 10.0 + rank, -(q * 10.0 + rank)] for q in range(world)), [])])
        np.testing.assert_array_equal(out["broadcast"][0], [1.0, 1.0])
        np.testing.assert_array_equal(out["broadcast"][1], [1, 1])
        ring, partial = out["permute"]
        np.testing.assert_array_equal(ring, [(rank - 1) % world])
        np.testing.assert_array_equal(partial, [5.0] if rank == 1 else [0.0])
        if rank == 0:
            assert out["p2p"] is True
        elif rank == 1:
            assert out["p2p"][0]
            np.testing.assert_array_equal(out["p2p"][1], [7.0, 8.0])


# ---- replica groups --------------------------------------------------------------------------------------------------
def _groups(rank, world):
    pairs = [[0, 1], [2, 3]]
    backwards = [[3, 2], [1, 0]]
    out = {"sum": _np(xm.all_reduce(xm.REDUCE_SUM, ember.tensor([rank + 1.0]), groups=pairs)),
           "gather": _np(xm.all_gather(ember.tensor([rank * 1.0]), groups=backwards)),
           "scatter": _np(xm.reduce_scatter(xm.REDUCE_SUM, ember.arange(4.0) * (rank + 1), 1.0, 0, 2, groups=pairs)),
           "to_all": _np(xm.all_to_all(ember.tensor([rank * 10.0, rank * 10.0 + 1]), 0, 0, 2, groups=backwards)),
           "whole": _np(xm.all_reduce(xm.REDUCE_SUM, ember.tensor([1.0]), groups=[[0, 1, 2, 3]]))}
    grads = [ember.full((3,), rank + 1.0)]
    xm.all_reduce(xm.REDUCE_MAX, grads, groups=pairs)  # the subgroups are made once and reused
    shared = [ember.tensor([rank * 1.0])]
    xm.collective_broadcast(shared, root_ordinal=2, groups=pairs)
    out["again"], out["broadcast"] = _np(grads[0]), _np(shared[0])
    errors = []
    for call in (lambda: xm.all_reduce(xm.REDUCE_SUM, ember.ones(1), groups=[[0, 1], [2]]),
                 lambda: xm.all_gather(ember.ones(1), groups=[[0, 1, 2], [3]]),
                 lambda: xm.reduce_scatter(xm.REDUCE_SUM, ember.ones(4), 1.0, 0, 4, groups=pairs),
                 lambda: xm.all_reduce("avg", ember.ones(1))):
        try:
            call()
            errors.append(None)
        except Exception as e:  # noqa: BLE001 - the error type is what is checked
            errors.append(type(e).__name__)
    out["errors"] = errors
    return out


def test_groups(ranks):
    for rank, out in enumerate(ranks(4).run(_groups)):
        pair = [0, 1] if rank < 2 else [2, 3]
        np.testing.assert_array_equal(out["sum"], [sum(q + 1 for q in pair)])
        np.testing.assert_array_equal(out["gather"], list(reversed(pair)))  # the order of the group as listed
        index = pair.index(rank)
        np.testing.assert_array_equal(out["scatter"], (np.arange(4.0) * sum(q + 1 for q in pair))[2 * index:][:2])
        peers = list(reversed(pair))
        np.testing.assert_array_equal(out["to_all"], [q * 10.0 + peers.index(rank) for q in peers])
        np.testing.assert_array_equal(out["whole"], [4.0])
        np.testing.assert_array_equal(out["again"], np.full(3, max(pair) + 1.0))
        np.testing.assert_array_equal(out["broadcast"], [2.0 if rank >= 2 else 0.0])
        assert out["errors"] == ["ValueError", "AssertionError", "ValueError", "ValueError"]


# ---- rendezvous, mesh reductions, ordinals ---------------------------------------------------------------------------
def _meetings(rank, world, path):
    out = {"rendezvous": xm.rendezvous("meet", bytes([rank]) * rank),
           "empty": xm.rendezvous("empty"),
           "mesh_mean": xm.mesh_reduce("acc", rank + 1.0, np.mean),
           "mesh_tensors": _np(xm.mesh_reduce("t", {"x": ember.tensor([rank])}, lambda xs: sum(x["x"] for x in xs))),
           "do": xm.do_on_ordinals(lambda a, b: _np(a + b), (ember.tensor([rank]), 10), ordinals=(0, world - 1)),
           "do_int": xm.do_on_ordinals(lambda: rank, ordinals=1)}
    errors = []
    for call in (lambda: xm.rendezvous("bad", "text"), lambda: xm.rendezvous("part", b"", [0])):
        try:
            call()
        except Exception as e:  # noqa: BLE001 - the error type is what is checked
            errors.append(type(e).__name__)
    out["errors"] = errors
    printed = io.StringIO()
    xm.master_print("hello", rank, fd=printed)
    out["printed"] = printed.getvalue()
    xm.save({"w": ember.tensor([rank * 1.0]), "step": 3}, os.path.join(path, "master.pt"))
    xm.save([ember.tensor([rank])], os.path.join(path, f"each{rank}.pt"), master_only=False)
    xm.rendezvous("saved")
    return out


@pytest.mark.parametrize("world", WORLDS)
def test_rendezvous_mesh_reduce_and_saving(ranks, world, tmp_path):
    results = ranks(world).run(_meetings, str(tmp_path))
    for rank, out in enumerate(results):
        assert out["rendezvous"] == [bytes([q]) * q for q in range(world)]
        assert out["empty"] == [b""] * world
        assert out["mesh_mean"] == np.mean(np.arange(1.0, world + 1))
        np.testing.assert_array_equal(out["mesh_tensors"], [world * (world - 1) // 2])
        if rank in (0, world - 1):
            np.testing.assert_array_equal(out["do"], [rank + 10])
        else:
            assert out["do"] is None
        assert out["do_int"] == (1 if rank == 1 else None)
        assert out["errors"] == ["TypeError", "ValueError"]
        assert out["printed"] == ("hello 0\n" if rank == 0 else "")
    saved = ember.load(tmp_path / "master.pt")  # written by ordinal 0 alone
    assert saved["step"] == 3 and saved["w"].tolist() == [0.0]
    for rank in range(world):
        assert ember.load(tmp_path / f"each{rank}.pt")[0].tolist() == [rank]


# ---- gradients and optimizer steps -----------------------------------------------------------------------------------
def _model(seed):
    ember.manual_seed(seed)
    return ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4), ember.nn.Linear(4, 2))


def _training(rank, world, bucket_mb):
    if bucket_mb:
        os.environ["ALLREDUCE_GRADIENTS_BUCKET_SIZE_MB"] = str(bucket_mb)
    model = _model(rank)  # different on every replica until broadcast
    model[1].running_mean.fill_(rank + 1.0)
    xm.broadcast_master_param(model)
    state = {k: _np(v) for k, v in model.state_dict().items()}
    opt = ember.optim.SGD(model.parameters(), lr=0.5)
    for i, p in enumerate(model.parameters()):
        p.grad = ember.full(p.shape, float((rank + 1) * (i + 1)))
    model[2].bias.grad = None  # a parameter without a gradient is left out
    before = [_np(p) for p in model.parameters()]
    loss = xm.optimizer_step(opt, optimizer_args={"closure": lambda: 42.0}, barrier=True)
    grads = [None if p.grad is None else _np(p.grad) for p in model.parameters()]
    many = [ember.full((1000,), rank + 1.0), ember.full((10,), rank * 2.0), ember.full((5,), 1.0)]
    xm.all_reduce_bucketized_gradients(many, scale=0.5, groups=None, pin_layout=True, bucket_cap_mb=0)
    return state, before, [_np(p) for p in model.parameters()], grads, loss, [_np(m) for m in many]


@pytest.mark.parametrize("world, bucket_mb", [(2, 0), (4, 1)])
def test_optimizer_step_averages_gradients(ranks, world, bucket_mb):
    results = ranks(world).run(_training, bucket_mb)
    reference = {k: _np(v) for k, v in _model(0).state_dict().items()}
    reference["1.running_mean"] = np.ones(4, np.float32)
    mean = sum(q + 1 for q in range(world)) / world
    for state, before, after, grads, loss, many in results:
        for k, v in reference.items():  # replica 0's parameters and buffers everywhere
            np.testing.assert_array_equal(state[k], v, err_msg=k)
        assert loss == 42.0
        for i, (b, a, g) in enumerate(zip(before, after, grads)):
            if i == 5:  # the bias without a gradient
                assert g is None
                np.testing.assert_array_equal(a, b)
                continue
            np.testing.assert_allclose(g, np.full(b.shape, mean * (i + 1)), rtol=1e-6)
            np.testing.assert_allclose(a, b - 0.5 * mean * (i + 1), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(many[0], np.full(1000, 0.5 * sum(q + 1 for q in range(world))))
        np.testing.assert_array_equal(many[1], np.full(10, 0.5 * sum(2 * q for q in range(world))))
        np.testing.assert_array_equal(many[2], np.full(5, 0.5 * world))


def _bucketized(rank, world):
    inputs = [ember.full((world, 2), rank + 1.0), ember.arange(2.0 * world) * rank, ember.tensor([rank * 1.0])]
    gathered = xm.all_gather_bucketized(inputs, bucket_cap_mb=1)
    outputs = [ember.empty(2 * world, 2), ember.empty(2 * world * world), ember.empty(world)]
    into = xm.all_gather_bucketized(inputs, output=outputs, bucket_cap_mb=0)
    scattered = xm.reduce_scatter_bucketized(xm.REDUCE_SUM, inputs[:2], 1.0, 0, world, bucket_cap_mb=1)
    same = all(a is b for a, b in zip(into, outputs))
    return [_np(g) for g in gathered], same, [_np(o) for o in outputs], [_np(s) for s in scattered]


def test_bucketized_collectives(ranks):
    world = 2
    for rank, (gathered, same, outputs, scattered) in enumerate(ranks(world).run(_bucketized)):
        expected = [np.concatenate([np.full((world, 2), q + 1.0) for q in range(world)]),
                    np.concatenate([np.arange(2.0 * world) * q for q in range(world)]),
                    np.arange(world, dtype=np.float32)]
        for got, want in zip(gathered, expected):
            np.testing.assert_array_equal(got, want)
        assert same  # the results are the output tensors
        for got, want in zip(outputs, expected):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(scattered[0], np.full((1, 2), 3.0))
        np.testing.assert_array_equal(scattered[1], (np.arange(4.0) * 1)[2 * rank:2 * rank + 2])


# ---- spawn -----------------------------------------------------------------------------------------------------------
def _spawned(index, path):
    total = xm.all_reduce(xm.REDUCE_SUM, ember.tensor([index + 1.0]))
    dist = ember.distributed
    backend = dist.get_backend() if dist.is_initialized() else None
    with open(os.path.join(path, f"{index}.txt"), "w") as f:
        f.write(f"{xm.get_ordinal()} {xm.get_local_ordinal()} {xm.xrt_world_size()} {total.item()} {backend}")


def _spawned_fails(index):
    if index == 1:
        raise ValueError(f"replica {index} fails")


@pytest.mark.slow
def test_spawn(tmp_path):
    xm.spawn(_spawned, args=(str(tmp_path),), nprocs=2)
    assert [(tmp_path / f"{i}.txt").read_text() for i in range(2)] == [f"{i} {i} 2 3.0 undefined" for i in range(2)]
    with pytest.raises(ProcessRaisedException, match="replica 1 fails"):
        xm.spawn(_spawned_fails, nprocs=2)


def test_spawn_of_one_process_runs_here(tmp_path):
    xm.spawn(_spawned, args=(str(tmp_path),), nprocs=1)
    assert (tmp_path / "0.txt").read_text() == "0 0 1 1.0 None"
    assert not ember.distributed.is_initialized()


# ---- a world of one: this process ------------------------------------------------------------------------------------
def test_devices_and_ordinals_alone():
    assert xm.xla_device() == ember.device("cpu")
    assert xm.get_xla_supported_devices() == ["cpu"]
    with pytest.warns(UserWarning, match="devkind"):
        assert xm.get_xla_supported_devices("CPU") == ["cpu"]
    with pytest.warns(UserWarning, match="devkind"):
        assert xm.get_xla_supported_devices("TPU") is None
    assert xm.xla_device(0) == ember.device("cpu")
    with pytest.raises(RuntimeError, match="out of range"):
        xm.xla_device(3)
    assert (xm.xla_device_hw("cpu"), xm.xla_device_hw(ember.device("cuda", 1))) == ("CPU", "CUDA")
    with pytest.raises(RuntimeError, match="Invalid device"):
        xm.xla_device_hw("xla:0")
    assert (xm.get_ordinal(), xm.get_local_ordinal(), xm.xrt_world_size(), xm.is_master_ordinal()) == (0, 0, 1, True)
    assert {xm.REDUCE_SUM, xm.REDUCE_MUL, xm.REDUCE_AND, xm.REDUCE_OR, xm.REDUCE_MIN, xm.REDUCE_MAX} == \
        {"sum", "mul", "and", "or", "min", "max"}


def test_ordinals_from_a_launchers_environment(monkeypatch):
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "8")
    assert (xm.get_ordinal(), xm.get_local_ordinal(), xm.xrt_world_size()) == (5, 1, 8)
    assert (xm.is_master_ordinal(), xm.is_master_ordinal(local=False)) == (False, False)
    printed = io.StringIO()
    xm.master_print("x", fd=printed)
    assert printed.getvalue() == ""


def test_collectives_alone_return_the_values():
    t = ember.tensor([1.0, 2.0])
    reduced = xm.all_reduce(xm.REDUCE_SUM, t, scale=3.0)
    assert reduced is not t and reduced.tolist() == [1.0, 2.0]  # torch_xla: no reduction nor scaling alone
    items = [t]
    assert xm.all_reduce(xm.REDUCE_SUM, items, scale=3.0) is items and t.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="Invalid reduce type"):
        xm.all_reduce("avg", t)
    assert xm.all_gather(t).tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="pin_layout"):
        xm.all_gather([t])
    with pytest.raises(TypeError, match="Tensor or a list of Tensors"):
        xm.all_gather((t,), pin_layout=False)
    assert xm.reduce_scatter(xm.REDUCE_SUM, t, 0.5, 0, 1).tolist() == [0.5, 1.0]
    with pytest.raises(ValueError, match="shard_count"):
        xm.reduce_scatter(xm.REDUCE_SUM, t, 1.0, 0, 2)
    assert xm.all_to_all(ember.arange(4.0).reshape(2, 2), 0, 1, 1).tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert xm.collective_permute(t, [[0, 0]]).tolist() == [1.0, 2.0]
    assert xm.collective_permute(t, []).tolist() == [0.0, 0.0]
    assert xm.rendezvous("alone", b"p") == [b"p"]
    assert xm.mesh_reduce("alone", {"a": ember.tensor([2.0])}, lambda xs: xs[0]["a"].item()) == 2.0
    assert xm.do_on_ordinals(lambda a: a.tolist(), (t,)) == [1.0, 2.0]
    assert xm.do_on_ordinals(lambda: 1, ordinals=(3,)) is None


def test_step_closures_run_at_mark_step():
    ran = []
    xm.add_step_closure(ran.append, ("first",))
    xm.add_step_closure(lambda a, b: ran.append(a + b), ("sec", "ond"))
    xm.add_step_closure(ran.append, ("async",), run_async=True)
    assert ran == []
    xm.mark_step()
    xm.wait_device_ops()  # the asynchronous closures too
    assert ran[:2] == ["first", "second"] and sorted(ran) == ["async", "first", "second"]
    xm.mark_step()
    assert len(ran) == 3  # each closure runs once

    def fails():
        raise KeyError("in a closure")
    xm.add_step_closure(fails, run_async=True)
    xm.mark_step()
    with pytest.raises(KeyError, match="in a closure"):
        xm.wait_device_ops()
    xm.add_step_closure(fails)
    with pytest.raises(KeyError):
        xm.mark_step()
    xm.mark_step()  # the failed closure is gone


def test_optimizer_step_alone_steps_without_reducing():
    p = ember.nn.Parameter(ember.tensor([1.0, 2.0]))
    p.grad = ember.tensor([2.0, 4.0])
    opt = ember.optim.SGD([p], lr=0.5)
    ran = []
    xm.add_step_closure(ran.append, (1,))
    assert xm.optimizer_step(opt) is None and ran == []  # no barrier: the step is not ended
    assert p.tolist() == [0.0, 0.0] and p.grad.tolist() == [2.0, 4.0]
    xm.optimizer_step(opt, barrier=True)
    assert ran == [1]


def test_rng_state_round_trips():
    ember.manual_seed(3)
    state = xm.get_rng_state()
    assert isinstance(state, int) and state >= 1 << 64
    first = ember.rand(4)
    xm.set_rng_state(state)
    assert ember.equal(ember.rand(4), first)
    xm.set_rng_state(3)  # a seed
    assert ember.equal(ember.rand(4), first)
    with xm.fork_rng():
        ember.rand(10)
    after_fork = ember.rand(2)
    xm.set_rng_state(3)
    ember.rand(4)
    assert ember.equal(ember.rand(2), after_fork)
    with xm.fork_rng(enabled=False):
        ember.rand(1)
    with pytest.raises(ValueError, match="get_rng_state"):
        xm.set_rng_state(1 << 70)


def test_rate_tracker(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(xm.time, "time", lambda: now[0])
    tracker = xm.RateTracker(smooth_factor=0.25)
    tracker.add(10)
    now[0] = 102.0
    assert tracker.rate() == 5.0  # the first rate is not smoothed
    tracker.add(40)
    now[0] = 104.0
    assert tracker.rate() == 0.75 * 20.0 + 0.25 * 5.0
    assert tracker.global_rate() == 50 / 4.0
    assert tracker.rate() == 0.0  # no time passed
    monkeypatch.setenv("RATE_TRACKER_SMOOTHING", "0.5")
    assert xm.RateTracker()._smooth_factor == 0.5


def test_save_memory_views_and_device_data(tmp_path):
    data = {"w": ember.ones(2), "nested": [ember.zeros(1), (3, "x")], "s": {1}}
    xm.save(data, tmp_path / "a.pt")
    loaded = ember.load(tmp_path / "a.pt")
    assert loaded["w"].tolist() == [1.0, 1.0] and loaded["nested"][1] == (3, "x")
    info = xm.get_memory_info()
    assert set(info) == {"bytes_used", "bytes_limit"} and 0 < info["bytes_used"] < info["bytes_limit"]
    base = ember.arange(6.0)
    xm.check_view_sharing({"a": base, "again": [base], "other": ember.ones(2)})  # one tensor twice is fine
    with pytest.raises(RuntimeError, match="is sharing a view with tensor ID"):
        xm.check_view_sharing([base, base[2:].view(2, 2)])
    moved = xm.send_cpu_data_to_device(base, "cpu")
    assert isinstance(moved, list) and moved[0] is base
    moved = xm.send_cpu_data_to_device({"k": (base, 1)}, ember.device("cpu"))
    assert moved["k"][0] is base and moved["k"][1] == 1
    with pytest.raises(NotImplementedError):
        xm.send_cpu_data_to_device(base, "cpu", input_sharding=object())


def test_coalescing_buckets():
    mb = 1024 * 1024
    calls = []

    def record(inputs, outputs):
        calls.append([t.numel() * 4 // mb for t in inputs] if isinstance(inputs, list) else inputs.numel() * 4 // mb)
        return inputs
    sizes = [1, 1, 3, 1, 9, 2, 2]  # MB of float32 each
    tensors = [ember.zeros(s * mb // 4) for s in sizes]
    out = xm.CoalescingBuckets(record, tensors, bucket_cap_mb=4)()
    assert all(a is b for a, b in zip(out, tensors))
    # 1+1 (3 more would pass the cap); 3+1; 9 alone (over the cap, after a full bucket); 2+2
    assert calls == [[1, 1], [3, 1], 9, [2, 2]]
    calls.clear()
    xm.CoalescingBuckets(record, [ember.zeros(mb // 4), ember.zeros(5 * mb // 4)], bucket_cap_mb=4)()
    assert calls == [[1, 5]]  # a large tensor joins a bucket under half the cap, the two within twice the cap
    with pytest.raises(TypeError, match="input_list"):
        xm.CoalescingBuckets(record, (tensors[0],))
    with pytest.raises(ValueError, match="length"):
        xm.CoalescingBuckets(record, tensors, output_list=tensors[:1])
