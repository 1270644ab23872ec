"""The rendezvous handlers: several nodes (handlers, each its own node) meeting in threads of this process on a
TCPStore served here, with short timeouts."""
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from elastic_helpers import wait_for

from ember.distributed import DistStoreError, TCPStore
from ember.distributed.elastic.rendezvous import (
    RendezvousClosedError,
    RendezvousConnectionError,
    RendezvousGracefulExitError,
    RendezvousHandler,
    RendezvousHandlerRegistry,
    RendezvousInfo,
    RendezvousParameters,
    RendezvousStateError,
    RendezvousStoreInfo,
    RendezvousTimeoutError,
    registry,
)
from ember.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
from ember.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler
from ember.distributed.elastic.rendezvous.static_tcp_rendezvous import StaticTCPRendezvous
from ember.distributed.elastic.utils.distributed import get_free_port

_ids = iter(range(10 ** 6))


@pytest.fixture
def store():
    return TCPStore("localhost", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=10))


@pytest.fixture
def nodes(store):
    """``nodes(n, min_nodes, max_nodes, **options)``: n handlers of one new rendezvous."""
    made = []

    def make(n, min_nodes=1, max_nodes=2, **options):
        run_id = f"run{next(_ids)}"
        options = {"last_call_timeout": 30, "join_timeout": 20, **options}
        handlers = []
        for _ in range(n):
            params = RendezvousParameters("c10d", f"localhost:{store.port}", run_id, min_nodes, max_nodes, **options)
            handlers.append(create_handler(store, C10dRendezvousBackend(store, run_id), params))
        made.extend(handlers)
        return handlers
    yield make
    for h in made:
        h._stop_heartbeats()
        h._release_workers_store()


def _together(*calls):
    with ThreadPoolExecutor(len(calls)) as pool:
        return [f.result(timeout=30) for f in [pool.submit(c) for c in calls]]


def test_round_completes_when_max_nodes_joined(nodes):
    """With max_nodes there, the round completes at once (its 30 s last call does not run out)."""
    a, b = nodes(2)
    infos = _together(a.next_rendezvous, b.next_rendezvous)
    assert sorted(i.rank for i in infos) == [0, 1] and {i.world_size for i in infos} == {2}
    master = {(i.bootstrap_store_info.master_addr, i.bootstrap_store_info.master_port) for i in infos}
    assert len(master) == 1
    # rank 0 serves the workers' store there
    addr, port = master.pop()
    client = TCPStore(addr, port, timeout=timedelta(seconds=5))
    client.set("k", b"v")
    assert client.get("k") == b"v"
    infos[0].store.set("shared", b"1")
    assert infos[1].store.get("shared") == b"1"


def test_last_call_completes_with_min_nodes(nodes):
    (a,) = nodes(1, last_call_timeout=0.3)
    info = a.next_rendezvous()
    assert (info.rank, info.world_size) == (0, 1)
    assert a.num_nodes_waiting() == 0 and not a.is_closed()


def test_join_timeout_takes_the_node_out(nodes):
    (a,) = nodes(1, min_nodes=2, join_timeout=0.5)
    with pytest.raises(RendezvousTimeoutError):
        a.next_rendezvous()
    assert not a._executor().sync().participants


def test_closed_rendezvous(nodes):
    a, b = nodes(2, last_call_timeout=0.2)
    a.next_rendezvous()
    a.set_closed()
    assert b.is_closed()
    with pytest.raises(RendezvousClosedError):
        b.next_rendezvous()
    assert a.shutdown()  # already closed: fine


def test_waiting_node_and_scale_up(nodes):
    a, b = nodes(2, last_call_timeout=0.2)
    assert a.next_rendezvous().world_size == 1
    with ThreadPoolExecutor(1) as pool:
        joining = pool.submit(b.next_rendezvous)
        wait_for(lambda: a.num_nodes_waiting() == 1, what="b in the wait list")
        assert not joining.done()
        again = a.next_rendezvous()  # the agent's restart for the waiting node
        assert again.world_size == 2 and joining.result(timeout=20).world_size == 2
    assert a.num_nodes_waiting() == 0


def test_spare_node_exits_gracefully_when_closed(nodes):
    a, b = nodes(2, max_nodes=1, last_call_timeout=0.2)
    a.next_rendezvous()
    with ThreadPoolExecutor(1) as pool:
        spare = pool.submit(b.next_rendezvous)
        wait_for(lambda: b._this_node in a._executor().sync().redundancy_list, what="b as a spare")
        assert a.num_nodes_waiting() == 0  # spares do not trigger restarts
        a.shutdown()
        with pytest.raises(RendezvousGracefulExitError):
            spare.result(timeout=20)


def test_silent_node_is_dropped_and_the_round_shrinks(nodes):
    a, b = nodes(2, last_call_timeout=0.2, keep_alive_interval=0.1, keep_alive_max_attempt=2)
    _together(a.next_rendezvous, b.next_rendezvous)
    b._stop_heartbeats()  # b dies: no more heartbeats
    wait_for(lambda: a._lost_participants() == [repr(b._this_node)], what="b found dead")
    info = a.next_rendezvous()
    assert (info.rank, info.world_size) == (0, 1)


def test_leaving_node_is_lost_at_once(nodes):
    a, b = nodes(2)
    _together(a.next_rendezvous, b.next_rendezvous)
    assert a._lost_participants() == []
    b._leave()
    assert a._lost_participants() == [repr(b._this_node)]
    assert not a.is_closed()


def test_each_round_has_its_own_stores(nodes):
    (a,) = nodes(1, last_call_timeout=0.1)
    first = a.next_rendezvous()
    first.store.set("key", b"old")
    port = first.bootstrap_store_info.master_port
    second = a.next_rendezvous()
    assert not second.store.check(["key"])
    assert second.bootstrap_store_info.master_port != port  # the previous workers' store is gone
    with pytest.raises(RuntimeError):
        TCPStore("localhost", port, timeout=timedelta(seconds=0.2)).get("x")


def test_corrupt_state(store, nodes):
    (a,) = nodes(1)
    store.set(f"torch.rendezvous.{a.get_run_id()}", b"not a state")
    with pytest.raises(RendezvousStateError):
        a.num_nodes_waiting()


def test_unreachable_store():
    params = RendezvousParameters("c10d", "localhost:1", "r", 1, 1, is_host=False, read_timeout=1)
    with pytest.raises(RendezvousConnectionError):
        registry.get_rendezvous_handler(params)


def test_registry_and_parameters():
    reg = RendezvousHandlerRegistry()
    with pytest.raises(ValueError, match="is not registered"):
        reg.create_handler(RendezvousParameters("nope", "", "r", 1, 1))

    class Fake(RendezvousHandler):
        def get_backend(self):
            return "other"
        next_rendezvous = is_closed = set_closed = num_nodes_waiting = get_run_id = shutdown = None
    reg.register("fake", lambda params: Fake())
    with pytest.raises(ValueError, match="already registered"):
        reg.register("fake", lambda params: Fake())
    with pytest.raises(RuntimeError, match="does not match"):
        reg.create_handler(RendezvousParameters("fake", "", "r", 1, 1))
    with pytest.raises(ValueError, match="greater than zero"):
        RendezvousParameters("c10d", "", "r", 0, 1)
    params = RendezvousParameters("c10d", "", "r", 1, 2, flag="yes", n="3", bad="x")
    assert params.get_as_bool("flag") is True and params.get_as_int("n") == 3 and params.get("missing", 7) == 7
    with pytest.raises(ValueError, match="valid integer"):
        params.get_as_int("bad")
    with pytest.raises(ValueError, match="valid boolean"):
        params.get_as_bool("bad")


def test_static_rendezvous():
    port = get_free_port()
    nodes = [StaticTCPRendezvous("localhost", port, rank, 2, "job", 10) for rank in (0, 1)]
    infos = _together(*(n.next_rendezvous for n in nodes))  # node 0 serves the store at the master port
    store = TCPStore("localhost", port, timeout=timedelta(seconds=5))
    assert [(i.rank, i.world_size) for i in infos] == [(0, 2), (1, 2)]
    assert infos[0].bootstrap_store_info == RendezvousStoreInfo("localhost", port)
    assert nodes[0].use_agent_store and nodes[0].num_nodes_waiting() == 0 and nodes[0].get_backend() == "static"
    # a second round starts the workers on a clean store: node 0 removes the keys the workers left
    store.set("default_pg/worker_key", b"stale")
    infos[1].store.set("agent_key", b"kept")
    again = nodes[0].next_rendezvous()
    assert not store.check(["default_pg/worker_key"]) and store.check(["job/agent_key"])
    assert again.store.list_keys() == []


def test_static_handler_needs_rank_and_port():
    with pytest.raises(ValueError, match="rank is absent"):
        registry.get_rendezvous_handler(RendezvousParameters("static", "localhost:1", "r", 1, 1))
    with pytest.raises(ValueError, match="Port is absent"):
        registry.get_rendezvous_handler(RendezvousParameters("static", "localhost", "r", 1, 1, rank=0))


def test_store_info_build(store):
    got = []
    threads = [threading.Thread(target=lambda r=r: got.append(RendezvousStoreInfo.build(r, store, "here", 123)))
               for r in (1, 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert got == [RendezvousStoreInfo("here", 123)] * 2
    assert isinstance(RendezvousInfo(store, 0, 1, got[0]).store, TCPStore)
    with pytest.raises(DistStoreError):
        TCPStore("localhost", store.port, timeout=timedelta(seconds=0.1)).get("MISSING")
