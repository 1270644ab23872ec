"""The helpers torch.distributed.rpc's namespace exports beside its API (AllGatherStates, method_factory,
new_method): the same observable behaviour under torch and ember, on 2 real workers."""
import importlib
import importlib.util
import threading

HAS_TORCH = importlib.util.find_spec("torch") is not None


def add(a, b):
    return a + b


def names_job(rank, world, libname):
    lib = importlib.import_module(libname)
    rpc = importlib.import_module(f"{libname}.distributed.rpc")
    out = {}
    states = rpc.AllGatherStates()
    out["AllGatherStates"] = (sorted(vars(states)), states.gathered_objects,
                              isinstance(states.proceed_signal, threading.Event), states.proceed_signal.is_set())
    out["exported"] = [n in rpc.__all__ for n in ("AllGatherStates", "method_factory", "new_method")]
    made = rpc.method_factory("owner_name", "the owner's name")
    out["factory"] = (made.__name__, made.__qualname__, made.__doc__, rpc.new_method.__qualname__,
                      rpc.new_method.__doc__)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world)
    if rank == 0:
        # torch's methods work on its Python RRef class, which rpc.RRef(value) makes (rpc.remote returns the C++
        # class, on which they raise TypeError); ember has one RRef class, on which they always work
        local = rpc.RRef(lib.arange(3.0))
        out["new_method"] = rpc.new_method(local).numpy()  # RRef.to_here
        out["new_method with timeout"] = rpc.new_method(local, 10).numpy()
        out["owner_name"] = made(local)
        out["is_owner"] = rpc.method_factory("is_owner", "")(local)
        out["local_value"] = rpc.method_factory("local_value", "")(local).numpy()
        try:
            rpc.method_factory("no_such_method", "")(local)
        except AttributeError:
            out["unknown"] = "AttributeError"
        if libname == "ember":
            remote = rpc.remote("worker1", add, args=(lib.arange(3.0), 1))
            out["remote"] = (rpc.new_method(remote).tolist(), made(remote))
    rpc.shutdown()
    return out


def test_names_as_torch(workers):
    pool = workers(2)
    mine = pool.run(names_job, "ember", timeout=60)[0]
    assert mine.pop("remote") == ([1.0, 2.0, 3.0], "worker1")
    if HAS_TORCH:
        theirs = pool.run(names_job, "torch", timeout=60)[0]
        assert mine.keys() == theirs.keys()
        for key in mine:
            if key.startswith("new_method") or key == "local_value":
                assert mine[key].tolist() == theirs[key].tolist(), key
            else:
                assert mine[key] == theirs[key], key
    assert mine["new_method"].tolist() == [0.0, 1.0, 2.0] and mine["owner_name"] == "worker0"
    assert mine["factory"] == ("method", "method_factory.<locals>.method", None, "method_factory.<locals>.method", None)
    assert mine["is_owner"] is True and mine["unknown"] == "AttributeError"
