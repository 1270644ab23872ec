"""The NCCL backend's logic without a GPU: the backend runs on ranks that are threads of this process, against the
stand-in communicator of fake_nccl (NumPy arrays for CuPy's), and results are compared with values computed by
hand; through init_process_group("nccl") on a world of one; availability and the lazy CuPy import. Tests marked
``gpu`` run the real thing (skipped here)."""
import datetime
import subprocess
import sys
import threading

import numpy as np
import pytest
from fake_nccl import FakeCuda

import ember
import ember.distributed as dist
from ember.distributed import _backends
from ember.distributed._nccl_backend import NCCLBackend
from ember.distributed._reduce_op import RedOpType

WORLDS = (2, 4)


def _run_threads(world, fn, *args):
    """``fn(backend, rank, world, *args)`` on ``world`` threads, each with its NCCL backend (one store between
    them); the results in rank order."""
    store = dist.HashStore()
    results, errors = [None] * world, []

    def body(rank):
        backend = NCCLBackend(dist.PrefixStore("g/", store), rank, world, datetime.timedelta(seconds=30), None, "g",
                              cuda=FakeCuda())
        try:
            results[rank] = fn(backend, rank, world, *args)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append((rank, e))
        finally:
            backend.shutdown()
    threads = [threading.Thread(target=body, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return results


def _np(t):
    return t.numpy().copy()


# ---- collectives --------------------------------------------------------------------------------------------------
def _collectives(b, rank, world):
    out = {}
    x = ember.tensor([rank + 1.0, 2.0])
    b.allreduce([x], RedOpType.SUM)
    out["sum"] = _np(x)
    ints = {op: ember.tensor([rank + 2, 5 - rank]) for op in ("PRODUCT", "MIN", "MAX")}
    for op, t in ints.items():
        b.allreduce([t], RedOpType[op])
    out["ints"] = {op: _np(t) for op, t in ints.items()}
    avg = ember.tensor([rank * 2.0, 1.0], dtype=ember.float64)
    b.allreduce([avg], RedOpType.AVG)
    out["avg"] = _np(avg)
    flags = [ember.tensor([rank == 0, True, False]), ember.tensor([rank == 0, True, False])]
    b.allreduce([flags[0]], RedOpType.SUM)
    b.allreduce([flags[1]], RedOpType.PRODUCT)
    out["bool"] = [_np(f) for f in flags]
    half = ember.tensor([rank + 1.0, 4.0])
    b.allreduce([half], dist._make_nccl_premul_sum(0.5))
    doubled = ember.tensor([rank + 1.0], dtype=ember.bfloat16)
    b.allreduce([doubled], dist._make_nccl_premul_sum(ember.tensor(2.0, dtype=ember.bfloat16)))
    out["premul"] = (_np(half), _np(doubled.float()))
    pair = [ember.full((2, 2), rank + 1.0), ember.tensor([rank], dtype=ember.int32)]
    b.allreduce(pair, RedOpType.MAX)
    out["coalesced"] = [_np(p) for p in pair]
    root_value = ember.full((3,), float(rank))
    b.broadcast([root_value], 1)
    out["broadcast"] = _np(root_value)
    r = ember.tensor([rank + 1.0, -1.0])
    b.reduce([r], 0, RedOpType.SUM)
    out["reduce"] = _np(r)
    gathered = [ember.empty(2) for _ in range(world)]
    b.allgather([gathered], [ember.tensor([rank, -rank], dtype=ember.float32)])
    flat = ember.empty(world * 2, dtype=ember.int64)
    b.allgather_into_tensor(flat, ember.tensor([rank, rank * 10]))
    out["allgather"] = ([_np(g) for g in gathered], _np(flat))
    shard = ember.empty(2)
    b.reduce_scatter(shard, [ember.full((2,), float(q * 10 + rank)) for q in range(world)], RedOpType.SUM)
    maxed = ember.empty(2, dtype=ember.int64)
    source = ember.arange(2 * world) * (rank + 1)
    b.reduce_scatter_tensor(maxed, source, RedOpType.MAX)
    premul = ember.empty(1)
    premul_in = ember.arange(float(world))
    b.reduce_scatter_tensor(premul, premul_in, dist._make_nccl_premul_sum(3.0))
    out["reduce_scatter"] = (_np(shard), _np(maxed), _np(premul), _np(premul_in))
    outs = [ember.empty(2) for _ in range(world)]
    b.alltoall(outs, [ember.tensor([rank * 10.0 + q, -1.0]) for q in range(world)])
    in_splits = [q + rank + 1 for q in range(world)]
    out_splits = [p + rank + 1 for p in range(world)]
    data = ember.tensor([rank * 100 + q * 10 + j for q in range(world) for j in range(in_splits[q])])
    received = ember.empty(sum(out_splits), dtype=ember.int64)
    b.alltoall_base(received, data, out_splits, in_splits)
    out["alltoall"] = ([_np(o) for o in outs], _np(received))
    parts = [ember.empty(2, dtype=ember.int32) for _ in range(world)] if rank == 1 else []
    b.gather(parts, ember.tensor([rank, 7], dtype=ember.int32), 1)
    mine = ember.empty(3)
    b.scatter(mine, [ember.full((3,), q + 0.5) for q in range(world)] if rank == 0 else [], 0)
    out["gather_scatter"] = ([_np(p) for p in parts], _np(mine))
    incoming = ember.empty(2)
    sent = b.send([ember.tensor([rank * 1.0, 1.0])], (rank + 1) % world, 0, async_op=True)
    b.recv([incoming], (rank - 1) % world, 0, async_op=False)
    sent.wait()
    out["p2p"] = _np(incoming)
    out["barrier"] = b.barrier().is_completed()
    work = b.allreduce([ember.tensor([1.0])], RedOpType.SUM, async_op=True)
    future = work.get_future()
    out["async"] = (work.wait(), work.is_completed(), work.is_success(), _np(future.wait()[0]),
                    _np(work.result()[0]))
    comm = b._comms[0].nccl
    out["calls"] = list(comm.calls)
    out["waited"] = len(b._cuda.current.waited)
    return out


@pytest.mark.parametrize("world", WORLDS)
def test_collectives_map_onto_nccl(world):
    results = _run_threads(world, _collectives)
    total = world * (world + 1) / 2
    for rank, out in enumerate(results):
        np.testing.assert_array_equal(out["sum"], [total, 2.0 * world])
        np.testing.assert_array_equal(out["ints"]["PRODUCT"], [np.prod(np.arange(2, world + 2)),
                                                               np.prod(5 - np.arange(world))])
        np.testing.assert_array_equal(out["ints"]["MIN"], [2, 5 - (world - 1)])
        np.testing.assert_array_equal(out["ints"]["MAX"], [world + 1, 5])
        np.testing.assert_array_equal(out["avg"], [world - 1.0, 1.0])
        np.testing.assert_array_equal(out["bool"][0], [True, True, False])  # SUM of bools: any
        np.testing.assert_array_equal(out["bool"][1], [False, True, False])  # PRODUCT: all
        half, doubled = out["premul"]
        np.testing.assert_array_equal(half, [total / 2, 2.0 * world])
        np.testing.assert_array_equal(doubled, [2 * total])
        np.testing.assert_array_equal(out["coalesced"][0], np.full((2, 2), float(world)))
        np.testing.assert_array_equal(out["coalesced"][1], [world - 1])
        np.testing.assert_array_equal(out["broadcast"], [1.0, 1.0, 1.0])
        np.testing.assert_array_equal(out["reduce"], [total, -world] if rank == 0 else [rank + 1.0, -1.0])
        gathered, flat = out["allgather"]
        np.testing.assert_array_equal(np.stack(gathered), [[q, -q] for q in range(world)])
        np.testing.assert_array_equal(flat, [v for q in range(world) for v in (q, q * 10)])
        shard, maxed, premul, premul_in = out["reduce_scatter"]
        np.testing.assert_array_equal(shard, np.full(2, rank * 10.0 * world + world * (world - 1) / 2))
        np.testing.assert_array_equal(maxed, np.arange(2 * world)[2 * rank:2 * rank + 2] * world)
        np.testing.assert_array_equal(premul, [3.0 * rank * world])
        np.testing.assert_array_equal(premul_in, np.arange(float(world)))  # PREMUL_SUM leaves the input alone
        outs, received = out["alltoall"]
        np.testing.assert_array_equal(np.stack(outs), [[q * 10.0 + rank, -1.0] for q in range(world)])
        np.testing.assert_array_equal(received, [p * 100 + rank * 10 + j for p in range(world)
                                                 for j in range(p + rank + 1)])
        parts, mine = out["gather_scatter"]
        if rank == 1:
            np.testing.assert_array_equal(np.stack(parts), [[q, 7] for q in range(world)])
        np.testing.assert_array_equal(mine, np.full(3, rank + 0.5))
        np.testing.assert_array_equal(out["p2p"], [(rank - 1) % world, 1.0])
        assert out["barrier"]
        done, completed, success, value, result = out["async"]
        assert done and completed and success
        np.testing.assert_array_equal(value, [world])
        np.testing.assert_array_equal(result, [world])
        # one NCCL call per collective: the coalesced all_reduce as two allReduce in a group, all_to_all, gather,
        # scatter and p2p as sends and receives
        calls = out["calls"]
        assert calls[:11] == ["allReduce"] * 11
        assert calls.count("allGather") == 2 and calls.count("reduceScatter") == 3
        assert calls.count("reduce") == 1 and calls.count("broadcast") == 1
        assert out["waited"] > 20  # every synchronous call made the current stream wait for it


def _errors(b, rank, world):
    """Errors raised before anything is sent (alike on every rank)."""
    x = ember.ones(4)
    cases = {"band": lambda: b.allreduce([ember.ones(2, dtype=ember.int64)], RedOpType.BAND),
             "int16": lambda: b.allreduce([ember.ones(2, dtype=ember.int16)], RedOpType.SUM),
             "strided": lambda: b.allreduce([x[::2]], RedOpType.SUM),
             "bool avg": lambda: b.allreduce([ember.ones(2, dtype=ember.bool)], RedOpType.AVG),
             "premul without factor": lambda: b.allreduce([x], RedOpType.PREMUL_SUM),
             "any source": lambda: b.recv_anysource([x], 0),
             "gather size": lambda: b.allgather([[ember.ones(4)]], [x]),
             "into size": lambda: b.allgather_into_tensor(ember.ones(3), x),
             "scatter size": lambda: b.reduce_scatter_tensor(ember.ones(3), x, RedOpType.SUM)}
    found = {}
    for name, call in cases.items():
        try:
            call()
            found[name] = None
        except Exception as e:  # noqa: BLE001 - the error type is what is checked
            found[name] = type(e).__name__
    b.shutdown()
    try:
        b.allreduce([x], RedOpType.SUM)
    except Exception as e:  # noqa: BLE001
        found["after shutdown"] = (type(e).__name__, str(e))
    return found


def test_errors():
    for found in _run_threads(2, _errors):
        assert found["band"] == "ValueError" and found["int16"] == "TypeError" and found["strided"] == "ValueError"
        assert found["bool avg"] == "ValueError" and found["premul without factor"] == "ValueError"
        assert found["any source"] == "RuntimeError"
        assert found["gather size"] == found["into size"] == found["scatter size"] == "ValueError"
        assert found["after shutdown"][0] == "DistBackendError" and "destroyed" in found["after shutdown"][1]


def _lifecycle(b, rank, world):
    """Communicators: one per device, made on first use from the unique id rank 0 published."""
    made_before = len(b._comms)
    b.allreduce([ember.ones(1)], RedOpType.SUM)
    comm = b._comms[0].nccl
    return made_before, comm.world is not None and comm.size() == world, comm.rank_id(), comm


def test_communicators_made_lazily_from_the_stores_unique_id():
    results = _run_threads(2, _lifecycle)
    assert [r[:3] for r in results] == [(0, True, 0), (0, True, 1)]
    assert results[0][3].world is results[1][3].world  # both joined the communicator of one unique id
    assert all(r[3].destroyed for r in results)  # shutdown destroys them


# ---- through init_process_group, a world of one ---------------------------------------------------------------------
@pytest.fixture
def fake_nccl_registered():
    saved = _backends._FACTORIES["nccl"]

    def factory(store, rank, size, timeout, global_ranks, group_name):
        return NCCLBackend(store, rank, size, timeout, global_ranks, group_name, cuda=FakeCuda())
    _backends.register("nccl", factory, available=lambda: True)
    yield
    _backends._FACTORIES["nccl"] = saved
    if dist.is_initialized():
        dist.destroy_process_group()


def test_init_process_group_with_nccl(fake_nccl_registered):
    assert dist.is_nccl_available()
    # the stand-in's "device" is the CPU: NCCL serves CPU tensors here
    dist.init_process_group("cpu:nccl", store=dist.HashStore(), rank=0, world_size=1)
    assert (dist.group.WORLD.name(), dist.get_backend_config()) == ("nccl", "cpu:nccl")
    t = ember.tensor([1.0, 2.0])
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(3.0))  # the factor reaches the backend
    assert t.tolist() == [3.0, 6.0]
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert dist.all_reduce(t, async_op=True).wait()
    out = [ember.empty(2)]
    dist.all_gather(out, t)
    assert out[0].tolist() == [3.0, 6.0]
    single = ember.empty(2)
    dist.all_to_all_single(single, t)
    assert single.tolist() == [3.0, 6.0]
    z = ember.tensor([1.0, 1.0])
    dist.all_reduce(z.view(ember.complex64), op=dist.ReduceOp.SUM)  # complex tensors as pairs of reals
    dist.barrier()
    with pytest.raises(ValueError, match="monitored_barrier is only implemented for GLOO"):
        dist.monitored_barrier()
    dist.destroy_process_group()


def test_tensors_go_to_the_backend_of_their_device(fake_nccl_registered):
    dist.init_process_group("cpu:gloo,cuda:nccl", store=dist.HashStore(), rank=0, world_size=1)
    pg = dist.group.WORLD
    assert pg.name() == "nccl" and pg._get_backend("cpu").name() == "gloo"
    t = ember.ones(2)
    dist.all_reduce(t)
    dist.broadcast(t, 0)
    dist.all_gather([ember.empty(2)], t)
    assert pg._get_backend("cuda")._comms == {}  # the CPU tensors never reached NCCL
    dist.monitored_barrier()  # on the group's CPU backend, as torch's
    dist.destroy_process_group()
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    with pytest.raises(RuntimeError, match="No backend type associated with device type cpu"):
        dist.all_reduce(t)  # as torch: an NCCL group has nothing for CPU tensors
    dist.destroy_process_group()


def test_nccl_unavailable_without_a_gpu():
    if ember.cuda.is_available():
        pytest.skip("a GPU is present")
    assert not dist.is_nccl_available()
    assert not dist.is_backend_available("nccl")
    with pytest.raises(RuntimeError, match="Distributed package doesn't have NCCL built in"):
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    assert not dist.is_initialized()


def test_cupy_is_not_imported(tmp_path):
    """A CuPy that fails on import (and no GPU): ember.distributed, its availability checks and a CPU group work."""
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text("raise ImportError('cupy was imported')\n")
    code = ("import sys, ember, ember.distributed as d\n"
            "assert not d.is_nccl_available() and not d.is_backend_available('nccl')\n"
            "d.init_process_group(store=d.HashStore(), rank=0, world_size=1)\n"
            "t = ember.ones(2); d.all_reduce(t); d.destroy_process_group()\n"
            "assert 'cupy' not in sys.modules, sorted(m for m in sys.modules if 'cupy' in m)\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


# ---- on a GPU --------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_nccl_on_one_gpu():
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    try:
        t = ember.tensor([1.0, 2.0], device="cuda")
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
        out = [ember.empty(2, device="cuda")]
        dist.all_gather(out, t)
        dist.broadcast(t, 0)
        dist.barrier()
        assert t.tolist() == [2.0, 4.0] and out[0].tolist() == [2.0, 4.0]
        work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
        assert work.get_future().wait()[0].tolist() == [2.0, 4.0]
    finally:
        dist.destroy_process_group()


def _two_gpus(rank, world):
    ember.cuda.set_device(rank)
    dist.init_process_group("nccl")
    t = ember.full((1 << 20,), float(rank + 1), device="cuda")
    dist.all_reduce(t)
    shard = ember.empty(1 << 19, device="cuda")
    dist.reduce_scatter_tensor(shard, t)
    moved = ember.empty(4, device="cuda")
    dist.all_to_all_single(moved, ember.arange(4.0, device="cuda") + 10 * rank)
    return t[:2].cpu().numpy(), shard[:2].cpu().numpy(), moved.cpu().numpy()


@pytest.mark.gpu
def test_nccl_on_two_gpus(ranks):
    if ember.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    for rank, (t, shard, moved) in enumerate(ranks(2).run(_two_gpus)):
        np.testing.assert_array_equal(t, [3.0, 3.0])
        np.testing.assert_array_equal(shard, [6.0, 6.0])
        np.testing.assert_array_equal(moved, [2 * rank, 2 * rank + 1, 10 + 2 * rank, 11 + 2 * rank])
