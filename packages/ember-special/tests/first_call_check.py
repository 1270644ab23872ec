"""A fresh process's first calls of every ember.special function and of ember-core's functions that run numba loops
(``ember._loops``: GELU, SiLU, softplus with their backward ops, sigmoid, softmax, log_softmax, layer norm with
their gradients, the gradients of sigmoid and tanh, small powers), as a script (``python first_call_check.py
[seconds]``): run by test_first_call.py in the development environment (editable installs) and by
integration_tests/test_install.py in a fresh environment made from the wheels. It prints one JSON object:

* ``import``: the heavy modules ``import ember`` loaded (compilers, SciPy, Ray, tqdm, importlib.metadata: none);
* ``small``: the functions whose first calls on 1K elements (float32, float64) loaded numba or a numba loop;
* ``first``: for each function whose first calls on 16K elements (from ``_common.LOOP_MIN`` on, the size that asks
  for a numba loop) made numba compile or load a loop on the calling thread (or a thread of ``blocks``), those
  threads: loops must build on ember's background thread, "ember-jit";
* ``waited``: whether that thread was done within the given seconds; then ``warm``, the same as ``first`` for the
  second calls, which must find their loops compiled; ``jit_free``, the functions whose second large call still took
  the JIT-free path; ``asked``, those whose second large call asked for a loop; ``failed``, the loops that did not
  compile; ``ready``, how many did.
"""
import json
import sys
import threading

import numpy as np

SMALL, LARGE = 1_000, 1 << 14
# the calls whose numba loops are ember-core's (ember._loops): ember.special's that use them, and core's own
CORE_LOOPS = {"erf", "erfc", "ndtr", "expit", "softmax", "log_softmax", "core gelu", "core gelu tanh",
              "core _gelu_backward", "core _gelu_backward tanh", "core sigmoid", "core _sigmoid_backward",
              "core _tanh_backward", "core silu", "core _silu_backward", "core softplus", "core _softplus_backward",
              "core softmax", "core log_softmax", "core softmax backward", "core log_softmax backward",
              "core layer_norm", "core layer_norm backward", "core pow 3", "core pow -1", "core pow -2"}
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


def core_calls(ember, data):
    """(name, thunk) for ember-core's functions that run its loops (forward and backward ops; the row VJPs as
    autograd calls them, so that no other package is needed)."""
    from ember._ops import activation, normalization, pointwise
    x, g = data["real"], data["positive"]
    rows, grows = x.reshape(-1, 8), g.reshape(-1, 8)
    w, b = ember.linspace(0.5, 2, 8, dtype=x.dtype), ember.linspace(-1, 1, 8, dtype=x.dtype)
    sm, lsm = ember.softmax(rows, -1), ember.log_softmax(rows, -1)
    return [
        ("core gelu", lambda: activation.gelu(x)), ("core gelu tanh", lambda: activation.gelu(x, "tanh")),
        ("core _gelu_backward", lambda: activation._gelu_backward(g, x)),
        ("core _gelu_backward tanh", lambda: activation._gelu_backward(g, x, "tanh")),
        ("core sigmoid", lambda: ember.sigmoid(x)),
        ("core _sigmoid_backward", lambda: pointwise._sigmoid_backward(g, x)),
        ("core _tanh_backward", lambda: pointwise._tanh_backward(g, x)), ("core silu", lambda: activation.silu(x)),
        ("core _silu_backward", lambda: activation._silu_backward(g, x)),
        ("core softplus", lambda: activation.softplus(x)),
        ("core _softplus_backward", lambda: activation._softplus_backward(g, x)),
        ("core softmax", lambda: ember.softmax(rows, -1)), ("core log_softmax", lambda: ember.log_softmax(rows, -1)),
        ("core softmax backward", lambda: activation._rows_vjp("softmax_backward_rows_f32", grows, sm, -1, sm.dtype)),
        ("core log_softmax backward",
         lambda: activation._rows_vjp("log_softmax_backward_rows_f32", grows, lsm, -1, lsm.dtype)),
        ("core layer_norm", lambda: ember.layer_norm(rows, (8,), w, b)),
        ("core layer_norm backward", lambda: normalization._layer_norm_rows_vjp(grows, rows, w, b, 1e-5)),
        ("core pow 3", lambda: x ** 3), ("core pow -1", lambda: g ** -1), ("core pow -2", lambda: g ** -2.0),
    ]


def calls(ember, size, dtype):
    """(name, thunk) for every function of ember.special and ember-core's loop functions on ``size`` elements of
    ``dtype``."""
    data = {k: ember.from_numpy(v.astype(dtype)) for k, v in _inputs(size, dtype).items()}
    special = ember.special
    out = core_calls(ember, data)
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

    def recording_loop(*args, **kwargs):
        f = loop(*args, **kwargs)
        asked.append(f is not None)
        return f
    _jit.loop = recording_loop
    jit_free, asking = set(), set()
    for dtype in ("float32", "float64"):
        for name, call in calls(ember, LARGE, dtype):
            del asked[:]
            call()
            if not all(asked):
                jit_free.add(name)
            if asked:
                asking.add(name)
    run("warm")
    report["jit_free"] = sorted(jit_free)
    report["asked"] = sorted(asking)
    report["failed"] = sorted(name for _, name, _ in _jit._failed)
    report["ready"] = len(_jit._ready)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
