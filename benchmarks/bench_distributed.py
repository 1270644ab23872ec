"""ember.distributed against torch.distributed's gloo on one host: all_reduce of one float (latency) and of 64 MB
of float32, all_gather of 16 MB per rank; on 2 and 4 ranks; ember through shared memory (its default on one host)
and forced onto TCP (``EMBER_DIST_TRANSPORT=tcp``, what ranks on different hosts use).

Each world size runs in one set of rank processes holding three groups over the same ranks: torch's gloo group,
ember's default group (shared memory) and an ember group made with TCP forced. Rounds alternate between them, so
that load from elsewhere on the machine touches all three alike; a row reports rank 0's median time per call.
"""
import multiprocessing as mp
import os
import socket
import statistics
import time

from _harness import benchmark

_RESULTS = {}
ROUNDS = 7


def _bench_rank(rank, world, port, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    import torch
    import torch.distributed as tdist

    import ember
    import ember.distributed as edist
    tdist.init_process_group("gloo")
    os.environ["MASTER_PORT"] = str(port + 1)
    edist.init_process_group("gloo")
    os.environ["EMBER_DIST_TRANSPORT"] = "tcp"
    tcp = edist.new_group(list(range(world)))
    del os.environ["EMBER_DIST_TRANSPORT"]
    sides = {"torch": (torch, tdist, None), "ember": (ember, edist, None), "ember-tcp": (ember, edist, tcp)}

    def cases(lib, dist, group):
        one = lib.ones(1)
        big = lib.ones(16 << 20)
        part = lib.ones(4 << 20)
        gathered = lib.empty(world * (4 << 20))
        return {"one": (lambda: dist.all_reduce(one, group=group), 200),
                "ar64": (lambda: dist.all_reduce(big, group=group), 1),
                "ag16": (lambda: dist.all_gather_into_tensor(gathered, part, group=group), 1)}

    import warnings
    warnings.simplefilter("ignore")
    made = {side: cases(*spec) for side, spec in sides.items()}
    times = {(side, case): [] for side in sides for case in made[side]}
    for case in ("one", "ar64", "ag16"):
        for side in sides:  # warm up: first touches of buffers and segments
            for _ in range(3):
                made[side][case][0]()
        for _ in range(ROUNDS):
            for side, (_, dist, group) in sides.items():
                fn, n = made[side][case]
                dist.barrier(group=group)
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                times[side, case].append((time.perf_counter() - t0) / n)
    queue.put((rank, {k: statistics.median(v) for k, v in times.items()}))
    edist.destroy_process_group()
    tdist.destroy_process_group()


def _free_port():
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with socket.socket() as s:  # the next port is ember's store
            try:
                s.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                continue


def _measure(world):
    if world not in _RESULTS:
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        port = _free_port()
        procs = [ctx.Process(target=_bench_rank, args=(r, world, port, queue)) for r in range(world)]
        for p in procs:
            p.start()
        results = dict(queue.get(timeout=1800) for _ in procs)
        for p in procs:
            p.join()
        _RESULTS[world] = results[0]
    return _RESULTS[world]


def _row(world, case, path):
    r = _measure(world)
    return {"ember": r[path, case], "torch": r["torch", case]}


for _world in (2, 4):
    for _path, _label in (("ember", "shared memory"), ("ember-tcp", "TCP forced")):
        for _case, _what, _goal in (("one", "all_reduce of 1 float32 (latency)", 1.0),
                                    ("ar64", "all_reduce of 64 MB float32", 0.5 if _path == "ember" else 1.0),
                                    ("ag16", "all_gather of 16 MB per rank", 1.0)):
            benchmark(f"distributed {_world} ranks, {_label}: {_what}", goal=_goal)(
                lambda w=_world, c=_case, p=_path: _row(w, c, p))
