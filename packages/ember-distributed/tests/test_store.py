"""Stores against torch.distributed's: the same calls on torch's and on ember's stores give the same values and the
same exception types (in one process, and across 2 and 4 processes); then what the TCPStore must survive (many
clients, blocking waits, clients that vanish, a server that stops)."""
import datetime
import gc
import importlib
import marshal
import os
import socket
import struct
import threading

import pytest
from oracle import needs_torch, torch_module

import ember.distributed as edist
from ember.distributed import _store

tdist = torch_module("torch.distributed")
T = datetime.timedelta
SHORT = T(milliseconds=50)
KINDS = ("hash", "file", "tcp", "prefix", "prefix-tcp")


def _store_of(dist, kind, path):
    if kind == "hash":
        return dist.HashStore()
    if kind == "file":
        return dist.FileStore(str(path), 1)
    tcp = kind.endswith("tcp") and dist.TCPStore("127.0.0.1", 0, 1, True, timeout=T(seconds=5))
    if kind == "tcp":
        return tcp
    return dist.PrefixStore("p", tcp or dist.HashStore())


def _observe(calls):
    """Each call's result, or its exception's class name (and message, for the store's own errors)."""
    out = []
    for label, call in calls:
        try:
            out.append((label, call()))
        except Exception as e:  # noqa: BLE001 - compared with torch's
            own = type(e).__name__ in ("DistStoreError", "QueueEmptyError", "NotImplementedError", "RuntimeError")
            out.append((label, type(e).__name__, isinstance(e, RuntimeError), str(e) if own else None))
    return out


def _script(s, kind):
    calls = [
        ("timeout", lambda: s.timeout),
        ("set_timeout", lambda: s.set_timeout(SHORT)),
        ("timeout after", lambda: s.timeout),
        ("num_keys fresh", lambda: s.num_keys()),
        ("set str", lambda: s.set("a", "x")),
        ("get", lambda: s.get("a")),
        ("set bytes", lambda: s.set("b", b"\x00\xff")),
        ("get bytes", lambda: s.get("b")),
        ("get by bytes key", lambda: s.get(b"b")),
        ("set unicode", lambda: s.set("u", "h\xe9llo")),
        ("get unicode", lambda: s.get("u")),
        ("set list", lambda: s.set("l", [1, 2])),
        ("set int", lambda: s.set("i", 5)),
        ("set None", lambda: s.set("n", None)),
        ("set lone surrogate", lambda: s.set("x", "\udcff")),
        ("get missing", lambda: s.get("missing")),
        ("set empty key", lambda: s.set("", "v")),
        ("get empty key", lambda: s.get("")),
        ("add new", lambda: s.add("c", 3)),
        ("add again", lambda: s.add("c", -5)),
        ("get counter", lambda: s.get("c")),
        ("add zero new", lambda: s.add("z0", 0)),
        ("add bool", lambda: s.add("bb", True)),
        ("add float", lambda: s.add("c", 1.5)),
        ("add int64 max", lambda: s.add("big", 2 ** 63 - 1)),
        ("add wraps", lambda: s.add("big", 1)),
        ("add too big", lambda: s.add("h", 2 ** 64)),
        ("cas missing, empty expected", lambda: s.compare_set("m1", "", "v")),
        ("cas missing, created", lambda: s.get("m1")),
        ("cas missing, other expected", lambda: s.compare_set("m2", "z", "v")),
        ("cas missing, expected == desired", lambda: s.compare_set("m3", "z", "z")),
        ("cas missing, not created", lambda: s.check(["m2"])),
        ("cas match", lambda: s.compare_set("a", "x", "y")),
        ("cas mismatch", lambda: s.compare_set("a", "q", "w")),
        ("cas bytes", lambda: s.compare_set("a", b"y", b"z")),
        ("cas empty expected, key exists", lambda: s.compare_set("c", "", "q")),
        ("check", lambda: s.check(["a", "c"])),
        ("check missing", lambda: s.check(["a", "nope"])),
        ("check none", lambda: s.check([])),
        ("check a str", lambda: s.check("a")),
        ("wait present", lambda: s.wait(["a"])),
        ("wait present, timeout", lambda: s.wait(["a", "b"], T(seconds=1))),
        ("wait missing, timeout", lambda: s.wait(["nope"], SHORT)),
        ("wait missing, default timeout", lambda: s.wait(["nope", "a"])),
        ("wait int timeout", lambda: s.wait(["a"], 1)),
        ("num_keys", lambda: s.num_keys()),
        ("delete", lambda: s.delete_key("a")),
        ("delete missing", lambda: s.delete_key("a")),
        ("num_keys after delete", lambda: s.num_keys()),
        ("multi_set", lambda: s.multi_set(["k1", "k2"], ["v1", b"v2"])),
        ("multi_get", lambda: s.multi_get(["k1", "k2"])),
        ("multi_get missing", lambda: s.multi_get(["k1", "zz"])),
        ("multi_set none", lambda: s.multi_set([], [])),
        ("multi_get none", lambda: s.multi_get([])),
        ("append", lambda: s.append("k1", "+x")),
        ("append new", lambda: s.append("ap", "y")),
        ("appended", lambda: s.get("k1")),
        ("appended new", lambda: s.get("ap")),
        ("queue_push", lambda: s.queue_push("q", "1")),
        ("queue_push bytes", lambda: s.queue_push("q", b"2")),
        ("queue_len", lambda: s.queue_len("q")),
        ("queue_pop", lambda: s.queue_pop("q")),
        ("queue_pop no block", lambda: s.queue_pop("q", block=False)),
        ("queue_pop empty, no block", lambda: s.queue_pop("q", block=False)),
        ("queue_pop empty", lambda: s.queue_pop("q")),
        ("queue_len missing", lambda: s.queue_len("qq")),
        ("queue is no key", lambda: s.check(["q"])),
        ("barrier of 1", lambda: s.barrier("bar", 1)),
        ("barrier of 1 again", lambda: s.barrier("bar", 1)),
        ("barrier of 2 times out", lambda: s.barrier("bar2", 2, SHORT)),
        ("num_keys at the end", lambda: s.num_keys()),
        ("set_timeout int", lambda: s.set_timeout(3)),
        ("has_extended_api", lambda: s.has_extended_api()),
        ("libuvBackend", lambda: s.libuvBackend),
        ("host", lambda: s.host),
    ]
    if not kind.endswith("tcp"):  # torch's TCPStore server drops the connection on it (ember: ValueError)
        calls.append(("add to text", lambda: s.add("u", 1)))
    return _observe(calls)


def _list_keys(s, dist, kind):
    keys = sorted(s.list_keys())
    if dist is tdist and kind == "file":  # torch's FileStore lists its internal keys, first letter cut off
        keys = [k for k in keys if k not in ("efcount/", "leanup/")]
    return keys


@needs_torch
@pytest.mark.parametrize("kind", KINDS)
def test_methods_as_torch(kind, tmp_path):
    results = {}
    for name, dist in (("torch", tdist), ("ember", edist)):
        s = _store_of(dist, kind, tmp_path / name)
        results[name] = _script(s, kind) + [("list_keys", _list_keys(s, dist, kind))]
        clone = s.clone()
        s.set("shared", "1")
        results[name].append(("clone shares", clone.get("shared")))
    for t, e in zip(results["torch"], results["ember"]):
        assert t == e


@needs_torch
def test_types_and_hierarchy():
    for name in ("DistError", "DistBackendError", "DistNetworkError", "DistStoreError", "QueueEmptyError"):
        ours, theirs = getattr(edist, name), getattr(tdist, name)
        assert [c.__name__ for c in ours.__mro__[:-3]] == [c.__name__ for c in theirs.__mro__[:-3]]
        assert issubclass(ours, RuntimeError)
    for name in ("HashStore", "FileStore", "TCPStore", "PrefixStore"):
        assert issubclass(getattr(edist, name), edist.Store)


def test_add_to_text_tcp():
    s = edist.TCPStore("127.0.0.1", 0, 1, True)
    s.set("a", "text")
    with pytest.raises(ValueError):
        s.add("a", 1)
    assert s.get("a") == b"text"  # the connection survives


@pytest.mark.parametrize("dist", [pytest.param(tdist, id="torch", marks=needs_torch), pytest.param(edist, id="ember")])
def test_prefix_store(dist):
    base = dist.HashStore()
    p = dist.PrefixStore("p", base)
    q = dist.PrefixStore("q", p)
    q.set("k", "v")
    assert base.get("p/q/k") == b"v" and p.get("q/k") == b"v"
    assert q.underlying_store is p and q._underlying_non_prefix_store is base
    assert base.num_keys() == q.num_keys() == 1
    q.set_timeout(T(seconds=7))
    assert base.timeout == T(seconds=7)
    with pytest.raises(TypeError):
        dist.PrefixStore("p", object())


def test_python_store_subclass():
    """A store written in Python works under a PrefixStore, with the generic multi_get, append and barrier."""
    dist = edist

    class DictStore(dist.Store):
        def __init__(self):
            super().__init__()
            self.data = {}

        def set(self, key, value):
            self.data[key] = value.encode() if isinstance(value, str) else value

        def get(self, key):
            return self.data[key]

        def add(self, key, amount):
            self.data[key] = str(int(self.data.get(key, b"0")) + amount).encode()
            return int(self.data[key])

    p = dist.PrefixStore("x", DictStore())
    p.set("a", "1")
    assert p.get("a") == b"1"
    assert p.add("n", 2) == 2 and p.add("n", 3) == 5
    assert p.multi_get(["a", "n"]) == [b"1", b"5"]
    assert DictStore().timeout == T(seconds=300)
    with pytest.raises(NotImplementedError):
        p.check(["a"])


@needs_torch
def test_timeouts(tmp_path):
    """A zero timeout means none for HashStore and FileStore (a waiter stays until the key comes); it is immediate
    for TCPStore; a negative one is immediate for all."""
    for name, dist in (("torch", tdist), ("ember", edist)):
        for kind in ("hash", "file"):
            s = _store_of(dist, kind, tmp_path / f"{name}-t")
            got = []
            waiter = threading.Thread(target=lambda: got.append(s.wait(["k"], T(0))), daemon=True)  # noqa: B023
            waiter.start()
            waiter.join(0.2)
            assert waiter.is_alive()
            s.set("k", "1")
            waiter.join(10)
            assert got == [None]
            with pytest.raises(RuntimeError, match="[Ww]ait timeout"):
                s.wait(["never"], T(seconds=-1))
        s = _store_of(dist, "tcp", None)
        with pytest.raises(dist.DistStoreError, match="wait timeout after 0ms, keys: /never"):
            s.wait(["never"], T(0))


@needs_torch
def test_wait_for_workers_timeout():
    for dist in (tdist, edist):
        with pytest.raises(dist.DistStoreError, match="waiting for clients. 1/2 clients joined"):
            dist.TCPStore("127.0.0.1", 0, 2, True, timeout=T(milliseconds=300))


@needs_torch
def test_client_without_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens there
    for dist in (tdist, edist):
        with pytest.raises(dist.DistNetworkError, match="timed out after 300ms while trying to connect"):
            dist.TCPStore("127.0.0.1", port, timeout=T(milliseconds=300))


@needs_torch
def test_port_zero_and_port_in_use():
    for dist in (tdist, edist):
        master = dist.TCPStore("127.0.0.1", 0, 1, True)
        assert 0 < master.port < 65536 and master.host == "127.0.0.1"
        with pytest.raises(dist.DistNetworkError, match="failed to listen"):
            dist.TCPStore("127.0.0.1", master.port, 1, True)
        client = dist.TCPStore("127.0.0.1", master.port, timeout=T(seconds=5))
        client.set("k", "v")
        assert master.get("k") == b"v" and client.port == master.port


def test_multi_tenant_and_listen_fd():
    first = edist.TCPStore("127.0.0.1", 0, is_master=True, multi_tenant=True)
    second = edist.TCPStore("127.0.0.1", first.port, is_master=True, multi_tenant=True)
    first.set("k", "v")
    assert second.get("k") == b"v"
    listener = socket.create_server(("127.0.0.1", 0))
    third = edist.TCPStore("127.0.0.1", listener.getsockname()[1], is_master=True,
                           master_listen_fd=listener.detach())
    third.set("a", "b")
    assert third.get("a") == b"b" and third.libuvBackend
    assert not edist.TCPStore("127.0.0.1", 0, is_master=True, use_libuv=False).libuvBackend


def test_client_before_server():
    """A client retries until the master comes up."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    got = []
    client = threading.Thread(target=lambda: got.append(
        edist.TCPStore("127.0.0.1", port, 2, timeout=T(seconds=30)).get("k")), daemon=True)
    client.start()
    client.join(0.3)
    master = edist.TCPStore("127.0.0.1", port, 2, True, timeout=T(seconds=30))  # waits for the client to join
    master.set("k", "v")
    client.join(30)
    assert got == [b"v"] and master.num_keys() == 2  # "k" and the count of joined stores


# ---------------------------------------------------------------------------------------------- across processes

def _shared_store(dist, rank, world, kind, path):
    if kind == "tcp":
        return dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), world, rank == 0, T(seconds=30))
    return dist.FileStore(path, world)


def _across(rank, world, libname, kind, path):
    """Every rank uses one store at once; the observations do not depend on the order of the ranks' calls."""
    import time
    dist = importlib.import_module(libname + ".distributed")
    s = _shared_store(dist, rank, world, kind, path)
    out = {}
    for _ in range(50):
        s.add("count", 1)
    s.set(f"done/{rank}", str(rank))
    s.wait([f"done/{r}" for r in range(world)])
    out["count"] = s.get("count")
    mine = s.compare_set("winner", "", str(rank)).decode() == str(rank)
    s.add("winners", int(mine))
    s.append("log", f"[{rank}]")
    s.barrier("after-race", world)
    out["one winner"] = s.get("winners") == b"1" and s.get("winner") in [str(r).encode() for r in range(world)]
    out["log"] = sorted(s.get("log").decode().strip("[]").split("]["))
    if rank == world - 1:
        time.sleep(0.2)  # the others block in get meanwhile
        s.set("late", "here")
    out["late"] = s.get("late")
    s.set(f"k{rank}", str(rank * 10))
    out["multi_get"] = s.multi_get([f"k{r}" for r in range(world)])
    try:
        s.wait(["never"], T(milliseconds=100))
    except Exception as e:  # noqa: BLE001 - compared with torch's
        out["wait timeout"] = type(e).__name__
    if kind == "tcp":
        if rank == 0:
            for r in range(1, world):
                s.queue_push("jobs", f"job{r}")
            s.set("pushed", "1")
        else:  # after the pushes: torch's server may leave one of several blocked poppers waiting
            s.wait(["pushed"])
            s.append("popped", s.queue_pop("jobs") + b" ")
        s.barrier("queue", world)
        out["jobs"] = sorted(s.get("popped").split())
        out["queue empty"] = s.queue_len("jobs")
        if rank == 0:
            out["num_keys"] = s.num_keys()
            s.set("counted", "1")
        s.wait(["counted"])
        s.barrier("end", world)  # rank 0's server outlives every client's last call
    return out


@needs_torch
@pytest.mark.parametrize("kind", ["tcp", "file"])
@pytest.mark.parametrize("world", [2, 4])
def test_across_processes(ranks, world, kind, tmp_path):
    results = {lib: ranks(world).run(_across, lib, kind, str(tmp_path / lib)) for lib in ("torch", "ember")}
    assert results["ember"] == results["torch"]
    assert results["ember"][0]["count"] == str(50 * world).encode()
    assert results["ember"][0]["one winner"]


def _file_cleanup(rank, world, libname, path):
    dist = importlib.import_module(libname + ".distributed")
    s, signals = dist.FileStore(path, world), dist.FileStore(path + ".signals", world)
    s.set(f"r{rank}", "1")
    s.wait([f"r{r}" for r in range(world)])
    if rank == 0:
        del s
        gc.collect()
        exists = os.path.exists(path)  # the other rank still holds it
        signals.set("checked", "1")
        return exists
    signals.wait(["checked"])
    return None  # and drops the store: the last one


@needs_torch
def test_file_store_removed_by_the_last_worker(ranks, tmp_path):
    for lib in ("torch", "ember"):
        path = str(tmp_path / lib)
        assert ranks(2).run(_file_cleanup, lib, path)[0] is True
        gc.collect()
        assert not os.path.exists(path)


# ------------------------------------------------------------------------------------------- TCPStore robustness

def _frame(*msg):
    data = marshal.dumps(msg)
    return struct.pack("<I", len(data)) + data


def test_many_clients_and_waiters():
    master = edist.TCPStore("127.0.0.1", 0, is_master=True, timeout=T(seconds=30))
    got, errors = [], []

    def waiter():
        try:
            got.append(edist.TCPStore("127.0.0.1", master.port, timeout=T(seconds=30)).get("go"))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def adder():
        try:
            client = edist.TCPStore("127.0.0.1", master.port, timeout=T(seconds=30))
            for _ in range(20):
                client.add("n", 1)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    waiters = [threading.Thread(target=waiter, daemon=True) for _ in range(16)]
    adders = [threading.Thread(target=adder, daemon=True) for _ in range(32)]
    for t in waiters + adders:
        t.start()
    for t in adders:
        t.join(60)
    assert master.get("n") == b"640" and not errors  # the blocked waiters held up nobody
    master.set("go", "now")
    for t in waiters:
        t.join(60)
    assert got == [b"now"] * 16 and not errors


def test_blocked_queue_poppers():
    """Items pushed to a queue go one each to the clients blocked popping it, in their order of arrival."""
    master = edist.TCPStore("127.0.0.1", 0, is_master=True, timeout=T(seconds=30))
    got = []
    poppers = [threading.Thread(target=lambda: got.append(edist.TCPStore(
        "127.0.0.1", master.port, timeout=T(seconds=30)).queue_pop("q")), daemon=True) for _ in range(4)]
    for t in poppers:
        t.start()
    for t in poppers:
        t.join(0.05)
    for i in range(5):
        master.queue_push("q", str(i))
    for t in poppers:
        t.join(30)
    assert sorted(got) == [b"0", b"1", b"2", b"3"] and master.queue_len("q") == 1


def test_blocked_caller_and_same_store_from_threads():
    """A thread blocked in get on a store leaves that same store object usable by the other threads."""
    master = edist.TCPStore("127.0.0.1", 0, is_master=True, timeout=T(seconds=30))
    client = edist.TCPStore("127.0.0.1", master.port, timeout=T(seconds=30))
    for store in (master, client):
        got = []
        blocked = threading.Thread(target=lambda: got.append(store.get("k")), daemon=True)  # noqa: B023
        blocked.start()
        blocked.join(0.1)
        for i in range(50):
            store.set(f"other{i}", str(i))
            assert store.get(f"other{i}") == str(i).encode()
        assert blocked.is_alive()
        store.set("k", "v")
        blocked.join(30)
        assert got == [b"v"]
        store.delete_key("k")


def test_vanished_and_malformed_clients():
    master = edist.TCPStore("127.0.0.1", 0, is_master=True, timeout=T(seconds=30))
    # a client that waits for a key, a queue item, a barrier and the workers, then disappears; one that does not
    # greet the server (another protocol)
    for frame in (_frame(_store._GET, "k", 60000), _frame(_store._QUEUE_POP, "q", True, 60000),
                  _frame(_store._BARRIER, "b", 2, 60000), _frame(_store._WAIT_WORKERS, 5, 60000),
                  _frame(_store._SET, "half")[:7], b"\xff\xff\x00\x00garbage", _frame(99, "unknown op"),
                  _store._HELLO[:5]):
        raw = socket.create_connection(("127.0.0.1", master.port))
        raw.sendall(_store._HELLO + frame)
        raw.close()
    raw = socket.create_connection(("127.0.0.1", master.port))
    raw.sendall(_frame(_store._SET, "k", b"v"))  # no greeting: dropped, nothing set
    assert raw.recv(10) == b""
    master.set("k", "v")
    master.queue_push("q", "item")
    assert master.get("k") == b"v" and master.queue_pop("q", block=False) == b"item"
    assert master.num_keys() == 2  # "k" and the vanished client's barrier
    big = os.urandom(8 << 20)  # several sends each way
    client = edist.TCPStore("127.0.0.1", master.port, timeout=T(seconds=30))
    client.set("big", big)
    assert master.get("big") == big


def test_server_going_away():
    """Clients of a master that is gone fail at once with DistNetworkError, pending calls included."""
    master = edist.TCPStore("127.0.0.1", 0, is_master=True, timeout=T(seconds=60))
    client = edist.TCPStore("127.0.0.1", master.port, timeout=T(seconds=60))
    errors = []

    def blocked():
        try:
            client.get("never")
        except Exception as e:  # noqa: BLE001 - checked below
            errors.append(e)

    thread = threading.Thread(target=blocked, daemon=True)
    thread.start()
    thread.join(0.1)
    del master
    gc.collect()
    thread.join(30)
    assert not thread.is_alive() and isinstance(errors[0], edist.DistNetworkError)
    with pytest.raises(edist.DistNetworkError):
        client.set("k", "v")


def test_released_store_frees_its_port():
    master = edist.TCPStore("127.0.0.1", 0, is_master=True)
    port = master.port
    master._release()
    again = edist.TCPStore("127.0.0.1", port, is_master=True)
    again.set("k", "v")
    assert again.get("k") == b"v"
    with pytest.raises(edist.DistNetworkError):
        master.get("k")


@needs_torch
def test_pytorch_server_is_named_at_once():
    """An ember client reaching PyTorch's TCPStore server (e.g. torchrun's agent store) fails at once, saying so."""
    for libuv in (True, False):
        server = tdist.TCPStore("127.0.0.1", 0, 1, True, timeout=T(seconds=30), use_libuv=libuv)
        with pytest.raises(edist.DistNetworkError, match=r"is a PyTorch TCPStore server.*emberrun"):
            edist.TCPStore("127.0.0.1", server.port, timeout=T(seconds=30))
        server.set("k", "v")  # and the server carries on
        assert server.get("k") == b"v"


def test_rendezvous_store_serves_until_every_rank_is_done():
    """A master's rendezvous store let go at destroy_process_group serves on until every rank said it is done; a new
    master on its port stops it at once."""
    for last in ("done", "new master"):
        master = edist.TCPStore("127.0.0.1", 0, is_master=True, timeout=T(seconds=30))
        port = master.port
        others = [edist.TCPStore("127.0.0.1", port, timeout=T(seconds=30)) for _ in range(2)]
        server = _store._LINGERING.get(port, master._server).server
        master._release(3)
        others[0].set("late", "1")
        others[0]._release(3)
        assert others[1].get("late") == b"1" and server.thread.is_alive()
        if last == "done":
            others[1]._release(3)
            server.thread.join(30)
            assert not server.thread.is_alive() and port not in _store._LINGERING
        else:
            again = edist.TCPStore("127.0.0.1", port, is_master=True, timeout=T(seconds=30))
            assert not server.thread.is_alive()
            with pytest.raises(edist.DistNetworkError):
                others[1].get("late")
            again.set("k", "v")
            assert again.get("k") == b"v" and again.num_keys() == 1
            again._release()
