"""The RPC agent on real worker processes (loopback): calls, errors, timeouts, async execution, shutdown."""
import os
import pickle
import threading
import time

import numpy as np
import pytest

import ember
import ember.distributed.rpc as rpc
from ember.futures import Future


def _init(rank, world, **options):
    opts = rpc.TensorPipeRpcBackendOptions(**options) if options else None
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world, rpc_backend_options=opts)


def add(a, b):
    return a + b


def raise_value_error(text):
    raise ValueError(text)


def sleep_and_return(seconds, value):
    time.sleep(seconds)
    return value


_released = threading.Event()


def wait_for_release(limit):
    """Blocks until ``release`` is called (or ``limit`` seconds pass); whether it was released."""
    return _released.wait(limit)


def release():
    _released.set()


def is_released():
    return _released.is_set()


class FailsOnWorker1:
    """Pickles on any worker, unpickles only off worker 1 (a request worker 1 cannot read)."""

    def __reduce__(self):
        return _load_unless_worker1, ()


def _load_unless_worker1():
    if rpc.get_worker_info().name == "worker1":
        raise ImportError("this class cannot be loaded on worker1")
    return "loaded"


def return_unloadable_on_worker0():
    return FailsOnWorker0()


class FailsOnWorker0:
    def __reduce__(self):
        return _load_unless_worker0, ()


def _load_unless_worker0():
    if rpc.get_worker_info().name == "worker0":
        raise ImportError("this result cannot be loaded on worker0")
    return "loaded"


@rpc.functions.async_execution
def async_add_chained(to, x, y, z):
    return rpc.rpc_async(to, ember.add, args=(x, y)).then(lambda fut: fut.wait() + z)


class AsyncExecutionClass:
    @staticmethod
    @rpc.functions.async_execution
    def static_async_add(to, x, y, z):
        return rpc.rpc_async(to, ember.add, args=(x, y)).then(lambda fut: fut.wait() + z)

    @classmethod
    @rpc.functions.async_execution
    def class_async_add(cls, to, x, y, z):
        ret_fut = Future()
        rpc.rpc_async(to, ember.add, args=(x, y)).then(lambda fut: ret_fut.set_result(fut.wait() + z))
        return ret_fut


def _calls(rank, world):
    _released.clear()
    _init(rank, world)
    out = {}
    if rank == 0:
        me, peer = rpc.get_worker_info(), rpc.get_worker_info("worker1")
        out["infos"] = (repr(me), peer.name, peer.id, me == rpc.get_worker_info("worker0"))
        x = ember.arange(6.0).reshape(2, 3)
        out["builtin"] = rpc.rpc_sync("worker1", ember.add, args=(x, 1)).numpy()
        out["user"] = rpc.rpc_sync(peer, add, args=(x, x)).numpy()
        out["by_rank"] = rpc.rpc_sync(1, add, kwargs={"a": 2, "b": 3})
        futs = [rpc.rpc_async("worker1", add, args=(i, 1)) for i in range(200)]
        out["async"] = sum(f.wait() for f in futs)
        out["self"] = rpc.rpc_sync("worker0", add, args=(1, 2))
        big = ember.ones(3 << 20)  # 12 MB: through shared memory
        out["big"] = float(rpc.rpc_sync("worker1", ember.mul, args=(big, 2)).sum())
        futs = [rpc.rpc_async("worker1", ember.mul, args=(ember.full((3 << 20,), float(i)), 2)) for i in range(3)]
        out["bigs"] = [float(f.wait()[-1]) for f in futs]  # several large messages in flight at once
        try:
            rpc.rpc_sync("worker1", raise_value_error, args=("the remote message",))
        except ValueError as e:
            out["error"] = str(e)
        try:
            rpc.rpc_sync("worker1", wait_for_release, args=(30,), timeout=0.2)
        except RuntimeError as e:  # while the callee still waits: the caller did not wait for it
            out["timeout"] = (str(e), rpc.rpc_sync("worker1", is_released))
        rpc.rpc_sync("worker1", release)
        out["no_timeout"] = rpc.rpc_sync("worker1", sleep_and_return, args=(0.3, 7), timeout=0)
        for name, fn, args in (("lambda", lambda: 1, ()), ("unknown", add, (1, 2)), ("callable", 3, ()),
                               ("callee_unpickle", add, (FailsOnWorker1(), 1))):
            try:
                rpc.rpc_sync("nobody" if name == "unknown" else "worker1", fn, args=args)
            except Exception as e:  # noqa: BLE001 - the type is compared below
                out[name] = (type(e).__name__, str(e))
        fut = rpc.rpc_async("worker1", return_unloadable_on_worker0)
        try:
            fut.wait()
        except Exception as e:  # noqa: BLE001
            out["caller_unpickle"] = (type(e).__name__, str(e))
    rpc.shutdown()
    return out


def test_calls_errors_and_timeouts(workers):
    out = workers(2).run(_calls)[0]
    assert out["infos"] == ("WorkerInfo(id=0, name=worker0)", "worker1", 1, True)
    np.testing.assert_array_equal(out["builtin"], np.arange(6.0).reshape(2, 3) + 1)
    np.testing.assert_array_equal(out["user"], 2 * np.arange(6.0).reshape(2, 3))
    assert out["by_rank"] == 5 and out["async"] == sum(range(1, 201)) and out["self"] == 3
    assert out["big"] == 2.0 * (3 << 20) and out["bigs"] == [0.0, 2.0, 4.0]
    assert out["error"].startswith("On WorkerInfo(id=1, name=worker1):\nValueError('the remote message')")
    msg, callee_released = out["timeout"]
    assert "RPC ran for more than set timeout (200 ms)" in msg and not callee_released
    assert out["no_timeout"] == 7
    assert out["lambda"][0] in ("PicklingError", "AttributeError")  # raised on the caller
    assert out["unknown"][0] == "RuntimeError" and "nobody" in out["unknown"][1]
    assert out["callable"] == ("TypeError", "function should be callable.")
    assert out["callee_unpickle"][0] == "RuntimeError" and "cannot be loaded on worker1" in out["callee_unpickle"][1]
    assert out["caller_unpickle"][0] == "RuntimeError"
    assert "cannot be loaded on worker0" in out["caller_unpickle"][1]


def _async_execution(rank, world):
    _init(rank, world)
    out = {}
    if rank == 0:
        one = ember.ones(2)
        out["chained"] = rpc.rpc_sync("worker1", async_add_chained, args=("worker2", one, 1, 1)).numpy()
        out["static"] = rpc.rpc_sync("worker1", AsyncExecutionClass.static_async_add,
                                     args=("worker2", one, 1, 2)).numpy()
        out["class"] = rpc.rpc_sync("worker1", AsyncExecutionClass.class_async_add,
                                    args=("worker2", one, 1, 2)).numpy()
        rref = rpc.remote("worker1", AsyncExecutionClass)
        out["proxy_sync"] = rref.rpc_sync().static_async_add("worker2", one, 1, 2).numpy()
        out["proxy_async"] = rref.rpc_async().static_async_add("worker2", one, 1, 2).wait().numpy()
        out["proxy_remote"] = rref.remote().static_async_add("worker2", one, 1, 2).to_here().numpy()
        # many async functions in flight, more than the callee's threads: none holds a thread while waiting
        futs = [rpc.rpc_async("worker1", async_add_chained, args=("worker2", one, i, 0)) for i in range(64)]
        out["many"] = [float(f.wait()[0]) for f in futs]
    rpc.shutdown()
    return out


def test_async_execution_three_workers(workers):
    out = workers(3).run(_async_execution)[0]
    np.testing.assert_array_equal(out["chained"], [3.0, 3.0])
    for key in ("static", "class", "proxy_sync", "proxy_async", "proxy_remote"):
        np.testing.assert_array_equal(out[key], [4.0, 4.0])
    assert out["many"] == [1.0 + i for i in range(64)]


def _graceful(rank, world):
    _init(rank, world)
    out = None
    if rank == 1:  # calls worker 0, which has already entered shutdown: it must still serve them
        time.sleep(0.3)
        out = [f.wait() for f in [rpc.rpc_async("worker0", sleep_and_return, args=(0.2, i)) for i in range(3)]]
        out.append(rpc.rpc_sync("worker0", add, args=(1, 1)))
    rpc.shutdown()
    return out


def test_graceful_shutdown_waits_for_every_worker(workers):
    assert workers(2).run(_graceful)[1] == [0, 1, 2, 2]


def _ungraceful(rank, world):
    _released.clear()
    _init(rank, world)
    if rank == 0:
        fut = rpc.rpc_async("worker1", wait_for_release, args=(1,))
        rpc.shutdown(graceful=False)  # returns although worker 1 is busy with its call
        try:
            fut.wait()
        except RuntimeError as e:
            return str(e)
    else:
        rpc.shutdown()  # returns once worker 0 is gone (its call is for nobody now)
        return _released.is_set()


def test_ungraceful_shutdown_returns_at_once(workers):
    err, released = workers(2).run(_ungraceful)
    assert "shut down" in err and not released


def _options_and_reinit(rank, world):
    _init(rank, world, num_worker_threads=2, rpc_timeout=5)
    with pytest.raises(RuntimeError, match="already initialized"):
        rpc.init_rpc("again", rank=rank, world_size=world)
    rpc.shutdown()
    # a second round in the same processes, meeting through a tcp:// init_method, TENSORPIPE named
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{os.environ['NEXT_PORT']}")
    rpc.init_rpc(f"worker{rank}", backend=rpc.BackendType.TENSORPIPE, rank=rank, world_size=world,
                 rpc_backend_options=options)
    value = rpc.rpc_sync(f"worker{1 - rank}", add, args=(rank, 10))
    rpc.shutdown()
    return value


def test_reinit_after_shutdown(workers):
    from ember.distributed._testing import free_port

    assert workers(2).run(_options_and_reinit, env={"NEXT_PORT": str(free_port())}) == [10, 11]


def test_options_validation():
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=8, rpc_timeout=20, init_method="tcp://127.0.0.1:1")
    assert (opts.num_worker_threads, opts.rpc_timeout, opts.init_method) == (8, 20.0, "tcp://127.0.0.1:1")
    assert opts.device_maps == {} and opts.devices == []
    with pytest.raises(ValueError, match="1-to-1"):
        rpc.TensorPipeRpcBackendOptions(device_maps={"w1": {0: 1, 1: 1}})
    opts = rpc.TensorPipeRpcBackendOptions(device_maps={"w1": {0: 1}})
    opts.set_device_map("w1", {1: 2})
    assert opts.device_maps["w1"] == {ember.device("cuda:0"): ember.device("cuda:1"),
                                      ember.device("cuda:1"): ember.device("cuda:2")}
    with pytest.raises(ValueError, match="1-to-1"):
        opts.set_device_map("w1", {0: 3})
    with pytest.raises(ValueError, match="CUDA devices"):
        rpc.TensorPipeRpcBackendOptions(devices=["cpu"])
    with pytest.raises(TypeError):
        rpc.TensorPipeRpcBackendOptions(rpc_timeout="soon")
    with pytest.raises(TypeError, match="BackendType"):
        rpc.init_rpc("w", backend="TENSORPIPE", rank=0, world_size=1)
    with pytest.raises(TypeError, match="RpcBackendOptions"):
        rpc.init_rpc("w", rank=0, world_size=1, rpc_backend_options={"rpc_timeout": 1})
    with pytest.raises(RuntimeError, match="not been initialized"):
        rpc.rpc_sync("w", add, args=(1, 2))
    with pytest.raises(RuntimeError, match="Worker name must match"):
        rpc.init_rpc("bad name!", rank=0, world_size=1)
    with pytest.raises(RuntimeError, match="world_size"):
        rpc.init_rpc("w", rank=0)
    assert repr(rpc.BackendType.TENSORPIPE) == "BackendType.TENSORPIPE"
    assert rpc.backend_registered("TENSORPIPE") and not rpc.backend_registered("NOPE")
    assert pickle.loads(pickle.dumps(rpc.WorkerInfo("w", 3))) == rpc.WorkerInfo("w", 3)


def test_import_ember_loads_no_rpc_nor_zmq():
    import subprocess
    import sys

    code = ("import sys, ember; print(sorted(m for m in sys.modules if m in ('zmq', 'ember.futures') or "
            "m.startswith('ember.distributed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
