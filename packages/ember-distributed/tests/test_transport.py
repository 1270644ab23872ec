"""The transport on its own (what rpc and elastic build on): objects and frames, shared memory and TCP, tags and
order, sends that outrun the receiver, peers that die or close."""
import datetime
import os
import pickle
import time

import numpy as np
import pytest

TRANSPORTS = {"shm": {}, "tcp": {"EMBER_DIST_TRANSPORT": "tcp"}}


def _transport(rank, world):
    from ember.distributed import TCPStore
    from ember.distributed._transport import Transport
    store = TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), world, rank == 0,
                     timeout=datetime.timedelta(seconds=30))
    return store, Transport(store, rank, world, prefix="t/")


def exchange(rank, world):
    import ember
    store, t = _transport(rank, world)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    out = {"local": sorted(t.local_peers)}
    obj = {"rank": rank, "array": np.arange(300_000, dtype=np.float32) + rank, "tensor": ember.arange(5) * rank,
           "text": "x" * rank}
    t.send_obj(nxt, "obj", obj).wait()
    got = t.recv_obj(prv, "obj")
    out["obj"] = (got["rank"], got["array"][:3].tolist(), got["tensor"].tolist(), got["text"])
    # frames: one under the shared-memory threshold, one in a slot, one larger than all slots together
    frames = [b"head", np.full(3 << 20, rank, np.uint8), np.full(20 << 20, rank + 1, np.uint8)]
    sent = t.send(nxt, ("frames", 1), frames)
    m = t.recv(prv, ("frames", 1))
    out["frames"] = [bytes(m.frames[0]), len(m.frames[1]), int(np.frombuffer(m.frames[1], np.uint8).max()),
                     len(m.frames[2]), int(np.frombuffer(m.frames[2], np.uint8).min())]
    m.release()
    sent.wait()
    # tags keep their own order
    for tag, value in (("a", 1), ("b", 2), ("a", 3)):
        t.send_obj(nxt, tag, value)
    out["tags"] = [t.recv_obj(prv, "b"), t.recv_obj(prv, "a"), t.recv_obj(prv, "a")]
    # both sides send more than the slots hold before receiving anything
    sents = [t.send(nxt, ("flood", i), [np.full(1 << 20, i, np.float32)]) for i in range(12)]
    ok = True
    for i in range(12):
        m = t.recv(prv, ("flood", i))
        ok &= bool((np.frombuffer(m.frames[0], np.float32) == i).all())
        m.release()
    for s in sents:
        s.wait()
    out["flood"] = ok
    # from any peer, and to itself
    if rank == 0:
        out["any"] = sorted(t.recv_obj(None, "any")[0] for _ in range(world - 1))
    else:
        t.send_obj(0, "any", rank)
    t.send_obj(rank, "self", [rank])
    out["self"] = t.recv_obj(rank, "self")
    # every queue read to its end has left the mailbox (tags used once must not pile up)
    out["mailbox"] = dict(t._mail)
    t.close()
    out["after_close"] = []
    for src in (prv, None):
        try:
            t.recv(src, "late", deadline=time.monotonic() + 5)
        except Exception as e:  # noqa: BLE001 (the type is the point)
            from ember.distributed import DistBackendError
            out["after_close"].append((isinstance(e, DistBackendError), "closed" in str(e)))
    return out


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_exchange(ranks, transport):
    world = 2
    res = ranks(world).run(exchange, env=TRANSPORTS[transport], timeout=120)
    for rank, out in enumerate(res):
        prv = (rank - 1) % world
        assert out["local"] == ([] if transport == "tcp" else [1 - rank])
        assert out["obj"] == (prv, [prv, prv + 1, prv + 2], [0, prv, 2 * prv, 3 * prv, 4 * prv], "x" * prv)
        assert out["frames"] == [b"head", 3 << 20, prv, 20 << 20, prv + 1]
        assert out["tags"] == [2, 1, 3]
        assert out["flood"]
        assert out["self"] == [rank]
        assert out["mailbox"] == {}
        # a receive on a closed transport raises at once, from one peer or from any
        assert out["after_close"] == [(True, True)] * 2
    assert res[0]["any"] == [1]


def test_objects_travel_out_of_band():
    """An array inside an object leaves as a frame of its own: the pickle stream stays small."""
    from ember.distributed._transport import Transport
    sent = []
    fake = type("T", (), {"send": lambda self, dst, tag, frames: sent.append(frames)})()
    Transport.send_obj(fake, 1, "x", {"a": np.ones(1 << 20, np.float32)})
    frames = sent[0]
    assert len(frames) == 2 and len(frames[0]) < 1024 and frames[1].nbytes == 4 << 20
    assert pickle.loads(frames[0], buffers=frames[1:])["a"].sum() == 1 << 20


def peer_dies(rank, world, graceful):
    from ember.distributed._transport import PeerError
    store, t = _transport(rank, world)
    for q in range(world):
        if q != rank:
            t.send_obj(q, "hello", rank)
    for q in range(world):
        if q != rank:
            t.recv_obj(q, "hello")
            if q == 1:
                t.send_obj(1, "got it", rank)
    if rank == 1:  # (a process that dies loses what it had not sent yet: it waits until its hellos were read)
        for q in (0, 2):
            t.recv_obj(q, "got it")
        if graceful:
            t.close()
            return None
        os._exit(3)
    try:
        t.recv(1, "never")
    except PeerError as e:
        err = (e.peer, str(e))
    try:
        t.send(1, "late", [b"x"])
        late = None
    except PeerError as e:
        late = e.peer
    t.close()
    return err, late


@pytest.mark.parametrize("graceful", [False, True])
def test_peer_loss_names_the_peer(ranks, graceful):
    res = ranks(3).run(peer_dies, graceful, expect_failure=() if graceful else (1,), timeout=60)
    for rank in (0, 2):
        (peer, message), late = res[rank]
        assert peer == 1 and late == 1
        assert message.startswith(f"[Rank {rank}] Connection closed by peer rank 1 (127.0.0.1:")
        assert ("it closed the process group" in message) == graceful
