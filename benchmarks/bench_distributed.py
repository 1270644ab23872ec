"""ember.distributed against torch.distributed's gloo on one host: all_reduce of one float (latency) and of 64 MB
of float32, all_gather of 16 MB per rank; on 2 and 4 ranks; ember through shared memory (its default on one host)
and forced onto TCP (``EMBER_DIST_TRANSPORT=tcp``, what ranks on different hosts use).

Each world size runs in one set of rank processes holding three groups over the same ranks: torch's gloo group,
ember's default group (shared memory) and an ember group made with TCP forced. Rounds alternate between them, so
that load from elsewhere on the machine touches all three alike; a row reports rank 0's median time per call.
"""
import multiprocessing as mp
import os
import statistics
import time

from _harness import benchmark, free_port

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


def _measure(world):
    if world not in _RESULTS:
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        port = free_port()
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


# ---- DistributedDataParallel: one training step -------------------------------------------------------------------
# An MLP 784-512-512-10 with a batch of 128 per rank, cross entropy and SGD, on 2 ranks: torch's DDP on gloo and
# ember's in the same rank processes, steps alternating between them in rounds. Each rank computes on one thread, as
# torchrun sets OMP_NUM_THREADS=1 for several processes per host. Rank 0 then follows ember's steps on a timeline:
# when each bucket's all-reduce starts and ends, and when backward ends (DDP's finalisation, which waits for them):
# the share of the buckets' bytes reduced before backward ends, and the waiting left after it, against the same
# all-reduces run alone.
DDP_STEPS = 10


def _ddp_rank(rank, world, port, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      OMP_NUM_THREADS="1")
    import torch
    import torch.distributed as tdist

    import ember
    import ember.distributed as edist
    tdist.init_process_group("gloo")
    os.environ["MASTER_PORT"] = str(port + 1)
    edist.init_process_group("gloo")

    def setup(lib):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Linear(784, 512), lib.nn.ReLU(), lib.nn.Linear(512, 512), lib.nn.ReLU(),
                                lib.nn.Linear(512, 10))
        model = lib.nn.parallel.DistributedDataParallel(net)
        opt = lib.optim.SGD(model.parameters(), lr=0.01)
        g = lib.Generator().manual_seed(rank)
        x, y = lib.randn(128, 784, generator=g), lib.randint(0, 10, (128,), generator=g)

        def step():
            opt.zero_grad()
            lib.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        return step, model

    sides = {"torch": (setup(torch), tdist), "ember": (setup(ember), edist)}
    for (step, _), _ in sides.values():
        for _ in range(5):  # warm up (and rebuild the buckets)
            step()
    times = {side: [] for side in sides}
    for _ in range(ROUNDS):
        for side, ((step, _), dist) in sides.items():
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(DDP_STEPS):
                step()
            times[side].append((time.perf_counter() - t0) / DDP_STEPS)
    queue.put((rank, {"steps": {k: statistics.median(v) for k, v in times.items()},
                      **_ddp_timeline(sides["ember"][0], edist)}))
    edist.destroy_process_group()
    tdist.destroy_process_group()


def _ddp_timeline(stepper, edist):
    """The overlap of ember's DDP steps: medians of the share of bucket bytes whose all-reduce ended before backward
    did, of the wait left after backward, and of the buckets' all-reduce alone."""
    step, model = stepper
    reducer = model.reducer
    plain_launch, plain_finalize = reducer._launch, reducer._finalize
    marks = {}

    def launch(b):
        plain_launch(b)
        b.work.get_future().add_done_callback(lambda f, n=b.buffer.numel(): marks["done"].append(
            (time.perf_counter(), n)))

    def finalize():
        marks["end"] = time.perf_counter()
        plain_finalize()
    reducer._launch, reducer._finalize = launch, finalize
    shares, waits = [], []
    for _ in range(ROUNDS * DDP_STEPS):
        edist.barrier()
        marks.update(done=[])
        step()
        end, done = marks["end"], marks["done"]
        shares.append(sum(n for t, n in done if t <= end) / sum(n for _, n in done))
        waits.append(max(0.0, max(t for t, _ in done) - end))
    reducer._launch, reducer._finalize = plain_launch, plain_finalize
    buffers = [b.buffer for b in reducer._buckets]
    alone = []
    for _ in range(ROUNDS * DDP_STEPS):
        edist.barrier()
        t0 = time.perf_counter()
        for w in [edist.all_reduce(b, async_op=True) for b in buffers]:
            w.wait()
        alone.append(time.perf_counter() - t0)
    return {"share": statistics.median(shares), "wait": statistics.median(waits), "alone": statistics.median(alone),
            "buckets": [b.numel() for b in buffers]}


def _measure_ddp():
    if "ddp" not in _RESULTS:
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        port = free_port()
        procs = [ctx.Process(target=_ddp_rank, args=(r, 2, port, queue)) for r in range(2)]
        for p in procs:
            p.start()
        results = dict(queue.get(timeout=1800) for _ in procs)
        for p in procs:
            p.join()
        r = results[0]
        print(f"  ember DDP overlap (rank 0): buckets of {r['buckets']} floats; {r['share']:.0%} of the bytes reduced "
              f"before backward ends; {r['wait'] * 1e3:.2f} ms of all-reduce left after it (alone, the buckets' "
              f"all-reduce takes {r['alone'] * 1e3:.2f} ms)")
        _RESULTS["ddp"] = r["steps"]
    return _RESULTS["ddp"]


benchmark("distributed 2 ranks: DDP training step, MLP 784-512-512-10, batch 128 per rank", goal=1.2)(_measure_ddp)
