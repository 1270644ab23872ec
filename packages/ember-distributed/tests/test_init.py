"""Process groups against torch.distributed with gloo: init through each init_method, destroy and re-init, subgroups
and their rank maps, the names and errors (the same code runs under torch and under ember, on 2 and 4 ranks)."""
import contextlib
import datetime
import importlib
import io
import os
import sys
import warnings

import numpy as np
import pytest
from oracle import needs_torch, torch_module

import ember.distributed as edist

tdist = torch_module("torch.distributed")
T = datetime.timedelta
LIBS = (("torch", tdist), ("ember", edist))


def _libs(libname):
    return importlib.import_module(libname), importlib.import_module(libname + ".distributed")


def _error(call):
    """The result of ``call()``, or its exception's class name."""
    try:
        return call()
    except Exception as e:  # noqa: BLE001 - compared with torch's
        return type(e).__name__


def _summed(lib, dist, rank, group=None):
    x = lib.full((2,), float(rank + 1))
    dist.all_reduce(x, group=group)
    return x.numpy().tolist()


# --------------------------------------------------------------------------------------------- init, destroy, again

def _init(dist, method, rank, world, path, backend="gloo"):
    port = os.environ["MASTER_PORT"]
    if method == "env":
        dist.init_process_group(backend)
    elif method == "tcp":
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    elif method == "file":
        dist.init_process_group(backend, init_method=f"file://{path}", rank=rank, world_size=world)
    else:  # a TCPStore the first time; then FileStores (a new TCPStore on the same port would race, in torch too,
        # with the old one stopping: a quick rank may connect to it first)
        store = dist.TCPStore("127.0.0.1", int(port), world, rank == 0, T(seconds=60)) if path.endswith(".1") \
            else dist.FileStore(path, world)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world)


def _queries(dist, rank):
    pg = dist.group.WORLD
    return {"initialized": dist.is_initialized(), "rank": dist.get_rank(), "world": dist.get_world_size(),
            "backend": dist.get_backend(), "config": dist.get_backend_config(), "pg count": dist.get_pg_count(),
            "pg": (pg.rank(), pg.size(), pg.name(), pg.group_name, pg.group_desc, pg is dist.GroupMember.WORLD),
            "ranks": dist.get_process_group_ranks(None), "global": dist.get_global_rank(pg, rank)}


def _all_destroyed(dist, libname, path, world):
    """torch only: wait until every rank destroyed its group. Without this, a quick torch rank re-initialising on
    the same port may reach the previous server before rank 0 stops it, and fail; ember's rendezvous must not."""
    if libname == "torch":
        side = dist.FileStore(path, world)
        if side.add("destroyed", 1) == world:
            side.set("all", "1")
        side.wait(["all"])


def _init_destroy_reinit(rank, world, libname, method, path):
    lib, dist = _libs(libname)
    out = {"before": (dist.is_initialized(), dist.group.WORLD, dist.get_pg_count(), _error(dist.get_rank))}
    _init(dist, method, rank, world, path + ".1", backend=None if method == "env" else "gloo")
    out["first"] = _queries(dist, rank)
    out["first sum"] = _summed(lib, dist, rank)
    out["second init"] = _error(lambda: dist.init_process_group("gloo"))
    dist.barrier()
    dist.destroy_process_group()
    out["destroyed"] = (dist.is_initialized(), dist.group.WORLD, dist.get_pg_count(), _error(dist.get_rank),
                        _error(dist.get_world_size), _error(dist.destroy_process_group))
    for again in range(2):  # the same port (or a new file) at once
        _all_destroyed(dist, libname, path + f".destroyed{again}", world)
        _init(dist, method, rank, world, path + f".again{again}")
        out[f"again {again}"] = (_queries(dist, rank), _summed(lib, dist, rank))
        dist.barrier()
        dist.destroy_process_group()
    return out


@needs_torch
@pytest.mark.parametrize("method", ["env", "tcp", "file", "store"])
@pytest.mark.parametrize("world", [2, 4])
def test_init_destroy_reinit(ranks, world, method, tmp_path):
    results = {name: ranks(world).run(_init_destroy_reinit, name, method, str(tmp_path / name)) for name, _ in LIBS}
    assert results["ember"] == results["torch"]
    assert results["ember"][0]["first sum"] == [world * (world + 1) / 2] * 2


def _breakpoints(rank, world, libname):
    """dist.breakpoint with the debugger replaced by a recorder: which rank stops, after how many skipped calls."""
    _, dist = _libs(libname)
    dist.init_process_group("gloo", timeout=T(seconds=60))
    seen = []

    class Debugger:
        def message(self, text):
            seen.append(text.strip().splitlines()[-1])

        def set_trace(self):
            seen.append("stopped")
    sys.modules[dist.breakpoint.__module__]._make_distributed_pdb = Debugger
    dist.breakpoint(rank=1)
    for call in range(3):
        seen.append(f"call {call}")
        dist.breakpoint(rank=0, skip=2, timeout_s=None)
    timeout = dist.group.WORLD.backend.timeout if libname == "ember" else 3600.0  # (the first call set it)
    return seen, timeout


@needs_torch
def test_breakpoint_stops_one_rank(ranks):
    results = {name: ranks(2).run(_breakpoints, name) for name, _ in LIBS}
    assert results["ember"] == results["torch"]
    stop = "Type 'up' to get to the frame that called dist.breakpoint(rank={})"
    assert results["ember"][1] == ([stop.format(1), "stopped", "call 0", "call 1", "call 2"], 3600.0)
    assert results["ember"][0][0] == ["call 0", "call 1", "call 2", stop.format(0), "stopped"]


def _group_methods(rank, world, libname):
    """The collectives as methods of a group object (group ranks, options structures, Works), on the default group
    and on a ProcessGroupGloo made from a store."""
    lib, dist = _libs(libname)
    dist.init_process_group("gloo")
    out = {}

    def run(pg, label):
        def full(value, n=2):
            return lib.full((n,), float(value))
        t = full(rank + 1)
        pg.allreduce(t).wait()
        out[label, "allreduce"] = t
        opts = dist.AllreduceOptions()
        opts.reduceOp = dist.ReduceOp.MAX
        t = full(rank + 1)
        pg.allreduce([t], opts).wait()
        out[label, "allreduce max"] = t
        t, u = full(rank), full(rank * 2)
        pg.broadcast(t, 1).wait()
        opts = dist.BroadcastOptions()
        opts.rootRank = world - 1
        pg.broadcast([u], opts).wait()
        out[label, "broadcast"] = t, u
        t = full(rank + 1)
        pg.reduce(t, 1, dist.ReduceOp.PRODUCT).wait()
        out[label, "reduce"] = t if rank == 1 else None
        outs = [full(-1) for _ in range(world)]
        pg.allgather([outs], [full(rank)]).wait()
        flat = lib.zeros(2 * world)
        pg._allgather_base(flat, full(rank * 3)).wait()
        out[label, "allgather"] = outs, flat
        opts = dist.GatherOptions()
        opts.rootRank = 1
        outs = [full(-1) for _ in range(world)]
        pg.gather([outs] if rank == 1 else [], [full(rank + 5)], opts).wait()
        out[label, "gather"] = outs if rank == 1 else None
        opts = dist.ScatterOptions()
        got = full(-1)
        pg.scatter([got], [[full(10 + r) for r in range(world)]] if rank == 0 else [], opts).wait()
        out[label, "scatter"] = got
        got = full(-1)
        pg.reduce_scatter([got], [[full(rank + r) for r in range(world)]], dist.ReduceScatterOptions()).wait()
        small = lib.zeros(1)
        pg._reduce_scatter_base(small, lib.arange(world, dtype=lib.float32) + rank).wait()
        out[label, "reduce_scatter"] = got, small
        got = lib.zeros(world)
        pg.alltoall_base(got, lib.arange(world, dtype=lib.float32) + 10 * rank, [], []).wait()
        outs = [full(-1) for _ in range(world)]
        pg.alltoall(outs, [full(rank * 10 + r) for r in range(world)]).wait()
        out[label, "alltoall"] = got, outs
        pg.barrier().wait()
        t = full(rank + 7)
        (pg.send([t], 1, 3) if rank == 0 else pg.recv([t], 0, 3) if rank == 1 else pg.barrier()).wait()
        out[label, "send/recv"] = t
        if rank < 2:
            t = full(rank + 9)
            work = pg.send([t], 1, 4) if rank == 0 else pg.recv_anysource([t], 4)
            work.wait()
            out[label, "recv_anysource"] = t, work.source_rank() if rank == 1 else None
    run(dist.group.WORLD, "default group")
    store = dist.PrefixStore("standalone", dist.distributed_c10d._get_default_store())
    run(dist.ProcessGroupGloo(store, rank, world, T(seconds=60)), "ProcessGroupGloo")
    def plain(x):
        return x.numpy().tolist() if hasattr(x, "numpy") else [plain(y) for y in x] if isinstance(x, list) else x
    return {k: [plain(x) for x in (v if isinstance(v, tuple) else [v])] for k, v in out.items()}


@needs_torch
def test_group_methods(ranks):
    results = {name: ranks(2).run(_group_methods, name) for name, _ in LIBS}
    assert results["ember"] == results["torch"]


def _splits(rank, world):
    """split_group of the default group and of a subgroup (parent group ranks), with ranks in no split."""
    lib, dist = _libs("ember")
    dist.init_process_group("gloo")
    out = {}
    pairs = dist.split_group(split_ranks=[[2, 3], [1, 0]])
    out["pairs"] = (dist.get_process_group_ranks(pairs), _summed(lib, dist, rank, pairs))
    out["evens"] = dist.split_group(split_ranks=[[0, 2]]) is None
    parent = dist.new_group([1, 2, 3])  # group ranks 0, 1, 2 are global ranks 1, 2, 3
    if rank:
        last = dist.split_group(parent, [[0], [2, 1]])
        out["of a subgroup"] = (dist.get_process_group_ranks(last), dist.get_rank(last), _summed(lib, dist, rank, last))
    out["errors"] = [_error(lambda r=r: dist.split_group(split_ranks=r)) for r in ([], [[0, 0]], [[0, 4]])]
    return out


def test_split_group(ranks):
    results = ranks(4).run(_splits)
    for rank, out in enumerate(results):
        mates = [0, 1] if rank < 2 else [2, 3]
        assert out["pairs"] == (mates, [sum(r + 1.0 for r in mates)] * 2)
        assert out["evens"] is (rank % 2 == 1)
        assert out["errors"] == ["ValueError"] * 3
    assert results[1]["of a subgroup"] == ([1], 0, [2.0, 2.0])
    assert results[2]["of a subgroup"] == ([2, 3], 0, [7.0, 7.0])
    assert results[3]["of a subgroup"] == ([2, 3], 1, [7.0, 7.0])


def _rank0_destroys_first(rank, world, path):
    """Rank 0 destroys its group as soon as it is made; the others use the job's store afterwards (a slow rank
    still initialising or destroying), then destroy theirs."""
    dist = edist
    dist.init_process_group("gloo")
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        dist.destroy_process_group()
        open(path, "w").close()
        return None
    while not os.path.exists(path):  # (rank 0 has destroyed its group)
        os.sched_yield()
    store.set(f"late/{rank}", str(rank))
    seen = store.get(f"late/{rank}")
    dist.destroy_process_group()
    return seen


def test_rank0_destroying_first_leaves_the_store_to_the_others(ranks, tmp_path):
    assert ranks(4).run(_rank0_destroys_first, str(tmp_path / "rank0-destroyed")) == [None, b"1", b"2", b"3"]


# ---------------------------------------------------------------------------------------------------- subgroups

def _describe(dist, g, world):
    if g is None or g == dist.GroupMember.NON_GROUP_MEMBER:
        return ("outside", g, dist.get_rank(g), dist.get_world_size(g))
    ranks = dist.get_process_group_ranks(g)
    return {"rank": dist.get_rank(g), "size": dist.get_world_size(g), "ranks": ranks, "backend": dist.get_backend(g),
            "name": (g.name(), g.group_name, g.group_desc, g.rank(), g.size()),
            "group ranks": [dist.get_group_rank(g, r) for r in ranks],
            "global ranks": [dist.get_global_rank(g, i) for i in range(len(ranks))],
            "not a member": (_error(lambda: dist.get_group_rank(g, world + 5)),
                             _error(lambda: dist.get_global_rank(g, len(ranks))))}


def _groups(rank, world, libname):
    lib, dist = _libs(libname)
    out = {}
    dist.init_process_group()
    odd = [r for r in range(world) if r % 2]
    # first: the hashed name of a group made by its members alone counts the groups each member is in
    local = dist.new_group(odd, use_local_synchronization=True) if rank in odd or rank == 0 else "not called"
    out["local"] = _describe(dist, local, world) if local != "not called" else local
    if rank in odd:
        out["local sum"] = _summed(lib, dist, rank, local)
    g_all = dist.new_group()
    g_odd = dist.new_group(odd, group_desc="odd ranks")
    g_back = dist.new_group([world - 1, 0], sort_ranks=False)
    g_gloo = dist.new_group(list(reversed(range(world))), backend="gloo", timeout=T(seconds=60))
    for name, g in (("all", g_all), ("odd", g_odd), ("back", g_back), ("gloo", g_gloo)):
        out[name] = _describe(dist, g, world)
    out["pg count"] = dist.get_pg_count()
    out["sum all"] = _summed(lib, dist, rank, g_all)
    if rank in odd:
        out["sum odd"] = _summed(lib, dist, rank, g_odd)
    if rank in (0, world - 1):
        out["sum back"] = _summed(lib, dist, rank, g_back)
    out["errors"] = [_error(call) for call in (
        lambda: dist.new_group([0, 0]), lambda: dist.new_group([world]), lambda: dist.new_group([-1]),
        lambda: dist.new_group(list(range(world + 1))), lambda: dist.new_group(timeout=5),
        lambda: dist.get_backend(dist.GroupMember.NON_GROUP_MEMBER), lambda: dist.new_subgroups(0),
        lambda: dist.new_subgroups(world + 1), lambda: dist.new_subgroups(3) if world == 4 else "skip",
        lambda: dist.new_subgroups_by_enumeration([]), lambda: dist.new_subgroups(),
        lambda: dist.new_subgroups_by_enumeration([[0, 1], [1]]))]
    out["pg count after errors"] = dist.get_pg_count()
    mine, subgroups = dist.new_subgroups(2)
    out["subgroups"] = (_describe(dist, mine, world), len(subgroups), _summed(lib, dist, rank, mine))
    mine, subgroups = dist.new_subgroups_by_enumeration([[0], list(range(2, world)) or [1]])
    out["enumerated"] = (_describe(dist, mine, world), len(subgroups))
    out["pg count at the end"] = dist.get_pg_count()
    dist.barrier()
    dist.destroy_process_group(g_odd)
    out["odd destroyed"] = (_error(lambda: dist.get_rank(g_odd)), _error(lambda: dist.destroy_process_group(g_odd)),
                            dist.get_pg_count(), _summed(lib, dist, rank, g_all))
    dist.barrier()
    return out


@needs_torch
@pytest.mark.parametrize("world", [2, 4])
def test_groups(ranks, world):
    results = {name: ranks(world).run(_groups, name) for name, _ in LIBS}
    assert results["ember"] == results["torch"]
    assert results["ember"][1]["sum odd"] == [sum(r + 1 for r in range(world) if r % 2)] * 2


def _init_barrier(rank, world, libname):
    lib, dist = _libs(libname)
    dist.init_process_group("gloo")
    local = dist.new_group([0, 1], use_local_synchronization=True) if rank < 2 else None
    g = dist.new_group([0, world - 1])
    return dist.get_pg_count(), dist.get_rank(g), dist.get_rank(local) if local is not None else None


@needs_torch
def test_init_barrier(ranks):
    """TORCH_DIST_INIT_BARRIER=1: init and new_group also wait for every rank on the store."""
    env = {"TORCH_DIST_INIT_BARRIER": "1"}
    results = {name: ranks(4).run(_init_barrier, name, env=env) for name, _ in LIBS}
    assert results["ember"] == results["torch"]


# -------------------------------------------------------------------------------------------- in this process alone

@contextlib.contextmanager
def _environ(**values):
    saved = dict(os.environ)
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _before_init(dist):
    return (dist.is_initialized(), dist.group.WORLD, dist.GroupMember.WORLD, dist.get_pg_count(),
            [_error(call) for call in (dist.get_rank, dist.get_world_size, dist.get_backend, dist.new_group,
                                       dist.destroy_process_group, lambda: dist.get_process_group_ranks(None))])


def _init_errors(dist, tmp):
    out = []
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1", "RANK": "0", "WORLD_SIZE": "1"}
    for missing in env:
        with _environ(**env):
            del os.environ[missing]
            try:
                dist.init_process_group("gloo")
            except ValueError as e:
                out.append(("env", missing, missing in str(e) and "env:// rendezvous" in str(e)))
    store = dist.HashStore()
    for kwargs in ({"store": store}, {"store": store, "world_size": 1}, {"store": store, "init_method": "env://"},
                   {"init_method": "foo://x"}, {"timeout": 5, "store": store, "world_size": 1, "rank": 0},
                   {"init_method": "tcp://127.0.0.1", "rank": 0, "world_size": 1},
                   {"init_method": "tcp://127.0.0.1:1"}, {"init_method": f"file://{tmp}"},
                   {"init_method": "file://", "rank": 0, "world_size": 1}, {"rank": "0", "world_size": 1},
                   {"init_method": "tcp://127.0.0.1:70000", "rank": 0, "world_size": 1},
                   {"init_method": "tcp://127.0.0.1:1?rank=0", "rank": 0, "world_size": 1}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append((sorted(kwargs), _error(lambda: dist.init_process_group("gloo", **kwargs))))  # noqa: B023
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out.append(("unknown backend", _error(lambda: dist.init_process_group("foo", store=store, world_size=1,
                                                                               rank=0))))
    out.append(("state after errors", dist.is_initialized(), dist.get_pg_count()))
    return out


def _single(dist, backend, store):
    dist.init_process_group(backend, store=store, world_size=1, rank=0)
    try:
        pg = dist.group.WORLD
        return (dist.get_backend(), dist.get_backend_config(), pg.name(), pg.group_name, dist.get_pg_count(),
                _error(lambda: dist.init_process_group("gloo", store=store, world_size=1, rank=0)))
    finally:
        dist.destroy_process_group()


@needs_torch
def test_in_one_process(tmp_path):
    results = {}
    for name, dist in LIBS:
        results[name] = [_before_init(dist), _init_errors(dist, tmp_path / name)]
        for backend in ("gloo", None, "cpu:gloo", "GLOO"):
            results[name].append(_single(dist, backend, dist.HashStore()))
        results[name].append(_before_init(dist))
    assert results["ember"] == results["torch"]


@needs_torch
def test_init_timeout():
    """A missing rank makes init fail after the timeout with the store's error."""
    for _, dist in LIBS:
        with pytest.raises(dist.DistStoreError):
            dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=2,
                                    timeout=T(milliseconds=500))
        assert not dist.is_initialized()


@needs_torch
def test_names_and_levels(monkeypatch):
    for _, dist in LIBS:
        assert (dist.Backend("GLOO"), dist.Backend("Foo"), dist.Backend.NCCL, dist.Backend.UNDEFINED) == \
            ("gloo", "foo", "nccl", "undefined")
        with pytest.raises(ValueError):
            dist.Backend(3)
        assert [dist.get_default_backend_for_device(d) for d in ("cpu", "cuda")] == ["gloo", "nccl"]
        with pytest.raises(ValueError):
            dist.get_default_backend_for_device("meta")
        assert (dist.is_gloo_available(), dist.is_nccl_available(), dist.is_mpi_available(),
                dist.is_ucc_available(), dist.is_xccl_available()) == (True, False, False, False, False)
        assert [dist.is_backend_available(b) for b in ("gloo", "nccl", "mpi", "undefined", "foo", "cpu:gloo",
                                                       "cpu:gloo,cuda:nccl")] == \
            [True, False, False, True, False, True, False]
        assert dist.default_pg_timeout == T(minutes=30)
        assert list(dist.DebugLevel.__members__) == ["OFF", "INFO", "DETAIL"]
        assert int(dist.DebugLevel.DETAIL) == 2 and dist.DebugLevel.DETAIL != 2
        for value, level in (("detail", "DETAIL"), ("INFO", "INFO"), ("OFF", "OFF")):
            monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", value)
            dist.set_debug_level_from_env()
            assert dist.get_debug_level() == getattr(dist.DebugLevel, level)
        monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "bogus")
        with pytest.raises(ValueError, match="must be OFF, INFO, or DETAIL"):
            dist.set_debug_level_from_env()
        dist.set_debug_level(dist.DebugLevel.OFF)
        with pytest.raises(TypeError):
            dist.set_debug_level(1)
        monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
        monkeypatch.delenv("LOCAL_RANK", raising=False)
        assert not dist.is_torchelastic_launched()
        with pytest.raises(RuntimeError, match="LOCAL_RANK"):
            dist.get_node_local_rank()
        assert dist.get_node_local_rank(fallback_rank=3) == 3
        monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job")
        monkeypatch.setenv("LOCAL_RANK", "2")
        assert dist.is_torchelastic_launched() and dist.get_node_local_rank(fallback_rank=3) == 2
        assert dist.GroupMember.NON_GROUP_MEMBER == -100


@needs_torch
def test_rendezvous_handlers():
    for _, dist in LIBS:
        with pytest.raises(RuntimeError, match="already registered"):
            dist.register_rendezvous_handler("env", lambda url, **kw: iter(()))
        with pytest.raises(RuntimeError):
            dist.rendezvous(5)
        with pytest.raises(AssertionError):
            next(dist.rendezvous("tcp://127.0.0.1:1?rank=0", rank=0))
    store = edist.HashStore()
    edist.register_rendezvous_handler("ember-test", lambda url, **kw: iter([(store, 0, 1)]))
    assert next(edist.rendezvous("ember-test://x")) == (store, 0, 1)


class _Dummy:
    """A third-party backend: records its construction and shutdown."""
    made = []

    def __init__(self, *args):
        self.args, self.down = args, False
        _Dummy.made.append(self)

    def shutdown(self):
        self.down = True


def test_registered_backend():
    with pytest.warns(UserWarning, match="Device capability of dummy unspecified"):
        edist.Backend.register_backend("dummy", _Dummy)
    edist.Backend.register_backend("dummyx", lambda options, pg_options: _Dummy(options, pg_options),
                                   extended_api=True, devices=["cpu"])
    for name in ("dummy", "dummyx"):
        edist.init_process_group(name, store=edist.HashStore(), world_size=1, rank=0, pg_options="opts")
        pg, made = edist.group.WORLD, _Dummy.made[-1]
        assert edist.get_backend() == name and pg.backend is made and edist.is_backend_available(name)
        assert pg.name() == name and edist.Backend(name.upper()) == name
        if name == "dummyx":
            options, pg_options = made.args
            assert (options.group_rank, options.group_size, options.group_id, pg_options) == (0, 1, "0", "opts")
        else:
            assert made.args[1:] == (0, 1, T(minutes=30))
        edist.destroy_process_group()
        assert made.down


def test_rank_prefix_on_uncaught_errors():
    edist.init_process_group("gloo", store=edist.HashStore(), world_size=1, rank=0)
    try:
        err, sys.stderr = sys.stderr, io.StringIO()
        try:
            sys.excepthook(ValueError, ValueError("boom"), None)
            text = sys.stderr.getvalue()
        finally:
            sys.stderr = err
        assert text.startswith("[rank0]: ") and "[rank0]: ValueError: boom" in text
    finally:
        edist.destroy_process_group()


@needs_torch
def test_namespace():
    """The process-group names of torch.distributed exist in ember.distributed."""
    names = ("Backend", "BackendConfig", "DebugLevel", "GroupMember", "ProcessGroup", "Store", "TCPStore",
             "FileStore", "HashStore", "PrefixStore", "default_pg_timeout", "destroy_process_group", "get_backend",
             "get_backend_config", "get_debug_level", "get_default_backend_for_device", "get_global_rank",
             "get_group_rank", "get_node_local_rank", "get_pg_count", "get_process_group_ranks", "get_rank",
             "get_world_size", "group", "init_process_group", "is_available", "is_backend_available",
             "is_gloo_available", "is_initialized", "is_mpi_available", "is_nccl_available",
             "is_torchelastic_launched", "is_ucc_available", "is_xccl_available", "new_group", "new_subgroups",
             "new_subgroups_by_enumeration", "register_rendezvous_handler", "rendezvous", "set_debug_level",
             "set_debug_level_from_env", "DistError", "DistBackendError", "DistNetworkError", "DistStoreError",
             "QueueEmptyError")
    assert [n for n in names if not hasattr(edist, n)] == []
    assert edist.is_available() and np.all([hasattr(tdist, n) for n in names])
