"""Where the time of a model's training step goes, in ember and in PyTorch (the models of bench_models.py).

    python benchmarks/profile_models.py [gpt|moe-gpt|resnet|resnet-cl|lstm|digits ...] [--top 10] [--cprofile]

For each model: the median time of each phase of the step (forward, backward, clipping, optimiser step,
zero_grad), timed alternately for ember and torch; then, per phase, what it calls directly with its total time
(ember's autograd profiler, torch's profiler): the modules' ops (``linear``, ``conv2d``, ``batch_norm``: one name
on both sides), and in backward the graph nodes (ember's carry PyTorch's names, so the rows match), each with the
ops its VJP runs. ``--cprofile`` adds ember's Python functions by own time.
"""
import argparse
import collections
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_models  # noqa: E402
import bench_nn  # noqa: E402
import numpy as np  # noqa: E402


def _digits_setup(seed=0):
    import torch

    import ember
    models = bench_models._models(bench_nn._cnn, seed)
    rng = np.random.default_rng(seed)
    images, labels = rng.standard_normal((32, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, 32)
    steps = {}
    for name, lib in (("torch", torch), ("ember", ember)):
        model, x, y, loss = models[name], lib.tensor(images), lib.tensor(labels), [None]
        opt, loss_fn = lib.optim.Adam(model.parameters(), lr=5e-3), lib.nn.CrossEntropyLoss()

        def forward(model=model, x=x, y=y, loss_fn=loss_fn, loss=loss):
            loss[0] = loss_fn(model(x), y)

        def backward(loss=loss):
            loss[0].backward()
            loss[0] = None
        steps[name] = bench_models.Step(("zero_grad", opt.zero_grad), ("forward", forward), ("backward", backward),
                                        ("optimizer step", opt.step))
    return steps


SETUPS = {"gpt": bench_models.gpt_setup, "moe-gpt": lambda: bench_models.gpt_setup(experts=8),
          "resnet": bench_models.resnet_setup,
          "resnet-cl": lambda: bench_models.resnet_setup(memory_format="channels_last"),
          "lstm": bench_models.lstm_lm_setup, "digits": _digits_setup}


def _phase_times(steps, repeats):
    """Median seconds of each phase per side, the sides alternating step by step."""
    times = {side: collections.defaultdict(list) for side in steps}
    for _ in range(repeats):
        for side, step in steps.items():
            for name, fn in step.phases:
                t0 = time.perf_counter()
                fn()
                times[side][name].append(time.perf_counter() - t0)
    return {side: {name: statistics.median(ts) for name, ts in by.items()} for side, by in times.items()}


_PREFIXES = ("ember::", "aten::", "node::", "autograd::engine::evaluate_function: ", "torch::autograd::")


def _clean(name):
    for p in _PREFIXES:
        name = name.removeprefix(p)
    return name


def _by_phase(events, runs):
    """{phase: Counter(name -> µs per step)}: the events directly inside each ``phase::`` block (the ops a phase
    calls, or in backward the graph nodes), each with its total time (its children included)."""
    table = collections.defaultdict(collections.Counter)
    for e in events:
        parent = e.cpu_parent
        if parent is not None and parent.name.startswith("phase::"):
            table[parent.name[7:]][_clean(e.name)] += e.cpu_time_total / runs
    return table


def _ember_profile(step, runs):
    """ember's profile of ``runs`` steps, each phase in a block; the engine's node calls labelled with the nodes'
    names (PyTorch's: the backward rows match torch's)."""
    from ember.autograd import _engine
    from ember.autograd.profiler import profile, record_function

    apply, accumulate = _engine.Node.apply, _engine.AccumulateGrad.accumulate

    def labelled_apply(node, grads):
        with record_function(f"node::{node._name}"):
            return apply(node, grads)

    def labelled_accumulate(node, g, create_graph):
        with record_function("node::AccumulateGrad"):
            return accumulate(node, g, create_graph)
    _engine.Node.apply, _engine.AccumulateGrad.accumulate = labelled_apply, labelled_accumulate
    try:
        with profile() as prof:
            _run_phases(step, runs, record_function)
    finally:
        _engine.Node.apply, _engine.AccumulateGrad.accumulate = apply, accumulate
    return _by_phase(prof.function_events, runs)


def _torch_profile(step, runs):
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        _run_phases(step, runs, record_function)
    return _by_phase(prof.events(), runs)


def _run_phases(step, runs, record_function):
    for _ in range(runs):
        for name, fn in step.phases:
            with record_function(f"phase::{name}"):
                fn()


def _side_by_side(title, ember, torch, top):
    """The ``top`` entries of ember's side by time, next to torch's time for the same name, and torch's top."""
    print(f"\n{title}: ember's top {top} (µs per step; torch's time for the same name)")
    print(f"  {'name':<40} {'ember':>10} {'torch':>10} {'ratio':>7}   share of ember's phase")
    total = sum(ember.values()) or 1.0
    for name, t in ember.most_common(top):
        other = torch.get(name)
        ratio = f"{t / other:7.2f}" if other else "      -"
        print(f"  {name:<40} {t:10.0f} {other or 0:10.0f} {ratio}   {100 * t / total:5.1f}%")
    print(f"  {'(all)':<40} {total:10.0f} {sum(torch.values()):10.0f}")
    print(f"  torch's top {top}: " + ", ".join(f"{n} {t:.0f}" for n, t in torch.most_common(top)))


def profile_model(name, top, runs, use_cprofile):
    steps = SETUPS[name]()
    for step in steps.values():
        step()
    phases = _phase_times(steps, repeats=max(3, runs))
    print(f"\n=== {name} ===")
    print(f"  {'phase':<20} {'ember ms':>10} {'torch ms':>10} {'ratio':>7}")
    for phase in phases["ember"]:
        e, t = phases["ember"][phase], phases["torch"][phase]
        print(f"  {phase:<20} {e * 1e3:10.2f} {t * 1e3:10.2f} {e / t:7.2f}")
    e, t = sum(phases["ember"].values()), sum(phases["torch"].values())
    print(f"  {'step':<20} {e * 1e3:10.2f} {t * 1e3:10.2f} {e / t:7.2f}")
    e_phases, t_phases = _ember_profile(steps["ember"], runs), _torch_profile(steps["torch"], runs)
    for phase, _ in steps["ember"].phases:
        what = "graph nodes (each with the ops its VJP runs)" if phase == "backward" else "ops"
        _side_by_side(f"{phase}, {what}", e_phases[phase], t_phases[phase], top)
    if use_cprofile:
        prof = cProfile.Profile()
        prof.runcall(lambda: [steps["ember"]() for _ in range(runs)])
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top * 2)
        print("\nember's Python functions by own time (cProfile, all runs):")
        print("\n".join(out.getvalue().splitlines()[6:]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(SETUPS), help=f"any of {', '.join(SETUPS)} (default: all)")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5, help="steps per measurement")
    parser.add_argument("--cprofile", action="store_true")
    args = parser.parse_args()
    unknown = set(args.models) - set(SETUPS)
    if unknown:
        parser.error(f"unknown model(s) {', '.join(sorted(unknown))}; choose from {', '.join(SETUPS)}")
    import torch
    from _harness import blas_threads
    torch.set_num_threads(blas_threads()[0])
    for name in args.models:
        profile_model(name, args.top, args.runs, args.cprofile)


if __name__ == "__main__":
    main()
