"""ember.distributed.rpc against torch.distributed.rpc's TensorPipe agent, 2 workers on loopback: rpc_sync of a
small tensor add (latency), rpc_async with 500 calls in flight (time per call), a 64 MB float32 tensor sent and
returned (round trip), remote + to_here of a small add.

Both agents run in the same two worker processes (torch's and ember's, on ports of their own); worker 0 times
rounds that alternate between them, so that load from elsewhere on the machine touches both alike; a row reports
the median time per call. Worker 1 only serves.
"""
import multiprocessing as mp
import os
import statistics
import time

from _harness import benchmark, free_port

_RESULTS = {}
ROUNDS = 7


def _echo(x):
    return x


def _bench_worker(rank, port, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import warnings

    import torch
    import torch.distributed.rpc as trpc

    import ember
    import ember.distributed.rpc as erpc
    warnings.simplefilter("ignore")
    trpc.init_rpc(f"worker{rank}", rank=rank, world_size=2)
    os.environ["MASTER_PORT"] = str(port + 1)
    erpc.init_rpc(f"worker{rank}", rank=rank, world_size=2)
    if rank == 0:
        sides = {"torch": (torch, trpc), "ember": (ember, erpc)}

        def cases(lib, rpc):
            small = lib.ones(10)
            big = lib.ones(16 << 20)  # 64 MB

            def in_flight():
                futs = [rpc.rpc_async("worker1", lib.add, args=(small, 1)) for _ in range(500)]
                for f in futs:
                    f.wait()
            return {"sync": (lambda: rpc.rpc_sync("worker1", lib.add, args=(small, 1)), 200),
                    "async": (in_flight, 1),
                    "rt64": (lambda: rpc.rpc_sync("worker1", _echo, args=(big,)), 1),
                    "remote": (lambda: rpc.remote("worker1", lib.add, args=(small, 1)).to_here(), 100)}
        made = {side: cases(*spec) for side, spec in sides.items()}
        per_call = {"sync": 1, "async": 500, "rt64": 1, "remote": 1}
        times = {(side, case): [] for side in sides for case in per_call}
        for case in per_call:
            for side in sides:  # warm up
                for _ in range(3):
                    made[side][case][0]()
            for _ in range(ROUNDS):
                for side in sides:
                    fn, n = made[side][case]
                    t0 = time.perf_counter()
                    for _ in range(n):
                        fn()
                    times[side, case].append((time.perf_counter() - t0) / n / per_call[case])
        queue.put({k: statistics.median(v) for k, v in times.items()})
    erpc.shutdown()
    trpc.shutdown()


def _measure():
    if not _RESULTS:
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        port = free_port()
        procs = [ctx.Process(target=_bench_worker, args=(r, port, queue)) for r in range(2)]
        for p in procs:
            p.start()
        _RESULTS.update(queue.get(timeout=1800))
        for p in procs:
            p.join(timeout=120)
            if p.is_alive():
                p.kill()
    return _RESULTS


def _row(case):
    r = _measure()
    return {"ember": r["ember", case], "torch": r["torch", case]}


for _case, _what, _goal in (("sync", "rpc_sync of a small tensor add (latency)", 0.8),
                            ("async", "rpc_async, 500 in flight (per call)", 0.7),
                            ("rt64", "64 MB float32 tensor round trip", 0.5),
                            ("remote", "remote + to_here of a small add", 0.8)):
    benchmark(f"rpc 2 workers: {_what}", goal=_goal)(lambda c=_case: _row(c))
