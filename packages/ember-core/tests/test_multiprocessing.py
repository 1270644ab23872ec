"""ember.multiprocessing with real processes: tensors through queues, shared memory seen across fork, spawn and
forkserver children, spawn/start_processes and their failures. Children run the functions at the top of this
module (spawned ones import it); each test starts at most a few processes."""
import os
import pickle
import signal
import time

import pytest

import ember
import ember.multiprocessing as mp

METHODS = [m for m in ("fork", "spawn", "forkserver") if m in mp.get_all_start_methods()]


# ---- what the children run ---------------------------------------------------------------------------------------
def add_one(*tensors):
    for t in tensors:
        t.add_(1)


def echo_back(inbox, outbox):
    """Receive tensors, write into the shared one, report what arrived."""
    shared, plain, half = inbox.get(), inbox.get(), inbox.get()
    shared.add_(1)
    plain.add_(1)
    outbox.put((shared.is_shared(), plain.is_shared(), plain.tolist(), half.dtype, half.tolist()))
    outbox.put(shared[1:])  # a view of the shared tensor goes back as a view of the same memory
    inbox.get()  # a sender must live until its shared tensors are received (their descriptor comes from it)


def fill_row(i, t, q):
    t[i].fill_(i + 1.0)
    q.put((i, ember.full((2,), float(i))))


def raise_in_one(i):
    if i == 1:
        raise ValueError("boom in process one")
    time.sleep(30)  # stopped by the parent once process 1 has failed


def exit_with(i, code):
    os._exit(code)


def kill_self(i):
    os.kill(os.getpid(), signal.SIGKILL)


# ---- shared memory ------------------------------------------------------------------------------------------------
def test_share_memory_in_place():
    t = ember.arange(6.0).reshape(2, 3)
    ptr = t.data_ptr()
    assert not t.is_shared()
    assert t.share_memory_() is t and t.is_shared() and t.data_ptr() != ptr
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and t.stride() == (3, 1)
    assert t[1].is_shared() and t.t().is_shared() and not t.clone().is_shared()
    assert t.share_memory_().data_ptr() == t.data_ptr()  # already shared: unchanged
    u = ember.arange(6.0).reshape(2, 3).t().share_memory_()
    assert u.stride() == (1, 3) and u.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert ember.zeros(0).share_memory_().is_shared()
    b = ember.tensor([1.5, -2.0], dtype=ember.bfloat16).share_memory_()
    assert b.dtype is ember.bfloat16 and b.tolist() == [1.5, -2.0]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open descriptors in /proc")
def test_freed_shared_tensors_close_their_descriptors():
    before = len(os.listdir("/proc/self/fd"))
    tensors = [ember.ones(3).share_memory_() for _ in range(20)]
    views = [t[1:] for t in tensors]
    assert len(os.listdir("/proc/self/fd")) >= before + 20
    del tensors
    assert len(os.listdir("/proc/self/fd")) >= before + 20  # the views keep their segments mapped
    del views
    assert len(os.listdir("/proc/self/fd")) == before


def test_shared_tensors_pickle_by_value_outside_multiprocessing():
    t = ember.arange(3.0).share_memory_()
    back = pickle.loads(pickle.dumps(t))
    back.add_(1)
    assert t.tolist() == [0.0, 1.0, 2.0] and not back.is_shared()


@pytest.mark.parametrize("method", METHODS)
def test_child_writes_to_shared_memory_are_seen(method):
    ctx = mp.get_context(method)
    t = ember.zeros(2, 3).share_memory_()
    p = ctx.Process(target=add_one, args=(t, t[1]))  # the whole tensor and a view of its second row
    p.start()
    p.join()
    assert p.exitcode == 0 and t.tolist() == [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_tensors_through_queues(method):
    ctx = mp.get_context(method)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    shared, plain = ember.arange(4.0).share_memory_(), ember.arange(4.0)
    p = ctx.Process(target=echo_back, args=(inbox, outbox))
    p.start()
    for t in (shared, plain, ember.tensor([1.5, 2.0], dtype=ember.bfloat16)):
        inbox.put(t)
    assert outbox.get(timeout=60) == (True, False, [1.0, 2.0, 3.0, 4.0], ember.bfloat16, [1.5, 2.0])
    view = outbox.get(timeout=60)
    inbox.put("received")
    p.join()
    assert shared.tolist() == [1.0, 2.0, 3.0, 4.0] and plain.tolist() == [0.0, 1.0, 2.0, 3.0]
    view.mul_(10)  # the view that came back shares memory with the tensor sent out
    assert shared.tolist() == [1.0, 20.0, 30.0, 40.0]


def test_pool_maps_over_tensors():
    with mp.get_context("fork").Pool(2) as pool:
        out = pool.map(ember.Tensor.neg, [ember.tensor([1.0, 2.0]), ember.tensor([3])])
    assert [o.tolist() for o in out] == [[-1.0, -2.0], [-3]] and out[1].dtype is ember.int64


def test_module_share_memory():
    nn = pytest.importorskip("ember.nn")
    m = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    weight = m[0].weight
    assert m.share_memory() is m and m[0].weight is weight
    assert all(t.is_shared() for t in m.state_dict().values())
    p = mp.get_context("fork").Process(target=add_one, args=(weight.data,))
    expected = (weight.detach() + 1).tolist()
    p.start()
    p.join()
    assert weight.tolist() == expected


# ---- spawn -------------------------------------------------------------------------------------------------------
def test_start_processes_calls_fn_with_the_index_and_args():
    t = ember.zeros(3, 2).share_memory_()
    q = mp.get_context("fork").SimpleQueue()
    assert mp.start_processes(fill_row, args=(t, q), nprocs=3, start_method="fork") is None
    assert sorted((i, x.tolist()) for i, x in (q.get(), q.get(), q.get())) == [(i, [float(i)] * 2) for i in range(3)]
    assert t.tolist() == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]


def test_spawn_starts_spawned_processes():
    t = ember.zeros(1, 2).share_memory_()
    q = mp.get_context("spawn").SimpleQueue()
    assert mp.spawn(fill_row, args=(t, q), nprocs=1) is None
    i, x = q.get()
    assert i == 0 and x.tolist() == [0.0, 0.0] and t.tolist() == [[1.0, 1.0]]


def test_spawn_raises_the_childs_exception_naming_it():
    with pytest.raises(mp.ProcessRaisedException) as info:
        mp.start_processes(raise_in_one, nprocs=2, start_method="fork")
    e = info.value
    assert e.error_index == 1 and isinstance(e.error_pid, int) and isinstance(e, mp.ProcessException)
    assert "-- Process 1 terminated with the following error:" in str(e)
    assert 'raise ValueError("boom in process one")' in str(e) and "ValueError: boom in process one" in str(e)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is mp.ProcessRaisedException and back.error_index == 1


def test_exit_code_and_signal_are_reported():
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with exit code 3") as info:
        mp.start_processes(exit_with, args=(3,), start_method="fork")
    assert info.value.exit_code == 3 and info.value.error_index == 0
    context = mp.start_processes(kill_self, join=False, start_method="fork")
    assert isinstance(context, mp.ProcessContext) and len(context.pids()) == 1
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with signal SIGKILL") as info:
        while not context.join():
            pass
    assert info.value.exit_code == -signal.SIGKILL and info.value.signal_name == "SIGKILL"
    assert context.join() is True  # nothing left to join


def test_spawn_with_another_start_method_warns():
    with pytest.warns(FutureWarning, match="only supports start_method=spawn"):
        mp.spawn(exit_with, args=(0,), nprocs=0, start_method="fork")


def test_module_reexports_multiprocessing():
    import multiprocessing
    for name in ("Process", "Queue", "SimpleQueue", "Pool", "get_context", "set_start_method", "Value", "Manager"):
        assert getattr(mp, name) is getattr(multiprocessing, name)
    assert mp.get_sharing_strategy() in mp.get_all_sharing_strategies()
    with pytest.raises(AssertionError, match="invalid sharing strategy"):
        mp.set_sharing_strategy("file_system")
