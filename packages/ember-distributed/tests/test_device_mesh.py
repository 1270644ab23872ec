"""DeviceMesh / init_device_mesh, Logger, record_comm and shrink_group against torch.distributed with gloo: the same
program runs under torch and under ember on the rank processes (2 and 4 ranks) and the results are compared."""
import importlib
import pickle
import threading
import warnings

import pytest
from oracle import needs_torch, torch_module

import ember
import ember.distributed as edist

tdist = torch_module("torch.distributed")


def _libs(libname):
    return (importlib.import_module(libname), importlib.import_module(libname + ".distributed"),
            importlib.import_module(libname + ".distributed.device_mesh"))


def _outcome(call):
    """``call()``'s result, or its exception as (class name, args) (messages compared with torch's)."""
    try:
        return call()
    except Exception as e:  # noqa: BLE001 - compared with torch's
        return type(e).__name__, tuple(str(a) for a in e.args)


def _summed(lib, dist, rank, group):
    x = lib.full((2,), float(rank + 1))
    dist.all_reduce(x, group=group)
    return x.tolist()


def _groups(dist, mesh):
    return [(g.group_name, g.group_desc, dist.get_process_group_ranks(g)) for g in mesh.get_all_groups()]


# ------------------------------------------------------------------------------------------------ 2-D mesh, 4 ranks

def _mesh_2d(rank, world, libname):
    lib, dist, dm = _libs(libname)
    warnings.simplefilter("ignore")  # torch's deprecation of slicing a flattened dim from the root
    m = dm.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))  # initialises the default group (env://)
    out = {"repr": repr(m), "mesh": m.mesh.tolist(), "dtype": str(m.mesh.dtype).split(".")[-1],
           "coordinate": m.get_coordinate(),
           "sizes": (m.size(), m.size(0), m.size(1), m.ndim, m.shape, m.get_rank(), m.device_type, m.mesh_dim_names),
           "groups": _groups(dist, m), "local": (m.get_local_rank("dp"), m.get_local_rank(1)),
           "sum dp": _summed(lib, dist, rank, m.get_group("dp")), "sum tp": _summed(lib, dist, rank, m.get_group(1))}
    tp, dp = m["tp"], m["dp"]
    out["tp"] = (repr(tp), tp.mesh.tolist(), tp.get_group().group_name, tp.get_local_rank(), tp.get_coordinate(),
                 tp.get_group() is m.get_group("tp"))
    out["dp"] = (repr(dp), dp.mesh.tolist(), dp.get_group().group_name, dp.get_local_rank(), dp.get_coordinate())
    out["identity slice"] = m["dp", "tp"] is m
    out["equality"] = (m["tp"] == tp, hash(m["tp"]) == hash(tp), tp == dp, m == m["dp", "tp"])
    flat = m._flatten()
    out["flatten"] = (repr(flat), flat.mesh.tolist(), flat.get_group().group_name, flat.get_local_rank(),
                      m._flatten() is flat, m.get_group("dp_tp") is flat.get_group(), repr(m["dp_tp"]),
                      _summed(lib, dist, rank, flat.get_group()))
    out["tp flattened"] = (tp._flatten() is tp, repr(tp._flatten("tp_only")), tp._flatten("tp_only").mesh.tolist())
    with m as entered:
        out["entered"] = dm._mesh_resources.get_current_mesh() is entered
    out["unpickled"] = pickle.loads(pickle.dumps(tp)) == tp
    out["errors"] = [_outcome(f) for f in (
        lambda: m.get_group(), lambda: m.get_group("xx"), lambda: m.get_group(5), lambda: m.get_local_rank(),
        lambda: m["tp", "dp"], lambda: m["xx"], lambda: m[0], lambda: m._flatten("dp"),
        lambda: dp._flatten("dp_tp"), lambda: dm.init_device_mesh("cpu", (2, 4)),
        lambda: dm.init_device_mesh("cpu", (2, 2), mesh_dim_names=("a", "a")),
        lambda: dm.init_device_mesh("cpu", (2, 2), mesh_dim_names=("a",)),
        lambda: dm.init_device_mesh("cuda:0", (4,)), lambda: dm.DeviceMesh("cpu", [[0, 1], [2, 3]])["a"],
        lambda: dm.DeviceMesh("cpu", [[0, 1], [2, 3]])._flatten(),
        lambda: dm._mesh_resources.get_current_mesh())]
    # an explicit grid (columns first), a 3-D one with a size-1 dimension, one smaller than the world
    x = dm.DeviceMesh("cpu", lib.tensor([[0, 2], [1, 3]]), mesh_dim_names=("a", "b"))
    out["explicit"] = (repr(x), x.get_coordinate(), x.get_local_rank("a"), _groups(dist, x), x["b"].mesh.tolist(),
                       _summed(lib, dist, rank, x.get_group("a")))
    cube = dm.init_device_mesh("cpu", (2, 1, 2), mesh_dim_names=("a", "b", "c"))
    ac = cube["a", "c"]
    out["3-D"] = (repr(cube), cube.get_coordinate(), repr(ac), ac.mesh.tolist(), repr(cube["b"]),
                  cube["b"].get_local_rank(), repr(ac._flatten()), ac._flatten().get_group().group_name)
    half = dm.init_device_mesh("cpu", (2,))
    out["half"] = (repr(half), half.mesh.tolist(), half.get_coordinate(),
                   dist.get_process_group_ranks(half.get_group()) if rank < 2 else None)
    # meshes over existing groups
    one = dm.DeviceMesh.from_group(m.get_group("dp"), "cpu", mesh_dim_names=("x",))
    two = dm.DeviceMesh.from_group([m.get_group("dp"), m.get_group("tp")], "cpu", mesh=[[0, 1], [2, 3]],
                                   mesh_dim_names=("a", "b"))
    out["from_group"] = (repr(one), one.mesh.tolist(), one.get_group() is m.get_group("dp"), repr(two),
                         two.get_local_rank("b"), two.get_coordinate())
    out["from_group errors"] = [_outcome(f) for f in (
        lambda: dm.DeviceMesh.from_group(m.get_group("dp"), "cpu", mesh=[5, 6]),
        lambda: dm.DeviceMesh.from_group([m.get_group("dp")], "cpu"),
        lambda: dm.DeviceMesh.from_group([m.get_group("dp")], "cpu", mesh=[0, 1]),
        lambda: dm.DeviceMesh.from_group([m.get_group("dp")], "cpu", mesh=[[0, 1]], mesh_dim_names=("a",)),
        lambda: dm.DeviceMesh.from_group([], "cpu", mesh=[[0, 1]], mesh_dim_names=("a",)))]
    return out


@needs_torch
def test_2d_mesh_matches_torch_on_4_ranks(ranks):
    pool = ranks(4)
    ember_out, torch_out = pool.run(_mesh_2d, "ember"), pool.run(_mesh_2d, "torch")
    for rank in range(4):
        for key, expected in torch_out[rank].items():
            assert ember_out[rank][key] == expected, f"rank {rank}, {key}"
    # and what that means, on rank 3 (coordinates (1, 1)): its tp group is {2, 3}, its dp group {1, 3}
    out = ember_out[3]
    assert out["mesh"] == [[0, 1], [2, 3]] and out["coordinate"] == (1, 1)
    assert out["sum tp"] == [7.0, 7.0] and out["sum dp"] == [6.0, 6.0] and out["flatten"][-1] == [10.0, 10.0]


# ------------------------------------------------------------------------------------------------ 1-D mesh, 2 ranks

def _mesh_1d(rank, world, libname):
    lib, dist, dm = _libs(libname)
    m = dm.init_device_mesh("cpu", (2,), mesh_dim_names=("dp",))
    out = {"repr": repr(m), "world group": m.get_group() is dist.group.WORLD, "local": m.get_local_rank(),
           "sum": _summed(lib, dist, rank, m.get_group("dp")), "flatten self": m._flatten() is m}
    # a reversed grid spanning the world is served by the default group (PyTorch's choice): its local rank is the
    # global rank, while the coordinate is the position in the grid
    rev = dm.DeviceMesh("cpu", [1, 0])
    out["reversed"] = (repr(rev), rev.get_local_rank(), rev.get_coordinate(), rev.get_group() is dist.group.WORLD)
    # a backend override makes a group of its own even along a dimension spanning the world
    own = dm.init_device_mesh("cpu", (2,), mesh_dim_names=("dp",), backend_override={"dp": "gloo"})
    group = own.get_group()
    out["override"] = (group is dist.group.WORLD, group.group_name, group.group_desc, _summed(lib, dist, rank, group))
    out["errors"] = [_outcome(f) for f in (
        lambda: dm.init_device_mesh("cpu", (3,)), lambda: m.get_group("tp"), lambda: m[("dp", "dp")],
        lambda: dm.init_device_mesh("cpu", (2,), mesh_dim_names=("dp",), backend_override={"x": "gloo"}),
        lambda: dm.init_device_mesh("cpu", (2,), mesh_dim_names=("dp",), backend_override={0: "gloo", "dp": "gloo"}))]
    return out


@needs_torch
def test_1d_mesh_matches_torch_on_2_ranks(ranks):
    pool = ranks(2)
    ember_out, torch_out = pool.run(_mesh_1d, "ember"), pool.run(_mesh_1d, "torch")
    assert ember_out == torch_out
    assert ember_out[1]["reversed"][1:] == (1, (0,), True)


def test_mesh_dims_are_edist_names():
    assert edist.DeviceMesh is edist.device_mesh.DeviceMesh
    assert edist.init_device_mesh is edist.device_mesh.init_device_mesh


@pytest.mark.gpu
def test_cuda_mesh_groups_reduce_gpu_tensors(ranks):
    assert ranks(2).run(_cuda_mesh) == [[1.0, 1.0], [1.0, 1.0]]


def _cuda_mesh(rank, world):
    m = edist.init_device_mesh("cuda", (2,), mesh_dim_names=("dp",))
    x = ember.full((2,), 0.5, device="cuda")
    edist.all_reduce(x, group=m.get_group("dp"))
    return x.cpu().tolist()


# ---------------------------------------------------------------------------------------------------- shrink_group

def _shrink_errors(rank, world, libname):
    lib, dist, _ = _libs(libname)
    dist.init_process_group("gloo")
    alone, _ = dist.new_subgroups_by_enumeration([[0], [1]])
    return [_outcome(f) for f in (lambda: dist.shrink_group([1]), lambda: dist.shrink_group([]),
                                  lambda: dist.shrink_group((1,)), lambda: dist.shrink_group([1], shrink_flags=7),
                                  lambda: dist.shrink_group([0], group=alone))]


@needs_torch
def test_shrink_group_errors_match_torch(ranks):
    pool = ranks(2)
    assert pool.run(_shrink_errors, "ember") == pool.run(_shrink_errors, "torch")


class _Shrinkable:
    """A backend that can shrink: ember's CPU backend, and for the survivors a new one on the same store."""
    supports_shrinking = True

    def __init__(self, store, rank, size, timeout):
        from ember.distributed import _backends
        self._made = store, rank, size, timeout
        self._inner = _backends.create("gloo", store, rank, size, timeout, list(range(size)))

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def shrink(self, excluded, flags, options):
        from ember.distributed import PrefixStore
        store, rank, size, timeout = self._made
        kept = [r for r in range(size) if r not in excluded]
        return _Shrinkable(PrefixStore("shrunk/", store), kept.index(rank), len(kept), timeout)


def _shrink_default(rank, world):
    if "SHRINKABLE" not in edist.Backend._plugins:
        edist.Backend.register_backend("shrinkable", _Shrinkable, devices=["cpu"])
    edist.init_process_group("shrinkable")
    other = edist.new_group([0, 1])
    if rank == 1:  # the rank left out: it takes no part
        return None
    pg = edist.shrink_group([1])
    return {"default": pg is edist.group.WORLD, "rank": edist.get_rank(), "world": edist.get_world_size(),
            "ranks": edist.get_process_group_ranks(pg), "desc": pg.group_desc, "backend": edist.get_backend(),
            "sum": _summed(ember, edist, rank, None), "others gone": other not in edist.distributed_c10d._world.pg_map}


def test_shrink_default_group_with_a_backend_that_can(ranks):
    results = ranks(4).run(_shrink_default)
    assert results[1] is None
    for new_rank, out in enumerate(results[i] for i in (0, 2, 3)):
        assert out == {"default": True, "rank": new_rank, "world": 3, "ranks": [0, 2, 3], "desc": "default:shrunken",
                       "backend": "shrinkable", "sum": [8.0, 8.0], "others gone": True}


# ------------------------------------------------------------------------------------------------------ record_comm

def _names(dist, get):
    seen = [get()]
    with dist.record_comm("outer"):
        seen.append(get())
        with dist.record_comm("inner"):
            seen.append(get())
            other = []
            t = threading.Thread(target=lambda: other.append(get()))
            t.start()
            t.join()
            seen.append(other[0])
        seen.append(get())
    seen.append(get())
    with pytest.raises(TypeError):
        with dist.record_comm(5):
            pass
    return seen + [get()]


def test_record_comm_names_nest_per_thread():
    assert _names(edist, edist._comm_name._get_comm_profiling_name) == ["", "outer", "inner", "", "outer", "", ""]


@needs_torch
def test_record_comm_as_torch():
    import torch
    assert _names(tdist, torch._C._distributed_c10d._get_comm_profiling_name) == \
        _names(edist, edist._comm_name._get_comm_profiling_name)


# ----------------------------------------------------------------------------------------------------------- Logger

def _logged(rank, world, libname):
    lib, dist, _ = _libs(libname)
    dist.init_process_group("gloo")
    lib.manual_seed(0)
    ddp = lib.nn.parallel.DistributedDataParallel(lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Linear(4, 2)))
    logger = dist.Logger(ddp.reducer)
    fresh = logger._get_ddp_logging_data()
    out = {"fresh": (fresh.strs_map, fresh.ints_map)}
    logger.set_construction_data_and_log("Net", [], -1, True, False, False)
    built = logger._get_ddp_logging_data()
    out["built"] = (built.strs_map, built.ints_map)
    logger.set_error_and_log("bad thing")
    logger._set_comm_hook_name("my hook")
    logger._set_uneven_input_join()
    logger._set_static_graph()
    ddp(lib.ones(2, 3)).sum().backward()
    logger.set_runtime_stats_and_log()
    ran = logger._get_ddp_logging_data()
    out["ran"] = (ran.strs_map, ran.ints_map)
    out["bad"] = _outcome(lambda: dist.Logger(5))[0]
    return out


def _comparable(entries):
    """The entries but timings (ember's reducer does not time its phases), gloo's and the run's own port."""
    skip = ("time", "gloo_num_threads", "prev_iteration_grad_ready_order_indices", "master_port")
    return {k: v for k, v in entries.items() if not any(s in k for s in skip)}


@needs_torch
def test_logger_matches_torch(ranks):
    pool = ranks(2)
    ember_out, torch_out = pool.run(_logged, "ember"), pool.run(_logged, "torch")
    for rank in range(2):
        e, t = ember_out[rank], torch_out[rank]
        assert e["fresh"] == t["fresh"] == ({}, {})
        assert e["bad"] == t["bad"] == "TypeError"
        for stage in ("built", "ran"):
            assert _comparable(e[stage][0]) == _comparable(t[stage][0]), stage
            assert _comparable(e[stage][1]) == _comparable(t[stage][1]), stage
        assert list(e["ran"][1]) == sorted(e["ran"][1])
        assert e["built"][1]["gloo_num_threads"] == 1  # ember's one communication thread per group
