"""``python -m ember.utils.bottleneck script.py [args...]``: a first look at where a script spends time.

The script runs once under Python's cProfile and once under ember's autograd profiler (and, when
CUDA is available, once more with per-op CUDA timing); the report starts with a summary of the
environment. The script must finish in finite time; it runs with ``sys.argv = [script, *args]`` and
its directory first on ``sys.path``, as ``__main__``.

CUDA ops run asynchronously: cProfile and CPU-time columns count the time to launch kernels, and an
op that synchronizes looks expensive. If the CPU total is much larger than the CUDA total the script
is CPU-bound and the CPU-mode table is the one to read; otherwise look at the CUDA-mode table.
"""
import argparse
import cProfile
import importlib.metadata
import os
import platform
import pstats
import sys

import ember
from ember.autograd import profiler

_INTRO = ("`bottleneck` summarizes a run of your script with Python's cProfile and ember's autograd profiler, as a "
          "first step in finding bottlenecks.")


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment_summary():
    cuda = ember.cuda.is_available()
    cupy = next(filter(None, (_version(d) for d in ("cupy", "cupy-cuda12x", "cupy-cuda11x"))), None)
    rows = [("ember", ember.__version__), ("ember-autograd", _version("ember-autograd")),
            ("Python", platform.python_version()), ("NumPy", _version("numpy")), ("CuPy", cupy or "not installed"),
            ("OS", platform.platform()), ("CUDA available", str(cuda))]
    if cuda:
        rows.append(("GPU", ember.cuda.get_device_name()))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)} : {v}" for k, v in rows)


def _run(code, path, args):
    """Execute the compiled script as ``__main__`` (a SystemExit from it ends just the run)."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        exec(code, {"__name__": "__main__", "__file__": path, "__package__": None, "__cached__": None,
                    "__builtins__": __builtins__})
    except SystemExit:
        pass
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def run_cprofile(code, path, args):
    prof = cProfile.Profile()
    prof.enable()
    try:
        _run(code, path, args)
    finally:
        prof.disable()
    return prof


def run_autograd_profiler(code, path, args, use_cuda=False):
    with profiler.profile(use_device="cuda" if use_cuda else None) as prof:
        _run(code, path, args)
    return prof


def _title(text):
    return f"{'-' * 80}\n  {text}\n{'-' * 80}"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m ember.utils.bottleneck", description=_INTRO)
    parser.add_argument("scriptfile", help="path to the script to be run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="command-line arguments for the script")
    parser.add_argument("--topk", type=int, default=15, help="rows to show in each table (default 15)")
    opts = parser.parse_args(argv)
    path = opts.scriptfile
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec")

    print(_INTRO, "\n")
    print(_title("Environment Summary"))
    print(environment_summary(), "\n")

    print(_title("cProfile output"))
    stats = pstats.Stats(run_cprofile(code, path, opts.args), stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(opts.topk)

    cuda = ember.cuda.is_available()
    print(_title("autograd profiler output (CPU mode)"))
    cpu = run_autograd_profiler(code, path, opts.args)
    print(f"        top {opts.topk} events sorted by cpu_time_total\n")
    if cuda:
        print("Because CUDA ops run asynchronously, CPU times here include kernel launches but not kernel "
              "execution,\nunless the op synchronizes. Compare with the CUDA-mode table below.\n")
    print(cpu.key_averages().table(sort_by="cpu_time_total", row_limit=opts.topk))
    if cuda:
        print(_title("autograd profiler output (CUDA mode)"))
        dev = run_autograd_profiler(code, path, opts.args, use_cuda=True)
        print(f"        top {opts.topk} events sorted by cuda_time_total\n")
        print("The first run (cProfile) also paid for CUDA start-up (buffer allocation) in its timings.\n")
        print(dev.key_averages().table(sort_by="cuda_time_total", row_limit=opts.topk))
    return 0


if __name__ == "__main__":
    sys.exit(main())
