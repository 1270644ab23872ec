"""Every collective against torch's gloo: the same case bodies run under torch and under ember, on 2 and 4 ranks.

A case is ``case_x(dist, torch, rank, world)``; it returns what it observed (tensors, lists, error types), and
the results of each rank must equal torch's (values, dtypes; errors by their type). All cases of a configuration
run in one process group per library (cheap), so every case leaves the group usable and raises alike on all
ranks (or raises before communicating, only on the ranks that call). ember runs in four configurations: shared
memory, forced TCP, and both with tiny buffers, so that chunked arenas, rings and pipelines run on small tensors.
"""
import datetime
import importlib
import traceback

import numpy as np
import pytest

WORLDS = (2, 4)
CONFIGS = {"shm": ({}, False), "tcp": ({"EMBER_DIST_TRANSPORT": "tcp"}, False),
           "shm-tiny": ({}, True), "tcp-tiny": ({"EMBER_DIST_TRANSPORT": "tcp"}, True)}
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool", "complex64",
          "complex128")  # gloo has no int16 collectives (ember has: see test_beyond_gloo)
OPS = ("SUM", "PRODUCT", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR")


def _values(torch, dtype, rank, n=6):
    """Small exact values that differ per rank (bool: a pattern per rank)."""
    dt = getattr(torch, dtype)
    if dtype == "bool":
        return torch.tensor([(i + rank) % 3 == 0 for i in range(n)])
    base = torch.arange(n, dtype=torch.float64) % 4 + rank + 1
    if dtype.startswith("complex"):
        return (base + 1j * (base - rank)).to(dt)
    return base.to(dt)


# ---- cases --------------------------------------------------------------------------------------------------------
def case_all_reduce_ops(dist, torch, rank, world):
    out = {}
    for dtype in DTYPES:
        for op in OPS:
            t = _values(torch, dtype, rank)
            try:
                dist.all_reduce(t, getattr(dist.ReduceOp, op))
                out[dtype, op] = t
            except Exception as e:  # noqa: BLE001 - the error type is compared with torch's
                out[dtype, op] = (e, t)
    return out


def case_all_reduce_overflow_and_nan(dist, torch, rank, world):
    u = torch.tensor([200, 100], dtype=torch.uint8)
    dist.all_reduce(u)
    i = torch.tensor([100, -100], dtype=torch.int8)
    dist.all_reduce(i)
    nan = float("nan")
    mx = torch.tensor([nan if rank == 1 else 1.0, nan if rank == 0 else 2.0, 3.0])
    dist.all_reduce(mx, dist.ReduceOp.MAX)
    mn = torch.tensor([nan if rank == 1 else 1.0, nan if rank == 0 else 2.0, 3.0])
    dist.all_reduce(mn, dist.ReduceOp.MIN)
    s = torch.tensor([nan if rank == 1 else 1.0, 2.0])
    dist.all_reduce(s)
    return u, i, mx, mn, s


def case_all_reduce_large(dist, torch, rank, world):
    n = 100_003
    a = (torch.arange(n, dtype=torch.float32) % 7) + rank
    dist.all_reduce(a)
    b = (torch.arange(n, dtype=torch.int64) % 5) * (rank + 1)
    dist.all_reduce(b, dist.ReduceOp.MAX)
    c = (torch.arange(n, dtype=torch.float64) % 3) + rank
    dist.all_reduce(c, dist.ReduceOp.AVG)
    return a, b, c


def case_all_reduce_shapes(dist, torch, rank, world):
    nc = (torch.arange(12.).reshape(3, 4) + rank).t()
    dist.all_reduce(nc)
    z = torch.tensor(2.0 + rank)
    dist.all_reduce(z)
    e = torch.ones(0)
    dist.all_reduce(e)
    return nc, nc.is_contiguous(), z, e


def case_work_api(dist, torch, rank, world):
    t = torch.ones(3) * (rank + 1)
    w = dist.all_reduce(t, async_op=True)
    waited = w.wait()
    fut = dist.all_reduce(torch.ones(2), async_op=True).get_future()
    chained = fut.then(lambda f: f.value()[0] * 2).wait()
    g = [torch.empty(2) for _ in range(world)]
    wg = dist.all_gather(g, torch.ones(2) * rank, async_op=True)
    wg.wait()
    wb = dist.barrier(async_op=True)
    wb.wait()
    return (waited, w.is_completed(), w.is_success(), w.exception(), w.result(), w.get_future().wait(), t, chained,
            wg.result(), wb.result())


def case_work_queue_order(dist, torch, rank, world):
    works, ts = [], []
    for k in range(6):
        t = torch.full((5,), float(k + rank))
        ts.append(t)
        works.append(dist.all_reduce(t, async_op=True))
    s = torch.ones(3) * rank
    dist.all_reduce(s)  # synchronous, behind the queued ones
    for w in works:
        w.wait()
    return ts, s


def case_broadcast(dist, torch, rank, world):
    out = []
    for src in range(world):
        t = torch.arange(5.) * (rank + 1)
        dist.broadcast(t, src)
        out.append(t)
    b = torch.tensor([rank % 2 == 0, True])
    dist.broadcast(b, world - 1)
    big = torch.arange(70_001, dtype=torch.int32) * (rank + 1)
    dist.broadcast(big, 1)
    c = torch.tensor([1 + 2j, 3 - 1j]) * (rank + 1)
    dist.broadcast(c, 0)
    h = torch.arange(3.).to(torch.bfloat16) + rank
    dist.broadcast(h, world - 1)
    return out, b, big, c, h


def case_reduce(dist, torch, rank, world):
    out = []
    for dst in range(world):
        t = torch.arange(5.) + rank
        dist.reduce(t, dst, dist.ReduceOp.SUM)
        out.append(t if rank == dst else None)
    big = (torch.arange(50_000, dtype=torch.float64) % 9) + rank
    dist.reduce(big, world - 1, dist.ReduceOp.MAX)
    m = torch.tensor([2, 3], dtype=torch.int64) + rank
    dist.reduce(m, 0, dist.ReduceOp.PRODUCT)
    return out, big if rank == world - 1 else None, m if rank == 0 else None


def case_all_gather(dist, torch, rank, world):
    inp = torch.arange(3.) + 10 * rank
    outs = [torch.empty(3) for _ in range(world)]
    dist.all_gather(outs, inp)
    h = [torch.empty(2, dtype=torch.float16) for _ in range(world)]
    dist.all_gather(h, torch.tensor([rank, -rank], dtype=torch.float16))
    c = [torch.empty(2, dtype=torch.complex64) for _ in range(world)]
    dist.all_gather(c, torch.tensor([1j * rank, 1.0 + rank]))
    big = [torch.empty(40_000, dtype=torch.int8) for _ in range(world)]
    dist.all_gather(big, (torch.arange(40_000) % 100 + rank).to(torch.int8))
    b = [torch.empty(3, dtype=torch.bool) for _ in range(world)]
    dist.all_gather(b, torch.tensor([rank == 0, True, False]))
    return outs, inp, h, c, big, b


def case_all_gather_into_tensor(dist, torch, rank, world):
    flat = torch.empty(world * 2)
    dist.all_gather_into_tensor(flat, torch.ones(2) * rank)
    rows = torch.empty(world * 2, 3, dtype=torch.int64)
    dist.all_gather_into_tensor(rows, torch.ones(2, 3, dtype=torch.int64) * rank)
    single = torch.empty(world * 5, dtype=torch.float64)
    dist.all_gather_single(single, torch.arange(5, dtype=torch.float64) * rank)
    inplace = torch.zeros(world * 3)
    dist.all_gather_into_tensor(inplace, inplace[rank * 3:(rank + 1) * 3].fill_(rank + 1.0))
    return flat, rows, single, inplace


def case_gather_scatter(dist, torch, rank, world):
    res = []
    for root in (0, world - 1):
        g = [torch.empty(3) for _ in range(world)] if rank == root else None
        dist.gather(torch.arange(3.) * rank, g, dst=root)
        res.append(g)
        s = [torch.ones(2, dtype=torch.int32) * (k + 1) for k in range(world)] if rank == root else None
        o = torch.empty(2, dtype=torch.int32)
        dist.scatter(o, s, src=root)
        res.append((o, s))
    gbig = [torch.empty(30_000, dtype=torch.float64) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.arange(30_000, dtype=torch.float64) + rank, gbig)
    sbig = [torch.arange(30_000, dtype=torch.float64) * k for k in range(world)] if rank == 1 else None
    obig = torch.empty(30_000, dtype=torch.float64)
    dist.scatter(obig, sbig, src=1)
    return res, gbig, obig


def case_reduce_scatter(dist, torch, rank, world):
    inputs = [torch.arange(2. + q) + rank + 10 * q for q in range(world)]
    out = torch.empty(2 + rank)
    dist.reduce_scatter(out, inputs)
    avg = torch.empty(3)
    dist.reduce_scatter(avg, [torch.arange(3.) * (rank + 1) for _ in range(world)], op=dist.ReduceOp.AVG)
    mx = torch.empty(2, dtype=torch.int32)
    dist.reduce_scatter(mx, [torch.tensor([rank, -rank], dtype=torch.int32) + q for q in range(world)],
                        op=dist.ReduceOp.MAX)
    flat_in = torch.arange(world * 4.) + rank
    flat = torch.empty(4)
    dist.reduce_scatter_tensor(flat, flat_in)
    big_in = (torch.arange(world * 30_000, dtype=torch.float32) % 11) * (rank + 1)
    big = torch.empty(30_000)
    dist.reduce_scatter_tensor(big, big_in)
    return out, inputs, avg, mx, flat, flat_in, big, big_in


def case_all_to_all(dist, torch, rank, world):
    ins = [torch.ones(2) * (10 * rank + q) for q in range(world)]
    outs = [torch.empty(2) for _ in range(world)]
    dist.all_to_all(outs, ins)
    even_in = torch.arange(world * 2.) + 100 * rank
    even = torch.empty(world * 2)
    dist.all_to_all_single(even, even_in)
    in_splits = [rank + q + 1 for q in range(world)]
    out_splits = [p + rank + 1 for p in range(world)]
    src = torch.arange(float(sum(in_splits))) + 1000 * rank
    dst = torch.empty(sum(out_splits))
    dist.all_to_all_single(dst, src, out_splits, in_splits)
    rows_in = torch.arange(world * 2 * 3, dtype=torch.int64).reshape(world * 2, 3) + rank
    rows = torch.empty(world * 2, 3, dtype=torch.int64)
    dist.all_to_all_single(rows, rows_in)
    big_in = torch.arange(world * 20_000, dtype=torch.float32) + rank
    big = torch.empty(world * 20_000)
    dist.all_to_all_single(big, big_in)
    return outs, ins, even, dst, rows, big


def case_barrier(dist, torch, rank, world):
    dist.barrier()
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=10))
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=10), wait_all_ranks=True)
    return dist.barrier()


def case_point_to_point(dist, torch, rank, world):
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    t = torch.arange(4.) + rank
    got = torch.empty(4)
    w = dist.isend(t, nxt, tag=7)  # (gloo's blocking send waits for the receiver)
    sender = dist.recv(got, prv, tag=7)
    w.wait()
    a = torch.ones(3, dtype=torch.int64) * rank
    b = torch.empty(3, dtype=torch.int64)
    ws = dist.isend(a, nxt, tag=1)
    wr = dist.irecv(b, prv, tag=1)
    ws.wait()
    wr.wait()
    big = torch.arange(300_000, dtype=torch.float32) + rank  # larger than a shared-memory slot
    bigr = torch.empty(300_000)
    ops = [dist.P2POp(dist.isend, big, nxt), dist.P2POp(dist.irecv, bigr, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    any_src = -1
    if rank == 0:
        x = torch.empty(2)
        any_src = [dist.recv(x) for _ in range(world - 1)]
    else:
        dist.send(torch.ones(2) * rank, 0)
    tags = [torch.empty(1) for _ in range(2)]
    w1 = dist.isend(torch.tensor([1.0 * rank]), nxt, tag=21)
    w2 = dist.isend(torch.tensor([2.0 * rank]), nxt, tag=20)
    dist.recv(tags[0], prv, tag=20)
    dist.recv(tags[1], prv, tag=21)
    w1.wait()
    w2.wait()
    return got, sender, b, bigr, sorted(any_src) if rank == 0 else any_src, t, tags


def case_objects(dist, torch, rank, world):
    lst = [{"a": 1, "t": torch.arange(3)}, "x" * 100, None] if rank == 1 else [None, None, None]
    dist.broadcast_object_list(lst, src=1)
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "blob": "y" * (rank * 1000)})
    g = [None] * world if rank == 0 else None
    dist.gather_object((rank, [rank] * rank), g, dst=0)
    out = [None]
    dist.scatter_object_list(out, [k * 3 for k in range(world)] if rank == 0 else None, src=0)
    sent = [None, None]
    src = None
    if rank == 0:
        dist.send_object_list([{"k": 1}, "hello"], dst=world - 1)
    elif rank == world - 1:
        src = dist.recv_object_list(sent, src=0)
    return lst, gathered, g, out, sent, src


def case_coalesced(dist, torch, rank, world):
    ts = [torch.ones(3) * rank, torch.arange(2.) + rank]
    dist.all_reduce_coalesced(ts)
    outs = [[torch.empty(2), torch.empty(3)] for _ in range(world)]
    dist.all_gather_coalesced(outs, [torch.ones(2) * rank, torch.arange(3.) * rank])
    return ts, outs


def case_local_errors(dist, torch, rank, world):
    """Errors raised on the calling rank before anything is sent (every rank calls)."""
    attempts = {
        "not_tensor": lambda: dist.all_reduce([torch.ones(1)]),
        "not_list": lambda: dist.all_gather(torch.ones(2), torch.ones(1)),
        "mixed_dtypes": lambda: dist.all_gather([torch.empty(2, dtype=torch.float64)] * world, torch.ones(2)),
        "gather_size": lambda: dist.all_gather([torch.empty(3) for _ in range(world)], torch.ones(2)),
        "stacked_into": lambda: dist.all_gather_into_tensor(torch.empty(world, 2), torch.ones(2)),
        "a2a_sizes": lambda: dist.all_to_all([torch.empty(1 + q) for q in range(world)],
                                             [torch.ones(1) for _ in range(world)]),
        "root_range": lambda: dist.broadcast(torch.ones(1), world + 3),
        "band_float": lambda: dist.all_reduce(torch.ones(2), dist.ReduceOp.BAND),
        "premul": lambda: dist.all_reduce(torch.ones(2), dist._make_nccl_premul_sum(2.0)),
        "complex_max": lambda: dist.all_reduce(torch.ones(2, dtype=torch.complex64), dist.ReduceOp.MAX),
        "send_self": lambda: dist.send(torch.ones(1), rank),
        "p2p_op": lambda: dist.P2POp(dist.all_reduce, torch.ones(1), 0),
        "scatter_objects_out": lambda: dist.scatter_object_list([], None),
    }
    out = {}
    for name, call in attempts.items():
        try:
            call()
            out[name] = None
        except Exception as e:  # noqa: BLE001 - the type is compared with torch's
            out[name] = e
    if rank == 1:  # lists on the wrong ranks: only rank 1 calls, and raises before communicating
        for name, call in {"gather_list_off_root": lambda: dist.gather(torch.ones(1), [torch.ones(1)] * world, 0),
                           "scatter_list_off_root": lambda: dist.scatter(torch.ones(1), [torch.ones(1)] * world, 0),
                           "no_gather_list_on_root": lambda: dist.gather(torch.ones(1), None, 1)}.items():
            try:
                call()
                out[name] = None
            except Exception as e:  # noqa: BLE001
                out[name] = e
    return out


def case_reduce_op_api(dist, torch, rank, world):
    R = dist.ReduceOp
    return (list(R.RedOpType.__members__), repr(R.SUM), str(R.MAX), R.SUM == 0, isinstance(R.SUM, R),
            R(R.MAX) == R.MAX, dist._make_nccl_premul_sum(2.0) == R.PREMUL_SUM, dist.supports_complex(R.MAX),
            dist.supports_complex(R.AVG))


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


# ---- running and comparing ---------------------------------------------------------------------------------------
def _plain(x, torch):
    """Results as plain comparable data: tensors as (dtype, NumPy values), errors by their builtin type."""
    if isinstance(x, BaseException):
        for base in (ValueError, TypeError, RuntimeError, AssertionError):
            if isinstance(x, base):
                return ("error", base.__name__)
        return ("error", type(x).__name__)
    if isinstance(x, torch.Tensor):
        dtype = str(x.dtype).split(".")[-1]
        v = x.detach().float() if dtype == "bfloat16" else x.detach()
        return ("tensor", dtype, tuple(x.shape), v.numpy().copy())
    if isinstance(x, dict):
        return {k: _plain(v, torch) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v, torch) for v in x)
    if isinstance(x, type) and issubclass(x, BaseException):
        return x.__name__
    return x


def run_cases(rank, world, lib, names, tiny):
    """Every case of ``names`` on this rank, in one process group of ``lib`` ("torch" or "ember")."""
    import warnings
    torch = importlib.import_module(lib)
    dist = torch.distributed
    saved = _tiny_buffers() if tiny else None
    try:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        out = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name in names:
                try:
                    out[name] = _plain(CASES[name](dist, torch, rank, world), torch)
                except Exception:  # noqa: BLE001 - reported by the case's test
                    out[name] = ("case failed", traceback.format_exc())
        dist.destroy_process_group()
        return out
    finally:
        if saved:
            _restore(saved)


def _tiny_buffers():
    """Shrink ember's buffers so that small tensors take the chunked paths (arena epochs, ring pieces)."""
    from ember.distributed import _p2p_engine, _shm_engine, _transport
    saved = [(_shm_engine, "CAPACITY", 4096), (_shm_engine, "DIRECT_MAX", 256), (_p2p_engine, "PIPE", 4096),
             (_p2p_engine, "SMALL", 256), (_transport, "SHM_MIN", 1024), (_transport, "SLOT", 8192)]
    old = [(m, k, getattr(m, k)) for m, k, _ in saved]
    for m, k, v in saved:
        setattr(m, k, v)
    return old


def _restore(saved):
    for m, k, v in saved:
        setattr(m, k, v)


def assert_same(a, b, where):
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k}]")
    elif isinstance(a, (list, tuple)) and not (a and a[0] == "tensor"):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{where}: {a!r} vs {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, tuple) and a and a[0] == "tensor":
        assert isinstance(b, tuple) and b[:3] == a[:3], f"{where}: torch {a[:3]} vs ember {b[:3] if b else b}"
        np.testing.assert_array_equal(b[3], a[3], err_msg=where)
    else:
        assert a == b, f"{where}: torch {a!r} vs ember {b!r}"


@pytest.fixture(scope="module")
def results(ranks):
    """{(world, library or config): per-rank results}, computed on first use."""
    cache = {}

    def get(world, config):
        if (world, config) not in cache:
            names = sorted(CASES)
            env, tiny = CONFIGS.get(config, ({}, False))
            try:
                cache[world, config] = ranks(world).run(run_cases, "ember" if config in CONFIGS else "torch", names,
                                                        tiny, env=env, timeout=300)
            except AssertionError as e:  # a run that failed as a whole fails each case, once
                cache[world, config] = e
        if isinstance(cache[world, config], AssertionError):
            raise cache[world, config]
        return cache[world, config]
    return get


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_case_matches_torch(results, case, world, config):
    pytest.importorskip("torch")  # (the oracle: on Python 3.11 only, see the root conftest.py)
    want, got = results(world, "torch"), results(world, config)
    for rank in range(world):
        if isinstance(got[rank][case], tuple) and got[rank][case][0] == "case failed":
            pytest.fail(f"rank {rank}:\n{got[rank][case][1]}")
        assert_same(want[rank][case], got[rank][case], f"{case} rank {rank}")


def beyond_gloo(rank, world):
    """What ember does where gloo fails or computes garbage."""
    import ember as torch
    dist = torch.distributed
    dist.init_process_group("gloo")
    s = torch.arange(4, dtype=torch.int16) * (rank + 1)
    dist.all_reduce(s)  # gloo: "Invalid scalar type"
    g = [torch.empty(2, dtype=torch.complex64) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.tensor([1j * rank, 1.0]), g, dst=0)  # gloo: "Invalid scalar type"
    me = torch.empty(2)
    w1 = dist.isend(torch.tensor([5.0, 6.0]), rank, tag=9)  # gloo: "Pair is not connected"
    w2 = dist.irecv(me, rank, tag=9)
    w1.wait()
    w2.wait()
    v = torch.zeros(4, 4)
    col = v[:, 1]  # a strided view: gloo reduces the 4 elements after its first one's address instead
    col.fill_(rank + 1.0)
    dist.all_reduce(col)
    dist.destroy_process_group()
    return s.numpy(), [x.numpy() for x in g] if g else None, me.numpy(), v.numpy()


def test_beyond_gloo(ranks):
    world = 2
    for rank, (s, g, me, v) in enumerate(ranks(world).run(beyond_gloo, timeout=120)):
        np.testing.assert_array_equal(s, np.arange(4, dtype=np.int16) * 3)
        assert s.dtype == np.int16
        if rank == 0:
            np.testing.assert_array_equal(np.stack(g), [[0, 1], [1j, 1]])
        np.testing.assert_array_equal(me, [5.0, 6.0])
        want = np.zeros((4, 4), np.float32)
        want[:, 1] = 3
        np.testing.assert_array_equal(v, want)


class _Device:
    id = 0


class _DeviceArray:
    """Stands in for a CuPy array on GPU 0: the CPU backend stages it through host memory (get, then set)."""

    device = _Device()

    def __init__(self, values):
        self._values = np.array(values)
        self.dtype, self.shape, self.size = self._values.dtype, self._values.shape, self._values.size
        self.ndim, self.flags = self._values.ndim, self._values.flags
        self.sets = 0

    def get(self):
        return self._values.copy()

    def set(self, host):
        self._values[...] = host
        self.sets += 1


def test_device_tensors_are_staged_through_host_memory():
    import ember
    from ember.distributed._cpu_backend import _Host
    dev = _DeviceArray(np.arange(4, dtype=np.float32))
    t = ember.Tensor._wrap(dev)
    h = _Host(t)
    assert type(h.array) is np.ndarray and h.array.tolist() == [0, 1, 2, 3]
    h.array *= 2  # what a collective does to the host copy
    version = t._version
    h.written()
    assert dev.sets == 1 and dev._values.tolist() == [0, 2, 4, 6] and t._version == version + 1


def device_tensors_on_gloo(rank, world):
    """Collectives of (stand-in) CuPy tensors on a "gloo" group: its CPU backend serves cuda tensors too, through
    host memory; the results land in device memory."""
    import ember
    dist = ember.distributed
    dist.init_process_group("gloo")

    def dev(values):
        return ember.Tensor._wrap(_DeviceArray(np.asarray(values, dtype=np.float32)))
    summed = dev(np.arange(4) + rank)
    assert summed.device.type == "cuda"
    dist.all_reduce(summed)
    async_sum = dev([rank + 1.0] * 3)
    dist.all_reduce(async_sum, dist.ReduceOp.MAX, async_op=True).wait()
    sent = dev([rank * 10.0, 1.0])
    dist.broadcast(sent, src=1)
    gathered = [dev([0.0, 0.0]) for _ in range(world)]
    dist.all_gather(gathered, dev([rank, -rank]))
    return [t._data._values for t in (summed, async_sum, sent, *gathered)], [t._data.sets for t in (summed, sent)]


def test_device_tensors_on_gloo_across_ranks(ranks):
    for rank, (values, sets) in enumerate(ranks(2).run(device_tensors_on_gloo)):
        summed, async_sum, sent, *gathered = values
        np.testing.assert_array_equal(summed, np.arange(4) * 2 + 1)
        np.testing.assert_array_equal(async_sum, [2.0] * 3)
        np.testing.assert_array_equal(sent, [10.0, 1.0])
        np.testing.assert_array_equal(np.stack(gathered), [[0, 0], [1, -1]])
        assert sets == [1, 1 if rank == 0 else 0]  # written back once; the source of the broadcast is left alone


def callbacks_wait(rank, world):
    """Completion callbacks (run on the group's communication thread) that issue collectives and wait for them, as
    torch's PowerSGD hook does."""
    import ember
    dist = ember.distributed
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    t, u, v, w = (ember.full((2,), rank + 1.0) for _ in range(4))

    def chained(f):
        dist.all_reduce(v)  # a synchronous call
        work = dist.all_reduce(w, dist.ReduceOp.MAX, async_op=True)
        work.wait()
        return dist.all_reduce(u, async_op=True).get_future().wait()[0] + f.value()[0]
    got = dist.all_reduce(t, async_op=True).get_future().then(chained).wait()
    return [x.tolist() for x in (got, t, u, v, w)]


def test_callbacks_may_wait_for_later_calls(ranks):
    for got, t, u, v, w in ranks(2).run(callbacks_wait, timeout=60):
        assert (got, t, u, v, w) == ([6.0, 6.0], [3.0, 3.0], [3.0, 3.0], [3.0, 3.0], [2.0, 2.0])
