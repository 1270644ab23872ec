"""Shared timing helpers for the benchmarks. A benchmark measures and reports; it never asserts."""
import os
import socket
import statistics
import subprocess
import sys
import time
import timeit

BENCHMARKS = []


def benchmark(name, goal):
    """Register ``fn() -> {"ember": seconds, "torch": seconds}``; goal is the ember/torch ratio aimed at."""
    def register(fn):
        BENCHMARKS.append({"name": name, "goal": goal, "fn": fn})
        return fn
    return register


def best(stmt, repeat=7, **namespace):
    """Best-of-``repeat`` seconds per execution of ``stmt`` (timeit, loop count picked by autorange)."""
    timer = timeit.Timer(stmt, globals=namespace)
    number, _ = timer.autorange()
    number = max(1, number)
    return min(timer.repeat(repeat=repeat, number=number)) / number


PAUSE = 0.02  # seconds between the two sides' batches (see ``interleaved``)


def interleaved(fe, ft, repeats=9, budget=0.02):
    """Median seconds per call of ``fe`` (ember) and ``ft`` (torch), timed alternately: each repeat runs ``fe``
    then ``ft`` enough times to take about ``budget`` seconds, so load from other processes touches both alike.
    The callers warm both up first; ember's numba loops, compiled in the background after their first calls, are
    waited for here (bench_startup times the first calls). Each batch starts after a pause that lets the other
    side's threads go idle: torch's OpenMP workers spin for milliseconds after its last call, on the core ember's
    helper would take (measured: ember's pow(x, 3) at 12x64x512 took 24 us alone, 35-37 us right after torch's
    batches, 25 us after a 20 ms pause; ember's helpers spin 0.2 ms)."""
    from ember import _jit
    _jit.wait()
    t0 = time.perf_counter()
    fe()
    number = max(1, int(budget / max(time.perf_counter() - t0, 1e-7)))
    times = {"ember": [], "torch": []}
    for _ in range(repeats):
        for side, f in (("ember", fe), ("torch", ft)):
            time.sleep(PAUSE)
            t0 = time.perf_counter()
            for _ in range(number):
                f()
            times[side].append((time.perf_counter() - t0) / number)
    return {side: statistics.median(ts) for side, ts in times.items()}


def import_time(module, runs=7):
    """Best wall time of ``import module`` in fresh interpreters (interpreter start-up excluded)."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    times = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env=dict(os.environ), cwd=os.path.dirname(os.path.abspath(__file__)) + "/..")
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return min(times)


def blas_threads():
    """(threads NumPy's BLAS uses, description of that BLAS) — via threadpoolctl when available."""
    try:
        import numpy  # noqa: F401  (loads the BLAS so threadpoolctl sees it)
        from threadpoolctl import threadpool_info
    except ImportError:
        return os.cpu_count() or 1, "unknown (threadpoolctl not installed)"
    for pool in threadpool_info():
        if pool.get("user_api") == "blas" and "numpy" in pool.get("filepath", ""):
            desc = f"{pool.get('internal_api')} {pool.get('version')} ({pool.get('architecture')})"
            return pool["num_threads"], desc
    return os.cpu_count() or 1, "unknown (no BLAS found for numpy)"


def free_port():
    """A loopback port that is free together with the next one (ember's store listens there)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                continue
