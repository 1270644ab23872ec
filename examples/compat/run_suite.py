"""Run the compatibility programs of this folder and print their losses.

    python run_suite.py [--json] [case ...]                   # with PyTorch
    python -m ember.compat run_suite.py [--json] [case ...]   # the same files with ember as torch
    python run_suite.py --compare [case ...]                  # both, each in its own process, side by side

A case is a program (a file of this folder, without .py) and, after a colon, keyword arguments for its main(),
e.g. ``gpt:flash=False,dropout=0.1``. Without cases, every case of CASES runs. ``--json`` prints one JSON object:
case -> {"losses": [...], "seconds": ...} or {"error": traceback}, plus "library": the name of the module that
``import torch`` gave ("torch" or "ember").
"""
import argparse
import ast
import importlib
import json
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = [
    "mnist_cnn", "mnist_cnn:num_workers=2", "vae", "word_language_model_lstm",
    "word_language_model_lstm:model_type='GRU'", "word_language_model_lstm:model_type='RNN_TANH'",
    "word_language_model_transformer", "gcn", "dcgan", "super_resolution", "time_sequence_prediction",
    "time_sequence_prediction:line_search_fn='strong_wolfe'", "gpt", "gpt:flash=False", "gpt:dropout=0.1",
    "gpt:schedule='sequential'", "resnet", "policy_gradient", "policy_gradient:continuous=True",
]


def parse_case(case):
    """'gpt:flash=False,dropout=0.1' -> ('gpt', {'flash': False, 'dropout': 0.1})"""
    name, _, args = case.partition(":")
    kwargs = {}
    for item in filter(None, args.split(",")):
        key, _, value = item.partition("=")
        kwargs[key.strip()] = ast.literal_eval(value.strip())
    return name, kwargs


def run_cases(cases):
    import torch  # ember's modules when run through `python -m ember.compat`

    results = {"library": torch.__name__}
    sys.path.insert(0, HERE)
    for case in cases:
        name, kwargs = parse_case(case)
        start = time.perf_counter()
        try:
            losses = importlib.import_module(name).main(**kwargs)
            results[case] = {"losses": [float(x) for x in losses], "seconds": time.perf_counter() - start}
        except Exception:
            results[case] = {"error": traceback.format_exc()}
    return results


def compare(cases):
    """Run the cases with PyTorch and with ember (CPU only), each in a fresh process; print the largest relative
    difference of the losses per case."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    runs = {}
    for label, prefix in (("torch", []), ("ember", ["-m", "ember.compat"])):
        out = subprocess.run([sys.executable, *prefix, __file__, "--json", *cases], capture_output=True, text=True,
                             env=env, check=True)
        runs[label] = json.loads(out.stdout)
    for case in cases:
        t, e = runs["torch"][case], runs["ember"][case]
        if "error" in t or "error" in e:
            print(f"{case:60s} error:\n{t.get('error') or e.get('error')}")
            continue
        worst = max(abs(a - b) / max(abs(a), 1e-30) for a, b in zip(t["losses"], e["losses"]))
        print(f"{case:60s} {len(t['losses']):3d} losses, max rel diff {worst:.1e}   "
              f"torch {t['seconds']:.2f} s, ember {e['seconds']:.2f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=CASES)
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    parser.add_argument("--compare", action="store_true", help="run under PyTorch and ember and compare")
    args = parser.parse_args()
    if args.compare:
        compare(args.cases)
        return
    results = run_cases(args.cases)
    if args.json:
        print(json.dumps(results))
        return
    for case in args.cases:
        r = results[case]
        print(f"{case}: " + (" ".join(f"{x:.6g}" for x in r["losses"]) if "losses" in r else r["error"]))


if __name__ == "__main__":
    main()
