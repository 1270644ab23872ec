"""Failures: a rank that dies or leaves mid-collective, mismatched calls, timeouts, monitored_barrier, Work.wait.

The group timeout in these tests is long (60 s) unless the test is about timeouts, so an error that names the lost
peer ("Connection closed by peer rank 1") can only come from failure detection, not from a timeout; the harness's
own limit keeps a regression from hanging the session.
"""
import datetime
import os

import pytest

TRANSPORTS = {"shm": {}, "tcp": {"EMBER_DIST_TRANSPORT": "tcp"}}


def _init(timeout=60):
    import ember.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout))
    return dist


def _attempt(call):
    try:
        call()
        return None
    except Exception as e:  # noqa: BLE001 - the tests look at the type and the message
        return "RuntimeError" if isinstance(e, RuntimeError) else type(e).__name__, str(e)


def _store(dist):
    return dist.distributed_c10d._get_default_store()


def rank_dies(rank, world, victim, size):
    import ember
    dist = _init()
    t = ember.ones(size)
    dist.all_reduce(t)  # everyone connected and working
    if rank == victim:  # (a crash loses what ZeroMQ had not sent yet: it waits until the others have its part)
        _store(dist).wait([f"reduced/{r}" for r in range(world) if r != victim])
        os._exit(3)
    _store(dist).set(f"reduced/{rank}", "1")
    first = _attempt(lambda: dist.all_reduce(ember.ones(size)))
    later = _attempt(lambda: dist.broadcast(ember.ones(2), 0))
    return first, later


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
@pytest.mark.parametrize("world,size", [(2, 3), (4, 300_000)])
def test_dead_rank_fails_the_others(ranks, transport, world, size):
    victim = world - 1
    res = ranks(world).run(rank_dies, victim, size, env=TRANSPORTS[transport], expect_failure=(victim,),
                           timeout=40)
    for rank in range(world - 1):
        first, later = res[rank]
        assert first is not None and first[0] == "RuntimeError", first
        assert f"Connection closed by peer rank {victim}" in first[1], first
        assert later is not None and later[0] == "RuntimeError", later  # the group stays broken


def rank_leaves(rank, world):
    import ember
    dist = _init()
    dist.barrier()
    if rank == 1:
        raise KeyboardInterrupt("rank 1 gives up")  # its process lives on; the harness destroys its group
    return _attempt(lambda: dist.all_reduce(ember.ones(4)))


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_rank_that_raises_and_closes_fails_the_other(ranks, transport):
    res = ranks(2).run(rank_leaves, env=TRANSPORTS[transport], expect_failure=(1,), timeout=40)
    assert res[0][0] == "RuntimeError" and "Connection closed by peer rank 1" in res[0][1], res[0]
    assert "KeyboardInterrupt" in res[1]


def mismatched(rank, world):
    import ember
    dist = _init()
    sizes = _attempt(lambda: dist.all_reduce(ember.ones(3 + rank)))
    dtypes = _attempt(lambda: dist.all_reduce(ember.ones(3, dtype=ember.float64 if rank else ember.float32)))
    kinds = _attempt(lambda: dist.broadcast(ember.ones(3), 0) if rank else dist.all_reduce(ember.ones(3)))
    big = _attempt(lambda: dist.all_gather_into_tensor(ember.empty(world * (40_000 + rank)), ember.ones(40_000 + rank)))
    t = ember.ones(5)
    dist.all_reduce(t)  # the group is still usable
    return sizes, dtypes, kinds, big, t.tolist()


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_mismatched_collectives_raise_on_every_rank(ranks, transport):
    res = ranks(2).run(mismatched, env=TRANSPORTS[transport], timeout=60)
    for sizes, dtypes, kinds, big, after in res:
        for err in (sizes, dtypes, kinds, big):
            assert err is not None and err[0] == "RuntimeError", err
            assert err[1].startswith("Detected mismatch between collectives on ranks. Rank "), err
        assert "TensorNumel=[[3]]" in sizes[1] and "TensorNumel=[[4]]" in sizes[1]
        assert "Float" in dtypes[1] and "Double" in dtypes[1]
        assert "OpType=BROADCAST" in kinds[1] and "OpType=ALLREDUCE" in kinds[1]
        assert after == [2.0] * 5


def fingerprints(rank, world, detail):
    import ember
    if detail:
        os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
    dist = _init()
    shape = (2, 3) if rank else (3, 2)
    first = _attempt(lambda: dist.all_reduce(ember.ones(*shape)))
    dist.all_reduce(ember.ones(2))
    ops = _attempt(lambda: dist.all_reduce(ember.ones(2), dist.ReduceOp.MAX if rank else dist.ReduceOp.SUM))
    return first, ops


def _torch_fingerprint(seq, shape):
    """PyTorch's CollectiveFingerPrint of an all_reduce of one float32 CPU tensor under DETAIL (as torch 2.13 prints
    it)."""
    return (f"CollectiveFingerPrint(SequenceNumber={seq}, OpType=ALLREDUCE, TensorShape={shape}, TensorDtypes=Float, "
            "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, layout=Strided (default), "
            "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt)))")


def test_detail_debug_fingerprints_shapes(ranks):
    plain = ranks(2).run(fingerprints, False, timeout=60)
    assert [p[0] for p in plain] == [None, None]  # same number of elements: gloo does not mind
    for rank, (first, ops) in enumerate(ranks(2).run(fingerprints, True, timeout=60)):
        mine, theirs = ("[3, 2]", "[2, 3]") if rank == 0 else ("[2, 3]", "[3, 2]")
        assert first[0] == "RuntimeError" and first[1].startswith(
            f"Detected mismatch between collectives on ranks. Rank {rank} is running collective: "
            f"{_torch_fingerprint(0, mine)}, but Rank {1 - rank} is running collective: "
            f"{_torch_fingerprint(0, theirs)}"), first
        # the reduce ops differ: PyTorch's fingerprint leaves them out, ember checks them too (in the summary)
        assert ops[0] == "RuntimeError" and "SequenceNumber=2" in ops[1] and "Arguments: [" in ops[1], ops


def times_out(rank, world):
    """Rank 1 takes part in no collective of a group with a 1 s timeout until rank 0 has tried two (the group is
    made with the default group's long timeout: under load, init itself may take longer than 1 s)."""
    import ember
    dist = _init()
    group = dist.new_group(timeout=datetime.timedelta(seconds=1))
    if rank == 1:
        _store(dist).wait(["rank 0 tried"])
        return None
    first = _attempt(lambda: dist.all_reduce(ember.ones(3), group=group))
    later = _attempt(lambda: dist.all_reduce(ember.ones(3), group=group))
    _store(dist).set("rank 0 tried", "1")
    return first, later


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_timeout_raises_and_breaks_the_group(ranks, transport):
    first, later = ranks(2).run(times_out, env=TRANSPORTS[transport], timeout=40)[0]
    assert first[0] == "RuntimeError" and "timed out after 1000ms" in first[1], first
    assert later[0] == "RuntimeError" and later[1] == first[1]


def monitored(rank, world, wait_all):
    """Ranks 2 and 3 never arrive (they wait until rank 0 is done); ranks 0 and 1 meet first, so that rank 1 (on a
    loaded machine too) arrives well within the barrier's timeout."""
    dist = _init()
    arrivers = dist.new_group([0, 1])
    if rank >= 2:
        _store(dist).wait(["rank 0 done"])
        return None
    dist.barrier(group=arrivers)
    result = _attempt(lambda: dist.monitored_barrier(timeout=datetime.timedelta(seconds=1.5),
                                                     wait_all_ranks=wait_all))
    if rank == 0:
        _store(dist).set("rank 0 done", "1")
    return result


def test_monitored_barrier_names_missing_ranks(ranks):
    res = ranks(4).run(monitored, False, timeout=40)
    assert res[0] == ("RuntimeError", "[Rank 0]: Rank 2 failed to pass monitoredBarrier in 1500 ms")
    assert res[1][0] == "RuntimeError" and "Rank 2 failed to pass monitoredBarrier" in res[1][1]
    res = ranks(4).run(monitored, True, timeout=40)
    assert res[0] == ("RuntimeError", "[Rank 0]: Ranks 2, 3 failed to pass monitoredBarrier in 1500 ms")
    assert "Ranks 2, 3 failed" in res[1][1]


def work_waits(rank, world):
    import ember
    dist = _init()
    w = dist.irecv(ember.empty(2), 1 - rank, tag=99)
    timed_out = _attempt(lambda: w.wait(timeout=datetime.timedelta(milliseconds=300)))
    done = w.is_completed()
    dist.barrier()  # the group still works
    return timed_out, done


def test_work_wait_timeout(ranks):
    for timed_out, done in ranks(2).run(work_waits, timeout=40):
        assert timed_out == ("RuntimeError", f"[Rank {0 if timed_out[1].startswith('[Rank 0') else 1}] Timed out "
                             "waiting 300ms for recv operation to complete")
        assert done is False


def test_collective_before_init_raises_valueerror():
    import ember
    import ember.distributed as dist
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.all_reduce(ember.ones(1))
