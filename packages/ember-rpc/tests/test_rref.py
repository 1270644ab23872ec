"""RRefs on real worker processes: the value API, proxies, sharing with other workers, and the reference counting
(an owner holds no value once no worker refers to it)."""
import gc
import threading
import time

import numpy as np
import pytest

import ember
import ember.distributed.rpc as rpc


def add(a, b):
    return a + b


def raise_value_error(text):
    raise ValueError(text)


_released = threading.Event()


def wait_for_release(limit):
    return _released.wait(limit)


def release():
    _released.set()


class Counter:
    def __init__(self, start):
        self.value = start

    def increment(self, by):
        self.value += by
        return self.value


def owned_count():
    return rpc.api._owned_count()


def owner_side(rref):
    return rref.is_owner(), rref.local_value().numpy(), rref.to_here().numpy()


def user_side(rref):
    return rref.is_owner(), rref.owner_name(), rref.to_here().numpy()


_kept = []


def keep(rref):
    _kept.append(rref)


def fetch_kept():
    return _kept[0].to_here().numpy()


def drop_kept():
    _kept.clear()
    gc.collect()


def made_here():
    return rpc.RRef(ember.ones(3))


def _wait_owned(owner, expected, limit=20.0):
    """The owner's count of values once it reaches ``expected`` (deletions travel in batches), or the last seen."""
    end = time.monotonic() + limit
    n = rpc.rpc_sync(owner, owned_count)
    while n != expected and time.monotonic() < end:
        time.sleep(0.02)
        n = rpc.rpc_sync(owner, owned_count)
    return n


def _rrefs(rank, world):
    _released.clear()
    _kept.clear()
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world)
    out = {}
    if rank == 0:
        x = ember.arange(4.0)
        rref = rpc.remote("worker1", add, args=(x, 1))
        out["to_here"] = rref.to_here().numpy()
        out["api"] = (rref.owner(), rref.owner_name(), rref.is_owner(), rref.confirmed_by_owner(), repr(rref))
        with pytest.raises(RuntimeError, match="owner"):
            rref.local_value()
        with pytest.raises(RuntimeError, match="pickled into an RPC"):
            import pickle
            pickle.dumps(rref)
        out["at_owner"] = rpc.rpc_sync("worker1", owner_side, args=(rref,))
        out["at_third"] = rpc.rpc_sync("worker2", user_side, args=(rref,))
        counter = rpc.remote("worker1", Counter, args=(10,))
        out["proxies"] = (counter.rpc_sync().increment(1), counter.rpc_async().increment(2).wait(),
                          counter.remote().increment(3).to_here(), counter.rpc_sync().increment(0))
        local = rpc.RRef(ember.ones(2))
        out["local"] = (local.is_owner(), local.local_value().numpy(), local.confirmed_by_owner(),
                        rpc.rpc_sync("worker1", user_side, args=(local,)))
        failed = rpc.remote("worker1", raise_value_error, args=("made on the owner",))
        try:
            failed.to_here()
        except ValueError as e:
            out["failed"] = str(e)
        late = rpc.remote("worker1", wait_for_release, args=(30,), timeout=0.2)
        try:
            late.to_here()
        except RuntimeError as e:
            out["timed_out"] = str(e)
        rpc.rpc_sync("worker1", release)
        # a user shares its reference with a third worker and lets go of it: the third keeps the value alive
        shared = rpc.remote("worker1", add, args=(x, 2))
        rpc.rpc_sync("worker2", keep, args=(shared,))
        del shared
        gc.collect()
        out["kept"] = rpc.rpc_sync("worker2", fetch_kept)
        rpc.rpc_sync("worker2", drop_kept)
        del rref, counter, failed, late
        gc.collect()
        # 1,000 remotes, half of them fetched: the owner holds none of them once they are dropped
        many = [rpc.remote("worker1", add, args=(i, 1)) for i in range(1000)]
        out["many"] = sum(r.to_here() for r in many[::2])
        out["owned_before"] = rpc.rpc_sync("worker1", owned_count)
        del many
        gc.collect()
        out["owned_after"] = _wait_owned("worker1", 0)
        out["local_owned"] = (owned_count(), local.local_value().numpy())  # worker 0 still holds `local`
        # an RRef made by a call to this worker itself: its maker's reference is gone before the reply is read
        made = rpc.rpc_sync("worker0", made_here)
        out["made_here"] = made.local_value().numpy()
        del local, made
        gc.collect()
        out["local_after"] = _wait_owned("worker0", 0)
    rpc.shutdown()
    return out


def test_rrefs(workers):
    out = workers(3).run(_rrefs)[0]
    np.testing.assert_array_equal(out["to_here"], [1, 2, 3, 4])
    owner, owner_name, is_owner, confirmed, text = out["api"]
    assert (owner, owner_name, is_owner, confirmed) == (rpc.WorkerInfo("worker1", 1), "worker1", False, True)
    assert text.startswith("UserRRef(RRefId = ")
    is_owner, local_value, here = out["at_owner"]
    assert is_owner
    np.testing.assert_array_equal(local_value, [1, 2, 3, 4])
    np.testing.assert_array_equal(here, [1, 2, 3, 4])
    is_owner, owner_name, here = out["at_third"]
    assert not is_owner and owner_name == "worker1"
    np.testing.assert_array_equal(here, [1, 2, 3, 4])
    assert out["proxies"] == (11, 13, 16, 16)
    is_owner, value, confirmed, (remote_is_owner, remote_owner, remote_value) = out["local"]
    assert is_owner and confirmed and not remote_is_owner and remote_owner == "worker0"
    np.testing.assert_array_equal(value, [1, 1])
    np.testing.assert_array_equal(remote_value, [1, 1])
    assert "ValueError('made on the owner')" in out["failed"]
    assert "RPC ran for more than set timeout (200 ms)" in out["timed_out"]
    np.testing.assert_array_equal(out["kept"], [2, 3, 4, 5])
    assert out["many"] == sum(i + 1 for i in range(0, 1000, 2))
    assert out["owned_before"] >= 1000
    assert out["owned_after"] == 0
    assert out["local_owned"][0] == 1
    np.testing.assert_array_equal(out["made_here"], [1.0, 1.0, 1.0])
    assert out["local_after"] == 0
