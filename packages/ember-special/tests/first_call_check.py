"""A fresh process's first calls of every ember.special function, as a script (``python first_call_check.py
[seconds]``): run by test_first_call.py in the development environment (editable installs) and by
integration_tests/test_install.py in a fresh environment made from the wheels. It prints one JSON object:

* ``import``: the heavy modules ``import ember`` loaded (compilers, SciPy, Ray, tqdm, importlib.metadata: none);
* ``small``: the functions whose first calls on 1K elements (float32, float64) loaded numba or a numba loop;
* ``first``: for each function whose first calls on 16K elements (from ``_common.LOOP_MIN`` on, the size that asks
  for a numba loop) made numba compile or load a loop on the calling thread (or a thread of ``blocks``), those
  threads: loops must build on ember's background thread, "ember-jit";
* ``waited``: whether that thread was done within the given seconds; then ``warm``, the same as ``first`` for the
  second calls, which must find their loops compiled; ``jit_free``, the functions whose second large call still took
  the JIT-free path; ``failed``, the loops that did not compile; ``ready``, how many did.
"""
import json
import sys
import threading

import numpy as np

SMALL, LARGE = 1_000, 1 << 14
# the functions whose numba loops are ember-core's (ember._loops), which still compile or load on the call path
CORE_LOOPS = {"erf", "erfc", "ndtr", "expit", "softmax", "log_softmax"}
KINDS = {  # the arguments of the functions not called with one real tensor
    "gammainc": ("positive", "positive"), "gammaincc": ("positive", "positive"), "zeta": ("above1", "positive"),
    "xlogy": ("real", "positive"), "xlog1py": ("real", "positive"), "erfinv": ("unit",), "logit": ("unit",),
    "ndtri": ("unit",), "entr": ("positive",), "log1p": ("positive",), "bessel_y0": ("positive",),
    "bessel_y1": ("positive",), "modified_bessel_k0": ("positive",), "modified_bessel_k1": ("positive",),
    "scaled_modified_bessel_k0": ("positive",), "scaled_modified_bessel_k1": ("positive",),
}


def _inputs(size, dtype):
    rng = np.random.default_rng(0)
    return {"real": rng.standard_normal(size) * 3, "positive": rng.uniform(0.1, 10, size),
            "unit": rng.uniform(0.001, 0.999, size), "above1": rng.uniform(1.1, 10, size)}


def calls(ember, size, dtype):
    """(name, thunk) for every function of ember.special on ``size`` elements of ``dtype``."""
    data = {k: ember.from_numpy(v.astype(dtype)) for k, v in _inputs(size, dtype).items()}
    special = ember.special
    out = []
    for name in special.__all__:
        f = getattr(special, name)
        if name == "Tensor":
            continue
        if "polynomial" in name:
            out.append((name, lambda f=f: f(data["real"] / 3, 5)))
        elif name == "polygamma":
            out += [(f"polygamma n={n}", lambda n=n: special.polygamma(n, data["real"])) for n in (1, 2)]
        elif name == "multigammaln":
            out.append((name, lambda: special.multigammaln(data["above1"] + 1, 3)))
        elif name in ("softmax", "log_softmax", "logsumexp"):
            out.append((name, lambda f=f: f(data["real"], 0)))
        else:
            out.append((name, lambda f=f, kinds=KINDS.get(name, ("real",)): f(*[data[k] for k in kinds])))
    return out


def main():
    import ember
    from ember import _jit

    report, small, threads = {}, set(), []
    report["import"] = sorted({m.split(".")[0] for m in sys.modules} & {  # what ``import ember`` must not load
        "scipy", "numba", "llvmlite", "cupy", "cupyx", "cupy_backends", "ray", "tqdm"} | (
        {"importlib.metadata"} & set(sys.modules)))

    def record():  # every compilation or cache load of a numba loop from now on, by thread
        from numba.core import dispatcher
        compile_ = dispatcher.Dispatcher.compile

        def recorded(self, sig):
            threads.append(threading.current_thread().name)
            return compile_(self, sig)
        dispatcher.Dispatcher.compile = recorded

    for dtype in ("float32", "float64"):
        for name, call in calls(ember, SMALL, dtype):
            had_numba = "numba" in sys.modules
            del threads[:]
            call()
            if threads or ("numba" in sys.modules) != had_numba:
                small.add(name)
            if not had_numba and "numba" in sys.modules:
                record()
    report["small"] = sorted(small)
    if "numba" not in sys.modules:
        record()

    def run(label):
        found = {}
        for dtype in ("float32", "float64"):
            for name, call in calls(ember, LARGE, dtype):
                del threads[:]
                call()
                on_call = sorted({t for t in threads if t != "ember-jit"})
                if on_call:
                    found[name] = on_call
        report[label] = found

    run("first")
    report["waited"] = _jit.wait(timeout=float(sys.argv[1]) if len(sys.argv) > 1 else 900)

    asked = []
    loop = _jit.loop

    def recording_loop(*args):
        f = loop(*args)
        asked.append(f is not None)
        return f
    _jit.loop = recording_loop
    jit_free = set()
    for dtype in ("float32", "float64"):
        for name, call in calls(ember, LARGE, dtype):
            del asked[:]
            call()
            if not all(asked):
                jit_free.add(name)
    run("warm")
    report["jit_free"] = sorted(jit_free)
    report["failed"] = sorted(name for _, name, _ in _jit._failed)
    report["ready"] = len(_jit._ready)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
