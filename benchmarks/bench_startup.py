"""Start-up against PyTorch: a fresh process's import and first call of each special function (CPU).

    python benchmarks/bench_startup.py   # every function's first call, then the medians and maxima

Each function runs in a fresh process per library: ``import ember`` (every installed package) or ``import torch``,
then one call of ``ember.special.<name>`` / ``torch.special.<name>`` on float32 inputs of 1K and of 1M elements (the
arguments of bench_special). A row's time is the import plus that first call. ember's first call never compiles:
its numba loops build in a background thread, and until then a large input takes the op's JIT-free path.
"""
import json
import os
import statistics
import subprocess
import sys

from _harness import benchmark
from bench_special import CASES

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {"1K": 1_000, "1M": 1_000_000}
# label -> (torch.special name, argument spec) for bench_special's functions and its extra calls
CALLS = {name: (name, spec) for name, spec in CASES.items()}
CALLS.update({"multigammaln p=3": ("multigammaln", ("positive+1", 3)), "polygamma n=2": ("polygamma", (2, "real"))})

# One fresh process: the import, the inputs, one call; prints the import's and the call's seconds.
CHILD = """
import sys, time
t0 = time.perf_counter()
import importlib
lib = importlib.import_module(sys.argv[1])
t1 = time.perf_counter()
import json
import numpy as np
name, size, spec = sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
rng = np.random.default_rng(0)
data = {"real": rng.standard_normal(size) * 3, "positive": rng.uniform(0.1, 10, size),
        "unit": rng.uniform(0.001, 0.999, size), "cheb": rng.uniform(-1, 1, size),
        "rows": rng.standard_normal((max(1, size // 1000), 1000)) * 3}
args = []
for a in spec:
    if isinstance(a, str):
        kind, plus = (a[:-2], 1) if a.endswith("+1") else (a, 0)
        args.append(lib.from_numpy((data[kind] + plus).astype(np.float32)))
    else:
        args.append(a)
f = getattr(lib.special, name)
t2 = time.perf_counter()
f(*args)
t3 = time.perf_counter()
print(json.dumps([t1 - t0, t3 - t2]))
"""

_RESULTS = {}


def first_call(lib, label, size):
    """(import seconds, first-call seconds) of ``lib``'s function ``label`` on ``size`` elements, fresh process."""
    name, spec = CALLS[label]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # installs have their .pyc files
    out = subprocess.run([sys.executable, "-c", CHILD, lib, name, str(size), json.dumps(spec)], capture_output=True,
                         text=True, check=True, cwd=os.path.dirname(HERE), env=env)
    return tuple(json.loads(out.stdout.strip().splitlines()[-1]))


def results(size):
    """Every function's (import + first call) seconds per library, measured once per size."""
    if size not in _RESULTS:
        _RESULTS[size] = {lib: {label: sum(first_call(lib, label, SIZES[size])) for label in CALLS}
                          for lib in ("ember", "torch")}
    return _RESULTS[size]


STATS = {"median": statistics.median, "max": max}


def _register(size, stat):
    def run():
        return {lib: STATS[stat](times.values()) for lib, times in results(size).items()}
    benchmark(f"import + first call of a special function, {size} float32, fresh process ({stat})", goal=0.5)(run)


for _size in SIZES:
    for _stat in STATS:
        _register(_size, _stat)


def main():
    for size in SIZES:
        r = results(size)
        print(f"{size} float32: import + first call, seconds")
        for label in CALLS:
            print(f"  {label:<34} ember {r['ember'][label]:6.3f}   torch {r['torch'][label]:6.3f}", flush=True)
        for stat, f in STATS.items():
            e, t = f(r["ember"].values()), f(r["torch"].values())
            print(f"  {stat}: ember {e:.3f} s, torch {t:.3f} s, ratio {e / t:.2f}")


if __name__ == "__main__":
    main()
