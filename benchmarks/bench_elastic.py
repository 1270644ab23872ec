"""emberrun against torchrun (PyTorch 2.13) on this host: wall time of a launch of 2 trivial workers with
--standalone (launcher start to exit), and the time from SIGKILL of a worker to every worker of the restarted
group running again (--max-restarts=1): the time between the kill and the later of the two restarted workers'
first line. The same two for emberrun's Ray path (--ray-address) with a warm Ray instance (started once here,
then joined by each launch), each against torchrun's figure; those rows are left out where ray is not installed.

Launchers run in fresh processes, alternating between ember and torch round by round; a row reports medians.
"""
import importlib.util
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import benchmark

ROUNDS = 5
# a worker's first line notes when it started; "wait" keeps attempt 0 running until it is killed
_WORKER = """import os, sys, time
t = time.time()
out, rank, restart = os.environ["BENCH_OUT"], os.environ["RANK"], os.environ["TORCHELASTIC_RESTART_COUNT"]
with open(os.path.join(out, f"up_{rank}_{restart}.tmp"), "w") as f:
    f.write(f"{t} {os.getpid()}")
os.replace(os.path.join(out, f"up_{rank}_{restart}.tmp"), os.path.join(out, f"up_{rank}_{restart}"))
if sys.argv[1] == "wait" and restart == "0":
    time.sleep(120)
"""
_LAUNCHERS = {"ember": [sys.executable, "-m", "ember.distributed.run"],
              "torch": [sys.executable, "-c", "import sys; from torch.distributed.run import main; sys.exit(main())"]}
_RESULTS = {}


def _env(out):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "PET_"))}
    env.update(BENCH_OUT=str(out), OMP_NUM_THREADS="1")
    return env


def _up(out, rank, restart):
    """(start time, pid) a worker noted, or None."""
    path = Path(out) / f"up_{rank}_{restart}"
    if not path.exists():
        return None
    t, pid = path.read_text().split()
    return float(t), int(pid)


def _wait(predicate, timeout=120):
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise TimeoutError("benchmark job did not get there")
        time.sleep(0.002)


def _launch_time(options, script):
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        subprocess.run([*options, "--nproc-per-node", "2", "--max-restarts", "0", script, "exit"], env=_env(out),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0


def _recovery_time(options, script):
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.Popen([*options, "--nproc-per-node", "2", "--max-restarts", "1", script, "wait"],
                                env=_env(out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait(lambda: _up(out, 0, 0) and _up(out, 1, 0))
            t0 = time.time()
            os.kill(_up(out, 1, 0)[1], signal.SIGKILL)
            _wait(lambda: _up(out, 0, 1) and _up(out, 1, 1))
            return max(_up(out, 0, 1)[0], _up(out, 1, 1)[0]) - t0
        finally:
            proc.wait(timeout=120)


def _measure():
    if _RESULTS:
        return _RESULTS
    ray_ctx = None
    sides = {"ember": _LAUNCHERS["ember"] + ["--standalone"], "torch": _LAUNCHERS["torch"] + ["--standalone"]}
    if importlib.util.find_spec("ray") is not None:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback
        import ray
        ray_ctx = ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
        sides["ember-ray"] = _LAUNCHERS["ember"] + ["--ray-address", ray_ctx.address_info["gcs_address"]]
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(_WORKER)
        times = {(side, what): [] for side in sides for what in ("launch", "recovery")}
        for options in sides.values():  # warm up: first imports, the Ray workers' pool
            _launch_time(options, f.name)
        for _ in range(ROUNDS):
            for side, options in sides.items():
                times[side, "launch"].append(_launch_time(options, f.name))
                times[side, "recovery"].append(_recovery_time(options, f.name))
        _RESULTS.update({key: statistics.median(ts) for key, ts in times.items()})
    finally:
        os.unlink(f.name)
        if ray_ctx is not None:
            import ray
            ray.shutdown()
    return _RESULTS


def _row(side, what):
    r = _measure()
    return {"ember": r[side, what], "torch": r["torch", what]}


@benchmark("emberrun --standalone launch, 2 trivial workers", goal=1.0)
def launch_standalone():
    return _row("ember", "launch")


@benchmark("emberrun SIGKILL -> all running again (--max-restarts=1)", goal=0.5)
def recovery_standalone():
    return _row("ember", "recovery")


if importlib.util.find_spec("ray") is not None:
    @benchmark("emberrun --ray-address (warm) launch vs torchrun --standalone", goal=1.0)
    def launch_ray():
        return _row("ember-ray", "launch")

    @benchmark("emberrun --ray-address (warm) SIGKILL -> running vs torchrun", goal=0.5)
    def recovery_ray():
        return _row("ember-ray", "recovery")
