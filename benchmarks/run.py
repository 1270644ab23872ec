"""Run every benchmarks/bench_*.py: ember and PyTorch (CPU) side by side, same thread count.

    python benchmarks/run.py [-k SUBSTRING] [--json PATH]

Prints one row per benchmark: ember time, torch time, their ratio and the goal for it, and writes them as JSON
to bench-results/<date>-<time>-<commit>.json (``-dirty`` when the checkout has uncommitted changes), so that runs
on different commits can be compared; ``--json`` names another file. Nothing is asserted: timings depend on the
machine, and a benchmark is not a test.
"""
import argparse
import datetime
import importlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness  # noqa: E402


def _fmt(seconds):
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _commit():
    """The checkout's short commit hash, with ``-dirty`` when it has uncommitted changes ("unknown" outside git)."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, check=True).stdout.strip()
    try:
        sha = git("rev-parse", "--short=10", "HEAD")
        return sha + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="run only benchmarks whose name contains this")
    parser.add_argument("--json", help="write the results to this file (default: bench-results/<date>-<commit>.json)")
    args = parser.parse_args(argv)

    import numpy as np
    import torch

    import ember

    threads, blas = _harness.blas_threads()
    torch.set_num_threads(threads)  # the same number of threads as NumPy's BLAS uses
    started = datetime.datetime.now().astimezone()
    env = {"commit": _commit(), "date": started.isoformat(timespec="seconds"),
           "python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
           "ember": ember.__version__, "threads": threads, "numpy_blas": blas,
           "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
           "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE")}
    print(", ".join(f"{k}={v}" for k, v in env.items()))

    for path in sorted(HERE.glob("bench_*.py")):
        importlib.import_module(path.stem)
    rows = []
    w = max([len(b["name"]) for b in _harness.BENCHMARKS] + [9])
    header = f"{'benchmark':<{w}} {'ember':>10} {'torch':>10} {'ratio':>7} {'goal':>6}"
    print(header + "\n" + "-" * len(header))
    for b in _harness.BENCHMARKS:
        if args.k not in b["name"]:
            continue
        t = b["fn"]()
        ratio = t["ember"] / t["torch"]
        mark = "" if ratio <= b["goal"] else "  (over goal)"
        goal = f"≤{b['goal']}"
        print(f"{b['name']:<{w}} {_fmt(t['ember']):>10} {_fmt(t['torch']):>10} {ratio:>7.2f} {goal:>6}{mark}",
              flush=True)
        rows.append({"name": b["name"], "ember_s": t["ember"], "torch_s": t["torch"], "ratio": ratio,
                     "goal": b["goal"]})
    out = Path(args.json) if args.json else \
        HERE.parent / "bench-results" / f"{started:%Y%m%d-%H%M%S}-{env['commit']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"environment": env, "filter": args.k, "results": rows}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
